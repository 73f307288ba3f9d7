"""The capacity ledger in the history dir: one Parquet file per run, appended, never rewritten.

``<history dir>/capacity-<UTC run time>.parquet`` holds one row per filesystem of the capacity
section (log dirs, whether its capacity was known, used bytes, the model's growth, its projected
series and origin) and one row per live partition replica (``auditor.capacity.ledger``: end
offset, active segment's base offset and log bytes, log start, log bytes, the model's rate, the
retention applied). The next run reads the newest earlier file to tell the bytes written in
between (``auditor.capacity.observed``). A missing, cut-off, foreign or newer file is a note and
no comparison, never a guess.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from auditor.capacity.ledger import replica_rows
from auditor.capacity.observed import PreviousCapacity
from auditor.nightly.finding_history import run_ms_of, write_run_file

FORMAT_VERSION = 1
FORMAT_KEY = b"kafka_audit_capacity_history"
PREFIX = "capacity-"
_NAME = re.compile(r"^capacity-(\d{8}T\d{6}\.\d{3}Z)(?:-\d+)?\.parquet$")

SCHEMA = pa.schema([
    ("kind", pa.string()),  # "filesystem" or "replica"
    ("as_of_ms", pa.int64()), ("broker_id", pa.int64()), ("log_dir", pa.string()), ("log_dirs", pa.list_(pa.string())),
    ("topic", pa.string()), ("partition", pa.int64()), ("end_offset", pa.int64()), ("active_base_offset", pa.int64()),
    ("active_log_bytes", pa.int64()), ("log_start_offset", pa.int64()), ("log_bytes", pa.int64()),
    ("model_bytes_per_s", pa.float64()), ("retention_ms", pa.int64()), ("retention_bytes", pa.int64()),
    ("cleanup_policy", pa.string()), ("capacity_known", pa.bool_()), ("used_bytes", pa.int64()),
    ("growth_bytes_per_s", pa.float64()), ("origin_ms", pa.int64()), ("series_json", pa.string()),
])


def _origin_ms(entry: dict) -> int | None:
    text = entry.get("origin_utc")
    if not text:
        return None
    try:
        return int(round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000))
    except ValueError:
        return None


def filesystem_rows(entries: list[dict]) -> list[dict]:
    return [{"broker_id": e.get("broker_id"), "log_dirs": [d for d in e.get("log_dirs") or [] if d],
             "capacity_known": bool(e.get("capacity_known")), "used_bytes": e.get("used_bytes"),
             "growth_bytes_per_s": e.get("growth_bytes_per_s"), "origin_ms": _origin_ms(e),
             "series_json": json.dumps(e.get("series")) if e.get("series") else None} for e in entries]


def append(history_dir: str | Path, as_of_ms: int, entries: list[dict], ledger) -> Path:
    """Writes this run's file (whole or not at all; a second run at the same time gets ``-2``...)."""
    d = Path(history_dir)
    d.mkdir(parents=True, exist_ok=True)
    rows = [dict(r, kind="filesystem", as_of_ms=as_of_ms) for r in filesystem_rows(entries)]
    rows += [dict(r, kind="replica", as_of_ms=as_of_ms) for r in (replica_rows(ledger) if ledger is not None else [])]
    table = pa.Table.from_pylist(rows, schema=SCHEMA).replace_schema_metadata({FORMAT_KEY: str(FORMAT_VERSION).encode()})
    return write_run_file(d, PREFIX, as_of_ms, table)


def _load(path: Path, t: int) -> PreviousCapacity:
    out = PreviousCapacity()
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - an unreadable file is a note, never a crash
        out.notes.append(f"{path}: unreadable ({type(exc).__name__}: {str(exc)[:200]}): no growth observed between runs")
        return out
    version = (table.schema.metadata or {}).get(FORMAT_KEY)
    if version is None or not version.isdigit() or not {"kind", "log_dir", "end_offset"} <= set(table.column_names):
        out.notes.append(f"{path}: not a capacity history file: no growth observed between runs")
        return out
    if int(version) > FORMAT_VERSION:
        out.notes.append(f"{path}: written by a newer kafka-log-auditor (capacity history format {int(version)}, this "
                         f"one reads up to {FORMAT_VERSION}): no growth observed between runs")
        return out
    out.as_of_ms = t
    for r in table.to_pylist():
        if r.get("kind") == "replica":
            out.replicas.append(r)
        elif r.get("kind") == "filesystem":
            try:
                r["series"] = json.loads(r["series_json"]) if r.get("series_json") else None
            except ValueError:
                r["series"] = None
            out.filesystems.append(r)
    return out


def read_previous(history_dir: str | Path, as_of_ms: int) -> PreviousCapacity:
    """The newest capacity file before ``as_of_ms`` (none: the first run with capacity, said)."""
    d = Path(history_dir)
    runs = []
    if d.is_dir():
        try:
            runs = [(t, p) for p in d.iterdir() if (t := run_ms_of(p.name, _NAME)) is not None and t < as_of_ms]
        except OSError as exc:
            return PreviousCapacity(notes=[f"history dir {d} cannot be listed ({exc.strerror or exc}): no growth "
                                           "observed between runs"])
    if not runs:
        return PreviousCapacity()
    t, path = max(runs)
    return _load(path, t)


def observe(history_dir: str | Path, capacity, as_of_ms: int) -> None:
    """With ``--history``: the growth observed since the previous run beside the model's, on each
    entry of ``capacity`` (an ``auditor.capacity.CapacityResult``; notes said once into its notes)."""
    from auditor.capacity.observed import compare_with_previous

    if capacity is None:
        return
    previous = read_previous(history_dir, as_of_ms)
    capacity.notes += compare_with_previous(capacity.filesystems, getattr(capacity, "ledger", None), previous, as_of_ms)
