"""Record formats (auditor/formats: record_batch, legacy, compression, varint, log_reader).

1. Every real file under ../shared/fixtures/real/record-sets/** and every .log under broker-dirs/**
   is walked and read deep, and compared with the independent scan in EXPECTED.txt (parsed here).
   EXPECTED's conventions, as its values show: "offs" = (the offset field of the first entry,
   i.e. a v2 baseOffset or a legacy wrapper offset; the last entry's last offset); "ts" = the
   range of batch max timestamps in UTC seconds; crc_bad = CRC-32C (v2) / CRC32 (legacy) failures.
2. Kafka semantics the independent scan does not state (legacy baseOffset/countOrNull, relative
   v1 offsets, LogAppendTime, control markers, xerial snappy) on the same real files.
3. Unit tests of the pieces on small crafted byte strings (varints, CRC, lz4 frame quirk,
   decompression cap, every stop reason).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import struct
from collections import Counter
from pathlib import Path

import cramjam
import crc32c
import pytest

from auditor.formats import compression, legacy
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.formats.varint import encode_varint, read_varint, read_varlong
from harness.expected_txt import read_expected
from harness.realdata import BROKER_DIRS, REAL, RECORD_SETS, at_least

pytestmark = pytest.mark.recorded

EXPECTED_FILE = REAL / "EXPECTED.txt"
# Fixtures README: its header says codec none but the records are not v2 records; Kafka's deep
# iteration throws on it as well. Shallow facts and the CRC still compare.
NOT_V2_RECORDS = {"v0_recordbatch_zstd.bin"}

EXPECTED = read_expected(EXPECTED_FILE)
FIXTURE_FILES = at_least(sorted(p for p in RECORD_SETS.rglob("*") if p.is_file()) + sorted(BROKER_DIRS.rglob("*.log")),
                         45 + 7, "record sets and broker-dir .log files")


def _rel(p: Path) -> str:
    return str(p.relative_to(REAL))


def _utc_seconds(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def test_expected_covers_every_fixture_file():
    assert FIXTURE_FILES, "no fixtures found"
    assert sorted(map(_rel, FIXTURE_FILES)) == sorted(EXPECTED), "EXPECTED.txt and the fixture files differ"


# ---------------------------------------------------------------------------------------
# 1. every real file against the independent scan
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_rel)
def test_real_file_matches_independent_scan(path):
    exp = EXPECTED[_rel(path)]
    with LogReader(path) as reader:
        batches = list(reader.batches(0))
        assert reader.size_bytes == exp["size"] == path.stat().st_size
        assert len(batches) == exp["batches"]
        assert dict(Counter(b.magic for b in batches)) == exp["magic"]
        assert dict(Counter(b.codec for b in batches)) == exp["codec"]
        assert sum(b.is_transactional for b in batches) == exp["txn"]
        assert sum(b.is_control for b in batches) == exp["ctrl"]
        first = last = None
        if batches:
            b0 = batches[0]
            first = b0.base_offset if b0.magic >= 2 else b0.last_offset  # the entry's offset field
            last = batches[-1].last_offset
        assert (first, last) == exp["offs"]
        stamps = [b.max_timestamp_ms for b in batches if b.max_timestamp_ms >= 0]
        ts = (_utc_seconds(min(stamps)), _utc_seconds(max(stamps))) if stamps else (None, None)
        assert ts == exp["ts"]
        assert reader.size_bytes - reader.stop_position == exp["trail"]
        assert reader.stop_reason == ("partial-tail" if exp["trail"] else None), reader.stop_detail
        if exp["trail"]:
            assert str(path) in reader.stop_detail and str(reader.stop_position) in reader.stop_detail

        # deep: CRC of every batch, every record
        crc_bad = 0
        for b in batches:
            ok, stored, computed = reader.crc_ok(b)
            assert stored == b.crc
            crc_bad += not ok
        assert crc_bad == exp["crc_bad"]
        for b in batches:
            if path.name in NOT_V2_RECORDS:
                with pytest.raises(FormatError, match=str(path)):
                    list(reader.records(b))
                continue
            records = list(reader.records(b))
            _check_batch_records(b, records)
        if batches and path.name not in NOT_V2_RECORDS:
            all_offsets = [r.offset for b in batches for r in reader.records(b)]
            assert all_offsets == sorted(all_offsets) and len(set(all_offsets)) == len(all_offsets)
            assert all_offsets[-1] == last


def _check_batch_records(b, records):
    """Kafka's per-batch invariants, checked on every real batch."""
    assert records, f"batch at byte {b.position} has no records"
    assert records[0].offset == b.base_offset and records[-1].offset == b.last_offset
    if b.magic >= 2:
        assert len(records) == b.record_count
        if b.timestamp_type == "LogAppendTime":
            assert all(r.timestamp_ms == b.max_timestamp_ms for r in records)
        else:
            assert max(r.timestamp_ms for r in records) == b.max_timestamp_ms
            assert records[0].timestamp_ms == b.base_timestamp_ms
        assert all((r.control_type is not None) == b.is_control for r in records)
    else:
        assert b.record_count is None  # Kafka's countOrNull() is null for every legacy entry
        assert b.producer_id == b.producer_epoch == b.base_sequence == b.partition_leader_epoch == -1
        if b.magic == 0:
            assert b.timestamp_type is None and b.max_timestamp_ms == -1
            assert all(r.timestamp_ms == -1 for r in records)
        elif b.codec == "none":
            assert records[0].timestamp_ms == b.max_timestamp_ms
        elif b.timestamp_type == "CreateTime":
            assert max(r.timestamp_ms for r in records) <= b.max_timestamp_ms
        if b.codec == "none":
            assert len(records) == 1 and b.base_offset == b.last_offset


