"""Key statistics (issue 23) per second on real-broker keyed segments of every codec, side by side with
the deep scan without them and Kafka's ``DumpLogSegments --deep-iteration --print-data-log`` on the
same files, in one run; the sampled mode on the big benchmark dir; memory with millions of keys.

    .venv/bin/python benchmarks/keys.py                    # builds .cache/bench-keys on first use (~1 min)
    .venv/bin/python benchmarks/keys.py --runs 5 --big .cache/bench/big-cluster/node-1/data-0
    .venv/bin/python benchmarks/keys.py LOGDIR ...         # any log dirs instead of the keyed set

Data (built on first use with a real Kafka broker from tests/harness, reused while its
``MARKER.json`` names the same generator version): one topic per codec (none, gzip, snappy, lz4,
zstd), one partition each, RECORDS records in ~500-record batches (librdkafka
``batch.num.messages``), keys: 5 % null, 65 % from a Zipf-like draw over 20,000 ``user-N`` keys,
30 % distinct 16-byte hex ids; values 60-400 bytes, half random.

Per partition dir, medians of ``--runs`` in this process, pinned to one CPU: the deep scan
(``scan_partition_dir`` depth ``deep``: every record decoded, CRCs checked), the key statistics
through the C fold (``scan_partition_keys``, the default when the extension is built) and through
the pure-Python path (``use_c=False``, the reference; ``--python-runs``), and DumpLogSegments in its
own JVM (wall time, JVM start included). The key statistics are a separate walk: ``keys / deep`` is
what they add to a deep scan. ``--big DIR``: every partition of DIR in sampled mode
(``--sample-mib`` per partition), the issue's target being under 2 s on the 2.3 GiB dir that
``benchmarks/scan.py`` builds. Memory: the process's RSS before and after folding
``--memory-keys`` distinct keys into one partition's summary. Prints figures and the load
average; asserts nothing (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.formats import filenames  # noqa: E402
from auditor.keys import sketches  # noqa: E402
from auditor.keys.partition_keys import MIB, scan_partition_keys  # noqa: E402
from auditor.scan.partition_dir import scan_partition_dir  # noqa: E402

GENERATOR_VERSION = 1
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS = 200_000
HOT_KEYS = 20_000
DEFAULT_DATA = ROOT / ".cache" / "bench-keys"
DEFAULT_BIG = ROOT / ".cache" / "bench" / "big-cluster" / "node-1" / "data-0"


# ---------------------------------------------------------------------------------------------- data
def _keys_and_values(seed: int = 23):
    rnd = random.Random(seed)
    text = b'{"event":"order","sku":"A-1234","qty":3,"ok":true},' * 8
    for i in range(RECORDS):
        r = rnd.random()
        if r < 0.05:
            key = None
        elif r < 0.70:
            key = b"user-%d" % (int(rnd.paretovariate(1.1)) % HOT_KEYS)
        else:
            key = rnd.randbytes(8).hex().encode()
        size = rnd.randrange(60, 400)
        yield key, rnd.randbytes(size // 2) + text[:size - size // 2]


def build_data(root: Path, log) -> Path:
    """The keyed log dir under ``root`` (built once); returns its path."""
    marker = root / "MARKER.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("generator_version") == GENERATOR_VERSION:
            return root / info["log_dir"]
    sys.path.insert(0, str(ROOT / "tests"))
    from confluent_kafka import Producer
    from harness.kafka import KafkaCluster

    import shutil
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cluster = KafkaCluster(root / "cluster", heap="1g")
    started = time.monotonic()
    cluster.start()
    try:
        for codec in CODECS:
            topic = f"keys-{codec}"
            cluster.create_topic(topic, partitions=1, config={"retention.ms": "-1", "retention.bytes": "-1"})
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "compression.type": codec,
                                 "linger.ms": 50, "batch.num.messages": 500, "batch.size": 1_000_000,
                                 "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False,
                                 "acks": "1"})
            errors: list[str] = []
            for key, value in _keys_and_values():
                while True:
                    try:
                        producer.produce(topic, value, key=key, partition=0,
                                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
                        break
                    except BufferError:
                        producer.poll(0.05)
            left = producer.flush(300)
            if left or errors:
                raise RuntimeError(f"produce {topic}: {left} undelivered, errors {errors[:3]}")
            log(f"  {topic}: {RECORDS:,} keyed records")
        log_dir = cluster.log_dirs(1)[0]
    finally:
        cluster.stop()
    info = {"generator_version": GENERATOR_VERSION, "log_dir": str(log_dir.resolve().relative_to(root.resolve())),
            "records_per_topic": RECORDS, "codecs": list(CODECS), "produce_seconds": round(time.monotonic() - started, 1),
            "what": "benchmarks/keys.py: keyed records written by a real Kafka broker (tests/harness), one topic per "
                    "codec, ~500-record batches; read-only from here on"}
    marker.write_text(json.dumps(info, indent=2) + "\n")
    return log_dir


# ---------------------------------------------------------------------------------------------- measures
def partition_dirs(log_dir: Path) -> list[Path]:
    return sorted(p for p in log_dir.iterdir() if p.is_dir() and filenames.parse_partition_dir(p.name) is not None
                  and not p.name.startswith("__"))


def median_s(fn, runs: int) -> tuple[float, float, object]:
    """Medians of wall and CPU seconds (this process and its waited-for children), and the last result.
    On a loaded machine the wall time counts the waits for a CPU too; the CPU time is the work."""
    walls, cpus, result = [], [], None
    for _ in range(runs):
        start, cpu0 = time.perf_counter(), _cpu_s()
        result = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu_s() - cpu0)
    return statistics.median(walls), statistics.median(cpus), result


def _cpu_s() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def deep_scan(log_dir: Path, part: Path) -> int:
    info = {"broker_id": None, "cluster_id": None, "log_dir": str(log_dir)}
    segments, _ = scan_partition_dir(part, "deep", log_dir_info=info, checkpoints_by_tp={}, root=log_dir)
    return sum(r["record_count"] or 0 for r in segments)


def dumplog_s(files: list[Path], runs: int) -> tuple[float, float] | None:
    """Wall and CPU seconds of DumpLogSegments --deep-iteration --print-data-log over ``files`` (one JVM,
    stdout to /dev/null); None when the Kafka jars are not there."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from harness.kafka import kafka_classpath
        classpath = kafka_classpath()
    except Exception as exc:  # noqa: BLE001 - a benchmark prints what it could not run
        print(f"  DumpLogSegments not run: {type(exc).__name__}: {exc}")
        return None
    cmd = ["java", "-Djava.awt.headless=true", "-cp", classpath, "kafka.tools.DumpLogSegments", "--deep-iteration",
           "--print-data-log", "--files", ",".join(map(str, files))]

    def once():
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall, cpu, _ = median_s(once, runs)
    return wall, cpu


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def codec_of(part: Path) -> str:
    name = part.name.rsplit("-", 1)[0]
    return name.split("-", 1)[1] if name.startswith("keys-") else name


