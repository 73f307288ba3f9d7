"""Record batch v2 (magic 2): header, records, CRC (`DefaultRecordBatch.java`, `DefaultRecord.java`).

Also home of the two value types every record format yields, :class:`BatchHeader` and
:class:`Record` (contract: docs/formats-api.md, "records").

Invariants of a v2 batch (docs/kafka-format-notes.md, "Record batches" and "Records and varints"):

* The batch is ``LOG_OVERHEAD + batchLength`` bytes; the fixed header is
  ``RECORD_BATCH_OVERHEAD`` (61) bytes, so ``batchLength >= RECORD_BATCH_OVERHEAD - LOG_OVERHEAD``.
* The CRC is CRC-32C over ``[ATTRIBUTES_OFFSET, end)``: the partition leader epoch and the magic
  are *not* covered (the leader stamps the epoch without re-computing the CRC).
* Only the low byte of the int16 attributes is used (Kafka: ``(byte) getShort(ATTRIBUTES_OFFSET)``).
* ``recordsCount`` is always stored uncompressed; ``lastOffset = baseOffset + lastOffsetDelta``.
* Record timestamps are ``baseTimestamp + timestampDelta``, except in LogAppendTime batches where
  every record's timestamp is the batch ``maxTimestamp`` (``DefaultRecordBatch.RecordIterator``).
* A control batch holds control records whose key is ``version:int16, type:int16``.
* Reading the records stops after ``recordsCount`` records and then requires the payload to be
  exhausted ("Incorrect declared batch size" in Kafka); every record's fields must end exactly at
  its declared length ("Invalid record size").

Raw values keep Kafka's sentinels (-1 = none) so they compare 1:1 with DumpLogSegments.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import Iterator

from auditor.formats import compression
from auditor.formats.errors import FormatError
from auditor.formats.java_long import INT64_MAX, INT64_MIN, wrap
from auditor.formats.varint import read_varint, read_varlong

# --- framing shared by every magic (`Records.java`) ------------------------------------------
OFFSET_OFFSET = 0
OFFSET_LENGTH = 8
SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH
SIZE_LENGTH = 4
LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH                      # 12
MAGIC_OFFSET = 16                                              # same byte for every magic
MAGIC_LENGTH = 1
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH          # 17

# --- v2 batch header (`DefaultRecordBatch.java`) ---------------------------------------------
MAGIC_VALUE_V2 = 2
BASE_OFFSET_OFFSET = 0
BASE_OFFSET_LENGTH = 8
LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH        # 8
LENGTH_LENGTH = 4
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH  # 12
PARTITION_LEADER_EPOCH_LENGTH = 4
V2_MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH  # 16
V2_MAGIC_LENGTH = 1
CRC_OFFSET = V2_MAGIC_OFFSET + V2_MAGIC_LENGTH                 # 17
CRC_LENGTH = 4
ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH                    # 21: CRC-32C covers [21, end)
ATTRIBUTE_LENGTH = 2
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTE_LENGTH  # 23
LAST_OFFSET_DELTA_LENGTH = 4
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH  # 27
BASE_TIMESTAMP_LENGTH = 8
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH  # 35
MAX_TIMESTAMP_LENGTH = 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH  # 43
PRODUCER_ID_LENGTH = 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH  # 51
PRODUCER_EPOCH_LENGTH = 2
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH  # 53
BASE_SEQUENCE_LENGTH = 4
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH  # 57
RECORDS_COUNT_LENGTH = 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH   # 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET                          # 61
#: smallest legal batchLength: the header after the length field
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD         # 49

# --- attributes (low byte of the int16) -------------------------------------------------------
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
NO_TIMESTAMP = -1

# --- control records (`ControlRecordType.java`) -----------------------------------------------
CONTROL_KEY_VERSION_LENGTH = 2
CONTROL_KEY_TYPE_LENGTH = 2
CONTROL_KEY_SIZE = CONTROL_KEY_VERSION_LENGTH + CONTROL_KEY_TYPE_LENGTH
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

#: The whole 61-byte header in one unpack (hot loop: one call per batch).
#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
#: baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
V2_HEADER = struct.Struct(">qiibIHiqqqhii")
assert V2_HEADER.size == RECORD_BATCH_OVERHEAD
_CONTROL_KEY = struct.Struct(">hh")


@dataclass(slots=True)
class BatchHeader:
    """One top-level entry of a .log: a v2 batch, or a legacy (magic 0/1) shallow message.

    Values are raw, as Kafka's ``RecordBatch`` reports them (-1 = none). For legacy entries:
    ``base_offset`` is Kafka's ``baseOffset()`` (first inner offset of a compressed wrapper,
    found by decompressing it; the wrapper offset when that fails), ``last_offset`` the entry's
    offset, ``record_count`` None (``countOrNull``), producer fields -1, flags False.
    """

    position: int
    base_offset: int
    last_offset: int
    size_bytes: int
    magic: int
    codec: str
    timestamp_type: str | None
    base_timestamp_ms: int
    max_timestamp_ms: int
    record_count: int | None
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    crc: int


@dataclass(slots=True)
class Record:
    """One record (deep iteration). ``control_type`` is set for records of control batches only."""

    offset: int
    timestamp_ms: int
    key_size: int
    value_size: int
    header_count: int
    control_type: int | None
    key: bytes | None = None  # the key's bytes, only when asked for (``iter_records(keys=True)``)


_TS_TYPES = (CREATE_TIME, LOG_APPEND_TIME)
_CODECS = compression.CODEC_NAMES


def parse_v2_header(buf, at: int, position: int) -> BatchHeader:
    """The v2 header at ``buf[at:at+61]`` (``position`` = its byte position in the file).

    The caller has checked that 61 bytes are there and that batchLength >= MIN_BATCH_LENGTH.
    """
    (base, length, ple, magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq, count) = \
        V2_HEADER.unpack_from(buf, at)
    return BatchHeader(
        position, base, wrap(base + lod), LOG_OVERHEAD + length, magic,
        _CODECS[attrs & COMPRESSION_CODEC_MASK],
        _TS_TYPES[(attrs & TIMESTAMP_TYPE_MASK) >> 3],
        base_ts, max_ts, count,
        bool(attrs & TRANSACTIONAL_FLAG_MASK),
        bool(attrs & CONTROL_FLAG_MASK),
        bool(attrs & DELETE_HORIZON_FLAG_MASK),
        pid, pepoch, bseq, ple, crc,
    )


def compute_crc(batch_bytes) -> int:
    """CRC-32C of a whole v2 batch's covered range [ATTRIBUTES_OFFSET, end)."""
    import crc32c  # here: its import (importlib.metadata, ~25 ms) is for CRC checks only ('deep')

    return crc32c.crc32c(memoryview(batch_bytes)[ATTRIBUTES_OFFSET:])