# ---------------------------------------------------------------------------------------
# 2. Kafka semantics on real files
# ---------------------------------------------------------------------------------------


def _read_all(path):
    with LogReader(path) as reader:
        batches = list(reader.batches(0))
        return batches, [list(reader.records(b)) for b in batches]


def test_legacy_v0_compressed_wrapper_offsets_are_absolute_and_base_is_first_inner():
    for name in ("fetch1.mytopic.1p.gzip.kafka.0821.records.bin", "fetch1.mytopic.1p.snappy.kafka.0821.records.bin",
                 "fetch1.mytopic.1p.snappy.kafka.0822.records.bin"):
        (b,), (records,) = _read_all(RECORD_SETS / "kafka-rust" / name)
        assert (b.magic, b.base_offset, b.last_offset, b.record_count) == (0, 0, 41, None)
        assert [r.offset for r in records] == list(range(42))


def test_legacy_v1_relative_inner_offsets():
    # kafka-go v1c-v1-v1c: wrapper offsets 1, (2 plain), 5; inner relative offsets become absolute
    batches, records = _read_all(RECORD_SETS / "kafka-go" / "kafkago_v1c-v1-v1c.records.bin")
    wrappers = [(b, r) for b, r in zip(batches, records) if b.codec == "gzip"]
    assert wrappers
    for b, recs in wrappers:
        assert b.magic == 1 and b.base_offset == recs[0].offset and b.last_offset == recs[-1].offset
        assert [r.offset for r in recs] == list(range(b.base_offset, b.last_offset + 1))


def test_snappy_xerial_framing_in_real_legacy_wrapper():
    path = RECORD_SETS / "kafka-rust" / "fetch1.mytopic.1p.snappy.kafka.0821.records.bin"
    data = path.read_bytes()
    value_at = legacy.LOG_OVERHEAD + legacy.KEY_SIZE_OFFSET_V0 + 4 + 4  # null key: no key bytes
    assert data[value_at:value_at + 8] == compression.XERIAL_MAGIC
    out = compression.decompress(compression.CODEC_SNAPPY, data[value_at:], magic=0)
    assert struct.unpack_from(">q", out, 0)[0] == 0  # first inner offset


