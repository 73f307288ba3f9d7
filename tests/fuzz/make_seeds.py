"""Write the committed seed corpora (tests/fuzz/corpus/<harness>/) from the real broker files in
../shared/fixtures/real/ and the tests' own inputs: ``python tests/fuzz/make_seeds.py``.

Every seed is small (a prefix of a real file cut at a batch boundary, an index trimmed to that
prefix, one record value): the corpus stays a few hundred KB, and the fuzzers grow their own
corpus from it in an ignored folder (tools/fuzz.sh).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import random
import shutil
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent)]

from auditor.formats import metadata_records as mrec  # noqa: E402
from auditor.formats import offsets_records as orec  # noqa: E402
from auditor.formats.log_reader import LogReader  # noqa: E402
from fuzz.common import join  # noqa: E402
from harness.realdata import REAL  # noqa: E402

CORPUS = HERE / "corpus"
SEED_BYTES = 16 * 1024


def batch_prefix(data: bytes, limit: int = SEED_BYTES, start: int = 0) -> bytes:
    """Whole entries of ``data`` from ``start`` up to about ``limit`` bytes (at least one entry)."""
    pos = start
    while pos + 12 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        if size <= 0 or pos + 12 + size > len(data) or (pos > start and pos + 12 + size - start > limit):
            break
        pos += 12 + size
    return data[start:pos]


def entry_starts(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        if size <= 0:
            break
        out.append(pos)
        pos += 12 + size
    return out


class Seeds:
    def __init__(self, name: str):
        self.dir = CORPUS / name
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.count = 0

    def add(self, data: bytes) -> None:
        (self.dir / hashlib.sha1(data).hexdigest()).write_bytes(data)
        self.count += 1


def segment() -> None:
    s = Seeds("segment")
    for p in sorted((REAL / "record-sets").rglob("*.bin")):
        data = p.read_bytes()
        s.add(data[:SEED_BYTES] if len(data) <= SEED_BYTES else batch_prefix(data))
    for p in sorted((REAL / "broker-dirs").rglob("*.log")) + sorted((REAL / "metadata").rglob("*.checkpoint")):
        data = p.read_bytes()
        if data:
            s.add(batch_prefix(data))
    s.add(b"")
    s.add(bytes(200))                       # a preallocated zero tail
    for data in record_fold_shapes():
        s.add(data)
    print("segment", s.count)


def _zigzag(value: int) -> bytes:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    return bytes(out + bytes([raw]))


def _record(ts_delta: int, off_delta: int, value: bytes = b"v") -> bytes:
    body = b"\x00" + _zigzag(ts_delta) + _zigzag(off_delta) + _zigzag(-1) + _zigzag(len(value)) + value + b"\x00"
    return _zigzag(len(body)) + body


def _v2(base: int, records: bytes, count: int, attrs: int = 0) -> bytes:
    import crc32c

    body = struct.pack(">hiqqqhii", attrs, max(count - 1, 0), 1000, 5000, -1, -1, -1, count) + records
    return struct.pack(">qiibI", base, 9 + len(body), 0, 2, crc32c.crc32c(body)) + body


def _legacy(offset: int, magic: int, attrs: int = 0, ts: int = 1000, value: bytes | None = None,
            raw_magic: int | None = None) -> bytes:
    import zlib

    body = bytes([magic if raw_magic is None else raw_magic, attrs]) + (struct.pack(">q", ts) if magic else b"")
    body += struct.pack(">i", -1) + (struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def record_fold_shapes() -> list[bytes]:
    """Synthetic .logs for the C record folds' refusals (issue 24's hangs): timestamps stepping back,
    gzip batches whose last record is broken (cut, negative length, a 6-byte varint, a byte too
    many; one after a 5,000-byte record, so that pieces carry it), legacy gzip wrappers of inner
    messages (LogAppendTime, relative offsets, a broken last message)."""
    good = b"".join(_record(d, i) for i, d in enumerate((0, -900, 3000, -1001, 2500, -4000)))
    big = _record(-50, 6, bytes(range(256)) * 20)
    broken = {"cut": _record(0, 7)[:-2], "negative length": b"\x01", "6-byte offsetDelta":
              _zigzag(9) + b"\x00\x00" + b"\x80\x80\x80\x80\x80\x00" + b"\x01\x01",
              "6-byte length": b"\x80\x80\x80\x80\x80\x00"}
    plain = _v2(0, good, 6) + _v2(6, good + broken["6-byte offsetDelta"], 7)
    gz = b"".join(_v2(20 * i, gzip.compress(good + big + tail, mtime=0), 8, attrs=1)
                  for i, tail in enumerate(broken.values()))
    gz += _v2(100, gzip.compress(good + big + b"\x00", mtime=0), 7, attrs=1)   # a byte after the last record
    # a 9,000-byte record one byte longer than its fields, then good ones: refused while it is carried
    # across pieces, and pieces still fed after the refusal
    body = _record(0, 7, bytes(9000))[2:] + b"\x00"
    gz += _v2(120, gzip.compress(good + _zigzag(len(body)) + body + good * 100, mtime=0), 607, attrs=1)
    inner1 = b"".join(_legacy(i, 1, ts=t) for i, t in enumerate((50, 20, 40)))
    legacy = (_legacy(1002, 1, attrs=1 | 0x08, ts=777, value=gzip.compress(inner1, mtime=0))
              + _legacy(1005, 1, attrs=1, value=gzip.compress(inner1, mtime=0))
              + _legacy(1010, 0, attrs=1, value=gzip.compress(_legacy(0, 0) + _legacy(1, 0, raw_magic=5), mtime=0)))
    return [plain, gz, legacy]


def _trim_index(index: bytes, timeindex: bytes, log: bytes, base: int) -> tuple[bytes, bytes]:
    """Index entries that point inside ``log`` (a prefix of the real .log)."""
    starts = set(entry_starts(log))
    last = 0
    with_offsets = []
    for pos in entry_starts(log):
        (off,) = struct.unpack_from(">q", log, pos)
        with_offsets.append(off)
    last = max(with_offsets, default=base)
    idx = b"".join(index[i:i + 8] for i in range(0, len(index) - 7, 8)
                   if struct.unpack_from(">i", index, i + 4)[0] in starts and struct.unpack_from(">i", index, i)[0] > 0)
    tix = b"".join(timeindex[i:i + 12] for i in range(0, len(timeindex) - 11, 12)
                   if 0 < struct.unpack_from(">i", timeindex, i + 8)[0] + base <= last)
    return idx, tix


def index() -> None:
    from fuzz.fuzz_index import BASES
    s = Seeds("index")
    for log in sorted((REAL / "broker-dirs").rglob("*.log")):
        stem = log.with_suffix("")
        base = int(stem.name)
        parts = [stem.with_suffix(x).read_bytes() if stem.with_suffix(x).exists() else b""
                 for x in (".index", ".timeindex", ".txnindex")]
        data = log.read_bytes()
        ctrl = bytes([BASES.index(base) if base in BASES else 0]) + struct.pack(">q", 0)
        prefix = batch_prefix(data, 32 * 1024)
        idx, tix = _trim_index(parts[0], parts[1], prefix, base)
        s.add(join([ctrl, idx, tix, parts[2], prefix]))
        if len(data) == len(prefix):
            s.add(join([ctrl, parts[0], parts[1], parts[2], data]))
        # a preallocated active segment: the index files' zero tails
        s.add(join([ctrl, idx + bytes(64), tix + bytes(96), b"", prefix]))
    print("index", s.count)


def _kv_record(off_delta: int, key: bytes | None, value: bytes | None, headers: bytes = b"\x00") -> bytes:
    body = b"\x00" + _zigzag(off_delta * 10) + _zigzag(off_delta)
    body += _zigzag(-1) if key is None else _zigzag(len(key)) + key
    body += (_zigzag(-1) if value is None else _zigzag(len(value)) + value) + headers
    return _zigzag(len(body)) + body


def compressed_offsets_shapes() -> list[bytes]:
    """Compressed __consumer_offsets batches for _coffsets.StreamFold (fuzz_offsets_fold compares it
    with the Python fold in 1 KiB pieces): commits of v0 and v1 keys, tombstones, more than 3 null or
    short keys, headers, a value longer than a piece, LogAppendTime, a transaction; broken last
    records of several shapes, one whose length varint straddles a piece's end; an offset past
    int64; each codec."""
    import cramjam

    def key(group: bytes, partition: int, version: int = 1) -> bytes:   # OffsetCommitKey: group, topic "t", partition
        return (struct.pack(">hh", version, len(group)) + group + struct.pack(">h", 1) + b"t"
                + struct.pack(">i", partition))

    value = struct.pack(">hqi", 3, 42, -1) + struct.pack(">h", 0) + struct.pack(">q", 1_700_000_000_000)
    rnd = random.Random(11)
    good = [_kv_record(i, rnd.choice((None, b"", b"\x00")) if i % 3 == 1 else key(b"g%d" % (i % 4), i % 5, i % 2),
                       None if i % 7 == 0 else value) for i in range(40)]
    headers = _zigzag(2) + _zigzag(2) + b"hk" + _zigzag(2) + b"hv" + _zigzag(1) + b"k" + _zigzag(-1)
    good.append(_kv_record(40, key(b"h", 0), value, headers=headers))
    good.append(_kv_record(41, key(b"big", 0), b"\x00\x03" + bytes(1500)))
    plain = b"".join(good)
    codecs = {1: lambda d: gzip.compress(d, mtime=0), 2: lambda d: bytes(cramjam.snappy.compress_raw(d)),
              3: _lz4_frame, 4: lambda d: bytes(cramjam.zstd.compress(d))}
    out = []
    for codec, compress in codecs.items():
        out.append(_v2(0, compress(plain), len(good), attrs=codec))
    gz = codecs[1]
    n = next(n for n in range(1024) if len(plain + _kv_record(42, key(b"pad", 0), bytes(n))) % 1024 == 1022)
    pad = plain + _kv_record(42, key(b"pad", 0), bytes(n))   # the next record 2 bytes before a 1 KiB piece's end
    for tail, extra in ((_kv_record(50, key(b"c", 0), value)[:-4], 1), (b"\x00\x00", 0), (b"", 1),
                        (b"\x80\x80\x80\x80\x80\x00", 1), (b"\x01", 1), (b"\x0c\x00\x00\x00\x01\x01\x01", 1)):
        out.append(_v2(0, gz(pad + tail), len(good) + 1 + extra, attrs=1))
    out.append(_v2(0, gz(plain), len(good), attrs=1 | 0x08))                      # LogAppendTime
    out.append(_v2(0, gz(plain), len(good), attrs=1 | 0x10))                      # transactional
    out.append(b"\x7f" + b"\xff" * 7 + _v2(0, gz(plain), len(good), attrs=1)[8:])   # offsets past int64
    return out


def _lz4_frame(data: bytes) -> bytes:
    """Kafka's lz4 frame: 64 KiB blocks, independent, no checksums."""
    import cramjam

    descriptor = bytes([0x60, 0x40])
    frame = struct.pack("<I", 0x184D2204) + descriptor + bytes([(orec.compression.xxh32(descriptor) >> 8) & 0xFF])
    for i in range(0, len(data), 1 << 16):
        block = bytes(cramjam.lz4.compress_block(data[i:i + (1 << 16)], store_size=False))
        frame += struct.pack("<I", len(block)) + block
    return frame + struct.pack("<I", 0)


