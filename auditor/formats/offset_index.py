"""`.index`: the sparse offset index of one segment (`OffsetIndex.java`).

Entry layout (8 bytes, big-endian)::

    RELATIVE_OFFSET  int32  offset - segment base offset (from the file name)
    POSITION         int32  byte position of a batch start in the segment's .log

Invariants: offsets strictly increasing (`OffsetIndex.append` throws otherwise), positions
increasing with them; the batch at position 0 is never indexed. Whether a position lies inside
the .log is for the scanner to check (it knows the .log size). See `_fixed_index` for the zero tail
and the I/O rules (pread only, never mmap).
"""

from __future__ import annotations

import struct

from auditor.formats._fixed_index import IndexLayout, IndexRead, read_index
from auditor.formats.java_long import wrap

RELATIVE_OFFSET_OFFSET = 0
RELATIVE_OFFSET_LENGTH = 4
POSITION_OFFSET = RELATIVE_OFFSET_OFFSET + RELATIVE_OFFSET_LENGTH
POSITION_LENGTH = 4
ENTRY_SIZE = POSITION_OFFSET + POSITION_LENGTH          # 8

_ENTRY = struct.Struct(">ii")
assert _ENTRY.size == ENTRY_SIZE


def decode_entry(buf: bytes, at: int = 0) -> tuple[int, int]:
    """Raw (position, relative offset) of the entry at byte ``at`` of ``buf``."""
    rel, position = _ENTRY.unpack_from(buf, at)
    return position, rel


def _check_order(prev: tuple[int, int], cur: tuple[int, int]) -> list[str]:
    out = []
    if cur[0] <= prev[0]:
        out.append(f"offset = {cur[0]}, previous entry's offset = {prev[0]}, expected strictly increasing")
    if cur[1] <= prev[1]:
        out.append(f"position = {cur[1]}, previous entry's position = {prev[1]}, expected strictly increasing")
    return out


LAYOUT = IndexLayout(
    kind="offset index",
    entry_size=ENTRY_SIZE,
    decode=decode_entry,
    to_entry=lambda position, rel, base: (wrap(base + rel), position),   # numpy's int64 sum wraps alike
    key_name="position",
    np_fields=(("rel", ">i4"), ("key", ">i4")),
    offset_first=True,
)


def read_offset_index(path, base_offset: int, *, tail_only: bool = False) -> IndexRead:
    """Entries as (absolute offset, position). Missing file: FileNotFoundError propagates."""
    return read_index(path, base_offset, LAYOUT, tail_only=tail_only, check_order=_check_order)


__all__ = ["ENTRY_SIZE", "POSITION_OFFSET", "RELATIVE_OFFSET_OFFSET", "IndexRead", "decode_entry",
           "read_offset_index"]
