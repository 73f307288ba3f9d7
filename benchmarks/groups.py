"""Consumer groups from disk: commits replayed per second, and replay-check --group wall time.

    .venv/bin/python benchmarks/groups.py                 # build .cache/bench/groups/ once, then measure
    .venv/bin/python benchmarks/groups.py --no-kafka      # skip Kafka's DumpLogSegments beside ours
    .venv/bin/python benchmarks/groups.py --prepare-only
    .venv/bin/python benchmarks/groups.py --replay-only   # only the commits replayed per second (C and pure Python)

Prints figures; asserts nothing. Targets are printed beside the measured values with PASS/MISS.

Data (built on first use under the repo's ignored ``.cache/bench/groups/``, reused while its
``MARKER.json`` names the same generator version), every batch written by a real broker:

* ``single/__consumer_offsets-0``: the real 2018 broker's ``__consumer_offsets-28`` batches
  (../shared/fixtures/real: 8,202 batches of one commit each, the old coordinator's shape)
  concatenated, base offsets rewritten (the CRC does not cover them), to >= 1,000,000 records.
* ``multi/__consumer_offsets-0``: batches written by a real Kafka 4.2.1 broker (the test
  harness) for 300 simple groups committing 1..60 partitions of a 60-partition topic, three
  times each (one batch per OffsetCommit request, as the new coordinator writes them),
  concatenated the same way to >= 1,000,000 records.

* ``wide/``: a real 4.2.1 broker's log dir (stopped cleanly) with a topic of 1,000 partitions,
  20 records each (timestamps one minute apart, 5 per batch), and the group ``wide-group``
  committed on all 1,000 partitions; ``wide-manifest/``: its ``kafka-audit collect`` manifest
  (depth headers).

Measurements run in a fresh interpreter pinned to one CPU (``sched_setaffinity``); the time is
taken inside it around ``read_groups`` only (walk, replay, decode of the winners). Medians of
``--runs`` runs, warm page cache. Kafka's side: ``DumpLogSegments --offsets-decoder`` over the
same file (a JVM, wall time including JVM start; it prints every record, it does not fold).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

BENCH = ROOT / ".cache" / "bench" / "groups"
GENERATOR_VERSION = 2
WIDE_PARTITIONS = 1000
TARGET_RECORDS = 1_000_000
TARGET_COMMITS_PER_S = 500_000
TARGET_REPLAY_CHECK_S = 2.0
CHILD_ENV: dict | None = None
"""The replay-check children's environment (None: this one's); --bytecode-cache sets it."""
FIXTURE = (ROOT.parent / "shared" / "fixtures" / "real" / "broker-dirs" / "kafka-2018-v2" / "kafka-logs"
           / "__consumer_offsets-28")


def _real_batches(partition_dirs: list[Path]) -> list[tuple[bytes, int]]:
    """(batch bytes, record count) of every plain data batch in the dirs' live segments."""
    from auditor.cluster.consumer_groups import live_segments
    from auditor.formats.log_reader import LogReader
    out = []
    for d in partition_dirs:
        for _, log in live_segments(d):
            r = LogReader(log)
            try:
                for b in r.batches():
                    if not b.is_control and not b.is_transactional and b.record_count:
                        out.append((bytes(r.read_batch_bytes(b)), b.record_count))
            finally:
                r.close()
    return out


def _concatenate(batches: list[tuple[bytes, int]], dest: Path, records: int) -> dict:
    """Write batches round robin with fresh base offsets until ``records`` records are in."""
    dest.mkdir(parents=True, exist_ok=True)
    offset = n = i = nb = 0
    with open(dest / f"{0:020d}.log", "wb") as f:
        while n < records:
            data, count = batches[i % len(batches)]
            i += 1
            (lod,) = struct.unpack_from(">i", data, 23)
            f.write(struct.pack(">q", offset) + data[8:])
            offset += lod + 1
            n += count
            nb += 1
    return {"records": n, "batches": nb, "bytes": (dest / f"{0:020d}.log").stat().st_size}


def _broker_batches(workdir: Path) -> list[tuple[bytes, int]]:
    from harness.groups import GROUP_BROKER_CONFIG, commit_offsets
    from harness.kafka import KafkaCluster
    kc = KafkaCluster(workdir, broker_config=dict(GROUP_BROKER_CONFIG, **{"offsets.topic.num.partitions": "1",
                                                                           "log.roll.ms": "604800000"}))
    kc.start()
    try:
        kc.create_topic("bench", partitions=60)
        for rnd in range(3):
            for g in range(300):
                n = 1 + (g * 7) % 60
                commit_offsets(kc, f"bench-group-{g}", {("bench", p): rnd * 100 + g + p for p in range(n)},
                               {("bench", 0): f"round {rnd}"})
        time.sleep(1)
        return _real_batches([kc.partition_dir("__consumer_offsets", 0)])
    finally:
        kc.stop()


