"""reports.metrics, the pure part: names, types, HELP, escaping, statuses, caps, the per-topic
gauges, the atomic writer and the CLI's --metrics (no broker, no servers; promtool, the
Prometheus project's own linter, checks the text). The real scrape is in
tests/test_metrics_prometheus.py."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path

import pytest

from reports import metrics
from auditor.cli import main
from harness.prometheus import PROMTOOL_BIN, require

# promtool runs: 1.5 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=1.5)]

AUDIT_MS = 1_800_000_000_000
NAME = re.compile(r"^kafka_audit_[a-z][a-z0-9_]*$")
SAMPLE = re.compile(r'^(?P<name>[a-z_][a-z0-9_]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def stat(topic, partition, size, broker=1, oldest=None, kind="live"):
    return {"broker_id": broker, "log_dir": f"/d{broker}", "topic": topic, "partition": partition, "dir_kind": kind,
            "size_bytes": size, "oldest_record_timestamp_ms": oldest}


def finding(check, severity, topic=None, partition=None, **extra):
    return {"code": "KLA999", "check": check, "severity": severity, "topic": topic, "partition": partition,
            "evidence": [], **extra}


def document(findings=(), stats=(), **extra) -> dict:
    return {"version": "0.1.0", "as_of_ms": AUDIT_MS, "elapsed_s": 12.5, "exit_code": 1, "fail_on": "FAIL",
            "engine": {"name": "local"}, "inputs": {"depth": "headers"},
            "totals": {"brokers": 2, "log_dirs": 2, "topics": 2, "partitions": 4, "segments": 40,
                       "size_bytes": 123_456_789},
            "check_titles": {"skew.partition_size": "skew", "groups.time_to_loss": "ttl", "replay.safety": "replay"},
            "findings": list(findings), "tables": {"replica_stats": list(stats)}, **extra}


def parse(text: str) -> dict:
    """{name: {"help", "type", "samples": [(labels dict, value text)]}}; asserts the layout."""
    families: dict = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, help_text = line[7:].split(" ", 1)
            assert name not in families, f"{name} declared twice"
            families[name] = {"help": help_text, "type": None, "samples": []}
        elif line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            assert families[name]["type"] is None and not families[name]["samples"]
            families[name]["type"] = kind
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            fam = families[m["name"]]   # HELP came first
            labels = {k: v for k, v in LABEL.findall(m["labels"] or "")}
            fam["samples"].append((labels, m["value"]))
    return families


def values(families, name, *keys) -> dict:
    return {tuple(l[k] for k in keys): v for l, v in families[name]["samples"]}


def test_names_types_help_and_units():
    doc = document([finding("skew.partition_size", "FAIL", "clicks", 1)],
                   [stat("clicks", 0, 100, oldest=AUDIT_MS - 5000), stat("clicks", 1, 1000)])
    text = metrics.render(doc)
    fams = parse(text)
    assert text.endswith("\n") and "\n\n" not in text
    for name, fam in fams.items():
        assert NAME.match(name), name
        assert fam["type"] == "gauge", name             # each run replaces the file: nothing is a counter
        assert not name.endswith("_total"), name
        assert fam["help"] and fam["samples"], name
        assert not re.search(r"_(ms|milliseconds|kilobytes|mib|percent)$", name), name   # base units only
        for labels, value in fam["samples"]:
            float(value)                                 # a number, no timestamp after it
    assert set(fams) >= {"kafka_audit_run_timestamp_seconds", "kafka_audit_run_duration_seconds",
                         "kafka_audit_run_success", "kafka_audit_audited_segments", "kafka_audit_audited_bytes",
                         "kafka_audit_findings", "kafka_audit_topic_partition_skew_ratio",
                         "kafka_audit_topic_oldest_record_age_seconds", "kafka_audit_topic_size_bytes"}
    assert values(fams, "kafka_audit_run_timestamp_seconds") == {(): "1800000000"}
    assert values(fams, "kafka_audit_run_duration_seconds") == {(): "12.5"}
    assert values(fams, "kafka_audit_run_success") == {(): "1"}
    assert values(fams, "kafka_audit_audited_bytes") == {(): "123456789"}
    assert values(fams, "kafka_audit_run_info", "version", "engine", "depth") == {("0.1.0", "local", "headers"): "1"}


def test_promtool_accepts_the_text():
    """The Prometheus project's linter on a document with odd label values and an infinite ratio."""
    odd = 'a"b\\c\nd'
    doc = document([finding("skew.partition_size", "FAIL", odd, 0), finding("replay.safety", "WARN", odd, 1)],
                   [stat(odd, 0, 10), stat(odd, 1, 0), stat(odd, 2, 0), stat("t", 0, 5, oldest=AUDIT_MS)])
    text = metrics.render(doc)
    assert "+Inf" in text
    proc = subprocess.run([str(require(PROMTOOL_BIN)), "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


def test_label_values_and_help_are_escaped():
    assert metrics.escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert metrics.escape_help('x\\y\nz "q"') == 'x\\\\y\\nz "q"'
    text = metrics.render(document([finding("skew.partition_size", "WARN", 'q"t', 2)], [stat('q"t', 2, 7)]))
    assert 'kafka_audit_partition_findings{topic="q\\"t",partition="2",severity="WARN"} 1' in text.splitlines()


def test_findings_without_history_are_untracked_and_zero_filled():
    doc = document([finding("skew.partition_size", "FAIL", "a", 0), finding("skew.partition_size", "FAIL", "b", 0),
                    finding("replay.safety", "PASS")])
    fams = parse(metrics.render(doc))
    got = values(fams, "kafka_audit_findings", "check", "severity", "status")
    assert {k[2] for k in got} == {"untracked", "accepted"}   # new/persisting cannot be known without a history
    assert got[("skew.partition_size", "FAIL", "untracked")] == "2"
    assert got[("replay.safety", "PASS", "untracked")] == "1"
    assert got[("groups.time_to_loss", "WARN", "untracked")] == "0"   # zeros for every check and severity
    assert len(got) == 3 * 4 * 2
    assert sum(int(v) for v in got.values()) == 3
    assert "kafka_audit_resolved_findings" not in fams


def test_findings_by_status_accepted_and_resolved():
    doc = document(
        [finding("skew.partition_size", "FAIL", "a", 0, status="new"),
         finding("skew.partition_size", "WARN", "b", 0, status="persisting"),
         finding("replay.safety", "FAIL", "c", 0, status="worsened"),
         finding("replay.safety", "WARN", "c", 1, status="someday")],
        accepted=[finding("skew.partition_size", "WARN", "d", 0, status="persisting", acceptance={"reason": "r"})],
        resolved=[finding("replay.safety", "WARN", "e", 0), finding("replay.safety", "FAIL", "e", 1),
                  finding("metadata.stray_dir", "INFO")])
    fams = parse(metrics.render(doc))
    got = values(fams, "kafka_audit_findings", "check", "severity", "status")
    nonzero = {k: v for k, v in got.items() if v != "0"}
    assert nonzero == {("skew.partition_size", "FAIL", "new"): "1", ("skew.partition_size", "WARN", "persisting"): "1",
                       ("replay.safety", "FAIL", "worsened"): "1", ("replay.safety", "WARN", "other"): "1",
                       ("skew.partition_size", "WARN", "accepted"): "1"}
    assert {k[2] for k in got} == {"new", "worsened", "persisting", "accepted", "other"}
    assert ("groups.time_to_loss", "FAIL", "new") in got           # zero-filled for alerts on "new"
    resolved = values(fams, "kafka_audit_resolved_findings", "check")
    assert resolved == {("groups.time_to_loss",): "0", ("metadata.stray_dir",): "1", ("replay.safety",): "2",
                        ("skew.partition_size",): "0"}
    # an accepted finding's partition is lived with: no per-partition series for it
    assert ("d", "0") not in values(fams, "kafka_audit_partition_findings", "topic", "partition")


def test_an_empty_resolved_list_marks_a_tracked_run():
    fams = parse(metrics.render(document([], resolved=[])))
    assert {k[2] for k in values(fams, "kafka_audit_findings", "check", "severity", "status")} == {
        "new", "worsened", "persisting", "accepted"}
    assert set(values(fams, "kafka_audit_resolved_findings", "check").values()) == {"0"}


def test_topic_gauges_skew_age_bytes_by_tier_and_time_to_loss():
    stats = [stat("clicks", 0, 100, 1, AUDIT_MS - 60_000), stat("clicks", 0, 90, 2, AUDIT_MS - 50_000),
             stat("clicks", 1, 100, 1), stat("clicks", 2, 1000, 2, AUDIT_MS - 3_600_000),
             stat("clicks", 2, 10, 3, kind="future"),            # not live: not counted
             stat("idle", 0, 0), stat("idle", 1, 0), stat("lone", 0, 0), stat("lone", 1, 0), stat("lone", 2, 50)]
    ttl = finding("groups.time_to_loss", "WARN", "clicks", 0, evidence=[
        {"group": "g", "time_to_loss_ms": 7_200_000}, {"group": "g", "time_to_loss_ms": 9_000_000}])
    overdue = finding("groups.time_to_loss", "FAIL", "clicks", 1, evidence=[{"group": "h", "time_to_loss_ms": 0}])
    remote = [finding("replay.safety", "PASS", "clicks", 0, evidence=[{"remote_bytes": 4000}, {"remote_bytes": 4000}]),
              finding("replay.safety", "PASS", "clicks", 1, evidence=[{"remote_bytes": None}]),
              finding("replay.safety", "PASS", "clicks", 2, evidence=[{"remote_bytes": 500}])]
    fams = parse(metrics.render(document([ttl, *remote], stats, accepted=[overdue])))
    assert values(fams, "kafka_audit_topic_partition_skew_ratio", "topic") == {
        ("clicks",): "10", ("lone",): "+Inf"}                    # idle: all empty, no ratio to tell
    assert values(fams, "kafka_audit_topic_oldest_record_age_seconds", "topic") == {("clicks",): "3600"}
    assert values(fams, "kafka_audit_topic_size_bytes", "topic", "tier") == {
        ("clicks", "local"): "1290", ("clicks", "remote"): "4500", ("idle", "local"): "0", ("lone", "local"): "50"}
    # the accepted overdue group counts: a measured fact, accepted or not
    assert values(fams, "kafka_audit_topic_time_to_data_loss_seconds", "topic") == {("clicks",): "0"}
    del_accepted = parse(metrics.render(document([ttl], stats)))
    assert values(del_accepted, "kafka_audit_topic_time_to_data_loss_seconds", "topic") == {("clicks",): "7200"}


def test_partition_series_only_for_findings_and_capped_worst_first():
    stats = [stat("t", p, 100 + p) for p in range(10)]
    findings = [finding("replay.safety", "WARN", "t", p) for p in range(10)]
    findings += [finding("skew.partition_size", "FAIL", "t", 7), finding("replay.safety", "INFO", "t", 3),
                 finding("replay.safety", "WARN", "t", 4), finding("skew.partition_size", "PASS", "t", 9),
                 finding("skew.broker_disk", "FAIL")]           # no partition: no partition series
    fams = parse(metrics.render(document(findings, stats), max_partitions=3))
    got = values(fams, "kafka_audit_partition_findings", "topic", "partition", "severity")
    assert got == {("t", "7", "FAIL"): "1", ("t", "7", "WARN"): "1", ("t", "3", "WARN"): "1",
                   ("t", "3", "INFO"): "1", ("t", "4", "WARN"): "2"}
    assert values(fams, "kafka_audit_metrics_dropped_partitions") == {(): "7"}
    assert values(fams, "kafka_audit_partition_size_bytes", "partition") == {("3",): "103", ("4",): "104",
                                                                             ("7",): "107"}
    assert set(values(fams, "kafka_audit_partition_skew_ratio", "partition")) == {("3",), ("4",), ("7",)}
    uncapped = parse(metrics.render(document(findings, stats)))
    assert values(uncapped, "kafka_audit_metrics_dropped_partitions") == {(): "0"}
    assert len({l["partition"] for l, _v in uncapped["kafka_audit_partition_findings"]["samples"]}) == 10


def test_topics_capped_with_findings_first_then_largest():
    stats = [stat(f"t{i}", 0, 1000 * i) for i in range(6)]
    fams = parse(metrics.render(document([finding("replay.safety", "WARN", "t1", 0)], stats), max_topics=3))
    assert set(values(fams, "kafka_audit_topic_size_bytes", "topic")) == {("t1",), ("t5",), ("t4",)}
    assert values(fams, "kafka_audit_metrics_dropped_topics") == {(): "3"}


def test_series_bounded_for_a_large_cluster():
    """50,000 partitions, 5,000 with findings: the series stay within the documented bounds."""
    stats = [stat(f"topic-{t}", p, 1000 + p) for t in range(500) for p in range(100)]
    findings = [finding("replay.safety", "WARN", f"topic-{t}", p) for t in range(500) for p in range(0, 100, 10)]
    fams = parse(metrics.render(document(findings, stats)))
    series = sum(len(f["samples"]) for f in fams.values())
    topic_series = sum(len(f["samples"]) for n, f in fams.items() if n.startswith("kafka_audit_topic_"))
    partitions = {(l["topic"], l["partition"]) for l, _v in fams["kafka_audit_partition_findings"]["samples"]}
    assert len(partitions) == metrics.MAX_PARTITIONS
    assert values(fams, "kafka_audit_metrics_dropped_partitions") == {(): str(5000 - metrics.MAX_PARTITIONS)}
    assert topic_series == 500 * 2                      # skew, local bytes (no timestamps: no age)
    assert series < 500 * 4 + metrics.MAX_PARTITIONS * 3 + 200


def test_values_are_formatted_exactly():
    assert metrics.format_value(3) == "3"
    assert metrics.format_value(2.0) == "2"
    assert metrics.format_value(0.1) == "0.1"
    assert metrics.format_value(math.inf) == "+Inf" and metrics.format_value(-math.inf) == "-Inf"
    assert metrics.format_value(float("nan")) == "NaN"
    assert metrics.format_value(True) == "1"
    assert metrics.format_value(2 ** 62) == str(2 ** 62)   # exact bytes, not a rounded float


def test_failure_text_has_the_run_metrics_only():
    fams = parse(metrics.render_failure(1_800_000_000.5, 3.25, exit_code=2))
    assert {n: values(fams, n) for n in fams} == {
        "kafka_audit_run_timestamp_seconds": {(): "1800000000.5"}, "kafka_audit_run_duration_seconds": {(): "3.25"},
        "kafka_audit_run_success": {(): "0"}, "kafka_audit_run_exit_code": {(): "2"}}
    assert "kafka_audit_run_exit_code" not in parse(metrics.render_failure(1.0, 1.0))


def test_write_atomic_replaces_the_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "textfile" / "kafka_audit.prom"
    metrics.write_textfile(target, "first\n")
    old_umask = os.umask(0o022)
    try:
        metrics.write_textfile(target, "second\n")
    finally:
        os.umask(old_umask)
    assert target.read_text() == "second\n"
    assert (target.stat().st_mode & 0o777) == 0o644      # readable by node_exporter's user
    assert [p.name for p in target.parent.iterdir()] == ["kafka_audit.prom"]
    with pytest.raises(TypeError):                         # a failure while writing: the old file stays
        metrics.write_textfile(target, None)
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["kafka_audit.prom"]
    for bad in ("metrics.txt", ".prom", "kafka_audit.prom.tmp"):
        with pytest.raises(metrics.MetricsPathError, match=r"\*\.prom"):
            metrics.write_textfile(tmp_path / bad, "x\n")


def test_cli_refuses_a_metrics_path_that_is_no_prom_file(tmp_path, capsys):
    code = main(["audit", "--log-dir", str(tmp_path), "--metrics", str(tmp_path / "m.txt")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "m.txt: a metrics file must be named *.prom" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_success_0_when_the_audit_fails(tmp_path, capsys):
    prom = tmp_path / "out" / "kafka_audit.prom"
    code = main(["audit", "--log-dir", str(tmp_path), "--config", str(tmp_path / "missing.yaml"),
                 "--metrics", str(prom)])
    assert code == 2 and "missing.yaml" in capsys.readouterr().err
    fams = parse(prom.read_text())
    assert values(fams, "kafka_audit_run_success") == {(): "0"}
    assert values(fams, "kafka_audit_run_exit_code") == {(): "2"}
    assert "kafka_audit_findings" not in fams


def test_constant_labels_on_every_series_and_checked():
    doc = document([finding("skew.partition_size", "FAIL", "t", 0)], [stat("t", 0, 5)])
    for text in (metrics.render(doc, const_labels={"cluster": 'p"1'}),
                 metrics.render_failure(1.0, 2.0, 2, const_labels={"cluster": 'p"1'})):
        samples = [line for line in text.splitlines() if not line.startswith("#")]
        first_label = re.compile(r'^kafka_audit_[a-z_]+\{cluster="p\\"1"[,}]')
        assert samples and all(first_label.match(line) for line in samples), text
    assert metrics.parse_const_label("cluster=prod=eu") == ("cluster", "prod=eu")
    for bad in ("cluster", "1x=a", "__x=a", "topic=a", "job=a", "a-b=c"):
        with pytest.raises(ValueError, match="metrics label"):
            metrics.parse_const_label(bad)


def test_cli_metrics_label_errors_are_one_line_exit_2(tmp_path, capsys):
    for argv, says in ((["--metrics-label", "cluster=a"], "--metrics-label needs --metrics"),
                       (["--metrics", str(tmp_path / "m.prom"), "--metrics-label", "topic=a"], "reserved")):
        assert main(["audit", "--log-dir", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
    assert list(tmp_path.iterdir()) == []


ALERT_RULES = Path(__file__).resolve().parents[1] / "docs" / "kafka-audit-alerts.yml"


def test_example_alert_rules_parse_and_fire(tmp_path):
    """docs/kafka-audit-alerts.yml: `promtool check rules`, then `promtool test rules` with series
    as the metrics file gives them: each alert fires on what it describes and not on the rest."""
    promtool = str(require(PROMTOOL_BIN))
    check = subprocess.run([promtool, "check", "rules", str(ALERT_RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    h = 'instance="h"'
    findings = 'kafka_audit_findings{%s,check="%s",severity="%s",status="%s"}'
    audit_night = {
        "interval": "1m",
        "input_series": [
            {"series": findings % (h, "skew.partition_size", "FAIL", "new"), "values": "1x10"},
            {"series": findings % (h, "replay.safety", "FAIL", "accepted"), "values": "2x10"},
            {"series": findings % (h, "replay.safety", "FAIL", "persisting"), "values": "0x10"},
            {"series": findings % (h, "mtime.reset", "WARN", "new"), "values": "3x10"},
            {"series": f"kafka_audit_run_success{{{h}}}", "values": "0x10"},
            {"series": f'node_textfile_mtime_seconds{{{h},file="/t/kafka-audit.prom"}}', "values": "0x10"},
            {"series": f'kafka_audit_topic_partition_skew_ratio{{{h},topic="clicks"}}', "values": "20x10"},
            {"series": f'kafka_audit_topic_size_bytes{{{h},topic="clicks",tier="local"}}', "values": "2000000000x10"},
            {"series": f'kafka_audit_topic_partition_skew_ratio{{{h},topic="small"}}', "values": "20x10"},
            {"series": f'kafka_audit_topic_size_bytes{{{h},topic="small",tier="local"}}', "values": "1000x10"},
            {"series": f'kafka_audit_topic_partition_skew_ratio{{{h},topic="__consumer_offsets"}}', "values": "99x10"},
            {"series": f'kafka_audit_topic_size_bytes{{{h},topic="__consumer_offsets",tier="local"}}',
             "values": "2000000000x10"},
            {"series": f'kafka_audit_topic_time_to_data_loss_seconds{{{h},topic="orders"}}', "values": "3600x10"},
            {"series": f'kafka_audit_topic_time_to_data_loss_seconds{{{h},topic="idle"}}', "values": "86400x10"},
            {"series": f'kafka_audit_log_dir_seconds_to_full{{{h},broker="1",mount="/data1"}}', "values": "86400x10"},
            {"series": f'kafka_audit_log_dir_seconds_to_full{{{h},broker="2",mount="/data1"}}', "values": "Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf"},
            {"series": f'kafka_audit_log_dir_steady_state_bytes{{{h},broker="1",mount="/data1"}}', "values": "9e12x10"},
            {"series": f'kafka_audit_log_dir_usable_bytes{{{h},broker="1",mount="/data1"}}', "values": "2e12x10"},
            {"series": f'kafka_audit_log_dir_steady_state_bytes{{{h},broker="2",mount="/data1"}}', "values": "1e12x10"},
            {"series": f'kafka_audit_log_dir_usable_bytes{{{h},broker="2",mount="/data1"}}', "values": "2e12x10"},
        ],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "KafkaAuditNewFailFindings", "exp_alerts": [{
                "exp_labels": {"severity": "page", "instance": "h", "check": "skew.partition_size"},
                "exp_annotations": {"summary": "1 new or worsened FAIL finding(s) of skew.partition_size in the "
                                               "last Kafka audit"}}]},
            {"eval_time": "5m", "alertname": "KafkaAuditFailFindings", "exp_alerts": [{
                "exp_labels": {"severity": "ticket", "instance": "h", "check": "skew.partition_size"},
                "exp_annotations": {"summary": "1 FAIL finding(s) of skew.partition_size in the last Kafka audit"}}]},
            {"eval_time": "5m", "alertname": "KafkaAuditRunFailed", "exp_alerts": [{
                "exp_labels": {"severity": "ticket", "instance": "h"},
                "exp_annotations": {"summary": "the last Kafka audit did not finish (exit code in "
                                               "kafka_audit_run_exit_code)"}}]},
            {"eval_time": "5m", "alertname": "KafkaAuditNotRunning", "exp_alerts": []},
            {"eval_time": "5m", "alertname": "KafkaTopicPartitionSkew", "exp_alerts": [{
                "exp_labels": {"severity": "ticket", "instance": "h", "topic": "clicks"},
                "exp_annotations": {"summary": "topic clicks: largest partition 20.0x the median"}}]},
            {"eval_time": "5m", "alertname": "KafkaConsumerGroupLosesUnreadData", "exp_alerts": [{
                "exp_labels": {"severity": "page", "instance": "h", "topic": "orders"},
                "exp_annotations": {"summary": "topic orders: a consumer group loses unread records in 1h 0m 0s"}}]},
            {"eval_time": "5m", "alertname": "KafkaLogDirFillsSoon", "exp_alerts": [{
                "exp_labels": {"severity": "page", "instance": "h", "broker": "1", "mount": "/data1"},
                "exp_annotations": {"summary": "broker 1 /data1: log dir filesystem full in 1d 0h 0m 0s"}}]},
            {"eval_time": "5m", "alertname": "KafkaLogDirSteadyStateOverCapacity", "exp_alerts": [{
                "exp_labels": {"severity": "ticket", "instance": "h", "broker": "1", "mount": "/data1"},
                "exp_annotations": {"summary": "broker 1 /data1: retention keeps more than the filesystem holds"}}]},
        ],
    }
    stale_file = {"interval": "1h", "input_series": [
        {"series": f"kafka_audit_run_success{{{h}}}", "values": "1x40"},
        {"series": f'node_textfile_mtime_seconds{{{h},file="/t/kafka-audit.prom"}}', "values": "0x40"}],
        "alert_rule_test": [
            {"eval_time": "30h", "alertname": "KafkaAuditNotRunning", "exp_alerts": []},
            {"eval_time": "40h", "alertname": "KafkaAuditNotRunning", "exp_alerts": [{
                "exp_labels": {"severity": "ticket", "instance": "h"},
                "exp_annotations": {"summary": "no Kafka audit result for 36 hours"}}]}]}
    no_file = {"interval": "1m", "input_series": [{"series": 'up{instance="h"}', "values": "1x10"}],
               "alert_rule_test": [{"eval_time": "5m", "alertname": "KafkaAuditNotRunning", "exp_alerts": [{
                   "exp_labels": {"severity": "ticket"},
                   "exp_annotations": {"summary": "no Kafka audit result for 36 hours"}}]}]}
    tests = tmp_path / "alerts.test.yml"   # JSON is YAML
    tests.write_text(json.dumps({"rule_files": [str(ALERT_RULES)], "evaluation_interval": "1m",
                                 "tests": [audit_night, stale_file, no_file]}))
    proc = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_time_to_loss_and_remote_bytes_read_the_checks_own_evidence():
    """The gauges read evidence keys of groups.time_to_loss and replay.safety: run the real
    KLA061 on a lagging group (its first unread segment is due in 3 h), and the replay check's
    tiered-storage keys are the ones reports.metrics reads."""
    from auditor.engines.local.checks import run_local
    from auditor.schema import PARTITION_COLUMNS, SEGMENT_COLUMNS, empty_row
    from checks.framework.base import AuditContext
    from checks.framework.config import Config
    from checks.replay.safety import TIER_KEYS

    hour, now = 3_600_000, 1_710_028_800_000          # 2024-03-10T00:00Z
    where = {"broker_id": 1, "cluster_id": "c", "log_dir": "/d", "topic": "t", "partition": 0, "dir_kind": "live",
             "dir_name": "t-0"}
    segments = [{**empty_row(SEGMENT_COLUMNS), **where, "base_offset": base, "last_offset": base + 99,
                 "is_active": active, "log_size_bytes": 1000, "max_timestamp_ms": ts}
                for base, active, ts in ((100, False, now - 7 * 24 * hour + 3 * hour),
                                         (200, False, now - 7 * 24 * hour + 20 * hour), (300, True, now))]
    partitions = [{**empty_row(PARTITION_COLUMNS), **where, "log_start_offset": 100, "log_end_offset": 400}]
    ctx = AuditContext(as_of_ms=now, config=Config({"kafka": {"retention.ms": 7 * 24 * hour}}),
                       group_offsets=({"group": "billing", "topic": "t", "partition": 0, "committed_offset": 120},))
    found = [f.to_dict() for f in run_local(segments, partitions, ctx, names=["groups.time_to_loss"])]
    assert [f["severity"] for f in found if f["check"] == metrics.TIME_TO_LOSS_CHECK] == ["WARN"]
    fams = parse(metrics.render(document(found, [stat("t", 0, 3000)])))
    assert values(fams, "kafka_audit_topic_time_to_data_loss_seconds", "topic") == {("t",): "10800"}
    assert "remote_bytes" in TIER_KEYS
