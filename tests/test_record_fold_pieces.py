"""The 'deep' record fold over a payload decompressed piece by piece (``_cwalk.RecordFold`` fed by
``compression.decompress_chunks``, issue 24's decompression bombs): for every codec the result is
the one-buffer fold's of the code before (``compression.decompress`` then ``_cwalk.fold_records``),
the same tuple, None or FormatError, at the cap, one byte past it and on broken streams. Speed is
measured in benchmarks/decompression_bombs.py, not here."""

from __future__ import annotations

import random
import struct
import zlib

import pytest

import auditor.scan.segment as segment
from auditor.formats import _cwalk, compression
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.scan.segment import SegmentFiles, scan_segment
from harness.encoding import zigzag_varint
from harness.records import COMPRESS, TINY_RECORD, gzip_compress, v2_batch, v2_record

pytestmark = pytest.mark.unit

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CONTROL, TRANSACTIONAL = 0x20, 0x10
STATE = (None,) * 6


def _records(seed: int, n: int) -> bytes:
    """Records of every size class: tiny, a few KB, and one over compression.CHUNK_BYTES (so that a
    record spans pieces and lz4 blocks), timestamps going back and forth."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        size = rnd.choice((0, 1, 10, 200, 5000))
        if i == n // 2:
            size = compression.CHUNK_BYTES + 12345
        out.append(v2_record(rnd.randint(-5000, 5000), i, key=rnd.randbytes(rnd.randint(0, 3)),
                             value=rnd.randbytes(size), headers=[(b"h", b"x")] * rnd.randint(0, 2)))
    return b"".join(out)


def _before(reader: LogReader, batch, state=STATE):
    """The fold as 29ad38b did it: the whole payload decompressed into one buffer, then folded."""
    data = reader.read_batch_bytes(batch)
    records, start = v2.record_bytes(batch, data, label=reader.label, max_decompressed_bytes=reader.max_decompressed_bytes)
    log_append = batch.max_timestamp_ms if batch.timestamp_type == v2.LOG_APPEND_TIME else None
    return _cwalk.fold_records(records, start, batch.record_count, batch.base_offset, batch.base_timestamp_ms,
                               log_append, batch.is_control, *state)


def _outcome(call):
    try:
        return call()
    except FormatError as exc:
        return f"FormatError: {exc}"


def _now(reader: LogReader, batch):
    """fold_record_times in fold_records' shape (the refused record's (index, position) last); where
    it refused a record, the FormatError read from what it kept must be the whole batch's loop's."""
    done = reader.fold_record_times(batch, STATE)
    if done is None:
        return None
    fold, refused = done
    if refused is None:
        return fold + (None,)
    error = v2.refused_record_error(batch, refused, label=reader.label)
    whole = _outcome(lambda: list(reader.records(batch)))
    assert f"FormatError: {error}" == whole, (error, whole)
    return fold + ((refused.index, refused.position),)


def _both(path, cap: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES):
    with LogReader(path, max_decompressed_bytes=cap) as reader:
        batches = list(reader.batches())
        assert batches, "the file holds a batch"
        return ([_outcome(lambda: _now(reader, b)) for b in batches],
                [_outcome(lambda: _before(reader, b)) for b in batches])


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_pieces_fold_as_the_whole_payload_did(tmp_path, codec):
    """~1.4 MiB of records with one over CHUNK_BYTES, and a control batch: the same tuple as one buffer,
    and the same row as the Python record loop."""
    plain = _records(codec, 300)
    marker = v2_record(0, 0, key=struct.pack(">hh", 0, 1), value=struct.pack(">hi", 0, 3))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(v2_batch(0, COMPRESS[codec](plain), 300, attributes=codec)
                     + v2_batch(300, COMPRESS[codec](marker * 3), 3, attributes=codec | CONTROL | TRANSACTIONAL,
                                producer_id=3))
    now, before = _both(path)
    assert now == before and now[0] is not None and now[0][6] == 300 and now[1][8] == 3, now   # 300 records; 3 commit markers
    rows = []
    for use_c in (True, False):
        segment.USE_C_RECORDS = use_c
        try:
            rows.append(scan_segment(SegmentFiles(0, None, {"log": str(path)}), "deep", is_active=False,
                                     location={}, indexes=False))
        finally:
            segment.USE_C_RECORDS = True
        rows[-1].pop("scanned_at_ms")
    assert rows[0] == rows[1] and rows[0]["record_count"] == 303


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_at_the_cap_and_one_byte_past_it(tmp_path, codec):
    """A payload of exactly the cap is folded; one record more (7 bytes past) is the cap's FormatError,
    word for word as before (a cap of 1 MiB + change stands for the 256 MiB one)."""
    records = (compression.CHUNK_BYTES * 3 // 2) // len(TINY_RECORD)
    cap = records * len(TINY_RECORD)
    for n, readable in ((records, True), (records + 1, False)):
        path = tmp_path / f"{n}.log"
        path.write_bytes(v2_batch(0, COMPRESS[codec](TINY_RECORD * n), n, attributes=codec, base_ts=0, max_ts=0))
        now, before = _both(path, cap)
        assert now == before, (n, now, before)
        assert (isinstance(now[0], tuple) and now[0][6] == n) if readable else "decompressed size" in now[0], now


def _broken_gzip() -> dict[str, bytes]:
    data = TINY_RECORD * 50_000
    one = gzip_compress(data)
    hcrc = bytearray(one[:10])
    hcrc[3] |= 0x02
    hcrc += struct.pack("<H", zlib.crc32(bytes(hcrc)) & 0xFFFF)
    return {
        "two members": gzip_compress(data[:7000]) + gzip_compress(data[7000:]),
        "trailing zeros": one + bytes(8),
        "trailing garbage": one + b"garbage",
        "cut in the deflate data": one[:len(one) // 2],
        "cut in the trailer": one[:-3],
        "wrong CRC32": one[:-8] + bytes(4) + one[-4:],
        "wrong ISIZE": one[:-4] + b"\xff\xff\xff\xff",
        "header CRC16 (FHCRC), right": bytes(hcrc) + one[10:],
        "header CRC16 (FHCRC), wrong": bytes(hcrc[:-2]) + b"\x00\x00" + one[10:],
        "reserved flag bit": one[:3] + bytes([0x20]) + one[4:],
        "not deflate (CM 7)": one[:2] + b"\x07" + one[3:],
        "a flipped bit in the deflate data": one[:40] + bytes([one[40] ^ 0x10]) + one[41:],
        "empty member then one": gzip_compress(b"") + one,
        "file name field": one[:3] + b"\x08" + one[4:10] + b"records.bin\x00" + one[10:],
    }


@pytest.mark.parametrize("name", list(_broken_gzip()))
def test_gzip_streams_zlib_and_cramjam_might_read_apart(tmp_path, name):
    """Irregular gzip streams: the outcome (tuple, or the FormatError's text) is cramjam's as before;
    zlib reads only what it cannot read otherwise (the rest goes back to compression.decompress)."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(v2_batch(0, _broken_gzip()[name], 50_000, attributes=GZIP, base_ts=0, max_ts=0))
    now, before = _both(path)
    assert now == before


def test_record_fold_in_any_pieces_equals_fold_records():
    """RecordFold fed the same bytes cut anywhere (1-byte pieces, cuts inside the length varint, the
    body, after the last record) gives fold_records' tuple, or None where it gives None."""
    rnd = random.Random(24)
    good = b"".join(v2_record(rnd.randint(-9, 9), i, value=rnd.randbytes(rnd.choice((0, 3, 200))))
                    for i in range(40))
    long_varint = zigzag_varint(300) + b"\x00" + b"\x00\x00\x01\x01" + bytes(295) + b"\x00"
    cases = {"good": (good, 40), "one record short": (good, 41), "one record more": (good, 39),
             "bytes after the last": (good + b"\x00", 40), "cut": (good[:-2], 40),
             "6-byte varint": (good + b"\x80\x80\x80\x80\x80\x00", 41), "negative length": (good + b"\x01", 41),
             "record of 300 bytes (2-byte length)": (long_varint, 1), "none": (b"", 0), "none, bytes": (b"\x00", 0)}
    for name, (payload, count) in cases.items():
        whole = _cwalk.fold_records(payload, 0, count, 10, 1000, None, False, *STATE)
        for cuts in ([], [1] * len(payload), [3, 1, 1, 250], [rnd.randint(1, 50) for _ in range(200)]):
            fold = _cwalk.RecordFold(count, 10, 1000, None, False, *STATE)
            pos = 0
            for n in cuts + [len(payload)]:
                fold.feed(bytearray(payload[pos:pos + n]))
                pos += n
                if pos >= len(payload):
                    break
            assert fold.result() == whole, (name, cuts[:5])
