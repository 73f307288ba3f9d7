"""``checks.framework.base.frame_records`` gives what ``DataFrame.to_dict("records")`` gives: the same
rows, keys in the same order, each value equal and of the same type, on frames of every dtype kind
(``harness.batch_equality.assert_records_equal``). On the segment and partition frames the checks
read, both frame kinds: tests/test_batch_checks_synthetic.py::test_frame_records_are_to_dicts_records."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from checks.framework.base import frame_records
from harness.batch_equality import assert_records_equal

pytestmark = pytest.mark.unit


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
