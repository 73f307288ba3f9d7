"""The audit history: one Parquet file per run, one row per topic, appended, never rewritten.

``<history dir>/run-<UTC time>.parquet`` holds the run time, the verdict, the counts by
severity and, per topic, bytes, messages, partitions and the skew ratio (largest / median
partition). Reading the directory back gives the trends the report draws.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from auditor.atomic import atomic_write

HISTORY_SCHEMA = pa.schema([
    ("as_of_ms", pa.int64()), ("verdict", pa.string()), ("topic", pa.string()), ("partitions", pa.int64()),
    ("size_bytes", pa.int64()), ("message_count", pa.int64()), ("skew_ratio", pa.float64()),
    ("fail", pa.int64()), ("warn", pa.int64()), ("info", pa.int64()),
])


def topic_rows(replica_stats: Iterable[dict], as_of_ms: int, verdict: str, counts: dict) -> list[dict]:
    per_topic: dict[str, dict[int, tuple[int, int | None]]] = {}
    for r in replica_stats:
        if r.get("dir_kind") != "live":
            continue
        parts = per_topic.setdefault(r["topic"], {})
        size = int(r.get("size_bytes") or 0)
        if r["partition"] not in parts or size > parts[r["partition"]][0]:
            parts[r["partition"]] = (size, r.get("message_count"))
    rows = []
    for topic, parts in sorted(per_topic.items()):
        sizes = [s for s, _ in parts.values()]
        median = statistics.median(sizes) if sizes else 0
        msgs = [m for _, m in parts.values()]
        rows.append({
            "as_of_ms": as_of_ms, "verdict": verdict, "topic": topic, "partitions": len(parts),
            "size_bytes": sum(sizes), "message_count": None if any(m is None for m in msgs) else int(sum(msgs)),
            "skew_ratio": (max(sizes) / median) if median else None,
            "fail": counts.get("FAIL", 0), "warn": counts.get("WARN", 0), "info": counts.get("INFO", 0),
        })
    return rows


def append(history_dir: str | Path, rows: list[dict], as_of_ms: int) -> Path:
    from auditor.units import iso_utc

    d = Path(history_dir)
    d.mkdir(parents=True, exist_ok=True)
    name = "run-" + iso_utc(as_of_ms).replace(":", "").replace("+0000", "Z") + ".parquet"
    path = d / name
    table = pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)
    return atomic_write(path, lambda fh: pq.write_table(table, fh))  # whole or not at all, like every output


def read(history_dir: str | Path | None) -> list[dict]:
    if history_dir is None or not Path(history_dir).is_dir():
        return []
    out: list[dict] = []
    for f in sorted(Path(history_dir).glob("run-*.parquet")):
        try:  # a cut-off or foreign file costs its points on the trend chart, never the run
            rows = pq.read_table(f).to_pylist()
        except Exception:  # noqa: BLE001
            continue
        for row in rows:  # files written before the audit time had one name called it run_at_ms
            if "as_of_ms" not in row and "run_at_ms" in row:
                row["as_of_ms"] = row.pop("run_at_ms")
        out.extend(rows)
    return out
