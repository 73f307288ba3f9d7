"""Nightly kafka-log-auditor run: fresh inputs -> audit on Spark -> publish -> gate on severity.

Params (Airflow UI "Trigger DAG w/ config", or Variables through Jinja):
    log_dirs / manifests   broker log dirs readable from the worker, or `kafka-audit collect`
                           manifest locations (a dir or glob per entry)
    runner                 how the audit is launched: spark-submit (a SparkSubmitOperator; master,
                           deploy mode and resources from the Airflow connection spark_default),
                           cli (``kafka-audit audit`` as a subprocess whose Spark driver connects
                           to spark_master), or auto: spark-submit when the Spark provider is
                           installed, else cli
    spark_master           Spark master URL for the cli runner (default local[*])
    spark_conf             Spark settings for the audit's session, either runner
                           (e.g. {"spark.executor.memory": "4g"})
    config_file            audit config (thresholds, per-topic overrides)
    output_dir             where the report and JSON are published (latest + dated copies); each
                           run works in output_dir/runs/<run id>
    history_dir            history of runs (Parquet) for the report's trends
    metrics_file           the run's metrics (Prometheus text, docs/metrics.md), written atomically
                           for node_exporter's textfile collector ('': output_dir/kafka-audit.prom,
                           beside the report)
    metrics_labels         labels on every metric, e.g. {"cluster": "prod"} (several clusters' files
                           in one textfile directory)
    fail_on                severity that fails the run: INFO, WARN or FAIL
    fail_on_new            gate on change instead ('' = off): fail only for findings new or worsened
                           since the previous run (history_dir) at or above this severity; the
                           failure mail lists the new ones first, then the worsened, and the report
    accept_file            accepted findings (YAML, docs/nightly-history.md): their own report
                           section, not counted for the gate until their expiry
    recipients             e-mail addresses notified on failure (SMTP connection smtp_default)
    keep                   dated copies kept in output_dir
    max_input_age_hours    manifests older than this fail the input check

The findings JSON's exit_code decides the gate, after the report is published, so a failing
night still publishes its report.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from airflow_dags.kafka_audit_operators import (
    check_inputs,
    enforce_severity,
    notify_failure,
    plan_audit,
    publish_report,
    read_audit_result,
    run_audit_cli,
    spark_submit_audit,
    spark_submit_available,
)

DEFAULT_ARGS = {
    "owner": "platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=10),
    "retry_exponential_backoff": True,
    "on_failure_callback": notify_failure,
}
AUDIT_TIMEOUT = timedelta(hours=4)

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
        "runner": Param("auto", enum=["auto", "spark-submit", "cli"],
                        description="how the audit is launched: spark-submit, the kafka-audit CLI, or auto"),
        "spark_master": Param("local[*]", type="string", description="Spark master of the cli runner"),
        "spark_conf": Param({}, type="object", description="Spark settings of the audit's session"),
        "config_file": Param("", type="string", description="audit config file (YAML)"),
        "output_dir": Param("/var/lib/kafka-audit/reports", type="string"),
        "history_dir": Param("/var/lib/kafka-audit/history", type="string"),
        "metrics_file": Param("", type="string",
                              description="the run's metrics (*.prom) for node_exporter's textfile collector; "
                                          "'' writes output_dir/kafka-audit.prom"),
        "metrics_labels": Param({}, type="object", description="labels on every metric, e.g. {\"cluster\": \"prod\"}"),
        "state_dir": Param("/var/lib/kafka-audit/scan-state", type="string",
                           description="incremental scans of log_dirs: closed segments read once, then taken from "
                                       "this dir while unchanged ('' reads everything every night)"),
        "fail_on": Param("FAIL", enum=["INFO", "WARN", "FAIL"]),
        "fail_on_new": Param("", enum=["", "INFO", "WARN", "FAIL"],
                             description="gate on change: fail only for new or worsened findings from this severity"),
        "accept_file": Param("", type="string", description="accepted findings (YAML) with reason, owner and expiry"),
        "recipients": Param([], type="array", description="e-mail addresses notified on failure"),
        "keep": Param(30, type="integer", minimum=1),
        "max_input_age_hours": Param(26, type="number"),
    },
    doc_md=__doc__,
) as dag:

    @task(retries=0, execution_timeout=timedelta(minutes=10))
    def inputs_ready(params=None) -> dict:
        return check_inputs(params["log_dirs"], params["manifests"], params["max_input_age_hours"])

    @task(retries=0, execution_timeout=timedelta(minutes=5))
    def plan(ready: dict, params=None, run_id=None) -> dict:
        work = f"{params['output_dir']}/runs/{re.sub(r'[^A-Za-z0-9_.-]', '_', run_id)}"
        return plan_audit(work, params["runner"], log_dirs=ready["log_dirs"], manifests=params["manifests"],
                          spark_master=params["spark_master"], config_file=params["config_file"] or None,
                          history_dir=params["history_dir"], fail_on=params["fail_on"],
                          spark_conf=params["spark_conf"], state_dir=params.get("state_dir") or None,
                          metrics_file=params.get("metrics_file") or f"{params['output_dir']}/kafka-audit.prom",
                          metrics_labels=params.get("metrics_labels") or None,
                          accept_file=params.get("accept_file") or None, fail_on_new=params.get("fail_on_new") or None)

    @task.branch(retries=0)
    def choose_runner(planned: dict) -> str:
        return "audit_spark_submit" if planned["runner"] == "spark-submit" else "audit_cli"

    @task(execution_timeout=AUDIT_TIMEOUT)
    def audit_cli(planned: dict) -> dict:
        import logging

        return run_audit_cli(planned["work_dir"], planned["args"], log=logging.getLogger("airflow.task"))

    if spark_submit_available():
        audit_spark_submit = spark_submit_audit("audit_spark_submit", plan_task_id="plan",
                                                execution_timeout=AUDIT_TIMEOUT)
    else:
        @task(task_id="audit_spark_submit", retries=0)
        def audit_spark_submit_missing() -> None:
            raise AirflowFailException("runner spark-submit needs apache-airflow-providers-apache-spark (>=5.5,<6) "
                                       "installed in Airflow's environment; or set runner to cli")

        audit_spark_submit = audit_spark_submit_missing()

    @task(retries=0, trigger_rule="none_failed_min_one_success")
    def audit_result(planned: dict) -> dict:
        return read_audit_result(planned["work_dir"])

    @task(retries=1, execution_timeout=timedelta(minutes=15))
    def publish(result: dict, params=None, ds=None) -> dict:
        return publish_report(result, params["output_dir"], ds, params["keep"])

    @task(retries=0)
    def severity_gate(result: dict, published: dict) -> dict:
        return enforce_severity(result, published)

    planned = plan(inputs_ready())
    branch = choose_runner(planned)
    result = audit_result(planned)
    branch >> [audit_cli(planned), audit_spark_submit] >> result
    severity_gate(result, publish(result))
