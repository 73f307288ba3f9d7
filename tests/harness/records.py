"""v2 records and batches built byte by byte, and the codecs that compress them as Kafka's writers do.

Written from the format (docs/kafka-format-notes.md), independently of ``auditor.formats``, for the
tests of the record folds (the deep scan's, the key fold's, the ``__consumer_offsets`` replay's):

* :func:`v2_record` one record (any timestampDelta and offsetDelta), :func:`numbered_record` record
  i of a batch (offsetDelta i, timestampDelta 10 i), :data:`TINY_RECORD` the smallest record;
* :func:`v2_batch` a batch around record bytes already made (compressed or not, any count);
  :func:`keyed_batch` a batch of ``(key, value, headers)`` records compressed by codec name, and
  :func:`keyed_segment` a segment of such batches of every codec with control batches among them;
* :data:`COMPRESS` the codecs by attribute id (:func:`lz4_frame` is Kafka's lz4 framing);
* :data:`BROKEN` broken last records of a batch, by what is wrong with them.
"""

from __future__ import annotations

import random
import struct
import zlib

import cramjam
import crc32c

from auditor.formats import compression
from harness.encoding import zigzag_varint

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODECS = {"none": 0, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
LOG_APPEND_TIME = 0x08  # the attributes' timestamp-type bit
TS = 1_700_000_000_000  # keyed_batch's default baseTimestamp

#: a record of 6 bytes after its length: attributes 0, timestampDelta 0, offsetDelta 0, null key,
#: null value, no headers (a decompression bomb's unit: 7 bytes)
TINY_RECORD = bytes([0x0C, 0, 0, 0, 1, 1, 0])

#: (the broken record's bytes, records declared beyond the good ones)
BROKEN = {
    "cut short": (TINY_RECORD[:-1], 1),
    "negative headersCount": (bytes([0x0C, 0, 0, 0, 1, 1, 1]), 1),
    "key length past its record": (bytes([0x0C, 0, 0, 0, 40, 1, 0]), 1),
    "length varint of 6 bytes": (b"\x80\x80\x80\x80\x80\x00", 1),
    "negative length": (b"\x01", 1),
    "one record missing": (b"", 1),
    "a byte after the last record": (b"\x00", 0),
}


def v2_record(ts_delta: int, off_delta: int, key: bytes | None = None, value: bytes | None = b"v",
              headers=()) -> bytes:
    body = b"\x00" + zigzag_varint(ts_delta) + zigzag_varint(off_delta)
    body += zigzag_varint(-1) if key is None else zigzag_varint(len(key)) + key
    body += zigzag_varint(-1) if value is None else zigzag_varint(len(value)) + value
    body += zigzag_varint(len(headers)) + b"".join(zigzag_varint(len(k)) + k + zigzag_varint(len(v)) + v
                                                  for k, v in headers)
    return zigzag_varint(len(body)) + body


def numbered_record(offset_delta: int, key: bytes | None, value: bytes | None, headers=()) -> bytes:
    """Record ``offset_delta`` of a batch: its timestampDelta is 10 times its offsetDelta."""
    return v2_record(offset_delta * 10, offset_delta, key, value, headers)


def v2_batch(base_offset: int, records: bytes, count: int, *, attributes: int = 0, base_ts: int = 1_000,
             max_ts: int = 5_000, producer_id: int = -1) -> bytes:
    after_crc = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), base_ts, max_ts, producer_id,
                            0 if producer_id >= 0 else -1, -1, count) + records
    return (struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), 0, 2, crc32c.crc32c(after_crc))
            + after_crc)


def gzip_compress(data: bytes, level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def lz4_frame(data: bytes, block: int = 1 << 16) -> bytes:
    """Kafka's lz4 frame (BD 64 KiB blocks, independent, no checksums; a block lz4 does not shrink is
    stored, flagged uncompressed, as Kafka's writer does)."""
    descriptor = bytes([0x60, 0x40])
    frame = struct.pack("<I", compression.LZ4_FRAME_MAGIC) + descriptor + bytes([(compression.xxh32(descriptor) >> 8) & 0xFF])
    for i in range(0, len(data), block):
        raw = data[i:i + block]
        piece = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        word = len(piece)
        if len(piece) >= len(raw):
            piece, word = raw, len(raw) | compression.LZ4_BLOCK_UNCOMPRESSED_MASK
        frame += struct.pack("<I", word) + piece
    return frame + struct.pack("<I", 0)


COMPRESS = {GZIP: gzip_compress, SNAPPY: lambda d: bytes(cramjam.snappy.compress_raw(d)), LZ4: lz4_frame,
            ZSTD: lambda d: bytes(cramjam.zstd.compress(d))}


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "gzip":
        return bytes(cramjam.gzip.compress(data))
    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == "lz4":
        return bytes(cramjam.lz4.compress(data))
    if codec == "zstd":
        return bytes(cramjam.zstd.compress(data))
    return data


def keyed_batch(base: int, records: list[tuple], *, codec: str = "none", control: bool = False, log_append: bool = False,
                base_ts: int = TS, max_ts: int | None = None) -> bytes:
    """One v2 batch of ``(key, value, headers)`` records; record i's timestampDelta is 10 i (numbered_record)."""
    recs = _compress(codec, b"".join(numbered_record(i, *r) for i, r in enumerate(records)))
    n = len(records)
    attrs = CODECS[codec] | (0x20 if control else 0) | (LOG_APPEND_TIME if log_append else 0)
    max_ts = min(base_ts + 10 * n, (1 << 63) - 1) if max_ts is None else max_ts
    after_crc = struct.pack(">hiqqqhii", attrs, max(n - 1, 0), base_ts, max_ts, -1, -1, -1, n) + recs
    return struct.pack(">qiibI", base, 4 + 1 + 4 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def keyed_segment(seed: int, batches: int = 60) -> bytes:
    """Batches of every codec in turn (every 17th a commit marker), of varied keys, values and headers."""
    rnd = random.Random(seed)
    out, offset = [], 0
    for b in range(batches):
        codec = list(CODECS)[b % len(CODECS)]
        if b % 17 == 5:
            out.append(keyed_batch(offset, [(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3))], control=True))
            offset += 1
            continue
        records = []
        for _ in range(rnd.choice((1, 3, 40, 200))):
            key = rnd.choice((None, b"", b"hot", b"user-%d" % rnd.randrange(300), rnd.randbytes(rnd.randrange(1, 200))))
            value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.randrange(0, 300))
            headers = [(b"h", b"v" * rnd.randrange(0, 3))] if rnd.random() < 0.2 else []
            records.append((key, value, headers))
        out.append(keyed_batch(offset, records, codec=codec))
        offset += len(records)
    return b"".join(out)
