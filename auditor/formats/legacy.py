"""Legacy message sets, magic 0 and 1 (`LegacyRecord.java`, `AbstractLegacyRecordBatch.java`).

A legacy "batch" is one shallow message framed like every log entry (offset:int64, size:int32),
``size`` counting the bytes from the CRC to the end of the message. Layout after the framing
(offsets relative to the message, i.e. entry byte ``LOG_OVERHEAD + x``):

    crc:uint32 | magic:int8 | attributes:int8 | [timestamp:int64, magic 1 only] |
    keyLength:int32 + key | valueLength:int32 + value

Invariants (docs/kafka-format-notes.md, "Legacy message sets"; checked against Kafka trunk 1eb7644349cb):

* The CRC is CRC32 (IEEE, ``java.util.zip.CRC32``) over ``[magic, end of message)``.
* ``size >= RECORD_OVERHEAD_V0`` (14) for magic 0 and ``>= RECORD_OVERHEAD_V1`` (22) for magic 1.
* A compressed message (codec bits != 0) is a *wrapper*: its value is the compressed bytes of an
  inner message set (entries framed with offset and size). Inner messages are never compressed.
  zstd is never valid in a wrapper.
* Offsets: the wrapper's offset is the offset of its **last** inner message. Magic 0 inner
  offsets are absolute. Magic 1 inner offsets are relative: absolute = wrapper offset - last
  inner relative offset + inner relative offset; a wrapper offset of 0 (old librdkafka) means
  absolute base 0 (`DeepRecordsIterator`).
* Timestamps: magic 0 has none (-1, no timestamp type). A magic-1 inner message of a
  LogAppendTime wrapper takes the wrapper's timestamp (`LegacyRecord.timestamp()`).
* What Kafka's ``RecordBatch`` API reports for a legacy entry (`AbstractLegacyRecordBatch`,
  `LegacyFileChannelRecordBatch`): ``lastOffset()`` = the entry offset; ``baseOffset()`` =
  ``iterator().next().offset()``, i.e. the first inner absolute offset of a wrapper (a deep
  read) and the entry offset otherwise; ``countOrNull()`` = null, compressed **or not**;
  ``maxTimestamp()`` = ``timestamp()`` of the shallow message; producer id / epoch / sequence
  and leader epoch -1; never transactional or control. DumpLogSegments prints only
  ``offset: <lastOffset>`` for legacy entries.
* Like Kafka's ``DataLogInputStream``, an incomplete trailing inner entry (fewer bytes than its
  size says) ends the inner message set; an inner size below 14 is corruption.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

from auditor.formats import compression
from auditor.formats.errors import FormatError
from auditor.formats.java_long import wrap
from auditor.formats.record_batch import LOG_OVERHEAD, BatchHeader, Record

try:  # optional C walk of a wrapper's inner messages (setup.py builds it when a compiler is there)
    from auditor.formats import _cwalk
except ImportError:  # pragma: no cover - exercised by the pure-Python equality test
    _cwalk = None

#: A compressed wrapper's inner messages walked in C when built (tests and the fuzz harness turn it
#: off to compare): 10 million inner messages of 26 bytes at the 256 MiB cap.
USE_C_INNER = True

MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1

# --- offsets inside the message (after the 12-byte framing), as in LegacyRecord.java ----------
CRC_OFFSET = 0
CRC_LENGTH = 4
MAGIC_OFFSET = CRC_OFFSET + CRC_LENGTH                      # 4 (entry byte 16)
MAGIC_LENGTH = 1
ATTRIBUTES_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH             # 5
ATTRIBUTES_LENGTH = 1
TIMESTAMP_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH    # 6 (magic 1 only)
TIMESTAMP_LENGTH = 8
KEY_SIZE_OFFSET_V0 = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH  # 6
KEY_SIZE_OFFSET_V1 = TIMESTAMP_OFFSET + TIMESTAMP_LENGTH    # 14
KEY_SIZE_LENGTH = 4
VALUE_SIZE_LENGTH = 4
RECORD_OVERHEAD_V0 = KEY_SIZE_OFFSET_V0 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH  # 14
RECORD_OVERHEAD_V1 = KEY_SIZE_OFFSET_V1 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH  # 22
RECORD_OVERHEAD = (RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1)
KEY_SIZE_OFFSET = (KEY_SIZE_OFFSET_V0, KEY_SIZE_OFFSET_V1)

# --- the same fields as entry positions (framing included) ------------------------------------
ENTRY_CRC_OFFSET = LOG_OVERHEAD + CRC_OFFSET                # 12
ENTRY_MAGIC_OFFSET = LOG_OVERHEAD + MAGIC_OFFSET            # 16: CRC32 covers [16, end)
ENTRY_ATTRIBUTES_OFFSET = LOG_OVERHEAD + ATTRIBUTES_OFFSET  # 17
ENTRY_TIMESTAMP_OFFSET = LOG_OVERHEAD + TIMESTAMP_OFFSET    # 18
#: bytes the shallow walk needs to describe an entry (framing + crc, magic, attributes, timestamp)
SHALLOW_HEADER_V0 = ENTRY_ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH     # 18
SHALLOW_HEADER_V1 = ENTRY_TIMESTAMP_OFFSET + TIMESTAMP_LENGTH       # 26

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_PREFIX = struct.Struct(">qiIbB")   # offset, size, crc, magic, attributes (18 bytes)
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_CODECS = compression.CODEC_NAMES
_TS_TYPES = ("CreateTime", "LogAppendTime")


def parse_legacy_header(buf, at: int, position: int) -> BatchHeader:
    """The shallow description of the legacy entry at ``buf[at:]``.

    The caller has checked the magic (0/1), that ``size >= RECORD_OVERHEAD[magic]`` and that
    ``SHALLOW_HEADER_V0/V1`` bytes are in ``buf``. ``base_offset`` is the entry offset here; for a
    compressed wrapper the reader replaces it with :func:`first_inner_offset` (Kafka's baseOffset).
    """
    offset, size, crc, magic, attrs = _PREFIX.unpack_from(buf, at)
    if magic == MAGIC_VALUE_V0:
        ts = -1
        ts_type = None
    else:
        ts = _I64.unpack_from(buf, at + ENTRY_TIMESTAMP_OFFSET)[0]
        ts_type = _TS_TYPES[(attrs & TIMESTAMP_TYPE_MASK) >> 3]
    return BatchHeader(position, offset, offset, LOG_OVERHEAD + size, magic, _CODECS[attrs & COMPRESSION_CODEC_MASK],
                       ts_type, ts, ts, None, False, False, False, -1, -1, -1, -1, crc)


def is_compressed(header: BatchHeader) -> bool:
    return header.codec != "none"


def compute_crc(entry_bytes) -> int:
    """CRC32 (IEEE) of one legacy message: [magic, end)."""
    return zlib.crc32(memoryview(entry_bytes)[ENTRY_MAGIC_OFFSET:])


def _message_fields(data, at: int, end: int, where: str, fpos: int, what: str):
    """(magic, attrs, timestamp, key_size, value_size, value_at) of the message whose framing is at
    ``data[at]``; ``end`` = end of the message. Validates that key and value fit."""
    magic = data[at + ENTRY_MAGIC_OFFSET]
    if magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1):
        raise FormatError(where, fpos + ENTRY_MAGIC_OFFSET, f"{what} magic", magic, "0 or 1")
    if end - at < LOG_OVERHEAD + RECORD_OVERHEAD[magic]:
        raise FormatError(where, fpos + 8, f"{what} size", end - at - LOG_OVERHEAD,
                          f">= {RECORD_OVERHEAD[magic]} (RECORD_OVERHEAD_V{magic})")
    attrs = data[at + ENTRY_ATTRIBUTES_OFFSET]
    ts = -1 if magic == MAGIC_VALUE_V0 else _I64.unpack_from(data, at + ENTRY_TIMESTAMP_OFFSET)[0]
    p = at + LOG_OVERHEAD + KEY_SIZE_OFFSET[magic]
    key_size = _I32.unpack_from(data, p)[0]
    p += KEY_SIZE_LENGTH
    if key_size > 0:
        p += key_size
    if key_size < -1 or p + VALUE_SIZE_LENGTH > end:
        raise FormatError(where, fpos + (p - at), f"{what} keyLength", key_size,
                          f"-1..{end - at - LOG_OVERHEAD - RECORD_OVERHEAD[magic]} (bytes left in the message)")
    value_size = _I32.unpack_from(data, p)[0]
    p += VALUE_SIZE_LENGTH
    if value_size < -1 or p + max(value_size, 0) != end:
        raise FormatError(where, fpos + (p - at) - VALUE_SIZE_LENGTH, f"{what} valueLength", value_size,
                          f"{end - p} (the rest of the message)" if value_size >= 0 or value_size < -1 else "0 bytes left after a null value")
    return magic, attrs, ts, key_size, value_size, p


def _key_of(data, at: int, magic: int, key_size: int) -> bytes | None:
    """The key bytes of the message whose framing is at ``data[at]`` (None for a null key); its
    size was checked by :func:`_message_fields`."""
    if key_size < 0:
        return None
    start = at + LOG_OVERHEAD + KEY_SIZE_OFFSET[magic] + KEY_SIZE_LENGTH
    return bytes(data[start:start + key_size])


def _wrapper_payload(header: BatchHeader, entry_bytes, label: str, max_decompressed_bytes: int):
    """(wrapper magic, attributes, timestamp, its decompressed inner message set, the label of positions
    in that set) of a compressed wrapper."""
    pos0 = header.position
    end = len(entry_bytes)
    magic, attrs, wrapper_ts, key_size, value_size, value_at = _message_fields(
        entry_bytes, 0, end, label, pos0, "wrapper")
    codec_id = attrs & COMPRESSION_CODEC_MASK
    if value_size < 0:
        raise FormatError(label, pos0, "wrapper value", None, "compressed inner messages (not a null value)")
    data = compression.decompress(codec_id, memoryview(entry_bytes)[value_at:end], magic=magic,
                                  max_bytes=max_decompressed_bytes, label=label, position=pos0 + value_at)
    where = f"{label} (wrapper at byte {pos0}, decompressed {header.codec} inner messages)"
    return magic, attrs, wrapper_ts, data, where


def _inner_message(data, p: int, n: int, where: str):
    """(offset, size, magic, timestamp, key size, value size) of the inner message at ``data[p]``
    (``n - p >= LOG_OVERHEAD``), None for an incomplete trailing entry (the end of the set, as
    Kafka's DataLogInputStream); FormatError where Kafka refuses it."""
    off, size = struct.unpack_from(">qi", data, p)
    if size < RECORD_OVERHEAD_V0:
        raise FormatError(where, p + 8, "inner message size", size, f">= {RECORD_OVERHEAD_V0}")
    if n - p < LOG_OVERHEAD + size:
        return None
    imagic, iattrs, its, iks, ivs, _ = _message_fields(data, p, p + LOG_OVERHEAD + size, where, p, "inner message")
    if iattrs & COMPRESSION_CODEC_MASK:
        raise FormatError(where, p + ENTRY_ATTRIBUTES_OFFSET, "inner message codec",
                          _CODECS[iattrs & COMPRESSION_CODEC_MASK], "none (inner messages must not be compressed)")
    return off, size, imagic, its, iks, ivs


def _absolute_base(header: BatchHeader, magic: int, count: int, last_inner: int, where: str, label: str) -> int | None:
    """What a magic 1 wrapper adds to its inner (relative) offsets; None for magic 0 (absolute).
    Raises for an empty set and a wrapper offset below the last inner one (but 0)."""
    if count == 0:
        raise FormatError(where, 0, "inner messages", 0, ">= 1 (a compressed message set with no inner records)")
    if magic != MAGIC_VALUE_V1:
        return None
    wrapper_offset = header.last_offset
    if wrapper_offset == 0:
        return 0  # old librdkafka wrote 0 as the wrapper offset
    if wrapper_offset < last_inner:
        raise FormatError(label, header.position, "wrapper offset", wrapper_offset,
                          f">= {last_inner} (the last inner relative offset) or 0")
    return wrapper_offset - last_inner


def _inner_entries(header: BatchHeader, entry_bytes, label: str, max_decompressed_bytes: int, keys: bool = False):
    """Decompress a wrapper; returns (inner list of (offset, magic, ts, key_size, value_size, key), wrapper ts,
    wrapper timestamp type) with offsets already absolute; ``key`` is the key's bytes when ``keys``, else None."""
    magic, attrs, wrapper_ts, data, where = _wrapper_payload(header, entry_bytes, label, max_decompressed_bytes)
    inner = []
    n = len(data)
    p = 0
    while n - p >= LOG_OVERHEAD:
        message = _inner_message(data, p, n, where)
        if message is None:
            break  # incomplete trailing inner entry: end of the set (DataLogInputStream)
        off, size, imagic, its, iks, ivs = message
        inner.append([off, imagic, its, iks, ivs, _key_of(data, p, imagic, iks) if keys else None])
        p += LOG_OVERHEAD + size
    base = _absolute_base(header, magic, len(inner), inner[-1][0] if inner else 0, where, label)
    if base is not None:
        for e in inner:
            e[0] = wrap(e[0] + base)   # Java long arithmetic (java_long.py)
    ts_type = None if magic == MAGIC_VALUE_V0 else _TS_TYPES[(attrs & TIMESTAMP_TYPE_MASK) >> 3]
    return inner, wrapper_ts, ts_type


@dataclass(slots=True)
class InnerSet:
    """A compressed wrapper's decompressed inner message set as the C walk read it (:func:`walk_inner`):
    the wrapper's magic, attributes and timestamp, the set, the label of positions in it, and the
    messages read with the first and last offsets as stored."""

    magic: int
    attrs: int
    wrapper_ts: int
    data: object
    where: str
    count: int
    first: int
    last: int


def walk_inner(header: BatchHeader, entry_bytes, *, label: str = "<bytes>",
               max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES) -> InnerSet | None:
    """A compressed wrapper's inner messages walked in C (_cwalk.legacy_frames). Raises what
    :func:`_inner_entries` raises for the wrapper, its decompression and the first broken inner
    message (that message read alone by the Python loop's code); the empty set and a magic 1
    wrapper's offset are :func:`_absolute_base`'s. None when C is off or not built, or C stopped at
    a message Python reads (never seen: the caller then walks the set in Python)."""
    if not USE_C_INNER or _cwalk is None:
        return None
    magic, attrs, wrapper_ts, data, where = _wrapper_payload(header, entry_bytes, label, max_decompressed_bytes)
    count, first, last, stop = _cwalk.legacy_frames(data)
    if stop is not None:
        _inner_message(data, stop, len(data), where)   # raises what the Python loop raises there
        return None
    return InnerSet(magic, attrs, wrapper_ts, data, where, count, first, last)


def first_inner_offset(header: BatchHeader, entry_bytes, *, label: str = "<bytes>",
                       max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES,
                       inner: InnerSet | None = None) -> int:
    """Kafka's ``baseOffset()`` of a compressed wrapper: the absolute offset of its first inner message.
    ``inner``: the wrapper's :func:`walk_inner`, when the caller has it."""
    if inner is None:
        inner = walk_inner(header, entry_bytes, label=label, max_decompressed_bytes=max_decompressed_bytes)
    if inner is not None:
        base = _absolute_base(header, inner.magic, inner.count, inner.last, inner.where, label)
        return inner.first if base is None else wrap(inner.first + base)
    entries, _, _ = _inner_entries(header, entry_bytes, label, max_decompressed_bytes)
    return entries[0][0]


def fold_inner(header: BatchHeader, entry_bytes, state: tuple, *, label: str = "<bytes>",
               max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES,
               inner: InnerSet | None = None) -> tuple | None:
    """The 'deep' fold (_cwalk.fold_records' tuple, see LogReader.fold_record_times) over the records
    :func:`iter_records` gives for a compressed wrapper, in C (:func:`walk_inner`, then
    _cwalk.legacy_fold): a wrapper of 26-byte inner messages at the 256 MiB cap is 10 million
    records. ``inner``: the wrapper's walk_inner, when the caller has it. Raises the FormatError
    iter_records raises (before its first record: the whole set is read first); None when C is off
    or not built, or the entry is not a compressed wrapper (the Python loop then reads it)."""
    if not USE_C_INNER or _cwalk is None or not is_compressed(header):
        return None
    if len(entry_bytes) != header.size_bytes:
        raise FormatError(label, header.position, "entry bytes", len(entry_bytes), f"{header.size_bytes} (12 + size)")
    if inner is None:
        inner = walk_inner(header, entry_bytes, label=label, max_decompressed_bytes=max_decompressed_bytes)
    if inner is None:
        return None
    return _cwalk.legacy_fold(inner.data, inner.count, *inner_offsets_and_times(header, inner, label), *state)


def inner_offsets_and_times(header: BatchHeader, inner: InnerSet, label: str) -> tuple[int, bool, int | None]:
    """How iter_records makes a wrapper's inner offsets and timestamps, for the C folds of its set:
    (base, relative: base is added to each stored offset (magic 1), the wrapper's LogAppendTime
    that every inner magic 1 message takes, else None). Raises what :func:`_absolute_base` raises."""
    base = _absolute_base(header, inner.magic, inner.count, inner.last, inner.where, label)
    log_append = inner.wrapper_ts if inner.magic == MAGIC_VALUE_V1 and \
        _TS_TYPES[(inner.attrs & TIMESTAMP_TYPE_MASK) >> 3] == "LogAppendTime" else None
    return base or 0, base is not None, log_append


def iter_records(header: BatchHeader, entry_bytes, *, label: str = "<bytes>",
                 max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES,
                 keys: bool = False) -> Iterator[Record]:
    """The records of one legacy entry: itself when uncompressed, its inner messages otherwise.
    ``keys=True``: each record carries its key's bytes (None for a null key)."""
    if len(entry_bytes) != header.size_bytes:
        raise FormatError(label, header.position, "entry bytes", len(entry_bytes), f"{header.size_bytes} (12 + size)")
    if not is_compressed(header):
        magic, _attrs, ts, key_size, value_size, _ = _message_fields(
            entry_bytes, 0, len(entry_bytes), label, header.position, "message")
        yield Record(header.last_offset, ts, key_size, value_size, 0, None,
                     _key_of(entry_bytes, 0, magic, key_size) if keys else None)
        return
    inner, wrapper_ts, wrapper_type = _inner_entries(header, entry_bytes, label, max_decompressed_bytes, keys)
    log_append = wrapper_type == "LogAppendTime"
    for off, imagic, its, iks, ivs, key in inner:
        if imagic == MAGIC_VALUE_V0:
            ts = -1
        elif log_append:
            ts = wrapper_ts  # LegacyRecord.timestamp(): the wrapper's LogAppendTime wins
        else:
            ts = its
        yield Record(off, ts, iks, ivs, 0, None, key)
