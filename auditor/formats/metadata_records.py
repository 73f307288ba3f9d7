"""KRaft metadata records (``__cluster_metadata``): the frame around each record, and the control
records of the KRaft log and its snapshots. Pure functions on bytes.

A metadata record is the *value* of a v2 record (its key is null), framed as Kafka's
``MetadataRecordSerde`` / ``AbstractApiMessageSerde`` writes it::

    frameVersion:uvarint (1)  apiKey:uvarint  version:uvarint  body (the ApiMessage, flexible)

``apiKey`` picks the message spec of type "metadata" (``TopicRecord`` = 2, ``PartitionRecord`` = 3,
...; kafka-metadata's ``common/metadata/*.json``), decoded by :mod:`auditor.formats.kafka_message`
at ``version``. The body must end exactly at the end of the value.

Control records (control batches) have the key ``version:int16 type:int16`` (``ControlRecordType``:
2 LEADER_CHANGE, 3 SNAPSHOT_HEADER, 4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION, 6 KRAFT_VOTERS; 0/1 are
transaction markers) and their value is the message of that type at the key's version
(kafka-clients' ``common/message/*.json``).

Every break (a short frame, an unknown frame version or api key, a version newer than the specs,
a body cut short) raises :class:`FormatError` naming file, byte position, field, value and what
was expected; the caller turns it into a note and goes on with the next record.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from auditor.formats import kafka_message as km
from auditor.formats import offsets_records as orec
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError

try:  # optional C framing + decoding of whole batches (setup.py builds it when a compiler is there)
    from auditor.formats import _cmessage
except ImportError:  # pragma: no cover - the pure-Python path is tested by switching C off
    _cmessage = None

#: ``AbstractApiMessageSerde.DEFAULT_FRAME_VERSION``: the only frame version Kafka writes.
FRAME_VERSION = 1
#: Control record key: version:int16 type:int16.
CONTROL_KEY = struct.Struct(">hh")
CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                      4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
#: The message spec of each control record type that carries one.
CONTROL_SPECS = {2: "LeaderChangeMessage", 3: "SnapshotHeaderRecord", 4: "SnapshotFooterRecord",
                 5: "KRaftVersionRecord", 6: "VotersRecord"}
#: How DumpLogSegments labels each control record type on its record line.
CONTROL_DUMP_LABELS = {2: "LeaderChange", 3: "SnapshotHeader", 4: "SnapshotFooter", 5: "KRaftVersion",
                       6: "KRaftVoters"}
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def record_type_name(spec_name: str) -> str:
    """``PartitionChangeRecord`` -> ``PARTITION_CHANGE_RECORD`` (``MetadataRecordType``, as
    DumpLogSegments' cluster-metadata decoder prints the type)."""
    return _CAMEL.sub("_", spec_name).upper()


@dataclass(slots=True)
class MetadataFrame:
    api_key: int
    version: int
    body_position: int          # byte position of the body inside the value
    spec: km.MessageSpec | None  # None: an api key the specs do not know


def _uvarint(value, pos: int, end: int, field: str, file, base: int) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise FormatError(file, base + start, field, f"{end - start} byte(s)", "a complete unsigned varint")
        b = value[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if pos - start >= km.MAX_VARINT_BYTES:
            raise FormatError(file, base + start, field, "more than 5 bytes", "an unsigned varint of at most 5 bytes")


def read_frame(value, *, file="<bytes>", base: int = 0) -> MetadataFrame:
    """The frame of one metadata record value (spec None for an unknown api key)."""
    if value is None:
        raise FormatError(file, base, "metadata record value", None, "a framed metadata record (not null)")
    end = len(value)
    b = value[0] if end else 0x80
    if b < 0x80 and end >= 3 and value[1] < 0x80 and value[2] < 0x80:   # the usual 3-byte frame
        frame, api_key, version, pos = b, value[1], value[2], 3
    else:
        frame, pos = _uvarint(value, 0, end, "frameVersion", file, base)
        api_key, pos = _uvarint(value, pos, end, "apiKey", file, base)
        version, pos = _uvarint(value, pos, end, "version", file, base)
    if frame != FRAME_VERSION:
        raise FormatError(file, base, "frameVersion", frame, f"{FRAME_VERSION}")
    return MetadataFrame(api_key, version, pos, km.by_api_key("metadata", api_key))


def decode_metadata_value(value, *, file="<bytes>", base: int = 0) -> tuple[km.MessageSpec, int, dict]:
    """(spec, version, fields) of one metadata record value; FormatError for anything it cannot
    decode: an unknown api key (field ``apiKey``), a version the specs do not have (field
    ``<Record>.version``), a broken body (the field that broke)."""
    frame = read_frame(value, file=file, base=base)
    spec = frame.spec
    if spec is None:
        raise FormatError(file, base, "apiKey", frame.api_key,
                          f"a metadata record type of the Kafka {km.kafka_metadata.KAFKA_VERSION} specs")
    data = spec.reader(frame.version)(value, frame.body_position, len(value), file, base)
    return spec, frame.version, data


def control_key(key, *, file="<bytes>", base: int = 0) -> tuple[int, int]:
    """(version, type) of a control record key."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise FormatError(file, base, "control record key", None if key is None else len(key),
                          "4 bytes (version:int16 type:int16)")
    return CONTROL_KEY.unpack_from(key, 0)


def decode_control_value(ctype: int, version: int, value, *, file="<bytes>", base: int = 0
                         ) -> tuple[km.MessageSpec | None, dict | None]:
    """(spec, fields) of a control record's value; (None, None) for the transaction markers and
    unknown types (their value is not a message of the specs)."""
    name = CONTROL_SPECS.get(ctype)
    if name is None:
        return None, None
    spec = km.spec(name, "kafka_clients")
    if value is None:
        raise FormatError(file, base, f"{name} value", None, "a control record value")
    return spec, spec.reader(version)(value, 0, len(value), file, base)


class _Irregular(Exception):
    """Something the fast record loop does not handle: the batch goes through the checked reader."""


def iter_records(header, batch_bytes, *, label: str = "<bytes>"):
    """``(offset, timestamp_ms, key, value)`` of every record of one batch, as
    ``offsets_records.iter_key_values`` gives them (same checks, same errors), with a fast path
    for what the metadata log is made of: uncompressed v2 batches of records without headers whose
    varints take one or two bytes. Anything else (compression, headers, longer varints, a bound
    broken, a negative offsetDelta) is read by ``offsets_records.iter_key_values``, which names the
    problem (or frames the record for the caller to note, as a negative offsetDelta)."""
    if (header.magic != v2.MAGIC_VALUE_V2 or len(batch_bytes) != header.size_bytes
            or batch_bytes[v2.ATTRIBUTES_OFFSET + 1] & v2.COMPRESSION_CODEC_MASK):
        return orec.iter_key_values(header, batch_bytes, label=label)
    try:
        return _fast_records(header, bytes(batch_bytes))
    except (_Irregular, IndexError):
        return orec.iter_key_values(header, batch_bytes, label=label)


def _varint2(data, pos):
    """A zigzag varint of one or two bytes at pos: (value, new pos); _Irregular when longer."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    c = data[pos + 1]
    if c >= 0x80:
        raise _Irregular
    u = (b & 0x7F) | (c << 7)
    return (u >> 1) ^ -(u & 1), pos + 2


# long function: the metadata log's record-slicing hot loop, varints inlined in wire order (a call
# per varint costs a quarter of the decode time); every irregularity falls back to the checked reader.
def _fast_records(header, data) -> list:
    count = header.record_count
    if count is None or count < 0:
        raise _Irregular
    base_offset = header.base_offset
    base_ts = header.base_timestamp_ms
    log_append = header.max_timestamp_ms if header.timestamp_type == v2.LOG_APPEND_TIME else None
    pos = v2.RECORDS_OFFSET
    end = len(data)
    out = []
    append = out.append
    varint = _varint2
    for _ in range(count):
        # length, attributes, timestampDelta, offsetDelta, keyLength, valueLength: the one-byte
        # case inline, two bytes through _varint2 (longer: the checked reader)
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = varint(data, pos)
        body_end = pos + length
        if length < 0 or body_end > end:
            raise _Irregular
        b = data[pos + 1]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            ts_delta, pos = varint(data, pos + 1)
        b = data[pos]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = varint(data, pos)
        b = data[pos]
        if b == 1:                                  # keyLength -1: null (metadata records)
            key = None
            pos += 1
        else:
            key_size, pos = varint(data, pos)
            if key_size >= 0:
                key = data[pos:pos + key_size]
                pos += key_size
            else:
                key = None
        b = data[pos]
        if b < 0x80:
            value_size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            value_size, pos = varint(data, pos)
        if value_size >= 0:
            value = data[pos:pos + value_size]
            pos += value_size
        else:
            value = None
        if pos + 1 != body_end or data[pos] != 0 or off_delta < 0:   # headersCount 0, then the end of the
            raise _Irregular            # record; a negative offsetDelta is corrupt: the checked path notes it
        pos = body_end
        append((base_offset + off_delta, log_append if log_append is not None else base_ts + ts_delta, key, value))
    if pos != end:
        raise _Irregular
    return out


# ----------------------------------------------------------------------------------------------
# Whole batches in C (auditor/formats/_cmessage.c)
# ----------------------------------------------------------------------------------------------

#: (api key << 7 | version) of the usual 3-byte frame -> (type, version, C decoder), filled by
#: :func:`remember_frame` as the Python path meets each (type, version); read by the C batch path.
C_FRAMES: list = [None] * (128 * 128)


def remember_frame(api_key: int, version: int, name: str, reader) -> None:
    """Let the C batch path decode records of this frame with ``reader`` (a C decoder; others are
    ignored, and so the records of a frame not yet met go through the Python path once)."""
    if (_cmessage is not None and isinstance(reader, _cmessage.Decoder) and reader.exact
            and 0 <= api_key < 128 and 0 <= version < 128):
        C_FRAMES[api_key << 7 | version] = (name, version, reader)


def c_metadata_batch(header, batch_bytes, factory, fallback, *, label: str, position: int, start_offset: int = 0):
    """The records of one data batch of a metadata log, framed in C (all of them, up front, as
    :func:`iter_records`' fast path frames them) and decoded in C as they are iterated: an
    iterator of ``factory(label, position, offset, timestamp_ms, False, type, version, fields)``
    in record order (records below ``start_offset`` left out); a record it does not decode
    itself (another frame, a type or version not met yet, anything irregular in its body) is
    ``fallback(offset, timestamp_ms, key, value)`` instead, left out when that returns None.
    None when the extension is not used or the batch is not what :func:`iter_records`' fast path
    takes (the caller then reads it with iter_records): a batch with a negative offsetDelta among
    them, so that every record left out here lies at or above its batch's baseOffset."""
    if (not km.use_c or _cmessage is None or header.magic != v2.MAGIC_VALUE_V2
            or len(batch_bytes) != header.size_bytes or header.record_count is None
            or batch_bytes[v2.ATTRIBUTES_OFFSET + 1] & v2.COMPRESSION_CODEC_MASK):
        return None
    log_append = header.max_timestamp_ms if header.timestamp_type == v2.LOG_APPEND_TIME else None
    return _cmessage.metadata_batch(batch_bytes, header.record_count, header.base_offset, header.base_timestamp_ms,
                                    log_append, start_offset, C_FRAMES, factory, fallback, label, position)
