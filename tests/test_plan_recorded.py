"""``kafka-audit plan`` on the bundled demo sample (real Kafka 4.2 broker files, 2 brokers x 2 log dirs):
log dirs and manifests give the same plan, the files are what kafka-reassign-partitions takes,
and the bad inputs of issue 36 answer with one line or a reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.cli.demo import unpack_demo_sample
from harness.cli import kafka_audit_in_process

pytestmark = pytest.mark.recorded


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    log_dirs, _meta = unpack_demo_sample(tmp_path_factory.mktemp("demo"))
    return sorted(str(p) for p in log_dirs)


def dirs_args(dirs):
    return [a for d in dirs for a in ("--log-dir", d)]


def test_plan_files_from_log_dirs_and_from_manifests_agree(sample, tmp_path):
    out, summ, back = tmp_path / "plan.json", tmp_path / "summary.json", tmp_path / "rollback.json"
    r = kafka_audit_in_process("plan", *dirs_args(sample), "--out", out, "--json", summ, "--rollback", back)
    assert r.returncode in (0, 1), r.stderr
    plan, summary, rollback = (json.loads(p.read_text()) for p in (out, summ, back))
    assert plan["version"] == 1 and plan["partitions"]
    for e in plan["partitions"]:
        assert len(e["replicas"]) == len(set(e["replicas"])) == len(e["log_dirs"])
        assert all(d == "any" or d in sample for d in e["log_dirs"])
    assert [(e["topic"], e["partition"]) for e in rollback["partitions"]] == [(e["topic"], e["partition"])
                                                                              for e in plan["partitions"]]
    assert summary["bytes_moved"] == sum(m["size_bytes"] for m in summary["moves"])
    assert summary["capacities_known"] is False
    assert any(n.startswith("every broker is fenced in the metadata log") for n in summary["notes"])
    assert any("headroom was not checked" in n for n in summary["notes"])
    assert "replica moves" in r.stdout and "lower bound" in r.stdout
    if r.returncode == 1:
        assert summary["reasons"] and "target NOT reached" in r.stdout

    manifests = []
    for broker in ("broker1", "broker2"):
        m = tmp_path / f"manifest-{broker}"
        c = kafka_audit_in_process("collect", *[d for d in sample if f"/{broker}-" in d], "--out", m)
        assert c.returncode == 0, c.stderr
        manifests += ["--manifest", m]
    out2, summ2 = tmp_path / "plan-m.json", tmp_path / "summary-m.json"
    r2 = kafka_audit_in_process("plan", *manifests, "--out", out2, "--json", summ2)
    assert r2.returncode == r.returncode, r2.stderr
    assert json.loads(out2.read_text()) == plan


def test_drain_with_rf_equal_to_the_brokers_left_says_why(sample, tmp_path):
    summ = tmp_path / "s.json"
    r = kafka_audit_in_process("plan", *dirs_args(sample), "--drain-broker", "2", "--json", summ)
    s = json.loads(summ.read_text())
    assert any("orders-0: replication factor 2 > 1 broker(s) left after the drain" in n for n in s["notes"])
    assert r.returncode == 1 and any(x.startswith("broker 2 (drained) still holds") for x in s["reasons"])
    assert any("replication factor above the 1 broker(s) left after the drain" in x for x in s["reasons"])


def test_unknown_broker_and_missing_metadata_are_one_line(sample, tmp_path):
    r = kafka_audit_in_process("plan", *dirs_args(sample), "--drain-broker", "9")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such broker" in r.stderr
    no_meta = [d for d in sample if "data-1" in d]      # the metadata log is in data-0
    r = kafka_audit_in_process("plan", *dirs_args(no_meta))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--bootstrap-server" in r.stderr
    r = kafka_audit_in_process("plan", *dirs_args(sample[:2]))      # broker 1's dirs only
    assert r.returncode == 3 and "broker(s) 2" in r.stderr


def test_audit_with_disk_skew_carries_the_plan_and_the_report_shows_it(sample, tmp_path):
    import jsonschema

    from auditor.cli.common import EXIT_OK

    findings, html = tmp_path / "findings.json", tmp_path / "report.html"
    # in this process: the audit command as a subprocess is test_cli_commands::test_audit_json_to_stdout's
    r = kafka_audit_in_process("audit", *dirs_args(sample), "--json", findings, "--out", html, "--exit-zero",
                               "--no-progress", "--engine", "local")
    assert r.returncode == EXIT_OK, r.stderr[-2000:]
    doc = json.loads(findings.read_text())
    schema = json.loads((Path(__file__).resolve().parents[1] / "reports" / "findings.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert [f for f in doc["findings"] if f["code"] == "KLA002" and f["severity"] != "PASS"]
    plan = doc["plan"]
    assert plan["moves"] and plan["moves_total"] == plan["replicas_moved"] >= len(plan["moves"])
    standalone = tmp_path / "s.json"
    kafka_audit_in_process("plan", *dirs_args(sample), "--json", standalone)
    assert plan["bytes_moved"] == json.loads(standalone.read_text())["bytes_moved"]
    text = html.read_text()
    assert 'id="plan"' in text and "kafka-audit plan --log-dir" in text and "kafka-reassign-partitions" in text
    assert any("kafka-audit plan" in f["fix"] for f in doc["findings"] if f["code"] == "KLA002")


def test_capacity_from_disk_reads_the_file_systems(sample, tmp_path):
    summ = tmp_path / "s.json"
    r = kafka_audit_in_process("plan", *dirs_args(sample), "--capacity-from-disk", "--json", summ)
    assert r.returncode in (0, 1), r.stderr
    s = json.loads(summ.read_text())
    assert s["capacities_known"] is True
    assert sorted(d for fs in s["file_systems"] for d in fs["log_dirs"]) == sorted(sample)
    for fs in s["file_systems"]:
        assert fs["capacity_bytes"] > 0 and fs["used_bytes_before"] <= fs["bytes_peak"]
    r = kafka_audit_in_process("plan", "--manifest", tmp_path, "--capacity-from-disk")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    r = kafka_audit_in_process("plan", "--manifest", tmp_path)       # no manifest there: exit 3, one line
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "no manifest" in r.stderr


def test_default_balance_is_the_steady_state_with_both_measures_and_the_fallbacks_said(sample, tmp_path):
    steady, current, shallow = tmp_path / "steady.json", tmp_path / "current.json", tmp_path / "index.json"
    r = kafka_audit_in_process("plan", *dirs_args(sample), "--json", steady)
    assert r.returncode in (0, 1), r.stderr
    kafka_audit_in_process("plan", *dirs_args(sample), "--json", current, "--balance", "current")
    kafka_audit_in_process("plan", *dirs_args(sample), "--json", shallow, "--depth", "index")
    s, c, i = (json.loads(p.read_text()) for p in (steady, current, shallow))
    assert (s["balance"], c["balance"]) == ("steady", "current")
    for doc in (s, c):
        st = doc["steady_state"]
        assert st["replicas"] == 23 and 0 < st["replicas_at_bytes_today"] < st["replicas"]
        assert st["replicas_at_bytes_today"] == sum(f["replicas"] for f in st["fallbacks"])
        assert st["bytes_at_bytes_today"] == sum(f["bytes"] for f in st["fallbacks"])
        for rows in (doc["brokers"], doc["log_dirs"]):
            assert sum(x["bytes_before"] for x in rows) == sum(x["bytes_after"] for x in rows)
            assert sum(x["steady_bytes_before"] for x in rows) == sum(x["steady_bytes_after"] for x in rows)
        balanced = "steady_bytes" if doc is s else "bytes"
        for b in doc["brokers"]:       # x mean is of what was balanced
            assert b["ratio_to_mean_before"] == pytest.approx(b[f"{balanced}_before"] / doc["mean_broker_bytes"], abs=2e-3)
    # the same replicas, the same bytes today; what was balanced differs
    assert [b["bytes_before"] for b in s["brokers"]] == [b["bytes_before"] for b in c["brokers"]]
    assert [b["steady_bytes_before"] for b in s["brokers"]] == [b["steady_bytes_before"] for b in c["brokers"]]
    assert s["mean_broker_bytes"] != c["mean_broker_bytes"]
    assert "at retention steady state" in r.stdout and "weighed at their bytes of today" in r.stdout
    # an index scan has no record counts or first timestamps: fewer rates, more replicas at today's bytes
    assert i["steady_state"]["replicas_at_bytes_today"] >= s["steady_state"]["replicas_at_bytes_today"]
