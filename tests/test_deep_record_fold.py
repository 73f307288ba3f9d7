"""The 'deep' depth's record fold in C (``_cwalk.fold_records``, issue 24): the same row and notes
as the Python record loop on every batch shape, and a gzip bomb at the decompression cap read in
seconds (263 s through Python Record objects) or, one record beyond the cap, a note naming the
file, the batch position and the sizes."""

from __future__ import annotations

import struct
import zlib

import pytest

from auditor.formats import compression
from auditor.formats.errors import FormatError
from harness.encoding import zigzag_varint
from harness.record_fold import deep_row
from harness.records import TINY_RECORD, v2_batch, v2_record

# a 256 MiB gzip bomb read twice: 3 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=3)]

GZIP, LOG_APPEND_TIME, TRANSACTIONAL, CONTROL = 1, 0x08, 0x10, 0x20


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _shapes() -> dict[str, bytes]:
    recs = [v2_record(0, 0), v2_record(-900, 1), v2_record(3_000, 2, key=b"k", headers=[(b"h", b"x"), (b"", b"")]),
            v2_record(-1_001, 3), v2_record(2_500, 4, value=None)]   # ts 1000, 100, 4000, -1 (no timestamp), 3500
    plain = b"".join(recs)
    marker = v2_record(0, 0, key=struct.pack(">hh", 0, 1), value=struct.pack(">hi", 0, 3))
    abort = v2_record(0, 0, key=struct.pack(">hh", 0, 0), value=struct.pack(">hi", 0, 3))
    return {
        "plain": v2_batch(0, plain, 5),
        "gzip": v2_batch(0, plain, 5, attributes=GZIP) + v2_batch(5, _gzip(plain), 5, attributes=GZIP),
        "log append time": v2_batch(0, plain, 5, attributes=LOG_APPEND_TIME, max_ts=-7),
        "markers": (v2_batch(0, plain, 5, attributes=TRANSACTIONAL, producer_id=3)
                    + v2_batch(5, marker, 1, attributes=TRANSACTIONAL | CONTROL, producer_id=3)
                    + v2_batch(6, abort + marker, 2, attributes=TRANSACTIONAL | CONTROL, producer_id=3)),
        "offsets and timestamps beyond int64": v2_batch(2**63 - 2, plain, 5, base_ts=2**63 - 2000),
        "step back beyond int64 (the Python fold's big int)": (v2_batch(0, v2_record(0, 0), 1, base_ts=2**62 * 2 - 1)
                                                               + v2_batch(1, v2_record(0, 0), 1, base_ts=-2**63)),
        "5-byte varint with high bits (Kafka keeps 32)": v2_batch(
            0, zigzag_varint(7) + b"\x00\x00" + b"\x80\x80\x80\x80\x70" + b"\x01\x01\x00", 1),
        "varint of 6 bytes": v2_batch(0, zigzag_varint(8) + b"\x00\x00" + b"\x80\x80\x80\x80\x80\x00" + b"\x01\x01", 1),
        "bytes after the last record": v2_batch(0, plain + b"\x00", 5),
        "fewer records than recordsCount": v2_batch(0, plain, 6),
        "record length past the batch": v2_batch(0, zigzag_varint(100) + b"\x00\x00", 1),
        "negative header key length": v2_batch(0, zigzag_varint(8) + bytes([0, 0, 0, 1, 1, 2, 1, 0]), 1),
        "key length past its record": v2_batch(0, zigzag_varint(6) + bytes([0, 0, 0, 40, 1, 0]), 1),
        "control key under 4 bytes": v2_batch(0, v2_record(0, 0, key=b"\x00\x00\x01"), 1, attributes=CONTROL),
        "corrupt gzip": v2_batch(0, b"\x1f\x8b\x08\x00garbage", 1, attributes=GZIP),
        "earlier batches folded, then a broken one": v2_batch(0, plain, 5) + v2_batch(5, plain[:-3], 5),
    }


@pytest.mark.parametrize("name", list(_shapes()))
def test_c_record_fold_gives_the_python_loops_row_and_notes(tmp_path, name):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_shapes()[name])
    with_c, pure = deep_row(path, True), deep_row(path, False)
    assert with_c == pure
    assert with_c["record_count"] is not None or with_c["notes"], "a broken batch is a note"


