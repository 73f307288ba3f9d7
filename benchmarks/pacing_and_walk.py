"""The speed figures that used to be floors inside functional tests (issue 21): printed beside their
targets, asserted nowhere (a loaded machine is not a regression).

    .venv/bin/python benchmarks/pacing_and_walk.py [--runs 5]

* shallow walk of the real 8,202-batch ``__consumer_offsets-28`` segment (LogReader.batches):
  batches/s, best of ``--runs`` (target > 100,000; was tests/test_record_formats.py);
* ``collect``'s cluster parts over 1 MiB of that partition, unpaced vs ``--max-read-rate 1``
  (target: paced >= 0.8 s and > unpaced + 0.5 s; was tests/test_offsets_c_fold.py);
* ReadRate(8 MiB/s) over a 4 MiB file: wall and slept seconds (target: wall >= 0.45 s, slept
  > 0.3 s; was tests/test_pagecache.py).

Medians of ``--runs``; quote them with the load average (printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from auditor.formats.log_reader import LogReader  # noqa: E402
from auditor.manifest import collect_cluster_parts  # noqa: E402
from auditor.scan.pagecache import ReadRate  # noqa: E402
from harness.realdata import BROKER_DIRS  # noqa: E402

SEGMENT = BROKER_DIRS / "kafka-2018-v2/kafka-logs/__consumer_offsets-28/00000000000000000000.log"


def walk_rate(runs: int) -> tuple[int, float]:
    best = float("inf")
    with LogReader(SEGMENT) as reader:
        for _ in range(runs):
            t0 = time.perf_counter()
            n = sum(1 for _ in reader.batches(0))
            best = min(best, time.perf_counter() - t0)
    return n, n / best


def collect_pacing(runs: int, work: Path) -> dict:
    log_dir = work / "logs"
    (log_dir / SEGMENT.parent.name).mkdir(parents=True)
    (log_dir / SEGMENT.parent.name / SEGMENT.name).write_bytes(SEGMENT.read_bytes())
    took: dict = {None: [], 1.0: []}
    for i in range(runs):
        for rate in took:
            out = work / f"out-{rate}-{i}"
            out.mkdir()
            t = time.monotonic()
            collect_cluster_parts([log_dir], out, max_read_rate_mib_s=rate)
            took[rate].append(time.monotonic() - t)
    return {k: statistics.median(v) for k, v in took.items()}


def read_rate(runs: int, work: Path) -> tuple[float, float]:
    f = work / "big.log"
    f.write_bytes(os.urandom(4 * 1024 * 1024))
    walls, slept = [], []
    for _ in range(runs):
        fd = os.open(f, os.O_RDONLY)   # cold pages: the read costs real time, as a scan's does
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        started = time.monotonic()
        rate = ReadRate(8)
        with open(f, "rb") as fh:
            fh.read()
        rate.pace()
        walls.append(time.monotonic() - started)
        slept.append(rate.slept_s)
    return statistics.median(walls), statistics.median(slept)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    n, rate = walk_rate(runs)
    print(f"shallow walk: {n} batches, best {rate:,.0f} batches/s (target > 100,000: "
          f"{'PASS' if rate > 100_000 else 'MISS'})")
    with tempfile.TemporaryDirectory(prefix="bench-pacing-") as td:
        took = collect_pacing(runs, Path(td))
        ok = took[1.0] >= 0.8 and took[1.0] > took[None] + 0.5
        print(f"collect cluster parts, 1 MiB: unpaced {took[None]:.3f} s, --max-read-rate 1: {took[1.0]:.3f} s "
              f"(target paced >= 0.8 s and > unpaced + 0.5 s: {'PASS' if ok else 'MISS'})")
        wall, slept = read_rate(runs, Path(td))
        ok = wall >= 0.45 and slept > 0.3
        print(f"ReadRate 8 MiB/s over 4 MiB: wall {wall:.3f} s, slept {slept:.3f} s "
              f"(target wall >= 0.45 s, slept > 0.3 s: {'PASS' if ok else 'MISS'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
