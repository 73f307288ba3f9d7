"""What keeps the local engine's memory by the row at fleet scale (issue 19), on synthetic rows:
the partition-dir statistics read lazily from Arrow (``ArrowRows``) are the dicts the engine made
before, and the findings document streams them (``json_stream``: nested sequences item by item)
into the JSON ``json.dumps`` gives."""

from __future__ import annotations

import pytest
import io
import json

import pyarrow as pa

from auditor.json_stream import write_document
from auditor.engines.local.tables import AGGREGATE_SCHEMAS, ArrowRows, aggregate_rows, frames, partition_stats_rows
from auditor.schema import PARTITION_COLUMNS, PARTITION_SCHEMA, SEGMENT_COLUMNS, SEGMENT_SCHEMA, empty_row
from reports.document import _column, _totals

pytestmark = pytest.mark.unit


def _tables():
    segs, parts = [], []
    for broker in (1, 2):
        for p in range(3):
            dir_name = f"t-{p}"
            parts.append({**empty_row(PARTITION_COLUMNS), "broker_id": broker, "log_dir": f"/d{broker}",
                          "topic": "t", "partition": p, "dir_kind": "live" if p < 2 else "stray", "dir_name": dir_name,
                          "segment_count": 2, "size_bytes": 100 * (p + 1), "notes": ["n"] if p == 1 else []})
            for base in (0, 10):
                segs.append({**empty_row(SEGMENT_COLUMNS), "broker_id": broker, "log_dir": f"/d{broker}", "topic": "t",
                             "partition": p, "dir_kind": "live", "dir_name": dir_name, "base_offset": base,
                             "first_offset": base, "last_offset": base + 9, "log_size_bytes": 50, "record_count": 10,
                             "log_mtime_ms": 1_700_000_000_000 + base, "max_timestamp_ms": 1_700_000_000_000,
                             "notes": ["x"] if base else []})
    # a partition dir of a log dir without meta.properties: a null key
    parts.append({**empty_row(PARTITION_COLUMNS), "broker_id": None, "log_dir": "/d9", "topic": "u", "partition": 0,
                  "dir_kind": "live", "dir_name": "u-0"})
    segs.append({**empty_row(SEGMENT_COLUMNS), "broker_id": None, "log_dir": "/d9", "topic": "u", "partition": 0,
                 "dir_kind": "live", "dir_name": "u-0", "base_offset": 0, "log_size_bytes": 7})
    return pa.Table.from_pylist(segs, schema=SEGMENT_SCHEMA), pa.Table.from_pylist(parts, schema=PARTITION_SCHEMA)


def test_arrow_rows_are_the_dicts_of_before():
    segs, parts = _tables()
    rows = aggregate_rows(segs, parts)
    stats = rows["replica_stats"]
    before = partition_stats_rows(segs, parts)
    assert isinstance(stats, ArrowRows) and stats == before and list(stats) == before and len(stats) == 7
    assert stats[0] == before[0] and stats[-1] == before[-1] and stats[2:5] == before[2:5]
    assert stats.column("size_bytes") == [r["size_bytes"] for r in before] and stats.column("nope") == [None] * 7
    ArrowRows.BATCH_ROWS, saved = 2, ArrowRows.BATCH_ROWS  # several batches
    try:
        assert list(stats) == before
    finally:
        ArrowRows.BATCH_ROWS = saved
    # the rollups and frames are those of the dicts
    framed = frames(rows)
    assert framed["replica_stats"].equals(pa.Table.from_pylist(before, schema=AGGREGATE_SCHEMAS["replica_stats"]).to_pandas())
    assert [r["broker_id"] for r in rows["broker_stats"]] == [1, 2]
    assert _totals(stats, [], None) == _totals(before, [], None)
    assert _column(stats, "topic") == _column(before, "topic")


def test_nested_sequences_are_streamed_into_the_same_json():
    segs, parts = _tables()
    stats = aggregate_rows(segs, parts)["replica_stats"]
    plain = list(stats)
    doc = {"schema_version": 3, "findings": [{"code": "KLA001"}], "config": {"a": [1, 2], "b": {"c": []}},
           "tables": {"replica_stats": stats, "timelines": {"t-0": [{"x": 1}]}}, "empty": {}}
    out = io.StringIO()
    write_document(doc, out)
    text = out.getvalue()
    expected = dict(doc, tables={"replica_stats": plain, "timelines": {"t-0": [{"x": 1}]}})
    assert json.loads(text) == json.loads(json.dumps(expected))
    # one partition dir a line: the rows were written one by one, not as one string
    lines = text.splitlines()
    assert sum(1 for line in lines if line.startswith('{"broker_id"')) == len(plain)


