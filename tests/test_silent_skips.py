"""Bad input in the offline readers is a note naming file, position and value, never a silent
skip (issue 24). Each test builds the bytes it feeds (layouts from kafka-format.md) and reads them
with the C extensions on and off."""

from __future__ import annotations

import struct

import crc32c
import pytest

from auditor.cluster import metadata_log as ml
from auditor.formats import kafka_message as km
from harness.encoding import uvarint, zigzag_varint

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000
TOPIC_RECORD = (2, 0)          # TopicRecord: api key 2, version 0


def _topic_record(name: bytes, topic_id: bytes) -> bytes:
    """frame (1, apiKey, version) + TopicRecord v0 body: name (compact string), topicId (uuid), tags."""
    return bytes([1, *TOPIC_RECORD]) + uvarint(len(name) + 1) + name + topic_id + uvarint(0)


def _record(offset_delta: int, value: bytes, key: bytes | None = None) -> bytes:
    body = (b"\x00" + zigzag_varint(0) + zigzag_varint(offset_delta)
            + (zigzag_varint(-1) if key is None else zigzag_varint(len(key)) + key)
            + zigzag_varint(len(value)) + value + zigzag_varint(0))
    return zigzag_varint(len(body)) + body


def _batch(base_offset: int, records: list[tuple], *, attributes: int = 0, producer_id: int = -1) -> bytes:
    """A v2 batch (no compression, CreateTime) of (offsetDelta, value[, key]) records, in that order."""
    recs = b"".join(_record(*r) for r in records)
    last_delta = max(r[0] for r in records)
    after_crc = struct.pack(">hiqqqhii", attributes, last_delta, TS, TS, producer_id, 0 if producer_id >= 0 else -1,
                            -1, len(records)) + recs
    return struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


ID_A, ID_B = bytes(range(1, 17)), bytes(range(17, 33))
#: baseOffset 0, batchLength 107, magic 2, CRC, attributes 0, lastOffsetDelta 0, timestamps, no
#: producer, 2 records: [length 28, offsetDelta 0 (00), TopicRecord "a"], [length 28, offsetDelta -1
#: (01), TopicRecord "b"]
BELOW_BASE_BATCH = bytes.fromhex(
    "00000000000000000000006b0000000002d347bca80000000000000000018bcfe568000000018bcfe56800ffffffffff"
    "ffffffffffffffffff0000000238000000012c01020002610102030405060708090a0b0c0d0e0f10000038000001012c"
    "01020002621112131415161718191a1b1c1d1e1f200000")


def _metadata_dir(tmp_path, data: bytes):
    mdir = tmp_path / ml.METADATA_DIR_NAME
    mdir.mkdir()
    (mdir / "00000000000000000000.log").write_bytes(data)
    return mdir


@pytest.mark.parametrize("use_c", [True, False], ids=["c", "python"])
def test_metadata_record_below_its_batch_base_offset_is_a_note_when_skipped_and_when_applied(
        tmp_path, monkeypatch, use_c):
    """A batch at baseOffset 0 whose second record has offsetDelta -1 (offset -1, corrupt: Kafka
    never writes a negative delta). The reader replays from offset 0 (no snapshot): the record
    falls below that and was left out without a word (the C batch path and the Python path alike).
    Now a note names the file, the batch's byte position, the offset and the offsetDelta; with a
    lower first offset the record is applied, and noted as well."""
    monkeypatch.setattr(km, "use_c", use_c)
    data = _batch(0, [(0, _topic_record(b"a", ID_A)), (-1, _topic_record(b"b", ID_B))])
    assert data == BELOW_BASE_BATCH
    mdir = _metadata_dir(tmp_path, data)
    log = ml.read_metadata_log([mdir])
    assert sorted(t.name for t in log.state.topics.values()) == ["a"]
    seg = str(mdir / "00000000000000000000.log")
    assert [str(n) for n in log.notes] == [
        f"{seg}: byte 0 (offset -1): record offset -1 is below its batch's baseOffset 0 (offsetDelta = -1, "
        f"expected >= 0): corrupt record, skipped (below 0, the first offset replayed after the base state)"]
    notes: list[ml.Note] = []
    entries = list(ml.read_entries(seg, notes, start_offset=-10))
    assert [(e.offset, e.data["name"]) for e in entries] == [(0, "a"), (-1, "b")]
    assert [(n.file, n.position, n.offset) for n in notes] == [(seg, 0, -1)]
    assert notes[0].message.endswith("corrupt record, applied")


