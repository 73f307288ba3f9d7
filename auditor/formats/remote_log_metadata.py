"""``__remote_log_metadata`` record values (KIP-405's topic-based remote log metadata manager).

Every value is framed by ``AbstractApiMessageSerde`` (``RemoteLogMetadataSerde`` on top of
``BytesApiMessageSerde``), as the KRaft metadata log's records are::

    frameVersion:uvarint (1)  apiKey:uvarint  version:uvarint  message (flexible encoding)

with the message one of kafka-storage's specs (``message/*.json`` inside the jar, decoded by the
generic :mod:`auditor.formats.kafka_message` from the generated tables):

====== ============================================= =========================================
apiKey message                                        what it records
====== ============================================= =========================================
0      RemoteLogSegmentMetadataRecord                 a copy started: the segment's id, offsets,
                                                      leader epochs, max timestamp, size, state
1      RemoteLogSegmentMetadataUpdateRecord           a later state of a segment
2      RemotePartitionDeleteMetadataRecord            a whole partition's remote data deleted
3      RemoteLogSegmentMetadataSnapshotRecord         (snapshot files only; never in the topic)
====== ============================================= =========================================

State ids: ``RemoteLogSegmentState`` 0 COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED,
2 DELETE_SEGMENT_STARTED, 3 DELETE_SEGMENT_FINISHED; ``RemotePartitionDeleteState``
0 DELETE_PARTITION_MARKED, 1 DELETE_PARTITION_STARTED, 2 DELETE_PARTITION_FINISHED.

:func:`decode_value` turns one value into a :class:`RemoteLogEvent`, or raises ``FormatError``
naming where, the field and the value (an unknown frame version, api key or message version, a
value cut short, trailing bytes): the caller keeps that as a note and treats the metadata
partition as incomplete, never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.formats import kafka_message
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.formats.offsets_records import iter_key_values
from auditor.formats.record_batch import BatchHeader

#: ``AbstractApiMessageSerde``'s frame version, and the frame's fields (unsigned varints).
FRAME_VERSION = 1
FRAME_FIELDS = ("frame version", "apiKey", "version")
MAX_FRAME_VARINT_BYTES = 5
#: The generated spec module holding these messages (apiKeys 0-3 collide with KRaft's records).
SPEC_SOURCE = "kafka_storage"

SEGMENT_METADATA = "segment-metadata"
SEGMENT_UPDATE = "segment-update"
PARTITION_DELETE = "partition-delete"
SEGMENT_SNAPSHOT = "segment-snapshot"

#: apiKey -> (message name in kafka-storage's specs, event kind)
MESSAGES = {
    0: ("RemoteLogSegmentMetadataRecord", SEGMENT_METADATA),
    1: ("RemoteLogSegmentMetadataUpdateRecord", SEGMENT_UPDATE),
    2: ("RemotePartitionDeleteMetadataRecord", PARTITION_DELETE),
    3: ("RemoteLogSegmentMetadataSnapshotRecord", SEGMENT_SNAPSHOT),
}

SEGMENT_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED", 2: "DELETE_SEGMENT_STARTED",
                  3: "DELETE_SEGMENT_FINISHED"}
PARTITION_DELETE_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED",
                           2: "DELETE_PARTITION_FINISHED"}


@dataclass
class RemoteLogEvent:
    """One decoded ``__remote_log_metadata`` record (fields absent from its kind are None)."""

    kind: str
    topic: str
    partition: int
    topic_id: str
    state: str
    event_ms: int
    broker_id: int
    where: str
    segment_id: str | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    max_timestamp_ms: int | None = None
    size_bytes: int | None = None
    leader_epochs: list[tuple[int, int]] = field(default_factory=list)
    txn_index_empty: bool | None = None
    version: int = 0
    metadata_partition: int | None = None
    """the ``__remote_log_metadata`` partition and offset it was read from (set by the reader)."""
    metadata_offset: int | None = None


def record_values(reader: LogReader, batch: BatchHeader) -> Iterator[tuple[int, bytes | None, int]]:
    """``(offset, value, batch position)`` of every record of one data batch."""
    data = reader.read_batch_bytes(batch)
    for offset, _ts, _key, value in iter_key_values(batch, data, label=reader.label):
        yield offset, (bytes(value) if value is not None else None), batch.position


def _state(table: dict, value: int, where: str, field_name: str) -> str:
    if value not in table:
        raise FormatError(where, 0, field_name, value, f"one of {sorted(table)} ({', '.join(table.values())})")
    return table[value]


def read_frame(value, where: str) -> tuple[int, int, int, int]:
    """(frame version, apiKey, version, position of the message) of one value: three unsigned
    varints (``AbstractApiMessageSerde.read``: each must fit an unsigned 16-bit short)."""
    pos, end = 0, len(value)
    out = []
    for name in FRAME_FIELDS:
        start, shift, raw = pos, 0, 0
        while True:
            if pos >= end:
                raise FormatError(where, start, name, bytes(value[start:end]).hex() or "end of value",
                                  "a complete unsigned varint (the value is cut short)")
            b = value[pos]
            pos += 1
            raw |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if pos - start >= MAX_FRAME_VARINT_BYTES:
                raise FormatError(where, start, name, bytes(value[start:pos]).hex(),
                                  f"at most {MAX_FRAME_VARINT_BYTES} varint bytes")
        if raw > 0x7FFF:
            raise FormatError(where, start, name, raw, "a value that fits a short (<= 32767)")
        out.append(raw)
    return out[0], out[1], out[2], pos


def decode_value(value: bytes, where: str) -> RemoteLogEvent | None:
    """One record value -> its event (None for a snapshot record, which names no partition).
    ``where`` labels errors (file and batch position); positions in errors are inside the value."""
    if value is None:
        raise FormatError(where, 0, "value", None, "a remote log metadata record (null value)")
    frame_version, api_key, version, pos = read_frame(value, where)
    if frame_version != FRAME_VERSION:
        raise FormatError(where, 0, "frame version", frame_version, f"{FRAME_VERSION} (AbstractApiMessageSerde)")
    if api_key not in MESSAGES:
        raise FormatError(where, 0, "apiKey", api_key, f"one of {sorted(MESSAGES)} (remote log metadata records)")
    name, kind = MESSAGES[api_key]
    m = kafka_message.spec(name, source=SPEC_SOURCE).decode(value, version, pos=pos, file=where)
    if kind == SEGMENT_SNAPSHOT:
        return None
    if kind == PARTITION_DELETE:
        tip = m["topicIdPartition"]
        return RemoteLogEvent(kind, tip["name"], tip["partition"], tip["id"],
                              _state(PARTITION_DELETE_STATES, m["remotePartitionDeleteState"], where,
                                     "RemotePartitionDeleteState"),
                              m["eventTimestampMs"], m["brokerId"], where, version=version)
    seg_id = m["remoteLogSegmentId"]
    tip = seg_id["topicIdPartition"]
    event = RemoteLogEvent(kind, tip["name"], tip["partition"], tip["id"],
                           _state(SEGMENT_STATES, m["remoteLogSegmentState"], where, "RemoteLogSegmentState"),
                           m["eventTimestampMs"], m["brokerId"], where, segment_id=seg_id["id"], version=version)
    if kind == SEGMENT_METADATA:
        event.start_offset = m["startOffset"]
        event.end_offset = m["endOffset"]
        event.max_timestamp_ms = m["maxTimestampMs"]
        event.size_bytes = m["segmentSizeInBytes"]
        event.leader_epochs = [(e["leaderEpoch"], e["offset"]) for e in m["segmentLeaderEpochs"]]
        event.txn_index_empty = m.get("txnIndexEmpty")
    return event


__all__ = ["RemoteLogEvent", "decode_value", "read_frame", "record_values", "SEGMENT_METADATA", "SEGMENT_UPDATE",
           "PARTITION_DELETE", "SEGMENT_SNAPSHOT", "SEGMENT_STATES", "PARTITION_DELETE_STATES", "FRAME_VERSION"]
