"""A nightly audit a broker does not notice: incremental scans, page cache left as it was, a fast demo.

    .venv/bin/python benchmarks/nightly.py              # data from benchmarks/scan.py + a generated dir
    .venv/bin/python benchmarks/nightly.py --demo-runs 3 --skip-generated
    .venv/bin/python benchmarks/nightly.py --only-cli --demo-runs 3 --live-audit-runs 3 --baseline REF
    .venv/bin/python benchmarks/nightly.py --skip-generated --skip-residency --demo-runs 0 --rounds 15 --baseline REF

One run prints, side by side:

* **first vs second run** at ``headers`` depth with ``--state`` on (1) the largest real-broker log dir
  ``benchmarks/scan.py`` builds (``big``: 2.3 GiB, 47 segments) and (2) a generated log dir of
  >= 100,000 segments (copies of the ``many`` set's 2,561 real segments into 40 x 8 partition
  dirs: real broker bytes, made-up topic names). Bytes read: ``read_bytes`` of ``/proc/<pid>/io``
  (what reached the disk: meaningful with a cold cache) and ``rchar`` (every byte the process read
  through system calls, cache or not: the scanner's own count); wall time of the scan only (rows
  consumed and dropped, as ``collect`` streams them). Beside them an ``index``-depth scan without
  state. Cold: ``sync; echo 3 > /proc/sys/vm/drop_caches`` before each run (said when it fails).
  ``--rounds N``: the second run and the index scan repeated N times, alternated (the same load),
  medians and how many rounds the second run took no more CPU than the index scan beside it (big;
  generated and cold at most 3 and 5); with ``--baseline REF`` also REF's second run on big (its
  own first run and state before the rounds): the before/after of a change to incremental scans.
* **page-cache residency** of the log dir's files (``mincore``, one path per inode) before and after a
  full ``headers`` scan, every file evicted first with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (no root
  needed) and every other one read back; with ``PageCacheCare`` (``collect --nice``) and without it.
  Scan workers are pinned to one CPU (``WORKER_CPU``): compare CPU times on a shared machine.
* **``kafka-audit demo``** end to end, a fresh process each run: wall and CPU time (user + sys of the
  process tree), medians, the load average, and whether every run wrote the same findings document.
* **``kafka-audit audit`` on 6 live log dirs** (``--live-audit-runs``): a real 3-broker cluster with
  2 log dirs each, started here with the test harness (tests/harness), topics produced (replicated,
  rolled, mixed codecs, skewed, old timestamps), audited while the brokers run (``--as-of`` fixed so
  runs compare), then stopped.
* ``--baseline GIT_REF`` runs both also with that ref's code (``git archive`` + this tree's built C
  extensions, on ``PYTHONPATH``), interleaved with the current tree so both see the same load: the
  before/after of a change, findings compared.

Each scan runs in a fresh interpreter (``--worker``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

GEN_COPIES = 40
MiB = 1024 * 1024
WORKER_CPU = 1
"""Each scan worker is pinned to this CPU (-1: not pinned): its CPU time is the figure to compare."""


def proc_io() -> dict[str, int]:
    out = {}
    with open("/proc/self/io") as fh:
        for line in fh:
            k, v = line.split(":")
            out[k.strip()] = int(v)
    return out


def worker(depth: str, log_dir: str, state: str | None, care: bool) -> dict:
    from auditor.scan import iter_log_dir

    if WORKER_CPU >= 0 and WORKER_CPU < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {WORKER_CPU})  # CPU time comparable on a shared machine
    io0 = proc_io()
    c0 = time.process_time()
    t0 = time.perf_counter()
    rows = 0
    info = None
    for seg_rows, _prow, i in iter_log_dir(log_dir, depth, state_dir=state, page_cache_care=care):
        rows += len(seg_rows)
        if i is not None:
            info = i
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    io1 = proc_io()
    res = {"wall_s": wall, "cpu_s": cpu, "rows": rows, "rchar": io1["rchar"] - io0["rchar"],
           "read_bytes": io1["read_bytes"] - io0["read_bytes"]}
    if info and info.get("scan_state"):
        res.update(info["scan_state"])
    return res


def run_worker(depth: str, log_dir: Path, state: Path | None = None, care: bool = False,
               tree: Path | None = None) -> dict:
    """One scan in a fresh interpreter; ``tree``: with that tree's code (``baseline_tree``)."""
    root = tree or REPO
    cmd = [sys.executable, str(root / "benchmarks" / "nightly.py"), "--worker", depth, str(log_dir), str(state or ""),
           "1" if care else "0"]
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=root, check=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def drop_caches() -> bool:
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


