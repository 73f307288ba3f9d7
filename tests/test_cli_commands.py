"""`kafka-audit replay-check` and `kafka-audit audit` as scripts call them: real subprocesses,
exit codes that gate, JSON out, one clear line for bad input. replay-check runs against a real
broker that deleted old data itself, in disk mode and in protocol mode. The audit-and-rerender
test runs its two commands through ``auditor.cli.main`` in the process (the exit code and output
a script gets are main's; a subprocess importing the audit stack twice took 32 s at load 15-20),
``--json -`` stays a subprocess: it is about the stdout/stderr split a pipe sees."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.cli import kafka_audit, kafka_audit_in_process
from harness.groups import wait_segments_below_log_start_deleted
from harness.scenarios import make_retention_gap
from harness.realdata import LOG_DIRS

# subprocess and in-process audits: 11 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = pytest.mark.schedule_first(cpu_s=11)

DAY = 86_400_000


@pytest.fixture(scope="module")
def gap_cluster(kafka_cluster_factory):
    """One topic whose first 7 days of data the broker deleted (retention.ms = 3.5 days)."""
    cluster = kafka_cluster_factory(brokers=1, broker_config={"log.retention.check.interval.ms": "1000"})
    now = make_retention_gap(cluster, "history")
    # make_retention_gap waits for the broker's log start (70); the broker raises it before it
    # renames the segments below it to .deleted, and disk mode reads those files
    wait_segments_below_log_start_deleted(cluster, "history", 0, 70)
    return cluster, now


@pytest.mark.live
def test_replay_check_disk_mode_unsafe_before_the_retained_data(gap_cluster):
    cluster, now = gap_cluster
    proc = kafka_audit("replay-check", "--topic", "history", "--at", now - 5 * DAY, "--log-dir", cluster.log_dirs(1)[0],
                       "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["safe"] is False and doc["mode"] == "disk"
    (p,) = doc["partitions"]
    assert p["severity"] == "FAIL" and "oldest retained record" in p["message"]
    assert p["evidence"][0]["modern_offset"] == cluster.offsets_for_times("history", 0, now - 5 * DAY) == 70


@pytest.mark.live
def test_replay_check_disk_mode_safe_and_legacy_judged(gap_cluster):
    cluster, now = gap_cluster
    target = now - 2 * DAY + 5
    modern = kafka_audit("replay-check", "--topic", "history", "--at", target, "--log-dir", cluster.log_dirs(1)[0],
                         "--api", "modern")
    assert modern.returncode == 0, modern.stdout + modern.stderr
    assert "safe: replay of history" in modern.stdout
    # every .log was written minutes ago: the legacy (v0) lookup answers nothing for two days back
    both = kafka_audit("replay-check", "--topic", "history", "--at", target, "--log-dir", cluster.log_dirs(1)[0])
    assert both.returncode == 1 and "legacy (v0) lookup answers an empty list" in both.stdout
    assert "UNSAFE" in both.stdout


@pytest.mark.live
def test_replay_check_protocol_mode(gap_cluster):
    cluster, now = gap_cluster
    unsafe = kafka_audit("replay-check", "--topic", "history", "--at", now - 5 * DAY,
                         "--bootstrap-server", cluster.bootstrap_servers, "--json")
    assert unsafe.returncode == 1, unsafe.stderr
    (p,) = json.loads(unsafe.stdout)["partitions"]
    assert p["evidence"][0]["log_start_offset"] == 70 and p["evidence"][0]["modern_offset"] == 70
    safe = kafka_audit("replay-check", "--topic", "history", "--at", now - 2 * DAY + 5,
                       "--bootstrap-server", cluster.bootstrap_servers, "--json")
    assert safe.returncode == 0, safe.stdout + safe.stderr
    after = kafka_audit("replay-check", "--topic", "history", "--at", "+1d", "--bootstrap-server", cluster.bootstrap_servers)
    assert after.returncode == 1 and "the broker answers -1" in after.stdout


@pytest.mark.recorded
def test_replay_check_bad_input_is_one_line():
    for args, text in ((["--at", "2024-05-01T00:00:00"], "has no zone"), (["--at", "yesterday"], "not understood")):
        proc = kafka_audit("replay-check", "--topic", "t", *args, "--log-dir", LOG_DIRS[0])
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and text in proc.stderr, proc.stderr
    proc = kafka_audit("replay-check", "--topic", "no-such-topic", "--at=-1h", "--log-dir", LOG_DIRS[0])
    assert proc.returncode == 3 and "no partition of no-such-topic" in proc.stderr


@pytest.mark.recorded
def test_replay_check_bad_config_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "audit.yaml"
    bad.write_text("checks:\n  nope.check: {}\n")
    for who in (("--topic", "t"), ("--group", "g")):
        for config, text in ((bad, "unknown check 'nope.check'"), (tmp_path / "absent.yaml", "cannot read the config")):
            proc = kafka_audit("replay-check", *who, "--at=-1h", "--log-dir", LOG_DIRS[0], "--config", config)
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and text in proc.stderr, proc.stderr


@pytest.mark.recorded
def test_audit_exit_codes_json_and_rerender(tmp_path):
    config = tmp_path / "audit.yaml"
    config.write_text("fail_on: WARN\nchecks:\n  skew.broker_disk: {min_bytes: 0}\n")
    args = ["audit", *[a for d in LOG_DIRS for a in ("--log-dir", d)], "--config", config, "--out", tmp_path / "r.html",
            "--json", tmp_path / "f.json", "--history", tmp_path / "history"]
    proc = kafka_audit_in_process(*args)
    doc = json.loads((tmp_path / "f.json").read_text())
    assert doc["verdict"] == "WARN" and doc["fail_on"] == "WARN"
    assert proc.returncode == 1 and doc["exit_code"] == 1, proc.stderr[-3000:]
    assert proc.stdout.startswith("verdict WARN (exit 1, fails at WARN)")
    # the findings from WARN up as a table: header, then one row per finding with code and location
    table = proc.stdout.split("\n\n", 1)[1].splitlines()
    assert table[0].split() == ["SEVERITY", "CODE", "WHERE", "FINDING"]
    warn = [f for f in doc["findings"] if f["severity"] in ("WARN", "FAIL")]
    assert len(table) == 1 + len(warn) and all(row.split()[:2] == [f["severity"], f["code"]]
                                               for row, f in zip(table[1:], warn))
    assert len(list((tmp_path / "history").glob("run-*.parquet"))) == 1
    rerender = kafka_audit_in_process("report", tmp_path / "f.json", "--out", tmp_path / "again.html",
                                      "--history", tmp_path / "history")
    assert rerender.returncode == 0 and (tmp_path / "again.html").stat().st_size > 10_000


@pytest.mark.recorded
def test_audit_json_to_stdout(tmp_path):
    """--json -: stdout is the JSON alone (for jq and pipes); the table goes to stderr."""
    proc = kafka_audit("audit", *[a for d in LOG_DIRS for a in ("--log-dir", d)], "--json", "-", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["tool"] == "kafka-log-auditor" and doc["exit_code"] == 0 and doc["totals"]["segments"] > 0
    assert f"\nverdict {doc['verdict']} (exit 0, fails at FAIL)" in "\n" + proc.stderr


@pytest.mark.recorded
def test_audit_bad_config_is_one_line_and_exit_2(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("checks:\n  skew.partition_size: {warn_ratio: -1}\n")
    proc = kafka_audit("audit", "--log-dir", LOG_DIRS[0], "--config", config, "--out", tmp_path / "r.html")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("kafka-audit: error: ")
    assert "checks.skew.partition_size.warn_ratio: -1.0 breaks the rule > 0" in proc.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.recorded
def test_top_level_help_from_the_summaries_equals_the_full_parsers_and_imports_no_command():
    """``kafka-audit --help`` is answered from COMMANDS' one-line summaries: the same text as the
    parser every command module registers itself, without importing any of them."""

    from auditor.cli import COMMANDS, build_parser
    assert build_parser(summary=True).format_help() == build_parser().format_help()
    probe = ("import sys; from auditor.cli import main\n"
             "try:\n    main(['--help'])\nexcept SystemExit as e:\n    code = e.code\n"
             "print(code, sorted(m for m in sys.modules if m.startswith('auditor.cli.') and m != 'auditor.cli.common'))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split("\n")[-2] == "0 []", proc.stdout[-500:] + proc.stderr[-2000:]
    for name, (module, _help) in COMMANDS.items():
        assert f"\n    {name}" in proc.stdout, name