def measure_dirs(log_dir: Path, args) -> None:
    print(f"{log_dir}  (seconds: wall / CPU; records per second and ratios on CPU seconds)")
    print(f"  {'partition':<15}{'records':>9}{'deep s':>13}{'keys C s':>13}{'keys py s':>14}{'DumpLog s':>14}"
          f"{'C rec/s':>11}{'py rec/s':>10}{'C/deep':>8}{'py/deep':>8}{'Dump/C':>8}")
    nan = float("nan")
    for part in partition_dirs(log_dir):
        deep_w, deep_c, records = median_s(lambda: deep_scan(log_dir, part), args.runs)
        c_w, c_c, found = median_s(lambda: scan_partition_keys(part, use_c=True), args.runs)
        if args.python_runs:
            py_w, py_c, py_found = median_s(lambda: scan_partition_keys(part, use_c=False), args.python_runs)
            same = found.stats.to_bytes() == py_found.stats.to_bytes()
        else:  # --python-runs 0: the reference path not run, nothing compared
            py_w, py_c, same = nan, nan, True
        logs = sorted(part.glob("*.log"))
        dump_w, dump_c = (dumplog_s(logs, args.dumplog_runs) if args.dumplog_runs else None) or (nan, nan)
        keyed = found.stats.records
        print(f"  {part.name:<15}{keyed:>9,}{deep_w:>7.2f}/{deep_c:<5.2f}{c_w:>7.3f}/{c_c:<5.3f}{py_w:>8.2f}/{py_c:<5.2f}"
              f"{dump_w:>8.2f}/{dump_c:<5.2f}{keyed / c_c:>11,.0f}{keyed / py_c:>10,.0f}{c_c / deep_c:>8.2f}"
              f"{py_c / deep_c:>8.2f}{dump_c / c_c:>8.1f}{'' if same else '  C != Python!'}")
        if records != keyed:
            print(f"    (deep scan rows count {records:,} records; key statistics {keyed:,})")


