"""SYNTHETIC segment rows at scale, then the Spark aggregation stage over them.

The rows are NOT real broker data: real segment rows (scanned from the real-broker fixtures, or
read from a ``segments.parquet`` given with ``--base``) are replicated and perturbed into a
made-up cluster of ``--brokers`` brokers, ``--topics`` x ``--partitions`` partitions at
replication factor ``--rf``. They are marked synthetic three ways: ``cluster_id`` is
``SYNTHETIC-<seed>``, log dirs live under ``/synthetic/``, and the Parquet files carry the
metadata ``kafka_audit.synthetic = true`` plus the source of the base rows.

    .venv/bin/python benchmarks/synthetic_rows.py --rows 1000000 --out /tmp/synthetic
    .venv/bin/python benchmarks/synthetic_rows.py --out /tmp/synthetic --aggregate-only --repeat 5

Generation is columnar (numpy + pyarrow), so a million rows never exist as Python dicts.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA, to_table  # noqa: E402

REAL_BROKER_DIRS = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real" / "broker-dirs"


def base_rows(base: str | None) -> tuple[pa.Table, str]:
    if base:
        return pq.read_table(base, schema=SEGMENT_SCHEMA), base
    from auditor.scan import scan_log_dirs

    dirs = sorted(p for p in REAL_BROKER_DIRS.glob("*/*") if p.is_dir())
    rows = [r for r in scan_log_dirs(dirs, "headers").segments if r["log_size_bytes"]]
    return to_table(rows, SEGMENT_SCHEMA), f"scan of {REAL_BROKER_DIRS} (depth headers)"


def synthesize(n: int, base: pa.Table, *, brokers: int, topics: int, partitions: int, rf: int,
               seed: int) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    dirs = topics * partitions * rf
    per_dir = math.ceil(n / dirs)
    r = np.arange(n, dtype=np.int64)
    d, seg = r // per_dir, r % per_dir
    topic, part, replica = d // (partitions * rf), (d // rf) % partitions, d % rf
    step = max(1, brokers // rf)
    broker = ((topic + part + replica * step) % brokers + 1).astype(np.int32)
    log_dir_no = part % 2
    t = base.take(pa.array(rng.integers(0, base.num_rows, n)))

    skew = np.where(part == 0, 10.0, 1.0) * rng.uniform(0.5, 1.5, n)  # partition 0 of every topic is hot
    size = (np.maximum(pc.fill_null(t["log_size_bytes"], 0).to_numpy(zero_copy_only=False), 1) * skew).astype(np.int64)
    t0 = 1_700_000_000_000
    newest = t0 + seg * 3_600_000 + rng.integers(0, 600_000, n)
    oldest = newest - rng.integers(1, 3_600_000, n)
    mtime = newest + rng.integers(0, 5_000, n)
    mtime = np.where(rng.random(n) < 0.001, t0 + 400 * 86_400_000, mtime)  # a few reset mtimes
    records = (size // 1000 + 1).astype(np.int64)
    base_offset = seg * 1_000_000
    log_dirs = np.char.add(np.char.add("/synthetic/broker-", broker.astype(str)), np.char.add("/data-", log_dir_no.astype(str)))
    topic_names = np.char.add("synthetic-topic-", topic.astype(str))
    dir_names = np.char.add(np.char.add(topic_names, "-"), part.astype(str))
    active = seg == per_dir - 1
    replace = {
        "broker_id": pa.array(broker, pa.int32()),
        "cluster_id": pa.array(np.full(n, f"SYNTHETIC-{seed}")),
        "log_dir": pa.array(log_dirs),
        "topic": pa.array(topic_names),
        "partition": pa.array(part.astype(np.int32)),
        "dir_kind": pa.array(np.full(n, "live")),
        "dir_name": pa.array(dir_names),
        "base_offset": pa.array(base_offset),
        "file_state": pa.nulls(n, pa.string()),
        "is_active": pa.array(active),
        "log_size_bytes": pa.array(size),
        "log_mtime_ms": pa.array(mtime),
        "first_offset": pa.array(base_offset),
        "last_offset": pa.array(base_offset + records - 1),
        "max_timestamp_ms": pa.array(newest),
        "min_batch_timestamp_ms": pa.array(oldest),
        "min_timestamp_ms": pa.array(oldest),
        "record_count": pa.array(records),
    }
    cols = [replace.get(f.name, t.column(f.name)) for f in SEGMENT_SCHEMA]
    segments = pa.Table.from_arrays([c if isinstance(c, pa.ChunkedArray) else pa.chunked_array([c]) for c in cols],
                                    schema=SEGMENT_SCHEMA)

    # one partition row per synthetic partition dir
    dd = np.arange(dirs, dtype=np.int64)
    ptopic, ppart, prep = dd // (partitions * rf), (dd // rf) % partitions, dd % rf
    pbroker = ((ptopic + ppart + prep * step) % brokers + 1).astype(np.int32)
    grouped = segments.group_by(["dir_name", "broker_id", "log_dir"]).aggregate(
        [("log_size_bytes", "sum"), ("log_size_bytes", "count"), ("log_mtime_ms", "min"), ("log_mtime_ms", "max")])
    names = np.char.add(np.char.add(np.char.add("synthetic-topic-", ptopic.astype(str)), "-"), ppart.astype(str))
    pl = np.char.add(np.char.add("/synthetic/broker-", pbroker.astype(str)), np.char.add("/data-", (ppart % 2).astype(str)))
    keys = pa.table({"dir_name": pa.array(names), "broker_id": pa.array(pbroker, pa.int32()), "log_dir": pa.array(pl),
                     "topic": pa.array(np.char.add("synthetic-topic-", ptopic.astype(str))),
                     "partition": pa.array(ppart.astype(np.int32))})
    joined = keys.join(grouped, ["dir_name", "broker_id", "log_dir"], join_type="left outer")
    m = joined.num_rows
    prow = {
        "broker_id": joined["broker_id"], "cluster_id": pa.array(np.full(m, f"SYNTHETIC-{seed}")),
        "log_dir": joined["log_dir"],
        "dir_kind": pa.array(np.full(m, "live")), "dir_name": joined["dir_name"],
        "segment_count": pc.fill_null(joined["log_size_bytes_count"], 0),
        "size_bytes": pc.fill_null(joined["log_size_bytes_sum"], 0),
        "oldest_log_mtime_ms": joined["log_mtime_ms_min"], "newest_log_mtime_ms": joined["log_mtime_ms_max"],
        "depth": pa.array(np.full(m, "headers")),
    }
    prow["topic"], prow["partition"] = joined["topic"], joined["partition"]
    pcols = []
    for f in PARTITION_SCHEMA:
        v = prow.get(f.name)
        if v is None:
            v = pa.array([[] for _ in range(m)], f.type) if pa.types.is_list(f.type) else pa.nulls(m, f.type)
        pcols.append(pc.cast(v, f.type))
    partitions = pa.Table.from_arrays(pcols, schema=PARTITION_SCHEMA)
    return segments, partitions


def write(out: Path, segments: pa.Table, partitions: pa.Table, source: str, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta = {b"kafka_audit.synthetic": b"true", b"kafka_audit.synthetic_seed": str(seed).encode(),
            b"kafka_audit.synthetic_base": source.encode()}
    pq.write_table(segments.replace_schema_metadata(meta), out / "segments.parquet", row_group_size=128 * 1024)
    pq.write_table(partitions.replace_schema_metadata(meta), out / "partitions.parquet")


def run_aggregation(out: Path, repeat: int, master: str) -> None:
    from _procmem import PeakMemory

    from auditor.engines.spark import aggregates, build_spark
    from auditor.schema import spark_schema

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with PeakMemory() as mem:
        t = time.perf_counter()
        spark = build_spark(master)
        session_s = time.perf_counter() - t
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            seg = spark.read.schema(spark_schema(SEGMENT_SCHEMA)).parquet(str(out / "segments.parquet"))
            part = spark.read.schema(spark_schema(PARTITION_SCHEMA)).parquet(str(out / "partitions.parquet"))
            aggs = aggregates(seg, part)
            for df in aggs.values():
                df.write.format("noop").mode("overwrite").save()  # compute everything, keep nothing
            times.append(time.perf_counter() - t)
            counts = {name: df.count() for name, df in aggs.items()}
            skew = aggs["topic_stats"].selectExpr("max(max_partition_size_bytes / median_partition_size_bytes)").first()[0]
            aggs["replica_stats"].unpersist(blocking=True)  # the next run starts cold (same plan = cache hit)
        spark.stop()
    print(f"aggregation stage over {seg_rows(out):,} SYNTHETIC segment rows, master {master}:")
    print(f"  session start {session_s:.1f} s; per run (read Parquet + 4 aggregates, noop sink): "
          f"median {statistics.median(times):.2f} s over {repeat} runs ({', '.join(f'{x:.2f}' for x in times)})")
    print(f"  output rows: {counts}; max topic skew (max/median partition bytes) {skew:.1f}")
    print(f"  peak memory: {mem.report()}")


def seg_rows(out: Path) -> int:
    return pq.ParquetFile(out / "segments.parquet").metadata.num_rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--base", help="a segments.parquet of real rows to replicate (default: scan the real fixtures)")
    ap.add_argument("--brokers", type=int, default=30)
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=40)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--aggregate", action="store_true", help="then time the Spark aggregation stage over them")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--aggregate-only", action="store_true",
                    help="skip generation, time the aggregation over an existing --out (clean driver memory figure)")
    args = ap.parse_args(argv)
    if args.aggregate_only:
        run_aggregation(args.out, args.repeat, args.master)
        return 0
    t = time.perf_counter()
    base, source = base_rows(args.base)
    segments, partitions = synthesize(args.rows, base, brokers=args.brokers, topics=args.topics,
                                      partitions=args.partitions, rf=args.rf, seed=args.seed)
    write(args.out, segments, partitions, source, args.seed)
    print(f"wrote {segments.num_rows:,} SYNTHETIC segment rows ({partitions.num_rows:,} partition dirs) from "
          f"{base.num_rows} real rows [{source}] to {args.out} in {time.perf_counter() - t:.1f} s")
    if args.aggregate:
        del segments, partitions, base
        run_aggregation(args.out, args.repeat, args.master)
    return 0


if __name__ == "__main__":
    sys.exit(main())
