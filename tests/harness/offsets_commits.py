"""``__consumer_offsets`` records built byte by byte: an offset commit's key and value, as the group
coordinator writes them (OffsetCommitKey v0/v1, OffsetCommitValue v3), independently of
``auditor.formats.offsets_records``."""

from __future__ import annotations

import struct


def _s(text: bytes) -> bytes:
    return struct.pack(">h", len(text)) + text


def commit_key(group: bytes, topic: bytes, partition: int, version: int = 1) -> bytes:
    return struct.pack(">h", version) + _s(group) + _s(topic) + struct.pack(">i", partition)


def commit_value(offset: int, ts: int = 1_700_000_000_000) -> bytes:
    return struct.pack(">hqi", 3, offset, -1) + _s(b"") + struct.pack(">q", ts)