def _wide(dest: Path) -> dict:
    """A stopped broker's log dir with a 1,000-partition topic and a group committed on all of it."""
    from harness.groups import commit_offsets
    from harness.kafka import KafkaCluster
    work = dest.parent / "wide-broker"
    kc = KafkaCluster(work, broker_config={"offsets.topic.num.partitions": "3"}, heap="1g")
    kc.start()
    t0 = (int(time.time() * 1000) - 3 * 3_600_000) // 1000 * 1000
    try:
        kc.create_topic("wide", partitions=WIDE_PARTITIONS, config={"segment.ms": "600000", "segment.jitter.ms": "0"},
                        timeout_s=180)
        for start in range(0, 20, 5):
            recs = [{"key": f"k{p}", "value": "v" * 200, "timestamp": t0 + i * 60_000, "partition": p}
                    for p in range(WIDE_PARTITIONS) for i in range(start, start + 5)]
            kc.produce("wide", recs, linger_ms=100, timeout_s=180)
        commit_offsets(kc, "wide-group", {("wide", p): 5 + p % 15 for p in range(WIDE_PARTITIONS)})
        time.sleep(1)
    finally:
        kc.stop()
    shutil.move(str(kc.log_dirs(1)[0]), str(dest))
    shutil.rmtree(work, ignore_errors=True)
    manifest = dest.parent / "wide-manifest"
    subprocess.run([sys.executable, "-m", "auditor.cli", "collect", "--out", str(manifest), "--depth", "headers",
                    "--no-progress", str(dest)], cwd=ROOT, check=True, capture_output=True)
    return {"partitions": WIDE_PARTITIONS, "t0_ms": t0, "log_dir": str(dest), "manifest": str(manifest)}


def prepare(force: bool = False) -> dict:
    marker = BENCH / "MARKER.json"
    if marker.exists() and not force:
        info = json.loads(marker.read_text())
        if info.get("generator") == GENERATOR_VERSION:
            return info
    shutil.rmtree(BENCH, ignore_errors=True)
    BENCH.mkdir(parents=True)
    info = {"generator": GENERATOR_VERSION}
    single = _real_batches([FIXTURE])
    info["single"] = dict(_concatenate(single, BENCH / "single" / "__consumer_offsets-0", TARGET_RECORDS),
                          source_batches=len(single))
    t = time.monotonic()
    multi = _broker_batches(BENCH / "broker")
    info["multi"] = dict(_concatenate(multi, BENCH / "multi" / "__consumer_offsets-0", TARGET_RECORDS),
                         source_batches=len(multi), broker_s=round(time.monotonic() - t, 1))
    shutil.rmtree(BENCH / "broker", ignore_errors=True)
    info["wide"] = _wide(BENCH / "wide")
    marker.write_text(json.dumps(info, indent=1))
    return info


_CHILD = r"""
import json, os, sys, time
os.sched_setaffinity(0, {{{cpu}}})
sys.path.insert(0, {root!r})
from auditor.cluster import offsets_segments
from auditor.cluster.consumer_groups import read_groups
from auditor.formats.offsets_records import HAVE_C_FOLD
offsets_segments.USE_C_FOLD = {use_c!r}
t0 = time.perf_counter(); p0 = time.process_time()
res = read_groups([{log_dir!r}])
wall = time.perf_counter() - t0; proc = time.process_time() - p0
print(json.dumps({{"wall_s": wall, "proc_s": proc, "records": res.records, "groups": len(res.live),
                  "offsets": sum(len(g.offsets) for g in res.live.values()), "notes": len(res.notes),
                  "c_fold": HAVE_C_FOLD and {use_c!r}}}))
"""


