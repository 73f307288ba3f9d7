"""The table stages on Spark: a session started here, once, and stopped before returning.

The scan on the executors (or the manifests read as DataFrames; with ``--state`` the scan runs
in-process into a temporary manifest), the aggregates (:mod:`auditor.engines.spark`), the checks
(``run_spark``: buckets of partitions through ``applyInPandas``), the Great Expectations suite
on the Spark DataFrame. Only small things reach the driver: the per-partition-dir statistics,
the findings, the GX results and the segments of the few partitions the report draws a timeline
for. The segment table itself stays on the executors (and in Parquet with ``--parquet``).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from auditor.manifest import collect_manifest
from auditor.engines.base import Progress, TableEngine, TableOutcome, TimelineKeys, read_keys, versions
from checks.framework.base import AuditContext, Finding

if TYPE_CHECKING:
    from auditor.engines.local.tables import ArrowRows

#: Segment rows per Spark partition for the checks and the Great Expectations suite.
ROWS_PER_CHECK_SLICE = 100_000


class SparkEngine(TableEngine):
    """The table stages on Spark (``--master``, or local mode)."""

    name = "spark"

    def run_tables(self, req, ctx: AuditContext, progress: Progress, timeline_keys: TimelineKeys,
                   timeline_columns: Sequence[str]) -> TableOutcome:
        from auditor.keys.audit_keys import scan_keys_spark
        from auditor.engines.spark import aggregates, build_spark, write_parquet
        from auditor.engines.spark.session import driver_jvm_running, stop_driver_jvm
        from auditor.engines.local.engine import release_memory
        from auditor.engines.spark.expectations import run_expectations

        tmp = None
        progress("starting Spark")
        own_jvm = not driver_jvm_running()  # one launched here ends with these stages; one there before stays
        from pyspark.sql import SparkSession

        own_session = SparkSession.getActiveSession() is None  # likewise a session of the caller's (a notebook, a test module)
        spark = build_spark(req.master, req.spark_conf, reads=req.manifests or ())
        _size_shuffles(spark, req.spark_conf)
        if req.state_dir and not req.manifests:
            if spark.sparkContext.master.startswith("local"):
                tmp = tempfile.mkdtemp(prefix="kafka-audit-scan-")
            else:  # executors elsewhere cannot read a manifest in this driver's temp dir
                progress(f"--state not used: the executors of {spark.sparkContext.master} cannot read the driver's "
                         "temporary manifest (run `kafka-audit collect --state` on the brokers and audit the manifests)")
        try:
            read_keys(req, ctx, progress, partial(scan_keys_spark, spark))
            scan = _spark_scan(spark, req, tmp, progress)
            aggs = aggregates(scan.segments, scan.partitions)
            if req.parquet_dir:
                progress(f"writing the tables as Parquet to {req.parquet_dir}")
                write_parquet(scan, aggs, req.parquet_dir)
            # The scan's task count suits reading files, not the checks: GX runs a few Spark jobs per
            # expectation, and on a small table their per-task overhead dominated (demo: GX 13 s -> 5 s).
            segment_rows = scan.segments.count()
            slices = max(1, math.ceil(segment_rows / ROWS_PER_CHECK_SLICE))
            segments, partitions = scan.segments.coalesce(slices), scan.partitions.coalesce(slices)
            dirs = aggs["replica_stats"].count()  # persisted: the slices below read it from the executors
            progress(f"collecting the per-partition-dir statistics ({dirs:,} dirs, Arrow)")
            stats, frames = _collect_aggregates(aggs["replica_stats"], dirs)
            _capacity(scan.segments, scan.log_dirs, ctx, progress, segment_rows)
            progress(f"running the checks ({segment_rows:,} segment rows)")
            findings = _run_checks(spark, segments, partitions, frames, ctx, slices, dirs)
            del frames  # the cluster checks' frames (a row per partition dir), back to the OS before GX
            release_memory()
            progress("validating the segment table (Great Expectations)")
            gx = run_expectations(segments, ctx)
            findings = sorted(findings + gx.findings, key=Finding.sort_key)
            progress("collecting what the report shows")
            timelines = _spark_timelines(scan.segments, timeline_keys(findings), timeline_columns)
            engine_versions = _versions(spark, gx.gx_version)
            log_dir_infos = scan.log_dirs
            scan.unpersist()
        finally:
            if own_session:
                spark.stop()
            jvm_ended = own_jvm and stop_driver_jvm()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        if jvm_ended:
            progress("Spark stopped; its driver JVM ended (the report needs neither)")
        return TableOutcome(findings=findings, gx=gx, stats=stats, timelines=timelines, versions=engine_versions,
                            log_dirs=log_dir_infos)


def _capacity(segments, log_dirs: list[dict], ctx: AuditContext, progress, rows: int) -> None:
    """The capacity stage on the driver: the capacity columns of the segment rows, collected
    (``auditor.engines.capacity_stage``)."""
    from auditor.capacity.columns import COLUMNS
    from auditor.engines.capacity_stage import run_capacity

    wanted = [c for c in COLUMNS if c in segments.columns]
    run_capacity(_collect_table(segments.select(*wanted), rows), log_dirs, ctx, progress)


def _run_checks(spark, segments, partitions, frames: dict, ctx: AuditContext, slices: int, dirs: int) -> list[Finding]:
    """The partition checks on the executors, in buckets of ~ROWS_PER_CHECK_SLICE rows whatever the
    input's Spark partitions (at 10,000,000 rows from 30 manifests the scan had ~30: Python workers
    of 1.5-1.7 GiB each), at least one per executor core; the cluster checks here, on ``frames``
    and the partitions' columns (collected in slices, :func:`_collect_table`)."""
    from auditor.engines.spark.checks import run_spark
    from auditor.engines.local.tables import segment_frame

    buckets = max(slices, spark.sparkContext.defaultParallelism)
    return run_spark(segments, partitions, frames, ctx, buckets=buckets,
                     to_pandas=lambda df: segment_frame(_collect_table(df, dirs)))


