"""``__consumer_offsets`` records: raw keys and values out of record batches, and their types.

The group coordinator writes every record of ``__consumer_offsets`` as a key and a value, each
starting with an int16 version (``CoordinatorRecordSerde``): the *key's* version is the record
type (its ``apiKey`` in Kafka's message specs: 0 and 1 an offset commit, 2 a classic group's
metadata, 3 and up the new protocol's records (KIP-848) and share/streams groups); the value's
version is the version of that type's value schema. A null value is a tombstone.

Layout of one v2 record (``DefaultRecord.java``; docs/kafka-format-notes.md, "Records and varints"), all varints zigzag::

    length:varint attributes:int8 timestampDelta:varlong offsetDelta:varint
    keyLength:varint key valueLength:varint value headersCount:varint [headers]

:func:`iter_key_values` yields ``(offset, timestamp_ms, key, value)`` per record of one batch
(decompressing when needed); :func:`fold_records_into` is the hot loop of replaying a partition
(the last record per key). :func:`decode_key` and :func:`decode_value` turn one key or value
into its fields through :mod:`auditor.formats.kafka_message`, from the spec tables generated out
of Kafka's ``kafka-group-coordinator`` jar (``OffsetCommitKey``/``Value``, ``GroupMetadata*``,
``ConsumerGroup*``, ``ShareGroup*``, ``StreamsGroup*``): the key's spec is the one whose
``apiKey`` is the key's version, decoded at version 0 (coordinator keys have one version); the
value's spec has the same ``apiKey`` and is decoded at the value's own leading version.

Invariants (as Kafka's record iterator): a record's fields end exactly at its declared length;
the batch holds exactly ``recordsCount`` records; any break is a ``FormatError`` naming the
file, byte position, field, value found and bound broken.
"""

from __future__ import annotations

# long module: one batch's records read two ways that must agree record for record, the Python
# reader (iter_key_values) and the replay's fold of the same bytes handed to C (fold_records_into,
# _fold_compressed, fold_plain_batches, with the bounded bad-key notes): one file to review against
# _coffsets.c
import struct
from typing import Iterator

from auditor.formats import compression, kafka_message
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError
from auditor.formats.record_batch import BatchHeader
from auditor.formats.varint import read_varint, read_varlong

try:  # optional C replay of plain v2 batches (setup.py builds it when a compiler is there)
    from auditor.formats import _coffsets
except ImportError:  # pragma: no cover - exercised by the C/Python equality test
    _coffsets = None

#: True when the C replay of plain batches (:func:`fold_plain_batches`) is built.
HAVE_C_FOLD = _coffsets is not None

#: Every coordinator key and value starts with an int16 version.
VERSION_LENGTH = 2
#: Control record key: version:int16, type:int16 (``ControlRecordType``).
CONTROL_TYPE_OFFSET = 2
CONTROL_ABORT = v2.CONTROL_ABORT
CONTROL_COMMIT = v2.CONTROL_COMMIT

#: Legacy (magic 0/1) message, after the 12-byte entry framing (``LegacyRecord.java``):
#: crc:uint32 magic:int8 attributes:int8 [timestamp:int64 (magic 1)] keyLength:int32 key
#: valueLength:int32 value
LEGACY_CRC_LENGTH = 4
LEGACY_MAGIC_LENGTH = 1
LEGACY_ATTRIBUTES_LENGTH = 1
LEGACY_TIMESTAMP_LENGTH = 8
LEGACY_KEY_SIZE_OFFSET = {0: v2.LOG_OVERHEAD + LEGACY_CRC_LENGTH + LEGACY_MAGIC_LENGTH + LEGACY_ATTRIBUTES_LENGTH,
                          1: v2.LOG_OVERHEAD + LEGACY_CRC_LENGTH + LEGACY_MAGIC_LENGTH + LEGACY_ATTRIBUTES_LENGTH
                          + LEGACY_TIMESTAMP_LENGTH}

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")
#: OffsetCommitKey version 1: the key bytes v0 keys are stored under (same layout).
_V1_KEY_PREFIX = b"\x00\x01"