def test_metadata_batch_with_a_negative_offset_delta_is_left_to_the_python_path():
    """The C batch path frames no batch holding a negative offsetDelta (None: the caller reads
    it with the Python path, which notes the record), so it never drops such a record itself."""
    from auditor.formats import metadata_records as mr
    from auditor.formats.record_batch import parse_v2_header

    for deltas in ((0, -1), (-5,), (0, 1, -2)):
        data = _batch(10, [(d, _topic_record(b"x", ID_A)) for d in deltas])
        header = parse_v2_header(data, 0, 0)
        assert [r[0] for r in mr.iter_records(header, data)] == [10 + d for d in deltas]
        assert mr.c_metadata_batch(header, data, lambda *a: a, lambda *a: a, label="t", position=0,
                                   start_offset=0) is None, deltas
    data = _batch(10, [(0, _topic_record(b"x", ID_A)), (1, _topic_record(b"y", ID_B))])
    it = mr.c_metadata_batch(parse_v2_header(data, 0, 0), data, lambda *a: a, lambda *a: a, label="t",
                             position=0, start_offset=11)
    assert it is not None and [e[2] if len(e) == 8 else e[0] for e in it] == [11]


# -- __consumer_offsets: a transaction marker that is neither COMMIT nor ABORT --------------------

TRANSACTIONAL, CONTROL = 0x10, 0x20
PRODUCER = 7


def _commit_key(group: bytes, topic: bytes, partition: int) -> bytes:
    """OffsetCommitKey (record type 1): group, topic (int16 length + bytes), partition int32."""
    return struct.pack(">hh", 1, len(group)) + group + struct.pack(">h", len(topic)) + topic + struct.pack(">i", partition)


def _commit_value(offset: int) -> bytes:
    """OffsetCommitValue version 3: offset, leaderEpoch -1, metadata "", commitTimestamp."""
    return struct.pack(">hqih", 3, offset, -1, 0) + struct.pack(">q", TS)


@pytest.mark.parametrize("use_c", [True, False], ids=["c-fold", "python-fold"])
@pytest.mark.parametrize("marker_key,shown", [(struct.pack(">hh", 0, 5), "00000005"), (b"\x00", "00")],
                         ids=["unknown-type-5", "key-too-short"])
def test_offsets_transaction_marker_of_unknown_type_is_a_note(tmp_path, monkeypatch, use_c, marker_key, shown):
    """A transactional offset commit of producer 7 (group g, t-0 at 42), then a control batch of
    that producer whose marker is neither COMMIT (type 1) nor ABORT (0): type 5, or a key too short
    to hold a type. The pending commit was dropped as for an ABORT without a word; now a note names
    the file, the marker's batch position and its key bytes. The commit stays uncommitted (the
    coordinator applies pending offsets on a COMMIT only), and a later plain commit still counts."""
    from auditor.cluster import consumer_groups as cg
    from auditor.cluster import offsets_segments as osg

    monkeypatch.setattr(osg, "USE_C_FOLD", use_c)
    txn = _batch(0, [(0, _commit_value(42), _commit_key(b"g", b"t", 0))], attributes=TRANSACTIONAL,
                 producer_id=PRODUCER)
    marker = _batch(1, [(0, struct.pack(">hi", 0, 3), marker_key)], attributes=TRANSACTIONAL | CONTROL,
                    producer_id=PRODUCER)
    plain = _batch(2, [(0, _commit_value(9), _commit_key(b"g", b"t", 1))])
    pdir = tmp_path / "logs" / "__consumer_offsets-0"
    pdir.mkdir(parents=True)
    seg = pdir / "00000000000000000000.log"
    seg.write_bytes(txn + marker + plain)
    result = cg.read_groups([tmp_path / "logs"])
    assert {tp: c.offset for tp, c in result.groups["g"].offsets.items()} == {("t", 1): 9}
    assert result.notes == [
        f"{seg}: byte {len(txn)}: control record key = {shown}, expected a COMMIT (type 1) or ABORT (type 0) "
        f"marker: the 1 pending transactional record(s) of producer {PRODUCER} dropped as for an ABORT"]
    seg.write_bytes(txn + _batch(1, [(0, struct.pack(">hi", 0, 3), struct.pack(">hh", 0, 1))],
                                 attributes=TRANSACTIONAL | CONTROL, producer_id=PRODUCER) + plain)
    result = cg.read_groups([tmp_path / "logs"])
    assert {tp: c.offset for tp, c in result.groups["g"].offsets.items()} == {("t", 0): 42, ("t", 1): 9}
    assert result.notes == []