#: Shuffle partitions per executor core on a cluster (unless --conf or spark-submit set them).
SHUFFLE_PARTITIONS_PER_CORE = 4


def _size_shuffles(spark, conf: dict | None) -> None:
    """Spark's default of 200 shuffle partitions made every aggregate and the checks' bucketing
    200+ tasks: on a 2-core standalone cluster at 1,000,000 rows the four aggregates took minutes
    of task overhead (benchmarks/fleet_spark.py). On a cluster, a few per executor core; local
    mode has its own default (``auditor.engines.spark.session.LOCAL_DEFAULTS``)."""
    key = "spark.sql.shuffle.partitions"
    if key in (conf or {}) or spark.sparkContext.master.startswith("local") or spark.sparkContext.getConf().contains(key):
        return
    spark.conf.set(key, str(max(8, SHUFFLE_PARTITIONS_PER_CORE * spark.sparkContext.defaultParallelism)))


def _collect_aggregates(replica_stats, dirs: int) -> tuple[ArrowRows, dict]:
    """The per-partition-dir statistics on the driver (one row per partition dir, never a segment
    row), once, as Arrow (:func:`_collect_table`): rows for the report (:class:`ArrowRows`, a dict
    made per row as it is read, none kept), and the four aggregate tables as the pandas frames the
    cluster checks read: ``replica_stats`` with only the columns they read
    (``CLUSTER_STATS_COLUMNS``), the topic, broker and log-dir rollups made here on Arrow columns
    (``auditor.engines.local.tables.rollup_tables``, the local engine's own; on Spark they were a dozen
    more jobs of a few hundred rows each). tests/test_local_engine.py holds the two engines'
    aggregates equal. The frames hold the values of Arrow's plain conversion
    (``arrow_compact.pandas_values``: ``str`` objects, not categoricals)."""
    from auditor.check_runner import CLUSTER_STATS_COLUMNS
    from auditor.engines.local.tables import ArrowRows, rollup_tables, segment_frame
    from auditor.engines.local.engine import release_memory

    table = _collect_table(replica_stats, dirs)
    out = {"replica_stats": segment_frame(table.select(list(CLUSTER_STATS_COLUMNS)))}
    out.update((name, rollup.to_pandas()) for name, rollup in rollup_tables(table).items())
    release_memory()  # the rollups' group-by temporaries
    return ArrowRows(table), out