def measure_fold(log_dir: Path, runs: int, use_c: bool = True) -> dict:
    """``use_c=False``: the pure-Python replay, as on a machine where the C extension was not built."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    results = []
    for _ in range(runs):
        code = _CHILD.format(cpu=cpu, root=str(ROOT), log_dir=str(log_dir), use_c=use_c)
        out = subprocess.run([sys.executable, "-c", code],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    wall = statistics.median(r["wall_s"] for r in results)
    proc = statistics.median(r["proc_s"] for r in results)
    r = results[0]
    return dict(r, wall_s=wall, proc_s=proc, per_s=r["records"] / wall, per_proc_s=r["records"] / proc)


_DECODE_ALL = r"""
import json, os, sys, time
os.sched_setaffinity(0, {{{cpu}}})
sys.path.insert(0, {root!r})
from auditor.formats.log_reader import LogReader
from auditor.formats import offsets_records as o
r = LogReader({log!r})
n = 0
t0 = time.perf_counter(); p0 = time.process_time()
for b in r.batches():
    if b.is_control:
        continue
    for off, ts, k, v in o.iter_key_values(b, r.read_batch_bytes(b)):
        o.decode_key(k)
        if v is not None:
            o.decode_value(o.key_version(k), v)
        n += 1
    if n >= {limit}:
        break
print(json.dumps({{"records": n, "wall_s": time.perf_counter() - t0, "proc_s": time.process_time() - p0}}))
"""


def measure_decode_all(log: Path, limit: int = 300_000) -> dict:
    """Every record's key and value decoded into fields (no folding), for comparison."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    code = _DECODE_ALL.format(cpu=cpu, root=str(ROOT), log=str(log), limit=limit)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return dict(r, per_s=r["records"] / r["wall_s"], per_proc_s=r["records"] / r["proc_s"])


def measure_kafka(log: Path) -> float:
    from harness.kafka import kafka_classpath, tools_log4j_config
    cp = kafka_classpath()
    cmd = ["java", "-XX:+UseSerialGC", "-cp", cp]
    cfg = tools_log4j_config(cp)
    if cfg:
        cmd.insert(1, f"-Dlog4j2.configurationFile={cfg}")
    cmd += ["kafka.tools.DumpLogSegments", "--offsets-decoder", "--files", str(log)]
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


_STAGES = r"""
import json, os, sys, time
os.sched_setaffinity(0, {{{cpu}}})
sys.path.insert(0, {root!r})
t = time.perf_counter()
from auditor.cli import replay_check as rc
from auditor.replay import groups as rg, rows as replay_rows
from checks.framework.base import AuditContext
from checks.framework.config import Config
out = {{"imports_s": time.perf_counter() - t}}
now = int(time.time() * 1000)
t = time.perf_counter(); committed = rg.group_offsets_from_disk([{log_dir!r}], "wide-group").committed
out["read_group_s"] = time.perf_counter() - t
t = time.perf_counter(); rows = replay_rows.rows_from_log_dirs([{log_dir!r}], {{"wide"}}); seg, part = rows.segments, rows.partitions
out["scan_headers_s"] = time.perf_counter() - t
ctx = AuditContext(as_of_ms=now, config=Config(None), replay_at_ms={at}, replay_topics=("wide",))
searches = {{}}
t = time.perf_counter(); rc._disk_findings(seg, part, ctx, searches=searches)
out["replay_safety_check_s"] = time.perf_counter() - t
searched = {{k: v for k, v in searches.items() if v}}  # as replay-check hands them on (files read, the default)
t = time.perf_counter(); rg.resets_from_rows(seg, part, committed, {at}, now, searched)
out["group_resets_s"] = time.perf_counter() - t
out["process_cpu_s"] = time.process_time()
print(json.dumps(out))
"""


