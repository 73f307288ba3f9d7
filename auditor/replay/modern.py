"""The modern lookup (ListOffsets v1+, ``offsetsForTimes``): record timestamps, the time index
and the offset index of the one segment the broker searches; exact from the files
(:func:`predict_modern`) or bounded from the rows (:func:`predict_modern_from_rows`)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Sequence

from auditor.formats.log_reader import LogReader
from auditor.formats.offset_index import read_offset_index
from auditor.formats.time_index import read_time_index
from auditor.replay.index_search import offset_index_lookup_in_file, time_index_lookup_in_file
from auditor.replay.views import SegmentView, read_if_there

NO_ANSWER = -1


@dataclass
class ModernAnswer:
    offset: int | None
    """None when the broker answers -1."""
    timestamp_ms: int | None
    segment_base_offset: int | None
    reason: str
    exact: bool = True
    """False when answered from rows alone: ``offset`` is then the lower bound (segment start)."""
    upper_bound_offset: int | None = None
    position_bytes: int | None = None
    """byte position in its segment where the broker starts reading (index lookup)."""
    tier: str | None = None
    """tiered storage: 'remote' when the broker reads the answer from remote storage, 'local'
    when from the local log (None: no remote storage known)."""
    below_log_start: bool = False
    """True: -1 because the searched segment lies wholly below the log start (not yet deleted)."""


def choose_segment(segments: Sequence[SegmentView], replay_at_ms: int) -> SegmentView | None:
    """The first segment whose largestTimestamp >= target (only that one is searched)."""
    for seg in segments:
        largest = seg.broker_largest_timestamp_ms
        if largest is not None and largest >= replay_at_ms:
            return seg
    return None


def _time_index_lookup(entries: Sequence[tuple[int, int]], replay_at_ms: int, base_offset: int) -> int:
    """TimeIndex.lookup: offset of the last entry with timestamp <= target, else the base offset."""
    timestamps = [t for t, _ in entries]
    i = bisect.bisect_right(timestamps, replay_at_ms)
    return entries[i - 1][1] if i else base_offset


def offset_index_lookup(entries: Sequence[tuple[int, int]], target_offset: int) -> int:
    """OffsetIndex.lookup: position of the last entry with offset <= target, else 0."""
    offsets = [o for o, _ in entries]
    i = bisect.bisect_right(offsets, target_offset)
    return entries[i - 1][1] if i else 0


def search_segment(seg: SegmentView, replay_at_ms: int, log_start_offset: int) -> ModernAnswer:
    """``LogSegment.findOffsetByTimestamp`` on the files of one segment (read-only)."""
    from_time = time_index_lookup_in_file(seg, replay_at_ms)
    if from_time is None:  # not proven equal to the whole read (auditor.replay.index_search): read it
        read = read_if_there(read_time_index, seg.timeindex_path, seg.base_offset)
        from_time = _time_index_lookup(read.entries if read is not None else [], replay_at_ms, seg.base_offset)
    target_offset = max(from_time, log_start_offset)
    position = offset_index_lookup_in_file(seg, target_offset)
    if position is None:
        read = read_if_there(read_offset_index, seg.index_path, seg.base_offset)
        position = offset_index_lookup(read.entries if read is not None else [], target_offset)
    reader = LogReader(seg.log_path)
    try:
        if position >= reader.size_bytes:
            position = 0
        for batch in reader.batches(position):
            if batch.max_timestamp_ms < replay_at_ms:
                continue
            for record in reader.records(batch):
                if record.timestamp_ms >= replay_at_ms and record.offset >= log_start_offset:
                    return ModernAnswer(record.offset, record.timestamp_ms, seg.base_offset,
                                        f"first record with timestamp >= target in segment {seg.base_offset}",
                                        position_bytes=position)
    finally:
        reader.close()
    return ModernAnswer(None, None, seg.base_offset,
                        f"segment {seg.base_offset} has largestTimestamp >= target but no record at or after it "
                        f"(past the log start offset) from byte {position}: the broker answers -1",
                        position_bytes=position)


def _below_log_start(seg: SegmentView, start: int) -> str | None:
    """Why the broker answers -1 when the segment it searches lies wholly below the log start.

    ``deleteRecords`` moves the log start at once, but the segments wholly below it stay in the
    broker's segment list until its retention check (``log.retention.check.interval.ms``, 5 min by
    default) deletes them; a time lookup picks the first segment whose largestTimestamp >= target,
    one of those, finds no record at or past the log start in it and answers -1
    (``UnifiedLog.searchOffsetInLocalLog``). Seen on a real 4.2.1 broker: a target before the data
    answered -1, and the log start once the check had run."""
    if seg.last_offset is None or seg.last_offset >= start:
        return None
    return (f"segment {seg.base_offset} (offsets up to {seg.last_offset}), the first whose largestTimestamp >= "
            f"target, lies wholly below the log start offset {start} (deleteRecords): the broker searches only "
            f"it and answers -1 until its retention check (log.retention.check.interval.ms) deletes the "
            f"segments below the log start")


def predict_modern(segments: Sequence[SegmentView], replay_at_ms: int, log_start_offset: int | None,
                   last_fetchable_offset: int | None) -> ModernAnswer:
    """The modern answer, reading the chosen segment's files (exact)."""
    seg = choose_segment(segments, replay_at_ms)
    if seg is None:
        return ModernAnswer(None, None, None,
                            "no segment has a record timestamp (or mtime) >= target: the broker answers -1")
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    answer = search_segment(seg, replay_at_ms, start)
    if answer.offset is None and (below := _below_log_start(seg, start)):
        return ModernAnswer(None, None, seg.base_offset, below, position_bytes=answer.position_bytes,
                            below_log_start=True)
    if answer.offset is not None and last_fetchable_offset is not None and answer.offset >= last_fetchable_offset:
        return ModernAnswer(None, None, seg.base_offset,
                            f"offset {answer.offset} is not below the last fetchable offset {last_fetchable_offset} "
                            f"(high watermark): the broker answers -1", position_bytes=answer.position_bytes)
    return answer


def predict_modern_from_rows(segments: Sequence[SegmentView], replay_at_ms: int,
                             log_start_offset: int | None) -> ModernAnswer:
    """Without the files: the segment the broker would search, and the offset range of its answer."""
    seg = choose_segment(segments, replay_at_ms)
    if seg is None:
        return ModernAnswer(None, None, None, "no segment has a record timestamp (or mtime) >= target: "
                            "the broker answers -1", exact=True)
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    below = _below_log_start(seg, start)
    if below:
        return ModernAnswer(None, None, seg.base_offset, below, exact=True, below_log_start=True)
    low = max(seg.first_offset if seg.first_offset is not None else seg.base_offset, start)
    return ModernAnswer(low, None, seg.base_offset,
                        f"in segment {seg.base_offset} (offsets {low}..{seg.last_offset}); exact offset needs the files",
                        exact=False, upper_bound_offset=seg.last_offset)


def local_search(views: Sequence[SegmentView], replay_at_ms: int, start: int | None, fetchable: int | None,
                  read_files: bool) -> ModernAnswer:
    if read_files:
        return predict_modern(views, replay_at_ms, start, fetchable)
    return predict_modern_from_rows(views, replay_at_ms, start)