#: Rows per Spark job when the driver collects a table of a row per partition dir.
ROWS_PER_COLLECT_SLICE = 100_000


#: What names a partition dir in both tables collected in slices (its statistics and the cluster
#: checks' partition columns): the columns a row's slice is hashed from.
SLICE_IDENTITY_COLUMNS = ("broker_id", "log_dir", "topic", "partition", "dir_kind")


def _collect_table(df, rows: int):
    """A DataFrame of about ``rows`` rows (one per partition dir) on the driver as a compacted
    Arrow table (``auditor.arrow_compact``: repeated strings, topic, log dir, dir kind, cluster id,
    as sorted dictionaries; an all-null column on the zero page), collected in slices of about
    :data:`ROWS_PER_COLLECT_SLICE` rows: a Spark job each, one after the other, a row's slice
    picked by a hash of its identity (:data:`SLICE_IDENTITY_COLUMNS`). The driver JVM holds one
    slice's Arrow batches at a time (one
    ``toArrow`` of 500,000 dirs' statistics grew its heap by ~100 MiB, which it kept), and this
    process one slice's plain strings: the slices are compacted as they come and joined without a
    plain copy (``arrow_compact.concat_compacted``). The rows come in slice order (Spark's order
    of them was its join's: no order is promised)."""
    from pyspark.sql import functions as F

    from auditor.arrow_compact import compact_columns, concat_compacted
    from auditor.engines.local.engine import release_memory

    slices = max(1, math.ceil(rows / ROWS_PER_COLLECT_SLICE))
    if slices == 1:
        return compact_columns(df.toArrow())
    # the slice from the dir's identity only: a statistic (a double summed in another order when a
    # lost executor's partition is computed again) could move a row to another slice between jobs
    identity = [c for c in SLICE_IDENTITY_COLUMNS if c in df.columns] or df.columns
    which = F.pmod(F.xxhash64(*[F.col(c) for c in identity]), F.lit(slices))
    tables = []
    for i in range(slices):
        tables.append(compact_columns(df.where(which == i).toArrow()))
        release_memory()  # the slice's plain strings
    return concat_compacted(tables)


def _versions(spark, gx_version: str) -> dict[str, str]:
    import pyspark

    return versions("spark", gx_version, pyspark=pyspark.__version__, spark=spark.version)


def _spark_scan(spark, req, tmp: str | None, progress: Progress):
    """The segment and partition tables on Spark: from manifests, from log dirs, or (``--state``)
    scanned in-process with the scan state into the temporary manifest ``tmp``."""
    from auditor.engines.spark import read_manifests, scan_dataframes

    if req.manifests:
        progress(f"reading {len(req.manifests)} manifest location(s)")
        return read_manifests(spark, req.manifests)
    if tmp is not None:
        progress(f"scanning {len(req.log_dirs)} log dir(s) at depth {req.depth} in-process with the scan "
                 f"state, into a manifest for Spark")
        collect_manifest(req.log_dirs, tmp, req.depth, state_dir=req.state_dir)
        return read_manifests(spark, [tmp])
    progress(f"scanning {len(req.log_dirs)} log dir(s) at depth {req.depth}")
    return scan_dataframes(spark, req.log_dirs, req.depth)


def _spark_timelines(segments, keys: list[tuple[str, int]], columns: Sequence[str]) -> dict[str, list[dict]]:
    """The live segments of the partitions the report draws a timeline for (few, small)."""
    if not keys:
        return {}
    from pyspark.sql import functions as F

    cond = None
    for topic, partition in keys:
        c = (F.col("topic") == topic) & (F.col("partition") == partition)
        cond = c if cond is None else (cond | c)
    timelines: dict[str, list[dict]] = {}
    for r in segments.where(cond & F.col("file_state").isNull()).select(*columns).collect():
        d = r.asDict()
        timelines.setdefault(f"{d['topic']}-{d['partition']}", []).append(d)
    return timelines
