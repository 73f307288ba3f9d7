"""Each record's key, value and header keys, and how Kafka's DumpLogSegments prints them.

The conformance test compares every record's whole line of ``DumpLogSegments --deep-iteration
--print-data-log`` with the line these helpers build from our side:

* the batch's bytes come from the product (``LogReader.read_batch_bytes``) and are decompressed
  by the product (``auditor.formats.compression.decompress``: every codec, the legacy framings);
* v2 keys are the product's own decoding (``LogReader.records(keys=True)``);
* values, header keys and legacy keys, which the product steps over by their sizes, are cut out
  here along Kafka's layouts (``DefaultRecord``; ``LegacyRecord`` v0/v1 and its compressed
  wrapper), independently of ``auditor.formats``.

How DumpLogSegments prints a record (Kafka 4.2.1 ``core/src/main/scala/kafka/tools/
DumpLogSegments.scala``, ``dumpLog`` and ``DecoderMessageParser``)::

    | offset: O <TimestampType>: T keySize: K valueSize: V            always
      sequence: S headerKeys: [k1,k2]                                 magic >= 2
      isValid: true|false crc: C}                                     magic < 2 (the '}' is Kafka's)
      key: <key>                                                      when the key is not null
      payload: <value>                                                when the value is not null

Keys and values go through ``org.apache.kafka.tools.api.StringDecoder`` (``new String(bytes,
UTF_8)``), header keys through ``Utils.utf8``: the same decoding. Malformed UTF-8 becomes U+FFFD,
but not as Python's ``bytes.decode("utf-8", "replace")`` does: Java replaces an encoded surrogate
(ED A0 80) by one U+FFFD (Python: three) and drops the continuation byte of a sequence cut by
the end (ED A3 at the end: one U+FFFD, Python two; found on a real __consumer_offsets value).
``java_text`` follows ``String.decodeUTF8_UTF16`` (JDK 17 and 25) branch by branch.
Control records print no key or payload.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from auditor.formats import compression

# DefaultRecordBatch: the records start after the 61-byte header; attributes at byte 21
V2_RECORDS_OFFSET = 61
V2_ATTRIBUTES_OFFSET = 21
CODEC_MASK = 0x07
# LegacyRecord inside a log entry: offset int64, size int32, then crc uint32, magic int8,
# attributes int8, [timestamp int64 when magic 1], key (int32 length), value (int32 length)
LEGACY_ENTRY_HEADER = struct.Struct(">qi")
LEGACY_CRC_MAGIC_ATTRS = struct.Struct(">IbB")
LEGACY_CRC_COVERS_FROM = 4          # the CRC32 covers [magic, end) of the message
INT32 = struct.Struct(">i")


@dataclass
class RecordContents:
    key: bytes | None
    value: bytes | None
    header_keys: list[bytes]
    legacy_crc: int | None = None        # the message's stored CRC32 (magic < 2)
    legacy_crc_valid: bool | None = None


def _varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's ByteUtils.readVarint/readVarlong): (value, next position)."""
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos


def _sized(buf, pos: int, size: int) -> tuple[bytes | None, int]:
    if size < 0:
        return None, pos
    return bytes(buf[pos:pos + size]), pos + size


def v2_contents(batch_bytes) -> list[RecordContents]:
    """Every record of a v2 batch (its whole bytes, header included), in order."""
    (attrs,) = struct.unpack_from(">H", batch_bytes, V2_ATTRIBUTES_OFFSET)
    codec = attrs & CODEC_MASK
    data = memoryview(batch_bytes)[V2_RECORDS_OFFSET:]
    if codec != compression.CODEC_NONE:
        data = compression.decompress(codec, data, magic=2)
    out, pos = [], 0
    while pos < len(data):
        length, pos = _varint(data, pos)
        end = pos + length
        pos += 1                                  # attributes
        _, pos = _varint(data, pos)               # timestampDelta
        _, pos = _varint(data, pos)               # offsetDelta
        size, pos = _varint(data, pos)
        key, pos = _sized(data, pos, size)
        size, pos = _varint(data, pos)
        value, pos = _sized(data, pos, size)
        count, pos = _varint(data, pos)
        header_keys = []
        for _ in range(count):
            size, pos = _varint(data, pos)
            hkey, pos = _sized(data, pos, size)
            header_keys.append(hkey)
            size, pos = _varint(data, pos)
            _, pos = _sized(data, pos, size)
        assert pos == end, f"record ends at {pos}, its length says {end}"
        out.append(RecordContents(key, value, header_keys))
    return out


def _legacy_message(buf, at: int, size: int) -> tuple[int, int, bytes | None, bytes | None, int, bool]:
    """(magic, attributes, key, value, crc, crc valid) of the message at ``buf[at:at+size]``."""
    crc, magic, attrs = LEGACY_CRC_MAGIC_ATTRS.unpack_from(buf, at)
    pos = at + LEGACY_CRC_MAGIC_ATTRS.size + (8 if magic == 1 else 0)
    (ksize,) = INT32.unpack_from(buf, pos)
    key, pos = _sized(buf, pos + 4, ksize)
    (vsize,) = INT32.unpack_from(buf, pos)
    value, pos = _sized(buf, pos + 4, vsize)
    valid = zlib.crc32(bytes(buf[at + LEGACY_CRC_COVERS_FROM:at + size])) == crc
    return magic, attrs, key, value, crc, valid