def generated_dir(root: Path, many: Path) -> Path:
    """>= 100,000 segments: the 'many' set's partition dirs linked GEN_COPIES times (real bytes)."""
    target = root / "generated-100k" / "data"
    marker = root / "generated-100k" / "DONE"
    if marker.exists():
        return target
    shutil.rmtree(target.parent, ignore_errors=True)
    target.mkdir(parents=True)
    for name in ("meta.properties",):
        shutil.copy2(many / name, target / name)
    parts = sorted(p for p in many.iterdir() if p.is_dir() and p.name.startswith("many-"))
    for k in range(GEN_COPIES):
        for p in parts:
            # hard links: real bytes without 2 GiB of copies; each link is its own directory entry, so
            # the scan and the state see 102,400 segments (the proof keys on dir name + base offset)
            shutil.copytree(p, target / f"gen{k:02d}-{p.name.rsplit('-', 1)[1]}", copy_function=os.link)
    marker.write_text("ok\n")
    return target


def all_files(d: Path) -> list[Path]:
    """Every regular file under ``d``, one path per inode (the generated dir is hard links: 40 paths
    per file; residency is the inode's)."""
    seen = set()
    out = []
    for p in sorted(p for p in d.rglob("*") if p.is_file() and not p.is_symlink()):
        st = p.stat()
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            out.append(p)
    return out


def evict(files: list[Path]) -> None:
    """Each file's clean pages out of the page cache (``posix_fadvise(POSIX_FADV_DONTNEED)``: no root
    needed, nothing else evicted; pages another process maps or that are dirty may stay)."""
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def residency_of(files: list[Path]) -> tuple[int, int]:
    from auditor.scan.pagecache import file_residency

    res = tot = 0
    for f in files:
        r, t = file_residency(f)
        res += r
        tot += t
    return res, tot


def make_half_resident(files: list[Path]) -> None:
    for f in files[::2]:
        with open(f, "rb") as fh:
            while fh.read(8 * MiB):
                pass


def incremental(label: str, log_dir: Path, cold: bool, P, rounds: int = 1, baseline: Path | None = None,
                baseline_ref: str = "") -> None:
    """First run, then ``rounds`` rounds of (second run, [the baseline's second run,] index scan)
    alternated so that they see the same load (medians when rounds > 1), then a headers scan
    without state. The baseline's own first run (its state format) comes before the rounds."""
    state = Path(tempfile.mkdtemp(prefix="kafka-audit-state-"))
    base_state = Path(tempfile.mkdtemp(prefix="kafka-audit-state-base-")) if baseline is not None else None
    try:
        def one(depth: str, st: Path | None, tree: Path | None = None) -> dict:
            if cold:
                drop_caches()
            return run_worker(depth, log_dir, st, tree=tree)

        first = one("headers", state)
        repeated: dict[str, list[dict]] = {"second (headers, --state)": []}
        if baseline is not None:
            one("headers", base_state, baseline)
            repeated[f"second, baseline {baseline_ref}"[:28]] = []
        repeated["index, no state"] = []
        load = [os.getloadavg()[0]]
        for _ in range(rounds):
            for name, (depth, st, tree) in zip(repeated, [("headers", state, None),
                                                          *([("headers", base_state, baseline)] if baseline else []),
                                                          ("index", None, None)]):
                repeated[name].append(one(depth, st, tree))
        load.append(os.getloadavg()[0])
        runs = {"first (headers, --state)": first,
                **{name: _median_run(rs) for name, rs in repeated.items()},
                "headers, no state": one("headers", None)}
        second, index = runs["second (headers, --state)"], runs["index, no state"]
        P(f"\n{label}: {log_dir}  ({first['rows']:,} segment rows; cache {'COLD' if cold else 'warm'}; "
          f"{rounds} round{'s' if rounds > 1 else ''} of the repeated runs, medians; load {load[0]:.1f}-{load[1]:.1f})")
        P(f"  {'run':<28} {'wall s':>8} {'CPU s':>8} {'rchar':>14} {'read_bytes':>14} {'reused':>8} "
          f"{'continued':>9} {'read':>8}")
        for name, r in runs.items():
            P(f"  {name:<28} {r['wall_s']:>8.4f} {r['cpu_s']:>8.4f} {r['rchar']:>14,} {r['read_bytes']:>14,} "
              f"{r.get('reused', '-'):>8} {r.get('continued', '-'):>9} {r.get('read', '-'):>8}")
        for key in ("rchar", "read_bytes"):
            if first[key]:
                pct = 100 * second[key] / first[key]
                P(f"  second/first {key:<10}: {pct:7.3f} %   target < 1 %: {'PASS' if pct < 1 else 'MISS'}")
        for key, what in (("cpu_s", "CPU"), ("wall_s", "wall")):
            P(f"  second run vs index scan, {what:<4}: {second[key]:.4f} s vs {index[key]:.4f} s   "
              f"target <= index: {'PASS' if second[key] <= index[key] else 'MISS'}")
        if rounds > 1:
            wins = sum(s["cpu_s"] <= i["cpu_s"] for s, i in zip(repeated["second (headers, --state)"],
                                                              repeated["index, no state"]))
            P(f"  rounds where the second run took no more CPU than the index scan next to it: {wins} of {rounds}")
    finally:
        shutil.rmtree(state, ignore_errors=True)
        if base_state is not None:
            shutil.rmtree(base_state, ignore_errors=True)


