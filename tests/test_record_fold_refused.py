"""A v2 batch whose last record is broken, after millions of good ones (issue 24's hang rule: more
than 1 s for a 1 MiB input). The C record fold used to give up on the whole batch (None) and the
Python loop read it again record by record to name the problem: 263 s for a gzip batch at the
256 MiB cap. The fold now stops at the broken record with its state (``refused``) and keeps that
record's bytes; ``record_batch.refused_record_error`` reads that record alone. The row and notes
are the pure-Python loop's, byte for byte; the Python loop reads no record before the broken one
(counted here, not timed: the figures are benchmarks/decompression_bombs.py's)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from auditor.formats import _cwalk
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError
from auditor.keys.partition_keys import scan_partition_keys
from harness.encoding import zigzag_varint
from harness.record_fold import PythonRecords, deep_row
from harness.records import BROKEN, COMPRESS, TINY_RECORD, v2_batch, v2_record

pytestmark = pytest.mark.unit

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
STATE = (None,) * 6
#: a batch of one record (offset 100, timestamp 1005) before the broken batch
FIRST_BATCH = v2_batch(100, v2_record(5, 0), 1)


def _log(tmp_path, name: str, good: int, broken: str, codec: int) -> str:
    tail, extra = BROKEN[broken]
    records = TINY_RECORD * good + tail
    payload = COMPRESS[codec](records) if codec else records
    path = tmp_path / name / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(FIRST_BATCH + v2_batch(0, payload, good + extra, attributes=codec,
                                            base_ts=7, max_ts=7))
    return str(path)


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4, ZSTD], ids=["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_broken_last_record_is_named_from_that_record_alone(tmp_path, monkeypatch, broken, codec):
    """3,000 good records then a broken one (or none where one is declared, or a byte too many): the
    row and the note of the pure-Python loop; with the C fold, no record is read by the Python loop."""
    path = _log(tmp_path, "b", 3000, broken, codec)
    pure = deep_row(path, False)
    counted = PythonRecords(monkeypatch)
    with_c = deep_row(path, True)
    assert with_c == pure
    assert (counted.loops, counted.records) == (0, 0)
    assert any("records unreadable" in n for n in with_c["notes"]), with_c["notes"]
    # the good records' timestamps folded (7 at offsets 0..; the first batch's record is at 1005)
    assert (with_c["min_timestamp_ms"], with_c["min_timestamp_offset"]) == (7, 0)


def _note(path: str, good: int, broken: str) -> str:
    """The note of _log's gzip batch (after its first batch) of ``good`` TINY_RECORDs then BROKEN[broken]."""
    at, batch = 7 * good, len(FIRST_BATCH)
    what = {"cut short": f"record {good} length = 6, expected 0..5 (bytes left in the batch)",
            "negative headersCount": f"record {good} headersCount = -1, expected >= 0",
            "a byte after the last record": f"bytes after the last record = 1, expected 0 (recordsCount = {good}: "
                                            f"incorrect declared batch size)"}[broken]
    return f"{path}: byte {batch}: records unreadable: {path} (batch at byte {batch}, decompressed gzip records): " \
           f"byte {at}: {what}"


@pytest.mark.parametrize("broken", ["cut short", "negative headersCount", "a byte after the last record"])
def test_a_million_records_then_a_broken_one(tmp_path, monkeypatch, broken):
    """1,500,000 records (10.5 MB decompressed, ten of decompress_chunks' pieces) then a broken one:
    the Python loop reads none of them (it read all 38 million of a batch at the cap again: 263 s).
    The note's text is _note's, which the pure-Python loop gives on 3,000 records."""
    small = _log(tmp_path, "small", 3000, broken, GZIP)
    assert [n for n in deep_row(small, False)["notes"] if "unreadable" in n] == [_note(small, 3000, broken)]
    path = _log(tmp_path, "big", 1_500_000, broken, GZIP)
    counted = PythonRecords(monkeypatch)
    row = deep_row(path, True)
    assert (counted.loops, counted.records) == (0, 0)
    assert [n for n in row["notes"] if "unreadable" in n] == [_note(path, 1_500_000, broken)]
    # a batch whose records are unreadable counts as its header declares (as with the Python loop); the
    # records before the broken one folded: the smallest timestamp, 7, at the first (the first batch's is 1005)
    declared = 1 + 1_500_000 + BROKEN[broken][1]
    assert (row["record_count"], row["min_timestamp_ms"], row["min_timestamp_offset"]) == (declared, 7, 0)


