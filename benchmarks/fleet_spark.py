"""Fleet scale on a real Spark standalone cluster: whole `kafka-audit audit --manifest --engine spark`
runs on the SYNTHETIC fleet of ``benchmarks/fleet.py``, against a master + 2 workers (1 core each,
bounded memory) started here on 127.0.0.1, with the local engine's findings on the same manifests.

    nice -n 5 .venv/bin/python benchmarks/fleet_spark.py --rows 1000000 --local       # + the local engine
    nice -n 5 .venv/bin/python benchmarks/fleet_spark.py --rows 10000000 --dirs 500000

The cluster is ``tests/harness/spark_standalone.StandaloneSpark`` (the tests' harness, with two
workers); the audit is a fresh process in client mode (its Python driver and the driver JVM it
launches), its manifests the input (the executors read the Parquet files). Prints per run the wall
time, the Python driver's CPU, the driver JVM's CPU, the peak RSS of the Python driver, of the JVM
and of both at once (sampled from /proc every 0.2 s; the Python's own VmHWM too), each stage's wall
and CPU time (the audit's progress lines), the executors' CPU (the cluster's processes, sampled), the
load average before and after. With ``--local`` the same manifests go through the local engine too
and the two findings lists are compared finding for finding: each finding as canonical JSON (sorted
keys), the two lists as multisets; the counts, and the first differences, are printed. Asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from _procmem import descendants  # noqa: E402
from fleet import CACHE, _cpu_s, run_audit, synthesize, synthesize_chunked  # noqa: E402

#: What each worker's executor may take (the worker offers ``WORKER_MEMORY``), and the driver's heap.
WORKER_MEMORY = "2g"
EXECUTOR_MEMORY = "1536m"
DRIVER_MEMORY = "512m"  # Spark refuses less than 450 MiB of driver heap


class ClusterCpu:
    """CPU seconds of the cluster's processes (master, workers, executors and their Python
    workers), sampled: a process's last reading counts after it exits."""

    def __init__(self, roots: list[int]):
        self.roots, self.seen, self._stop = roots, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for root in self.roots:
                for pid in [root, *descendants(root)]:
                    self.seen[pid] = max(self.seen.get(pid, 0.0), _cpu_s(pid))
            self._stop.wait(0.5)

    def __enter__(self) -> "ClusterCpu":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def total(self) -> float:
        return sum(self.seen.values())


def spark_stages(event_dir: Path) -> list[tuple[str, int, float, float, float]]:
    """Per call site of the audit's Spark jobs (from the application's event log): jobs, the jobs'
    wall seconds (submission to end, summed), the tasks' run time and the executors' JVM CPU time
    (seconds; Python workers' CPU is not in it: it shows in the run time)."""
    logs = sorted(event_dir.rglob("events_*"))  # Spark 4: a rolling dir of event files
    if not logs:
        return []
    site_of_stage, site_of_job, job_start = {}, {}, {}
    by_site: dict[str, list[float]] = {}
    for line in (line for log in logs for line in log.open()):
        if line.strip():
            e = json.loads(line)
            kind = e.get("Event")
            if kind == "SparkListenerJobStart":
                site = (e.get("Properties") or {}).get("callSite.short", "?")
                site = re.sub(r" at /\S*/(site-packages|wt-[^/]+)/", " at ", site)
                site_of_job[e["Job ID"]] = site
                job_start[e["Job ID"]] = e["Submission Time"]
                for sid in e.get("Stage IDs", []):
                    site_of_stage[sid] = site
                by_site.setdefault(site, [0, 0.0, 0.0, 0.0])[0] += 1
            elif kind == "SparkListenerJobEnd" and e["Job ID"] in job_start:
                by_site[site_of_job[e["Job ID"]]][1] += (e["Completion Time"] - job_start[e["Job ID"]]) / 1000
            elif kind == "SparkListenerTaskEnd":
                m = e.get("Task Metrics") or {}
                acc = by_site.setdefault(site_of_stage.get(e.get("Stage ID"), "?"), [0, 0.0, 0.0, 0.0])
                acc[2] += m.get("Executor Run Time", 0) / 1000
                acc[3] += m.get("Executor CPU Time", 0) / 1e9
    return [(site, int(v[0]), v[1], v[2], v[3]) for site, v in by_site.items()]


def fleet(rows: int, dirs: int) -> tuple[Path, dict]:
    where = CACHE / f"fleet-{rows}-{dirs}"
    if not (where / "shape.json").exists():
        start = time.monotonic()
        # above 2,000,000 rows in chunks of 1,000,000 (each its own topics): the memory of one chunk
        shape = synthesize(rows, dirs, where / "manifests") if rows <= 2_000_000 else \
            synthesize_chunked(rows, dirs, where / "manifests")
        (where / "shape.json").write_text(json.dumps(shape))
        print(f"  generated in {time.monotonic() - start:.0f} s")
    return where / "manifests", json.loads((where / "shape.json").read_text())


def canonical(findings: list[dict]) -> collections.Counter:
    return collections.Counter(json.dumps(f, sort_keys=True) for f in findings)