def _messy_segments() -> pa.Table:
    """Segment rows in no order: ties, null keys (broker, topic, log dir), non-ASCII topic names,
    nullable integers with and without nulls, list cells shared and not, several Arrow chunks."""
    import random

    rng = random.Random(19)
    rows = []
    for i in range(400):
        rows.append({**empty_row(SEGMENT_COLUMNS),
                     "broker_id": rng.choice([1, 2, None]), "log_dir": rng.choice(["/a", "/b", None]),
                     "topic": rng.choice(["t", "T", "é-topic", "z", None]), "partition": rng.choice([0, 1, 2]),
                     "dir_kind": "live", "dir_name": "d", "base_offset": rng.choice([0, 5, 10]),
                     "log_size_bytes": rng.choice([1, None]), "record_count": i, "is_active": rng.choice([True, False, None]),
                     "notes": rng.choice([[], ["n"], None, ["n", "m"]]), "magics": rng.choice([[2], [1, 2], None]),
                     "codecs": rng.choice([["none"], []]), "stop_reason": rng.choice([None, "x"])})
    table = pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA)
    return pa.concat_tables([table.slice(0, 150), table.slice(150, 100), table.slice(250)])


def _cells(series) -> list:
    return [None if v is None else (list(v) if hasattr(v, "__len__") and not isinstance(v, str) else v) for v in series]


def test_the_frame_made_in_batch_order_is_the_sorted_frame_of_before():
    """On the plain table and on the driver's compact one (auditor.arrow_compact: sorted
    dictionaries, sorted by their indices; all-null columns on the zero buffer): the positions and
    the frame of ``sort_rows_moving`` on the plain table's frame, null strings and non-ASCII topics
    included."""
    from auditor.arrow_compact import compact_columns, is_sorted_dictionary
    from auditor.engines.local.tables import segment_frame
    from auditor.engines.local.engine import batch_order
    from checks.framework.batch import sort_rows_moving

    expected, expected_positions = sort_rows_moving(_messy_segments().to_pandas())
    compact = compact_columns(_messy_segments())
    assert is_sorted_dictionary(compact.schema.field("topic").type) and is_sorted_dictionary(compact.schema.field("log_dir").type)
    assert compact.column("crc_failures").null_count == compact.num_rows
    for table in (_messy_segments(), compact):
        positions = batch_order(table)
        frame = segment_frame(table, positions)
        assert positions.tolist() == expected_positions.tolist()
        assert list(frame.columns) == list(expected.columns) and list(frame.dtypes) == list(expected.dtypes)
        assert frame.index.equals(expected.index)
        for name in frame.columns:
            if frame[name].dtype == object:
                assert json.dumps(_cells(frame[name]), default=str) == json.dumps(_cells(expected[name]), default=str), name
                assert not any(isinstance(v, float) for v in frame[name]), name  # a null string is None, not NaN
            else:
                assert frame[name].equals(expected[name]), name
    unsorted = segment_frame(_messy_segments())  # no order: the table's own
    assert unsorted["record_count"].tolist() == list(range(400))


def test_the_compact_table_has_the_same_values_and_aggregates():
    """auditor.arrow_compact.compact_columns: each column's values unchanged (a dictionary decodes
    to the plain strings), smaller, and the aggregates (group-bys and join on dictionary keys) those
    of the plain table."""
    from auditor.arrow_compact import compact_columns, decoded

    plain = _messy_segments()
    compact = compact_columns(plain)
    for name in plain.column_names:
        assert decoded(compact.column(name)).to_pylist() == plain.column(name).to_pylist(), name
    assert compact.nbytes < plain.nbytes
    _, parts = _tables()
    segs = pa.Table.from_pylist(plain.to_pylist() + _tables()[0].to_pylist(), schema=SEGMENT_SCHEMA)
    assert aggregate_rows(compact_columns(segs), parts)["replica_stats"] == partition_stats_rows(segs, parts)
    assert aggregate_rows(compact_columns(segs), parts)["topic_stats"] == aggregate_rows(segs, parts)["topic_stats"]


