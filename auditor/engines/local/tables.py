"""The local engine for small audits: the Spark engine's aggregate tables, on the driver.

On a 2-core machine Spark local mode cost more than it saved at every measured size up to
100,000 segment rows (a session start of 10-20 s and ~60 s of fixed cost in all, then about the
driver's cost per row; see benchmarks/engines.py). A small audit therefore scans in-process
(:mod:`auditor.scan`), and builds here the same four tables :func:`auditor.engines.spark.aggregates`
builds on Spark, as the pandas DataFrames Spark's Arrow
``toPandas()`` would hand back (same columns in the same order, same types: ``int`` columns
int32, ``bigint`` int64 or float64 where a value is null, the median a double). The checks
and the Great Expectations suite then run on pandas with the same findings as on Spark
(``tests/test_local_engine.py`` compares both engines on the same inputs).

Definitions are those of the Spark aggregates, including two quirks of its joins kept on
purpose so that both engines agree: a partition dir whose ``broker_id`` is unknown (a log dir
without ``meta.properties``) gets no segment aggregates (a null join key matches nothing), and
``broker_stats`` has no row for an unknown broker. Rows are sorted by their keys.

Memory: the per-partition-dir statistics are computed on Arrow columns (no Python object per
segment row); the rollups over them are plain dicts (one per partition dir). The checks' pandas
frame is made by :func:`segment_frame`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from auditor.arrow_compact import decoded, pandas_values
from auditor.schema import PARTITION_DIR_KEYS, PARTITION_SCHEMA, SEGMENT_SCHEMA

LOCAL_MAX_SEGMENT_ROWS = 100_000
"""Up to this many segment rows (from the listing) an audit without ``--master`` runs on the
driver; above it, on Spark. Measured (benchmarks/engines.py, README there) on 2 cores: the driver
was faster at every size up to 100,000 rows (6 s vs 69 s at 1,000; 96 s vs 154 s at 100,000) and
both grow by ~0.9 ms a row, so Spark does not catch up on this machine; the limit is the driver's
memory (peak RSS ~1 GiB at 100,000 rows), and above it Spark's memory and executors are the way."""

_I32, _I64, _STR, _F64 = pa.int32(), pa.int64(), pa.string(), pa.float64()
_ROLLUP = [("replicas", _I64), ("segment_count", _I64), ("size_bytes", _I64), ("message_count", _I64),
           ("oldest_record_timestamp_ms", _I64), ("newest_record_timestamp_ms", _I64),
           ("oldest_log_mtime_ms", _I64), ("newest_log_mtime_ms", _I64), ("notes", _I64), ("mtime_spread_ms", _I64)]

AGGREGATE_SCHEMAS = {
    "replica_stats": pa.schema([
        ("broker_id", _I32), ("log_dir", _STR), ("topic", _STR), ("partition", _I32), ("dir_kind", _STR),
        ("dir_name", _STR), ("cluster_id", _STR), ("topic_id", _STR), ("segment_count", _I64),
        ("size_bytes", _I64), ("log_start_offset", _I64), ("log_end_offset", _I64), ("high_watermark", _I64),
        ("oldest_log_mtime_ms", _I64), ("newest_log_mtime_ms", _I64), ("other_segment_files", _I64),
        ("index_bytes", _I64), ("message_count", _I64), ("oldest_record_timestamp_ms", _I64),
        ("newest_record_timestamp_ms", _I64), ("first_offset", _I64), ("last_offset", _I64),
        ("mtime_spread_ms", _I64), ("notes", _I64)]),
    "topic_stats": pa.schema([
        ("topic", _STR), *_ROLLUP, ("partitions", _I64), ("min_replicas", _I64), ("max_replicas", _I64),
        ("max_partition_size_bytes", _I64), ("median_partition_size_bytes", _F64),
        ("partition_message_count", _I64), ("brokers", _I64)]),
    "broker_stats": pa.schema([("broker_id", _I32), ("partition_dirs", _I64), *_ROLLUP, ("log_dirs", _I64)]),
    "log_dir_stats": pa.schema([("broker_id", _I32), ("log_dir", _STR), ("partition_dirs", _I64), *_ROLLUP]),
}
"""The Spark aggregates' output schemas (``DataFrame.schema`` of each table), as Arrow."""