# long function: the per-record decoder (the 'deep' depth's hot loop): fields in wire order, with
# each bound check next to the field it guards
def record_bytes(header: BatchHeader, batch_bytes, *, label: str = "<bytes>",
                 max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES) -> tuple[object, int]:
    """(bytes holding the records, position of the first record in them) of one v2 batch (the whole
    batch's bytes): the batch itself from byte 61, or its decompressed records from 0. Raises
    FormatError for a size that is not the header's, a negative recordsCount, a payload that
    does not decompress or decompresses beyond ``max_decompressed_bytes``."""
    codec_id, payload, start = record_payload(header, batch_bytes, label=label)
    if codec_id == compression.CODEC_NONE:
        return payload, start
    return compression.decompress(codec_id, payload, magic=MAGIC_VALUE_V2, max_bytes=max_decompressed_bytes,
                                  label=label, position=header.position + RECORDS_OFFSET), 0


def record_payload(header: BatchHeader, batch_bytes, *, label: str = "<bytes>") -> tuple[int, object, int]:
    """record_bytes' checks before decompressing: (codec id, the batch itself and RECORDS_OFFSET when
    uncompressed, else the compressed payload and 0)."""
    pos0 = header.position
    if len(batch_bytes) != header.size_bytes:
        raise FormatError(label, pos0, "batch bytes", len(batch_bytes), f"{header.size_bytes} (12 + batchLength)")
    (attrs,) = struct.unpack_from(">H", batch_bytes, ATTRIBUTES_OFFSET)
    codec_id = attrs & COMPRESSION_CODEC_MASK
    if header.record_count < 0:
        raise FormatError(label, pos0 + RECORDS_COUNT_OFFSET, "recordsCount", header.record_count, ">= 0")
    if codec_id == compression.CODEC_NONE:
        return codec_id, batch_bytes, RECORDS_OFFSET
    return codec_id, memoryview(batch_bytes)[RECORDS_OFFSET:], 0


@dataclass(frozen=True, slots=True)
class RecordsFrom:
    """Where :func:`iter_records` resumes: record ``index`` at ``position`` of ``data``, whose records
    end at ``end``. ``data`` holds them as :func:`record_bytes` does (the batch itself, positions
    from the batch's first byte; or the decompressed stream, ``decompressed``), or only the bytes
    the loop reads from ``position`` on, at their stream positions (a sparse buffer: the C fold's
    refused record, LogReader.fold_record_times). The loop's positions, error texts included, are
    those of the whole batch's loop."""

    data: object
    position: int
    end: int
    index: int
    decompressed: bool


def refused_in_stream(kept: bytes, at: int, end: int, index: int) -> RecordsFrom:
    """Where the record loop resumes at record ``index``, which the C fold refused at position ``at`` of
    a decompressed stream of ``end`` bytes, keeping ``kept`` from there (RecordFold.refused_bytes: what
    the loop reads of that record). The bytes sit at their own positions in an anonymous private map
    of the stream's size (memory, never a file), so that the loop's positions and error texts are
    the whole stream's; pages it does not touch are never allocated (a few KB for 256 MiB)."""
    sparse = mmap.mmap(-1, max(end, 1), flags=mmap.MAP_PRIVATE)
    sparse[at:at + len(kept)] = kept
    return RecordsFrom(sparse, at, end, index, True)


