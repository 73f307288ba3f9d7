"""The GX suite on pandas, validated part by part (each expectation on a frame of the columns it
reads: checks.framework.expectations._pandas_parts) gives the results and findings of one validation of the
whole frame (``one_frame=True``), on real broker rows and on planted violations of every kind."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest

from auditor.scan import scan_log_dirs
from auditor.schema import SEGMENT_COLUMNS, SEGMENT_KEY, SEGMENT_SCHEMA, empty_row, to_table
from checks.framework.config import Config
from checks.framework.base import AuditContext
from auditor.engines.local.expectations import _pandas_parts, run_expectations
from checks.framework.expectations import suite_spec
from harness.realdata import LOG_DIRS

# the parts against whole-frame GX runs, BASIC against SUMMARY: 7.6 s CPU at load 5 (tests/conftest.py: long files first)
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=7.5)]


def _ctx():
    return AuditContext(as_of_ms=int(time.time() * 1000), config=Config.load(None))


def _row(**values):
    row = empty_row(SEGMENT_COLUMNS)
    row.update(broker_id=1, cluster_id="c", log_dir="/d", topic="t", partition=0, dir_kind="live", dir_name="t-0",
               base_offset=0, depth="headers", log_size_bytes=100, log_mtime_ms=1_700_000_000_000,
               first_offset=0, last_offset=9, min_timestamp_ms=1_700_000_000_000, max_timestamp_ms=1_700_000_001_000,
               batch_count=1, record_count=10, trailing_bytes=0, notes=["a note"], codecs=["none"], magics=[2])
    row.update(values)
    return row


def _same(frame):
    ctx = _ctx()
    parts, whole = run_expectations(frame, ctx), run_expectations(frame, ctx, one_frame=True)
    # compared as JSON text: a null sample is NaN, which equals nothing
    assert json.dumps(parts.results) == json.dumps(whole.results)
    assert json.dumps([f.to_dict() for f in parts.findings]) == json.dumps([f.to_dict() for f in whole.findings])
    assert (parts.success, parts.element_count) == (whole.success, whole.element_count)
    return parts


def test_real_broker_rows_give_the_whole_frame_results():
    result = scan_log_dirs(LOG_DIRS, "headers")
    frame = to_table(result.segments, SEGMENT_SCHEMA).to_pandas()
    assert len(frame) >= 5 and frame["partition"].dtype.name == "int32"  # the per-row path GX takes for int32
    res = _same(frame)
    assert res.success, [r for r in res.results if not r["success"]]


def _planted_rows():
    return [
        _row(base_offset=0),
        _row(base_offset=0),                                    # duplicate segment key
        _row(base_offset=100, first_offset=100, last_offset=50),  # last < base and < first
        _row(base_offset=200, first_offset=200, last_offset=209,
             min_timestamp_ms=1_700_000_009_000, max_timestamp_ms=1_700_000_001_000),  # min > max
        _row(base_offset=300, first_offset=300, last_offset=309, trailing_bytes=-4),
        _row(base_offset=400, first_offset=400, last_offset=409, dir_kind="weird", file_state="odd"),
        _row(base_offset=500, first_offset=500, last_offset=509, topic=None, depth="nope"),
        _row(base_offset=600, first_offset=600, last_offset=609, max_timestamp_ms=4_102_444_800_000 * 10),
        _row(base_offset=700, first_offset=700, last_offset=709, partition=-3, log_size_bytes=1 << 40),
        _row(base_offset=800, first_offset=800, last_offset=809, partition=-1, broker_id=None, log_mtime_ms=5),
        _row(base_offset=900, first_offset=900, last_offset=909, min_timestamp_offset=850, max_timestamp_offset=950,
             max_backward_jump_ms=-1, batch_count=-1, record_count=-2, min_timestamp_ms=7),
    ]


def test_planted_violations_give_the_whole_frame_results():
    frame = pa.Table.from_pylist(_planted_rows(), schema=SEGMENT_SCHEMA).to_pandas()
    res = _same(frame)
    failed = {r["expectation"] + ":" + ",".join(r["columns"] or [r["column"]]): r["unexpected_count"]
              for r in res.results if not r["success"]}
    assert failed["expect_compound_columns_to_be_unique:" + ",".join(SEGMENT_KEY)] == 2
    assert failed["expect_column_values_to_be_between:partition"] == 2
    assert len(failed) >= 18, failed  # nearly every expectation of the suite fails somewhere
    between = next(r for r in res.results if r["column"] == "partition" and "between" in r["expectation"])
    assert sorted(between["partial_unexpected"]) == [-3, -1]


def test_every_expectation_is_in_exactly_one_part():
    frame = to_table([_row()], SEGMENT_SCHEMA).to_pandas()
    spec = list(enumerate(suite_spec(_ctx())))
    parts = _pandas_parts(frame, spec)
    assert sorted(i for _, expectations in parts for i, _ in expectations) == list(range(len(spec)))
    head = parts[0][0]()
    assert list(head.columns) == list(frame.columns) and not len(head)  # names only: the empty head
    for make_part, expectations in parts[1:]:
        part = make_part()
        assert len(part) == len(frame) and len(part.columns) <= len(SEGMENT_KEY)


def test_an_arrow_table_gives_the_results_of_its_pandas_frame():
    rows = [_row(base_offset=0), _row(base_offset=0), _row(base_offset=100, first_offset=100, last_offset=50, partition=-2),
            _row(base_offset=200, first_offset=200, last_offset=209, topic=None, dir_kind="weird", broker_id=None)]
    table = pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA)
    ctx = _ctx()
    from_arrow, whole = run_expectations(table, ctx), run_expectations(table.to_pandas(), ctx, one_frame=True)
    assert json.dumps(from_arrow.results) == json.dumps(whole.results)
    assert json.dumps([f.to_dict() for f in from_arrow.findings]) == json.dumps([f.to_dict() for f in whole.findings])
    assert not from_arrow.success and from_arrow.element_count == 4


def test_the_parts_leave_no_frame_behind():
    """After each part the metrics GX's engine cached (each expectation's full-length condition
    series) are dropped and GX's cycles collected: the pandas objects of the table's length alive
    when ``release`` is called (once per part) stay a part's few, where they piled up part after
    part before (35 after the 25th part); after the suite, none."""
    import gc

    import pandas as pd

    rows = 4_321  # a length nothing else here has

    def alive() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, (pd.DataFrame, pd.Series)) and len(o) == rows)

    table = pa.Table.from_pylist([_row(base_offset=i * 10, first_offset=i * 10, last_offset=i * 10 + 9)
                                  for i in range(rows)], schema=SEGMENT_SCHEMA)
    counts = []
    res = run_expectations(table, _ctx(), release=lambda: counts.append(alive()))
    assert res.success and res.element_count == rows
    assert len(counts) == len(_pandas_parts(table, list(enumerate(suite_spec(_ctx())))))
    assert max(counts) <= len(SEGMENT_KEY) + 1, counts  # the uniqueness part: its frame and its columns
    assert counts[-1] <= 3, counts
    gc.collect()
    assert alive() == 0


def test_the_drivers_compact_table_gives_the_results_of_its_plain_frame():
    """The driver's segment table (auditor.arrow_compact: repeated strings as sorted dictionaries,
    all-null columns on one zero buffer) gives the results and findings of the plain table's frame,
    null strings in the key and the set tests included."""
    from auditor.arrow_compact import compact_columns, is_sorted_dictionary

    rows = []
    for i in range(60):
        rows += [_row(base_offset=i * 10, topic=f"t{i % 7}", first_offset=i * 10, last_offset=i * 10 + 9),
                 _row(base_offset=i * 10, topic=f"t{i % 7}", first_offset=i * 10, last_offset=i * 10 + 9)
                 if i % 20 == 0 else _row(base_offset=i * 10 + 5, first_offset=i * 10 + 5, last_offset=i * 10 + 9,
                                          topic=None if i % 9 == 0 else "é", dir_kind="weird" if i % 11 == 0 else "live",
                                          file_state="odd" if i % 13 == 0 else None, log_dir=None if i % 17 == 0 else "/d")]
    plain = pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA)
    table = compact_columns(plain)
    assert is_sorted_dictionary(table.schema.field("topic").type) and is_sorted_dictionary(table.schema.field("file_state").type)
    assert table.column("crc_failures").null_count == len(rows)  # all null: on the shared zero buffer
    ctx = _ctx()
    compact, whole = run_expectations(table, ctx), run_expectations(plain.to_pandas(), ctx, one_frame=True)
    assert json.dumps(compact.results) == json.dumps(whole.results)
    assert json.dumps([f.to_dict() for f in compact.findings]) == json.dumps([f.to_dict() for f in whole.findings])
    failed = {r["expectation"] for r in compact.results if not r["success"]}
    assert {"expect_compound_columns_to_be_unique", "expect_column_values_to_not_be_null",
            "expect_column_values_to_be_in_set"} <= failed


@pytest.mark.parametrize("table", ["planted", "columns out of order", "real"])
def test_the_basic_result_format_gives_the_summarys_entries(monkeypatch, table):
    """GX's BASIC results (checks.framework.expectations.RESULT_FORMAT) give the entries and findings SUMMARY
    gave: counts, percents, partial lists of unexpected values, the table expectation's mismatches."""
    import checks.framework.expectations as expectations

    if table == "real":
        frame = to_table(scan_log_dirs(LOG_DIRS, "headers").segments, SEGMENT_SCHEMA)
    else:
        frame = pa.Table.from_pylist(_planted_rows(), schema=SEGMENT_SCHEMA)
        if table == "columns out of order":
            names = frame.column_names
            frame = frame.select([names[1], names[0], *names[2:-1]]).to_pandas()
    assert expectations.RESULT_FORMAT["result_format"] == "BASIC"
    ctx = _ctx()
    basic = run_expectations(frame, ctx)
    monkeypatch.setattr(expectations, "RESULT_FORMAT", {**expectations.RESULT_FORMAT, "result_format": "SUMMARY"})
    summary = run_expectations(frame, ctx)
    assert json.dumps(basic.results) == json.dumps(summary.results)
    assert json.dumps([f.to_dict() for f in basic.findings]) == json.dumps([f.to_dict() for f in summary.findings])
    failed = [r for r in basic.results if not r["success"]]
    if table == "real":
        assert basic.success and not failed
    else:
        assert any(r["partial_unexpected"] for r in failed) and all(r["unexpected_count"] or r["partial_unexpected"]
                                                                   for r in failed)
    if table == "columns out of order":
        names_only = next(r for r in basic.results if r["expectation"] == "expect_table_columns_to_match_ordered_list")
        assert not names_only["success"] and names_only["partial_unexpected"]  # GX's mismatched details