def test_log_append_time_batch_uses_max_timestamp():
    (b,), (records,) = _read_all(RECORD_SETS / "kafkajs" / "v0_recordbatch.bin")
    assert b.timestamp_type == "LogAppendTime" and b.codec == "gzip"
    assert [r.timestamp_ms for r in records] == [b.max_timestamp_ms] * len(records)


def test_commit_marker_in_real_transactional_log():
    path = BROKER_DIRS / "kraft-transactional/kafka-data/_confluent-ksql-default__command_topic-0/00000000000000000000.log"
    batches, records = _read_all(path)
    ctrl = [(b, r) for b, r in zip(batches, records) if b.is_control]
    assert len(ctrl) == 1
    b, recs = ctrl[0]
    assert b.is_transactional and b.producer_id >= 0
    assert [r.control_type for r in recs] == [v2.CONTROL_COMMIT]


def test_v2_header_constants_chain():
    assert (v2.LENGTH_OFFSET, v2.PARTITION_LEADER_EPOCH_OFFSET, v2.V2_MAGIC_OFFSET, v2.CRC_OFFSET,
            v2.ATTRIBUTES_OFFSET, v2.LAST_OFFSET_DELTA_OFFSET, v2.BASE_TIMESTAMP_OFFSET, v2.MAX_TIMESTAMP_OFFSET,
            v2.PRODUCER_ID_OFFSET, v2.PRODUCER_EPOCH_OFFSET, v2.BASE_SEQUENCE_OFFSET, v2.RECORDS_COUNT_OFFSET,
            v2.RECORD_BATCH_OVERHEAD) == (8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61)
    assert (legacy.RECORD_OVERHEAD_V0, legacy.RECORD_OVERHEAD_V1, legacy.ENTRY_MAGIC_OFFSET) == (14, 22, 16)


def test_first_batch_and_restart_from_a_position():
    path = BROKER_DIRS / "kafka-2018-v2/kafka-logs/debug_topic-0/00000000000000000000.log"
    with LogReader(path) as reader:
        all_batches = list(reader.batches(0))
        assert reader.stop_reason is None and reader.stop_position == reader.size_bytes
        assert reader.first_batch() == all_batches[0]
        assert list(reader.batches(all_batches[1].position)) == all_batches[1:]


def test_shallow_walk_of_a_real_segment():
    """The hot loop's whole walk: 8,202 real batches, to the end. Its speed is measured in
    benchmarks/pacing_and_walk.py, not asserted here (a loaded machine is not a regression)."""
    path = BROKER_DIRS / "kafka-2018-v2/kafka-logs/__consumer_offsets-28/00000000000000000000.log"
    with LogReader(path) as reader:
        n = sum(1 for _ in reader.batches(0))
        assert reader.stop_reason is None and reader.stop_position == reader.size_bytes
    assert n == 8202


# ---------------------------------------------------------------------------------------
# 3. units on crafted bytes
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, encoded", [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"),
                                            (64, b"\x80\x01"), (300, b"\xd8\x04"),
                                            (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**31), b"\xff\xff\xff\xff\x0f")])
def test_varint_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert read_varint(encoded, 0, len(encoded)) == (value, len(encoded))
    assert read_varlong(encoded, 0, len(encoded)) == (value, len(encoded))


def test_varlong_extremes_and_errors():
    for value in (2**63 - 1, -(2**63), 1 << 40, -(1 << 40)):
        enc = encode_varint(value)
        assert read_varlong(b"xx" + enc, 2, 2 + len(enc)) == (value, 2 + len(enc))
    with pytest.raises(FormatError, match="at most 5 varint bytes"):
        read_varint(b"\xff" * 6, 0, 6, "f.log", "keyLength")
    with pytest.raises(FormatError, match="at most 10 varint bytes"):
        read_varlong(b"\xff" * 11, 0, 11)
    with pytest.raises(FormatError, match=r"f.log: byte 1: len = '80', expected a complete varint before byte 2"):
        read_varint(b"\x00\x80\x01", 1, 2, "f.log", "len")  # the varint runs past its record


