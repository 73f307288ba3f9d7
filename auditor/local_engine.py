"""The in-process engine for small audits: the Spark engine's aggregate tables, on the driver.

On a 2-core machine Spark local mode cost more than it saved at every measured size up to
100,000 segment rows (a session start of 10-20 s and ~60 s of fixed cost in all, then about the
driver's cost per row; see benchmarks/engines.py). A small audit therefore scans in-process
(:mod:`auditor.scan`), and builds here the same four tables :func:`auditor.engine.aggregates`
builds on Spark, as the pandas DataFrames Spark's Arrow
``toPandas()`` would hand back (same columns in the same order, same types: ``int`` columns
int32, ``bigint`` int64 or float64 where a value is null, the median a double). The checks
and the Great Expectations suite then run on pandas with the same findings as on Spark
(``tests/test_local_engine.py`` compares both engines on the same inputs).

Definitions are those of the Spark aggregates, including two quirks of its joins kept on
purpose so that both engines agree: a partition dir whose ``broker_id`` is unknown (a log dir
without ``meta.properties``) gets no segment aggregates (a null join key matches nothing), and
``broker_stats`` has no row for an unknown broker. Rows are sorted by their keys.

Memory: the rows are plain dicts; meant for tables well below ``LOCAL_MAX_SEGMENT_ROWS``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

import pandas as pd
import pyarrow as pa

LOCAL_MAX_SEGMENT_ROWS = 100_000
"""Up to this many segment rows (from the listing) an audit without ``--master`` runs on the
driver; above it, on Spark. Measured (benchmarks/engines.py, README there) on 2 cores: the driver
was faster at every size up to 100,000 rows (6 s vs 69 s at 1,000; 96 s vs 154 s at 100,000) and
both grow by ~0.9 ms a row, so Spark does not catch up on this machine; the limit is the driver's
memory (peak RSS ~1 GiB at 100,000 rows), and above it Spark's memory and executors are the way."""

PARTITION_DIR_KEYS = ("broker_id", "log_dir", "topic", "partition", "dir_kind", "dir_name")

_I32, _I64, _STR, _F64 = pa.int32(), pa.int64(), pa.string(), pa.float64()
_ROLLUP = [("replicas", _I64), ("segment_count", _I64), ("size_bytes", _I64), ("message_count", _I64),
           ("oldest_record_timestamp_ms", _I64), ("newest_record_timestamp_ms", _I64),
           ("oldest_log_mtime_ms", _I64), ("newest_log_mtime_ms", _I64), ("notes", _I64), ("mtime_spread_ms", _I64)]

AGGREGATE_SCHEMAS = {
    "partition_stats": pa.schema([
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


def _live(s: dict) -> bool:
    return s["file_state"] is None and s["log_size_bytes"] is not None


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


def partition_stats_rows(segments: Iterable[dict], partitions: Iterable[dict]) -> list[dict]:
    """One row per partition dir: the partition row joined with its segments' aggregates."""
    by_dir: dict[tuple, list[dict]] = {}
    for s in segments:
        by_dir.setdefault(_key(s, PARTITION_DIR_KEYS), []).append(s)
    out = []
    for p in partitions:
        key = _key(p, PARTITION_DIR_KEYS)
        # Spark's left join on these keys: a null key matches no segment group
        segs = by_dir.get(key, []) if None not in key else []
        live = [s for s in segs if _live(s)]
        row = {k: p[k] for k in ("broker_id", "log_dir", "topic", "partition", "dir_kind", "dir_name", "cluster_id",
                                 "topic_id", "segment_count", "size_bytes", "log_start_offset", "log_end_offset",
                                 "high_watermark", "oldest_log_mtime_ms", "newest_log_mtime_ms")}
        row["other_segment_files"] = len(segs) - len(live)
        row["index_bytes"] = sum((s["index_size_bytes"] or 0) + (s["timeindex_size_bytes"] or 0)
                                 + (s["txnindex_size_bytes"] or 0) for s in live)
        row["message_count"] = _exact_sum(s["record_count"] for s in live) if segs else 0
        row["oldest_record_timestamp_ms"] = _min(s["min_timestamp_ms"] if s["min_timestamp_ms"] is not None
                                                 else s["min_batch_timestamp_ms"] for s in segs)
        row["newest_record_timestamp_ms"] = _max(s["max_timestamp_ms"] for s in segs)
        row["first_offset"] = _min(s["first_offset"] for s in segs)
        row["last_offset"] = _max(s["last_offset"] for s in segs)
        old, new = row["oldest_log_mtime_ms"], row["newest_log_mtime_ms"]
        row["mtime_spread_ms"] = new - old if old is not None and new is not None else None
        row["notes"] = len(p["notes"]) + sum(len(s["notes"]) for s in segs)
        out.append(row)
    out.sort(key=lambda r: _sort_key(_key(r, PARTITION_DIR_KEYS)))
    return out


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


def aggregate_rows(segments: Sequence[dict], partitions: Sequence[dict]) -> dict[str, list[dict]]:
    """The four aggregate tables as lists of dicts (see the module doc for the definitions)."""
    per_dir = partition_stats_rows(segments, partitions)
    brokers = [{"broker_id": b, "partition_dirs": len(rows), **_rollup(rows),
                "log_dirs": len({r["log_dir"] for r in rows if r["log_dir"] is not None})}
               for (b,), rows in _group(per_dir, ("broker_id",)).items() if b is not None]
    log_dirs = [{"broker_id": b, "log_dir": d, "partition_dirs": len(rows), **_rollup(rows)}
                for (b, d), rows in _group(per_dir, ("broker_id", "log_dir")).items()]
    return {"partition_stats": per_dir, "topic_stats": _topic_rows(per_dir), "broker_stats": brokers,
            "log_dir_stats": log_dirs}


def frames(rows: dict[str, list[dict]]) -> dict[str, pd.DataFrame]:
    """Aggregate rows as the DataFrames Spark's Arrow ``toPandas()`` gives for the same tables."""
    return {name: pa.Table.from_pylist(rows[name], schema=schema).to_pandas()
            for name, schema in AGGREGATE_SCHEMAS.items()}


def aggregates(segments: Sequence[dict], partitions: Sequence[dict]) -> dict[str, pd.DataFrame]:
    """The in-process twin of the Spark engine's ``aggregates(...)`` followed by ``toPandas()``."""
    return frames(aggregate_rows(segments, partitions))
