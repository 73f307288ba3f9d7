"""``kafka-audit audit --metrics`` through the real alerting stack: Debian's node_exporter serves
the file with its textfile collector, a real Prometheus scrapes it every second, and the series
Prometheus answers on its HTTP API equal the findings JSON of the same run.

The audit is a real ``kafka-audit audit`` (a subprocess, the local engine) of the bundled demo
sample, log dirs written by real Kafka 4.2 brokers with planted anomalies (auditor/samples). No
broker and no Spark: the module's wall time is the two servers' start (seconds) and three audits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

# live: starts Debian's prometheus and prometheus-node-exporter as processes (fixtures the tier rules cannot tell)
pytestmark = pytest.mark.live

from reports import metrics
from auditor.cli.demo import unpack_demo_sample
from harness.kafka import wait_until
from harness.prometheus import PROMTOOL_BIN, NodeExporter, Prometheus, require

REPO = Path(__file__).resolve().parents[1]
SERIES_TIMEOUT_S = 120   # scrapes every second; generous for load 30


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """node_exporter (textfile collector on a temp dir) and Prometheus scraping it, stopped at the end."""
    work = tmp_path_factory.mktemp("prom-stack")
    exporter = NodeExporter(work / "node_exporter", work / "textfile").start()
    try:
        server = Prometheus(work / "prometheus", [f"127.0.0.1:{exporter.port}"]).start()
    except BaseException:
        exporter.stop()
        raise
    try:
        wait_until(lambda: [h for _u, h in server.target_health()] == ["up"], SERIES_TIMEOUT_S,
                   "Prometheus to scrape node_exporter (target up)")
        yield exporter, server
    finally:
        server.stop()
        exporter.stop()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    log_dirs, meta = unpack_demo_sample(tmp_path_factory.mktemp("demo"))
    return log_dirs, meta


def kafka_audit(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "auditor.cli", "audit", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)


def demo_args(log_dirs, meta) -> list[str]:
    args = [a for d in log_dirs for a in ("--log-dir", str(d))]
    return args + ["--config", str(log_dirs[0].parent / "demo-audit.yaml"), "--as-of", str(meta["made_at_ms"]),
                   "--at", str(meta["replay_at_ms"]), "--topic", ",".join(meta["replay_topics"]),
                   "--engine", "local", "--depth", "deep", "--no-progress"]


def wait_for_run(server: Prometheus, timestamp_s: float, success: int) -> None:
    """Until Prometheus answers this run's timestamp and success (the new file was scraped)."""
    def seen():
        return (server.scalar("kafka_audit_run_timestamp_seconds") == pytest.approx(timestamp_s, abs=1e-3)
                and server.scalar("kafka_audit_run_success") == success)

    wait_until(seen, SERIES_TIMEOUT_S, f"Prometheus to answer the run of {timestamp_s} (success {success})")


def by_labels(server: Prometheus, promql: str, *labels: str) -> dict:
    return {tuple(r["metric"].get(l) for l in labels): float(r["value"][1]) for r in server.query(promql)}


