"""``arrow_compact.concat_compacted``: a table collected in slices and compacted slice by slice (the
Spark driver's per-partition-dir statistics, ``auditor.engines.spark.engine``) holds what compacting the
plain concatenation holds: the same values row for row, each repeated string column one sorted
dictionary over all the slices, all-null columns still on the zero buffer, and a column that came
plain in some slices and as a dictionary in others decoded and encoded again as a whole."""

from __future__ import annotations

import random

import pandas as pd
import pyarrow as pa
import pytest

from auditor.arrow_compact import compact_columns, concat_compacted, is_sorted_dictionary, pandas_values

pytestmark = pytest.mark.unit

SCHEMA = pa.schema([("topic", pa.string()), ("log_dir", pa.string()), ("dir_name", pa.string()),
                    ("topic_id", pa.string()), ("partition", pa.int32()), ("size_bytes", pa.int64()),
                    ("empty", pa.int64())])


def _slice(rng: random.Random, rows: int, null_share: float) -> pa.Table:
    def maybe(value):
        return None if rng.random() < null_share else value

    return pa.table({
        "topic": [maybe(rng.choice(["orders", "é-topic", "__consumer_offsets", "a", ""])) for _ in range(rows)],
        "log_dir": [maybe(f"/data/d{rng.randrange(3)}") for _ in range(rows)],
        "dir_name": [maybe(f"t{rng.randrange(10**9)}-{i}") for i in range(rows)],  # distinct: stays plain
        "topic_id": [None] * rows,
        "partition": [maybe(rng.randrange(50)) for _ in range(rows)],
        "size_bytes": [maybe(rng.randrange(1 << 40)) for _ in range(rows)],
        "empty": [None] * rows,
    }, schema=SCHEMA)


@pytest.mark.parametrize("seed,sizes,null_share", [(1, [300], 0.1), (2, [200, 150, 400], 0.0),
                                                   (3, [500, 1, 0, 250], 0.2), (4, [120, 90], 0.9)])
def test_slices_compacted_then_concatenated_equal_the_whole_compacted(seed, sizes, null_share):
    rng = random.Random(seed)
    slices = [_slice(rng, n, null_share) for n in sizes]
    whole = pa.concat_tables(slices)
    got, want = concat_compacted([compact_columns(s) for s in slices]), compact_columns(whole)
    assert got.num_rows == whole.num_rows and got.column_names == whole.column_names
    assert got.to_pylist() == whole.to_pylist()  # the values, row for row, plain strings
    for name in whole.column_names:
        have, ref = got.column(name), want.column(name)
        # what the checks' frames get: the same dtype and values (NaN for a null number, None for a null string)
        assert pd.Series(pandas_values(have)).equals(pd.Series(pandas_values(ref))), name
        if is_sorted_dictionary(ref.type) and is_sorted_dictionary(have.type):
            dictionaries = {tuple(c.dictionary.to_pylist()) for c in have.chunks}
            assert dictionaries == {tuple(ref.chunks[0].dictionary.to_pylist())}, name  # one, sorted
    if whole.num_rows >= 40:
        assert is_sorted_dictionary(got.schema.field("topic").type)
        assert not pa.types.is_dictionary(got.schema.field("dir_name").type)


def test_a_column_plain_in_one_slice_and_a_dictionary_in_another_is_encoded_as_a_whole():
    repeated = pa.table({"topic": ["a", "b"] * 100}, schema=pa.schema([("topic", pa.string())]))
    distinct = pa.table({"topic": ["x"]}, schema=pa.schema([("topic", pa.string())]))  # 1 row: stays plain
    parts = [compact_columns(repeated), compact_columns(distinct)]
    assert pa.types.is_dictionary(parts[0].schema.field("topic").type)
    assert not pa.types.is_dictionary(parts[1].schema.field("topic").type)
    got = concat_compacted(parts)
    assert got.column("topic").to_pylist() == ["a", "b"] * 100 + ["x"]
    assert is_sorted_dictionary(got.schema.field("topic").type)


def test_all_null_columns_keep_their_zero_buffer():
    rng = random.Random(5)
    slices = [compact_columns(_slice(rng, n, 0.0)) for n in (100, 80)]
    got = concat_compacted(slices)
    for name in ("topic_id", "empty"):
        assert got.column(name).null_count == got.num_rows
        # no new buffer: each chunk's data is one of the slices' (mmap'd zero pages, not allocated)
        assert all(chunk.buffers()[0].address in {s.column(name).chunks[0].buffers()[0].address for s in slices}
                   for chunk in got.column(name).chunks), name