def test_crc32c_check_value_and_real_batch():
    assert crc32c.crc32c(b"123456789") == 0xE3069283
    path = BROKER_DIRS / "kafka-2018-v2/kafka-logs/debug_topic-0/00000000000000000000.log"
    data = path.read_bytes()
    b = LogReader(path).first_batch()
    assert v2.compute_crc(data[:b.size_bytes]) == b.crc
    # the leader epoch [12,16) and magic are outside the CRC; the attributes are inside
    changed = bytearray(data[:b.size_bytes])
    changed[v2.PARTITION_LEADER_EPOCH_OFFSET] ^= 0xFF
    assert v2.compute_crc(changed) == b.crc
    changed[v2.ATTRIBUTES_OFFSET + 1] ^= 0x01
    assert v2.compute_crc(changed) != b.crc


def test_xerial_snappy_chunks_and_raw_block():
    parts = [b"first chunk " * 50, b"second chunk " * 70]
    framed = compression.XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for p in parts:
        block = bytes(cramjam.snappy.compress_raw(p))
        framed += struct.pack(">i", len(block)) + block
    assert compression.decompress(compression.CODEC_SNAPPY, framed, magic=1) == b"".join(parts)
    raw = bytes(cramjam.snappy.compress_raw(parts[0]))
    assert compression.decompress(compression.CODEC_SNAPPY, raw, magic=2) == parts[0]
    with pytest.raises(FormatError, match="xerial chunk length"):
        compression.decompress(compression.CODEC_SNAPPY, framed[:-3] + b"", magic=1, label="t")


def _lz4_frame(payload: bytes, *, broken_hc: bool, content_size: bool = False) -> bytes:
    flg = 0x60 | (0x08 if content_size else 0)  # version 01, independent blocks
    bd = 0x40  # 64 KiB blocks
    descriptor = bytes([flg, bd]) + (struct.pack("<Q", len(payload)) if content_size else b"")
    magic = struct.pack("<I", compression.LZ4_FRAME_MAGIC)
    # Kafka's pre-0.10 writer hashed from the frame magic on; the spec hashes the descriptor only
    hashed = magic + descriptor if broken_hc else descriptor
    hc = (compression.xxh32(hashed) >> 8) & 0xFF
    frame = magic + descriptor + bytes([hc])
    for i in range(0, len(payload), 1 << 16):
        block = bytes(cramjam.lz4.compress_block(payload[i:i + (1 << 16)], store_size=False))
        frame += struct.pack("<I", len(block)) + block
    return frame + struct.pack("<I", 0)


def test_xxh32_reference_values():
    assert compression.xxh32(b"") == 0x02CC5D05
    assert compression.xxh32(b"abc") == 0x32D153FF
    assert compression.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_magic0_broken_frame_descriptor_checksum():
    payload = bytes(range(256)) * 600  # > one 64 KiB block
    broken = _lz4_frame(payload, broken_hc=True)
    good = _lz4_frame(payload, broken_hc=False, content_size=True)
    assert compression.decompress(compression.CODEC_LZ4, broken, magic=0) == payload
    assert compression.decompress(compression.CODEC_LZ4, good, magic=1) == payload
    assert compression.decompress(compression.CODEC_LZ4, good, magic=2) == payload
    with pytest.raises(FormatError, match=r"HC"):
        compression.decompress(compression.CODEC_LZ4, broken, magic=1, label="x.log", position=99)
    # optional fields: block checksums (skipped, as the batch CRC covers the bytes) and an
    # uncompressed block (high bit of the block size)
    small = b"kafka " * 20
    block = bytes(cramjam.lz4.compress_block(small, store_size=False))
    descriptor = bytes([0x70, 0x40])  # version 01, independent blocks, block checksum
    frame = (struct.pack("<I", compression.LZ4_FRAME_MAGIC) + descriptor
             + bytes([(compression.xxh32(descriptor) >> 8) & 0xFF])
             + struct.pack("<I", len(block)) + block + struct.pack("<I", compression.xxh32(block))
             + struct.pack("<I", 0x80000000 | len(small)) + small + struct.pack("<I", compression.xxh32(small))
             + struct.pack("<I", 0))
    assert compression.decompress(compression.CODEC_LZ4, frame, magic=2) == small + small
    with pytest.raises(FormatError, match="lz4 block size"):
        compression.decompress(compression.CODEC_LZ4, frame[:-12], magic=2)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_is_capped(codec):
    bomb_src = b"\0" * (8 << 20)
    cid = compression.CODEC_NAMES.index(codec)
    if codec == "snappy":
        data = bytes(cramjam.snappy.compress_raw(bomb_src))
    elif codec == "lz4":
        data = _lz4_frame(bomb_src, broken_hc=False)
    else:
        data = bytes(getattr(cramjam, codec).compress(bomb_src))
    with pytest.raises(FormatError, match=r"expected <= 1048576 bytes \(the decompression cap max_decompressed_bytes\)"):
        compression.decompress(cid, data, magic=2, max_bytes=1 << 20, label="bomb.log", position=7)
    assert compression.decompress(cid, data, magic=2, max_bytes=8 << 20) == bomb_src


