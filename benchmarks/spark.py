"""In-process scanner vs the Spark job, stage by stage, on the same real-broker log dir(s).

    .venv/bin/python benchmarks/spark.py /path/to/kafka-logs [more log dirs] --depth index --repeat 5

Stages, each timed separately, medians over ``--repeat`` runs (after one warm-up run that
also warms the page cache, so every run reads from memory; pass ``--drop-caches`` as root to
read cold from disk instead):

* listing      in-process: none (listing is interleaved with the scan); Spark: driver-side
               ``plan_tasks`` (header + partition dir names);
* scan         in-process: ``scan_log_dirs``; Spark: ``scan_dataframes`` + materialising the
               persisted union (``count``): listing excluded;
* aggregation  in-process: pyarrow group-by per partition dir (size, segments, timestamps);
               Spark: ``aggregates`` (all four tables, noop sink).

Spark's fixed overhead is the same pipeline, with as many tasks, on an empty log dir (job
scheduling, Python worker start, Arrow set-up); the session start is reported apart. Per-segment cost = (median scan
time - fixed overhead) / segments. Peak memory of the driver Python, the driver JVM (which
hosts the executors in local mode) and the PySpark workers is sampled from /proc.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _procmem import PeakMemory  # noqa: E402


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def _fmt(xs):
    return f"median {_median(xs):8.3f} s  (runs: {', '.join(f'{x:.3f}' for x in xs)})"


def _drop_caches() -> None:
    subprocess.run(["sync"], check=False)
    with open("/proc/sys/vm/drop_caches", "w") as fh:
        fh.write("3\n")


def in_process(log_dirs, depth, repeat, drop):
    from auditor.scan import scan_log_dirs
    from auditor.schema import SEGMENT_SCHEMA, to_table

    scan_t, agg_t = [], []
    with PeakMemory() as mem:
        for i in range(repeat + 1):
            if drop:
                _drop_caches()
            t = time.perf_counter()
            res = scan_log_dirs(log_dirs, depth)
            scan_s = time.perf_counter() - t
            t = time.perf_counter()
            table = to_table(res.segments, SEGMENT_SCHEMA)
            table.group_by(["broker_id", "log_dir", "dir_name"]).aggregate(
                [("log_size_bytes", "sum"), ("log_size_bytes", "count"), ("max_timestamp_ms", "max"),
                 ("min_batch_timestamp_ms", "min"), ("log_mtime_ms", "min"), ("log_mtime_ms", "max")])
            agg_s = time.perf_counter() - t
            if i:  # run 0 is the warm-up
                scan_t.append(scan_s)
                agg_t.append(agg_s)
            segments = len(res.segments)
            del res, table
    return {"scan": scan_t, "aggregation": agg_t, "segments": segments, "memory": mem.report()}


def spark_local(log_dirs, depth, repeat, drop, master, conf):
    from auditor.engines.spark import aggregates, build_spark, plan_tasks, scan_dataframes

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    out = {"listing": [], "scan": [], "aggregation": [], "fixed": []}
    empty = tempfile.mkdtemp(prefix="kafka-audit-empty-")
    with PeakMemory() as mem:
        t = time.perf_counter()
        spark = build_spark(master, conf)
        out["session_start_s"] = time.perf_counter() - t
        for i in range(repeat + 1):
            if drop:
                _drop_caches()
            t = time.perf_counter()
            for d in log_dirs:
                plan_tasks(d)
            listing = time.perf_counter() - t
            t = time.perf_counter()
            scan = scan_dataframes(spark, log_dirs, depth)
            n = scan.raw.count()
            scan_s = time.perf_counter() - t - scan.timings_s["listing_s"]
            t = time.perf_counter()
            aggs = aggregates(scan.segments, scan.partitions)
            for df in aggs.values():
                df.write.format("noop").mode("overwrite").save()
            agg_s = time.perf_counter() - t
            segments = scan.segments.count()
            aggs["replica_stats"].unpersist(blocking=True)
            scan.unpersist()
            t = time.perf_counter()
            e = scan_dataframes(spark, [empty], depth, num_tasks=scan.timings_s["slices"])
            e.raw.count()
            fixed = time.perf_counter() - t
            e.unpersist()
            if i:
                out["listing"].append(listing)
                out["scan"].append(scan_s)
                out["aggregation"].append(agg_s)
                out["fixed"].append(fixed)
        out["segments"] = segments
        out["rows"] = n
        out["parallelism"] = spark.sparkContext.defaultParallelism
        out["slices"] = scan.timings_s["slices"]
        spark.stop()
    out["memory"] = mem.report()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log_dirs", nargs="+", help="real broker log dir(s), e.g. the >= 2 GB dir of the size benchmark")
    ap.add_argument("--depth", default="index")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--conf", action="append", default=[])
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before every run (root)")
    args = ap.parse_args(argv)
    from auditor.engines.spark import parse_conf

    size = sum(f.stat().st_size for d in args.log_dirs for f in Path(d).rglob("*") if f.is_file() and not f.is_symlink())
    print(f"log dirs: {', '.join(args.log_dirs)} ({size / 2**20:,.1f} MiB), depth {args.depth}, "
          f"{args.repeat} runs + 1 warm-up, page cache {'dropped' if args.drop_caches else 'warm'}, cpus {os.cpu_count()}")
    ip = in_process(args.log_dirs, args.depth, args.repeat, args.drop_caches)
    sp = spark_local(args.log_dirs, args.depth, args.repeat, args.drop_caches, args.master, parse_conf(args.conf))
    segs = ip["segments"]
    print(f"\nsegments: {segs:,}")
    print("in-process")
    print(f"  scan         {_fmt(ip['scan'])}")
    print(f"  aggregation  {_fmt(ip['aggregation'])}  (pyarrow group-by per partition dir)")
    print(f"  per segment  {_median(ip['scan']) / max(segs, 1) * 1e3:.3f} ms")
    print(f"  peak memory  {ip['memory']}")
    print(f"spark {args.master} (default parallelism {sp['parallelism']}, {sp['slices']} scan tasks)")
    print(f"  session start {sp['session_start_s']:.2f} s (once)")
    print(f"  listing      {_fmt(sp['listing'])}")
    print(f"  scan         {_fmt(sp['scan'])}")
    print(f"  aggregation  {_fmt(sp['aggregation'])}  (4 tables)")
    print(f"  fixed overhead (empty log dir, scan) {_fmt(sp['fixed'])}")
    per_seg = (_median(sp["scan"]) - _median(sp["fixed"])) / max(segs, 1)
    print(f"  per segment  {per_seg * 1e3:.3f} ms (scan minus fixed overhead)")
    print(f"  peak memory  {sp['memory']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