def compare(spark: list[dict], local: list[dict]) -> str:
    """The two findings lists as multisets of canonical JSON: identical, or what differs."""
    a, b = canonical(spark), canonical(local)
    if a == b:
        return f"IDENTICAL finding for finding ({sum(a.values()):,} findings; same order too: {spark == local})"
    only_spark, only_local = a - b, b - a
    lines = [f"DIFFERENT: {sum(only_spark.values())} only on Spark, {sum(only_local.values())} only on the local engine"]
    lines += [f"    spark only: {k[:300]}" for k in list(only_spark)[:5]]
    lines += [f"    local only: {k[:300]}" for k in list(only_local)[:5]]
    return "\n".join(lines)


def print_run(label: str, r: dict, shape: dict, cluster_cpu: float | None = None) -> None:
    t = r["tree"]
    print(f"  {label}: wall {r['wall_s']:.1f} s, python driver cpu {r['cpu_s']:.1f} s, driver JVM cpu "
          f"{r['children_cpu_s']:.1f} s" + (f", executors+cluster cpu {cluster_cpu:.1f} s" if cluster_cpu is not None else "")
          + f", exit {r['status']}, findings {r['findings']:,} (sha256 {r['findings_sha256']})")
    print(f"    peak RSS: python driver {max(r['rss_mib'], t['python_mib']):.0f} MiB (VmHWM {r['rss_mib']:.0f}), "
          f"driver JVM {t['jvm_mib']:.0f} MiB, both at once {t['sum_mib']:.0f} MiB "
          f"({t['sum_mib'] * 1024 / shape['segment_rows']:.3f} KiB per segment row)")
    print("      per stage: wall, python cpu, python VmHWM at its end, sampled peak RSS in it of the python driver "
          "and of the driver JVM")
    for (name, wall, cpu, hwm), (py, jvm) in zip(r["stages"], r["stage_peaks"]):
        if wall < 0.05 and cpu < 0.05:  # the keys' note lines, Spark's start-up log lines
            continue
        print(f"      wall {wall:7.1f} s  python cpu {cpu:6.1f} s  VmHWM {hwm:6.0f} MiB  python {py:6.0f} MiB  "
              f"JVM {jvm:6.0f} MiB  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dirs", type=int, default=0, help="partition dirs (default: rows / 2, at most 100,000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--local", action="store_true", help="also the local engine on the same manifests; compare findings")
    ap.add_argument("--timeout", type=float, default=None, help="stop the Spark audit after this many seconds "
                    "(its stages so far and the event log are still reported)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="more Spark settings for the audit")
    args = ap.parse_args()
    dirs = args.dirs or min(args.rows // 2, 100_000)
    print(f"load average at start: {os.getloadavg()}")
    manifests, shape = fleet(args.rows, dirs)
    print(f"== SYNTHETIC fleet: {shape['segment_rows']:,} segment rows, {shape['partition_dirs']:,} partition dirs, "
          f"{shape['partitions']:,} partitions, up to {shape['segments_per_dir_max']} segments a dir; "
          f"{sum(f.stat().st_size for f in manifests.rglob('*.parquet')) / 2**20:.0f} MiB of Parquet")
    from harness.spark_standalone import StandaloneSpark

    os.environ["PYTHONPATH"] = str(REPO)  # the workers' (and so the executors') Python imports this checkout

    work = Path(tempfile.mkdtemp(prefix="fleet-spark-"))
    cluster = StandaloneSpark(work / "cluster", workers=args.workers, cores=1, memory=WORKER_MEMORY)
    start = time.monotonic()
    cluster.start()
    print(f"  standalone cluster {cluster.url}: master + {args.workers} workers (1 core, {WORKER_MEMORY} each) "
          f"up in {time.monotonic() - start:.1f} s")
    # the driver JVM's options are the product's own for a cluster (session.CLUSTER_DRIVER_JAVA_OPTIONS),
    # not passed here: the run measures what a user's audit gets
    conf = [f"spark.executor.memory={EXECUTOR_MEMORY}", f"spark.driver.memory={DRIVER_MEMORY}",
            "spark.executor.cores=1", "spark.ui.showConsoleProgress=false",
            f"spark.executorEnv.PYTHONPATH={REPO}", "spark.eventLog.enabled=true", "spark.eventLog.compress=false",
            f"spark.eventLog.dir={work / 'events'}", *args.conf]  # the executors import this checkout's checks
    extra = ("--master", cluster.url, *[x for c in conf for x in ("--conf", c)])
    (work / "events").mkdir()
    try:
        (work / "spark").mkdir()
        with ClusterCpu([p.pid for p in cluster.procs]) as cpu:
            spark = run_audit(REPO, manifests, work / "spark", engine="spark", extra=extra, timeout_s=args.timeout)
        print_run("spark standalone", spark, shape, cpu.total())
        print("    Spark jobs by call site (event log): jobs, their wall (summed), tasks' run time, executors' JVM CPU")
        for site, jobs, wall, run, jcpu in spark_stages(work / "events"):
            print(f"      {jobs:4d} jobs  wall {wall:7.1f} s  task run {run:7.1f} s  JVM cpu {jcpu:7.1f} s  {site[:90]}")
        print(f"  load average after the Spark run: {os.getloadavg()}")
    finally:
        cluster.stop()
    if args.local:
        (work / "local").mkdir()
        local = run_audit(REPO, manifests, work / "local", engine="local")
        print_run("local engine", local, shape)
        print(f"  findings, Spark vs the local engine: {compare(spark['findings_list'], local['findings_list'])}")
    print(f"\nload average at end: {os.getloadavg()}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
