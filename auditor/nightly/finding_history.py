"""Findings in the history dir: one Parquet file per run, appended, never rewritten.

``<history dir>/findings-<UTC run time>.parquet`` holds, per identity this run found (its worst
severity), the check, where, the first-seen time and the runs open; and per accept entry its
key and the runs in a row it matched nothing. The file's metadata carries
:data:`FORMAT_VERSION`; a reader of this version reads every older file. The previous run is the
newest file with a run time before this audit's. It reads what it can and says what it could
not: a missing or empty dir, a cut-off or foreign file, or one from a newer version gives a note
and no previous run (never a guess, so never a wrong "resolved").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from auditor.atomic import atomic_write
from auditor.nightly.identity import RANK, PreviousRow
from auditor.units import iso_utc

FORMAT_VERSION = 1
FORMAT_KEY = b"kafka_audit_findings_history"
PREFIX = "findings-"
_NAME = re.compile(r"^findings-(\d{8}T\d{6}\.\d{3}Z)(?:-\d+)?\.parquet$")
KNOWN_OTHER = re.compile(r"^(run-.*\.parquet|capacity-.*\.parquet|\..*\.tmp(-\d+)?)$")
"""The trend files (auditor/nightly/run_history.py), the capacity ledgers (capacity_history.py), temp files."""

SCHEMA = pa.schema([
    ("kind", pa.string()),  # "finding" or "accept_entry"
    ("as_of_ms", pa.int64()), ("identity", pa.string()), ("check", pa.string()), ("code", pa.string()),
    ("severity", pa.string()), ("topic", pa.string()), ("partition", pa.int64()), ("broker_id", pa.int64()),
    ("log_dir", pa.string()), ("first_seen_ms", pa.int64()), ("runs_open", pa.int64()), ("message", pa.string()),
    ("accepted", pa.bool_()), ("runs_unmatched", pa.int64()),
])
NEEDED = {"kind", "identity", "severity", "first_seen_ms", "runs_open"}


def run_stamp(as_of_ms: int) -> str:
    """The audit time in a history file's name (``20260101T000000.000Z``)."""
    return iso_utc(as_of_ms).replace("-", "").replace(":", "")


def run_ms_of(name: str, pattern: re.Pattern = _NAME) -> int | None:
    """The audit time of a history file named by ``pattern`` (its group 1 a :func:`run_stamp`), None for another file."""
    import datetime as dt

    m = pattern.match(name)
    if not m:
        return None
    t = dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=dt.timezone.utc)
    return int(round(t.timestamp() * 1000))


@dataclass
class Previous:
    """What the history says about the run before this one."""

    as_of_ms: int | None = None
    findings: dict[str, PreviousRow] | None = None
    """None: no previous run to compare with (first run, or the history could not say)"""
    unmatched: dict[str, int] = field(default_factory=dict)
    """accept entry key -> runs in a row it matched nothing, as of the previous run"""
    runs: int = 0
    """runs with findings in the history before this one"""
    notes: list[str] = field(default_factory=list)


def _earlier_runs(d: Path, as_of_ms: int, out: Previous) -> list[tuple[int, Path]]:
    """The history's findings files before ``as_of_ms`` as (run time, path); notes into ``out``."""
    if not d.is_dir():
        out.notes.append(f"history dir {d} does not exist yet: this is its first run, every finding is new")
        return []
    runs, foreign, later = [], [], 0
    try:
        names = sorted(d.iterdir())
    except OSError as exc:
        out.notes.append(f"history dir {d} cannot be listed ({exc.strerror or exc}): no previous run to compare with")
        return []
    for p in names:
        t = run_ms_of(p.name)
        if t is None:
            if p.name.startswith(PREFIX) or not KNOWN_OTHER.match(p.name):
                foreign.append(p.name)
        elif t < as_of_ms:
            runs.append((t, p))
        else:
            later += 1
    if foreign:
        out.notes.append(f"history dir {d}: {len(foreign)} file(s) it does not know, ignored: "
                         + ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else ""))
    if later:
        out.notes.append(f"history dir {d}: {later} run(s) at or after this audit time ({iso_utc(as_of_ms)}), ignored")
    out.runs = len(runs)
    if not runs:
        out.notes.append(f"history dir {d} holds no earlier run's findings: every finding is new")
    return runs