def test_record_fold_refuses_in_any_pieces_where_the_whole_fold_does():
    """RecordFold fed a payload with a broken record at a random place, cut anywhere: result() is
    fold_records' over the whole (the same refused (index, position)), and the error read from
    refused_bytes() alone is the whole payload's iter_records error."""
    rnd = random.Random(2024)
    header = v2.parse_v2_header(v2_batch(10, b"", 0, base_ts=1000), 0, 0)
    for case in range(300):
        good = [v2_record(rnd.randint(-9, 9), i, value=rnd.randbytes(rnd.choice((0, 3, 200, 5000))))
                for i in range(rnd.randint(0, 30))]
        tail, extra = rnd.choice(list(BROKEN.values()) + [(v2_record(0, 0, value=bytes(300))[:-7], 1),
                                                            (zigzag_varint(8) + bytes([0, 0, 0, 1, 1, 2, 1, 0]), 1)])
        payload = b"".join(good) + tail
        count = len(good) + extra
        whole = _cwalk.fold_records(payload, 0, count, 10, 1000, None, False, *STATE)
        assert whole[9] is not None and whole[9][0] == whole[6] == len(good), (case, whole)
        fold = _cwalk.RecordFold(count, 10, 1000, None, False, *STATE)
        pos = 0
        while pos < len(payload):
            n = rnd.choice((1, 2, 5, 64, 4096))
            fold.feed(bytearray(payload[pos:pos + n]))
            pos += n
        assert fold.result() == whole and fold.fed == len(payload), case
        index, at = whole[9]
        batch = dataclasses.replace(header, record_count=count)
        sparse = bytearray(at) + fold.refused_bytes()
        alone = v2.refused_record_error(batch, v2.RecordsFrom(sparse, at, len(payload), index, True))
        with pytest.raises(FormatError) as raised:
            list(v2.iter_records(batch, None, resume=v2.RecordsFrom(payload, 0, len(payload), 0, True)))
        assert str(alone) == str(raised.value), case


def _keys(path: str, use_c: bool):
    found = scan_partition_keys(Path(path).parent, use_c=use_c, prefix_bytes=2)
    return found.stats.to_bytes(), found.to_json(20)


@pytest.mark.parametrize("codec", [0, GZIP, ZSTD], ids=["none", "gzip", "zstd"])
@pytest.mark.parametrize("broken", list(BROKEN))
def test_key_scan_of_a_broken_last_record_reads_that_record_alone(tmp_path, monkeypatch, broken, codec):
    """The key scan (auditor/keys/partition_keys.py) had the same hand-over: KeyFold.add_records
    refused the batch and the Python loop read every record (16 MiB of gzip: 5.4 CPU s). Now the
    records before the broken one are added in C and the note comes from that record alone: the
    same sketches and result as the pure-Python scan, and the Python loop reads no record."""
    path = _log(tmp_path, "keys", 3000, broken, codec)
    pure = _keys(path, False)
    counted = PythonRecords(monkeypatch)
    assert _keys(path, True) == pure
    assert (counted.loops, counted.records) == (0, 0)
    assert "records unreadable, keys of the records before the error counted" in str(pure[1]["notes"]), pure[1]


def test_key_scan_of_a_million_records_then_a_broken_one(tmp_path, monkeypatch):
    path = _log(tmp_path, "big", 1_500_000, "cut short", GZIP)
    counted = PythonRecords(monkeypatch)
    found = scan_partition_keys(Path(path).parent, use_c=True, prefix_bytes=2)
    assert (counted.loops, counted.records) == (0, 0)
    assert [n for n in found.notes if "unreadable" in n] == [
        f"{path}: byte {len(FIRST_BATCH)}: batch 0..1500000: records unreadable, keys of the records before the "
        f"error counted: " + _note(path, 1_500_000, "cut short").split(": records unreadable: ", 1)[1]]
