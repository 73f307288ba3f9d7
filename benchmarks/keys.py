"""Key statistics (issue 23) beside the deep scan, on the same partition dirs, in one run.

    .venv/bin/python benchmarks/keys.py                       # fixtures/real broker dirs
    .venv/bin/python benchmarks/keys.py --runs 5 LOGDIR ...   # any log dirs (e.g. .cache/bench/big-subset)

Per log dir, medians of ``--runs``: the deep scan of every partition dir (``scan_partition_dir``,
depth ``deep``), the key statistics of every partition (``scan_partition_keys``, all records),
the sampled mode (``--sample-mib``, default 1), and the key statistics' records per second.
Prints figures and the load average; asserts nothing (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.formats import filenames  # noqa: E402
from auditor.keys.partition_keys import MIB, scan_partition_keys  # noqa: E402
from auditor.scan.partition_dir import scan_partition_dir  # noqa: E402

DEFAULT_DIRS = [ROOT.parent / "shared/fixtures/real/broker-dirs/kafka-2018-v2/kafka-logs",
                Path("/work/shared/fixtures/real/broker-dirs/kafka-2018-v2/kafka-logs")]


def partition_dirs(log_dir: Path) -> list[Path]:
    return sorted(p for p in log_dir.iterdir() if p.is_dir() and filenames.parse_partition_dir(p.name) is not None)


def timed(fn, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def deep_scan(log_dir: Path, dirs: list[Path]) -> int:
    info = {"broker_id": None, "cluster_id": None, "log_dir": str(log_dir)}
    rows = 0
    for d in dirs:
        segments, _ = scan_partition_dir(d, "deep", log_dir_info=info, checkpoints_by_tp={}, root=log_dir)
        rows += sum(r["record_count"] or 0 for r in segments)
    return rows


def key_scan(dirs: list[Path], sample_bytes: int | None) -> tuple[int, int]:
    records = scanned = 0
    for d in dirs:
        found = scan_partition_keys(d, sample_bytes=sample_bytes)
        records += found.stats.records
        scanned += found.scanned_bytes
    return records, scanned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log_dirs", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sample-mib", type=float, default=1.0)
    args = parser.parse_args()
    log_dirs = args.log_dirs or [next(d for d in DEFAULT_DIRS if d.is_dir())]
    print(f"load average: {os.getloadavg()}  runs: {args.runs}")
    for log_dir in log_dirs:
        dirs = partition_dirs(log_dir)
        deep_s, deep_records = timed(lambda: deep_scan(log_dir, dirs), args.runs)
        keys_s, (key_records, key_bytes) = timed(lambda: key_scan(dirs, None), args.runs)
        sample = int(args.sample_mib * MIB)
        sample_s, (sample_records, sample_bytes) = timed(lambda: key_scan(dirs, sample), args.runs)
        print(f"{log_dir}: {len(dirs)} partition dirs")
        print(f"  deep scan (no keys)      {deep_s:8.3f} s  {deep_records:>10,} records  "
              f"{deep_records / deep_s:>12,.0f} records/s")
        print(f"  key statistics (all)     {keys_s:8.3f} s  {key_records:>10,} records  "
              f"{key_records / keys_s:>12,.0f} records/s  ({keys_s / deep_s:.2f}x the deep scan's time; "
              f"a separate walk: deep + keys costs {1 + keys_s / deep_s:.2f}x the deep scan)")
        print(f"  key statistics (newest {args.sample_mib:g} MiB/partition) {sample_s:8.3f} s  "
              f"{sample_records:>10,} records  {sample_bytes:>12,} bytes read")
    print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
