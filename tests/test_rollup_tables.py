"""The topic, broker and log-dir rollups on Arrow columns (``auditor.engines.local.tables.rollup_tables``, what both
engines now use: no dict per partition dir on the driver) equal the dict reference
(``auditor.engines.local.tables.rollup_rows``) row for row, on random per-partition-dir tables with null keys,
null sizes, unknown message counts, one-replica and even-count topics (the median's two middles);
and so do the rollups of the same tables compacted (``auditor.arrow_compact``: the Spark driver's
per-dir table, its strings as sorted dictionaries). tests/test_local_engine.py holds the same
tables equal to Spark SQL's aggregates."""

from __future__ import annotations

import math
import random

import pyarrow as pa
import pytest

from auditor.arrow_compact import compact_columns
from auditor.engines.local.tables import AGGREGATE_SCHEMAS, ROLLUP_COLUMNS, rollup_rows, rollup_tables

pytestmark = pytest.mark.unit

SCHEMA = pa.schema([AGGREGATE_SCHEMAS["replica_stats"].field(name) for name in ROLLUP_COLUMNS])


def _maybe(rng: random.Random, value, null_share: float):
    return None if rng.random() < null_share else value


def _per_dir(seed: int, rows: int, null_share: float) -> pa.Table:
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        old = rng.randrange(1_700_000_000_000, 1_700_000_100_000)
        out.append({
            "broker_id": _maybe(rng, rng.randrange(1, 5), null_share),
            "log_dir": _maybe(rng, f"/data/d{rng.randrange(3)}", null_share),
            "topic": _maybe(rng, rng.choice(["a", "b", "c", "é", "__consumer_offsets"]), null_share),
            "partition": _maybe(rng, rng.randrange(6), null_share),
            "dir_kind": _maybe(rng, rng.choice(["live", "live", "live", "future", "stray"]), null_share),
            "segment_count": _maybe(rng, rng.randrange(50), null_share),
            "size_bytes": _maybe(rng, rng.randrange(1 << 40), null_share),
            "message_count": _maybe(rng, rng.randrange(1 << 30), null_share),
            "oldest_record_timestamp_ms": _maybe(rng, old - rng.randrange(10_000), null_share),
            "newest_record_timestamp_ms": _maybe(rng, old + rng.randrange(10_000), null_share),
            "oldest_log_mtime_ms": _maybe(rng, old, null_share),
            "newest_log_mtime_ms": _maybe(rng, old + rng.randrange(10_000), null_share),
            "notes": _maybe(rng, rng.randrange(3), null_share),
        })
    return pa.Table.from_pylist(out, schema=SCHEMA)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b and type(a) is type(b)


def _compacted(table: pa.Table) -> pa.Table:
    """The table as the Spark driver keeps it; its string columns are dictionaries from 40 rows on."""
    compacted = compact_columns(table)
    if table.num_rows >= 40:
        assert all(pa.types.is_dictionary(compacted.schema.field(c).type) for c in ("log_dir", "topic", "dir_kind"))
    return compacted


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compacted"])
@pytest.mark.parametrize("seed,rows,null_share", [(1, 0, 0.0), (2, 1, 0.0), (3, 40, 0.0), (4, 400, 0.05),
                                                  (5, 2000, 0.2), (6, 300, 0.6)])
def test_arrow_rollups_equal_the_dict_reference(seed, rows, null_share, compact):
    table = _per_dir(seed, rows, null_share)
    expected = rollup_rows(table.to_pylist())
    got = {name: t.to_pylist() for name, t in rollup_tables(_compacted(table) if compact else table).items()}
    assert list(got) == list(expected)
    for name, rows_expected in expected.items():
        assert len(got[name]) == len(rows_expected), name
        for want, have in zip(rows_expected, got[name]):
            assert list(have) == list(AGGREGATE_SCHEMAS[name].names)
            assert all(_same(want[k], have[k]) for k in want), (name, want, have)


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compacted"])
def test_rollups_schema_types(compact):
    table = _per_dir(7, 50, 0.1)
    tables = rollup_tables(_compacted(table) if compact else table)
    for name, table in tables.items():
        assert table.schema.equals(AGGREGATE_SCHEMAS[name]), name


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compacted"])
@pytest.mark.parametrize("seed,rows,null_share", [(11, 0, 0.0), (12, 300, 0.0), (13, 1000, 0.3)])
def test_document_totals_on_arrow_equal_the_python_sets(seed, rows, null_share, compact):
    """``reports.document._totals`` counts columnar rows (ArrowRows) on Arrow: the same numbers, in
    the same key order, as from the rows one by one (a null topic, partition or broker a value)."""
    from auditor.engines.local.tables import ArrowRows
    from reports.document import _totals

    table = _per_dir(seed, rows, null_share)
    rows = ArrowRows(_compacted(table) if compact else table)
    columnar, plain = _totals(rows, [{}], None), _totals(table.to_pylist(), [{}], None)
    assert list(columnar.items()) == list(plain.items())
    assert list(rows) == table.to_pylist()  # the report's rows: the same dicts, plain strings
    assert rows[1:7] == table.to_pylist()[1:7] and rows.column("topic") == table.column("topic").to_pylist()
    assert all(type(v) is str for r in rows for v in (r["topic"], r["log_dir"]) if v is not None)


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compacted"])
def test_distinct_topics_on_arrow_equal_the_python_set(compact):
    from auditor.engines.local.tables import ArrowRows
    from reports.document import _distinct

    table = _per_dir(21, 500, 0.2)
    assert _distinct(ArrowRows(_compacted(table) if compact else table), "topic") == {r["topic"] for r in table.to_pylist()}
    assert _distinct(table.to_pylist(), "topic") == {r["topic"] for r in table.to_pylist()}
