"""Runs one of the project's DAGs with ``dag.test()`` in this process and prints the outcome
as JSON (the run state, each task's state, the replay gate's XCom). Started by
run_dag (tests/harness/airflow_home.py) in a subprocess, with AIRFLOW_HOME pointing at a migrated sqlite
database, so Airflow's configuration and logging stay out of pytest's process.

    python tests/harness/airflow_runner.py DAG_ID '{"param": "value"}'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DAGS = Path(__file__).resolve().parents[2] / "airflow_dags"


def main() -> int:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    dag_id, conf = sys.argv[1], json.loads(sys.argv[2])
    bag = DagBag(dag_folder=str(DAGS))
    if bag.import_errors:
        print(json.dumps({"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}}))
        return 1
    import importlib

    # the DAG object of the module itself (the task SDK's DAG); dag.test() serializes it
    dag = importlib.import_module(f"airflow_dags.{dag_id}").dag
    run = dag.test(run_conf=conf)
    out = {"state": str(run.state), "tasks": {}, "xcom": {}}
    with create_session() as session:
        for ti in run.get_task_instances(session=session):
            out["tasks"][ti.task_id] = str(ti.state)
        rows = session.execute(XComModel.get_many(run_id=run.run_id, dag_ids=dag_id)).scalars().all() \
            if hasattr(XComModel.get_many(run_id=run.run_id, dag_ids=dag_id), "whereclause") else \
            XComModel.get_many(run_id=run.run_id, dag_ids=dag_id, session=session).all()
        for row in rows:
            value = row.value
            try:
                value = XComModel.deserialize_value(row)
            except Exception:  # noqa: BLE001 - keep the raw value
                pass
            out["xcom"][f"{row.task_id}.{row.key}"] = value
    print("AIRFLOW_RUNNER_RESULT " + json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
