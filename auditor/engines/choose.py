"""Which engine runs the table stages, from the request alone (nothing is scanned)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from auditor.engines.local.tables import LOCAL_MAX_SEGMENT_ROWS
from auditor.engines.base import TableEngine


def count_segments(log_dirs: Sequence[str], limit: int) -> int:
    """``.log`` files under the log dirs' partition dirs, counted until ``limit`` is passed."""
    from auditor.scan import plan_log_dir

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
    """Segment rows in the manifests (Parquet footers only; ``s3://`` / ``s3a://`` ones too, through
    auditor.object_store); None for other URLs or unreadable ones. A store that cannot be used raises
    its one-line ObjectStoreError here, before any engine starts."""
    import pyarrow.parquet as pq

    from auditor.manifest import SEGMENTS_FILE, find_manifests
    from auditor.object_store import ObjectStoreError, filesystem, is_s3

    if any("://" in str(m) and not is_s3(str(m)) for m in manifests):
        return None

    def rows(d: str) -> int:
        if is_s3(d):
            fs, path = filesystem(f"{d}/{SEGMENTS_FILE}")
            with fs.open_input_file(path) as fh:
                return pq.ParquetFile(fh).metadata.num_rows
        return pq.ParquetFile(os.path.join(d, SEGMENTS_FILE)).metadata.num_rows
    try:
        return sum(rows(d) for d in find_manifests(manifests))
    except ObjectStoreError:
        raise
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


def select_engine(req) -> tuple[TableEngine, str]:
    """The engine for the request (:func:`choose_engine`) and why."""
    name, why = choose_engine(req)
    if name == "local":
        from auditor.engines.local.engine import LocalEngine

        return LocalEngine(), why
    from auditor.engines.spark.engine import SparkEngine

    return SparkEngine(), why