def _median_run(runs: list[dict]) -> dict:
    """Medians of the numeric figures of repeated runs (the counts are the same in each)."""
    out = dict(runs[-1])
    for key in ("wall_s", "cpu_s", "rchar", "read_bytes"):
        out[key] = statistics.median(r[key] for r in runs)
    out["rchar"], out["read_bytes"] = int(out["rchar"]), int(out["read_bytes"])
    return out


def residency(label: str, log_dir: Path, P) -> None:
    """Every file evicted (fadvise), every other one read back, a full headers scan: residency
    before and after, with PageCacheCare and without."""
    files = all_files(log_dir)
    for care in (True, False):
        evict(files)
        make_half_resident(files)
        before = residency_of(files)
        r = run_worker("headers", log_dir, None, care)
        after = residency_of(files)
        b, a = before[0] / before[1] * 100, after[0] / after[1] * 100
        what = "with PageCacheCare (collect --nice)" if care else "without (plain scan)"
        verdict = f"target within 1 point: {'PASS' if abs(a - b) <= 1 else 'MISS'}" if care else ""
        P(f"  {label:<10} {what:<38} resident {b:6.2f} % -> {a:6.2f} %  ({before[1]:,} pages; "
          f"scan {r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU)  {verdict}")


def baseline_tree(ref: str) -> Path:
    """The files of git ``ref`` (``git archive``) plus this tree's built C extensions, to run the
    code as it was (``PYTHONPATH``) with the same virtualenv, side by side with the current tree."""
    tree = Path(tempfile.mkdtemp(prefix="kafka-audit-baseline-"))
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for so in REPO.glob("auditor/**/*.so"):
        shutil.copy2(so, tree / so.relative_to(REPO))
    return tree