#: Of one batch's records whose key is null or shorter than its int16 version, the first this many
#: are noted one by one; the rest of the batch get one summary note (a gzip batch at the
#: decompression cap holds 38 million such records: a note each was ~38 CPU s and gigabytes).
BAD_KEYS_NOTED = 3


class BadKeys:
    """The records of one batch whose key is null or too short for a coordinator key: the offsets
    of the first :data:`BAD_KEYS_NOTED`, then how many more and the first and last offset of
    those (record order). ``append(offset)`` is the fold's per-record call; memory is bounded
    whatever the batch."""

    __slots__ = ("first", "more", "more_first", "more_last")

    def __init__(self):
        self.first: list[int] = []
        self.more = 0
        self.more_first: int | None = None
        self.more_last: int | None = None

    def append(self, offset: int) -> None:
        if len(self.first) < BAD_KEYS_NOTED:
            self.first.append(offset)
            return
        if not self.more:
            self.more_first = offset
        self.more += 1
        self.more_last = offset

    def add_counted(self, first: list[int], more: int, more_first: int | None, more_last: int | None) -> None:
        """What the C fold counted for a piece of the same batch (after the offsets already here)."""
        for offset in first:
            self.append(offset)
        if more:
            if not self.more:
                self.more_first = more_first
            self.more += more
            self.more_last = more_last

    def __len__(self) -> int:
        return len(self.first) + self.more


KEY_SPEC_TYPE = "coordinator-key"
VALUE_SPEC_TYPE = "coordinator-value"
#: The record families of the coordinator specs, by spec-name prefix.
FAMILIES = (("OffsetCommit", "offsets"), ("LegacyOffsetCommit", "offsets"), ("GroupMetadata", "classic"),
            ("ConsumerGroup", "consumer"), ("ShareGroup", "share"), ("StreamsGroup", "streams"))


def known_record_types() -> dict[int, str]:
    """Record type (key version) -> key spec name, from the generated tables."""
    return {s.api_key: s.name for s in kafka_message.specs("kafka_group_coordinator")
            if s.type == KEY_SPEC_TYPE and s.api_key is not None}


def record_family(spec_name: str) -> str | None:
    """offsets | classic | consumer | share | streams, from a key or value spec name."""
    for prefix, fam in FAMILIES:
        if spec_name.startswith(prefix):
            return fam
    return None


def decode_key(key: bytes, *, file=None, base: int = 0) -> tuple[str | None, dict | None]:
    """(key spec name, fields) of a coordinator key; (None, None) when its version (the record
    type) is not one of the spec tables' (the coordinator skips unknown types too)."""
    rtype = key_version(key)
    if rtype is None:
        raise FormatError(file or "<bytes>", base, "key", bytes(key or b"").hex(),
                          f"at least {VERSION_LENGTH} bytes (int16 record type)")
    spec = kafka_message.by_api_key(KEY_SPEC_TYPE, rtype)
    if spec is None:
        return None, None
    version = spec.valid_versions[1] if spec.valid_versions[1] is not None else spec.valid_versions[0]
    return spec.name, spec.decode(key, version, pos=VERSION_LENGTH, file=file, base=base)


def decode_value(rtype: int, value: bytes, *, file=None, base: int = 0) -> tuple[int, dict]:
    """(value version, fields) of the value of a record of type ``rtype``."""
    if len(value) < VERSION_LENGTH:
        raise FormatError(file or "<bytes>", base, "value", bytes(value).hex(),
                          f"at least {VERSION_LENGTH} bytes (int16 version)")
    spec = kafka_message.by_api_key(VALUE_SPEC_TYPE, rtype)
    if spec is None:
        raise FormatError(file or "<bytes>", base, "record type", rtype, "a type with a value spec")
    version = _INT16.unpack_from(value, 0)[0]
    return version, spec.decode(value, version, pos=VERSION_LENGTH, file=file, base=base)


