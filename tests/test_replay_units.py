"""The replay lookups on hand-made segment lists: the legacy (v0) mtime algorithm, which 4.x
brokers no longer serve (KIP-896), follows ``UnifiedLog.legacyFetchOffsetsBefore`` of Kafka
3.x (docs/kafka-format-notes.md, "Time lookups"); the modern segment choice follows ``largestTimestamp``."""

from __future__ import annotations

import pytest
from auditor.replay import SegmentView, bytes_between, choose_segment, predict_legacy

pytestmark = pytest.mark.unit


def seg(base, mtime, size=1000, largest=None, first=None, last=None, min_ts=None):
    return SegmentView(base_offset=base, largest_timestamp_ms=largest, log_mtime_ms=mtime, log_size_bytes=size,
                       first_offset=first, last_offset=last, min_timestamp_ms=min_ts)


SEGS = [seg(0, 1_000), seg(100, 2_000), seg(200, 3_000)]


def test_legacy_picks_newest_segment_with_mtime_at_or_before_target():
    assert predict_legacy(SEGS, 2_500, 0, 300, as_of_ms=10_000).offset == 100
    assert predict_legacy(SEGS, 2_000, 0, 300, as_of_ms=10_000).offset == 100  # <= is inclusive
    assert predict_legacy(SEGS, 1_999, 0, 300, as_of_ms=10_000).offset == 0


def test_legacy_empty_when_every_mtime_is_newer():
    answer = predict_legacy(SEGS, 999, 0, 300, as_of_ms=10_000)
    assert answer.offset is None and "empty list" in answer.reason


def test_legacy_log_end_offset_at_now_for_a_non_empty_last_segment():
    assert predict_legacy(SEGS, 10_000, 0, 300, as_of_ms=10_000).offset == 300
    empty_last = SEGS[:2] + [seg(200, 3_000, size=0)]
    assert predict_legacy(empty_last, 10_000, 0, 200, as_of_ms=10_000).offset == 200  # the last segment's base


def test_legacy_offsets_are_raised_to_the_log_start_offset():
    assert predict_legacy(SEGS, 1_500, 50, 300, as_of_ms=10_000).offset == 50


def test_legacy_after_reassignment_mtimes_all_new():
    # a new replica re-wrote every segment at 'now': a replay to yesterday gets nothing
    moved = [seg(0, 9_000), seg(100, 9_001), seg(200, 9_002)]
    assert predict_legacy(moved, 5_000, 0, 300, as_of_ms=9_500).offset is None


def test_modern_choice_uses_largest_timestamp_then_mtime():
    segs = [seg(0, 50_000, largest=1_000), seg(100, 60_000, largest=None), seg(200, 70_000, largest=3_000)]
    assert choose_segment(segs, 900).base_offset == 0
    assert choose_segment(segs, 1_001).base_offset == 100  # timestamp-less: its mtime 60,000 counts
    assert choose_segment(segs, 65_000) is None  # 3,000 and 60,000 are both below
    future = [seg(0, 1, largest=10**13), seg(100, 2, largest=2_000)]
    assert choose_segment(future, 1_500).base_offset == 0  # a stray future record pulls the seek back


def test_bytes_between_segments():
    assert bytes_between(SEGS, 0, 0, 200, 0) == 2000
    assert bytes_between(SEGS, 0, 500, 100, 250) == 750
    assert bytes_between(SEGS, 150, 100, 160, 400) == 300


def test_segments_wholly_below_the_log_start_answer_minus_one_and_hold_no_retained_record():
    from auditor.replay import predict
    views = [seg(0, 1_000, largest=1_500, first=0, last=29, min_ts=1_000),
             seg(30, 2_000, largest=2_500, first=30, last=59, min_ts=2_000)]
    pred = predict(views, 500, log_start_offset=40, log_end_offset=60, high_watermark=60, as_of_ms=10_000,
                   read_files=False)
    assert pred.modern.offset is None and pred.modern.exact and pred.modern.below_log_start
    assert "lies wholly below the log start offset 40" in pred.modern.reason
    assert pred.oldest_timestamp_ms == 2_000 and pred.newest_timestamp_ms == 2_500
    # the retention check deleted segment 0: the broker searches segment 30 from the log start
    after = predict(views[1:], 500, log_start_offset=40, log_end_offset=60, high_watermark=60, as_of_ms=10_000,
                    read_files=False)
    assert after.modern.offset == 40 and not after.modern.below_log_start
