"""Pre-replay gate: refuse to start a replay that would silently miss data or crash old clients.

Trigger with config, e.g. ``{"topics": ["orders"], "at": "2024-05-01T00:00:00Z",
"log_dirs": ["/data/kafka"]}`` (or ``manifests`` from ``kafka-audit collect``, or
``bootstrap_server`` for clusters whose disks the worker cannot read; with tiered storage,
``remote_storage_dir`` for exact answers in remote ranges). The ``replay_gate`` task runs ``kafka-audit replay-check``; when unsafe it fails
with the reasons in its log and in XCom (key ``replay_check``), and ``start_replay`` (replace it
with your replay job) never runs. Copy the pattern into your own DAGs with
``airflow_dags.kafka_audit_operators.ReplayCheckOperator``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from airflow_dags.kafka_audit_operators import ReplayCheckOperator, notify_failure
from checks.replay.safety import LOOKUP_APIS

with DAG(
    dag_id="kafka_pre_replay_check",
    description="Gate a Kafka replay on kafka-audit replay-check",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"owner": "platform", "on_failure_callback": notify_failure},
    tags=["kafka", "replay"],
    params={
        "topics": Param(["orders"], type="array", minItems=1),
        "at": Param("-6h", type="string", description="ISO-8601 with zone, epoch ms, or relative (-6h)"),
        "log_dirs": Param([], type="array"),
        "manifests": Param([], type="array"),
        "bootstrap_server": Param("", type="string"),
        "remote_storage_dir": Param("", type="string",
                                    description="tiered storage: LocalTieredStorage's directory, for exact answers "
                                                "in remote ranges (empty: from the remote log metadata alone)"),
        "api": Param("both", enum=list(LOOKUP_APIS)),
        "fail_on": Param("FAIL", enum=["WARN", "FAIL"]),
        "recipients": Param([], type="array"),
    },
    doc_md=__doc__,
) as dag:
    gate = ReplayCheckOperator(
        task_id="replay_gate",
        topics="{{ params.topics | join(',') }}",
        at="{{ params.at }}",
        log_dirs="{{ params.log_dirs | join(',') }}",
        manifests="{{ params.manifests | join(',') }}",
        bootstrap_server="{{ params.bootstrap_server }}",
        remote_storage_dir="{{ params.remote_storage_dir }}",
        api="{{ params.api }}",
        fail_on="{{ params.fail_on }}",
        execution_timeout=timedelta(minutes=15),
    )

    @task
    def start_replay(params=None, ti=None) -> str:
        """Stands for the replay job: it only runs when the gate said safe."""
        verdict = ti.xcom_pull(task_ids="replay_gate", key="replay_check")
        return f"replaying {', '.join(params['topics'])} from {verdict['replay_at_utc']}"

    gate >> start_replay()
