"""Manifests: collect (scan a broker's log dirs into Parquet), read and find them. Pure Python.

Runs on the broker itself: no Spark, no JVM (this module must never import pyspark), read-only
on the log dirs (the scanner's guarantees), bounded memory (rows are streamed to Parquet every
``FLUSH_ROWS`` rows, whatever the broker holds), optionally at idle CPU and I/O priority.

A manifest is a directory::

    OUT/segments.parquet     SEGMENT_SCHEMA rows (auditor.schema), broker_id is a column
    OUT/partitions.parquet   PARTITION_SCHEMA rows
    OUT/log_dirs.parquet     LOG_DIRS_SCHEMA: one row per log dir (broker id, problems,
                             host, collection start and end times)

Every file also carries key-value metadata (``kafka_audit.*``: table, tool version, depth,
host, collection start time, log dirs). Files are written under a temporary name and renamed
into place, so a reader never sees half a manifest file. :func:`find_manifests` is the one rule
for naming manifests (dirs, parent dirs, globs), used by the engine
(``auditor.engine.parquet.read_manifests``), ``replay-check`` and the Airflow DAG's input check.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from auditor import __version__
from auditor.scan import Progress, iter_log_dir
from auditor.scan.state import check_state_dir
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA

SEGMENTS_FILE = "segments.parquet"
PARTITIONS_FILE = "partitions.parquet"
LOG_DIRS_FILE = "log_dirs.parquet"
FLUSH_ROWS = 8192
NICE_READ_RATE_MIB_S = 64.0
"""``collect --nice`` reads at most this many MiB/s unless ``--max-read-rate`` says otherwise."""

LOG_DIRS_SCHEMA = pa.schema(
    [
        pa.field("log_dir", pa.string()),
        pa.field("broker_id", pa.int32()),
        pa.field("cluster_id", pa.string()),
        pa.field("directory_id", pa.string()),
        pa.field("partition_dirs", pa.int64()),
        pa.field("problems", pa.list_(pa.string())),
        pa.field("host", pa.string()),
        pa.field("collected_at_ms", pa.int64()),
        pa.field("finished_at_ms", pa.int64()),
    ]
)
"""One row per log dir of a manifest (the scanner's log-dir info plus where and when)."""


class CollectError(Exception):
    """A usage problem (e.g. --out inside a log dir): one line, exit 2."""


@dataclass
class CollectResult:
    out: Path
    segments: int = 0
    partitions: int = 0
    log_dirs: list[dict] = field(default_factory=list)
    priority: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_out_path(out: str | os.PathLike, log_dirs: Iterable[str | os.PathLike]) -> Path:
    """The resolved output dir; CollectError when it is (or would land) inside a scanned log dir."""
    out_real = Path(os.path.realpath(out))
    for log_dir in log_dirs:
        root = Path(os.path.realpath(log_dir))
        if _inside(out_real, root):
            raise CollectError(
                f"--out {out} resolves to {out_real}, inside the scanned log dir {root}: "
                "the auditor never writes under a log dir; choose a path outside it"
            )
    if out_real.exists() and not out_real.is_dir():
        raise CollectError(f"--out {out} exists and is not a directory")
    return out_real


# Linux ioprio_set(2): no libc wrapper, so the raw syscall. Numbers from the kernel's syscall tables.
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "i686": 289, "armv7l": 314, "ppc64le": 273, "s390x": 282}
_IOPRIO_WHO_PROCESS = 1
_IOPRIO_CLASS_IDLE = 3
_IOPRIO_CLASS_SHIFT = 13


def lower_priority() -> list[str]:
    """Lowest CPU priority (nice 19) and idle I/O class where the platform allows; says what it did."""
    done = []
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 19)
        done.append("cpu: nice 19")
    except (AttributeError, OSError) as exc:
        try:
            os.nice(19)
            done.append("cpu: nice +19")
        except (AttributeError, OSError):
            done.append(f"cpu: unchanged ({exc})")
    number = _IOPRIO_SET.get(platform.machine()) if platform.system() == "Linux" else None
    if number is None:
        done.append(f"io: unchanged (no ioprio_set on {platform.system()} {platform.machine()})")
        return done
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall(number, _IOPRIO_WHO_PROCESS, 0, _IOPRIO_CLASS_IDLE << _IOPRIO_CLASS_SHIFT)
        if rc == 0:
            done.append("io: class idle")
        else:
            done.append(f"io: unchanged (ioprio_set: {os.strerror(ctypes.get_errno())})")
    except OSError as exc:
        done.append(f"io: unchanged ({exc})")
    return done


def _metadata(table: str, depth: str, started_ms: int, log_dirs: list[str]) -> dict[bytes, bytes]:
    return {
        b"kafka_audit.table": table.encode(),
        b"kafka_audit.version": __version__.encode(),
        b"kafka_audit.depth": depth.encode(),
        b"kafka_audit.host": socket.gethostname().encode(),
        b"kafka_audit.collected_at_ms": str(started_ms).encode(),
        b"kafka_audit.log_dirs": "\n".join(log_dirs).encode(),
    }