def _exact_sum(values: Iterable) -> int | None:
    """A sum that is None as soon as one input is unknown (Spark's ``_exact_sum``)."""
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _min(values: Iterable) -> int | None:
    return min((v for v in values if v is not None), default=None)


def _max(values: Iterable) -> int | None:
    return max((v for v in values if v is not None), default=None)


def _key(row: dict, names: Sequence[str]) -> tuple:
    return tuple(row[k] for k in names)


def _sort_key(key: tuple) -> tuple:
    return tuple((v is not None, v) if v is not None else (False, 0) for v in key)


def partition_stats_table(segments: pa.Table, partitions: pa.Table) -> pa.Table:
    """One row per partition dir (``AGGREGATE_SCHEMAS["replica_stats"]``): the partition row
    joined with its segments' aggregates, computed on Arrow columns (no Python object per row)."""
    seg, part = _as_table(segments, SEGMENT_SCHEMA), _as_table(partitions, PARTITION_SCHEMA)
    keys = list(PARTITION_DIR_KEYS)
    # Spark's left join on these keys: a null key matches no segment group
    keyed = _all_valid(seg, keys)
    live = pc.and_(pc.is_null(seg["file_state"]), pc.is_valid(seg["log_size_bytes"]))
    zero = pa.scalar(0, pa.int64())
    index_bytes = pc.add(pc.add(pc.fill_null(seg["index_size_bytes"], zero), pc.fill_null(seg["timeindex_size_bytes"], zero)),
                         pc.fill_null(seg["txnindex_size_bytes"], zero))
    folded = pa.table({
        **{k: seg[k] for k in keys},
        "_rows": pa.array(np.ones(seg.num_rows, dtype=np.int64)),
        "_live": pc.cast(live, pa.int64()),
        "_index": pc.if_else(live, index_bytes, zero),
        "_records": pc.if_else(live, pc.fill_null(seg["record_count"], zero), zero),
        "_records_unknown": pc.cast(pc.and_(live, pc.is_null(seg["record_count"])), pa.int64()),
        "_oldest": pc.coalesce(seg["min_timestamp_ms"], seg["min_batch_timestamp_ms"]),
        "_newest": seg["max_timestamp_ms"], "_first": seg["first_offset"], "_last": seg["last_offset"],
        "_notes": pc.fill_null(pc.list_value_length(seg["notes"]), 0).cast(pa.int64()),
    })
    if keyed.null_count or not pc.all(keyed).as_py():  # a copy of every column only when a row has a null key
        folded = folded.filter(keyed)
    by_dir = folded.group_by(keys, use_threads=False).aggregate([
        ("_rows", "sum"), ("_live", "sum"), ("_index", "sum"), ("_records", "sum"), ("_records_unknown", "sum"),
        ("_oldest", "min"), ("_newest", "max"), ("_first", "min"), ("_last", "max"), ("_notes", "sum")])
    # a dictionary-encoded key (the driver's table, auditor.arrow_compact) joins as the plain strings
    by_dir = pa.table({name: decoded(by_dir[name]) if name in keys else by_dir[name] for name in by_dir.column_names})
    order = pa.array(np.arange(part.num_rows, dtype=np.int64))
    left = part.select(keys + ["cluster_id", "topic_id", "segment_count", "size_bytes", "log_start_offset",
                               "log_end_offset", "high_watermark", "oldest_log_mtime_ms", "newest_log_mtime_ms"])
    left = left.append_column("_order", order).append_column(
        "_part_notes", pc.fill_null(pc.list_value_length(part["notes"]), 0).cast(pa.int64()))
    joined = left.join(by_dir, keys, join_type="left outer", use_threads=False)
    # rows sorted by their keys, nulls first, ties in the partitions' order (the join's is arbitrary)
    joined = joined.take(pc.sort_indices(joined, [(k, "ascending", "at_start") for k in keys]
                                         + [("_order", "ascending", "at_start")]))
    has_segs = pc.is_valid(joined["_rows_sum"])
    records = pc.if_else(pc.greater(pc.fill_null(joined["_records_unknown_sum"], zero), zero),
                         pa.scalar(None, pa.int64()), pc.fill_null(joined["_records_sum"], zero))
    columns = {
        **{name: joined[name] for name in AGGREGATE_SCHEMAS["replica_stats"].names[:15]},
        "other_segment_files": pc.fill_null(pc.subtract(joined["_rows_sum"], joined["_live_sum"]), zero),
        "index_bytes": pc.fill_null(joined["_index_sum"], zero),
        "message_count": pc.if_else(has_segs, records, zero),
        "oldest_record_timestamp_ms": joined["_oldest_min"], "newest_record_timestamp_ms": joined["_newest_max"],
        "first_offset": joined["_first_min"], "last_offset": joined["_last_max"],
        "mtime_spread_ms": pc.subtract(joined["newest_log_mtime_ms"], joined["oldest_log_mtime_ms"]),
        "notes": pc.add(joined["_part_notes"], pc.fill_null(joined["_notes_sum"], zero)),
    }
    schema = AGGREGATE_SCHEMAS["replica_stats"]
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in schema], schema=schema)


