"""The nightly DAG on manifests in a real S3 server (issue 37), run with ``dag.test()``
(tests/airflow_runner.py, as tests/test_airflow_dags.py runs it): its ``manifests`` param takes an
``s3://`` glob, the input check reads each manifest's age from its ``_complete.json`` there, and
the audit, run by the spark-submit runner (the provider's SparkSubmitOperator, master local[2],
hadoop-aws through ``--jars`` from the plan), reads them through s3a:// with the worker's AWS
environment. The cli runner runs ``kafka-audit audit --engine spark``: that command on s3a:// is
tests/test_s3_spark.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.airflow_home import run_dag
from harness.cli import kafka_audit
from harness.realdata import BROKER_DIRS
from harness.s3proxy import s3_server  # noqa: F401 - the module's S3 server

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]
BROKERS = {"b1": BROKER_DIRS / "kafka-2018-v2" / "kafka-logs",
           "b2": BROKER_DIRS / "kraft-transactional" / "kafka-data"}


@pytest.fixture(scope="module")
def collected(s3_server):  # noqa: F811 - the fixture imported above
    env = s3_server.env()
    for name, log_dir in BROKERS.items():
        res = kafka_audit("collect", "--out", f"s3://audits/m/{name}", log_dir, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
    return s3_server


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory, collected):
    home = tmp_path_factory.mktemp("airflow-home")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(collected.env(), AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "airflow_dags"), SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=str(REPO), PATH=path)
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run([str(airflow), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env


def test_nightly_spark_submit_audits_s3_manifests(airflow_env, tmp_path):
    """runner spark-submit: the provider's SparkSubmitOperator runs spark-submit (the Airflow
    connection spark_default: master local[2]) with hadoop-aws from the plan's --jars; the driver
    it starts reads the manifests through s3a:// with the worker's AWS environment."""
    env = dict(airflow_env, AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}))
    out = tmp_path / "reports"
    result = run_dag(env, "kafka_audit_nightly", {
        "manifests": ["s3://audits/m/*"], "output_dir": str(out), "history_dir": str(tmp_path / "h"),
        "runner": "spark-submit", "state_dir": ""})
    assert result["state"] == "success", result
    assert result["tasks"]["inputs_ready"] == "success" and result["tasks"]["audit_spark_submit"] == "success"
    assert result["tasks"]["audit_cli"] == "skipped"
    doc = json.loads((out / "kafka-audit-latest.json").read_text())
    assert doc["inputs"]["manifests"] == ["s3://audits/m/*"]
    assert doc["totals"]["brokers"] == 2 and doc["totals"]["segments"] > 0
    assert doc["engine"]["name"] == "spark"
    log = (Path(airflow_env["AIRFLOW_HOME"]) / "kafka_audit_nightly.last-run.log").read_text()
    submit = [line for line in log.splitlines() if "spark-submit" in line and "--master local[2]" in line]
    assert submit and "hadoop-aws-" in submit[0], log[-3000:]   # spark-submit's --jars, from the plan


def test_nightly_refuses_s3_manifests_older_than_allowed(airflow_env, tmp_path):
    result = run_dag(airflow_env, "kafka_audit_nightly", {
        "manifests": ["s3://audits/m/*"], "output_dir": str(tmp_path / "out"), "runner": "cli",
        "max_input_age_hours": 0.00001})
    assert result["tasks"]["inputs_ready"] == "failed" and result["tasks"]["plan"] == "upstream_failed", result
    log = (Path(airflow_env["AIRFLOW_HOME"]) / "kafka_audit_nightly.last-run.log").read_text()
    assert "s3://audits/m/b1: collected" in log and "did collect run on that broker?" in log


def test_the_plan_hands_spark_submit_hadoop_aws_for_s3_manifests(airflow_env, tmp_path, monkeypatch):
    for name, value in airflow_env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    from airflow_dags.kafka_audit_operators import plan_audit

    s3 = plan_audit(str(tmp_path / "a"), "spark-submit", manifests=["s3://audits/m/*"])
    assert "hadoop-aws-" in s3["jars"] and "bundle-" in s3["jars"]
    assert all(Path(j).is_file() for j in s3["jars"].split(","))
    assert plan_audit(str(tmp_path / "b"), "spark-submit", manifests=[str(tmp_path)])["jars"] == ""
    given = plan_audit(str(tmp_path / "c"), "spark-submit", manifests=["s3://audits/m/*"],
                       spark_conf={"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.4.2"})
    assert given["jars"] == ""