def key_version(key) -> int | None:
    """The record type of a coordinator key (its leading int16), None when shorter than 2 bytes."""
    if key is None or len(key) < VERSION_LENGTH:
        return None
    return _INT16.unpack_from(key, 0)[0]


def control_type(key) -> int | None:
    """The type of a control record (0 ABORT, 1 COMMIT, ...), None when the key is too short."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    return _CONTROL_KEY.unpack_from(key, 0)[1]


# long function: one record's fields in wire order, each with its bound check; split per field it
# would cost a call per field per record on the path every __consumer_offsets record takes
def iter_key_values(header: BatchHeader, batch_bytes, *, label: str = "<bytes>",
                    max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES,
                    resume: tuple | None = None) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """``(offset, timestamp_ms, key, value)`` of every record of one batch (``None`` = null).

    ``batch_bytes`` is the whole entry (header included), as ``LogReader.read_batch_bytes``
    returns it. Legacy (magic 0/1) entries: an uncompressed message yields itself; a
    compressed legacy wrapper raises FormatError (its inner messages are not read here).
    ``resume``: (the decompressed records of this compressed v2 batch, record index, its
    position in them): the records from that one on only (where the C fold stopped).
    """
    if header.magic != v2.MAGIC_VALUE_V2:
        yield from _legacy_key_value(header, batch_bytes, label)
        return
    pos0 = header.position
    if len(batch_bytes) != header.size_bytes:
        raise FormatError(label, pos0, "batch bytes", len(batch_bytes), f"{header.size_bytes} (12 + batchLength)")
    count = header.record_count
    if count is None or count < 0:
        raise FormatError(label, pos0 + v2.RECORDS_COUNT_OFFSET, "recordsCount", count, ">= 0")
    codec_id = batch_bytes[v2.ATTRIBUTES_OFFSET + 1] & v2.COMPRESSION_CODEC_MASK
    first = 0
    if codec_id == compression.CODEC_NONE:
        data = bytes(batch_bytes)
        pos = v2.RECORDS_OFFSET
        base_pos = pos0
        where = label
    else:
        if resume is not None:
            data, first, pos = resume
        else:
            data = compression.decompress(codec_id, memoryview(batch_bytes)[v2.RECORDS_OFFSET:], magic=2,
                                          max_bytes=max_decompressed_bytes, label=label,
                                          position=pos0 + v2.RECORDS_OFFSET)
            pos = 0
        base_pos = None
        where = f"{label} (batch at byte {pos0}, decompressed {header.codec} records)"
    end = len(data)
    base_offset = header.base_offset
    base_ts = header.base_timestamp_ms
    log_append = header.max_timestamp_ms if header.timestamp_type == v2.LOG_APPEND_TIME else None
    for i in range(first, count):
        rec_start = pos
        if pos >= end:
            raise FormatError(where, _fpos(base_pos, pos), f"record {i}", "end of records",
                              f"{count} records (recordsCount) before the end of the batch")
        # length: fast path for a one-byte varint, else the checked reader
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = read_varint(data, pos, end, where, f"record {i} length")
        body_end = pos + length
        if length < 0 or body_end > end:
            raise FormatError(where, _fpos(base_pos, rec_start), f"record {i} length", length,
                              f"0..{end - pos} (bytes left in the batch)")
        pos += 1  # attributes
        b = data[pos] if pos < body_end else 0x80
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            ts_delta, pos = read_varlong(data, pos, body_end, where, f"record {i} timestampDelta")
        b = data[pos] if pos < body_end else 0x80
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = read_varint(data, pos, body_end, where, f"record {i} offsetDelta")
        b = data[pos] if pos < body_end else 0x80
        if b < 0x80:
            key_size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            key_size, pos = read_varint(data, pos, body_end, where, f"record {i} keyLength")
        if key_size >= 0:
            if pos + key_size > body_end:
                raise FormatError(where, _fpos(base_pos, rec_start), f"record {i} keyLength", key_size,
                                  f"<= {body_end - pos} (bytes left in the record)")
            key = data[pos:pos + key_size]
            pos += key_size
        else:
            key = None
        b = data[pos] if pos < body_end else 0x80
        if b < 0x80:
            value_size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            value_size, pos = read_varint(data, pos, body_end, where, f"record {i} valueLength")
        if value_size >= 0:
            if pos + value_size > body_end:
                raise FormatError(where, _fpos(base_pos, rec_start), f"record {i} valueLength", value_size,
                                  f"<= {body_end - pos} (bytes left in the record)")
            value = data[pos:pos + value_size]
            pos += value_size
        else:
            value = None
        if pos < body_end and data[pos] == 0:  # headersCount 0: the usual case
            pos += 1
        else:
            nheaders, pos = read_varint(data, pos, body_end, where, f"record {i} headersCount")
            if nheaders < 0:
                raise FormatError(where, _fpos(base_pos, rec_start), f"record {i} headersCount", nheaders, ">= 0")
            for h in range(nheaders):
                hk, pos = read_varint(data, pos, body_end, where, f"record {i} header {h} keyLength")
                if hk < 0:
                    raise FormatError(where, _fpos(base_pos, rec_start), f"record {i} header {h} keyLength", hk, ">= 0")
                pos += hk
                hv, pos = read_varint(data, pos, body_end, where, f"record {i} header {h} valueLength")
                if hv > 0:
                    pos += hv
        if pos != body_end:
            raise FormatError(where, _fpos(base_pos, rec_start), f"record {i} size", pos - rec_start,
                              f"{body_end - rec_start} (its length varint + length)")
        yield (base_offset + off_delta, log_append if log_append is not None else base_ts + ts_delta, key, value)
    if pos != end:
        raise FormatError(where, _fpos(base_pos, pos), "bytes after the last record", end - pos,
                          f"0 (recordsCount = {count}: incorrect declared batch size)")


# long function: the hot loop of replaying __consumer_offsets (one-byte and two-byte varints inlined;
# a helper call per field would halve the records per second)
def fold_records_into(store: dict, header: BatchHeader, batch_bytes, transactional: bool, where,
                      bad_keys: "BadKeys | list", *, label: str = "<bytes>",
                      max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES) -> int:
    """The hot loop of reading ``__consumer_offsets``: ``store[key] = (offset, timestamp_ms,
    value, transactional, where)`` for every record of one batch, in order (so the last record
    per key stays), without building a tuple per record for a caller to unpack.

    Keys of OffsetCommitKey version 0 are stored under the version-1 bytes (same layout, same
    key). A record whose key is null or shorter than its int16 version is not stored; its
    offset goes to ``bad_keys`` (``append``; a :class:`BadKeys` keeps the memory bounded).
    Returns the number of records. Uncompressed v2 batches are parsed inline (one-byte varints,
    the usual case, without a call); a compressed v2 batch, given a :class:`BadKeys`, is folded
    in C piece by piece (:func:`_fold_compressed`; a list keeps every offset, so the Python loop
    fills it); anything else goes through :func:`iter_key_values`. Raises FormatError as that does.
    """
    if (header.magic != v2.MAGIC_VALUE_V2 or header.codec != "none" or header.timestamp_type == v2.LOG_APPEND_TIME
            or len(batch_bytes) != header.size_bytes or header.record_count is None or header.record_count < 0):
        if (USE_C_STREAM and _coffsets is not None and isinstance(bad_keys, BadKeys) and header.codec != "none"
                and header.magic == v2.MAGIC_VALUE_V2 and len(batch_bytes) == header.size_bytes
                and header.record_count is not None and header.record_count >= 0):
            return _fold_compressed(store, header, batch_bytes, transactional, where, bad_keys, label,
                                    max_decompressed_bytes)
        return _store_key_values(store, iter_key_values(header, batch_bytes, label=label,
                                                        max_decompressed_bytes=max_decompressed_bytes),
                                 transactional, where, bad_keys)
    data = batch_bytes if isinstance(batch_bytes, bytes) else bytes(batch_bytes)
    count = header.record_count
    base_offset = header.base_offset
    base_ts = header.base_timestamp_ms
    end = len(data)
    pos = v2.RECORDS_OFFSET
    for i in range(count):
        rec_start = pos
        if pos >= end:
            raise FormatError(label, header.position + pos, f"record {i}", "end of records",
                              f"{count} records (recordsCount) before the end of the batch")
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < end and data[pos + 1] < 0x80:   # two-byte varint: records of 64..8191 bytes
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            length = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            length, pos = read_varint(data, pos, end, label, f"record {i} length")
        body_end = pos + length
        if length < 0 or body_end > end:
            raise FormatError(label, header.position + rec_start, f"record {i} length", length,
                              f"0..{end - pos} (bytes left in the batch)")
        # attributes (1 byte), then timestampDelta, offsetDelta, keyLength: one-byte fast paths
        b = data[pos + 1] if pos + 1 < body_end else 0x80
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            ts_delta, pos = read_varlong(data, pos + 1, body_end, label, f"record {i} timestampDelta")
        b = data[pos] if pos < body_end else 0x80
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = read_varint(data, pos, body_end, label, f"record {i} offsetDelta")
        b = data[pos] if pos < body_end else 0x80
        if b < 0x80:
            key_size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            key_size, pos = read_varint(data, pos, body_end, label, f"record {i} keyLength")
        if key_size >= 0:
            kend = pos + key_size
            if kend > body_end:
                raise FormatError(label, header.position + rec_start, f"record {i} keyLength", key_size,
                                  f"<= {body_end - pos} (bytes left in the record)")
            key = data[pos:kend]
            pos = kend
        else:
            key = None
        b = data[pos] if pos < body_end else 0x80
        if b < 0x80:
            value_size = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < body_end and data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            value_size = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            value_size, pos = read_varint(data, pos, body_end, label, f"record {i} valueLength")
        if value_size >= 0:
            vend = pos + value_size
            if vend > body_end:
                raise FormatError(label, header.position + rec_start, f"record {i} valueLength", value_size,
                                  f"<= {body_end - pos} (bytes left in the record)")
            value = data[pos:vend]
            pos = vend
        else:
            value = None
        if pos + 1 != body_end or data[pos] != 0:
            # headers present, or the record does not end where its length says: the checked path
            nheaders, pos = read_varint(data, pos, body_end, label, f"record {i} headersCount")
            if nheaders < 0:
                raise FormatError(label, header.position + rec_start, f"record {i} headersCount", nheaders, ">= 0")
            for h in range(nheaders):
                hk, pos = read_varint(data, pos, body_end, label, f"record {i} header {h} keyLength")
                if hk < 0:
                    raise FormatError(label, header.position + rec_start, f"record {i} header {h} keyLength",
                                      hk, ">= 0")
                pos += hk
                hv, pos = read_varint(data, pos, body_end, label, f"record {i} header {h} valueLength")
                if hv > 0:
                    pos += hv
            if pos != body_end:
                raise FormatError(label, header.position + rec_start, f"record {i} size", pos - rec_start,
                                  f"{body_end - rec_start} (its length varint + length)")
        pos = body_end
        if key is None or key_size < VERSION_LENGTH:
            bad_keys.append(base_offset + off_delta)
            continue
        if key[0] == 0 and key[1] == 0:
            key = _V1_KEY_PREFIX + key[2:]
        store[key] = (base_offset + off_delta, base_ts + ts_delta, value, transactional, where)
    if pos != end:
        raise FormatError(label, header.position + pos, "bytes after the last record", end - pos,
                          f"0 (recordsCount = {count}: incorrect declared batch size)")
    return count


def _store_key_values(store: dict, key_values, transactional: bool, where, bad_keys) -> int:
    """fold_records_into's store of records read by iter_key_values; their number."""
    n = 0
    for rec_off, ts, key, value in key_values:
        n += 1
        if key is None or len(key) < VERSION_LENGTH:
            bad_keys.append(rec_off)
            continue
        if key[0] == 0 and key[1] == 0:
            key = _V1_KEY_PREFIX + key[2:]
        store[key] = (rec_off, ts, value, transactional, where)
    return n