def test_c_record_fold_values_on_a_known_batch(tmp_path):
    """Computed by hand, so that agreement with Python is not the only proof: timestamps 1000, 100,
    4000, none (-1), 3500 at offsets 0..4, then three markers at 1000 (offsets 5, 6, 7: commit,
    abort, commit). Smallest 100 at 1, running max 4000 at 2, largest step back 4000 - 1000 at 5."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_shapes()["plain"] + _shapes()["markers"][len(_shapes()["plain"]):])
    row = deep_row(path, True)
    assert (row["record_count"], row["min_timestamp_ms"], row["min_timestamp_offset"], row["max_timestamp_offset"],
            row["max_backward_jump_ms"], row["max_backward_jump_offset"], row["commit_markers"],
            row["abort_markers"]) == (8, 100, 1, 2, 3000, 5, 2, 1)


def _bombs(records: int) -> list[tuple[bytes, int]]:
    """Gzip batches (level 9) of ``records`` and ``records + 1`` TINY_RECORDs (7 bytes each): 256 MiB
    of them compress to ~390 KB. [(batch bytes, decompressed size)] (one compression for both)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    full, rest = divmod(records, 1 << 17)
    chunk = TINY_RECORD * (1 << 17)
    stream = b"".join([c.compress(chunk) for _ in range(full)] + [c.compress(TINY_RECORD * rest)])
    one_more = c.copy()
    out = []
    for n, tail in ((records, c.flush()), (records + 1, one_more.compress(TINY_RECORD) + one_more.flush())):
        out.append((v2_batch(0, stream + tail, n, attributes=GZIP, base_ts=0, max_ts=0), n * len(TINY_RECORD)))
    return out


def test_gzip_bomb_at_the_cap_is_read_and_one_record_beyond_it_is_a_note(tmp_path):
    """The bomb of benchmarks/fuzz_hangs.py at full size: a ~390 KB gzip batch of 38,347,922 records
    decompressing to 268,435,454 bytes, 2 below the 256 MiB cap. 'deep' read it through one Python
    Record per record: 263 s (load 8-11). The C fold counts them (the figures: benchmarks/fuzz_hangs.py).
    One record more passes the cap: a note names the file, the batch's and its payload's byte
    positions, the cap and the compressed size (the record count is then the headers' sum)."""
    cap = compression.DEFAULT_MAX_DECOMPRESSED_BYTES
    at_cap = cap // len(TINY_RECORD)
    for (records, readable), (batch, size) in zip(((at_cap, True), (at_cap + 1, False)), _bombs(at_cap)):
        assert (size <= cap) == readable and len(batch) < 400_000, (size, len(batch))
        path = tmp_path / f"{records}" / "00000000000000000000.log"
        path.parent.mkdir()
        path.write_bytes(v2_batch(100, TINY_RECORD, 1) + batch)    # the bomb at byte 68
        row = deep_row(path, True)
        notes = [n for n in row["notes"] if "beside it" not in n]   # not about the missing .index / .timeindex
        assert row["record_count"] == records + 1     # read (at the cap) or as the headers declare (beyond)
        if readable:
            assert notes == []
            assert (row["min_timestamp_ms"], row["min_timestamp_offset"], row["max_timestamp_offset"]) == (0, 0, 100)
            continue
        assert notes == [
            f"{path}: byte 68: records unreadable: {path}: byte 129: gzip decompressed size = 'more than {cap} "
            f"bytes from {len(batch) - 61} compressed bytes', expected <= {cap} bytes (the decompression cap "
            f"max_decompressed_bytes)"]


@pytest.mark.parametrize("name", ["one member", "two members (ISIZE: the last one's)", "ISIZE says 4 GiB - 1",
                                  "ISIZE says 0"])
def test_gzip_trailer_size_is_only_a_first_guess(name):
    """The gzip path sizes its first buffer from the trailer's ISIZE (one pass for a one-member stream;
    the bomb at the cap was decompressed ~1.7 times when the buffer grew x4 from 8x the input). A
    stream of several members still decompresses to the same bytes; a trailer that lies is a corrupt
    stream, as before (cramjam checks ISIZE, as Kafka's GZIPInputStream does), at the cost of one
    buffer of at most 1032 times the input (deflate's largest ratio) or the cap."""
    data = bytes(range(256)) * 3000
    one = _gzip(data)
    stream = {"one member": one,
              "two members (ISIZE: the last one's)": _gzip(data[:1000]) + _gzip(data[1000:]),
              "ISIZE says 4 GiB - 1": one[:-4] + b"\xff\xff\xff\xff",
              "ISIZE says 0": one[:-4] + bytes(4)}[name]
    if "ISIZE says" in name:
        with pytest.raises(FormatError, match="gzip stream = 'DecompressionError: corrupt gzip stream does not "
                                              "have a matching checksum'"):
            compression.decompress(GZIP, stream, magic=2)
        return
    assert compression.decompress(GZIP, stream, magic=2) == data
    with pytest.raises(FormatError, match="more than 1000 bytes from"):
        compression.decompress(GZIP, stream, magic=2, max_bytes=1000)
