"""The replay search of ``audit --at`` at fleet scale (issue 19, item 3): replay.safety's search and
check over many partition dirs whose segment files are on disk, side by side with the code before
(a checkout of another ref), in one run.

    git worktree add /tmp/replay-before 8238cca      # or: git archive 8238cca | tar -x -C /tmp/replay-before
    nice -n 10 .venv/bin/python benchmarks/replay_at.py --dirs 10000,100000 --before /tmp/replay-before \\
        --before-max-dirs 10000 --runs 3

The tree is SYNTHETIC: the live partition dirs of the bundled demo sample (auditor/samples, written
by a real Kafka 4.2.1 broker) and of /work/shared/fixtures/real/broker-dirs (real brokers' files)
are copied once under ``.cache/bench-replay/src``, then every partition dir of the tree hard-links
all the files of one of them (round robin) under a new topic name, ``--rf`` replicas on 30 brokers'
log dirs. The rows (Parquet beside the tree) are the sources' scanned rows (depth headers) with the new names, cluster id
``SYNTHETIC-replay``; a ``SYNTHETIC`` file sits at the tree's root. The replay target is the median
of the source segments' largest timestamps, so some partitions are answered inside a segment (the
time index, the offset index and the ``.log`` from that position are read) and others before or
after all their data.

Each code version runs in a fresh process (``PYTHONPATH`` to it): the rows are made into the driver
engine's frame (``segment_frame``, ``sort_rows_moving``), then ``run_local(names=["replay.safety"])``
with ``--at`` (the search with the files, then the check) is timed: wall and CPU, the peak RSS
added by the search (VmHWM after minus before), and files opened (``/proc/self/io`` syscr: read
calls). Prints the medians per size and code, the ratio, whether the findings (a sha256 of their
dicts) are identical, and the load average. Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
if "--child" not in sys.argv:  # a child imports the code its PYTHONPATH names (the code before, or this)
    sys.path.insert(0, str(REPO))

CACHE = REPO / ".cache" / "bench-replay"
REAL_BROKER_DIRS = REPO.parent / "shared" / "fixtures" / "real" / "broker-dirs"
BROKERS = 30
#: partition dirs whose rows make no ordinary replay case here (the metadata log, tiered storage's own topic)
SKIP_TOPICS = ("__cluster_metadata", "__remote_log_metadata", "history")


def sources() -> tuple[list[dict], list[dict], dict, list[Path]]:
    """(segment rows, partition rows, demo meta, source partition dirs) of the real partition dirs
    copied under CACHE/src (once), scanned at depth headers."""
    from auditor.cli.demo import unpack_demo_sample
    from auditor.scan import scan_log_dirs

    src = CACHE / "src"
    if not (src / "done").exists():
        shutil.rmtree(src, ignore_errors=True)
        demo_dirs, _ = unpack_demo_sample(src / "demo")
        for d in sorted(REAL_BROKER_DIRS.glob("*/*")):
            if d.is_dir():
                shutil.copytree(d, src / "real" / d.parent.name / d.name)
        (src / "done").write_text("ok")
    meta = json.loads((src / "demo" / "demo-cluster" / "demo.json").read_text())
    log_dirs = [src / "demo" / "demo-cluster" / d for d in meta["log_dirs"]] + sorted((src / "real").glob("*/*"))
    scan = scan_log_dirs([str(d) for d in log_dirs], "headers")
    keep = {(s["log_dir"], s["dir_name"]) for s in scan.segments
            if s["dir_kind"] == "live" and s["file_state"] is None and s["log_size_bytes"]
            and not s["topic"].startswith(SKIP_TOPICS)}
    seg = [s for s in scan.segments if (s["log_dir"], s["dir_name"]) in keep and s["dir_kind"] == "live"]
    part = [p for p in scan.partitions if (p["log_dir"], p["dir_name"]) in keep]
    dirs = sorted({Path(ld) / dn for ld, dn in keep})
    return seg, part, meta, dirs


def build_tree(dirs: int, rf: int) -> Path:
    """CACHE/tree-DIRS-RF: ``dirs`` partition dirs hard-linking the sources' files, and rows.json."""
    where = CACHE / f"tree-{dirs}-rf{rf}"
    if (where / "segments.parquet").exists():
        return where
    shutil.rmtree(where, ignore_errors=True)
    seg, part, _, srcs = sources()
    seg_by = {}
    for s in seg:
        seg_by.setdefault((s["log_dir"], s["dir_name"]), []).append(s)
    part_by = {(p["log_dir"], p["dir_name"]): p for p in part}
    out_seg, out_part = [], []
    partitions = dirs // rf
    for k in range(partitions):
        source = srcs[k % len(srcs)]
        key = (str(source.parent), source.name)
        topic, partition = f"synthetic-{k // 16}", k % 16
        for r in range(rf):
            broker = (k + r) % BROKERS
            log_dir = where / f"broker-{broker}"
            target = log_dir / f"{topic}-{partition}"
            target.mkdir(parents=True)
            for f in source.iterdir():
                if f.is_file():
                    os.link(f, target / f.name)
            names = {"broker_id": broker, "log_dir": str(log_dir), "topic": topic, "partition": partition,
                     "dir_name": target.name, "cluster_id": "SYNTHETIC-replay"}
            out_seg += [{**s, **names} for s in seg_by[key]]
            if key in part_by:
                out_part.append({**part_by[key], **names})
    (where / "SYNTHETIC").write_text("Not real broker data: real partition dirs hard-linked under new names "
                                     "(benchmarks/replay_at.py).\n")
    from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA, to_table

    pq.write_table(to_table(out_part, PARTITION_SCHEMA), where / "partitions.parquet")
    pq.write_table(to_table(out_seg, SEGMENT_SCHEMA), where / "segments.parquet")  # last: the tree is complete
    return where


