"""Nightly kafka-log-auditor run: fresh inputs -> audit on Spark -> publish -> gate on severity.

Params (Airflow UI "Trigger DAG w/ config", or Variables through Jinja):
    log_dirs / manifests   broker log dirs readable from the worker, or `kafka-audit collect`
                           manifest locations (a dir or glob per entry)
    spark_master           Spark master URL (default local[*])
    config_file            audit config (thresholds, per-topic overrides)
    output_dir             where the report and JSON are published (latest + dated copies)
    history_dir            history of runs (Parquet) for the report's trends
    fail_on                severity that fails the run: INFO, WARN or FAIL
    recipients             e-mail addresses notified on failure (SMTP connection smtp_default)
    keep                   dated copies kept in output_dir
    max_input_age_hours    manifests older than this fail the input check

The audit task runs the ``kafka-audit audit`` CLI; its Spark driver runs on the worker and
connects to ``spark_master`` (local, standalone, YARN or Kubernetes masters the worker can reach).
A SparkSubmitOperator variant (driver on the cluster) is not provided yet. The findings JSON's
exit_code decides the gate, after the report is published, so a failing night still publishes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from airflow_dags.kafka_audit_operators import (
    check_inputs,
    enforce_severity,
    notify_failure,
    publish_report,
    run_audit_cli,
)

DEFAULT_ARGS = {
    "owner": "platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=10),
    "retry_exponential_backoff": True,
    "on_failure_callback": notify_failure,
}

with DAG(
    dag_id="kafka_audit_nightly",
    description="Nightly audit of every broker's Kafka log dirs: skew, replay safety, mtime resets, timestamps",
    schedule="30 2 * * *",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=6),
    default_args=DEFAULT_ARGS,
    tags=["kafka", "audit"],
    params={
        "log_dirs": Param([], type="array", description="broker log dirs readable from the worker"),
        "manifests": Param([], type="array", description="manifest dirs or globs from `kafka-audit collect`"),
        "spark_master": Param("local[*]", type="string"),
        "config_file": Param("", type="string", description="audit config file (YAML)"),
        "output_dir": Param("/var/lib/kafka-audit/reports", type="string"),
        "history_dir": Param("/var/lib/kafka-audit/history", type="string"),
        "fail_on": Param("FAIL", enum=["INFO", "WARN", "FAIL"]),
        "recipients": Param([], type="array", description="e-mail addresses notified on failure"),
        "keep": Param(30, type="integer", minimum=1),
        "max_input_age_hours": Param(26, type="number"),
    },
    doc_md=__doc__,
) as dag:

    @task(retries=0, execution_timeout=timedelta(minutes=10))
    def inputs_ready(params=None) -> dict:
        return check_inputs(params["log_dirs"], params["manifests"], params["max_input_age_hours"])

    @task(execution_timeout=timedelta(hours=4))
    def audit(ready: dict, params=None, run_id=None) -> dict:
        import logging
        import re

        work = f"{params['output_dir']}/runs/{re.sub(r'[^A-Za-z0-9_.-]', '_', run_id)}"
        return run_audit_cli(work, ready["log_dirs"], params["manifests"], params["spark_master"],
                             params["config_file"] or None, params["history_dir"], params["fail_on"],
                             log=logging.getLogger("airflow.task"))

    @task(retries=1, execution_timeout=timedelta(minutes=15))
    def publish(result: dict, params=None, ds=None) -> dict:
        return publish_report(result, params["output_dir"], ds, params["keep"])

    @task(retries=0)
    def severity_gate(result: dict, published: dict) -> dict:
        return enforce_severity(result, published)

    ready = inputs_ready()
    result = audit(ready)
    published = publish(result)
    severity_gate(result, published)
