"""The cluster parts of a manifest (auditor.cluster.portable) on a large metadata log.

    .venv/bin/python benchmarks/metadata.py --copies 600      # builds .cache/bench/metadata/state once
    taskset -c 1 .venv/bin/python benchmarks/manifest_parts.py

On the ~100,000-partition metadata log benchmarks/metadata.py builds from real bytes: the
disk-mode read the audit does (``read_metadata_log(history=True)``), writing it as
``cluster_metadata.jsonl.gz`` (what ``collect`` adds), reading it back (what ``audit --manifest``
does instead of decoding the log), the file's size beside the log's, and the peak memory
(ru_maxrss). CPU time (user+sys) of this process. Prints figures; asserts nothing but equality.
"""

from __future__ import annotations

import io
import os
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.cluster import metadata_log as ml  # noqa: E402
from auditor.cluster import portable  # noqa: E402

STATE = ROOT / ".cache" / "bench" / "metadata" / "state"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    if not (STATE / ml.METADATA_DIR_NAME).is_dir():
        sys.exit(f"{STATE} missing: run benchmarks/metadata.py first (it builds it)")
    log_bytes = sum(p.stat().st_size for p in (STATE / ml.METADATA_DIR_NAME).glob("*.log"))
    t = cpu()
    log = ml.read_metadata_log([STATE], history=True)
    read_log = cpu() - t
    buf = io.BytesIO()
    t = cpu()
    lines = portable.write_metadata(log, buf)
    write = cpu() - t
    data = buf.getvalue()
    t = cpu()
    back = portable.read_metadata(io.BytesIO(data), "bench")
    read_part = cpu() - t
    assert back.state == log.state and back.history == log.history
    print(f"metadata log: {log_bytes / 2**20:.1f} MiB, {log.records_read:,} records, "
          f"{log.state.partition_count:,} partitions, {len(log.state.topics):,} topics, {len(log.history):,} changes")
    print(f"  read_metadata_log(history=True) (disk mode)  {read_log:6.2f} s CPU")
    print(f"  write cluster_metadata.jsonl.gz (collect)    {write:6.2f} s CPU, {lines:,} lines, "
          f"{len(data) / 2**20:.1f} MiB ({len(data) / log_bytes:.0%} of the log)")
    print(f"  read it back (audit --manifest)              {read_part:6.2f} s CPU")
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; "
          f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