def test_audit_metrics_in_prometheus_equal_the_findings_json(stack, demo, tmp_path):
    exporter, server = stack
    log_dirs, meta = demo
    prom = exporter.textfile_dir / "kafka_audit.prom"
    findings_json = tmp_path / "findings.json"
    proc = kafka_audit(*demo_args(log_dirs, meta), "--json", str(findings_json), "--metrics", str(prom))
    assert proc.returncode == 1, proc.stderr   # the sample's planted FAILs
    doc = json.loads(findings_json.read_text())
    assert doc["findings"] and doc["counts"]["FAIL"] >= 1

    check = subprocess.run([str(require(PROMTOOL_BIN)), "check", "metrics"], input=prom.read_text(),
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout + check.stderr

    wait_for_run(server, doc["as_of_ms"] / 1000, success=1)
    assert server.scalar("node_textfile_scrape_error") == 0, exporter.metrics_text()[-3000:]

    # findings by check, severity and status: this run had no --history, so every finding is untracked
    expected = Counter((f["check"], f["severity"], "untracked") for f in doc["findings"])
    got = by_labels(server, "kafka_audit_findings > 0", "check", "severity", "status")
    assert got == {k: float(v) for k, v in expected.items()}
    assert by_labels(server, "sum by (severity) (kafka_audit_findings)", "severity") == {
        (s,): float(n) for s, n in doc["counts"].items()}
    zero_series = server.query('kafka_audit_findings{status="new"}')
    assert zero_series == []   # no "new" series without a history: unknown, not zero

    for name, key in (("audited_segments", "segments"), ("audited_bytes", "size_bytes"),
                      ("audited_partitions", "partitions"), ("audited_topics", "topics")):
        assert server.scalar(f"kafka_audit_{name}") == doc["totals"][key], name
    assert server.scalar("kafka_audit_run_exit_code") == doc["exit_code"] == 1
    assert server.scalar("kafka_audit_run_duration_seconds") == pytest.approx(doc["elapsed_s"])

    # the planted hot key: the topic's skew equals KLA001's own evidence, the partition is served
    skew = next(f for f in doc["findings"] if f["check"] == "skew.partition_size" and f["severity"] == "FAIL")
    ratio = next(e["ratio_to_median_bytes"] for e in skew["evidence"] if e["partition"] == skew["partition"])
    assert server.scalar(f'kafka_audit_topic_partition_skew_ratio{{topic="{skew["topic"]}"}}') == pytest.approx(
        ratio, abs=1e-3)
    assert by_labels(server, f'kafka_audit_partition_findings{{topic="{skew["topic"]}"}}', "partition", "severity")[
        (str(skew["partition"]), "FAIL")] >= 1
    flagged = {(f["topic"], str(f["partition"])) for f in doc["findings"]
               if f["partition"] is not None and f["severity"] != "PASS"}
    assert set(by_labels(server, "kafka_audit_partition_size_bytes", "topic", "partition")) == flagged

    # per topic: the oldest record's age and the local bytes, from the JSON's partition table
    live = [s for s in doc["tables"]["replica_stats"] if s["dir_kind"] == "live"]
    ages = by_labels(server, "kafka_audit_topic_oldest_record_age_seconds", "topic")
    local = by_labels(server, 'kafka_audit_topic_size_bytes{tier="local"}', "topic")
    assert set(local) == {(s["topic"],) for s in live}
    # no age for a topic without a local record: the sample's tiered topic 'history' holds every
    # record in remote storage only
    assert set(ages) == {(s["topic"],) for s in live if s["oldest_record_timestamp_ms"] is not None} == \
        set(local) - {("history",)}
    for (topic,), age in ages.items():
        oldest = min(s["oldest_record_timestamp_ms"] for s in live
                     if s["topic"] == topic and s["oldest_record_timestamp_ms"] is not None)
        assert age == pytest.approx((doc["as_of_ms"] - oldest) / 1000, abs=1e-3), topic
        assert local[(topic,)] == sum(s["size_bytes"] for s in live if s["topic"] == topic), topic


def test_statuses_and_label_values_survive_node_exporter_and_prometheus(stack):
    """A findings document of a run with --history and accepted findings (issue 22's statuses),
    and escaping proven by the real parsers: a topic name with a quote, a backslash and a line
    feed comes back from Prometheus' API as it went in."""
    exporter, server = stack
    odd = 'we"ird\\topic\nname'
    doc = {"as_of_ms": 1_700_000_000_123, "elapsed_s": 1.5, "exit_code": 0, "check_titles": {"x.y": "X"},
           "findings": [{"check": "x.y", "severity": "WARN", "topic": odd, "partition": 3, "status": "new"},
                        {"check": "x.y", "severity": "WARN", "topic": "b", "partition": 0, "status": "persisting"},
                        {"check": "x.y", "severity": "FAIL", "topic": "b", "partition": 1, "status": "new"}],
           "accepted": [{"check": "x.y", "severity": "FAIL", "topic": "c", "partition": 0, "acceptance": {}}],
           "resolved": [{"check": "x.y", "severity": "WARN", "topic": "d", "partition": 0}] * 2,
           "tables": {"replica_stats": [{"dir_kind": "live", "topic": odd, "partition": 3, "size_bytes": 10,
                                           "oldest_record_timestamp_ms": 1_700_000_000_000}]}}
    metrics.write_textfile(exporter.textfile_dir / "kafka_audit.prom", metrics.render(doc))
    wait_for_run(server, 1_700_000_000.123, success=1)
    assert server.scalar("node_textfile_scrape_error") == 0, exporter.metrics_text()[-3000:]
    assert by_labels(server, "kafka_audit_findings > 0", "severity", "status") == {
        ("WARN", "new"): 1.0, ("WARN", "persisting"): 1.0, ("FAIL", "new"): 1.0, ("FAIL", "accepted"): 1.0}
    assert server.scalar('kafka_audit_findings{check="x.y",severity="FAIL",status="worsened"}') == 0
    assert server.scalar('kafka_audit_resolved_findings{check="x.y"}') == 2
    [series] = server.query('kafka_audit_partition_findings{severity="WARN",topic!="b"}')
    assert series["metric"]["topic"] == odd and series["metric"]["partition"] == "3"
    assert series["value"][1] == "1"


def test_a_failed_audit_reports_success_0(stack, demo):
    exporter, server = stack
    log_dirs, _meta = demo
    prom = exporter.textfile_dir / "kafka_audit.prom"
    before = prom.stat().st_mtime_ns if prom.exists() else None
    proc = kafka_audit(*[a for d in log_dirs for a in ("--log-dir", str(d))], "--config",
                       str(log_dirs[0].parent / "no-such-config.yaml"), "--metrics", str(prom))
    assert proc.returncode == 2 and "no-such-config.yaml" in proc.stderr, proc.stderr
    assert prom.stat().st_mtime_ns != before
    assert [p.name for p in exporter.textfile_dir.iterdir()] == ["kafka_audit.prom"]   # no temp file left
    wait_until(lambda: server.scalar("kafka_audit_run_success") == 0, SERIES_TIMEOUT_S,
               "Prometheus to answer kafka_audit_run_success 0")
    assert server.scalar("kafka_audit_run_exit_code") == 2
    # the failed run's file tells no findings: the last good run's series went stale
    wait_until(lambda: server.query("kafka_audit_findings") == [], SERIES_TIMEOUT_S,
               "the previous run's findings series to go stale")
