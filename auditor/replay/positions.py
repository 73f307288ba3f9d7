"""Byte positions inside a replica's segments: where an offset's batch starts, how many
``.log`` bytes lie between two answers, where a replay 'should' start."""

from __future__ import annotations

import bisect
from typing import Sequence

from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.formats.offset_index import read_offset_index
from auditor.replay.modern import offset_index_lookup
from auditor.replay.views import SegmentView, read_if_there

def bytes_between(views: Sequence[SegmentView], from_offset: int | None, from_position: int | None,
                  to_offset: int | None, to_position: int | None) -> int | None:
    """Bytes a consumer reads from one answer to another (segment granularity, plus the index
    positions inside the first and last segment when known)."""
    if from_offset is None or to_offset is None or to_offset <= from_offset:
        return 0 if from_offset is not None and to_offset is not None else None

    def seg_index(offset):
        bases = [v.base_offset for v in views]
        return max(bisect.bisect_right(bases, offset) - 1, 0)

    a, b = seg_index(from_offset), seg_index(to_offset)
    if a == b:
        return max((to_position or 0) - (from_position or 0), 0)
    total = (views[a].log_size_bytes or 0) - (from_position or 0)
    total += sum(v.log_size_bytes or 0 for v in views[a + 1:b])
    total += to_position or 0
    return max(total, 0)


def ideal_offset(views: Sequence[SegmentView], replay_at_ms: int) -> tuple[int | None, int | None]:
    """Where a replay to T 'should' start if timestamps grew with offsets: the start of the last
    segment whose oldest record is at or before T (segment granularity). (offset, segment index)"""
    best = None
    for i, v in enumerate(views):
        if v.min_timestamp_ms is not None and v.min_timestamp_ms <= replay_at_ms:
            best = i
    if best is None:
        return (views[0].base_offset, 0) if views else (None, None)
    return views[best].base_offset, best


def offset_position(views: Sequence[SegmentView], offset: int | None) -> tuple[int | None, bool]:
    """(byte position of the batch holding ``offset`` in its segment, exact?). Reads the segment's
    offset index and walks batches from there (read-only); without files, the segment start."""
    return offset_positions(views, [offset])[0]


def offset_positions(views: Sequence[SegmentView], offsets: Sequence[int | None]) -> list[tuple[int | None, bool]]:
    """:func:`offset_position` of each offset; offsets in one segment share its index read and
    its reader (a group reset asks for the committed offset's and the reset's)."""
    out: list = [None] * len(offsets)
    by_segment: dict[int, list[int]] = {}
    bases = [v.base_offset for v in views]
    for k, offset in enumerate(offsets):
        if offset is None or not views:
            out[k] = (None, False)
            continue
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            out[k] = (0, True)
            continue
        seg = views[i]
        last = seg.last_offset
        if last is not None and offset > last:
            # past the last batch of this segment: its end (the log end offset, or a gap before the next)
            out[k] = (seg.log_size_bytes, seg.log_size_bytes is not None)
        elif not seg.log_path:
            out[k] = (0, False)
        else:
            by_segment.setdefault(i, []).append(k)
    for i, ks in by_segment.items():
        _positions_in(views[i], [(k, offsets[k]) for k in ks], out)
    return out


def _positions_in(seg: SegmentView, wanted: list[tuple[int, int]], out: list) -> None:
    """out[k] = (position, exact) of each (k, offset) of one segment: its .log opened once (absent or
    unreadable: (0, False)), its offset index read once (absent or unreadable: from byte 0)."""
    try:
        reader = LogReader(seg.log_path)
    except OSError:
        for k, _ in wanted:
            out[k] = (0, False)
        return
    try:
        try:
            read = read_if_there(read_offset_index, seg.index_path, seg.base_offset)
            entries = read.entries if read is not None else []
        except (OSError, FormatError):
            entries = []
        for k, offset in wanted:
            start = offset_index_lookup(entries, offset)
            if start >= reader.size_bytes:
                start = 0
            for batch in reader.batches(start):
                if batch.last_offset >= offset:
                    out[k] = (batch.position, True)
                    break
            else:
                out[k] = (reader.stop_position, reader.stop_reason is None)
    finally:
        reader.close()
