"""Unit cases of the two pure pieces issue 14 added to auditor.replay: ``log_start`` (where the
log start offset comes from, and whether anything was ever deleted) and ``predict_legacy_offsets``
(the whole ListOffsets v0 answer). Both are proven on real brokers elsewhere
(tests/test_replay_young_topic.py on 4.2.1, tests/test_legacy_lookup_v0.py on 3.9.1); these pin
the edges those brokers did not show."""

from __future__ import annotations

import pytest

from auditor import replay

pytestmark = pytest.mark.unit


def seg(base, mtime=1_000, size=10):
    return replay.SegmentView(base_offset=base, largest_timestamp_ms=mtime, log_mtime_ms=mtime, log_size_bytes=size)


@pytest.mark.parametrize("views, checkpoint, epochs, offset, source, deleted", [
    ([seg(0)], None, [(0, 0)], 0, replay.LOG_START_FIRST_SEGMENT, False),        # young topic
    ([seg(0)], None, [], 0, replay.LOG_START_FIRST_SEGMENT, False),              # no epochs (magic 0/1)
    ([seg(0)], None, [(0, 40), (1, 90)], 40, replay.LOG_START_LEADER_EPOCH, True),  # fresh deleteRecords
    ([seg(0)], 30, [(0, 30)], 30, replay.LOG_START_CHECKPOINT, True),              # checkpointed deleteRecords
    ([seg(500)], None, [(2, 500)], 500, replay.LOG_START_FIRST_SEGMENT, True),     # retention deleted segments
    ([seg(100)], 7, [(3, 100)], 100, replay.LOG_START_LEADER_EPOCH, True),        # stale checkpoint, then retention
    ([seg(2481)], 0, [(0, 0)], 0, replay.LOG_START_CHECKPOINT, False),             # tiered: the rest is remote
    ([], None, None, None, None, None),
])
def test_log_start(views, checkpoint, epochs, offset, source, deleted):
    start = replay.log_start(views, checkpoint, epochs)
    assert (start.offset, start.source, start.ever_deleted) == (offset, source, deleted), start


def test_legacy_offsets_list_form_and_clamp():
    views = [seg(0, 100), seg(10, 200), seg(20, 300)]
    args = dict(log_start_offset=0, log_end_offset=25, as_of_ms=1_000)
    assert replay.predict_legacy_offsets(views, 99, **args) == []
    assert replay.predict_legacy_offsets(views, 100, **args) == [0]
    assert replay.predict_legacy_offsets(views, 250, max_num_offsets=10, **args) == [10, 0]
    assert replay.predict_legacy_offsets(views, 5_000, max_num_offsets=2, **args) == [25, 20]
    # an ordinary consumer: offsets above the high watermark become the high watermark
    assert replay.predict_legacy_offsets(views, 5_000, max_num_offsets=3, high_watermark=22, **args) == [22, 20, 10]
    # log start inside a segment: pairs start there, repeated when several segments are below it
    assert replay.predict_legacy_offsets(views, 350, log_start_offset=15, log_end_offset=25, as_of_ms=1_000,
                                         max_num_offsets=10) == [20, 15, 15]
    assert replay.predict_legacy_offsets(views, 5_000, max_num_offsets=0, **args) == []
    with pytest.raises(ValueError):
        replay.predict_legacy_offsets(views, 5_000, max_num_offsets=-1, **args)
    # an empty active segment adds no (log end offset, now) pair
    assert replay.predict_legacy_offsets([seg(0, 100), seg(10, 200, size=0)], 5_000, log_start_offset=0,
                                         log_end_offset=10, as_of_ms=1_000, max_num_offsets=5) == [10, 0]
    # agrees with predict_legacy (max offsets 1) on every target
    for target in range(0, 1_200, 7):
        one = replay.predict_legacy(views, target, 0, 25, 1_000).offset
        assert replay.predict_legacy_offsets(views, target, **args) == ([] if one is None else [one])