class _Sink:
    """A Parquet file written batch by batch under a temporary name, renamed on close."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self.schema = schema
        self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        self.rows: list[dict] = []
        self.count = 0

    def add(self, rows: list[dict]) -> None:
        self.rows.extend(rows)
        self.count += len(rows)
        if len(self.rows) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        try:
            self.writer.close()
        finally:
            self.tmp.unlink(missing_ok=True)


def collect_manifest(log_dirs: list[str | os.PathLike], out: str | os.PathLike, depth: str = "index", *,
                     nice: bool = False, on_progress=None, state_dir: str | os.PathLike | None = None,
                     page_cache_care: bool | None = None, max_read_rate_mib_s: float | None = None) -> CollectResult:
    """Scans ``log_dirs`` into a manifest directory ``out`` (created if needed).

    ``state_dir``: incremental scan (auditor.scan.state). ``page_cache_care`` (default: ``nice``)
    leaves the page cache as it was; ``max_read_rate_mib_s`` (default with ``nice``:
    ``NICE_READ_RATE_MIB_S``; 0 = unlimited) paces the reads (auditor.scan.pagecache).
    """
    out_dir = check_out_path(out, log_dirs)
    if state_dir is not None:
        check_state_dir(state_dir, log_dirs)
    care = nice if page_cache_care is None else page_cache_care
    rate = (NICE_READ_RATE_MIB_S if nice else None) if max_read_rate_mib_s is None else (max_read_rate_mib_s or None)
    result = CollectResult(out_dir)
    if nice:
        result.priority = lower_priority()
    result.priority.append(f"page cache: {'left as found (pages the scan brought in are dropped)' if care else 'not managed'}")
    result.priority.append(f"read rate: {f'at most {rate:g} MiB/s' if rate else 'unlimited'}")
    started = time.monotonic()
    started_ms = time.time_ns() // 1_000_000
    abs_dirs = [os.path.abspath(d) for d in log_dirs]
    out_dir.mkdir(parents=True, exist_ok=True)
    sinks = {
        "segments": _Sink(out_dir / SEGMENTS_FILE, SEGMENT_SCHEMA.with_metadata(_metadata("segments", depth, started_ms, abs_dirs))),
        "partitions": _Sink(out_dir / PARTITIONS_FILE, PARTITION_SCHEMA.with_metadata(_metadata("partitions", depth, started_ms, abs_dirs))),
    }
    host = socket.gethostname()
    infos = []
    try:
        progress = Progress(log_dirs_total=len(log_dirs))
        for log_dir in log_dirs:
            for rows, prow, info in iter_log_dir(log_dir, depth, progress=progress, on_progress=on_progress,
                                                 state_dir=state_dir, page_cache_care=care,
                                                 max_read_rate_mib_s=rate):
                if rows:
                    sinks["segments"].add(rows)
                if prow is not None:
                    sinks["partitions"].add([prow])
                if info is not None:
                    infos.append(info)
        finished_ms = time.time_ns() // 1_000_000
        rows = [{**{k: info.get(k) for k in LOG_DIRS_SCHEMA.names}, "host": host,
                 "collected_at_ms": started_ms, "finished_at_ms": finished_ms} for info in infos]
        for sink in sinks.values():
            sink.close()
        tmp = out_dir / f".{LOG_DIRS_FILE}.tmp-{os.getpid()}"
        schema = LOG_DIRS_SCHEMA.with_metadata(_metadata("log_dirs", depth, started_ms, abs_dirs))
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp, compression="zstd")
        os.replace(tmp, out_dir / LOG_DIRS_FILE)
    except BaseException:
        for sink in sinks.values():
            if sink.tmp.exists():
                sink.abort()
        raise
    result.segments = sinks["segments"].count
    result.partitions = sinks["partitions"].count
    result.log_dirs = infos
    result.elapsed_s = time.monotonic() - started
    return result


def read_manifest(path: str | os.PathLike) -> tuple[pa.Table, pa.Table, pa.Table]:
    """One manifest's three tables with pyarrow (no Spark): segments, partitions, log dirs."""
    p = Path(path)
    return (pq.read_table(p / SEGMENTS_FILE, schema=SEGMENT_SCHEMA),
            pq.read_table(p / PARTITIONS_FILE, schema=PARTITION_SCHEMA),
            pq.read_table(p / LOG_DIRS_FILE))


def find_manifests(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Manifest directories (holding segments.parquet) named by paths, globs or parent dirs.

    A URL (``hdfs://``, ``s3a://``) cannot be listed here: it is taken as one manifest dir.
    FileNotFoundError when nothing is found at all.
    """
    paths = [str(p) for p in paths]
    found: list[str] = []
    for spec in paths:
        if "://" in spec:
            found.append(spec.rstrip("/"))
            continue
        for match in sorted(glob.glob(spec)) or [spec]:
            p = Path(match)
            if (p / SEGMENTS_FILE).exists():
                found.append(str(p))
            elif p.name == SEGMENTS_FILE and p.exists():
                found.append(str(p.parent))
            elif p.is_dir():
                found.extend(str(s.parent) for s in sorted(p.rglob(SEGMENTS_FILE)))
    if not found:
        raise FileNotFoundError(f"no manifest ({SEGMENTS_FILE}) found under {', '.join(paths)}")
    return sorted(dict.fromkeys(found))