def cli_run(tree: Path | None, args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """``kafka-audit ARGS`` in a fresh process, from ``tree`` (None: this tree, its console
    script): (wall s, CPU s = user + sys of the process and its children, the process)."""
    import resource

    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    if tree is None:
        cmd = [str(REPO / ".venv" / "bin" / "kafka-audit"), *args]
    else:  # sys.path: '' (the cwd, a neutral dir), then PYTHONPATH, before the editable install of REPO
        env["PYTHONPATH"] = str(tree)
        cmd = [str(REPO / ".venv" / "bin" / "python"), "-c",
               "import sys; from auditor.cli import main; sys.exit(main(sys.argv[1:]))", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, proc


VOLATILE_KEYS = {"elapsed_s", "versions", "scanned_at_ms", "scanned_at_utc"}


def normal_document(path: Path, root: Path | None = None):
    """A findings JSON without what differs between two runs on the same input (the run's own
    paths as ROOT, elapsed time, versions, scan times)."""
    text = path.read_text()
    if root is not None:
        text = text.replace(str(root), "ROOT")

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in VOLATILE_KEYS}
        return [strip(x) for x in v] if isinstance(v, list) else v

    return strip(json.loads(text))


def side_by_side(label: str, n: int, trees: dict, make_args, P, same_key=None) -> None:
    """``n`` rounds, each running every tree once (interleaved: both see the same load); prints
    medians of wall and CPU time, the load average, and whether every run's document was equal."""
    walls: dict = {k: [] for k in trees}
    cpus: dict = {k: [] for k in trees}
    docs = []
    loads = [os.getloadavg()[0]]
    for _ in range(n):
        for name, tree in trees.items():
            out = Path(tempfile.mkdtemp(prefix="kafka-audit-bench-"))
            wall, cpu, proc = cli_run(tree, make_args(out))
            if proc.returncode not in (0, 1):
                raise RuntimeError(f"{name}: exit {proc.returncode}: {proc.stderr[-2000:]}")
            walls[name].append(wall)
            cpus[name].append(cpu)
            doc = normal_document(out / "findings.json", out)
            docs.append(same_key(doc) if same_key else doc)
            shutil.rmtree(out, ignore_errors=True)
        loads.append(os.getloadavg()[0])
    P(f"\n{label}: {n} round(s), load average {min(loads):.1f}-{max(loads):.1f}")
    P(f"  {'code':<22} {'wall s (median)':>16} {'CPU s (median)':>15}   runs: wall / CPU")
    for name in trees:
        P(f"  {name:<22} {statistics.median(walls[name]):>16.2f} {statistics.median(cpus[name]):>15.2f}   "
          + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in zip(walls[name], cpus[name])))
    P(f"  same findings document in every run: {'yes' if all(d == docs[0] for d in docs) else 'NO'}")
    return walls, cpus


def demo_runs(n: int, P, baseline: str | None = None) -> None:
    """``kafka-audit demo`` end to end, fresh processes; with ``baseline`` beside that ref's code."""
    trees = {"this tree": None}
    if baseline:
        trees = {f"baseline {baseline}": baseline_tree(baseline), **trees}
    # the engine's "why" names LOCAL_MAX_SEGMENT_ROWS, which a change may move: its name is compared
    try:
        walls, _cpus = side_by_side("kafka-audit demo (28 segment rows, engine auto)", n, trees,
                                    lambda out: ["demo", "--out", str(out)], P,
                                    same_key=lambda d: {**d, "engine": d["engine"]["name"]})
    finally:
        for tree in trees.values():
            if tree is not None:
                shutil.rmtree(tree, ignore_errors=True)
    med = statistics.median(walls["this tree"])
    P(f"  target < 15 s wall: {'PASS' if med < 15 else 'MISS'} ({med:.1f} s; CPU is the figure to trust on a "
      f"loaded machine)")


def live_audit_runs(n: int, P, baseline: str | None = None) -> None:
    """``kafka-audit audit`` on the 6 live log dirs of a real 3-broker cluster (2 log dirs each),
    started here with the test harness and stopped at the end."""
    sys.path.insert(0, str(REPO / "tests"))
    from harness.kafka import KafkaCluster, kafka_classpath

    work = Path(tempfile.mkdtemp(prefix="kafka-audit-live-"))
    kc = KafkaCluster(work, brokers=3, log_dirs_per_broker=2, classpath=kafka_classpath())
    trees = {"this tree": None}
    if baseline:
        trees = {f"baseline {baseline}": baseline_tree(baseline), **trees}
    try:
        kc.start()
        produce_live_data(kc)
        log_dirs = [str(d) for node in sorted(kc.nodes) for d in kc.log_dirs(node)]
        as_of = str(int(time.time() * 1000))   # one audit time: time-based findings comparable run to run
        args = [a for d in log_dirs for a in ("--log-dir", d)]
        side_by_side(f"kafka-audit audit on {len(log_dirs)} live log dirs (3 brokers x 2, brokers running)", n, trees,
                     lambda out: ["audit", *args, "--as-of", as_of, "--json", str(out / "findings.json"),
                                  "--out", str(out / "report.html"), "--no-progress"],
                     P, same_key=lambda d: (d["counts"], d["findings"], d["engine"]["name"]))
    finally:
        kc.stop()
        for tree in [work, *trees.values()]:
            if tree is not None:
                shutil.rmtree(tree, ignore_errors=True)


