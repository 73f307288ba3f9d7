"""``kafka-audit audit --accept`` and ``--fail-on-new`` as a user runs them, on the demo sample's
real broker log dirs (local engine), one YAML case file per situation (tests/cases/accept/) and
the exit codes that follow. The audits run through ``auditor.cli.main`` in this process (the
function ``python -m auditor.cli`` exits with; about 4 s each instead of 35 s for a subprocess
that imports the whole stack again on a loaded machine); one run is a real subprocess, so the
exit code and the one stderr line are also seen from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

# recorded: whole CLI audits of the demo sample's real log dirs (not the unit lane)
# audits in process: 7 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=7)]

from auditor.cli.demo import unpack_demo_sample
from harness.cli import kafka_audit_in_process

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "cases" / "accept"
SCHEMA = json.loads((REPO / "reports" / "findings.schema.json").read_text())
# the sample's FAILs without a replay target, as of when it was made: skew, a full log dir, and
# group audit-archiver committed below audit-log's log start
DEMO_FAILS = {"KLA001", "KLA002", "KLA060"}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    log_dirs, meta = unpack_demo_sample(tmp_path_factory.mktemp("demo"))
    return log_dirs, meta


def audit(sample, tmp_path, *extra, name="findings.json"):
    log_dirs, meta = sample
    out = tmp_path / name
    args = ["audit", "--engine", "local", "--no-progress", "--json", str(out),
            "--config", str(log_dirs[0].parent / "demo-audit.yaml")]
    for d in log_dirs:
        args += ["--log-dir", str(d)]
    if "--as-of" not in extra:  # the sample's time: its groups' time to data loss runs out a day after it was made
        args += ["--as-of", str(meta["made_at_ms"])]
    proc = kafka_audit_in_process(*args, *extra)
    doc = json.loads(out.read_text()) if out.exists() else None
    if doc is not None:
        jsonschema.validate(doc, SCHEMA)
    return proc, doc


def fails(doc) -> set[str]:
    return {f["code"] for f in doc["findings"] if f["severity"] == "FAIL"}


def test_matched_entries_take_the_fails_out_of_the_gate(sample, tmp_path):
    proc, doc = audit(sample, tmp_path, "--accept", CASES / "matched.yaml")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert fails(doc) == set() and doc["counts"]["FAIL"] == 0 and doc["exit_code"] == 0
    accepted = {(a["code"], a["acceptance"]["entry"].rsplit("/", 1)[1]) for a in doc["accepted"] if a["severity"] == "FAIL"}
    assert accepted == {("KLA001", "matched.yaml:3"), ("KLA002", "matched.yaml:8"), ("KLA060", "matched.yaml:13")}, accepted
    assert all(a["acceptance"]["reason"] and a["acceptance"]["expires"] == "2099-12-31" for a in doc["accepted"])
    assert "accepted finding(s)" in proc.stdout


def test_entries_that_match_nothing_leave_the_exit_code_alone(sample, tmp_path):
    proc, doc = audit(sample, tmp_path, "--accept", CASES / "not_matched.yaml")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert fails(doc) == DEMO_FAILS and doc["accepted"] == []
    assert [e["matched"] for e in doc["acceptance"]["entries"]] == [0, 0]


def test_entries_expired_at_the_audit_time_bring_their_findings_back(sample, tmp_path):
    proc, doc = audit(sample, tmp_path, "--accept", CASES / "expired_at_audit.yaml", "--as-of", "2099-06-01T00:00:00Z")
    assert proc.returncode == 1, proc.stderr[-2000:]
    # by 2099 audit-archiver's unread records are overdue for retention too (KLA061 FAIL)
    assert fails(doc) == DEMO_FAILS | {"KLA061"} and doc["accepted"] == []
    back = [f for f in doc["findings"] if f.get("acceptance_expired")]
    assert {f["code"] for f in back} == {"KLA001", "KLA002"}  # the two the file accepted until 2099-01-01
    notes = " ".join(doc["history"]["notes"])
    assert "expired_at_audit.yaml:3" in notes and "expired_at_audit.yaml:8" in notes and "expired on 2099-01-01" in notes


@pytest.mark.parametrize("case, line, what", [
    ("malformed_no_reason.yaml", 7, "entry has no reason"),
    ("malformed_no_expiry.yaml", 2, "entry has no expires"),
    ("malformed_expired_at_load.yaml", 2, "expired on 2020-01-31"),
    ("malformed_yaml.yaml", 5, "not valid YAML"),
])
def test_a_malformed_accept_file_is_exit_2_with_one_line(sample, tmp_path, case, line, what):
    proc, doc = audit(sample, tmp_path, "--accept", CASES / case)
    assert proc.returncode == 2 and doc is None, proc.stdout[-1000:] + proc.stderr[-1000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{CASES / case}:{line}: " in lines[0] and what in lines[0], proc.stderr


def test_two_runs_stale_entry_and_the_gate_on_change(sample, tmp_path):
    """One history, two runs a day apart with stale.yaml and --fail-on-new FAIL: the never-matching
    entry is stale on the second run; the first run exits 1 (every finding is new), the second 0
    (the same FAILs, none new)."""
    history = tmp_path / "history"
    common = ("--accept", CASES / "stale.yaml", "--history", history, "--fail-on-new", "FAIL")
    first, doc1 = audit(sample, tmp_path, *common, "--as-of", "2026-11-24T03:00:00Z", name="run1.json")
    second, doc2 = audit(sample, tmp_path, *common, "--as-of", "2026-11-25T03:00:00Z", name="run2.json")
    assert first.returncode == 1 and doc1["since"]["new"] >= 1, first.stderr[-2000:]
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    e1, e2 = doc1["acceptance"]["entries"][1], doc2["acceptance"]["entries"][1]
    assert (e1["runs_unmatched"], e1["stale"]) == (1, False)
    assert (e2["runs_unmatched"], e2["stale"]) == (2, True)
    assert doc2["acceptance"]["entries"][0]["stale"] is False
    assert any("stale.yaml:9" in n and "stale" in n for n in doc2["history"]["notes"]), doc2["history"]["notes"]
    fails2 = [f for f in doc2["findings"] if f["severity"] == "FAIL"]
    assert {f["code"] for f in fails2} == {"KLA002", "KLA060"} and doc2["verdict"] == "FAIL"  # KLA001 is accepted
    assert all(f["status"] == "persisting" and f["runs_open"] == 2 and f["first_seen"] == "2026-11-24T03:00:00.000Z"
               for f in fails2)
    assert "since the previous run (2026-11-24T03:00:00.000Z)" in second.stdout
    no_history = subprocess.run([sys.executable, "-m", "auditor.cli", "audit", "--log-dir", str(sample[0][0]),
                                 "--fail-on-new", "FAIL"], capture_output=True, text=True, cwd=REPO, timeout=120,
                                env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert no_history.returncode == 2 and "--fail-on-new needs --history" in no_history.stderr