def measure_sampled(big: Path, args) -> None:
    parts = partition_dirs(big)
    sample = int(args.sample_mib * MIB)

    def run():
        read = records = 0
        for part in parts:
            found = scan_partition_keys(part, sample_bytes=sample)
            read += found.scanned_bytes
            records += found.stats.records
        return read, records
    total = sum(p.stat().st_size for part in parts for p in part.glob("*.log"))
    wall, cpu, (read, records) = median_s(run, args.runs)
    print(f"sampled mode on {big}: {len(parts)} partitions, {total / (1 << 30):.2f} GiB of .log, newest "
          f"{args.sample_mib:g} MiB each: {wall:.3f} s wall, {cpu:.3f} s CPU (medians of {args.runs}; target < 2 s), "
          f"{read / MIB:,.1f} MiB read, {records:,} records")


def measure_memory(n: int) -> None:
    stats = sketches.KeyStats()
    fold = stats.c_fold()
    before = rss_mib()
    rnd = random.Random(3)
    started = time.perf_counter()
    for i in range(n):
        fold.add(b"id-%d-%d" % (i, rnd.getrandbits(32)), 100)
    took = time.perf_counter() - started
    after = rss_mib()
    stats.absorb(fold).seal()
    print(f"memory: {n:,} distinct keys folded into one partition's summary (C, one add call per key from Python: "
          f"{n / took:,.0f} keys/s): RSS {before:,.1f} -> {after:,.1f} MiB; the summary keeps "
          f"{len(stats.heavy.counters):,} heavy-hitter counters, {len(stats.sample.entries):,} sampled keys, "
          f"{len(stats.info):,} fingerprints")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log_dirs", nargs="*", type=Path)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python-runs", type=int, default=1, help="runs of the pure-Python path (slow; 0: not run, not compared)")
    parser.add_argument("--dumplog-runs", type=int, default=1, help="0: no DumpLogSegments")
    parser.add_argument("--big", type=Path, default=DEFAULT_BIG if DEFAULT_BIG.is_dir() else None)
    parser.add_argument("--sample-mib", type=float, default=1.0)
    parser.add_argument("--memory-keys", type=int, default=3_000_000)
    parser.add_argument("--cpu", type=int, default=0, help="CPU to pin to (-1: not pinned)")
    args = parser.parse_args()
    if sketches._ckeys is None:
        print("auditor.keys._ckeys is not built: run setup.py build_ext --inplace", file=sys.stderr)
        return 2
    if args.cpu >= 0:
        os.sched_setaffinity(0, {args.cpu})
    log_dirs = args.log_dirs or [build_data(args.data, lambda m: print(m, file=sys.stderr, flush=True))]
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}  load average {os.getloadavg()}  runs {args.runs} "
          f"(Python path {args.python_runs}, DumpLogSegments {args.dumplog_runs}), pinned to CPU {args.cpu}")
    for log_dir in log_dirs:
        measure_dirs(log_dir, args)
    if args.big is not None:
        measure_sampled(args.big, args)
    if args.memory_keys:
        measure_memory(args.memory_keys)
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