def read_previous(history_dir: str | Path, as_of_ms: int) -> Previous:
    """The newest run before ``as_of_ms`` in the history dir; anything it cannot trust is a note and
    no previous run (never a guess that would mark findings resolved)."""
    out = Previous()
    runs = _earlier_runs(Path(history_dir), as_of_ms, out)
    if not runs:
        return out
    t, path = max(runs)
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a note, never a crash
        out.notes.append(f"{path}: unreadable ({type(exc).__name__}: {str(exc)[:200]}): no previous run to compare "
                         f"with, every finding is new")
        return out
    meta = table.schema.metadata or {}
    version = meta.get(FORMAT_KEY)
    try:
        version_n = int(version) if version is not None else None
    except ValueError:
        version_n = None
    if version_n is None or not NEEDED <= set(table.column_names):
        out.notes.append(f"{path}: not a findings history file (no {FORMAT_KEY.decode()} metadata or columns): "
                         f"no previous run to compare with, every finding is new")
        return out
    if version_n > FORMAT_VERSION:
        out.notes.append(f"{path}: written by a newer kafka-log-auditor (history format {version_n}, this one reads up "
                         f"to {FORMAT_VERSION}): no previous run to compare with, every finding is new")
        return out
    rows = table.to_pylist()
    bad = [r for r in rows if r.get("kind") == "finding" and r.get("severity") not in RANK]
    if bad:
        out.notes.append(f"{path}: {len(bad)} row(s) with an unknown severity (e.g. {bad[0].get('severity')!r}): "
                         f"no previous run to compare with")
        return out
    out.as_of_ms = t
    out.findings = {}
    for r in rows:
        if r.get("kind") == "finding" and r.get("identity"):
            out.findings[r["identity"]] = PreviousRow(
                identity=r["identity"], severity=r["severity"], first_seen_ms=int(r["first_seen_ms"]),
                runs_open=int(r["runs_open"] or 1), check=r.get("check") or "", code=r.get("code") or "",
                topic=r.get("topic"), partition=r.get("partition"), broker_id=r.get("broker_id"),
                log_dir=r.get("log_dir"), message=r.get("message") or "")
        elif r.get("kind") == "accept_entry" and r.get("identity"):
            out.unmatched[r["identity"]] = int(r.get("runs_unmatched") or 0)
    return out


def append(history_dir: str | Path, as_of_ms: int, finding_rows: list[dict], entries: list[dict]) -> Path:
    """Writes this run's file (auditor.atomic: temp file, fsync, rename; a second run at the same time gets ``-2``...)."""
    d = Path(history_dir)
    d.mkdir(parents=True, exist_ok=True)
    rows = [dict(r, kind="finding", as_of_ms=as_of_ms, runs_unmatched=None) for r in finding_rows]
    rows += [{"kind": "accept_entry", "as_of_ms": as_of_ms, "identity": e["key"], "check": e["check"],
              "code": e["code"], "topic": e.get("topic"), "partition": e.get("partition"), "broker_id": e.get("broker"),
              "message": e["entry"], "runs_unmatched": e["runs_unmatched"]} for e in entries]
    table = pa.Table.from_pylist(rows, schema=SCHEMA).replace_schema_metadata({FORMAT_KEY: str(FORMAT_VERSION).encode()})
    return write_run_file(d, PREFIX, as_of_ms, table)


def write_run_file(history_dir: Path, prefix: str, as_of_ms: int, table: pa.Table) -> Path:
    """``<prefix><run_stamp>.parquet`` in ``history_dir`` (``-2``, ``-3``... for a second run at the
    same time), fsynced and renamed into place: whole or not at all."""
    base = prefix + run_stamp(as_of_ms)
    path, n = history_dir / f"{base}.parquet", 1
    while path.exists():
        n += 1
        path = history_dir / f"{base}-{n}.parquet"
    return atomic_write(path, lambda fh: pq.write_table(table, fh))