def legacy_contents(entry_bytes) -> list[RecordContents]:
    """The records of one legacy log entry: itself, or the inner messages of a compressed wrapper."""
    _, size = LEGACY_ENTRY_HEADER.unpack_from(entry_bytes, 0)
    magic, attrs, key, value, crc, valid = _legacy_message(entry_bytes, LEGACY_ENTRY_HEADER.size, size)
    codec = attrs & CODEC_MASK
    if codec == compression.CODEC_NONE:
        return [RecordContents(key, value, [], crc, valid)]
    inner = compression.decompress(codec, value, magic=magic)
    out, pos = [], 0
    while pos + LEGACY_ENTRY_HEADER.size <= len(inner):
        _, isize = LEGACY_ENTRY_HEADER.unpack_from(inner, pos)
        _, _, ikey, ivalue, icrc, ivalid = _legacy_message(inner, pos + LEGACY_ENTRY_HEADER.size, isize)
        out.append(RecordContents(ikey, ivalue, [], icrc, ivalid))
        pos += LEGACY_ENTRY_HEADER.size + isize
    return out


REPLACEMENT = "\ufffd"


def _continuation(b: int) -> bool:
    return b & 0xC0 == 0x80


def _java_3_byte_tail_malformed(b1: int, b2: int) -> bool:
    """String.isMalformed3_2 / malformed3: an overlong E0 lead or a non-continuation byte."""
    return (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continuation(b2)


def _java_4_byte_second_malformed(b1: int, b2: int) -> bool:
    """String.isMalformed4_2: out of range (F0 9x..Bx, F4 8x) or not a continuation."""
    return (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or not _continuation(b2)


# long function: one branch per UTF-8 lead byte class, in the order of Java's own decoder
def java_text(data: bytes) -> str:
    """``new String(data, UTF_8)`` (String.decodeUTF8_UTF16 with replacement), code point by
    code point: what StringDecoder and Utils.utf8 give DumpLogSegments to print."""
    out: list[str] = []
    sp, sl = 0, len(data)
    while sp < sl:
        b1 = data[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:                      # 2 bytes
            if sp < sl:
                b2 = data[sp]
                sp += 1
                if not _continuation(b2):
                    out.append(REPLACEMENT)
                    sp -= 1
                else:
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                continue
            out.append(REPLACEMENT)
            break
        elif 0xE0 <= b1 <= 0xEF:                      # 3 bytes
            if sp + 1 < sl:
                b2, b3 = data[sp], data[sp + 1]
                sp += 2
                if _java_3_byte_tail_malformed(b1, b2) or not _continuation(b3):
                    out.append(REPLACEMENT)
                    sp -= 2                           # sp -= 3; sp += malformed3 (1 or 2)
                    sp += 0 if _java_3_byte_tail_malformed(b1, b2) else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < sl and _java_3_byte_tail_malformed(b1, data[sp]):
                out.append(REPLACEMENT)
                continue
            out.append(REPLACEMENT)                   # cut by the end: the byte left is dropped
            break
        elif 0xF0 <= b1 <= 0xF7:                      # 4 bytes
            if sp + 2 < sl:
                b2, b3, b4 = data[sp], data[sp + 1], data[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_continuation(b2) and _continuation(b3) and _continuation(b4)) \
                        or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(REPLACEMENT)
                    sp -= 3                           # sp -= 4; sp += malformed4 (1, 2 or 3)
                    if b1 > 0xF4 or _java_4_byte_second_malformed(b1, b2):
                        pass
                    elif not _continuation(b3):
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(uc))
                continue
            if b1 > 0xF4 or sp < sl and _java_4_byte_second_malformed(b1, data[sp]):
                out.append(REPLACEMENT)
                continue
            sp += 1
            out.append(REPLACEMENT)
            if sp < sl and not _continuation(data[sp]):
                continue
            break
        else:                                         # 80..BF, C0, C1, F8..FF
            out.append(REPLACEMENT)
    return "".join(out)


def dumped_record_line(*, offset: int, timestamp_type: str, timestamp: int, key_size: int, value_size: int,
                       magic: int, sequence: int | None, contents: RecordContents, key: bytes | None) -> str:
    """The text DumpLogSegments --deep-iteration --print-data-log prints for a data record."""
    line = f"| offset: {offset} {timestamp_type}: {timestamp} keySize: {key_size} valueSize: {value_size}"
    if magic >= 2:
        line += f" sequence: {sequence} headerKeys: [{','.join(java_text(k) for k in contents.header_keys)}]"
    else:
        line += f" isValid: {'true' if contents.legacy_crc_valid else 'false'} crc: {contents.legacy_crc}}}"
    if key is not None:
        line += f" key: {java_text(key)}"
    if contents.value is not None:
        line += f" payload: {java_text(contents.value)}"
    return line
