"""Legacy message sets (magic 0 and 1) built byte by byte: one message, and a gzip wrapper of inner
messages (magic 1 inner offsets relative, magic 0 absolute), as Kafka's old producers wrote them."""

from __future__ import annotations

import struct
import zlib

import cramjam

TS = 1_700_000_000_000  # every magic 1 message's timestamp
GZIP = 1


def legacy_message(offset: int, magic: int, key: bytes | None, value: bytes | None, attrs: int = 0) -> bytes:
    body = struct.pack(">bb", magic, attrs) + (struct.pack(">q", TS) if magic == 1 else b"")
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


def gzip_wrapper(last_offset: int, magic: int, inner: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """A gzip wrapper; magic 1 inner offsets are relative (0..n-1), magic 0 absolute."""
    first = last_offset - len(inner) + 1
    messages = b"".join(legacy_message(i if magic == 1 else first + i, magic, k, v) for i, (k, v) in enumerate(inner))
    return legacy_message(last_offset, magic, None, bytes(cramjam.gzip.compress(messages)), attrs=GZIP)