def test_decompression_cap_through_the_reader_and_batch_cap():
    path = RECORD_SETS / "kafka-rust" / "fetch1.mytopic.1p.gzip.kafka.0821.records.bin"
    with LogReader(path, max_decompressed_bytes=1000) as reader:
        (b,) = list(reader.batches(0))
        assert b.base_offset == 41  # the wrapper could not be read within the cap: Kafka's lastOffset
        with pytest.raises(FormatError, match="decompression cap"):
            list(reader.records(b))
    with LogReader(path, max_batch_bytes=1000) as reader:
        (b,) = list(reader.batches(0))  # still walked shallowly
        assert reader.stop_reason is None and b.size_bytes > 1000
        with pytest.raises(FormatError, match=r"batch size = \d+, expected <= 1000 bytes \(max_batch_bytes"):
            list(reader.records(b))
        assert reader.crc_ok(b)[0]  # the CRC streams: no cap needed


def test_zstd_never_valid_in_legacy_wrapper():
    data = bytes(cramjam.zstd.compress(b"x" * 100))
    with pytest.raises(FormatError, match="zstd"):
        compression.decompress(compression.CODEC_ZSTD, data, magic=1)


# --- stop reasons -----------------------------------------------------------------------------

REAL_V2 = BROKER_DIRS / "kafka-2018-v2/kafka-logs/debug_topic-0/00000000000000000000.log"
REAL_V0 = RECORD_SETS / "kafka-rust" / "fetch1.mytopic.1p.nocompression.kafka.0821.records.bin"


def _walk(path):
    with LogReader(path) as reader:
        batches = list(reader.batches(0))
        return batches, reader.stop_position, reader.stop_reason, reader.stop_detail


@pytest.fixture
def v2_bytes():
    data = REAL_V2.read_bytes()
    starts = [b.position for b in LogReader(REAL_V2).batches(0)]
    return data, starts


def test_stop_partial_tail(tmp_path, v2_bytes):
    data, starts = v2_bytes
    for cut in (starts[2] + 30, starts[2] + 5, starts[2] + 16):
        f = tmp_path / f"cut{cut}.log"
        f.write_bytes(data[:cut])
        batches, stop, reason, detail = _walk(f)
        assert (len(batches), stop, reason) == (2, starts[2], "partial-tail")
        assert str(f) in detail and f"byte {starts[2]}" in detail


def test_stop_zero_tail(tmp_path, v2_bytes):
    data, starts = v2_bytes
    f = tmp_path / "zero10.log"
    f.write_bytes(data + b"\0" * 10)  # fewer than 17 bytes: a cut header, not a preallocated tail
    assert _walk(f)[1:3] == (len(data), "partial-tail")
    for zeros in (4096, 17, 3 << 20):
        f = tmp_path / f"zero{zeros}.log"
        f.write_bytes(data + b"\0" * zeros)
        batches, stop, reason, detail = _walk(f)
        assert (len(batches), stop, reason) == (3, len(data), "zero-tail"), detail
        assert str(f) in detail and str(len(data)) in detail
    # a zero header followed by data is not a preallocated tail
    f = tmp_path / "hole.log"
    f.write_bytes(data + b"\0" * 100 + data)
    batches, stop, reason, detail = _walk(f)
    first_nonzero = len(data) + 100 + len(data) - len(data.lstrip(b"\0"))
    assert (len(batches), stop, reason) == (3, len(data), "corrupt") and f"at byte {first_nonzero}" in detail