# long function: the per-record loop of the Python path, kept inline: a helper call per record or per
# field cost ~20% of the deep scan (the C twin is _cwalk.fold_records)
def iter_records(header: BatchHeader, batch_bytes, *, label: str = "<bytes>",
                 max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES,
                 keys: bool = False, resume: RecordsFrom | None = None) -> Iterator[Record]:
    """Every record of one v2 batch; ``batch_bytes`` is the whole batch (header included).
    ``keys=True``: each record carries its key's bytes (None for a null key). ``resume``: the
    records from ``resume.index`` on only, read from ``resume.data`` (``batch_bytes`` unused)."""
    pos0 = header.position
    count = header.record_count
    if resume is None:
        data, start = record_bytes(header, batch_bytes, label=label, max_decompressed_bytes=max_decompressed_bytes)
        # error positions: file positions in an uncompressed batch; inside a decompressed stream,
        # positions in that stream, with the batch position in the label
        base_pos = pos0 if start else None
        end, first = len(data), 0
    else:
        data, start, end, first = resume.data, resume.position, resume.end, resume.index
        base_pos = None if resume.decompressed else pos0
    base_offset = header.base_offset
    base_ts = header.base_timestamp_ms
    log_append = header.max_timestamp_ms if header.timestamp_type == LOG_APPEND_TIME else None
    control = header.is_control
    where = label if base_pos is not None else f"{label} (batch at byte {pos0}, decompressed {header.codec} records)"
    pos = start
    lo, hi = INT64_MIN, INT64_MAX
    for i in range(first, count):
        rec_start = pos
        fpos = (base_pos + pos) if base_pos is not None else pos
        if pos >= end:
            raise FormatError(where, fpos, f"record {i}", "end of records",
                              f"{count} records (recordsCount) before the end of the batch")
        length, pos = read_varint(data, pos, end, where, f"record {i} length")
        body_end = pos + length
        if length < 0 or body_end > end:
            raise FormatError(where, fpos, f"record {i} length", length, f"0..{end - pos} (bytes left in the batch)")
        pos += 1  # attributes: int8, unused
        ts_delta, pos = read_varlong(data, pos, body_end, where, f"record {i} timestampDelta")
        off_delta, pos = read_varint(data, pos, body_end, where, f"record {i} offsetDelta")
        key_size, pos = read_varint(data, pos, body_end, where, f"record {i} keyLength")
        key_at = pos
        if key_size > 0:
            pos += key_size
        value_size, pos = read_varint(data, pos, body_end, where, f"record {i} valueLength")
        if value_size > 0:
            pos += value_size
        nheaders, pos = read_varint(data, pos, body_end, where, f"record {i} headersCount")
        if nheaders < 0:
            raise FormatError(where, fpos, f"record {i} headersCount", nheaders, ">= 0")
        for h in range(nheaders):
            hk, pos = read_varint(data, pos, body_end, where, f"record {i} header {h} keyLength")
            if hk < 0:
                raise FormatError(where, fpos, f"record {i} header {h} keyLength", hk, ">= 0")
            pos += hk
            hv, pos = read_varint(data, pos, body_end, where, f"record {i} header {h} valueLength")
            if hv > 0:
                pos += hv
        if pos != body_end:
            raise FormatError(where, fpos, f"record {i} size", pos - rec_start,
                              f"{body_end - rec_start} (its length varint + length)")
        control_type = None
        if control:
            if key_size < CONTROL_KEY_SIZE:
                raise FormatError(where, fpos, f"record {i} control key size", key_size,
                                  f">= {CONTROL_KEY_SIZE} (version:int16, type:int16)")
            control_type = _CONTROL_KEY.unpack_from(data, key_at)[1]
        offset = base_offset + off_delta
        if not lo <= offset <= hi:
            offset = wrap(offset)  # Java long arithmetic (java_long.py); a compare, not a call, per record
        ts = log_append if log_append is not None else base_ts + ts_delta
        if not lo <= ts <= hi:
            ts = wrap(ts)
        yield Record(offset, ts, key_size, value_size, nheaders, control_type,
                     (bytes(data[key_at:key_at + key_size]) if key_size >= 0 else None) if keys else None)
    if pos != end:
        fpos = (base_pos + pos) if base_pos is not None else pos
        raise FormatError(where, fpos, "bytes after the last record", end - pos,
                          f"0 (recordsCount = {count}: incorrect declared batch size)")


def refused_record_error(header: BatchHeader, refused: RecordsFrom, *, label: str = "<bytes>") -> FormatError | None:
    """The FormatError :func:`iter_records` raises at the record the C fold refused (``refused``:
    where it stopped), found by reading that record alone. None if it reads that record (the C fold
    and this loop disagree; the caller then reads the whole batch)."""
    try:
        for _ in iter_records(header, None, label=label, resume=refused):
            return None
    except FormatError as exc:
        return exc.with_traceback(None)   # (its frames would keep the records alive as long as the error)
    return None
