"""Decompression bombs at the 256 MiB cap through the 'deep' depth, per codec, side by side with the
code before (issue 24's hang rule: more than 1 s for a 1 MiB input):

    git archive 29ad38b auditor setup.py | tar -x -C /tmp/bomb-before
    (cd /tmp/bomb-before && /work/.../.venv/bin/python setup.py -q build_ext --inplace)
    nice -n 19 .venv/bin/python benchmarks/decompression_bombs.py --before /tmp/bomb-before [--runs 5]

Each case is one .log holding one v2 batch whose payload is at most ~1 MiB and decompresses to the
cap or past it, written once to a temporary directory; each code tree scans it at 'deep' in its own
fresh interpreter (``scan_segment``, the C record fold on), ``--runs`` times in turn with the other
tree. The figure is the scan's CPU time (``time.process_time``: user + system of the process, which
a loaded machine inflates far less than wall time); the medians are printed with the ratio, the
load average before and after, and a digest of each tree's row (notes included, the scan time
left out), which must be equal: the change is speed only. ``--scan keys`` times the key scan of
the .log's directory instead (auditor/keys/partition_keys.py; the digest over its sketches and
result), ``--scan offsets`` the __consumer_offsets replay of it (fold_partition_dir; the digest
over the records, the store and the first three notes: the bad-key notes past three a batch are
one summary now, by design, so their count is printed instead). Peak RSS is the child's ru_maxrss.
Asserts nothing.

The cases (the smallest record, 7 bytes, so the most records per decompressed byte):

* gzip at the cap: 38,347,922 records = 268,435,454 bytes (2 below the cap) from ~390 KB (level 9);
* gzip, 16 MiB: a sixteenth of it (2,396,745 records), for a tree before whose cost is per record
  (``--scan offsets`` before the bad-key notes were bounded: a note each);
* gzip at the cap whose last record is cut short (6 of its 7 bytes): the note names that record
  (the C fold stops there; before, the Python loop read the 38 million records again: 263 s);
* legacy (magic 0 and 1) gzip wrappers at the cap of the smallest inner messages, 26 and 34 bytes
  (10.3 and 7.9 million; the Python loop read them twice, ~37 s);
* gzip past the cap: 1 MiB of level-9 gzip (~700 MiB of records): the cap's note;
* zstd at the cap and past it (zstd's ratio on this is ~10,000: a few KB; past: twice the cap);
* lz4 at the cap: Kafka's lz4 frame of 4 MiB blocks (lz4's largest ratio is ~255: ~1 MiB);
* snappy, 1 MiB of xerial chunks (snappy's ratio tops out near 21: ~21 MiB, the most 1 MiB of
  snappy can become), and one raw block whose header declares 256 MiB but holds 7 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
CAP = 256 * MIB
TINY_RECORD = bytes([0x0C, 0, 0, 0, 1, 1, 0])   # length 6, attrs, ts 0, offset 0, null key, null value, 0 headers
CODEC = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
LZ4_BLOCK = 4 * MIB

CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
from auditor.scan.segment import SegmentFiles, scan_segment
times, digest = [], None
for _ in range(int(sys.argv[3])):
    start = time.process_time()
    row = scan_segment(SegmentFiles(0, None, {"log": sys.argv[2]}), "deep", is_active=False, location={}, indexes=False)
    times.append(time.process_time() - start)
    row.pop("scanned_at_ms")
    digest = hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:12]
    note = " | ".join(n for n in row["notes"] if "beside it" not in n)[-160:]
import resource
print(json.dumps({"cpu": times, "digest": digest, "records": row["record_count"], "note": note,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def v2_batch(payload: bytes, count: int, codec: str) -> bytes:
    import crc32c

    body = struct.pack(">hiqqqhii", CODEC[codec], count - 1, 0, 0, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, 9 + len(body), 0, 2, crc32c.crc32c(body)) + body


def records_stream(total: int, compress_piece, piece: int = 1 << 17):
    """compress_piece() over ``total`` TINY_RECORDs in pieces (no 256 MiB bytes object at once)."""
    full, rest = divmod(total, piece)
    unit = TINY_RECORD * piece
    return [compress_piece(unit) for _ in range(full)] + ([compress_piece(TINY_RECORD * rest)] if rest else [])


def gzip_bomb(records: int, tail: bytes = b"") -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(records_stream(records, c.compress)) + c.compress(tail) + c.flush()


def zstd_bomb(records: int) -> bytes:
    import cramjam

    c = cramjam.zstd.Compressor(3)
    for part in records_stream(records, lambda data: data):
        c.compress(part)
    return bytes(c.finish())


def lz4_bomb(records: int) -> bytes:
    """Kafka's lz4 frame (auditor/formats/compression.py _lz4_frame): FLG version 01 with independent
    blocks, BD 4 MiB blocks, HC, then [int32 LE size][block] and the end mark."""
    import cramjam

    from auditor.formats.compression import LZ4_FRAME_MAGIC, xxh32
    descriptor = bytes([0x60, 0x70])
    frame = [struct.pack("<I", LZ4_FRAME_MAGIC), descriptor, bytes([(xxh32(descriptor) >> 8) & 0xFF])]
    per_block = LZ4_BLOCK // len(TINY_RECORD)
    left = records
    while left:
        n = min(left, per_block)
        block = bytes(cramjam.lz4.compress_block(TINY_RECORD * n, store_size=False))
        frame += [struct.pack("<I", len(block)), block]
        left -= n
    return b"".join(frame + [struct.pack("<I", 0)])


def snappy_xerial(size: int) -> tuple[bytes, int]:
    """xerial chunks of 32 KiB of records (snappy's block) until the payload is ~``size`` bytes."""
    import cramjam

    from auditor.formats.compression import XERIAL_MAGIC
    per_chunk = (32 * 1024) // len(TINY_RECORD)
    chunk = bytes(cramjam.snappy.compress_raw(TINY_RECORD * per_chunk))
    n = (size - 16) // (4 + len(chunk))
    return XERIAL_MAGIC + struct.pack(">ii", 1, 1) + (struct.pack(">i", len(chunk)) + chunk) * n, n * per_chunk


def legacy_message(offset: int, magic: int, attrs: int = 0, value: bytes | None = None) -> bytes:
    """One magic 0/1 entry (offset, size, crc, magic, attributes, [timestamp 1,000], null key, value)."""
    body = bytes([magic, attrs]) + (struct.pack(">q", 1_000) if magic else b"") + struct.pack(">i", -1)
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def legacy_bomb(magic: int) -> bytes:
    """A gzip wrapper (level 9) of the smallest inner messages (26 B magic 0, 34 B magic 1) up to the cap:
    10,324,440 / 7,895,160 of them."""
    unit = legacy_message(0, magic)
    n = CAP // len(unit)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    piece = unit * (1 << 16)
    payload = b"".join(c.compress(piece) for _ in range(n >> 16)) + c.compress(unit * (n % (1 << 16))) + c.flush()
    return legacy_message(n - 1, magic, attrs=CODEC["gzip"], value=payload)


def gzip_cut(records: int) -> bytes:
    """More than 1 MiB of level-9 gzip of ``records`` records, cut at 1 MiB (the cap comes first)."""
    stream = gzip_bomb(records)
    return stream[:MIB] if len(stream) > MIB else stream


def cases(tmp: Path, only: str = "") -> list[tuple[str, Path]]:
    """The cases whose name holds ``only``, each written to its own .log (built only when asked for)."""
    at_cap = CAP // len(TINY_RECORD)
    past = at_cap * 3   # ~770 MiB: more than 1 MiB of gzip at level 9 would be
    lying = b"\x80\x80\x80\x80\x01" + bytes([0x18]) + TINY_RECORD   # varint 256 MiB, then a 7-byte literal
    made = [
        ("gzip at the cap", lambda: v2_batch(gzip_bomb(at_cap), at_cap, "gzip")),
        # a sixteenth of the cap: what a tree whose cost grows per record (a note each, before) can be
        # measured on without gigabytes (--scan offsets --before: ~38 M notes at the cap, several GB)
        ("gzip, 16 MiB", lambda: v2_batch(gzip_bomb(at_cap // 16), at_cap // 16, "gzip")),
        ("gzip at the cap, its last record cut short",
         lambda: v2_batch(gzip_bomb(at_cap - 1, TINY_RECORD[:-1]), at_cap, "gzip")),
        ("gzip, 1 MiB past the cap", lambda: v2_batch(gzip_cut(past), past, "gzip")),
        ("legacy magic 0 gzip wrapper at the cap (26 B inner messages)", lambda: legacy_bomb(0)),
        ("legacy magic 1 gzip wrapper at the cap (34 B inner messages)", lambda: legacy_bomb(1)),
        ("zstd at the cap", lambda: v2_batch(zstd_bomb(at_cap), at_cap, "zstd")),
        ("zstd past the cap (x2)", lambda: v2_batch(zstd_bomb(2 * at_cap), 2 * at_cap, "zstd")),
        ("lz4 at the cap", lambda: v2_batch(lz4_bomb(at_cap), at_cap, "lz4")),
        ("lz4 past the cap (+1 block)",
         lambda: v2_batch(lz4_bomb(at_cap + LZ4_BLOCK // 7), at_cap + LZ4_BLOCK // 7, "lz4")),
        ("snappy, 1 MiB of xerial chunks", lambda: v2_batch(*snappy_xerial(MIB), "snappy")),
        ("snappy raw block declaring 256 MiB", lambda: v2_batch(lying, 1, "snappy")),
    ]
    out = []
    for i, (name, make) in enumerate(made):
        if only not in name:
            continue
        batch = make()
        path = tmp / f"{i}" / "00000000000000000000.log"
        path.parent.mkdir()
        path.write_bytes(batch)
        size = f"{len(batch):,} B entry" if name.startswith("legacy") else f"{len(batch) - 61:,} B payload"
        out.append((f"{name} ({size})", path))
    return out


#: ``--scan keys``: the key scan of the .log's directory (auditor/keys/partition_keys.py) instead of 'deep'
CHILD_KEYS = r"""
import hashlib, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from auditor.keys.partition_keys import scan_partition_keys
times = []
for _ in range(int(sys.argv[3])):
    start = time.process_time()
    found = scan_partition_keys(Path(sys.argv[2]).parent, prefix_bytes=2)
    times.append(time.process_time() - start)
result = found.to_json(20)
digest = hashlib.sha256(found.stats.to_bytes() + json.dumps(result, sort_keys=True, default=str).encode()).hexdigest()[:12]
import resource
print(json.dumps({"cpu": times, "digest": digest, "records": result.get("records"),
                  "note": " | ".join(result.get("notes", []))[-160:],
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


#: ``--scan offsets``: the .log read as a __consumer_offsets partition (fold_partition_dir: the replay
#: of the group coordinator's records; every TINY_RECORD has a null key: a bad-key note each, before)
CHILD_OFFSETS = r"""
import hashlib, json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from auditor.cluster.consumer_groups import fold_partition_dir
times = []
for _ in range(int(sys.argv[3])):
    start = time.process_time()
    fold = fold_partition_dir(Path(sys.argv[2]).parent, 0)
    times.append(time.process_time() - start)
    notes, records, store = len(fold.notes), fold.records, sorted(fold.store.items())
    digest = hashlib.sha256(json.dumps([records, store, fold.notes[:3]], default=str).encode()).hexdigest()[:12]
    last = fold.notes[-1] if fold.notes else ""
    del fold
print(json.dumps({"cpu": times, "digest": digest, "records": records,
                  "note": f"{notes:,} notes; last: {last}"[-160:],
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(code: Path, log: Path, runs: int, scan: str = "deep") -> dict:
    child = {"keys": CHILD_KEYS, "offsets": CHILD_OFFSETS}.get(scan, CHILD)
    done = subprocess.run([sys.executable, "-c", child, str(code), str(log), str(runs)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(code)})
    if done.returncode:
        return {"cpu": [float("nan")], "digest": "error", "records": None, "note": done.stderr[-300:], "rss_mib": 0}
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="", help="a tree of the code before, its extensions built in place")
    ap.add_argument("--runs", type=int, default=5, help="scans per case and tree (in one interpreter each)")
    ap.add_argument("--rounds", type=int, default=1, help="alternations of the trees (each --runs scans)")
    ap.add_argument("--only", default="", help="only the cases whose name holds this text")
    ap.add_argument("--scan", choices=("deep", "keys", "offsets"), default="deep",
                    help="what reads each .log: scan_segment at 'deep', the key scan of its directory, or the "
                         "__consumer_offsets replay of its directory")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    trees = ([("before", Path(args.before))] if args.before else []) + [("now", ROOT)]
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, log in cases(Path(tmp), args.only):
            got = {label: {"cpu": []} for label, _ in trees}
            for _ in range(args.rounds):
                for label, code in trees:
                    r = measure(code, log, args.runs, args.scan)
                    got[label]["cpu"] += r["cpu"]
                    got[label].update({k: r[k] for k in ("digest", "records", "note")})
                    got[label]["rss_mib"] = max(got[label].get("rss_mib", 0), r["rss_mib"])
            print(name)
            for label, _ in trees:
                g = got[label]
                print(f"  {label:<7} median {statistics.median(g['cpu']):6.3f} CPU s  "
                      f"[{', '.join(f'{t:.3f}' for t in sorted(g['cpu']))}]  peak RSS {g['rss_mib']:,.0f} MiB  "
                      f"records {g['records']}  "
                      f"row {g['digest']}  {g['note'][-110:]}")
            if len(trees) == 2:
                b, a = (statistics.median(got[label]["cpu"]) for label, _ in trees)
                same = got["before"]["digest"] == got["now"]["digest"]
                print(f"  before/now x{b / a:.2f}; rows {'equal' if same else 'DIFFERENT'}; "
                      f"{'PASS' if a <= 1.0 else 'MISS'} (<= 1 s CPU)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
