"""Scanner throughput per depth on real-broker data, beside Kafka's DumpLogSegments and `cat`.

    .venv/bin/python benchmarks/scan.py                 # build the data set once, then measure
    .venv/bin/python benchmarks/scan.py --runs 5 --cold # also try cold-cache figures (needs root)

Prints figures; asserts nothing. The targets are printed beside the measured values with
PASS/MISS so that a regression is visible, not so that the script fails.

Data (built on the first run, kept under the repo's ignored ``.cache/bench/`` and reused while
its ``MARKER.json`` names the same generator version):

* ``big/``   a real Kafka 4.2.1 broker's log dir, >= 2 GiB of ``.log`` bytes: one topic per
             codec (none, gzip, snappy, lz4, zstd), 3 partitions each, partition 0 written in
             ~500-record batches, partition 1 in ~10-record batches, partition 2 in 1-record
             batches; values of 200 B .. 4 KiB, about 40 % random bytes and 60 % repeated text;
             ``segment.bytes`` = 64 MiB.
* ``many/``  another broker's log dir with >= 2,000 small segments (record-time roll:
             ``segment.ms`` = 60 s, record groups spaced 2 min apart), for the per-segment cost
             of the ``index`` depth.

Every measurement runs in a fresh Python subprocess pinned to one CPU (``sched_setaffinity``);
its wall time is measured inside it around ``scan_log_dirs`` only (interpreter start and
imports excluded, reported apart), and its peak RSS is the child's ``ru_maxrss`` from
``wait4``. Figures are medians of ``--runs`` runs, after a ``cat`` pass that warms the page
cache: they are warm-cache figures unless ``--cold`` is given and dropping caches works.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GENERATOR_VERSION = 1
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: partition -> records per batch (librdkafka ``batch.num.messages``)
BATCH_RECORDS = {0: 500, 1: 10, 2: 1}
MiB = 1024 * 1024
SEGMENT_BYTES = 64 * MiB
#: target .log bytes per (codec, partition); the 'none' topic carries the bulk
TARGET_BYTES = {
    ("none", 0): 700 * MiB, ("none", 1): 200 * MiB, ("none", 2): 60 * MiB,
    **{(c, 0): 220 * MiB for c in CODECS[1:]},
    **{(c, 1): 80 * MiB for c in CODECS[1:]},
    **{(c, 2): 30 * MiB for c in CODECS[1:]},
}
MIN_TOTAL_BYTES = 2 * 1024 * MiB
MANY_PARTITIONS = 8
MANY_GROUPS_PER_PARTITION = 320          # -> ~2,560 segments
MANY_RECORDS_PER_GROUP = 40
MANY_SEGMENT_MS = 60_000
NO_RETENTION = {"retention.ms": "-1", "retention.bytes": "-1"}


# ---------------------------------------------------------------------------------------
# Data set
# ---------------------------------------------------------------------------------------


def _value_pool(n: int = 4096, seed: int = 7) -> list[bytes]:
    """Values of 200 B .. 4 KiB: ~40 % random bytes, the rest repeated JSON-ish text."""
    rnd = random.Random(seed)
    text = b"".join(
        b'{"event":"page_view","user":"u%05d","path":"/catalog/item/%d","ok":true},' % (i % 97, i % 13)
        for i in range(120))
    pool = []
    for i in range(n):
        size = int(min(4096, max(200, rnd.lognormvariate(6.7, 0.6))))
        rnd_part = int(size * 0.4)
        start = rnd.randrange(0, len(text) - size)
        pool.append(rnd.randbytes(rnd_part) + text[start:start + size - rnd_part])
    return pool


def _log_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.glob("*.log")) if d.is_dir() else 0


def _produce_until(kc, topic: str, partition: int, codec: str, per_batch: int, target: int,
                   pool: list[bytes]) -> int:
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": kc.bootstrap_servers, "compression.type": codec,
        "acks": "1", "enable.idempotence": False, "linger.ms": 50 if per_batch > 1 else 0,
        "batch.num.messages": per_batch, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "message.timeout.ms": 300_000,
    }
    p = Producer(conf)
    pdir = kc.partition_dir(topic, partition)
    errors: list[str] = []

    def cb(err, _msg):
        if err is not None:
            errors.append(str(err))

    chunk = 20_000 if per_batch > 1 else 5_000
    sent = 0
    i = 0
    npool = len(pool)
    while _log_bytes(pdir) < target:
        for _ in range(chunk):
            v = pool[i % npool]
            i += 1
            while True:
                try:
                    p.produce(topic, v, partition=partition, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        sent += chunk
        left = p.flush(300)
        if left or errors:
            raise RuntimeError(f"produce {topic}-{partition}: {left} undelivered, errors {errors[:3]}")
    return sent


def _produce_many(kc, topic: str, pool: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kc.bootstrap_servers, "compression.type": "none",
                  "acks": "1", "enable.idempotence": False, "linger.ms": 5,
                  "batch.num.messages": 10, "queue.buffering.max.messages": 1_000_000,
                  "message.timeout.ms": 300_000})
    step = 2 * MANY_SEGMENT_MS + 1
    base = int(time.time() * 1000) - MANY_GROUPS_PER_PARTITION * step
    errors: list[str] = []

    def cb(err, _msg):
        if err is not None:
            errors.append(str(err))

    for g in range(MANY_GROUPS_PER_PARTITION):
        t0 = base + g * step
        for part in range(MANY_PARTITIONS):
            for r in range(MANY_RECORDS_PER_GROUP):
                v = pool[(g * 131 + part * 17 + r) % len(pool)][:600]
                p.produce(topic, v, partition=part, timestamp=t0 + r, on_delivery=cb)
            p.poll(0)
        # flush per group: a group's batches never share a batch with the next group's
        p.flush(60)
        if errors:
            raise RuntimeError(f"produce {topic}: {errors[:3]}")


def _dir_facts(log_dir: Path) -> dict:
    logs = sorted(log_dir.glob("*-*/*.log"))
    return {"log_files": len(logs), "log_bytes": sum(p.stat().st_size for p in logs)}


def _harness():
    sys.path.insert(0, str(REPO / "tests"))
    from harness.kafka import KafkaCluster, kafka_classpath
    return KafkaCluster, kafka_classpath


def _build_big(root: Path, pool: list[bytes], log) -> dict:
    KafkaCluster, _ = _harness()
    work = root / "big-cluster"
    shutil.rmtree(work, ignore_errors=True)
    kc = KafkaCluster(work, broker_config={"log.segment.bytes": str(SEGMENT_BYTES),
                                           "message.max.bytes": str(2 * MiB)}, heap="1g")
    facts: dict = {"topics": {}}
    t_all = time.monotonic()
    kc.start()
    try:
        for codec in CODECS:
            topic = f"bench-{codec}"
            kc.create_topic(topic, partitions=3, config={"segment.bytes": SEGMENT_BYTES, **NO_RETENTION})
            for part, per_batch in BATCH_RECORDS.items():
                t = time.monotonic()
                n = _produce_until(kc, topic, part, codec, per_batch, TARGET_BYTES[(codec, part)], pool)
                size = _log_bytes(kc.partition_dir(topic, part))
                log(f"  {topic}-{part}: {n:,} records in ~{per_batch}-record batches, "
                    f"{size / MiB:,.0f} MiB on disk, {time.monotonic() - t:.1f} s")
                facts["topics"][f"{topic}-{part}"] = {"codec": codec, "records_per_batch": per_batch,
                                                      "records_produced": n, "log_bytes": size}
        data_dir = kc.log_dirs(1)[0]
        total = _dir_facts(data_dir)["log_bytes"]
        while total < MIN_TOTAL_BYTES:  # top up the uncompressed bulk partition
            extra = _produce_until(kc, "bench-none", 0, "none", 500,
                                   _log_bytes(kc.partition_dir("bench-none", 0)) + MIN_TOTAL_BYTES - total, pool)
            facts["topics"]["bench-none-0"]["records_produced"] += extra
            facts["topics"]["bench-none-0"]["log_bytes"] = _log_bytes(kc.partition_dir("bench-none", 0))
            total = _dir_facts(data_dir)["log_bytes"]
    finally:
        kc.stop()  # clean shutdown: indexes trimmed, recovery checkpoints written
    facts["produce_seconds"] = round(time.monotonic() - t_all, 1)
    facts["log_dir"] = str(data_dir.resolve().relative_to(root.resolve()))
    facts.update(_dir_facts(data_dir))
    return facts


def _build_many(root: Path, pool: list[bytes], log) -> dict:
    KafkaCluster, _ = _harness()
    work = root / "many-cluster"
    shutil.rmtree(work, ignore_errors=True)
    kc = KafkaCluster(work)
    t = time.monotonic()
    kc.start()
    try:
        kc.create_topic("many", partitions=MANY_PARTITIONS,
                        config={"segment.ms": MANY_SEGMENT_MS, "segment.jitter.ms": 0, **NO_RETENTION})
        _produce_many(kc, "many", pool)
        data_dir = kc.log_dirs(1)[0]
    finally:
        kc.stop()
    facts = {"topic": "many", "partitions": MANY_PARTITIONS,
             "groups_per_partition": MANY_GROUPS_PER_PARTITION,
             "records_per_group": MANY_RECORDS_PER_GROUP, "segment_ms": MANY_SEGMENT_MS,
             "produce_seconds": round(time.monotonic() - t, 1),
             "log_dir": str(data_dir.resolve().relative_to(root.resolve()))}
    facts.update(_dir_facts(data_dir))
    log(f"  many: {facts['log_files']:,} segments, {facts['log_bytes'] / MiB:,.1f} MiB, {facts['produce_seconds']} s")
    return facts


def ensure_data(root: Path, rebuild: bool, log) -> dict:
    marker = root / "MARKER.json"
    if marker.exists() and not rebuild:
        info = json.loads(marker.read_text())
        if info.get("generator_version") == GENERATOR_VERSION:
            return info
        log(f"{marker}: generator version {info.get('generator_version')} != {GENERATOR_VERSION}: rebuilding")
    root.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    pool = _value_pool()
    log(f"building the data set under {root} (real Kafka broker; a few minutes) ...")
    big = _build_big(root, pool, log)
    many = _build_many(root, pool, log)
    info = {
        "generator_version": GENERATOR_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "kafka_version": "4.2.1",
        "what": "benchmarks/scan.py data set: log dirs written by real Kafka brokers (harness), "
                "brokers stopped cleanly after producing; read-only from here on",
        "value_sizes": "200 B .. 4 KiB (lognormal), ~40 % random bytes + repeated JSON-ish text",
        "big": {**big, "segment_bytes": SEGMENT_BYTES,
                "layout": "topic bench-<codec> for codec in none/gzip/snappy/lz4/zstd; partition 0 "
                          "~500 records/batch, 1 ~10 records/batch, 2 one record per batch"},
        "many": many,
    }
    marker.write_text(json.dumps(info, indent=2) + "\n")
    return info


# ---------------------------------------------------------------------------------------
# Worker: one measurement in a fresh interpreter
# ---------------------------------------------------------------------------------------


def worker(depth: str, dirs: list[str], cpu: int | None, profile: str | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    t_import = time.perf_counter()
    import auditor.scan.segment
    from auditor.scan import scan_log_dirs
    import_s = time.perf_counter() - t_import
    if depth == "headers-py":  # the pure-Python walker, as on a machine without the C extension
        auditor.scan.segment.USE_C_WALK = False
        depth = "headers"
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    c0 = time.process_time()
    t0 = time.perf_counter()
    res = scan_log_dirs(dirs, depth)
    wall = time.perf_counter() - t0
    cpu_s = time.process_time() - c0
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    segs = [r for r in res.segments if r.get("log_size_bytes") is not None]
    out = {
        "depth": depth, "wall_s": wall, "cpu_s": cpu_s, "import_s": import_s,
        "segments": len(segs),
        "log_bytes": sum(r["log_size_bytes"] for r in segs),
        "batches": sum(r.get("batch_count") or 0 for r in segs),
        "records": sum(r.get("record_count") or 0 for r in segs),
        "codecs": sorted({c for r in segs for c in (r.get("codecs") or [])}),
        "notes": sum(len(r.get("notes") or []) for r in res.segments),
        "sample_notes": [n for r in res.segments for n in (r.get("notes") or [])][:3],
        "stop_reasons": sorted({r.get("stop_reason") for r in segs if r.get("stop_reason")}),
    }
    print(json.dumps(out))


# ---------------------------------------------------------------------------------------
# Ceilings: how fast can a header walk go, with no row building? (analysis, not the product)
# ---------------------------------------------------------------------------------------

V2_HEADER_BYTES = 61
#: DefaultRecordBatch v2 header, big-endian, packed: the fields a 'headers' row needs
V2_HEADER_STRUCT = ">qiibIhiqqqhii"

C_WALK = r"""
#include <stdint.h>
#include <unistd.h>
typedef struct { int64_t pos, base, last, base_ts, max_ts; int32_t count; int16_t attr; int8_t magic; } hdr_t;
static int64_t be64(const unsigned char *p) { int64_t v = 0; for (int i = 0; i < 8; i++) v = (v << 8) | p[i]; return v; }
static int32_t be32(const unsigned char *p) { return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]); }
/* Walk v2 batch headers from *pos; fill up to cap entries; windowed pread (never mmap). */
long walk(int fd, int64_t size, int64_t *pos, hdr_t *out, long cap) {
    static unsigned char buf[1 << 16];
    int64_t win = -1, wlen = 0, p = *pos; long n = 0;
    while (n < cap && p + 61 <= size) {
        if (win < 0 || p < win || p + 61 > win + wlen) {
            ssize_t r = pread(fd, buf, sizeof buf, p);
            if (r < 61) break;
            win = p; wlen = r;
        }
        const unsigned char *h = buf + (p - win);
        int32_t len = be32(h + 8);
        if (len < 49 || h[16] != 2 || p + 12 + len > size) break;
        hdr_t *o = &out[n++];
        o->pos = p; o->base = be64(h); o->last = o->base + be32(h + 23);
        o->base_ts = be64(h + 27); o->max_ts = be64(h + 35); o->count = be32(h + 57);
        o->attr = (int16_t)(h[21] << 8 | h[22]); o->magic = (int8_t)h[16];
        p += 12 + len;
    }
    *pos = p; return n;
}
"""


def _ceiling_files(dirs: list[str]) -> list[str]:
    return [str(p) for d in dirs for p in sorted(Path(d).glob("*-*/*.log"))]


def ceiling_py_pread(files: list[str]) -> dict:
    """One pread + struct.unpack per batch, aggregates in locals: no objects, no row dicts."""
    import struct
    unpack = struct.Struct(V2_HEADER_STRUCT).unpack
    batches = records = 0
    max_ts = -1
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            pos = 0
            pread = os.pread
            while pos + V2_HEADER_BYTES <= size:
                h = pread(fd, V2_HEADER_BYTES, pos)
                if len(h) < V2_HEADER_BYTES:
                    break
                (_base, length, _ple, magic, _crc, _attr, _lod, _bts, mts, _pid, _pep, _bseq,
                 count) = unpack(h)
                if magic != 2 or length < 49:
                    break
                batches += 1
                records += count
                if mts > max_ts:
                    max_ts = mts
                pos += 12 + length
        finally:
            os.close(fd)
    return {"batches": batches, "records": records}


def ceiling_index_syscalls(files: list[str]) -> dict:
    """The system calls the index depth makes per segment, from Python, and nothing else: lstat,
    open, fstat and close of the .log, .index and .timeindex, the first 4 KiB and the last 4 KiB
    of the .log, the first entry and the last two entries of each index. No parsing, no rows."""
    pread = os.pread
    for path in files:
        base = path[:-4]
        for suffix, entry in ((".log", 0), (".index", 8), (".timeindex", 12)):
            name = base + suffix
            size = os.lstat(name).st_size
            fd = os.open(name, os.O_RDONLY)
            try:
                os.fstat(fd)
                if entry:
                    pread(fd, entry, 0)
                    pread(fd, 2 * entry, max(0, size - 2 * entry))
                else:
                    pread(fd, 4096, 0)
                    pread(fd, 4096, max(0, size - 4096))
            finally:
                os.close(fd)
    return {"batches": 0, "records": 0}


def ceiling_numpy(files: list[str]) -> dict:
    """Bulk pread of 8 MiB windows, the offset chain walked in Python (one int.from_bytes per
    batch), then every header field gathered at once with numpy fancy indexing."""
    import numpy as np
    dt = np.dtype({"names": ["base", "length", "magic", "attr", "lod", "bts", "mts", "count"],
                   "formats": [">i8", ">i4", "i1", ">i2", ">i4", ">i8", ">i8", ">i4"],
                   "offsets": [0, 8, 16, 21, 23, 27, 35, 57], "itemsize": 61})
    cols = np.arange(V2_HEADER_BYTES)
    batches = records = 0
    window = 8 * MiB
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            pos = 0
            while pos + V2_HEADER_BYTES <= size:
                buf = os.pread(fd, window, pos)
                n = len(buf)
                starts = []
                p = 0
                frm = int.from_bytes
                while p + V2_HEADER_BYTES <= n:
                    starts.append(p)
                    p += 12 + frm(buf[p + 8:p + 12], "big")
                if not starts:  # one batch bigger than the window: jump over it
                    starts = [0]
                    p = 12 + int.from_bytes(buf[8:12], "big")
                a = np.frombuffer(buf, dtype=np.uint8)
                idx = np.asarray(starts)[:, None] + cols
                hdr = a[idx].reshape(-1).view(dt)
                ok = hdr["magic"] == 2
                batches += int(ok.sum())
                records += int(hdr["count"][ok].sum())
                _ = hdr["mts"].max(), hdr["bts"].min()
                pos += p
        finally:
            os.close(fd)
    return {"batches": batches, "records": records}


def _c_walk_lib(build_dir: Path):
    import ctypes
    so = build_dir / "c_walk.so"
    if not so.exists():
        src = build_dir / "c_walk.c"
        src.write_text(C_WALK)
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            return None
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    lib = ctypes.CDLL(str(so))
    lib.walk.restype = ctypes.c_long
    return lib


def ceiling_c(files: list[str], build_dir: str) -> dict:
    """A 30-line C loop (ctypes) fills a numpy record array per 64 Ki batches; numpy aggregates."""
    import ctypes
    import numpy as np
    lib = _c_walk_lib(Path(build_dir))
    if lib is None:
        return {"batches": 0, "records": 0, "skipped": "no C compiler"}
    dt = np.dtype([("pos", "i8"), ("base", "i8"), ("last", "i8"), ("bts", "i8"), ("mts", "i8"),
                   ("count", "i4"), ("attr", "i2"), ("magic", "i1")], align=True)
    cap = 65536
    out = np.zeros(cap, dtype=dt)
    batches = records = 0
    pos = ctypes.c_int64()
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            pos.value = 0
            while True:
                n = lib.walk(fd, ctypes.c_int64(size), ctypes.byref(pos), out.ctypes.data_as(ctypes.c_void_p),
                             ctypes.c_long(cap))
                if n <= 0:
                    break
                v = out[:n]
                batches += n
                records += int(v["count"].sum())
                _ = v["mts"].max(), v["bts"].min(), v["last"][-1]
        finally:
            os.close(fd)
    return {"batches": batches, "records": records}


def ceiling_worker(kind: str, dirs: list[str], cpu: int | None, build_dir: str) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    files = _ceiling_files(dirs)
    fn = {"py-pread": ceiling_py_pread, "numpy": ceiling_numpy, "index-syscalls": ceiling_index_syscalls,
          "c": lambda f: ceiling_c(f, build_dir)}[kind]
    if kind == "c":
        _c_walk_lib(Path(build_dir))  # compile outside the timing
    import numpy  # noqa: F401  (import outside the timing)
    t0 = time.perf_counter()
    r = fn(files)
    wall = time.perf_counter() - t0
    print(json.dumps({**r, "wall_s": wall, "segments": len(files),
                      "log_bytes": sum(os.path.getsize(f) for f in files)}))


# ---------------------------------------------------------------------------------------
# Parent: runs, medians, page cache
# ---------------------------------------------------------------------------------------


def run_measured(cmd: list[str], stdout_path: str | None = None) -> dict:
    """Run ``cmd``; return its wall time, CPU time, peak RSS (wait4 rusage) and stdout."""
    import tempfile
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        sink = open(stdout_path, "wb") if stdout_path else out_f
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=sink, stderr=err_f, cwd=REPO)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        if stdout_path:
            sink.close()
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:6]}... exited {p.returncode}:\n{err[-3000:]}")
    return {"proc_wall_s": wall, "proc_cpu_s": ru.ru_utime + ru.ru_stime,
            "maxrss_bytes": ru.ru_maxrss * 1024, "stdout": out, "stderr": err}


def scan_once(depth: str, dirs: list[Path], cpu: int | None, profile: str | None = None) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", depth]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    if profile:
        cmd += ["--profile", profile]
    cmd += [str(d) for d in dirs]
    r = run_measured(cmd)
    res = json.loads(r["stdout"].strip().splitlines()[-1])
    res.update(proc_wall_s=r["proc_wall_s"], maxrss_bytes=r["maxrss_bytes"])
    return res


def log_files(d: Path) -> list[Path]:
    return sorted(d.glob("*-*/*.log"))


def all_files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file())


def warm(paths: list[Path]) -> float:
    t = time.perf_counter()
    for i in range(0, len(paths), 500):
        subprocess.run(["cat", *map(str, paths[i:i + 500])], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def _cached_kib() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("Cached:"):
                return int(line.split()[1])
    return -1


def drop_caches() -> tuple[bool, str]:
    """Try to drop the page cache; report whether 'Cached' really fell."""
    before = _cached_kib()
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
    except OSError as exc:
        return False, f"cannot write /proc/sys/vm/drop_caches: {exc}"
    after = _cached_kib()
    ok = after < before * 0.5 or before - after > 512 * 1024
    return ok, f"page cache {before // 1024:,} MiB -> {after // 1024:,} MiB"


def deep_subset(root: Path, big: Path, max_bytes: int) -> tuple[Path, dict]:
    """A log dir of hard links to some of ``big``'s segments (smallest first, round robin over
    partitions) totalling <= max_bytes, so that 'deep' covers every codec and batch shape."""
    sub = root / f"deep-subset-{max_bytes // MiB}MiB"
    marker = sub / ".subset.json"
    if marker.exists():
        return sub, json.loads(marker.read_text())
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir(parents=True)
    for f in big.iterdir():
        if f.is_file():
            shutil.copy2(f, sub / f.name)
    parts = sorted(p for p in big.iterdir() if p.is_dir() and p.name.startswith("bench-"))
    queues = {p: sorted(p.glob("*.log"), key=lambda x: x.stat().st_size) for p in parts}
    total, chosen = 0, []
    progress = True
    while progress:  # rounds: each partition's smallest remaining segment, smallest first
        progress = False
        for q in sorted((q for q in queues.values() if q), key=lambda q: q[0].stat().st_size):
            if total + q[0].stat().st_size <= max_bytes:
                seg = q.pop(0)
                total += seg.stat().st_size
                chosen.append(seg)
                progress = True
    for p in parts:
        (sub / p.name).mkdir()
        for f in p.iterdir():
            if f.suffix not in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
                shutil.copy2(f, sub / p.name / f.name)
    for seg in chosen:
        for f in seg.parent.glob(seg.stem + ".*"):
            if f.suffix != ".snapshot":
                os.link(f, sub / seg.parent.name / f.name)
    facts = {"segments": len(chosen), "log_bytes": total,
             "partitions": sorted({s.parent.name for s in chosen})}
    marker.write_text(json.dumps(facts))
    return sub, facts


def dumplog_once(classpath: str, files: list[Path], stdout_path: str | None) -> dict:
    """DumpLogSegments over ``files`` in as few JVMs as ARG_MAX allows (no --deep-iteration)."""
    cfg = REPO / ".cache" / "kafka" / "4.2.1" / "log4j2-tools.properties"
    base = ["java", "-Djava.awt.headless=true"]
    if cfg.exists():
        base.append(f"-Dlog4j2.configurationFile={cfg}")
    base += ["-cp", classpath, "kafka.tools.DumpLogSegments", "--files"]
    budget = max(64 * 1024, os.sysconf("SC_ARG_MAX") // 2 - sum(len(a) + 1 for a in base) - 64 * 1024)
    groups, cur, size = [], [], 0
    for f in map(str, files):
        if cur and size + len(f) + 1 > budget:
            groups.append(cur)
            cur, size = [], 0
        cur.append(f)
        size += len(f) + 1
    if cur:
        groups.append(cur)
    tot = {"proc_wall_s": 0.0, "proc_cpu_s": 0.0, "maxrss_bytes": 0, "jvms": len(groups), "batch_lines": None}
    for g in groups:
        r = run_measured(base + [",".join(g)], stdout_path=stdout_path or os.devnull)
        tot["proc_wall_s"] += r["proc_wall_s"]
        tot["proc_cpu_s"] += r["proc_cpu_s"]
        tot["maxrss_bytes"] = max(tot["maxrss_bytes"], r["maxrss_bytes"])
        if stdout_path:
            n = 0
            with open(stdout_path, "rb") as fh:
                for line in fh:
                    if line.startswith(b"baseOffset:"):
                        n += 1
            tot["batch_lines"] = (tot["batch_lines"] or 0) + n
    return tot


def cat_once(files: list[Path]) -> dict:
    return run_measured(["cat", *map(str, files)], stdout_path=os.devnull)


# ---------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO / ".cache" / "bench")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the data set even if present")
    ap.add_argument("--prepare-only", action="store_true")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure; medians are printed")
    ap.add_argument("--cpu", type=int, default=0, help="CPU the scanner is pinned to (-1: not pinned)")
    ap.add_argument("--deep-max-bytes", type=int, default=256 * MiB,
                    help="run 'deep' on a hard-linked subset of at most this many .log bytes (0: all)")
    ap.add_argument("--cold", action="store_true", help="also measure with the page cache dropped before each run")
    ap.add_argument("--no-dumplog", action="store_true")
    ap.add_argument("--no-ceilings", action="store_true",
                    help="skip the header-walk ceilings (minimal Python, numpy, C) used for the analysis")
    ap.add_argument("--profile-out", type=Path, default=REPO / "out" / "bench-scan-headers.pstats")
    ap.add_argument("--worker", metavar="DEPTH", help=argparse.SUPPRESS)
    ap.add_argument("--profile", help=argparse.SUPPRESS)
    ap.add_argument("dirs", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cpu = None if args.cpu < 0 else args.cpu

    if args.worker:
        if args.worker.startswith("ceiling:"):
            ceiling_worker(args.worker.split(":", 1)[1], args.dirs, cpu, str(args.data))
        else:
            worker(args.worker, args.dirs, cpu, args.profile)
        return 0

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    info = ensure_data(args.data, args.rebuild, log)
    if args.prepare_only:
        print(json.dumps(info, indent=2))
        return 0
    try:
        import auditor.scan  # noqa: F401
    except ImportError as exc:
        print(f"benchmarks/scan.py: cannot import the scanner ({exc}); data set ready under {args.data}",
              file=sys.stderr)
        return 2
    return measure(args, info, cpu, log)


def _med(rs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rs)


def measure(args, info: dict, cpu: int | None, log) -> int:
    root = args.data
    big = root / info["big"]["log_dir"]
    many = root / info["many"]["log_dir"]
    big_logs = log_files(big)
    sub = None
    if args.deep_max_bytes and info["big"]["log_bytes"] > args.deep_max_bytes:
        sub, sub_facts = deep_subset(root, big, args.deep_max_bytes)

    log("warming the page cache (cat of every file) ...")
    warm_s = warm(all_files(big) + all_files(many) + (all_files(sub) if sub else []))

    plan = [("big", "stat", [big]), ("big", "index", [big]), ("big", "headers", [big]), ("big", "headers-py", [big]),
            ("big" if sub is None else "big-subset", "deep", [sub or big]),
            ("many", "stat", [many]), ("many", "index", [many]), ("many", "headers", [many])]
    results: dict[tuple[str, str], list[dict]] = {}
    for name, depth, dirs in plan:
        rs = []
        for i in range(args.runs):
            r = scan_once(depth, dirs, cpu)
            log(f"  {name:10s} {depth:8s} run {i + 1}: {r['wall_s']:.3f} s, {r['segments']} segments, "
                f"{r['batches']:,} batches, rss {r['maxrss_bytes'] / MiB:.0f} MiB")
            rs.append(r)
        results[(name, depth)] = rs

    dump = None
    if not args.no_dumplog:
        _, kafka_classpath = _harness()
        cp = kafka_classpath()
        log("DumpLogSegments (warm-up run, output kept to count batch lines) ...")
        tmp_out = str(root / "dumplog-out.txt")
        check = dumplog_once(cp, big_logs, tmp_out)
        os.unlink(tmp_out)
        dump = []
        for i in range(args.runs):
            r = dumplog_once(cp, big_logs, None)
            log(f"  DumpLogSegments run {i + 1}: {r['proc_wall_s']:.2f} s ({r['jvms']} JVM)")
            dump.append(r)
        dump_batch_lines = check["batch_lines"]

    cats = [cat_once(big_logs) for _ in range(args.runs)]

    ceilings = {}
    if not args.no_ceilings:
        for kind in ("py-pread", "numpy", "c", "index-syscalls"):
            rs = []
            for _ in range(args.runs):
                cmd = [sys.executable, str(Path(__file__).resolve()), "--data", str(root),
                       "--worker", f"ceiling:{kind}", "--cpu", str(-1 if cpu is None else cpu),
                       str(many if kind == "index-syscalls" else big)]
                r = run_measured(cmd)
                rs.append({**json.loads(r["stdout"].strip().splitlines()[-1]), "maxrss_bytes": r["maxrss_bytes"],
                           "proc_wall_s": r["proc_wall_s"]})
            ceilings[kind] = rs
            log(f"  ceiling {kind}: {_med(rs, 'wall_s'):.3f} s")

    cold = None
    if args.cold:
        ok, why = drop_caches()
        cold = {"works": ok, "why": why}
        log(f"drop_caches: {'works' if ok else 'does NOT work'} ({why})")
        if ok:
            cold["headers"], cold["cat"] = [], []
            for _ in range(args.runs):
                drop_caches()
                cold["headers"].append(scan_once("headers", [big], cpu))
                drop_caches()
                cold["cat"].append(cat_once(big_logs))
            cold["index_many"] = []
            for _ in range(args.runs):
                drop_caches()
                cold["index_many"].append(scan_once("index", [many], cpu))
            warm(all_files(big) + all_files(many))

    # profile one headers run (separately: cProfile slows the run down)
    args.profile_out.parent.mkdir(parents=True, exist_ok=True)
    prof_run = scan_once("headers", [big], cpu, profile=str(args.profile_out))

    report(args, info, results, dump, dump_batch_lines if dump else None, cats, cold, prof_run,
           warm_s, sub, sub_facts if sub else None, cpu, ceilings)
    return 0


def report(args, info, results, dump, dump_batch_lines, cats, cold, prof_run, warm_s, sub, sub_facts, cpu,
           ceilings) -> None:
    P = print
    big, many = info["big"], info["many"]
    P(f"kafka-log-auditor scan benchmark  ({time.strftime('%Y-%m-%d %H:%M')}, Python "
      f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, scanner pinned to "
      f"{'CPU %d' % cpu if cpu is not None else 'no CPU'}; medians of {args.runs} runs)")
    hb = results[("big", "headers")][0]
    P(f"data  big : {big['log_bytes'] / 2**30:.2f} GiB in {big['log_files']} .log segments "
      f"(segment.bytes {big['segment_bytes'] // MiB} MiB), {hb['batches']:,} batches, "
      f"{hb['records']:,} records; codecs {', '.join(hb['codecs'])}; 1 / ~10 / ~500 records per batch")
    mh = results[("many", "headers")][0]
    P(f"      many: {many['log_files']:,} .log segments, {many['log_bytes'] / MiB:.1f} MiB, "
      f"{mh['batches']:,} batches, {mh['records']:,} records (record-time roll)")
    if sub is not None:
        dr = results[("big-subset", "deep")][0]
        P(f"      big-subset (deep only, because deep over all of big is slow): {sub_facts['segments']} of big's "
          f"segments, {sub_facts['log_bytes'] / MiB:.0f} MiB (hard links, smallest segments first, round robin over "
          f"{len(sub_facts['partitions'])} partitions), {dr['batches']:,} batches, {dr['records']:,} records, "
          f"codecs {', '.join(dr['codecs'])}")
    P(f"page cache: WARM (cat pass over every file first: {warm_s:.1f} s); rates use the scan's own wall time "
      f"(interpreter start + imports excluded: see 'proc s')")
    P("")
    hdr = (f"{'data':10s} {'depth':8s} {'segments':>8s} {'wall s':>8s} {'proc s':>7s} {'segments/s':>11s} "
           f"{'batches/s':>11s} {'MB/s':>8s} {'peak RSS':>9s}")
    P(hdr)
    P("-" * len(hdr))
    rates = {}
    for (name, depth), rs in results.items():
        wall = _med(rs, "wall_s")
        r0 = rs[0]
        seg_s = r0["segments"] / wall
        bat = f"{r0['batches'] / wall:11,.0f}" if depth in ("headers", "headers-py", "deep") else f"{'-':>11s}"
        mbs = r0["log_bytes"] / 1e6 / wall
        rates[(name, depth)] = {"wall": wall, "seg_s": seg_s, "bat_s": r0["batches"] / wall if r0["batches"] else None}
        P(f"{name:10s} {depth:8s} {r0['segments']:8,d} {wall:8.3f} {_med(rs, 'proc_wall_s'):7.2f} {seg_s:11,.0f} "
          f"{bat} {mbs:8,.0f} {_med(rs, 'maxrss_bytes') / MiB:6.0f} MiB")
    hwall = rates[("big", "headers")]["wall"]
    hbat = hb["batches"]
    if dump:
        dw = _med(dump, "proc_wall_s")
        P(f"{'big':10s} {'DumpLog':8s} {big['log_files']:8,d} {dw:8.3f} {dw:7.2f} {big['log_files'] / dw:11,.0f} "
          f"{hbat / dw:11,.0f} {big['log_bytes'] / 1e6 / dw:8,.0f} {_med(dump, 'maxrss_bytes') / MiB:6.0f} MiB")
    cw = _med(cats, "proc_wall_s")
    P(f"{'big':10s} {'cat':8s} {big['log_files']:8,d} {cw:8.3f} {cw:7.2f} {big['log_files'] / cw:11,.0f} "
      f"{'-':>11s} {big['log_bytes'] / 1e6 / cw:8,.0f} {_med(cats, 'maxrss_bytes') / MiB:6.0f} MiB")
    labels = {"py-pread": "ceil-py", "numpy": "ceil-np", "c": "ceil-C", "index-syscalls": "ceil-idx"}
    for kind, rs in ceilings.items():
        w = _med(rs, "wall_s")
        r0 = rs[0]
        name = "many" if kind == "index-syscalls" else "big"
        if r0.get("skipped"):
            P(f"{name:10s} {labels[kind]:8s} skipped: {r0['skipped']}")
            continue
        bat = f"{r0['batches'] / w:11,.0f}" if r0["batches"] else f"{'-':>11s}"
        P(f"{name:10s} {labels[kind]:8s} {r0['segments']:8,d} {w:8.3f} {_med(rs, 'proc_wall_s'):7.2f} "
          f"{r0['segments'] / w:11,.0f} {bat} {r0['log_bytes'] / 1e6 / w:8,.0f} "
          f"{_med(rs, 'maxrss_bytes') / MiB:6.0f} MiB")
    P("")
    P("  wall s = scan_log_dirs() only, in a fresh pinned interpreter; proc s = whole process (start, imports, scan, exit)")
    P("  MB/s = .log bytes covered / wall s (stat and index do not read them all); batches/s only where every header is walked")
    if dump:
        P(f"  DumpLogSegments: Kafka 4.2.1, --files <all {big['log_files']} .log files> in {dump[0]['jvms']} JVM(s), no "
          f"--deep-iteration, stdout to /dev/null, wall incl. JVM start, not pinned (JVM CPU time "
          f"{_med(dump, 'proc_cpu_s'):.2f} s); it printed {dump_batch_lines:,} batch lines "
          f"({'same as' if dump_batch_lines == hbat else 'DIFFERENT from'} the reader's {hbat:,}); it also "
          f"checks every batch's CRC (isvalid), which the headers depth does not")
    if ceilings:
        P("  ceil-* = header-walk ceilings, not the product: every v2 header of big's .log files, no rows, no notes, "
          "no index reads: ceil-py one os.pread + struct.unpack per batch; ceil-np 8 MiB preads, offset chain in "
          "Python, fields gathered by numpy; ceil-C a 30-line C loop via ctypes (windowed pread) filling a numpy array; "
          "ceil-idx on many = only the system calls the index depth makes per segment, from Python (3 lstat, 3 "
          "open/fstat/close, 6 preads), no parsing, no rows: the most a Python index depth could do")
    P("")
    P("ratios to the reader's headers depth on big (time of X / time of headers):")
    if dump:
        P(f"  DumpLogSegments : {dw / hwall:6.2f}x  (headers is {dw / hwall:.2f}x faster)")
    P(f"  cat > /dev/null : {cw / hwall:6.2f}x  (headers takes {hwall / cw:.1f}x the time of a plain sequential read)")
    P("")
    P("targets (one core, warm cache):")
    idx = rates[("many", "index")]["seg_s"]
    hb_s = rates[("big", "headers")]["bat_s"]
    P(f"  index   >= 20,000 segments/s      measured {idx:12,.0f} segments/s on 'many'   {'PASS' if idx >= 20_000 else 'MISS'}")
    P(f"  headers >= 1,000,000 batches/s    measured {hb_s:12,.0f} batches/s on 'big'    {'PASS' if hb_s >= 1_000_000 else 'MISS'}")
    if dump:
        ratio = dw / hwall
        P(f"  headers >= 5x DumpLogSegments     measured {ratio:12.2f}x                      {'PASS' if ratio >= 5 else 'MISS'}")
    if cold is not None:
        P("")
        if not cold["works"]:
            P(f"cold cache: drop_caches does not work here ({cold['why']}); no cold figures")
        else:
            P(f"cold cache (sync; echo 3 > /proc/sys/vm/drop_caches before each run; {cold['why']}):")
            w = _med(cold["headers"], "wall_s")
            P(f"  big  headers : {w:8.3f} s  {hbat / w:11,.0f} batches/s  {big['log_bytes'] / 1e6 / w:7,.0f} MB/s")
            c = _med(cold["cat"], "proc_wall_s")
            P(f"  big  cat     : {c:8.3f} s  {big['log_bytes'] / 1e6 / c:7,.0f} MB/s")
            w = _med(cold["index_many"], "wall_s")
            P(f"  many index   : {w:8.3f} s  {many['log_files'] / w:11,.0f} segments/s")
    P("")
    P(f"profile of one headers run on big (cProfile; {prof_run['wall_s']:.2f} s under the profiler vs "
      f"{hwall:.2f} s without; pstats in {args.profile_out.relative_to(REPO) if args.profile_out.is_relative_to(REPO) else args.profile_out}):")
    import io
    import pstats
    s = io.StringIO()
    st = pstats.Stats(str(args.profile_out), stream=s)
    st.sort_stats("tottime").print_stats(14)
    lines = s.getvalue().splitlines()
    keep = False
    for line in lines:
        if line.strip().startswith("ncalls"):
            keep = True
        if keep and line.strip():
            P("  " + line.replace(str(REPO) + "/", ""))
    notes = results[("big", "headers")][0]
    if notes["notes"]:
        P(f"\nscanner notes on big (headers): {notes['notes']} (e.g. {notes['sample_notes'][:2]})")


if __name__ == "__main__":
    sys.exit(main())
