"""Keys of legacy message sets (magic 0 and 1, compressed wrappers included) in the key statistics,
on both paths (pure Python and the C fold): real captured record sets whose producers' keys are
known, synthetic segments with exact truth, and damaged legacy entries (a note, the rest counted)."""

from __future__ import annotations

import pytest
import shutil
import struct
import zlib
from pathlib import Path

import cramjam

from auditor.keys.partition_keys import scan_partition_keys
from auditor.keys.partitioners import murmur2
from harness.legacy_messages import gzip_wrapper, legacy_message
from harness.realdata import RECORD_SETS

pytestmark = pytest.mark.recorded

SEGMENT = "00000000000000000000.log"
TS = 1_700_000_000_000
GZIP = 1


def _both(part: Path) -> dict:
    python = scan_partition_keys(part, use_c=False, capacity=64, sample_size=32)
    c = scan_partition_keys(part, use_c=True, capacity=64, sample_size=32)
    assert c.stats.to_bytes() == python.stats.to_bytes()
    assert c.to_json(100) == python.to_json(100)
    return python.to_json(100)


def _partition(tmp_path: Path, name: str, data: bytes) -> Path:
    part = tmp_path / name
    part.mkdir()
    (part / SEGMENT).write_bytes(data)
    return part


def _counts(doc: dict) -> dict[int, int]:
    assert doc["heavy_hitters_error_records"] == 0
    return {item["key"]["murmur2"]: item["records_min"] for item in doc["heavy_hitters"]}


