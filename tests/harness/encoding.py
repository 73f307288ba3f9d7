"""The tests' own varint encoders, written from the format (docs/kafka-format-notes.md, "Records and varints"), independent of
auditor/formats/varint.py so that the bytes the tests build do not share the reader's mistakes."""

from __future__ import annotations


def uvarint(n: int) -> bytes:
    """Unsigned LEB128 (Kafka's ``writeUnsignedVarint``: flexible versions' lengths and tags)."""
    if n < 0:
        raise ValueError(f"uvarint of a negative number: {n}")
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def zigzag_varint(v: int) -> bytes:
    """Kafka's signed varint/varlong (records' fields): zigzag, then unsigned LEB128. For values in
    the int32 range the 64-bit zigzag gives the same bytes as the 32-bit one."""
    return uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)