def test_many_check_copies_are_not_kept_from_one_check_to_the_next():
    """PartitionBatch.column: a float64 column is the frame's own array; copies of other columns
    are dropped by forget_columns (the runner's call after each check) and made again, equal."""
    import numpy as np

    from auditor.check_runner import as_frame
    from checks.framework.batch import PartitionBatch

    batch = PartitionBatch(_messy_segments().to_pandas(), as_frame([], PARTITION_SCHEMA))
    assert batch.segments["log_size_bytes"].dtype == np.float64 and batch.segments["record_count"].dtype == np.int64
    assert np.shares_memory(batch.column("log_size_bytes"), batch.segments["log_size_bytes"].to_numpy())
    counts = batch.column("record_count")
    assert counts.dtype == np.float64 and counts.tolist() == batch.segments["record_count"].astype(float).tolist()
    batch.forget_columns()
    assert not any(k.startswith("col:") for k in batch._cache)
    assert batch.column("record_count").tolist() == counts.tolist()


def test_partition_chunks_cover_every_row_and_never_split_a_partition():
    import numpy as np

    from checks.mtime.reset import _partition_chunks

    groups = np.repeat(np.arange(40), np.random.default_rng(3).integers(1, 9, 40))
    for size in (1, 3, 10, 50, len(groups), 10_000):
        chunks = _partition_chunks(groups, size)
        assert np.concatenate([np.arange(len(groups))[c] for c in chunks]).tolist() == list(range(len(groups)))
        for a, b in zip(chunks, chunks[1:]):
            assert groups[a][-1] != groups[b][0]  # a partition's rows in one chunk
    assert _partition_chunks(groups[::-1], 3) == [slice(0, len(groups))]  # not in partition order: one chunk


def test_mtime_reset_prefilter_in_chunks_picks_the_same_partitions(monkeypatch):
    from auditor.check_runner import as_frame
    from checks import REGISTRY
    from checks.mtime import reset
    from checks.framework.batch import PartitionBatch
    from harness.synthetic_tables import synthetic_tables

    for seed in (1, 2):
        seg, part, ctx = synthetic_tables(seed)
        batch = PartitionBatch(as_frame(seg, SEGMENT_SCHEMA), as_frame(part, PARTITION_SCHEMA))
        check = REGISTRY["mtime.reset"]()
        whole = check.prefilter(batch, ctx)
        monkeypatch.setattr(reset, "PAIR_CHUNK_POINTS", 7)
        assert len(reset._partition_chunks(batch.seg_group, 7)) > 10
        assert check.prefilter(batch, ctx) == whole and whole
        monkeypatch.undo()


def test_a_command_puts_arrow_on_the_c_allocator_before_pyarrow_is_imported():
    """auditor.cli.main: Arrow's C++ default pool (Acero's: the aggregates' group-bys and join) is
    the C library's in a command's process, unless the user chose one; a process that imported
    pyarrow already is left as it is (the pool is fixed at import)."""
    import os
    import subprocess
    import sys

    code = ("import sys; from auditor.cli import arrow_on_the_c_allocator; arrow_on_the_c_allocator(); "
            "import pyarrow as pa; print(pa.default_memory_pool().backend_name)")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "system"
    chosen = subprocess.run([sys.executable, "-c", code], env={**env, "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"},
                            capture_output=True, text=True, check=True).stdout
    assert chosen.strip() == "jemalloc"
    late = subprocess.run([sys.executable, "-c", "import pyarrow, os; " + code.replace("import sys; ", "")
                           + "; print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'))"],
                          env=env, capture_output=True, text=True, check=True).stdout.split()
    assert late[1] == "None"  # pyarrow came first: nothing set


def test_replica_ids_are_the_group_by_of_before():
    """PartitionBatch.replica_ids counted as runs of the sorted rows: the ids of
    ``groupby(topic, partition, broker_id, log_dir, sort=False, dropna=False).ngroup()``, null
    topics, brokers and log dirs (None and NaN) included."""
    import numpy as np

    from auditor.check_runner import as_frame
    from checks.framework.batch import PartitionBatch

    frame = _messy_segments().to_pandas()
    frame.loc[frame.index % 7 == 0, "log_dir"] = np.nan  # NaN and None both null, as pandas may give
    batch = PartitionBatch(frame, as_frame([], PARTITION_SCHEMA))
    expected = batch.segments.groupby(["topic", "partition", "broker_id", "log_dir"], sort=False, dropna=False).ngroup()
    assert batch.replica_ids().tolist() == expected.tolist()
    assert len(set(batch.replica_ids().tolist())) > 20