#: Use the C fold of compressed batches (``_coffsets.StreamFold``) when built (tests turn it off).
USE_C_STREAM = True
#: A compressed batch's decompressed pieces up to this many bytes are kept (copied) and folded once
#: the stream has ended well; past it (a bomb at the 256 MiB cap: 38 million records) each piece is
#: folded as it comes, after a copy of the store is taken (put back should the stream then fail:
#: nothing of an unreadable stream is stored, as with iter_key_values, which decompresses first).
KEEP_DECOMPRESSED_BYTES = 16 << 20


def _fold_compressed(store: dict, header: BatchHeader, batch_bytes, transactional: bool, where,
                     bad_keys: BadKeys, label: str, max_decompressed_bytes: int) -> int:
    """fold_records_into of a compressed v2 batch in C: the stream decompressed piece by piece
    (compression.decompress_chunks) into ``_coffsets.StreamFold``, which stores each record as
    :func:`_store_key_values` does and counts the bad keys (bounded); at a record it does not take
    (one iter_key_values raises for, an offset or timestamp past int64) the Python loop reads on
    from that record (every error text is its own): from that record's bytes alone, kept by the
    fold (what the loop reads of it before raising; the stream is never whole in memory), or from
    the whole stream where the loop reads on past it (int64). The same store, bad keys, count and
    FormatError as the Python loop."""
    codec_id = batch_bytes[v2.ATTRIBUTES_OFFSET + 1] & v2.COMPRESSION_CODEC_MASK
    payload = memoryview(batch_bytes)[v2.RECORDS_OFFSET:]
    log_append = header.max_timestamp_ms if header.timestamp_type == v2.LOG_APPEND_TIME else None
    where_in = {"magic": v2.MAGIC_VALUE_V2, "max_bytes": max_decompressed_bytes, "label": label,
                "position": header.position + v2.RECORDS_OFFSET}
    whole = False
    while True:
        fold = _coffsets.StreamFold(header.record_count, header.base_offset, header.base_timestamp_ms, log_append,
                                    store, transactional, where)
        one_piece = whole or codec_id not in (compression.CODEC_GZIP, compression.CODEC_LZ4)
        kept, kept_bytes, saved = [], 0, None
        try:
            pieces = ([compression.decompress(codec_id, payload, **where_in)] if whole
                      else compression.decompress_chunks(codec_id, payload, **where_in))
            for piece in pieces:
                if kept is not None:
                    kept_bytes += len(piece)
                    if one_piece or kept_bytes <= KEEP_DECOMPRESSED_BYTES:
                        kept.append(piece if one_piece else bytes(piece))   # (a piece lives until the next)
                        continue
                    saved = dict(store)
                    backlog, kept = kept, None
                    for earlier in backlog:
                        fold.feed(earlier)
                fold.feed(piece)
        except BaseException as exc:
            if saved is not None:
                store.clear()
                store.update(saved)
            if not isinstance(exc, compression.IrregularStream):
                raise
            whole = True   # only cramjam's reading decides this gzip stream: once more, in one piece
            continue
        break
    for piece in kept or ():
        fold.feed(piece)   # (all of them, refused or not: fed is the stream's end, which a note may name)
    n, first_bad, more_bad, more_first, more_last, refused = fold.result()
    bad_keys.add_counted(first_bad, more_bad, more_first, more_last)
    if refused is None:
        return n
    index, position = refused
    kept = fold.refused_bytes()
    if kept is not None:   # that record's bytes alone, at their stream positions (v2.refused_in_stream)
        records = v2.refused_in_stream(kept, position, fold.fed, index).data
    else:                  # the loop reads on past that record (an offset or timestamp past int64)
        records = compression.decompress(codec_id, payload, **where_in)
    n += _store_key_values(store, iter_key_values(header, batch_bytes, label=label, resume=(records, index, position)),
                           transactional, where, bad_keys)
    return n


