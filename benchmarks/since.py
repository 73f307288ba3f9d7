"""Since the last run at fleet scale: what ``--history`` adds per run beside what the run already
pays for writing its findings JSON.

    .venv/bin/python benchmarks/since.py [--findings 100000] [--runs 5]

Synthetic findings (``--findings``, default 100,000: every check over 5,000 partitions x 20
replicas-worth of places), 10 % changed between two nights. Measured, medians of ``--runs``, in one
run side by side:

* the peer: the findings JSON of that document written (``auditor.json_stream.write_document``);
* ``annotate`` without a history (identities only), and with the previous night (classification);
* the history: this night's findings file appended, the previous one read back.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.json_stream import write_document  # noqa: E402
from auditor.nightly import finding_history as fh  # noqa: E402
from auditor.nightly.compare import annotate  # noqa: E402

CHECKS = [("KLA045", "integrity.offset_gap"), ("KLA050", "integrity.crc"), ("KLA020", "mtime.reset"),
          ("KLA030", "timestamps.bounds"), ("KLA040", "retention.overdue")]
T0 = 1_795_000_000_000


def findings(n: int, shift: int) -> list[dict]:
    out = []
    for i in range(n):
        code, check = CHECKS[i % len(CHECKS)]
        k = i // len(CHECKS) + shift
        out.append({"code": code, "check": check, "severity": ("WARN", "FAIL", "INFO")[i % 3],
                    "message": f"{check} problem number {k} with some words of explanation", "fix": "do the thing",
                    "broker_id": k % 20, "log_dir": f"/data/kafka-{k % 4}", "topic": f"topic-{k // 1000}",
                    "partition": k % 1000, "base_offset": k * 1000, "thresholds": {}, "evidence": [{"offset": k}],
                    "evidence_count": 1})
    return out


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--findings", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    night1 = {"as_of_ms": T0, "fail_on": "FAIL", "findings": findings(a.findings, 0)}
    night2 = {"as_of_ms": T0 + 86_400_000, "fail_on": "FAIL", "findings": findings(a.findings, a.findings // 50)}
    print(f"load average {os.getloadavg()}; {a.findings:,} findings; medians of {a.runs}")
    with tempfile.TemporaryDirectory() as tmp:
        d1, rows1, _ = annotate(night1, fh.read_previous(Path(tmp) / "h", T0), None)
        fh.append(Path(tmp) / "h", T0, rows1, [])
        previous = fh.read_previous(Path(tmp) / "h", T0 + 86_400_000)
        doc2, rows2, _ = annotate(night2, previous, None)
        json_s = timed(lambda: write_document(doc2, io.StringIO(), default=str), a.runs)
        plain_s = timed(lambda: annotate(night2, None, None), a.runs)
        hist_s = timed(lambda: annotate(night2, previous, None), a.runs)
        n = iter(range(10**6))
        append_s = timed(lambda: fh.append(Path(tmp) / "h", T0 + 2 * 86_400_000 + next(n), rows2, []), a.runs)
        read_s = timed(lambda: fh.read_previous(Path(tmp) / "h", T0 + 86_400_000), a.runs)
        size = (Path(tmp) / "h" / fh.PREFIX).parent
        file_bytes = min(p.stat().st_size for p in size.glob("findings-*.parquet"))
    print(f"findings JSON written (the peer):        {json_s:7.3f} s")
    print(f"annotate, identities only (no history):  {plain_s:7.3f} s  ({plain_s / json_s:.2f}x the JSON)")
    print(f"annotate with the previous night:        {hist_s:7.3f} s  ({hist_s / json_s:.2f}x the JSON); "
          f"{doc2['since']}")
    print(f"history: append this night's file:       {append_s:7.3f} s  ({file_bytes:,} bytes)")
    print(f"history: read the previous night back:   {read_s:7.3f} s")


if __name__ == "__main__":
    main()
