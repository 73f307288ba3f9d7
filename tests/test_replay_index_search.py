"""The modern lookup's index lookups by binary search in the file (``auditor.replay.index_search``)
answer what the whole read answers, and are used only where the scanned row proves it.

On the real 2018 broker's ``__consumer_offsets-28`` (a ``.timeindex`` of 258 entries, an
``.index`` of 254, written by a real broker), copied: for every entry's key, its neighbours and
values outside the range, the binary search equals ``bisect`` over the whole read's entries. The
files here are below ``LAZY_MIN_BYTES`` (a single pread reads them whole), so the threshold is
lowered for the test. A row that does not prove the entry count (an active segment, depth index, a
file whose size or mtime changed since the scan, a missing file) answers None (the caller reads the
file whole), and ``search_segment`` answers the same either way.
"""

from __future__ import annotations

import os
import shutil

import pytest

from auditor.formats.offset_index import read_offset_index
from auditor.formats.time_index import read_time_index
from auditor.replay import index_search, search_segment, segment_views
from auditor.replay.modern import _time_index_lookup, offset_index_lookup
from auditor.scan import scan_log_dirs
from harness.realdata import BROKER_DIRS

# 3 s at load 2, most of it one test (tests/conftest.py: long files first)
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=3)]

SOURCE = BROKER_DIRS / "kafka-2018-v2" / "kafka-logs" / "__consumer_offsets-28"


@pytest.fixture
def segment(tmp_path, monkeypatch):
    """The copied partition's one segment as a SegmentView of its scanned row (depth headers,
    closed, as a rolled segment is), the threshold lowered to 0 bytes."""
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(SOURCE, log_dir / SOURCE.name)
    rows = [dict(r, is_active=False) for r in scan_log_dirs([str(log_dir)], "headers").segments]
    monkeypatch.setattr(index_search, "LAZY_MIN_BYTES", 0)
    (view,) = segment_views(rows)
    assert view.timeindex_entries == 258 and view.index_entries == 254 and view.depth == "headers"
    return view


def _targets(keys: list[int]) -> list[int]:
    return sorted({k + d for k in keys for d in (-1, 0, 1)} | {-1, 0, keys[0] - 10**6, keys[-1] + 10**9})


def test_binary_search_equals_the_whole_read(segment):
    times = read_time_index(segment.timeindex_path, segment.base_offset).entries
    offsets = read_offset_index(segment.index_path, segment.base_offset).entries
    for t in _targets([ts for ts, _ in times]):
        assert index_search.time_index_lookup_in_file(segment, t) == _time_index_lookup(times, t, segment.base_offset), t
    for o in _targets([off for off, _ in offsets]):
        assert index_search.offset_index_lookup_in_file(segment, o) == offset_index_lookup(offsets, o), o
    stamps = [ts for ts, _ in times]
    answered = 0
    for t in stamps[::25] + [stamps[0] - 1, stamps[-1] + 1]:
        lazy = search_segment(segment, t, 0)
        index_search.LAZY_MIN_BYTES = 1 << 40  # the whole read, for the same target
        whole = search_segment(segment, t, 0)
        index_search.LAZY_MIN_BYTES = 0
        assert lazy == whole, t
        answered += lazy.offset is not None
    assert answered >= 10


def test_rows_that_do_not_prove_the_count_read_whole(segment):
    t = read_time_index(segment.timeindex_path, segment.base_offset).entries[100][0]
    assert index_search.time_index_lookup_in_file(segment, t) is not None
    for change in ({"is_active": True}, {"is_active": None}, {"depth": "index"}, {"timeindex_entries": None},
                   {"timeindex_size_bytes": segment.timeindex_size_bytes - 12},
                   {"timeindex_mtime_ms": segment.timeindex_mtime_ms - 1000},
                   {"timeindex_entries": segment.timeindex_size_bytes // 12 + 1},
                   {"timeindex_path": segment.timeindex_path + ".gone"}):
        other = type(segment)(**{**segment.__dict__, **change})
        assert index_search.time_index_lookup_in_file(other, t) is None, change
    os.utime(segment.index_path, ns=(0, 0))  # touched since the scan: read whole
    assert index_search.offset_index_lookup_in_file(segment, 500) is None
