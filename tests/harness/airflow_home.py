"""Airflow for the DAG tests: a migrated Airflow home and whole DAG runs in it. Import the fixture in
a test module (one home per module, as with every module-scoped fixture):

    from harness.airflow_home import airflow_env, run_dag  # noqa: F401

``airflow_env`` is the environment of a fresh AIRFLOW_HOME (sqlite, ``airflow db migrate`` done, the
repository's airflow_dags/ as the DAGs folder, spark-submit on PATH); ``run_dag(env, dag_id, conf)``
runs one DAG with ``dag.test()`` in a subprocess (tests/harness/airflow_runner.py) and returns its
outcome. (Not named ``airflow.py``: the runner runs as a script from this folder, where such a file
would hide the airflow package.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).parent / "airflow_runner.py"


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-home")
    # spark-submit on the worker's PATH, as a deployment has it (the provider runs it by name)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(os.environ, AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "airflow_dags"), SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=str(REPO), PATH=path)
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run([str(airflow), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env


def run_dag(env, dag_id: str, conf: dict) -> dict:
    proc = subprocess.run([sys.executable, str(RUNNER), dag_id, json.dumps(conf)], env=env, capture_output=True,
                          text=True, timeout=1200, cwd=REPO)
    (Path(env["AIRFLOW_HOME"]) / f"{dag_id}.last-run.log").write_text(proc.stdout + proc.stderr)  # for a failing test
    line = next((l for l in proc.stdout.splitlines() if l.startswith("AIRFLOW_RUNNER_RESULT ")), None)
    assert line, f"dag.test() of {dag_id} did not finish (exit {proc.returncode}): {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    return json.loads(line.split(" ", 1)[1])
