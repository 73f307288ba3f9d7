"""Where Spark pays: the audit's table stages on the driver (pandas) vs on Spark, by row count.

    .venv/bin/python benchmarks/engines.py                          # 1k .. 100k rows
    .venv/bin/python benchmarks/engines.py --rows 1000,10000,50000 --runs 1

For each row count, SYNTHETIC segment rows (``benchmarks/synthetic_rows.py``: real rows replicated
and perturbed, ``cluster_id`` SYNTHETIC-<seed>) are written to Parquet, then two fresh processes
run the stages an audit runs after its scan, and print their wall times:

* ``local``: the rows read with pyarrow, the four aggregate tables (``auditor.engines.local.tables``), the
  checks (``check_runner.run_local``) and the Great Expectations suite on a pandas DataFrame;
* ``spark``: a ``local[*]`` session (its start timed apart), the same Parquet read by Spark, the
  Spark aggregates, the checks (``run_spark``: ``applyInPandas`` on executors) and the suite on the
  Spark DataFrame, as ``auditor.audit`` runs them.

Wall AND CPU time: on a shared machine wall times are inflated by the other processes, CPU time
much less. ``cpu s`` is user + sys of the whole child process tree: for ``local`` the one Python
process; for ``spark`` the Python driver plus the JVM and the Python workers it forked (read from
``/proc`` before the session stops: each live descendant's own and reaped children's times). Spark
``local[*]`` runs tasks on every core, so its wall time can be below its CPU time; the local engine
runs on one core. Peak RSS is each child's ``ru_maxrss`` (for Spark the Python driver only). The
scan itself is measured by ``benchmarks/scan.py`` (the in-process scanner does ~25,000 segments/s
at ``index`` and ~5,800/s at ``headers`` on small segments, on one core). Prints figures and the
load average; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from _procmem import descendants  # noqa: E402

CACHE = REPO / ".cache" / "bench-engines"
NOW_MS = 1_700_000_000_000 + 90 * 86_400_000


def _ctx():
    from checks.framework.base import AuditContext
    from checks.framework.config import Config

    return AuditContext(as_of_ms=NOW_MS, config=Config.load(None))


def prepare(rows: int) -> Path:
    import pyarrow.parquet as pq

    from synthetic_rows import base_rows, synthesize

    out = CACHE / f"rows-{rows}"
    if (out / "partitions.parquet").exists():
        return out
    base, _source = base_rows(None)
    partitions = max(1, rows // 600)
    segments, parts = synthesize(rows, base, brokers=6, topics=max(1, partitions // 12) or 1, partitions=12, rf=3,
                                 seed=13)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(segments, out / "segments.parquet")
    pq.write_table(parts, out / "partitions.parquet")
    return out


def _proc_cpu_s(pid: int) -> float:
    """user + sys of ``pid`` and of its children it has reaped (``/proc/PID/stat`` fields 14-17)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def descendants_cpu_s() -> float:
    """CPU seconds of every live descendant of this process (the JVM, Spark's Python workers)."""
    total = 0.0
    for pid in descendants():
        try:
            total += _proc_cpu_s(pid)
        except OSError:
            continue  # gone meanwhile
    return total


def tree_cpu_s() -> float:
    """user + sys of this process, its reaped children and its live descendants."""
    import resource

    me, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + reaped.ru_utime + reaped.ru_stime + descendants_cpu_s()


def worker_local(data: Path) -> dict:
    import pyarrow.parquet as pq

    from auditor.engines.local import tables as local_engine
    from auditor.engines.local.checks import run_local
    from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA
    from auditor.engines.local.expectations import run_expectations

    t = {}
    t0 = time.perf_counter()
    seg_table = pq.read_table(data / "segments.parquet", schema=SEGMENT_SCHEMA)
    segs = seg_table.to_pylist()
    parts = pq.read_table(data / "partitions.parquet", schema=PARTITION_SCHEMA).to_pylist()
    t["read_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    stats = local_engine.aggregates(segs, parts)
    t["aggregates_s"] = time.perf_counter() - t0
    ctx = _ctx()
    t0 = time.perf_counter()
    findings = run_local(segs, parts, ctx, stats)
    t["checks_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    gx = run_expectations(seg_table.to_pandas(), ctx)
    t["gx_s"] = time.perf_counter() - t0
    t["findings"] = len(findings) + len(gx.findings)
    return t


def worker_spark(data: Path) -> dict:
    from auditor.engines.spark.checks import run_spark
    from auditor.engines.spark import aggregates, build_spark
    from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA, spark_schema
    from auditor.engines.spark.expectations import run_expectations

    t = {}
    t0 = time.perf_counter()
    spark = build_spark(None)
    t["session_s"] = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        seg = spark.read.schema(spark_schema(SEGMENT_SCHEMA)).parquet(str(data / "segments.parquet"))
        part = spark.read.schema(spark_schema(PARTITION_SCHEMA)).parquet(str(data / "partitions.parquet"))
        aggs = aggregates(seg, part)
        [df.count() for df in aggs.values()]
        t["aggregates_s"] = time.perf_counter() - t0
        ctx = _ctx()
        t0 = time.perf_counter()
        findings = run_spark(seg, part, aggs, ctx)
        t["checks_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        gx = run_expectations(seg, ctx)
        t["gx_s"] = time.perf_counter() - t0
        t["findings"] = len(findings) + len(gx.findings)
        t["cpu_s"] = tree_cpu_s()  # before stop: the JVM and its Python workers still live
    finally:
        spark.stop()
    return t


def run_child(kind: str, data: Path) -> dict:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--worker", kind, str(data)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    out, _ = proc.communicate()
    wall = time.perf_counter() - started
    res = json.loads(out.decode().strip().splitlines()[-1])
    res["proc_s"] = wall
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1000,20000,50000,100000")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "DATA"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        import resource

        kind, data = args.worker
        res = (worker_local if kind == "local" else worker_spark)(Path(data))
        res.setdefault("cpu_s", tree_cpu_s())
        res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(res))
        return 0
    sizes = [int(x) for x in args.rows.split(",")]
    print(f"engines benchmark ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}, medians of {args.runs} run(s)); SYNTHETIC rows, stages after the scan")
    print(f"{'rows':>9} {'engine':<6} {'session':>8} {'aggr s':>7} {'checks s':>9} {'GX s':>6} {'stages s':>9} "
          f"{'process s':>10} {'cpu s':>7} {'py RSS':>8} {'load':>5} findings")
    for n in sizes:
        data = prepare(n)
        for kind in ("local", "spark"):
            runs = [run_child(kind, data) for _ in range(args.runs)]

            def med(key):
                vals = [r[key] for r in runs if key in r]
                return statistics.median(vals) if vals else None

            stages = med("aggregates_s") + med("checks_s") + med("gx_s")
            session = med("session_s")
            print(f"{n:>9,} {kind:<6} {session if session is not None else 0:>8.2f} {med('aggregates_s'):>7.2f} "
                  f"{med('checks_s'):>9.2f} {med('gx_s'):>6.2f} {stages:>9.2f} {med('proc_s'):>10.2f} "
                  f"{med('cpu_s'):>7.2f} {med('peak_rss_mib'):>7.0f}M {os.getloadavg()[0]:>5.1f} "
                  f"{runs[0]['findings']}", flush=True)
    print("stages s = aggregates + checks + GX, wall (local: + nothing else; the read is in process s); "
          "process s = the whole child process, wall (interpreter, imports, Spark start and stop); "
          "cpu s = user + sys of the child's process tree (Spark: driver + JVM + Python workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
