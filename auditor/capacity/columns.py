"""The segment table's columns the capacity projection reads, as numpy arrays (thin I/O).

:func:`from_arrow` (the driver's Arrow table, its strings possibly sorted dictionaries) and
:func:`from_pandas` (a frame of segment rows) give the same :class:`SegmentColumns`: strings as
integer codes into their labels, numbers as float64 with NaN for absence (no Python object per row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NUMERIC = ("broker_id", "partition", "base_offset", "log_size_bytes", "index_size_bytes", "timeindex_size_bytes",
           "txnindex_size_bytes", "index_entries", "timeindex_entries", "max_timestamp_ms", "min_timestamp_ms",
           "min_batch_timestamp_ms", "first_batch_max_timestamp_ms", "log_mtime_ms", "record_count",
           "first_offset", "last_offset")
STRINGS = ("log_dir", "topic", "dir_kind", "file_state")
BOOLS = ("is_active",)
COLUMNS = STRINGS + NUMERIC + BOOLS
"""What :func:`from_arrow` selects (a column the table lacks reads as all-absent)."""


@dataclass
class SegmentColumns:
    n: int
    num: dict[str, np.ndarray]
    """float64, NaN for absence."""
    codes: dict[str, np.ndarray]
    """int64 codes into ``labels`` (-1: null)."""
    labels: dict[str, list]
    active: np.ndarray
    """bool (a null is not active)."""

    def label(self, name: str, code: int):
        return self.labels[name][code] if code >= 0 else None


def _codes_arrow(column) -> tuple[np.ndarray, list]:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    codes = column.indices.to_numpy(zero_copy_only=False)
    codes = np.where(np.asarray(column.is_null()), -1, np.nan_to_num(codes.astype(np.float64), nan=-1)).astype(np.int64)
    return codes, column.dictionary.to_pylist()


def from_arrow(table) -> SegmentColumns:
    """The capacity columns of an Arrow segment table (``auditor.schema.SEGMENT_SCHEMA``)."""
    import pyarrow as pa

    n = table.num_rows
    names = set(table.column_names)
    num, codes, labels = {}, {}, {}
    for name in NUMERIC:
        if name in names:
            col = table.column(name)
            num[name] = col.cast(pa.float64()).to_numpy(zero_copy_only=False) if n else np.zeros(0)
        else:
            num[name] = np.full(n, np.nan)
    for name in STRINGS:
        if name in names and n:
            codes[name], labels[name] = _codes_arrow(table.column(name))
        else:
            codes[name], labels[name] = np.full(n, -1, dtype=np.int64), []
    if "is_active" in names and n:
        active = table.column("is_active").fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    else:
        active = np.zeros(n, dtype=bool)
    return SegmentColumns(n, num, codes, labels, active)


def from_pandas(frame) -> SegmentColumns:
    """The capacity columns of a pandas frame of segment rows (the checks' frame, a case's rows)."""
    import pandas as pd

    n = len(frame)
    num, codes, labels = {}, {}, {}
    for name in NUMERIC:
        num[name] = (pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                     if name in frame.columns else np.full(n, np.nan))
    for name in STRINGS:
        if name in frame.columns and n:
            c, u = pd.factorize(frame[name], use_na_sentinel=True)
            codes[name], labels[name] = c.astype(np.int64), list(u)
        else:
            codes[name], labels[name] = np.full(n, -1, dtype=np.int64), []
    active = (np.asarray(frame["is_active"] == True, dtype=bool) if "is_active" in frame.columns and n  # noqa: E712 - null: not active
              else np.zeros(n, dtype=bool))
    return SegmentColumns(n, num, codes, labels, active)
