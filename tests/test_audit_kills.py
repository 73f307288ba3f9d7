"""``audit --state`` killed with SIGKILL at seeded random moments (issue 24 item 4; docs/write-faults.md).

The log dir is a private copy of a real broker's (tests/harness/realdata.py). Each run is a real process forked from a Python that has run the audit once (tests/harness/forked.py:
the audit's imports cost seconds), killed either after a random delay within an uninterrupted
run's duration or as soon as it holds a chosen temporary file open (the state, the findings JSON,
the HTML report, the history entry) plus 0-2 ms. After each kill: the findings JSON and the report
are the last complete run's or absent (never half a file), the history reads, every state file
reads whole, nothing of ours is under a log dir. Then the next run (not killed) writes findings
equal to a full audit's without state (``--as-of`` fixed: the findings do not depend on the clock).
A few kills only: each audit run costs seconds (Great Expectations); the state's own kills are
tests/test_collect_kills.py's (the same LogDirState), and atomic_open's failure cases are in
tests/test_write_faults.py.
"""

from __future__ import annotations

import collections
import json
import os
import random
import time
from pathlib import Path

import pytest

from auditor.atomic import TEMP_MARK
from auditor.scan.state import read_state_file
from harness.forked import Zygote, kill_at_random_moment
from harness.realdata import copy_log_dir
from auditor.nightly import run_history as hist

# live, with the other kill tests (tests/test_collect_kills.py, tests/test_s3_collect_kills.py): it needs
# only the recorded fixtures, but 10 audits in a forked CLI are 15 s of CPU, a quarter of the fast lane's budget
pytestmark = pytest.mark.live

KILLS = 4
AS_OF = "2026-01-01T00:00:00Z"
TARGETS = {"state": f".state{TEMP_MARK}", "json": f".findings.json{TEMP_MARK}",
           "html": f".report.html{TEMP_MARK}", "history": ".parquet.tmp"}


def _audit_args(log_dirs: list[Path], out: Path, state: Path | None) -> list[str]:
    args = ["audit", "--engine", "local", "--depth", "headers", "--as-of", AS_OF, "--no-progress", "--exit-zero",
            "--json", str(out / "findings.json"), "--out", str(out / "report.html"), "--history", str(out / "history")]
    for d in log_dirs:
        args += ["--log-dir", str(d)]
    return args + (["--state", str(state)] if state is not None else [])


def _findings(path: Path) -> list[dict]:
    doc = json.loads(path.read_text())
    return sorted(doc["findings"], key=lambda f: json.dumps(f, sort_keys=True, default=str))


def _phase(names: list[str]) -> str:
    for what, mark in TARGETS.items():
        if any(mark in n for n in names):
            return what
    return "no temporary file open" if names is not None else "?"


def test_audit_killed_at_random_moments_then_the_next_run_equals_a_full_audit(tmp_path):
    seed = int(os.environ.get("AUDIT_KILLS_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"\naudit kills: seed {seed} (AUDIT_KILLS_SEED={seed} replays the moments)")
    rng = random.Random(seed)
    logs = tmp_path / "logs"
    log_dirs = [copy_log_dir("kafka-2018-v2", logs)]
    out, state, full = tmp_path / "out", tmp_path / "state", tmp_path / "full"
    began = time.monotonic()
    # the zygote's warm-up run is the full audit without state that the runs after a kill must equal
    zygote = Zygote(tmp_path, "audit", warm=_audit_args(log_dirs, full, None))
    ready_s = time.monotonic() - began
    phases: collections.Counter = collections.Counter()
    try:
        started = time.monotonic()
        zygote.start(_audit_args(log_dirs, out, state))
        status = zygote.wait()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, zygote.stderr()[-2000:]
        run_s = time.monotonic() - started
        assert _findings(full / "findings.json"), "the warm-up audit wrote no findings"
        for kill in range(KILLS):
            how, held, status, _pid = kill_at_random_moment(zygote, _audit_args(log_dirs, out, state), rng, run_s,
                                                            TARGETS, ".tmp", 300)
            phase = _phase(held) if os.WIFSIGNALED(status) else "finished before the kill"
            phases[phase] += 1
            context = f"kill {kill} (seed {seed}, {how}, {phase})"
            if not os.WIFSIGNALED(status):
                assert os.WEXITSTATUS(status) == 0, f"{context}: {zygote.stderr()[-2000:]}"
            # each output is whole: the last run's or this one's (renamed into place), never half of one
            assert json.loads((out / "findings.json").read_bytes())["findings"], f"{context}: findings.json"
            assert (out / "report.html").read_bytes().rstrip().endswith(b"</html>"), f"{context}: report.html is cut"
            hist.read(out / "history")
            for path in state.glob("*.state"):
                read_state_file(path)
            for d in log_dirs:
                assert not [p for p in d.rglob("*") if TEMP_MARK in p.name or p.name.endswith(".state")], \
                    f"{context}: something of ours under {d}"
            # the next run, not killed, equals a full audit without state
            zygote.start(_audit_args(log_dirs, out, state))
            status = zygote.wait()
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"{context}: {zygote.stderr()[-2000:]}"
            assert _findings(out / "findings.json") == _findings(full / "findings.json"), context
            assert not [p for p in state.iterdir() if TEMP_MARK in p.name], f"{context}: stale temporary files"
    finally:
        zygote.close()
    print(f"audit kills: {KILLS} kills in {time.monotonic() - started:.0f} s (zygote ready in {ready_s:.0f} s); one "
          f"uninterrupted run {run_s:.2f} s; open at the kill: {dict(phases)}")