def _as_table(rows, schema: pa.Schema) -> pa.Table:
    """Rows as an Arrow table of ``schema`` (a table as it is, cast; dicts converted once). A string
    column as a dictionary of strings (``auditor.arrow_compact``) is kept as it is."""
    if isinstance(rows, pa.Table):
        if rows.schema.equals(schema) or rows.schema.names == schema.names and all(
                have.equals(want) or pa.types.is_dictionary(have) and have.value_type.equals(want)
                for have, want in zip(rows.schema.types, schema.types)):
            return rows
        return rows.select(schema.names).cast(schema)
    from auditor.schema import to_table

    return to_table(list(rows), schema)


def _all_valid(table: pa.Table, names: Sequence[str]) -> pa.ChunkedArray:
    mask = pc.is_valid(table[names[0]])
    for name in names[1:]:
        mask = pc.and_(mask, pc.is_valid(table[name]))
    return mask


def partition_stats_rows(segments, partitions) -> list[dict]:
    """:func:`partition_stats_table` as a list of dicts (one per partition dir: few next to the segments)."""
    return partition_stats_table(segments, partitions).to_pylist()


class ArrowRows(Sequence):
    """The rows of an Arrow table as dicts (``Table.to_pylist()``'s), made a batch at a time as they
    are read and not kept: a sequence of 100,000 partition dirs' statistics costs their Arrow columns
    (~200 bytes a row), not 100,000 dicts of Python objects (~2 KiB a row). Read it again and the
    dicts are made again; equal to a list of the same dicts."""

    BATCH_ROWS = 4096

    def __init__(self, table: pa.Table):
        self.table = table

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1:
                return _plain(self.table.slice(start, max(0, stop - start))).to_pylist()
            return [self[j] for j in range(start, stop, step)]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.table.slice(i, 1).to_pylist()[0]

    def __iter__(self) -> Iterator[dict]:
        for batch in self.table.to_batches(max_chunksize=self.BATCH_ROWS):
            yield from _plain(batch).to_pylist()

    def column(self, name: str) -> list:
        """One column's values (a list of Python values; None for every row when there is no such column)."""
        if name not in self.table.column_names:
            return [None] * len(self)
        return decoded(self.table[name]).to_pylist()

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self) -> str:
        return f"ArrowRows({self.table.num_rows} rows: {', '.join(self.table.column_names)})"