def offsets_fold() -> None:
    s = Seeds("offsets_fold")
    for seed in compressed_offsets_shapes():
        s.add(seed)
    for log in sorted((REAL / "broker-dirs").rglob("__consumer_offsets-*/*.log")):
        data = log.read_bytes()
        starts = entry_starts(data)
        for k in range(0, len(starts), max(1, len(starts) // 6)):
            s.add(batch_prefix(data, 8 * 1024, starts[k]))
        if len(data) > 100 * 1024:   # one seed past the C fold's first 64 KiB read window
            s.add(batch_prefix(data, 100 * 1024))
    print("offsets_fold", s.count)


def _batches(path: Path):
    reader = LogReader(path)
    try:
        for b in reader.batches():
            yield b, bytes(reader.read_batch_bytes(b))
    finally:
        reader.close()


def message() -> None:
    from fuzz.fuzz_message import TARGETS
    from harness.spec_messages import Encoder
    s = Seeds("message")
    seen: dict = {}
    for snap in sorted((REAL / "metadata").rglob("*.checkpoint")):
        for b, data in _batches(snap):
            for _o, _t, key, value in mrec.iter_records(b, data):
                if b.is_control:
                    ctype = mrec.control_key(key)[1]
                    k = ("control", ctype)
                    if seen.setdefault(k, 0) < 2:
                        seen[k] += 1
                        s.add(bytes([4, ctype, struct.unpack_from(">h", key)[0]]) + value)
                    continue
                frame = mrec.read_frame(value)
                k = ("metadata", frame.api_key, frame.version)
                if seen.setdefault(k, 0) < 2:
                    seen[k] += 1
                    s.add(b"\x00" + value)
    for log in sorted((REAL / "broker-dirs").rglob("__consumer_offsets-*/*.log")):
        for b, data in _batches(log):
            if b.magic != 2 or b.is_control:
                continue
            for _o, _t, key, value in orec.iter_key_values(b, data):
                rtype = orec.key_version(key)
                k = ("offsets", rtype, None if value is None else value[:2])
                if seen.setdefault(k, 0) < 2:
                    seen[k] += 1
                    s.add(b"\x02" + key)
                    if value is not None:
                        s.add(b"\x03" + bytes([rtype & 0xFF]) + value)
    rnd = random.Random(24)
    for n, (spec, version) in enumerate(TARGETS):
        body = Encoder(spec, version, rnd).struct(spec.fields)
        s.add(bytes([8]) + struct.pack(">H", n) + body)
        if spec.source == "kafka_storage" and spec.api_key is not None:   # remote log metadata frames
            s.add(b"\x01" + bytes([1, spec.api_key, version]) + body)
        if n % 8 == 0:   # the irregular shapes C hands to Python: cut short, one byte too many, not exact
            s.add(bytes([8]) + struct.pack(">H", n) + body[:len(body) // 2])
            s.add(bytes([8]) + struct.pack(">H", n) + body + b"\x00")
            s.add(bytes([9]) + struct.pack(">H", n) + body + b"\x00")
    _decoder_surface_seeds(s, TARGETS, Encoder, rnd)
    # a TopicRecord whose name is not UTF-8 (C hands it over; Python decodes it as Java does)
    s.add(b"\x00" + bytes([1, 2, 0, 2, 0xFF]) + bytes(range(16)) + b"\x00")
    # a known tagged field whose declared size is larger than its value (ConsumerGroupMetadataValue v0:
    # Epoch, then tag 0 MetadataHash, an int64, declared 9 bytes): _cmessage.c's tagged-size check
    n = next(i for i, (spec, version) in enumerate(TARGETS)
             if (spec.name, version) == ("ConsumerGroupMetadataValue", 0))
    s.add(bytes([8]) + struct.pack(">H", n) + struct.pack(">i", 5) + b"\x01\x00\x09" + bytes(9))
    print("message", s.count)


def _decoder_surface_seeds(s: Seeds, targets, encoder, rnd) -> None:
    """fuzz_message's program and call modes: every damage on the program with the most nodes (with
    a valid body of it, so that the nested defaults are decoded and copied)."""
    from auditor.formats import message_program
    from fuzz.fuzz_message import CALLS_MODE, DAMAGES, PROGRAM_MODE, _nodes

    def size(n: int) -> int:
        try:
            return sum(len(v) for v in _nodes(message_program.program(*targets[n]), {}).values())
        except message_program.Unsupported:
            return 0
    richest = max(range(len(targets)), key=size)
    spec, version = targets[richest]
    body = encoder(spec, version, rnd).struct(spec.fields)
    for damage in range(len(DAMAGES)):
        s.add(bytes([PROGRAM_MODE]) + struct.pack(">HBH", richest, damage, 1) + body)
    s.add(bytes([CALLS_MODE]) + struct.pack(">H", richest) + bytes(8))


def metadata_batch() -> None:
    s = Seeds("metadata_batch")
    for snap in sorted((REAL / "metadata").rglob("*.checkpoint")):
        for b, data in _batches(snap):
            s.add(data)
            if not b.is_control:   # the same records in a LogAppendTime batch
                s.add(data[:22] + bytes([data[22] | 0x08]) + data[23:])
    # one record each: keyLength -2 (null, as -1), a timestamp beyond int64 (baseTimestamp 2^63 - 1,
    # timestampDelta 1: the C framing refuses, as the Python fast path leaves int64)
    value = bytes([1, 2, 0, 2, 0x61]) + bytes(range(16)) + b"\x00"
    for ts_delta, key_length, base_ts in ((0, 3, 0), (2, 1, 2**63 - 1)):
        body = bytes([0, ts_delta, 0, key_length, 2 * len(value)]) + value + b"\x00"
        records = bytes([2 * len(body)]) + body
        after_crc = struct.pack(">hiqqqhii", 0, 0, base_ts, base_ts, -1, -1, -1, 1) + records
        s.add(struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, 0) + after_crc)
    print("metadata_batch", s.count)


def checkpoints() -> None:
    from fuzz.fuzz_checkpoints import READERS
    s = Seeds("checkpoints")
    names = [n for n, _ in READERS]
    for p in sorted(REAL.rglob("*")):
        if p.is_file() and p.name in names + ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                              "cleaner-offset-checkpoint"]:
            kind = names.index(p.name) if p.name in names else 0
            s.add(bytes([kind]) + p.read_bytes()[:4096])
    print("checkpoints", s.count)


def producer_snapshot() -> None:
    s = Seeds("producer_snapshot")
    import crc32c
    for p in sorted(REAL.rglob("*.snapshot")):
        s.add(p.read_bytes())
    entries = struct.pack(">i", 2) + b"".join(struct.pack(">qhiqiqiq", 1000 + i, 0, 41, 77 + i, 3, 1_700_000_000_000, -1, -1)
                                               for i in range(2))
    s.add(struct.pack(">hI", 1, crc32c.crc32c(entries)) + entries)
    print("producer_snapshot", s.count)


def manifest_parts() -> None:
    from auditor.cluster import portable
    from auditor.cluster.consumer_groups import read_groups
    from auditor.cluster.metadata_log import read_metadata_log
    s = Seeds("manifest_parts")
    kraft = REAL / "broker-dirs" / "kraft-transactional" / "kafka-data"
    logs = sorted(p for p in (REAL / "broker-dirs").glob("*/*") if p.is_dir())
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        # the metadata log sits apart from the broker dir in the fixtures: a log dir holding both
        d = Path(tmp) / "logdir"
        shutil.copytree(REAL / "metadata" / "kraft-transactional", d)
        shutil.copy(kraft / "meta.properties", d / "meta.properties")
        log = read_metadata_log([d], history=True)
        out = io.BytesIO()
        portable.write_metadata(log, out)
        # (the temporary dir's name replaced by a fixed one: the same seed every time)
        texts = [(0, gzip.decompress(out.getvalue()).replace(str(d).encode(), b"/var/lib/kafka/data"))]
    out = io.BytesIO()
    portable.write_groups(read_groups(logs), out)
    texts.append((3, gzip.decompress(out.getvalue())))
    remote = (b'{"line":"header","format":"kafka-audit.remote-log-metadata","version":1,"records":2,'
              b'"metadata_dirs":["/d/__remote_log_metadata-0"],"metadata_partitions":[0],"partition_counts":[1]}\n'
              b'{"line":"partition","topic":"t","partition":0,"topic_id":"kQ7tpUX5RxeCk2JNalsaFg",'
              b'"delete_state":null,"notes":[],"metadata_partitions":[0]}\n'
              b'{"line":"note","text":"n"}\n{"line":"end","lines":3}\n')
    texts.append((2, remote))
    for kind, text in texts:
        lines = text.splitlines(keepends=True)
        if len(text) > SEED_BYTES:   # the header, a sample of the content lines, an end line counting them
            keep = lines[:60]   # the header and the first content lines (topics before their partitions)
            text = b"".join(keep) + b'{"line":"end","lines":%d}\n' % len(keep)
        s.add(bytes([kind]) + text)
        if kind == 0:
            s.add(bytes([1]) + text[:2048])
        s.add(bytes([0x80 | kind]) + gzip.compress(text, mtime=0)[:4096])
    print("manifest_parts", s.count)


if __name__ == "__main__":
    for make in (segment, index, offsets_fold, message, metadata_batch, checkpoints, producer_snapshot, manifest_parts):
        make()
    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    print(f"corpus: {total} bytes")