def produce_live_data(kc) -> None:
    """Replicated topics with rolled segments, mixed codecs, a skewed topic and old timestamps."""
    kc.create_topic("orders", partitions=4, replication_factor=3)
    kc.create_topic("skewed", partitions=3, replication_factor=3)
    kc.create_topic("events", partitions=2, replication_factor=2, config={"segment.ms": "60000",
                                                                            "segment.jitter.ms": "0"})
    base = int(time.time() * 1000) - 3 * 86_400_000
    for i, codec in enumerate(("none", "zstd", "gzip", "lz4")):
        kc.produce("orders", [dict(key=f"k{j}", value=os.urandom(600), timestamp=base + 1000 * j, partition=p)
                              for p in range(4) for j in range(i * 800, (i + 1) * 800)], compression=codec)
    kc.produce("skewed", [dict(key=None, value=os.urandom(600), timestamp=base + j, partition=0) for j in range(4000)])
    kc.produce("skewed", [dict(key=None, value=f"{j:08d}", timestamp=base - 86_400_000 + j, partition=1 + j % 2)
                          for j in range(200)], compression="snappy")
    for p in range(2):
        kc.roll_segments("events", p, segments=4 + 2 * p, records_per_segment=20, base_timestamp_ms=base)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--demo-runs", type=int, default=3)
    ap.add_argument("--live-audit-runs", type=int, default=0,
                    help="rounds of `audit` on the 6 live log dirs of a 3-broker test cluster (started here)")
    ap.add_argument("--baseline", metavar="GIT_REF",
                    help="run the demo, the live audit and big's second run also with this ref's code, "
                         "interleaved (before/after)")
    ap.add_argument("--only-cli", action="store_true", help="only the demo and live-audit parts (no scans)")
    ap.add_argument("--skip-generated", action="store_true")
    ap.add_argument("--cold", action="store_true",
                    help="also cold-cache runs on 'big' (drops the page cache of the whole machine several times: "
                         "every other process on it slows down)")
    ap.add_argument("--root", default=str(REPO / ".cache" / "bench"))
    ap.add_argument("--skip-residency", action="store_true", help="no page-cache residency part")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the second run and the index scan this many times, alternated, and give medians "
                         "(also the baseline's second run with --baseline)")
    args = ap.parse_args(argv)
    if args.worker:
        depth, log_dir, state, care = args.worker
        print(json.dumps(worker(depth, log_dir, state or None, care == "1")))
        return 0
    if args.only_cli:
        P = print
        P(f"nightly benchmark, CLI parts ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs)")
        if args.demo_runs:
            demo_runs(args.demo_runs, P, args.baseline)
        if args.live_audit_runs:
            live_audit_runs(args.live_audit_runs, P, args.baseline)
        return 0
    from scan import ensure_data

    root = Path(args.root)
    info = ensure_data(root, False, print)
    big = root / info["big"]["log_dir"]
    many = root / info["many"]["log_dir"]
    P = print
    cold = drop_caches() if args.cold else False
    P(f"nightly benchmark ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs, load "
      f"{os.getloadavg()[0]:.1f}); cold cache: "
      f"{'dropping caches works' if cold else ('dropping caches does NOT work here' if args.cold else 'not asked (--cold)')}")
    sets = [("big", big)]
    if not args.skip_generated:
        sets.append(("generated", generated_dir(root, many)))
    base = baseline_tree(args.baseline) if args.baseline else None
    try:
        for label, d in sets:
            # (a generated round is ~20 s of scans: at most 3; its baseline would repeat a 60 s first run)
            incremental(label, d, False, P, args.rounds if label == "big" else min(args.rounds, 3),
                        base if label == "big" else None, args.baseline or "")
        if cold:
            incremental("big", big, True, P, min(args.rounds, 5), None)  # (each run drops the caches)
    finally:
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)
    if not args.skip_residency:
        P("\npage-cache residency of the log dir's files (one path per inode), every file evicted with "
          "posix_fadvise(DONTNEED), every other one read back:")
        for label, d in sets:
            residency(label, d, P)
    if args.demo_runs:
        demo_runs(args.demo_runs, P, args.baseline)
    if args.live_audit_runs:
        live_audit_runs(args.live_audit_runs, P, args.baseline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
