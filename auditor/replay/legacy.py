"""The legacy lookup (ListOffsets v0, ``UnifiedLog.legacyFetchOffsetsBefore``): segment ``.log``
mtimes, not record timestamps (see the package docstring and docs/kafka-format-notes.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from auditor.replay.views import SegmentView

@dataclass
class LegacyAnswer:
    offset: int | None
    """None: the broker answers an empty list."""
    segment_base_offset: int | None
    mtime_ms: int | None
    reason: str


def predict_legacy(segments: Sequence[SegmentView], replay_at_ms: int, log_start_offset: int | None,
                   log_end_offset: int | None, as_of_ms: int) -> LegacyAnswer:
    """``legacyFetchOffsetsBefore(target, maxNumOffsets=1)``, as the broker computed it."""
    if not segments:
        return LegacyAnswer(None, None, None, "no segments")
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    pairs = [(max(s.base_offset, start), s.log_mtime_ms, s.base_offset) for s in segments]
    if not segments[-1].is_empty and log_end_offset is not None:
        pairs.append((log_end_offset, as_of_ms, None))
    for offset, mtime, base in reversed(pairs):
        if mtime is not None and mtime <= replay_at_ms:
            if base is None:
                return LegacyAnswer(offset, segments[-1].base_offset, mtime,
                                    "target at or after the audit time: the log end offset")
            return LegacyAnswer(offset, base, mtime, f"newest segment whose .log mtime <= target is {base}")
    oldest = min((m for _, m, _ in pairs if m is not None), default=None)
    return LegacyAnswer(None, None, oldest,
                        "every segment's .log mtime is newer than the target: the broker answers an empty list")


def predict_legacy_offsets(segments: Sequence[SegmentView], replay_at_ms: int, log_start_offset: int | None,
                           log_end_offset: int | None, as_of_ms: int, max_num_offsets: int = 1,
                           high_watermark: int | None = None) -> list[int]:
    """The whole ListOffsets v0 answer: ``legacyFetchOffsetsBefore(target, maxNumOffsets)``.

    The broker pairs (max(base offset, log start offset), ``.log`` mtime) per segment, plus (log end
    offset, now) when the last segment is not empty; it finds the newest pair whose mtime <= T and
    answers that pair's offset and those of up to ``max_num_offsets - 1`` older pairs, largest first
    (old clients asked for several to step back segment by segment). Empty when every mtime is
    newer than T. An ordinary consumer (replica id -1) is answered by the leader, and offsets above
    its ``high_watermark`` are replaced by the high watermark
    (``Partition.legacyFetchOffsetsForTimestamp``); None leaves them as they are (a debugging
    client, replica id -2, asks any replica and gets its answer unclamped). Proven against a real
    Kafka 3.9.1 broker in tests/test_legacy_lookup_v0.py. A segment whose mtime is unknown (None) is
    skipped (the broker would have one).
    """
    if max_num_offsets < 0:
        raise ValueError(f"max_num_offsets {max_num_offsets} < 0 (the broker fails the request)")
    if not segments:
        return []
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    pairs = [(max(s.base_offset, start), s.log_mtime_ms) for s in segments]
    if not segments[-1].is_empty and log_end_offset is not None:
        pairs.append((log_end_offset, as_of_ms))
    newest = len(pairs) - 1
    while newest >= 0 and (pairs[newest][1] is None or pairs[newest][1] > replay_at_ms):
        newest -= 1
    count = min(max_num_offsets, newest + 1)
    offsets = sorted((pairs[newest - j][0] for j in range(count)), reverse=True)
    if high_watermark is not None and any(o > high_watermark for o in offsets):
        offsets = [high_watermark] + [o for o in offsets if o <= high_watermark]
    return offsets
