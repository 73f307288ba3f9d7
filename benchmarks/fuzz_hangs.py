"""1 MiB worst cases of every decoder the fuzz harnesses drive (issue 24: "a hang is more than 1 s
for a 1 MiB input"), timed on the normal build: ``.venv/bin/python benchmarks/fuzz_hangs.py
[--before REV]``.

The fuzzers run inputs of at most 64 KiB (tests/fuzz/targets.py) at sanitizer speed, where a
superlinear decoder does not stand out from libFuzzer's timeout; these cases are the shapes that
make a decoder loop most per input byte (many tiny entries, continuation lines, zero tails, huge
counts, a decompression bomb), 1 MiB each. ``--before REV`` times the checkpoint readers of that
git revision side by side (the quadratic ones the fuzzing round fixed). Prints figures and
PASS/MISS against 1 s per decoder call; asserts nothing. Quote the load average with them.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import crc32c  # noqa: E402

import auditor.scan.segment as segment  # noqa: E402
from auditor import manifest  # noqa: E402
from auditor.cluster import portable  # noqa: E402
from auditor.formats import checkpoints, metadata_records as mrec, offsets_records as orec  # noqa: E402
from auditor.formats.compression import DEFAULT_MAX_DECOMPRESSED_BYTES  # noqa: E402
from auditor.formats.log_reader import LogReader  # noqa: E402
from auditor.formats.producer_snapshot import read_producer_snapshot_header  # noqa: E402
from auditor.formats.record_batch import parse_v2_header  # noqa: E402
from auditor.scan.segment import SegmentFiles, scan_segment  # noqa: E402
from fuzz import fuzz_message  # noqa: E402

import decompression_bombs  # noqa: E402  (benchmarks/: the legacy wrapper bomb)

MIB = 1 << 20
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
LIMIT_S = 1.0


def tile(unit: bytes, size: int = MIB) -> bytes:
    return unit * max(1, size // len(unit))


def v2_batch(records: bytes, count: int, attrs: int = 0, base: int = 0) -> bytes:
    body = struct.pack(">hiqqqhii", attrs, count - 1, 0, 0, -1, -1, -1, count) + records
    crc = crc32c.crc32c(body)
    return struct.pack(">qiibI", base, 9 + len(body), 0, 2, crc) + body


TINY_RECORD = bytes([0x0C, 0, 0, 0, 1, 1, 0])   # length 6, attrs, ts 0, offset 0, key null, value null, 0 headers


def seed(harness: str, pick) -> bytes:
    return max((p.read_bytes() for p in sorted((CORPUS / harness).iterdir())), key=pick)


def write(tmp: Path, name: str, data: bytes) -> str:
    (tmp / name).write_bytes(data)
    return str(tmp / name)


def timed(label: str, call) -> float:
    start = time.perf_counter()
    try:
        call()
    except Exception as exc:   # a decoder's documented error is a result here, not a failure
        label += f" ({type(exc).__name__})"
    took = time.perf_counter() - start
    print(f"  {label:<68} {took:8.3f} s  {'PASS' if took <= LIMIT_S else 'MISS'}")
    return took


def scan(path: str, depth: str, use_c: bool = True, paths: dict | None = None, base: int = 0):
    segment.USE_C_WALK = segment.USE_C_RECORDS = use_c
    try:
        scan_segment(SegmentFiles(base, None, paths or {"log": path}), depth, is_active=False, location={},
                     indexes=paths is not None)
    finally:
        segment.USE_C_WALK = segment.USE_C_RECORDS = True


def cases(tmp: Path, before):
    real_v2 = seed("offsets_fold", len)
    legacy = next(p.read_bytes() for p in sorted((CORPUS / "segment").iterdir()) if p.read_bytes()[16:17] == b"\x00")
    rnd = random.Random(24)
    garbage = rnd.randbytes(MIB)
    print("segment (.log walkers, 1 MiB):")
    for name, data in (("real v2 batches tiled", tile(real_v2)), ("magic 0 messages tiled", tile(legacy)),
                       ("random bytes", garbage), ("zeros (preallocated tail)", bytes(MIB)),
                       ("1-record v2 batches of 68 B", tile(v2_batch(TINY_RECORD, 1))),
                       ("one batch of 149,796 tiny records", v2_batch(tile(TINY_RECORD, MIB - 61), (MIB - 61) // 7))):
        log = write(tmp, "seg.log", data)
        timed(f"{name}: headers with C", lambda: scan(log, "headers"))
        timed(f"{name}: headers pure Python", lambda: scan(log, "headers", False))
        timed(f"{name}: deep", lambda: scan(log, "deep"))
    # decompression amplification: 16 MiB of tiny records from a 16 KB gzip batch (the cap per batch is
    # compression.DEFAULT_MAX_DECOMPRESSED_BYTES, 256 MiB: 16 times this, from a ~260 KB batch)
    bomb_records = (16 * MIB) // len(TINY_RECORD)
    bomb = v2_batch(gzip.compress(tile(TINY_RECORD, 16 * MIB), 9), bomb_records, attrs=1)
    log = write(tmp, "bomb.log", bomb)
    took = timed(f"gzip batch of {len(bomb):,} B -> 16 MiB, {bomb_records:,} records: deep, Python records",
                 lambda: scan(log, "deep", False))
    print(f"  (Python record loop: {bomb_records / took:,.0f} records/s: 256 MiB would take ~{16 * took:.0f} s)")
    timed(f"gzip batch of {len(bomb):,} B -> 16 MiB, {bomb_records:,} records: deep, C record fold",
          lambda: scan(log, "deep"))
    # at the cap: 2 bytes under 256 MiB (the C record fold; the Python loop took 263 s at load 8-11)
    cap_records = DEFAULT_MAX_DECOMPRESSED_BYTES // len(TINY_RECORD)
    bomb = v2_batch(gzip.compress(tile(TINY_RECORD, cap_records * len(TINY_RECORD)), 9), cap_records, attrs=1)
    log = write(tmp, "bomb.log", bomb)
    timed(f"gzip batch of {len(bomb):,} B -> 256 MiB - 2, {cap_records:,} records: deep", lambda: scan(log, "deep"))
    # the same with its last record cut short (the C fold stops there; the Python loop took 263 s to name it)
    cut = gzip.compress(tile(TINY_RECORD, (cap_records - 1) * len(TINY_RECORD)) + TINY_RECORD[:-1], 9)
    log = write(tmp, "bomb.log", v2_batch(cut, cap_records, attrs=1))
    timed(f"the same, its last record cut short ({len(cut):,} B): deep", lambda: scan(log, "deep"))
    del bomb
    # a legacy gzip wrapper of the smallest inner messages up to the cap (Python read them twice: ~40 s)
    for magic in (0, 1):
        wrapper = decompression_bombs.legacy_bomb(magic)
        log = write(tmp, "legacy.log", wrapper)
        timed(f"magic {magic} gzip wrapper of {len(wrapper):,} B -> 256 MiB of inner messages: deep",
              lambda: scan(log, "deep"))
    # the key scan and the __consumer_offsets replay of the bomb at the cap, intact and with its last
    # record cut short (key scan: 1.97 s and 1.79 GB before it was fed in pieces; the replay: a note
    # per null key and a Python tuple per record, ~38 s, before StreamFold)
    from auditor.cluster.consumer_groups import fold_partition_dir
    from auditor.keys.partition_keys import scan_partition_keys
    intact = gzip.compress(tile(TINY_RECORD, cap_records * len(TINY_RECORD)), 9)
    for name, payload in (("intact", intact), ("its last record cut short", cut)):
        for where, read in (("keys-0", lambda d: scan_partition_keys(d, prefix_bytes=2)),
                            ("__consumer_offsets-0", lambda d: fold_partition_dir(d, 0))):
            directory = tmp / where
            directory.mkdir(exist_ok=True)
            write(directory, "00000000000000000000.log", v2_batch(payload, cap_records, attrs=1))
            what = "key scan" if where.startswith("keys") else "__consumer_offsets replay"
            timed(f"gzip batch at the cap, {name}: {what}", lambda: read(directory))
    del intact, cut
    print("index (1 MiB .index and .timeindex):")
    idx = b"".join(struct.pack(">ii", i + 1, 68 * (i + 1)) for i in range(MIB // 8))
    tix = b"".join(struct.pack(">qi", 1000 + i, i + 1) for i in range(MIB // 12))
    for name, (a, b) in (("increasing entries", (idx, tix)), ("zero tails", (bytes(MIB), bytes(MIB - MIB % 12))),
                         ("decreasing entries (a problem each)", (idx[::-1], tix[::-1]))):
        paths = {"log": write(tmp, "00000000000000000000.log", tile(v2_batch(TINY_RECORD, 1), 68 * (MIB // 8 + 2))),
                 "index": write(tmp, "00000000000000000000.index", a),
                 "timeindex": write(tmp, "00000000000000000000.timeindex", b)}
        timed(f"{name}: index depth with C", lambda: scan("", "index", True, dict(paths)))
        timed(f"{name}: index depth pure Python", lambda: scan("", "index", False, dict(paths)))
        timed(f"{name}: headers (whole indexes, numpy)", lambda: scan("", "headers", True, dict(paths)))
    print("__consumer_offsets fold (1 MiB):")
    log = write(tmp, "offsets.log", tile(real_v2))
    with LogReader(log) as reader:
        timed("real batches tiled: C fold_plain", lambda: orec.fold_plain_batches(reader._fd, 0, reader.size_bytes, {}, "x"))

        def python_fold():
            store: dict = {}
            for h in reader.batches(0):
                orec.fold_records_into(store, h, reader.read_batch_bytes(h), False, None, [])
        timed("real batches tiled: Python fold_records_into", python_fold)
    print("message decoders (1 MiB bodies, every (message, version) read from disk):")
    worst = (0.0, "")
    for body_name, body in (("zeros", bytes(MIB)), ("0xff", b"\xff" * MIB), ("random", garbage)):
        for n in range(len(fuzz_message.TARGETS)):
            start = time.perf_counter()
            fuzz_message.one_input(bytes([8]) + struct.pack(">H", n) + body)
            took = time.perf_counter() - start
            if took > worst[0]:
                worst = (took, f"{fuzz_message.TARGETS[n][0].name} v{fuzz_message.TARGETS[n][1]} on {body_name}")
    print(f"  {'slowest of ' + str(3 * len(fuzz_message.TARGETS)) + ' (C + Python + compare): ' + worst[1]:<68} "
          f"{worst[0]:8.3f} s  {'PASS' if worst[0] <= LIMIT_S else 'MISS'}")
    print("metadata batch (1 MiB of records):")
    real_batch = seed("metadata_batch", len)
    h = parse_v2_header(real_batch, 0, 0)
    recs = real_batch[61:] * max(1, MIB // (len(real_batch) - 61))
    big = v2_batch(recs, h.record_count * max(1, MIB // (len(real_batch) - 61)))
    header = parse_v2_header(big, 0, 0)
    timed("a real snapshot batch's records tiled: iter_records", lambda: list(mrec.iter_records(header, big)))
    timed("the same: C metadata_batch (fallback Python)", lambda: list(mrec.c_metadata_batch(
        header, big, lambda *a: a, lambda *a: a, label="x", position=0) or []))
    print("checkpoints and text files (1 MiB; side by side with --before at 64 KiB: the old code was quadratic):")
    readers = [("now", checkpoints)] + ([(f"before {before[0]}", before[1])] if before else [])
    for size in ((64 * 1024, MIB) if before else (MIB,)):
        for name, data, fn in (("'é' then empty lines", "é".encode() + b"\n" * size, "read_offset_checkpoint"),
                               ("'t 0 5' entry lines", b"0\n%d\n" % (size // 6) + b"t 0 5\n" * (size // 6),
                                "read_offset_checkpoint"),
                               ("meta.properties of continuation lines", b"k=" + b"a\\\n" * (size // 3),
                                "parse_properties")):
            path = write(tmp, "text", data)
            for who, module in (readers if size < MIB else readers[:1]):
                timed(f"{len(data):,} B, {name}: {fn} ({who})", lambda: getattr(module, fn)(path))
    print("producer snapshot (1 MiB):")
    entries = struct.pack(">i", MIB // 46) + bytes(46 * (MIB // 46))
    snap = write(tmp, "00000000000000000000.snapshot", struct.pack(">hI", 1, crc32c.crc32c(entries)) + entries)
    timed("22,795 entries", lambda: read_producer_snapshot_header(snap))
    print("manifest cluster part (1 MiB of JSON lines, gzip):")
    lines = [b'{"line":"header","format":"kafka-audit.consumer-groups","version":1,"records":0,"partitions":{}}']
    lines += [b'{"line":"note","text":"x"}'] * (MIB // 27)
    lines.append(b'{"line":"end","lines":%d}' % (len(lines) - 1))
    out = tmp / "m"
    out.mkdir(exist_ok=True)
    (out / manifest.CONSUMER_GROUPS_FILE).write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    timed(f"{len(lines) - 2:,} note lines: read_groups via _part_of",
          lambda: manifest._part_of(str(out), manifest.CONSUMER_GROUPS_FILE, portable.read_groups))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="a git revision whose checkpoint readers are timed side by side")
    args = ap.parse_args()
    before = None
    if args.before:
        text = subprocess.run(["git", "show", f"{args.before}:auditor/formats/checkpoints.py"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout
        spec = importlib.util.spec_from_loader("checkpoints_before", loader=None)
        module = importlib.util.module_from_spec(spec)
        exec(compile(text, f"{args.before}:checkpoints.py", "exec"), module.__dict__)
        before = (args.before, module)
    print(f"load average: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) as tmp:
        cases(Path(tmp), before)
    print(f"load average: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