def fold_plain_batches(fd: int, start: int, size: int, store: dict, label: str, max_bytes: int = 0
                       ) -> tuple[int, int] | None:
    """The C twin of :func:`fold_records_into` over a run of batches (``_coffsets.fold_plain``).

    From byte ``start`` of an open ``.log`` (descriptor ``fd``, read with pread only, up to
    ``size``), every plain batch (v2, uncompressed, CreateTime, neither transactional nor control)
    whose every record the Python fold would store without a note is stored as that fold stores
    it: ``store[key] = (offset, timestamp_ms, value, False, (label, batch position))``. Returns
    ``(stop_position, records)``: ``stop_position`` is ``size`` at a clean end, else the first
    entry the Python path must read (a batch is stored whole or not at all); with ``max_bytes``
    > 0, it returns at the first batch boundary at least ``max_bytes`` after ``start`` too (a
    stop at or beyond ``start + max_bytes`` is that one; a hand-over is always before it). None
    when the extension is not built.
    """
    if _coffsets is None:
        return None
    return _coffsets.fold_plain(fd, start, size, store, label, max_bytes)


def _fpos(base_pos: int | None, pos: int) -> int:
    return base_pos + pos if base_pos is not None else pos


def _legacy_key_value(header: BatchHeader, data, label: str):
    """One uncompressed magic 0/1 message: (offset, timestamp, key, value)."""
    if header.codec != "none":
        raise FormatError(label, header.position, "compression codec of a magic-"
                          f"{header.magic} __consumer_offsets entry", header.codec,
                          "none (compressed legacy wrappers of __consumer_offsets are not read)")
    at = LEGACY_KEY_SIZE_OFFSET.get(header.magic)
    if at is None:
        raise FormatError(label, header.position + v2.MAGIC_OFFSET, "magic", header.magic, "0, 1 or 2")
    end = len(data)
    if at + 4 > end:
        raise FormatError(label, header.position + at, "keyLength", "end of message", "4 bytes")
    (ks,) = _INT32.unpack_from(data, at)
    pos = at + 4
    key = None
    if ks >= 0:
        if pos + ks > end:
            raise FormatError(label, header.position + at, "keyLength", ks, f"<= {end - pos}")
        key = bytes(data[pos:pos + ks])
        pos += ks
    if pos + 4 > end:
        raise FormatError(label, header.position + pos, "valueLength", "end of message", "4 bytes")
    (vs,) = _INT32.unpack_from(data, pos)
    pos += 4
    value = None
    if vs >= 0:
        if pos + vs > end:
            raise FormatError(label, header.position + pos - 4, "valueLength", vs, f"<= {end - pos}")
        value = bytes(data[pos:pos + vs])
    yield (header.last_offset, header.max_timestamp_ms, key, value)


__all__ = ["iter_key_values", "fold_records_into", "BadKeys", "BAD_KEYS_NOTED", "fold_plain_batches", "HAVE_C_FOLD",
           "decode_key", "decode_value",
           "known_record_types", "record_family", "key_version", "control_type", "VERSION_LENGTH", "CONTROL_ABORT",
           "CONTROL_COMMIT"]
