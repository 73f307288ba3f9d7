"""The Airflow DAGs, run for real: Airflow 3 with a migrated sqlite database in a temp
AIRFLOW_HOME, the DAG files loaded by a DagBag, and whole runs with ``dag.test()`` against log
dirs of a real Kafka broker (tests/harness/airflow_runner.py runs each in its own process). The nightly
audit runs both ways: through the Spark provider's SparkSubmitOperator against a real Spark
standalone cluster, and as the CLI task on Spark local."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.airflow_home import airflow_env, run_dag  # noqa: F401 - the module-scoped Airflow home, the DAG runner
from harness.kafka import free_port
from harness.scenarios import make_retention_gap
from harness.spark_standalone import StandaloneSpark

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]
DAY = 86_400_000


@pytest.fixture(scope="module")
def kafka(kafka_cluster_factory):
    """A broker with a hot-key topic and a topic whose old data retention really deleted."""
    cluster = kafka_cluster_factory(brokers=1, broker_config={"log.retention.check.interval.ms": "1000"})
    cluster.create_topic("clicks", partitions=3)
    hot = cluster.produce("clicks", [("hot", os.urandom(300).hex(), None) for _ in range(1500)])
    cluster.produce("clicks", [(f"k{i}", os.urandom(300).hex(), None) for i in range(60)])
    now = make_retention_gap(cluster, "history")
    return cluster, now, Counter(d.partition for d in hot).most_common(1)[0][0]


class MailSink:
    """A real SMTP server on 127.0.0.1 (aiosmtpd) keeping what it receives."""

    def __init__(self):
        self.messages: list = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        from email import message_from_bytes

        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture()
def smtp_server():
    from aiosmtpd.controller import Controller

    sink = MailSink()
    controller = Controller(sink, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield sink, controller.port
    controller.stop()


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory):
    cluster = StandaloneSpark(tmp_path_factory.mktemp("spark-standalone")).start()
    yield cluster
    cluster.stop()


def test_on_fire_fleet_same_findings_on_standalone_spark_as_on_the_driver(spark_standalone, tmp_path):
    """A SYNTHETIC fleet on fire (every partition dir flagged: retention overdue, mtimes reset,
    future timestamps) audited from its manifests on the driver (``--engine local``) and on the
    standalone cluster this module starts (``--engine spark --master``): the same findings,
    finding for finding and in order, as JSON."""
    from harness.on_fire_manifests import on_fire_manifests

    manifests, as_of, shape = on_fire_manifests(tmp_path / "fleet")
    docs = {}
    for engine, extra in (("local", []), ("spark", ["--master", spark_standalone.url, "--conf", "spark.executor.memory=512m",
                                                    "--conf", "spark.cores.max=1"])):
        out = tmp_path / f"{engine}.json"
        proc = subprocess.run([sys.executable, "-m", "auditor.cli", "audit", "--manifest", str(manifests / "*"),
                               "--engine", engine, *extra, "--json", str(out), "--as-of", as_of, "--exit-zero", "--no-progress"],
                              capture_output=True, text=True, cwd=REPO, timeout=900,
                              env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        assert proc.returncode == 0, proc.stderr[-4000:] + ("\n" + spark_standalone.diagnostics() if engine == "spark" else "")
        docs[engine] = json.loads(out.read_text())
    assert docs["spark"]["engine"]["name"] == "spark" and docs["local"]["engine"]["name"] == "local"
    # the capacity checks judge the free space statted at each run (other processes write to this
    # disk between the two) and, with every SYNTHETIC log dir on this machine's one filesystem,
    # name whichever log dir of it comes first (the engines' row orders differ): compared by check
    # alone; every other finding byte for byte
    def split(doc):
        capacity = sorted(f["check"] for f in doc["findings"] if f["check"].startswith("capacity."))
        return [f for f in doc["findings"] if not f["check"].startswith("capacity.")], capacity

    (local, local_capacity), (spark, spark_capacity) = split(docs["local"]), split(docs["spark"])
    assert json.dumps(spark, sort_keys=True) == json.dumps(local, sort_keys=True)
    assert spark_capacity == local_capacity
    problems = [f for f in local if f["severity"] != "PASS"]
    assert len(problems) > shape["partition_dirs"]  # on fire: more findings than partition dirs
    assert {f["code"] for f in problems} >= {"KLA020", "KLA030", "KLA031", "KLA040"}


def test_dagbag_has_both_dags_and_no_import_errors(airflow_env):
    code = ("import json; from airflow.dag_processing.dagbag import DagBag; "
            f"b = DagBag(dag_folder={str(REPO / 'airflow_dags')!r}); "
            "t = b.dags['kafka_audit_nightly'].get_task('audit_spark_submit'); "
            "print(json.dumps({'errors': {str(k): str(v) for k, v in b.import_errors.items()}, 'dags': sorted(b.dags), "
            "'submit': [type(t).__name__, t.application]}))")
    proc = subprocess.run([sys.executable, "-c", code], env=airflow_env, capture_output=True, text=True, timeout=300)
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["errors"] == {} and doc["dags"] == ["kafka_audit_nightly", "kafka_pre_replay_check"]
    # the Spark provider is part of the test setup: the audit task is the real SparkSubmitOperator
    assert doc["submit"][0] == "SparkSubmitOperator" and doc["submit"][1].endswith("auditor/submit_app.py")


def test_nightly_spark_submit_publishes_then_fails_on_a_planted_fail(airflow_env, kafka, spark_standalone, tmp_path):
    """runner spark-submit: the provider's SparkSubmitOperator submits auditor/submit_app.py to a
    real standalone master (the Airflow connection spark_default); its executors scan the dirs."""
    cluster, _, hot = kafka
    master_host, master_port = spark_standalone.url.rsplit(":", 1)
    env = dict(airflow_env, AIRFLOW_CONN_SPARK_DEFAULT=json.dumps(
        {"conn_type": "spark", "host": master_host, "port": int(master_port)}))
    config = tmp_path / "audit.yaml"
    config.write_text("checks:\n  skew.partition_size: {min_topic_bytes: 1000, warn_ratio: 2, fail_ratio: 3}\n")
    out = tmp_path / "reports"
    (out).mkdir()
    (out / "kafka-audit-2000-01-01.html").write_text("an old dated copy")  # pruned: keep = 1
    apps_before = len(spark_standalone.completed_apps())
    result = run_dag(env, "kafka_audit_nightly", {
        "log_dirs": [str(d) for d in cluster.log_dirs(1)], "config_file": str(config), "output_dir": str(out),
        "history_dir": str(tmp_path / "history"), "fail_on": "FAIL", "keep": 1, "runner": "spark-submit",
        "state_dir": str(tmp_path / "state"),
        "spark_conf": {"spark.executor.memory": "512m", "spark.cores.max": "1"}})
    assert result["tasks"] == {"inputs_ready": "success", "plan": "success", "choose_runner": "success",
                               "audit_spark_submit": "success", "audit_cli": "skipped", "audit_result": "success",
                               "publish": "success", "severity_gate": "failed"}, result
    assert result["state"] == "failed"
    doc = json.loads((out / "kafka-audit-latest.json").read_text())
    skew = [f for f in doc["findings"] if f["code"] == "KLA001" and f["severity"] == "FAIL"]
    assert [(f["topic"], f["partition"]) for f in skew] == [("clicks", hot)]
    assert (out / "kafka-audit-latest.html").stat().st_size > 10_000
    dated = sorted(p.name for p in out.glob("kafka-audit-2*.html"))
    assert len(dated) == 1 and dated[0] != "kafka-audit-2000-01-01.html"
    # the audit really ran as an application of the standalone cluster, not in local mode
    apps = spark_standalone.completed_apps(at_least=apps_before + 1)
    assert len(apps) == apps_before + 1 and apps[-1]["name"] == "kafka-log-auditor", spark_standalone.state()


def test_nightly_cli_runner_succeeds_below_the_failing_severity(airflow_env, kafka, tmp_path):
    cluster, _, _ = kafka
    out = tmp_path / "reports"
    result = run_dag(airflow_env, "kafka_audit_nightly", {
        "log_dirs": [str(d) for d in cluster.log_dirs(1)], "output_dir": str(out), "history_dir": str(tmp_path / "h"),
        "fail_on": "FAIL", "spark_master": "local[2]", "runner": "cli", "state_dir": str(tmp_path / "state"),
        "metrics_labels": {"cluster": "nightly"}})
    assert result["state"] == "success", result
    assert result["tasks"]["audit_cli"] == "success" and result["tasks"]["audit_spark_submit"] == "skipped"
    assert json.loads((out / "kafka-audit-latest.json").read_text())["exit_code"] == 0
    # the run's metrics beside the report (docs/metrics.md), with the DAG's labels
    metrics = (out / "kafka-audit.prom").read_text().splitlines()
    assert 'kafka_audit_run_success{cluster="nightly"} 1' in metrics
    assert 'kafka_audit_run_exit_code{cluster="nightly"} 0' in metrics
    # the DAG passes --state: one scan state per log dir for the next night
    assert len(list((tmp_path / "state").glob("*.headers.state"))) == len(cluster.log_dirs(1))


def test_nightly_refuses_missing_inputs_and_mails_the_recipients(airflow_env, smtp_server, tmp_path):
    sink, port = smtp_server
    env = dict(airflow_env, AIRFLOW_CONN_SMTP_DEFAULT=json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port,
        "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "kafka-audit@example.org"}}))
    result = run_dag(env, "kafka_audit_nightly", {"log_dirs": [str(tmp_path / "nowhere")],
                                                  "output_dir": str(tmp_path / "out"),
                                                  "recipients": ["kafka-ops@example.org"]})
    assert result["tasks"]["inputs_ready"] == "failed" and result["tasks"]["plan"] == "upstream_failed"
    # the on_failure_callback mailed the failure through Airflow's SMTP notifier
    assert len(sink.messages) == 1, sink.messages
    rcpts, mail = sink.messages[0]
    assert rcpts == ["kafka-ops@example.org"]
    assert mail["Subject"].startswith("[kafka-audit] kafka_audit_nightly.inputs_ready failed")
    body = next(part.get_payload(decode=True).decode() for part in mail.walk() if part.get_content_type() == "text/html")
    assert "not a readable directory" in body and str(tmp_path / "out") in body


def test_pre_replay_gate_blocks_unsafe_and_lets_safe_through(airflow_env, kafka):
    cluster, now, _ = kafka
    base = {"topics": ["history"], "log_dirs": [str(d) for d in cluster.log_dirs(1)], "api": "modern"}
    unsafe = run_dag(airflow_env, "kafka_pre_replay_check", {**base, "at": str(now - 5 * DAY)})
    assert unsafe["tasks"] == {"replay_gate": "failed", "start_replay": "upstream_failed"}, unsafe
    verdict = unsafe["xcom"]["replay_gate.replay_check"]
    assert verdict["safe"] is False and "oldest retained record" in verdict["partitions"][0]["message"]
    safe = run_dag(airflow_env, "kafka_pre_replay_check", {**base, "at": str(now - 2 * DAY + 5)})
    assert safe["tasks"] == {"replay_gate": "success", "start_replay": "success"}, safe
    assert safe["xcom"]["start_replay.return_value"].startswith("replaying history from ")


def test_nightly_gate_on_change_mails_only_the_new_fail(airflow_env, kafka, smtp_server, tmp_path):
    """Two nights into one history with ``fail_on_new`` FAIL: the first has the clicks skew (new,
    FAIL); a skewed topic appears before the second, whose mail lists it alone under "new"
    (clicks persists), then the report. Its topic is too small for the default config the other
    tests of this module audit with, so it changes nothing for them."""
    cluster, _, _ = kafka
    sink, port = smtp_server
    env = dict(airflow_env, AIRFLOW_CONN_SMTP_DEFAULT=json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port,
        "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "kafka-audit@example.org"}}))
    config = tmp_path / "audit.yaml"
    config.write_text("checks:\n  skew.partition_size: {min_topic_bytes: 1000, warn_ratio: 2, fail_ratio: 3}\n")
    out = tmp_path / "reports"
    conf = {"log_dirs": [str(d) for d in cluster.log_dirs(1)], "config_file": str(config), "output_dir": str(out),
            "history_dir": str(tmp_path / "history"), "fail_on_new": "FAIL", "runner": "cli", "spark_master": "",
            "recipients": ["kafka-ops@example.org"]}
    first = run_dag(env, "kafka_audit_nightly", conf)
    assert first["tasks"]["severity_gate"] == "failed", first  # the first night: everything is new
    night1 = json.loads((out / "kafka-audit-latest.json").read_text())
    assert [f["topic"] for f in night1["findings"] if f["severity"] == "FAIL" and f["status"] == "new"] == ["clicks"]
    mails_before = len(sink.messages)

    cluster.create_topic("signups", partitions=3)
    for partition, n in ((0, 600), (1, 30), (2, 30)):
        cluster.produce("signups", [(f"s{i}", "v" * 100, None) for i in range(n)], partition=partition)
    second = run_dag(env, "kafka_audit_nightly", conf)
    assert second["tasks"]["publish"] == "success" and second["tasks"]["severity_gate"] == "failed", second
    night2 = json.loads((out / "kafka-audit-latest.json").read_text())
    assert night2["history"]["previous_run_utc"] == night1["as_of_utc"]
    statuses = {f["topic"]: f["status"] for f in night2["findings"] if f["severity"] == "FAIL"}
    assert statuses == {"clicks": "persisting", "signups": "new"}, statuses
    assert len(sink.messages) == mails_before + 1, sink.messages
    _, mail = sink.messages[-1]
    body = next(part.get_payload(decode=True).decode() for part in mail.walk() if part.get_content_type() == "text/html")
    new_part = body.split("new (", 1)[1].split("worsened (", 1)[0]
    assert new_part.startswith("1):") and new_part.count("FAIL KLA001") == 1 and "signups-0" in new_part, body
    assert "clicks" not in new_part and "worsened (0):" in body
    assert f"report: {out / 'kafka-audit-latest.html'}" in body