def _plain(rows: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """A batch with its dictionary columns (``auditor.arrow_compact``) decoded: ``to_pylist`` makes
    a Python scalar per dictionary cell (~3x the time of plain strings: +3.4 s of CPU in the report
    of 100,000 dirs, benchmarks/fleet_spark.py); decoded a batch at a time, it costs a batch."""
    if not any(pa.types.is_dictionary(t) for t in rows.schema.types):
        return rows
    columns = [decoded(c) if pa.types.is_dictionary(c.type) else c for c in rows.columns]
    names = rows.schema.names
    return pa.RecordBatch.from_arrays(columns, names=names) if isinstance(rows, pa.RecordBatch) \
        else pa.Table.from_arrays(columns, names=names)


ROLLUP_COLUMNS = ("broker_id", "log_dir", "topic", "partition", "dir_kind", "segment_count", "size_bytes",
                 "message_count", "oldest_record_timestamp_ms", "newest_record_timestamp_ms",
                 "oldest_log_mtime_ms", "newest_log_mtime_ms", "notes")
"""The replica_stats columns the rollups (topic, broker, log dir) read."""


def _rollup(rows: list[dict]) -> dict:
    old, new = _min(r["oldest_log_mtime_ms"] for r in rows), _max(r["newest_log_mtime_ms"] for r in rows)
    return {
        "replicas": sum(1 for r in rows if r["dir_kind"] == "live"),
        "segment_count": _sql_sum(r["segment_count"] for r in rows),
        "size_bytes": _sql_sum(r["size_bytes"] for r in rows),
        "message_count": _exact_sum(r["message_count"] for r in rows),
        "oldest_record_timestamp_ms": _min(r["oldest_record_timestamp_ms"] for r in rows),
        "newest_record_timestamp_ms": _max(r["newest_record_timestamp_ms"] for r in rows),
        "oldest_log_mtime_ms": old,
        "newest_log_mtime_ms": new,
        "notes": _sql_sum(r["notes"] for r in rows),
        "mtime_spread_ms": new - old if old is not None and new is not None else None,
    }


def _sql_sum(values: Iterable) -> int | None:
    """SQL ``sum``: nulls skipped, None when every value is null."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _group(rows: Iterable[dict], names: Sequence[str]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(_key(r, names), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: _sort_key(kv[0])))


def _topic_rows(per_dir: list[dict]) -> list[dict]:
    out = []
    for (topic,), rows in _group((r for r in per_dir if r["dir_kind"] == "live"), ("topic",)).items():
        replicas = _group(rows, ("partition",))
        sizes = [_max(r["size_bytes"] for r in reps) for reps in replicas.values()]
        counts = [_max(r["message_count"] for r in reps) for reps in replicas.values()]
        unknown = any(r["message_count"] is None for r in rows)
        known_sizes = [s for s in sizes if s is not None]
        out.append({
            "topic": topic, **_rollup(rows),
            "partitions": len(replicas),
            "min_replicas": min(len(reps) for reps in replicas.values()),
            "max_replicas": max(len(reps) for reps in replicas.values()),
            "max_partition_size_bytes": _max(sizes),
            "median_partition_size_bytes": float(statistics.median(known_sizes)) if known_sizes else None,
            "partition_message_count": None if unknown else _sql_sum(counts),
            "brokers": len({r["broker_id"] for r in rows if r["broker_id"] is not None}),
        })
    return out


def aggregate_rows(segments, partitions) -> dict[str, Sequence[dict]]:
    """The four aggregate tables as sequences of dicts (see the module doc for the definitions);
    ``replica_stats`` (one row per partition dir) as :class:`ArrowRows`, the rollups as lists
    (a few rows per topic, broker and log dir), computed on Arrow columns (:func:`rollup_tables`)."""
    table = partition_stats_table(segments, partitions)
    return {"replica_stats": ArrowRows(table),
            **{name: rollup.to_pylist() for name, rollup in rollup_tables(table).items()}}


def rollup_tables(per_dir: pa.Table) -> dict[str, pa.Table]:
    """:func:`rollup_rows` on Arrow columns: the topic, broker and log-dir tables
    (``AGGREGATE_SCHEMAS``) from the per-partition-dir table (of at least :data:`ROLLUP_COLUMNS`),
    with group-bys and no Python object per partition dir (500,000 dirs' dicts held ~1 GiB on the
    Spark driver at 10,000,000 segment rows). Same rows, values and order as :func:`rollup_rows`
    (its unit test holds them equal): a null key is a group of its own, sorted first. String
    columns may be dictionaries (``auditor.arrow_compact``): grouped and filtered as their 4-byte
    indices, decoded per group."""
    t = per_dir.select(list(ROLLUP_COLUMNS))
    t = t.append_column("_one", pa.array(np.ones(t.num_rows, dtype=np.int64))).append_column(
        "_live", pc.cast(pc.fill_null(pc.equal(t["dir_kind"], "live"), False), _I64)).append_column(
        "_unknown", pc.cast(pc.is_null(t["message_count"]), _I64))
    brokers = _rollup_table(t, ["broker_id"], [("log_dir", "count_distinct", "log_dirs")])
    brokers = brokers.filter(pc.is_valid(brokers["broker_id"]))
    log_dirs = _rollup_table(t, ["broker_id", "log_dir"])
    # the topic rows count live dirs only: grouped by dir kind too and the live groups kept (a
    # filtered copy of the live rows' 16 columns was ~50 MiB at 500,000 dirs, benchmarks/fleet_spark.py)
    topics = _live_groups(_rollup_table(t, ["dir_kind", "topic"], [("broker_id", "count_distinct", "brokers")]))
    # per topic-partition first (replicas agree on data, not on bytes): the largest replica counts
    tp = _sorted(_live_groups(t.group_by(["dir_kind", "topic", "partition"], use_threads=False).aggregate([
        ("_one", "sum"), ("size_bytes", "max"), ("message_count", "max"), ("_unknown", "sum")])), ["topic", "partition"])
    per_topic = _sorted(tp.group_by(["topic"], use_threads=False).aggregate([
        ([], "count_all"), ("_one_sum", "min"), ("_one_sum", "max"), ("size_bytes_max", "max"),
        ("message_count_max", "sum"), ("_unknown_sum", "sum")]), ["topic"])
    unknown = pc.greater(per_topic["_unknown_sum_sum"], 0)
    topic_columns = {
        **{name: topics[name] for name in topics.column_names},
        "partitions": per_topic["count_all"],
        "min_replicas": per_topic["_one_sum_min"], "max_replicas": per_topic["_one_sum_max"],
        "max_partition_size_bytes": per_topic["size_bytes_max_max"],
        "median_partition_size_bytes": _medians(tp, per_topic.num_rows),
        "partition_message_count": pc.if_else(unknown, pa.scalar(None, _I64), per_topic["message_count_max_sum"]),
    }
    out = {"topic_stats": topic_columns, "broker_stats": {n: brokers[n] for n in brokers.column_names},
           "log_dir_stats": {n: log_dirs[n] for n in log_dirs.column_names}}
    return {name: pa.Table.from_arrays([pa.chunked_array(columns[f.name]).cast(f.type) for f in AGGREGATE_SCHEMAS[name]],
                                       schema=AGGREGATE_SCHEMAS[name])
            for name, columns in out.items()}


def _live_groups(groups: pa.Table) -> pa.Table:
    """The groups of live dirs of a group-by whose first key is ``dir_kind``, without that key."""
    return groups.filter(pc.equal(groups["dir_kind"], "live")).drop_columns(["dir_kind"])


def _sorted(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Rows by their keys, nulls first (``_group``'s order). A key that is a dictionary of strings
    (the Spark driver's compacted per-dir table, ``auditor.arrow_compact``) is decoded first: Arrow
    sorts no dictionary column, and a group-by's result has a row per group, not per partition dir."""
    for k in keys:
        if pa.types.is_dictionary(table.schema.field(k).type):
            table = table.set_column(table.schema.get_field_index(k), k, decoded(table[k]))
    return table.take(pc.sort_indices(table, [(k, "ascending", "at_start") for k in keys]))


def _rollup_table(t: pa.Table, keys: list[str], extra: Sequence[tuple[str, str, str]] = ()) -> pa.Table:
    """:func:`_rollup` per group of ``keys`` (plus ``partition_dirs``, and ``extra`` (column,
    aggregate, name) ones), sorted by the keys."""
    g = _sorted(t.group_by(keys, use_threads=False).aggregate([
        ("_one", "sum"), ("_live", "sum"), ("segment_count", "sum"), ("size_bytes", "sum"), ("message_count", "sum"),
        ("_unknown", "sum"), ("oldest_record_timestamp_ms", "min"), ("newest_record_timestamp_ms", "max"),
        ("oldest_log_mtime_ms", "min"), ("newest_log_mtime_ms", "max"), ("notes", "sum"),
        *[(column, how) for column, how, _ in extra]]), keys)
    columns = {**{k: g[k] for k in keys}, "partition_dirs": g["_one_sum"], "replicas": g["_live_sum"],
               "segment_count": g["segment_count_sum"], "size_bytes": g["size_bytes_sum"],
               # SQL sum (Arrow's: nulls skipped, null when all are) except message_count: null when one is
               "message_count": pc.if_else(pc.greater(g["_unknown_sum"], 0), pa.scalar(None, _I64), g["message_count_sum"]),
               "oldest_record_timestamp_ms": g["oldest_record_timestamp_ms_min"],
               "newest_record_timestamp_ms": g["newest_record_timestamp_ms_max"],
               "oldest_log_mtime_ms": g["oldest_log_mtime_ms_min"], "newest_log_mtime_ms": g["newest_log_mtime_ms_max"],
               "notes": g["notes_sum"],
               "mtime_spread_ms": pc.subtract(g["newest_log_mtime_ms_max"], g["oldest_log_mtime_ms_min"]),
               **{name: g[f"{column}_{how}"] for column, how, name in extra}}
    return pa.table(columns)


def _medians(tp: pa.Table, topics: int) -> pa.Array:
    """Per topic (``tp`` sorted by topic, nulls first; ``topics`` groups), the median of its
    partitions' known sizes as a double (``statistics.median``: the mean of the middle two of an even
    count), null for a topic without one."""
    codes = _run_codes(tp["topic"])
    sizes = tp["size_bytes_max"]
    known = pc.is_valid(sizes).to_numpy(zero_copy_only=False)
    codes, values = codes[known], pc.drop_null(sizes).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.lexsort((values, codes))
    codes, values = codes[order], values[order]
    out = np.full(topics, np.nan)
    valid = np.zeros(topics, dtype=bool)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.array([], dtype=np.int64)
    ends = np.r_[starts[1:], len(codes)]
    for code, start, end in zip(codes[starts], starts, ends):
        n = end - start
        low, high = values[start + (n - 1) // 2], values[start + n // 2]
        out[code] = (int(low) + int(high)) / 2  # exact as statistics.median's (Python ints)
        valid[code] = True
    return pa.array(out, _F64, mask=~valid)


def _run_codes(column: pa.ChunkedArray) -> np.ndarray:
    """The group number of each row of a column sorted by value (nulls first): 0, 0, 1, 2, 2, ..."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    same_value = pc.fill_null(pc.equal(values[1:], values[:-1]), False).to_numpy(zero_copy_only=False)
    both_null = pc.and_(pc.is_null(values[1:]), pc.is_null(values[:-1])).to_numpy(zero_copy_only=False)
    return np.r_[0, np.cumsum(~(same_value | both_null))].astype(np.int64)


def rollup_rows(per_dir: list[dict]) -> dict[str, list[dict]]:
    """The topic, broker and log-dir tables from the per-partition-dir rows (of at least
    :data:`ROLLUP_COLUMNS`): the Spark engine collects those rows and rolls them up here too, one
    row per partition dir, in fewer Spark jobs."""
    brokers = [{"broker_id": b, "partition_dirs": len(rows), **_rollup(rows),
                "log_dirs": len({r["log_dir"] for r in rows if r["log_dir"] is not None})}
               for (b,), rows in _group(per_dir, ("broker_id",)).items() if b is not None]
    log_dirs = [{"broker_id": b, "log_dir": d, "partition_dirs": len(rows), **_rollup(rows)}
                for (b, d), rows in _group(per_dir, ("broker_id", "log_dir")).items()]
    return {"topic_stats": _topic_rows(per_dir), "broker_stats": brokers, "log_dir_stats": log_dirs}


def frames(rows: dict[str, Sequence[dict]]) -> dict[str, pd.DataFrame]:
    """Aggregate rows as the DataFrames Spark's Arrow ``toPandas()`` gives for the same tables."""
    return {name: (rows[name].table if isinstance(rows[name], ArrowRows)
                   else pa.Table.from_pylist(rows[name], schema=schema)).to_pandas()
            for name, schema in AGGREGATE_SCHEMAS.items()}


def aggregates(segments, partitions) -> dict[str, pd.DataFrame]:
    """The local twin of the Spark engine's ``aggregates(...)`` followed by ``toPandas()``."""
    return frames(aggregate_rows(segments, partitions))


def segment_frame(table: pa.Table, order=None, release=None) -> pd.DataFrame:
    """The checks' pandas frame of a segment table: Arrow's default conversion (the frame Spark's
    ``applyInPandas`` hands the checks), except that equal list cells share one numpy array: a
    million rows' four list columns cost a pointer a cell, not an array object each (~100 bytes).
    ``order``: the table's row indices in the frame's order (the frame then has a fresh 0..n-1
    index). Converted column by column, each Arrow column dropped once converted and freed memory
    returned every few columns (``release``; default: Arrow's pool's), so the peak is about the
    larger of the table and the frame, not their sum: the caller must not use ``table`` afterwards.
    The local engine hands ``release_memory`` (glibc's ``malloc_trim`` too): with the pool's alone
    the freed columns stayed resident, ~320 MiB more at the end of the 991,158-row fleet's frame
    (benchmarks/fleet.py); every 4 columns cost ~0.1 s of CPU there (the pages faulted in again)."""
    release = release or pa.default_memory_pool().release_unused
    take = None if order is None else pa.array(order, pa.int64())
    frame = pd.DataFrame(index=pd.RangeIndex(table.num_rows if take is None else len(take)))
    for done, name in enumerate(list(table.column_names), start=1):
        column = table.column(name)
        table = table.drop_columns([name])  # the table no longer holds this column's buffers
        if take is not None:
            column = column.take(take)
        if pa.types.is_list(column.type):
            frame[name] = _shared_list_cells(column)
        else:
            frame[name] = pandas_values(column)  # a dictionary of strings: str and None, as the plain column
        del column
        if done % 4 == 0:
            release()
    return frame


def _shared_list_cells(column: pa.ChunkedArray) -> np.ndarray:
    """A list column as an object array of Arrow's default conversion (a numpy array per cell, None
    for a null cell), each distinct value converted once and shared by the cells that hold it (a
    list with a null item is converted on its own; all of them in one conversion with the distinct
    values, so an integer list turns float exactly when the whole column would)."""
    values = column.combine_chunks()
    cells = np.empty(len(values), dtype=object)
    if not len(values):
        return cells
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    text = values if pa.types.is_string(values.type.value_type) else values.cast(pa.list_(pa.string()))
    # the key of a cell: its length and its items ([] and [""] differ); null for a null list or item
    key = pc.binary_join_element_wise(pc.cast(pc.list_value_length(values), pa.string()),
                                      pc.binary_join(text, "\x1f"), ":")
    codes = pc.fill_null(key.dictionary_encode().indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    shared = codes >= 0
    firsts = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
    rows = np.flatnonzero(shared)
    firsts[codes[rows][::-1]] = rows[::-1]  # the first row holding each distinct value
    alone = np.flatnonzero(valid & ~shared)
    converted = values.take(pa.array(np.concatenate([firsts, alone]))).to_pandas().to_numpy(dtype=object)
    cells[rows] = converted[codes[rows]]
    cells[alone] = list(converted[len(firsts):]) if len(alone) else []
    return cells
