"""The audit's table stages on the driver, for small inputs: no Spark, no JVM.

:func:`choose_engine` decides, before anything is scanned, whether an audit runs here or on
Spark: ``--engine local|spark`` says so outright; ``auto`` (the default) picks Spark for any
``--master``/``--conf``/``--parquet``, under ``spark-submit``, for remote manifests, and when
the input holds more than ``LOCAL_MAX_SEGMENT_ROWS`` segments (counted from the listing: one
``scandir`` per partition dir, stopping as soon as the limit is passed; for manifests, the
Parquet footers' row counts). Everything else runs here: the in-process scan
(:mod:`auditor.scan`, or the manifests read with pyarrow), the aggregates
(:mod:`auditor.local_engine`), the checks (``run_local``) and the Great Expectations suite on
GX's pandas datasource. ``tests/test_local_engine.py`` proves the findings equal to Spark's on
the same inputs; ``benchmarks/engines.py`` measures where Spark starts to pay.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from auditor import __version__
from auditor.check_runner import as_frame, run_local
from auditor.local_engine import LOCAL_MAX_SEGMENT_ROWS, aggregate_rows, frames
from auditor.manifest import SEGMENTS_FILE, find_manifests, read_manifest
from auditor.scan import plan_log_dir, scan_log_dirs
from auditor.schema import SEGMENT_SCHEMA
from checks.base import AuditContext, Finding
from checks.expectations import ExpectationsResult, run_expectations

ENGINES = ("auto", "local", "spark")


@dataclass
class TableOutcome:
    """What the table stages hand to the findings document, whichever engine ran them."""

    findings: list[Finding]
    gx: ExpectationsResult
    stats: list[dict]
    timelines: dict[str, list[dict]]
    versions: dict[str, str]
    log_dirs: list[dict]
    engine: dict = field(default_factory=dict)


def count_segments(log_dirs: Sequence[str], limit: int) -> int:
    """``.log`` files under the log dirs' partition dirs, counted until ``limit`` is passed."""
    count = 0
    for log_dir in log_dirs:
        for path in plan_log_dir(log_dir).partition_dirs:
            try:
                with os.scandir(path) as it:
                    count += sum(1 for e in it if e.name.endswith(".log"))
            except OSError:
                continue  # the scan writes the note
            if count > limit:
                return count
    return count


def manifest_rows(manifests: Sequence[str]) -> int | None:
    """Segment rows in local manifests (Parquet footers only); None for remote or unreadable ones."""
    if any("://" in str(m) for m in manifests):
        return None
    try:
        return sum(pq.ParquetFile(os.path.join(d, SEGMENTS_FILE)).metadata.num_rows for d in find_manifests(manifests))
    except (OSError, ValueError):
        return None


def choose_engine(req, limit: int = LOCAL_MAX_SEGMENT_ROWS) -> tuple[str, str]:
    """(``local`` or ``spark``, why), from the request alone (nothing is scanned)."""
    engine = req.engine or "auto"
    if engine != "auto":
        return engine, f"--engine {engine}"
    if req.master or req.spark_conf:
        return "spark", "a Spark master or settings were given"
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return "spark", "running under spark-submit"
    if req.parquet_dir:
        return "spark", "--parquet writes Spark's table directories"
    if req.manifests:
        rows = manifest_rows(req.manifests)
        if rows is None:
            return "spark", "remote or unreadable manifests"
    else:
        rows = count_segments(req.log_dirs, limit)
    if rows > limit:
        return "spark", f"more than {limit:,} segments"
    return "local", f"{rows:,} segments <= {limit:,}: checks and Great Expectations on the driver (pandas)"


def _versions(gx_version: str) -> dict[str, str]:
    return {"kafka-log-auditor": __version__, "python": platform.python_version(),
            "great_expectations": gx_version, "engine": "local (pandas on the driver; no Spark)"}


def _read_inputs(req, progress: Callable[[str], None]) -> tuple[list[dict], list[dict], list[dict], pa.Table | None]:
    """Segment, partition and log-dir rows; for manifests also the segment table as Arrow (the
    checks' and the suite's frame is made from it, not from the dicts again)."""
    if req.manifests:
        progress(f"reading {len(req.manifests)} manifest location(s) (pyarrow)")
        segments, partitions, infos, tables = [], [], [], []
        for d in find_manifests(req.manifests):
            seg, part, info = read_manifest(d)
            tables.append(seg)
            segments += seg.to_pylist()
            partitions += part.to_pylist()
            infos += info.to_pylist()
        return segments, partitions, infos, pa.concat_tables(tables) if tables else None
    progress(f"scanning {len(req.log_dirs)} log dir(s) at depth {req.depth} (in-process)")
    result = scan_log_dirs(req.log_dirs, req.depth, **({"state_dir": req.state_dir} if req.state_dir else {}))
    return result.segments, result.partitions, result.log_dirs, None


def run_tables_local(req, ctx: AuditContext, progress: Callable[[str], None],
                     timeline_keys: Callable[[list[Finding]], list[tuple[str, int]]],
                     timeline_columns: Sequence[str]) -> TableOutcome:
    """Scan (or read manifests), aggregate, check and validate on the driver."""
    segments, partitions, infos, segment_table = _read_inputs(req, progress)
    rows = aggregate_rows(segments, partitions)
    progress(f"running the checks ({len(segments):,} segment rows, on the driver)")
    # converted once: the checks' and the suite's input
    segment_frame = (segment_table.cast(SEGMENT_SCHEMA).to_pandas() if segment_table is not None
                     else as_frame(segments, SEGMENT_SCHEMA))
    findings = run_local(segment_frame, partitions, ctx, frames(rows))
    progress("validating the segment table (Great Expectations, pandas)")
    gx = run_expectations(segment_frame, ctx)
    findings = sorted(findings + gx.findings, key=Finding.sort_key)
    keys = set(timeline_keys(findings))
    timelines: dict[str, list[dict]] = {}
    for s in segments:
        if (s["topic"], s["partition"]) in keys and s["file_state"] is None:
            timelines.setdefault(f"{s['topic']}-{s['partition']}", []).append({c: s[c] for c in timeline_columns})
    return TableOutcome(findings=findings, gx=gx, stats=rows["partition_stats"], timelines=timelines,
                        versions=_versions(gx.gx_version), log_dirs=infos)