@pytest.mark.parametrize("size_field, field_name", [(13, "size"), (0, "size"), (-5, "size"), (0x7FFFFFFF, "size"),
                                                    (30, "batchLength")])
def test_stop_corrupt_size(tmp_path, v2_bytes, size_field, field_name):
    data, starts = v2_bytes
    bad = bytearray(data)
    struct.pack_into(">i", bad, starts[1] + v2.LENGTH_OFFSET, size_field)
    f = tmp_path / "bad.log"
    f.write_bytes(bytes(bad))
    batches, stop, reason, detail = _walk(f)
    assert (len(batches), stop, reason) == (1, starts[1], "corrupt"), detail
    assert detail.startswith(f"{f}: byte {starts[1]}: {field_name} = {size_field}, expected ")


def test_stop_unknown_magic(tmp_path, v2_bytes):
    data, starts = v2_bytes
    bad = bytearray(data)
    bad[starts[1] + v2.V2_MAGIC_OFFSET] = 7
    f = tmp_path / "magic.log"
    f.write_bytes(bytes(bad))
    batches, stop, reason, detail = _walk(f)
    assert (len(batches), stop, reason) == (1, starts[1], "corrupt")
    assert f"byte {starts[1]}: magic = 7, expected 0, 1 or 2" in detail


def test_stop_legacy_size_below_v1_overhead(tmp_path):
    data = bytearray(REAL_V0.read_bytes())
    data[legacy.ENTRY_MAGIC_OFFSET] = 1  # a magic-1 message needs >= 22 bytes; make it 15
    struct.pack_into(">i", data, v2.LENGTH_OFFSET, 15)
    f = tmp_path / "legacy.log"
    f.write_bytes(bytes(data))
    batches, stop, reason, detail = _walk(f)
    assert (batches, stop, reason) == ([], 0, "corrupt") and "messageSize = 15, expected >= 22" in detail


def test_stop_io_error_when_file_shrinks_under_the_reader(tmp_path, v2_bytes):
    data, starts = v2_bytes
    f = tmp_path / "shrinks.log"
    f.write_bytes(data)
    with LogReader(f) as reader:
        os.truncate(f, starts[1] + 20)  # the broker truncates the segment after we opened it
        batches = list(reader.batches(0))
        assert reader.stop_reason == "io-error" and str(f) in reader.stop_detail
        assert reader.stop_position == 0 and batches == []
        with pytest.raises(OSError):
            reader.crc_ok(v2.parse_v2_header(data, starts[2], starts[2]))


def test_deep_errors_name_file_and_position(tmp_path, v2_bytes):
    data, starts = v2_bytes
    bad = bytearray(data)
    struct.pack_into(">i", bad, starts[0] + v2.RECORDS_COUNT_OFFSET, 1000)  # more records declared than present
    f = tmp_path / "count.log"
    f.write_bytes(bytes(bad))
    with LogReader(f) as reader:
        b = next(iter(reader.batches(0)))
        with pytest.raises(FormatError, match=rf"{re.escape(str(f))}: byte \d+: record \d+"):
            list(reader.records(b))
        assert not reader.crc_ok(b)[0]


def test_reader_opens_read_only_and_leaves_file_untouched(tmp_path, v2_bytes):
    data, _ = v2_bytes
    f = tmp_path / "ro.log"
    f.write_bytes(data)
    os.chmod(f, 0o444)
    before = os.stat(f)
    with LogReader(f) as reader:
        for b in reader.batches(0):
            list(reader.records(b))
            reader.crc_ok(b)
    after = os.stat(f)
    assert (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size)
    assert f.read_bytes() == data
    import auditor.formats.log_reader as log_reader_module
    assert "import mmap" not in Path(log_reader_module.__file__).read_text()
