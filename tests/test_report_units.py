"""The HTML report's own bounds, on a made-up findings document (no Spark): a mailed report
lists the worst findings per check up to a cap and says how many more the JSON holds."""

from __future__ import annotations

import pytest
import re

from reports.html import MAX_EVIDENCE_ITEMS, MAX_ROWS_PER_CHECK, render

pytestmark = pytest.mark.unit


def _doc(n: int) -> dict:
    findings = [{"code": "KLA045", "check": "integrity.offset_gap", "severity": "FAIL" if i % 3 == 0 else "WARN",
                 "message": f"gap number {i}", "fix": "f", "broker_id": 1, "log_dir": "/d", "topic": "t", "partition": i,
                 "base_offset": 0, "thresholds": {}, "evidence": [{"offset": j} for j in range(20)], "evidence_count": 40}
                for i in range(n)]
    return {"verdict": "FAIL", "as_of_utc": "2024-01-01T00:00:00.000Z", "as_of_ms": 1704067200000,
            "version": "t", "exit_code": 1, "fail_on": "FAIL", "counts": {"FAIL": n // 3, "WARN": n - n // 3},
            "totals": {"brokers": 1, "log_dirs": 1, "topics": 1, "partitions": n, "partition_dirs": n, "segments": n,
                       "size_bytes": 1}, "inputs": {"log_dirs": [], "manifests": [], "depth": "headers"},
            "versions": {}, "config": {}, "elapsed_s": 1, "expectations": {}, "findings": findings, "tables": {}}


def test_rows_per_check_and_evidence_are_capped_worst_first():
    html = render(_doc(MAX_ROWS_PER_CHECK * 2 + 7))
    rows = re.findall(r'<tr class="finding" data-severity="(\w+)"', html)
    assert len(rows) == MAX_ROWS_PER_CHECK
    assert rows[: (MAX_ROWS_PER_CHECK * 2 + 7 + 2) // 3] == ["FAIL"] * ((MAX_ROWS_PER_CHECK * 2 + 7 + 2) // 3)
    assert f"Showing the {MAX_ROWS_PER_CHECK} worst of {MAX_ROWS_PER_CHECK * 2 + 7}" in html
    assert "40 item(s), first 5" in html and html.count('{&#34;offset&#34;: ') == MAX_EVIDENCE_ITEMS * MAX_ROWS_PER_CHECK


def test_small_documents_are_not_capped():
    html = render(_doc(10))
    assert len(re.findall(r'<tr class="finding"', html)) == 10 and "Showing the" not in html


def test_topic_configs_section_names_every_source(tmp_path):
    """Each audited topic's config with the source the audit's precedence gave it: live cluster >
    metadata log > config file (global or topic block) > Kafka default; the HTML lists all but the
    defaults row by row, and the defaults with how many topics use each."""
    from types import SimpleNamespace

    from checks.framework.config import Config
    from reports.document import topic_config_rows

    cfg = tmp_path / "audit.yaml"
    cfg.write_text("kafka: {segment.ms: 60000}\ntopics:\n  'pay*': {kafka: {retention.bytes: 1024}}\n")
    outcome = SimpleNamespace(
        config=Config.load(cfg),
        tables=SimpleNamespace(stats=[{"topic": "payments"}, {"topic": "orders"}, {"topic": None}]),
        topic_configs={"orders": {"retention.ms": "1000", "message.timestamp.type": "LogAppendTime"}},
        topic_config_sources={"orders": {"retention.ms": "live cluster",
                                         "message.timestamp.type": "metadata log: topic config"}})
    rows = {(r["topic"], r["config"]): (r["value"], r["source"]) for r in topic_config_rows(outcome)}
    assert rows[("orders", "retention.ms")] == ("1000", "live cluster")
    assert rows[("orders", "message.timestamp.type")] == ("LogAppendTime", "metadata log: topic config")
    assert rows[("orders", "segment.ms")] == ("60000", "config file")
    assert rows[("payments", "segment.ms")] == ("60000", "config file")
    assert rows[("payments", "retention.bytes")] == ("1024", "config file")
    assert rows[("orders", "retention.bytes")] == ("-1", "Kafka default")
    assert rows[("payments", "retention.ms")] == ("604800000", "Kafka default")
    assert {t for t, _ in rows} == {"orders", "payments"}
    doc = _doc(1)
    doc["inputs"]["topic_configs"] = topic_config_rows(outcome)
    html = render(doc)
    section = html[html.index('id="topic-configs"'):html.index('id="charts"')]
    shown = re.findall(r'<tr data-source="([^"]+)"><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td></tr>', section)
    assert sorted((t, c, v, s) for _, t, c, v, s in shown) == sorted(
        (t, c, v, s) for (t, c), (v, s) in rows.items() if s != "Kafka default")
    assert "<tr><td>retention.ms</td><td>604800000</td><td class=\"num\">1</td></tr>" in section
    assert "live cluster: 1" in section and "config file: 3" in section


def test_evidence_instants_get_a_utc_twin_and_durations_do_not():
    from auditor.schema import with_utc

    # KLA062's evidence names when the partition's current incarnation was created (an instant);
    # retention_ms beside it is a duration and must stay bare.
    row = with_utc({"created_timestamp_ms": 1704067200000, "retention_ms": 604800000})
    assert row["created_timestamp_utc"] == "2024-01-01T00:00:00.000Z"
    assert "retention_utc" not in row


def test_first_run_says_every_finding_is_new_without_repeating_them():
    """A first run with a history (no earlier run): one line says every finding is new; the
    "New and worsened" table would repeat the findings list. A later run lists them."""
    doc = _doc(30)
    for f in doc["findings"]:
        f.update(status="new", identity=f"KLA045 partition={f['partition']}", first_seen="2024-01-01T00:00:00.000Z",
                 runs_open=1)
    doc.update(since={"new": 30, "worsened": 0, "resolved": 0, "persisting": 0},
               history={"previous_run_utc": None, "runs": 1, "notes": []}, resolved=[], accepted=[])
    html = render(doc)
    assert "every finding is new" in html and 'id="since-changed"' not in html
    assert re.search(r'data-status="new"><b>30</b>', html)
    doc["history"]["previous_run_utc"] = "2023-12-31T00:00:00.000Z"
    html = render(doc)
    assert "every finding is new" not in html and len(re.findall(r'<tr class="since-row" data-status="new"', html)) == 30
