"""Since the last run, as pure functions: identity, classification over hand-made finding lists,
the accept file's matching and checks, and the findings history read back (damaged, foreign,
newer, empty)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from auditor.nightly.accept import AcceptFileError, load, mark_stale, split_accepted
from auditor.nightly.identity import PreviousRow, classify, gate_on_change, history_rows, identity_line, identity_of
from auditor.nightly import finding_history as fh
from auditor.nightly.compare import annotate

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
DAY = 86_400_000
T0 = 1_795_000_000_000  # 2026-11-18


def f(code="KLA045", severity="WARN", topic="orders", partition=0, broker=1, log_dir="/d/k1", base=0, check=None, **kw):
    return {"code": code, "check": check or {"KLA045": "integrity.offset_gap", "KLA001": "skew.partition_size",
                                             "KLA050": "integrity.crc", "KLA061": "groups.time_to_loss"}[code],
            "severity": severity, "message": f"{code} at {topic}-{partition}", "topic": topic, "partition": partition,
            "broker_id": broker, "log_dir": log_dir, "base_offset": base, "evidence": kw.pop("evidence", []), **kw}


def ident(x, fields=("topic", "partition", "broker_id", "log_dir")):
    return dict(x, identity=identity_of(x, fields))


def prev(x, first_seen_ms, runs_open=1):
    return PreviousRow(identity=x["identity"], severity=x["severity"], first_seen_ms=first_seen_ms, runs_open=runs_open,
                       check=x["check"], code=x["code"], topic=x["topic"], partition=x["partition"],
                       broker_id=x["broker_id"], log_dir=x["log_dir"])


def test_identity_never_holds_the_base_offset_and_names_declared_evidence():
    a, b = f(base=0), f(base=5000)
    assert identity_of(a, ("topic", "partition", "broker_id", "log_dir")) == \
        identity_of(b, ("topic", "partition", "broker_id", "log_dir")) == "KLA045 topic=orders partition=0 broker=1 log_dir=/d/k1"
    g1 = f("KLA061", evidence=[{"group": "billing"}])
    g2 = f("KLA061", evidence=[{"group": "search"}])
    fields = ("topic", "partition", "broker_id", "log_dir", "evidence.group")
    assert identity_of(g1, fields) != identity_of(g2, fields)
    assert identity_of(g1, fields).endswith("group=billing")
    assert identity_line(fields) == "code + topic, partition, broker, log dir, group"


def test_every_check_identity_is_in_the_docs():
    from checks import REGISTRY

    docs = (REPO / "docs" / "nightly-history.md").read_text()
    for c in REGISTRY.values():
        assert "base_offset" not in c.identity, c.name
        assert f"| {c.code} | {c.name} | {identity_line(c.identity)} |" in docs, c.name


def test_classify_new_worsened_persisting_resolved_with_ages():
    gap, crc, skew, gone = (ident(f()), ident(f("KLA050", "WARN", partition=1)), ident(f("KLA001", "WARN", partition=2)),
                            ident(f(partition=7, severity="FAIL")))
    previous = {x["identity"]: prev(x, T0 - 5 * DAY, 5) for x in (gap, crc, gone)}
    now = T0
    current = [gap, dict(crc, severity="FAIL"), skew, dict(ident(f(partition=7)), severity="PASS")]
    c = classify(current, previous, now)
    by = {x["identity"]: x for x in c.findings}
    assert by[gap["identity"]]["status"] == "persisting" and by[gap["identity"]]["runs_open"] == 6
    assert by[gap["identity"]]["first_seen_ms"] == T0 - 5 * DAY
    assert by[gap["identity"]]["first_seen"] == "2026-11-13T11:06:40.000Z"
    assert by[crc["identity"]]["status"] == "worsened" and by[crc["identity"]]["runs_open"] == 6
    assert by[skew["identity"]]["status"] == "new" and by[skew["identity"]]["first_seen_ms"] == now
    assert by[skew["identity"]]["runs_open"] == 1
    # down to PASS: resolved; the PASS itself is a new PASS, not a persisting problem
    assert [r["identity"] for r in c.resolved] == [gone["identity"]]
    assert c.resolved[0]["now"] == "PASS" and c.resolved[0]["severity_before"] == "FAIL"
    assert by[gone["identity"]]["status"] == "new" and by[gone["identity"]]["runs_open"] == 1
    assert c.counts() == {"new": 1, "worsened": 1, "persisting": 1, "resolved": 1}


def test_severity_down_is_persisting_and_pass_to_problem_is_new():
    x = ident(f(severity="FAIL"))
    c = classify([dict(x, severity="WARN")], {x["identity"]: prev(x, T0 - DAY)}, T0)
    assert c.findings[0]["status"] == "persisting" and not c.resolved
    p = dict(x, severity="PASS")
    c = classify([x], {x["identity"]: prev(p, T0 - DAY, 3)}, T0)
    assert c.findings[0]["status"] == "new" and c.findings[0]["first_seen_ms"] == T0 and not c.resolved


def test_no_previous_run_everything_new_nothing_resolved():
    c = classify([ident(f()), ident(f(partition=3))], None, T0)
    assert {x["status"] for x in c.findings} == {"new"} and c.resolved == []


def test_findings_sharing_an_identity_are_one_row_with_the_worst_severity():
    a, b = ident(f(base=0, severity="WARN")), ident(f(base=900, severity="FAIL"))
    c = classify([a, b], None, T0)
    rows = history_rows(c.findings)
    assert len(rows) == 1 and rows[0]["severity"] == "FAIL"


def test_gate_on_change_lists_new_fails_first_then_worsened():
    a = dict(ident(f(partition=1, severity="FAIL")), status="worsened")
    b = dict(ident(f(partition=2, severity="WARN")), status="new")
    c = dict(ident(f(partition=3, severity="FAIL")), status="new")
    d = dict(ident(f(partition=4, severity="FAIL")), status="persisting")
    assert [x["partition"] for x in gate_on_change([a, b, c, d], "WARN")] == [3, 2, 1]
    assert [x["partition"] for x in gate_on_change([a, b, c, d], "FAIL")] == [3, 1]


def _accept(tmp_path, text, today=dt.date(2026, 11, 20)):
    p = tmp_path / "accept.yaml"
    p.write_text(text)
    return load(str(p), today)


ENTRY = """accept:
  - check: {check}
    topic: "ord*"
    partition: 0
    reason: known gap after a disk swap
    owner: kafka-oncall
    expires: {expires}
