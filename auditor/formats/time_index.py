"""`.timeindex`: the sparse time index of one segment (`TimeIndex.java`).

Entry layout (12 bytes, big-endian)::

    TIMESTAMP        int64  max timestamp (ms) of the segment so far
    RELATIVE_OFFSET  int32  offset - segment base offset: the last offset of the first batch that
                            reached that timestamp ("shallow" offset)

Invariants: timestamps strictly increasing within one file (`maybeAppend` skips equal ones and
throws on smaller ones), offsets non-decreasing. No guarantee across segments. Segments of v0
data have an empty time index. See `_fixed_index` for the zero tail and the I/O rules.
"""

from __future__ import annotations

import struct

from auditor.formats._fixed_index import IndexLayout, IndexRead, read_index
from auditor.formats.java_long import wrap

TIMESTAMP_OFFSET = 0
TIMESTAMP_LENGTH = 8
RELATIVE_OFFSET_OFFSET = TIMESTAMP_OFFSET + TIMESTAMP_LENGTH
RELATIVE_OFFSET_LENGTH = 4
ENTRY_SIZE = RELATIVE_OFFSET_OFFSET + RELATIVE_OFFSET_LENGTH   # 12

_ENTRY = struct.Struct(">qi")
assert _ENTRY.size == ENTRY_SIZE


def decode_entry(buf: bytes, at: int = 0) -> tuple[int, int]:
    """Raw (timestamp_ms, relative offset) of the entry at byte ``at`` of ``buf``."""
    return _ENTRY.unpack_from(buf, at)


def _check_order(prev: tuple[int, int], cur: tuple[int, int]) -> list[str]:
    out = []
    if cur[0] <= prev[0]:
        out.append(f"timestamp_ms = {cur[0]}, previous entry's timestamp_ms = {prev[0]}, "
                   f"expected strictly increasing")
    if cur[1] < prev[1]:
        out.append(f"offset = {cur[1]}, previous entry's offset = {prev[1]}, expected non-decreasing")
    return out


LAYOUT = IndexLayout(
    kind="time index",
    entry_size=ENTRY_SIZE,
    decode=decode_entry,
    to_entry=lambda timestamp_ms, rel, base: (timestamp_ms, wrap(base + rel)),   # numpy's int64 sum wraps alike
    key_name="timestamp_ms",
    np_fields=(("key", ">i8"), ("rel", ">i4")),
    offset_first=False,
)


def read_time_index(path, base_offset: int, *, tail_only: bool = False) -> IndexRead:
    """Entries as (timestamp_ms, absolute offset). Missing file: FileNotFoundError propagates."""
    return read_index(path, base_offset, LAYOUT, tail_only=tail_only, check_order=_check_order)


__all__ = ["ENTRY_SIZE", "RELATIVE_OFFSET_OFFSET", "TIMESTAMP_OFFSET", "IndexRead", "decode_entry",
           "read_time_index"]
