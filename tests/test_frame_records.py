"""``checks.framework.base.frame_records`` gives what ``DataFrame.to_dict("records")`` gives: the same
rows, keys in the same order, each value equal and of the same type (numpy arrays in list cells
of the same dtype), on the segment and partition frames the per-partition checks read (both frame
kinds: ``as_frame``'s and the local engine's shared-cell one) and on frames of every dtype kind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from auditor.check_runner import as_frame
from auditor.engines.local.tables import segment_frame
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA
from checks.framework.base import frame_records, live_replicas
from harness.synthetic_tables import synthetic_tables

# recorded: the SYNTHETIC rows are drawn from the real fixtures' rows (synthetic_rows.base_rows scans them)
pytestmark = pytest.mark.recorded


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if a is pd.NA or a is pd.NaT or a is None:
        return a is b
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


def assert_records_equal(frame: pd.DataFrame) -> int:
    expected, got = frame.to_dict("records"), frame_records(frame)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert _same(g, e), (i, {k: (g[k], e[k]) for k in e if not _same(g.get(k), e[k])})
    return len(got)


def test_the_segment_and_partition_frames_records():
    seg, part, _ = synthetic_tables(1, rows=400)
    seg[3]["topic"] = None
    frames = [as_frame(seg, SEGMENT_SCHEMA), segment_frame(pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA)),
              as_frame(part, PARTITION_SCHEMA)]
    for frame in frames:
        assert assert_records_equal(frame) == len(frame)
        assert assert_records_equal(frame.iloc[0:0]) == 0
    # what the checks hand it: one replica's rows, cut, sorted and re-indexed (live_replicas)
    replicas = [rows for frame in frames[:2] for _, one in frame.groupby(["topic", "partition"])
                for _, _, rows in live_replicas(one)]
    assert len(replicas) > 40
    for rows in replicas:
        assert_records_equal(rows)


def test_every_dtype_kind_and_the_frames_pandas_keeps_for_itself():
    frame = pd.DataFrame({
        "i64": np.array([1, 2, 3], dtype=np.int64), "i32": np.array([1, -2, 3], dtype=np.int32),
        "f": [1.5, float("nan"), 3.0], "b": [True, False, True], "s": ["a", None, "c"],
        "obj_num": pd.Series([np.int64(4), np.float64(2.5), np.bool_(True)], dtype=object),
        "obj_dt": pd.Series([np.datetime64("2024-01-01T00:00:00"), None, np.timedelta64(5, "s")], dtype=object),
        "lists": pd.Series([np.array([1, 2]), [3], None], dtype=object),
        "nullable": pd.array([1, None, 3], dtype="Int64"), "nbool": pd.array([True, None, False], dtype="boolean"),
        "dt": pd.to_datetime(["2024-01-01", None, "2024-03-01"]),
        "dt_tz": pd.to_datetime(["2024-01-01", "2024-02-01", None]).tz_localize("UTC"),
        "td": pd.to_timedelta([1, 2, None], unit="s"), "cat": pd.Categorical(["x", "y", "x"]),
        "str": pd.array(["p", None, "q"], dtype="string"),
    })
    assert assert_records_equal(frame) == 3
    assert assert_records_equal(frame.iloc[[2, 0]]) == 2
    # no column: rows of nothing; a name twice: pandas' own answer
    assert frame_records(pd.DataFrame(index=range(2))) == pd.DataFrame(index=range(2)).to_dict("records")
    twice = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with pytest.warns(UserWarning, match="not unique"):
        assert frame_records(twice) == [{"a": 2}]
