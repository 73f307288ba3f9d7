"""Kafka's zigzag varints (`ByteUtils.readVarint` / `readVarlong`; docs/kafka-format-notes.md, "Records and varints").

Encoding: zigzag (``(v << 1) ^ (v >> 31)``, ``>> 63`` for a varlong) then unsigned LEB128,
7 bits per byte, low group first, MSB = continuation. Invariants enforced here, as Kafka does:

* a varint takes at most ``MAX_VARINT_BYTES`` (5) bytes and a varlong at most
  ``MAX_VARLONG_BYTES`` (10); a longer run of continuation bytes is an error, not a wrap;
* a varint never reads past ``end`` (the end of the record / batch it belongs to).

The readers return ``(value, next_position)`` so a record parser threads the position through
without slicing (no per-field allocation).
"""

from __future__ import annotations

from auditor.formats.errors import FormatError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
CONTINUATION_MASK = 0x80
PAYLOAD_MASK = 0x7F
PAYLOAD_BITS = 7


def _read_unsigned(buf, pos: int, end: int, max_bytes: int, label: str, field: str) -> tuple[int, int]:
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise FormatError(label, start, field, bytes(buf[start:end]).hex(),
                              f"a complete varint before byte {end} (it runs past the end of its record)")
        b = buf[pos]
        pos += 1
        value |= (b & PAYLOAD_MASK) << shift
        if not b & CONTINUATION_MASK:
            return value, pos
        shift += PAYLOAD_BITS
        if pos - start >= max_bytes:
            raise FormatError(label, start, field, bytes(buf[start:pos]).hex(),
                              f"at most {max_bytes} varint bytes")


def read_varint(buf, pos: int, end: int, label: str = "<bytes>", field: str = "varint") -> tuple[int, int]:
    """A zigzag int32 varint at ``buf[pos]``; returns (value, position after it)."""
    b = buf[pos] if pos < end else CONTINUATION_MASK
    if not b & CONTINUATION_MASK:  # fast path: one byte (most lengths and deltas)
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _read_unsigned(buf, pos, end, MAX_VARINT_BYTES, label, field)
    raw &= 0xFFFFFFFF  # Kafka keeps only 32 bits of a 5-byte varint
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int, end: int, label: str = "<bytes>", field: str = "varlong") -> tuple[int, int]:
    """A zigzag int64 varlong at ``buf[pos]``; returns (value, position after it)."""
    b = buf[pos] if pos < end else CONTINUATION_MASK
    if not b & CONTINUATION_MASK:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _read_unsigned(buf, pos, end, MAX_VARLONG_BYTES, label, field)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varint(value: int) -> bytes:
    """Zigzag + LEB128 (used by tests and by nothing on the read path)."""
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= CONTINUATION_MASK:
        out.append((raw & PAYLOAD_MASK) | CONTINUATION_MASK)
        raw >>= PAYLOAD_BITS
    out.append(raw)
    return bytes(out)