def measure_stages(log_dir: str, at: int) -> dict:
    """Where the disk-mode time goes, in one pinned interpreter."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    code = _STAGES.format(cpu=cpu, root=str(ROOT), log_dir=log_dir, at=at)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_replay_check(args: list[str], runs: int, ok=(0, 1)) -> tuple[float, float, int]:
    """The whole command (interpreter start included) pinned to one CPU: medians of runs of its wall
    and CPU time (user + system, from the child's rusage); its exit code."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    walls, cpus = [], []
    rc = None
    if CHILD_ENV is not None:  # a first run writes the bytecode cache
        subprocess.run([sys.executable, "-m", "auditor.cli", *args], cwd=ROOT, capture_output=True, env=CHILD_ENV)
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "auditor.cli", *args], cwd=ROOT, capture_output=True, text=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, {cpu}), env=CHILD_ENV)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        rc = proc.returncode
        if rc not in ok:
            raise RuntimeError(f"replay-check failed ({rc}): {proc.stderr[-2000:]}")
    return statistics.median(walls), statistics.median(cpus), rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-kafka", action="store_true", help="skip DumpLogSegments beside ours")
    ap.add_argument("--prepare-only", action="store_true")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--replay-only", action="store_true", help="only the commits replayed per second, no replay-check")
    ap.add_argument("--replay-check-only", action="store_true", help="only replay-check (and start-up), no replay rows")
    ap.add_argument("--bytecode-cache", metavar="DIR", help="replay-check with .pyc files cached under DIR (a sandbox "
                                                             "with PYTHONDONTWRITEBYTECODE compiles every module each start)")
    args = ap.parse_args()
    if args.bytecode_cache:
        global CHILD_ENV
        CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        CHILD_ENV["PYTHONPYCACHEPREFIX"] = os.path.abspath(args.bytecode_cache)
    info = prepare(args.rebuild)
    print(f"data: {BENCH}")
    for name in ("single", "multi"):
        d = info[name]
        print(f"  {name:6s} {d['records']:>9,} records in {d['batches']:>9,} batches, {d['bytes'] / 2**20:7.1f} MiB "
              f"(from {d['source_batches']:,} real batches)")
    if args.prepare_only:
        return
    if not args.replay_check_only:
        measure_folds(args)
    if args.replay_only:
        print(f"(load average now: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
        return
    measure_replay_checks(info["wide"], args.runs)


def measure_folds(args) -> None:
    print(f"\ncommits replayed per second (read_groups: walk + replay + decode of the winners; one CPU, median of "
          f"{args.runs}); target {TARGET_COMMITS_PER_S:,}/s")
    print(f"{'data':8s} {'records':>10s} {'wall s':>8s} {'rec/s (wall)':>14s} {'rec/s (cpu)':>13s} {'kafka s':>9s}  target")
    for name in ("single", "multi"):
        log_dir = BENCH / name
        for use_c in (True, False):
            m = measure_fold(log_dir, args.runs, use_c)
            kafka = "-"
            if use_c and not args.no_kafka:
                kafka = f"{measure_kafka(log_dir / '__consumer_offsets-0' / f'{0:020d}.log'):.1f}"
            verdict = "PASS" if m["per_s"] >= TARGET_COMMITS_PER_S else "MISS"
            label = name + (" C" if m["c_fold"] else " py")
            print(f"{label:9s}{m['records']:>10,} {m['wall_s']:>8.2f} {m['per_s']:>14,.0f} {m['per_proc_s']:>13,.0f} "
                  f"{kafka:>9s}  {verdict} ({m['groups']} groups, {m['offsets']} offsets, {m['notes']} notes)")
    print("  C = runs of plain batches replayed by auditor/formats/_coffsets.c; py = the pure-Python replay (no "
          "extension built)")
    d = measure_decode_all(BENCH / "multi" / "__consumer_offsets-0" / f"{0:020d}.log")
    print(f"for comparison, every record's key and value decoded into fields (no folding, first {d['records']:,} of "
          f"multi): {d['per_s']:,.0f}/s wall, {d['per_proc_s']:,.0f}/s cpu")


def measure_replay_checks(wide: dict, runs: int) -> None:
    at = str(wide["t0_ms"] + 7 * 60_000 + 500)
    print(f"\nreplay-check --group wide-group --at T on {wide['partitions']:,} partitions (whole command, "
          f"interpreter start included, pinned to one CPU, median of {runs}); target < {TARGET_REPLAY_CHECK_S:.0f} s")
    if CHILD_ENV is not None:
        print(f"  bytecode cache: on, under {CHILD_ENV['PYTHONPYCACHEPREFIX']} (as an installed package has its .pyc)")
    else:
        print("  bytecode cache: " + ("OFF (PYTHONDONTWRITEBYTECODE is set: every start compiles the project's modules)"
                                      if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"))
    for label, src in (("disk", ["--log-dir", wide["log_dir"]]), ("manifest", ["--manifest", wide["manifest"]])):
        wall, cpu, rc = measure_replay_check(["replay-check", "--group", "wide-group", "--at", at, "--json", *src], runs)
        verdict = "PASS" if wall < TARGET_REPLAY_CHECK_S else "MISS"
        print(f"  {label:9s} {wall:6.2f} s wall, {cpu:5.2f} s CPU  {verdict}  (exit {rc})")
    for label, cmd, ok in (("start-up: kafka-audit --help", ["--help"], (0,)),
                           ("start-up: replay-check --topic (a topic the log dir lacks: exit 3)",
                            ["replay-check", "--topic", "no-such-topic", "--at", at, "--log-dir", wide["log_dir"]], (3,))):
        wall, cpu, _ = measure_replay_check(cmd, runs, ok)
        print(f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    stages = measure_stages(wide["log_dir"], int(at))
    print("  disk mode by stage (one pinned interpreter): " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
    print(f"(load average now: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