def test_real_legacy_record_sets_give_their_producers_keys(tmp_path):
    cases = {  # file: the keys its producer wrote (kafka-go's and kafkajs's own test fixtures)
        "kafka-go/kafkago_v1c-v1-v1c.records.bin": [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta"],
        "kafkajs/v0_response_gzip.records.bin": [b"key-0", b"key-1", b"key-2"],
        "kafkajs/v1_response.records.bin": [b"key-0"],
    }
    for i, (name, keys) in enumerate(cases.items()):
        part = tmp_path / f"legacy{i}-0"
        part.mkdir()
        shutil.copy(RECORD_SETS / name, part / SEGMENT)
        doc = _both(part)
        assert doc["legacy_records_read"] == doc["records"] == len(keys), name
        assert doc["legacy_records_keys_not_read"] == 0 and doc["null_key_records"] == 0
        assert _counts(doc) == {murmur2(k): 1 for k in keys}, name
    # magic 0 messages with null keys (kafka-rust, Kafka 0.8.2): 42 records, all null keys, keys read
    part = tmp_path / "rust-0"
    part.mkdir()
    shutil.copy(RECORD_SETS / "kafka-rust/fetch1.mytopic.1p.gzip.kafka.0821.records.bin", part / SEGMENT)
    doc = _both(part)
    assert (doc["records"], doc["null_key_records"], doc["legacy_records_read"]) == (42, 42, 42)


def test_synthetic_legacy_segment_exact_counts(tmp_path):
    entries, offset, truth, nulls = [], 0, {}, 0
    for i in range(30):
        magic = i % 2
        inner = [(None if j == 3 else b"k%d" % (j % 4), b"v" * j) for j in range(6)]
        for key, _ in inner:
            if key is None:
                nulls += 1
            else:
                truth[murmur2(key)] = truth.get(murmur2(key), 0) + 1
        if i % 3:
            entries.append(gzip_wrapper(offset + len(inner) - 1, magic, inner))
        else:
            entries += [legacy_message(offset + j, magic, k, v) for j, (k, v) in enumerate(inner)]
        offset += len(inner)
    doc = _both(_partition(tmp_path, "legacy-0", b"".join(entries)))
    assert doc["records"] == doc["legacy_records_read"] == offset
    assert doc["null_key_records"] == nulls and _counts(doc) == truth
    assert (doc["first_offset"], doc["last_offset"]) == (0, offset - 1)


def test_bad_legacy_entries_are_notes_and_the_rest_is_counted(tmp_path):
    good = legacy_message(0, 1, b"a", b"x") + gzip_wrapper(3, 1, [(b"b", b"y"), (b"c", b"y"), (b"d", b"y")])
    after = legacy_message(4, 0, b"e", b"z")
    absurd = bytearray(legacy_message(5, 1, b"key", b"v"))
    struct.pack_into(">i", absurd, 12 + 14, 2**31 - 1)  # keyLength far past the message
    inner_absurd = bytearray(legacy_message(0, 1, b"key", b"v"))
    struct.pack_into(">i", inner_absurd, 12 + 14, 10_000)
    wrapper = legacy_message(6, 1, None, bytes(cramjam.gzip.compress(bytes(inner_absurd))), attrs=GZIP)
    cut_in_key = legacy_message(7, 1, b"a-long-key-cut-in-its-middle", b"v")[:12 + 14 + 4 + 10]
    data = good + bytes(absurd) + after + wrapper + after + cut_in_key
    part = _partition(tmp_path, "bad-0", data)
    doc = _both(part)
    assert doc["records"] == 6 and doc["unreadable_batches"] == 2
    notes = doc["notes"]
    at_absurd, at_wrapper = len(good), len(good) + len(absurd) + len(after)
    assert any(f"{part / SEGMENT}: byte {at_absurd}" in n and "keyLength" in n for n in notes), notes
    assert any(f"byte {at_wrapper}" in n and "inner message keyLength" in n for n in notes), notes
    assert any(f"byte {len(data) - len(cut_in_key)}" in n and "partial-tail" in n for n in notes), notes


def _message_at(offset: int, magic: int, key: bytes | None, value: bytes | None, ts: int, attrs: int = 0) -> bytes:
    body = struct.pack(">bb", magic, attrs) + (struct.pack(">q", ts) if magic == 1 else b"")
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


LOG_APPEND_TIME = 0x08


def test_compressed_wrappers_are_added_in_c_as_the_python_loop_adds_them(tmp_path, monkeypatch):
    """KeyFold.add_legacy (the inner set walked in C) gives what the Python loop gives: every key
    size (empty, null, long), a magic 1 wrapper's relative offsets, one written with offset 0 (old
    librdkafka), its LogAppendTime taking over the inner timestamps (first seen), magic 0 inner
    messages in a magic 1 wrapper (timestamp -1); and on the C path the Python loop reads no
    compressed wrapper at all (only the single messages)."""
    from auditor.formats.log_reader import LogReader

    def wrapper(last_offset, inner, attrs=GZIP, ts=TS + 777):
        messages = b"".join(_message_at(i, m, k, v, TS + 10 * i) for i, (m, k, v) in enumerate(inner))
        return _message_at(last_offset, 1, None, bytes(cramjam.gzip.compress(messages)), ts, attrs=attrs)

    inner = [(1, b"", b"v"), (1, None, b"v"), (1, b"k" * 3000, None), (0, b"old", b"v"), (1, b"a", b"")]
    entries = [wrapper(4, inner, attrs=GZIP | LOG_APPEND_TIME), wrapper(9, inner), wrapper(0, inner),
               _message_at(10, 1, b"single", b"v", TS), wrapper(15, [(1, b"k%d" % i, b"v") for i in range(5)])]
    part = _partition(tmp_path, "wrappers-0", b"".join(entries))
    read = []
    records = LogReader.records
    monkeypatch.setattr(LogReader, "records", lambda self, batch, **kw: read.append(batch.magic) or records(self, batch, **kw))
    c = scan_partition_keys(part, use_c=True, capacity=64, sample_size=32)
    assert read == [1], read   # the single message only
    doc = _both(part)
    assert doc == c.to_json(100)
    assert doc["records"] == doc["legacy_records_read"] == 5 * 4 + 1
    assert doc["null_key_records"] == 3 and doc["empty_key_records"] == 3, doc
    # the wrapper written with offset 0 adds 0 to its relative offsets: the walk's last offset stays 15
    assert (doc["first_offset"], doc["last_offset"]) == (0, 15)