def replay_target(tree: Path) -> int:
    stamps = sorted(t for t in pq.read_table(tree / "segments.parquet", columns=["max_timestamp_ms"])
                    .column(0).to_pylist() if t is not None)
    return stamps[len(stamps) // 2]


def _hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _syscr() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("syscr:"):
            return int(line.split()[1])
    return 0


def child(tree: str, target_ms: int, as_of_ms: int, out: str) -> None:
    """In a fresh process of the code on PYTHONPATH: frames, then replay.safety's search and check."""
    import pyarrow as pa

    from auditor.engines.local.checks import run_local
    from auditor.engines.local.tables import segment_frame
    from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA
    from checks.framework.config import Config
    from checks.framework.base import AuditContext
    from checks.framework.batch import sort_rows_moving

    seg = pq.read_table(Path(tree) / "segments.parquet", schema=SEGMENT_SCHEMA)
    part = pq.read_table(Path(tree) / "partitions.parquet", schema=PARTITION_SCHEMA).to_pandas()
    frame, _ = sort_rows_moving(segment_frame(seg))
    del seg
    pa.default_memory_pool().release_unused()
    ctx = AuditContext(as_of_ms=as_of_ms, config=Config(None), replay_at_ms=target_ms)
    hwm0, reads0 = _hwm_kib(), _syscr()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    found = run_local(frame, part, ctx, names=["replay.safety"], segments_sorted=True)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    dicts = [f.to_dict() for f in found]
    Path(out).write_text(json.dumps({
        "wall_s": wall, "cpu_s": cpu, "rss_added_mib": (_hwm_kib() - hwm0) / 1024, "read_calls": _syscr() - reads0,
        "findings": sum(1 for f in dicts if f["severity"] != "PASS"),
        "sha256": hashlib.sha256(json.dumps(dicts, sort_keys=True, default=str).encode()).hexdigest()[:16]}))


def run_code(code: Path, tree: Path, target_ms: int, as_of_ms: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(code)}
        subprocess.run([sys.executable, "-P", __file__, "--child", str(tree), str(target_ms), str(as_of_ms), out.name],
                       cwd=str(code), env=env, check=True)
        return json.loads(Path(out.name).read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dirs", default="10000,100000", help="partition dirs per tree (comma-separated)")
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--before", default="", help="a checkout of the code before (git worktree add DIR 8238cca)")
    ap.add_argument("--before-max-dirs", type=int, default=10_000, help="largest tree the code before runs on")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        tree, target, as_of, out = args.child
        child(tree, int(target), int(as_of), out)
        return
    codes = {"after": REPO} | ({"before": Path(args.before)} if args.before else {})
    print(f"load average at start: {os.getloadavg()}")
    for dirs in [int(d) for d in args.dirs.split(",")]:
        start = time.monotonic()
        tree = build_tree(dirs, args.rf)
        target = replay_target(tree)
        as_of = target + 5 * 86_400_000
        print(f"\n== SYNTHETIC tree {tree.name}: {dirs:,} partition dirs (RF {args.rf}, {BROKERS} brokers), "
              f"target {target} (built or found in {time.monotonic() - start:.0f} s)")
        results: dict[str, list[dict]] = {c: [] for c in codes}
        for _ in range(args.runs):
            for name, code in codes.items():
                if name == "before" and dirs > args.before_max_dirs:
                    continue
                r = run_code(code, tree, target, as_of)
                results[name].append(r)
                print(f"  {name:6s} wall {r['wall_s']:7.2f} s  cpu {r['cpu_s']:7.2f} s  rss added {r['rss_added_mib']:6.0f} MiB  "
                      f"read calls {r['read_calls']:,}  findings {r['findings']:,}  sha256 {r['sha256']}  "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        med = {c: {k: statistics.median(x[k] for x in rs) for k in ("wall_s", "cpu_s", "rss_added_mib", "read_calls")}
               for c, rs in results.items() if rs}
        for c, m in med.items():
            print(f"  median {c:6s} wall {m['wall_s']:.2f} s  cpu {m['cpu_s']:.2f} s ({m['cpu_s'] / dirs * 1e6:.0f} µs a dir)"
                  f"  rss added {m['rss_added_mib']:.0f} MiB  read calls {m['read_calls']:,.0f}")
        if "before" in med:
            shas = {c: {x["sha256"] for x in rs} for c, rs in results.items() if rs}
            print(f"  cpu before/after {med['before']['cpu_s'] / med['after']['cpu_s']:.1f}x; findings identical: "
                  f"{len(shas['before'] | shas['after']) == 1}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
