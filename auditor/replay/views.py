"""The segments a lookup sees: :class:`SegmentView` (one live, normal segment of one replica),
built from scanner rows by :func:`segment_views`, and the one way its files are opened when present."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

@dataclass
class SegmentView:
    """What the lookups need of one segment (a live, normal segment of one replica)."""

    base_offset: int
    largest_timestamp_ms: int | None
    """largest record timestamp (None: no timestamps in the segment)."""
    log_mtime_ms: int | None
    log_size_bytes: int | None
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp_ms: int | None = None
    log_path: str | None = None
    index_path: str | None = None
    timeindex_path: str | None = None
    # what the scan saw of the index files (``auditor.replay.index_search``: a binary search in a
    # closed segment's index instead of reading it whole, where the row proves it gives the same)
    is_active: bool | None = None
    depth: str | None = None
    index_entries: int | None = None
    index_size_bytes: int | None = None
    index_mtime_ms: int | None = None
    timeindex_entries: int | None = None
    timeindex_size_bytes: int | None = None
    timeindex_mtime_ms: int | None = None

    @property
    def broker_largest_timestamp_ms(self) -> int | None:
        """``LogSegment.largestTimestamp()``: the max record timestamp, else the mtime."""
        if self.largest_timestamp_ms is not None and self.largest_timestamp_ms >= 0:
            return self.largest_timestamp_ms
        return self.log_mtime_ms

    @property
    def is_empty(self) -> bool:
        return not self.log_size_bytes


def _get(row, key):
    value = row.get(key) if isinstance(row, dict) else getattr(row, key, None)
    if value is None or (isinstance(value, float) and value != value):
        return None
    return int(value) if isinstance(value, float) else value


#: The row columns a SegmentView is made of, read in one pass per row (:func:`_values`).
_VIEW_COLUMNS = ("file_state", "log_size_bytes", "log_dir", "dir_name", "base_offset", "max_timestamp_ms",
                 "log_mtime_ms", "first_offset", "last_offset", "min_timestamp_ms", "min_batch_timestamp_ms",
                 "is_active", "depth", "index_entries", "index_size_bytes", "index_mtime_ms", "timeindex_entries",
                 "timeindex_size_bytes", "timeindex_mtime_ms")


_INDEX_FACTS = _VIEW_COLUMNS[13:]


def _values(row, keys: tuple) -> list:
    """``[_get(row, key) for key in keys]``, the NaN / float cleaning only for rows that hold a float
    (pandas'); plain scanner rows are read as they are."""
    values = [row.get(k) for k in keys] if isinstance(row, dict) else [getattr(row, k, None) for k in keys]
    if any(isinstance(v, float) for v in values):
        return [_get(row, k) for k in keys]
    return values


def segment_views(rows: Iterable) -> list[SegmentView]:
    """Live, normal segments of one replica (one partition dir), in base-offset order."""
    views = []
    dirs: dict[tuple, str] = {}
    for row in rows:
        (state, size, log_dir, dir_name, base, largest, mtime, first, last, min_ts, min_batch_ts,
         active, depth, *index_facts) = _values(row, _VIEW_COLUMNS)
        if state is not None or size is None:
            continue
        where = (log_dir or "", dir_name or "")
        directory = dirs.get(where)
        if directory is None:  # one Path per partition dir, not three per segment
            directory = dirs[where] = _dir_prefix(Path(where[0]) / where[1])
        base = int(base)
        name = f"{directory}{base:020d}"
        views.append(SegmentView(
            base_offset=base,
            largest_timestamp_ms=largest,
            log_mtime_ms=mtime,
            log_size_bytes=size,
            first_offset=first,
            last_offset=last,
            min_timestamp_ms=min_ts if min_ts is not None else min_batch_ts,
            log_path=f"{name}.log",
            index_path=f"{name}.index",
            timeindex_path=f"{name}.timeindex",
            is_active=active,
            depth=depth,
            **dict(zip(_INDEX_FACTS, index_facts)),
        ))
    return sorted(views, key=lambda v: v.base_offset)


def _dir_prefix(directory: Path) -> str:
    """What ``str(directory / name)`` puts before a plain file name: '' for '.', else the path and
    a separator (none after a root)."""
    text = str(directory)
    if text == ".":
        return ""
    return text if text.endswith("/") else text + "/"


def read_if_there(read, path: str | None, base_offset: int):
    """``read(path, base_offset)``, or None when there is no such file (``os.path.exists`` is False:
    asked only when the read fails, so a file that is there costs no extra stat); a file that is
    there but cannot be read raises, as the read does."""
    if not path:
        return None
    try:
        return read(path, base_offset)
    except OSError:
        if os.path.exists(path):
            raise
        return None