"""


def test_accept_matches_by_code_or_name_glob_and_partition(tmp_path):
    for check in ("KLA045", "integrity.offset_gap"):
        acc = _accept(tmp_path, ENTRY.format(check=check, expires="2026-12-01"))
        split = split_accepted([ident(f()), ident(f(partition=1)), ident(f(topic="payments"))], acc, T0)
        assert [x["partition"] for x in split.accepted] == [0]
        assert split.accepted[0]["acceptance"] == {"reason": "known gap after a disk swap", "owner": "kafka-oncall",
                                                   "expires": "2026-12-01", "entry": f"{tmp_path}/accept.yaml:2"}
        assert len(split.findings) == 2 and split.entries[0]["matched"] == 1


def test_accept_expired_at_the_audit_time_brings_findings_back_with_a_note(tmp_path):
    acc = _accept(tmp_path, ENTRY.format(check="KLA045", expires="2026-11-25"))
    audit_at = int(dt.datetime(2026, 11, 25, 3, tzinfo=dt.timezone.utc).timestamp() * 1000)
    split = split_accepted([ident(f())], acc, audit_at)
    assert split.accepted == [] and split.findings[0]["acceptance_expired"]["entry"].endswith("accept.yaml:2")
    assert len(split.notes) == 1 and "accept.yaml:2" in split.notes[0] and "expired on 2026-11-25" in split.notes[0]


@pytest.mark.parametrize("text, line, what", [
    ("accept:\n  - check: KLA045\n    reason: r\n    owner: o\n", 2, "entry has no expires"),
    ("accept:\n  - check: KLA045\n    owner: o\n    expires: 2027-01-01\n", 2, "entry has no reason"),
    ("accept:\n  - check: KLA045\n    reason: r\n    owner: o\n    expires: 2026-11-19\n", 2, "expired on 2026-11-19"),
    ("accept:\n  - check: KLA999\n    reason: r\n    owner: o\n    expires: 2027-01-01\n", 2, "no check named or coded"),
    ("accept:\n  - check: KLA045\n    reason: r\n    owner: o\n    expires: 2027-01-01\n    topics: x\n", 2, "unknown key 'topics'"),
    ("accept:\n  - check: KLA045\n    reason: [unclosed\n", 4, "not valid YAML"),
    ("accept:\n  - check: KLA045\n    reason: r\n    owner: o\n    expires: 2027-02-30\n", 5, "day is out of range"),
])
def test_accept_file_problems_name_the_line(tmp_path, text, line, what):
    with pytest.raises(AcceptFileError) as exc:
        _accept(tmp_path, text)
    assert re.match(rf"^{re.escape(str(tmp_path))}/accept\.yaml:{line}: .*{re.escape(what)}", str(exc.value)), str(exc.value)
    assert "\n" not in str(exc.value)


def test_stale_after_n_unmatched_runs():
    entries = [{"entry": "a.yaml:2", "key": "K", "matched": 0}]
    assert mark_stale(entries, {"K": 1}, 3) == [] and entries[0]["runs_unmatched"] == 2
    entries = [{"entry": "a.yaml:2", "key": "K", "matched": 0}]
    notes = mark_stale(entries, {"K": 2}, 3)
    assert entries[0]["stale"] and "a.yaml:2" in notes[0] and "3 run(s)" in notes[0]


def _doc(findings, at=T0, fail_on="FAIL"):
    return {"as_of_ms": at, "fail_on": fail_on, "findings": findings, "verdict": "PASS", "exit_code": 0,
            "counts": {}}


def test_history_round_trip_and_two_runs(tmp_path):
    lookup = lambda name: None  # noqa: E731 - default identity fields
    hd = tmp_path / "history"
    previous = fh.read_previous(hd, T0)
    assert previous.findings is None and "does not exist" in previous.notes[0]
    doc, rows, entries = annotate(_doc([f(), f(partition=1, severity="FAIL")]), previous, None, lookup=lookup)
    assert doc["since"] == {"new": 2, "worsened": 0, "persisting": 0, "resolved": 0} and doc["exit_code"] == 1
    fh.append(hd, T0, rows, entries)
    previous = fh.read_previous(hd, T0 + DAY)
    assert previous.as_of_ms == T0 and previous.runs == 1 and len(previous.findings) == 2
    doc, rows, _ = annotate(_doc([f(), f(partition=2)], at=T0 + DAY), previous, None, fail_on_new="WARN", lookup=lookup)
    assert doc["since"] == {"new": 1, "worsened": 0, "persisting": 1, "resolved": 1}
    assert [r["partition"] for r in doc["resolved"]] == [1]
    old = next(x for x in doc["findings"] if x["partition"] == 0)
    assert old["runs_open"] == 2 and old["first_seen_ms"] == T0 and doc["exit_code"] == 1  # the new WARN trips it
    assert doc["history"]["previous_run_utc"] == "2026-11-18T11:06:40.000Z" and doc["history"]["runs"] == 2


@pytest.mark.parametrize("damage", ["cut", "foreign", "newer", "empty_dir", "no_metadata"])
def test_damaged_history_is_a_note_and_no_previous_run(tmp_path, damage):
    hd = tmp_path / "history"
    hd.mkdir()
    path = fh.append(hd, T0, history_rows(classify([ident(f())], None, T0).findings), [])
    if damage == "cut":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "foreign":
        path.unlink()
        (hd / "notes.txt").write_text("hello")
        (hd / "findings-latest.parquet").write_bytes(b"PAR1 not really")
    elif damage == "newer":
        t = pq.read_table(path)
        path.unlink()
        pq.write_table(t.replace_schema_metadata({fh.FORMAT_KEY: b"99"}), path)
    elif damage == "empty_dir":
        path.unlink()
    elif damage == "no_metadata":
        path.unlink()
        pq.write_table(pa.table({"a": [1]}), path)
    previous = fh.read_previous(hd, T0 + DAY)
    assert previous.findings is None and previous.notes, damage
    doc, _, _ = annotate(_doc([f()], at=T0 + DAY), previous, None, lookup=lambda n: None)
    assert doc["resolved"] == [] and doc["findings"][0]["status"] == "new" and doc["history"]["notes"]
    if damage == "newer":
        assert "newer" in " ".join(doc["history"]["notes"])
    if damage == "foreign":
        assert "notes.txt" in " ".join(doc["history"]["notes"])


def test_a_history_file_of_format_1_still_reads():
    """tests/cases/history holds a findings file written by format 1 (this version's first): any
    later version must read it (add a file per new format beside it)."""
    cases = REPO / "tests" / "cases" / "history"
    previous = fh.read_previous(cases, T0 + DAY)
    assert previous.notes == [] and previous.as_of_ms == T0 and previous.runs == 1
    assert previous.findings["KLA045 topic=orders partition=3 broker=1 log_dir=/data/k1"].severity == "WARN"
    assert previous.findings["KLA001 topic=clicks"].first_seen_ms == T0
    assert previous.unmatched == {"KLA050 topic=payments partition=* broker=*": 2}
