"""The distributed scan: log dirs to the segment and partition DataFrames (the engine, layer 7).

Shape of the distributed scan
-----------------------------
1. **Listing, on the driver** (:func:`plan_tasks`): per log dir, read the log-dir header the
   scanner reads (``meta.properties`` and the four offset checkpoints: a few small files) and
   list the partition directory *names*. Nothing inside a partition directory is touched. The
   log-dir info rows (broker id, cluster id, problems met at that level) are built here, exactly as
   :func:`auditor.scan.iter_log_dir` builds them, so both engines report the same problems.
2. **Tasks**: one row per partition directory ``(log_dir, dir_name, ctx)``, where ``ctx`` is a small
   JSON with the log-dir identity and *that partition's* checkpoint values: executors never re-read
   log-dir-level files, and every task sees one consistent checkpoint snapshot. The task list is
   interleaved across log dirs (concurrent tasks then tend to hit different disks) and sliced into
   ``min(#dirs, 4 x defaultParallelism)`` partitions without a shuffle.
3. **Scan, on executors** (``mapInArrow``): each task calls
   :func:`auditor.scan.scan_partition_dir` per directory and yields Arrow RecordBatches of at most
   ``BATCH_ROWS`` rows. One pass, one output: every output row is a *union* record
   ``(kind, segment, partition)`` where ``kind`` says which of the two struct columns is set. The
   union DataFrame is persisted (``MEMORY_AND_DISK``); the segment and partition DataFrames are
   projections of it. Two passes would read every segment twice (the scan is the expensive part);
   two ``mapInArrow`` outputs do not exist in Spark. Executor memory is bounded by one partition
   directory's rows plus one batch.
4. **Aggregates** (:func:`auditor.engines.spark.aggregates.aggregates`): DataFrame group-bys per partition directory, topic,
   broker and log dir. Only aggregates and the (tiny) log-dir info ever reach the driver;
   :func:`auditor.engines.spark.parquet.write_parquet` writes the segment table from the executors.

Manifests written on brokers by ``kafka-audit collect`` (:mod:`auditor.manifest`) are read by
:func:`auditor.engines.spark.parquet.read_manifests` into the same three results.
"""


from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from auditor.engines.spark.session import BATCH_ROWS
from auditor.formats import filenames
from auditor.scan import OFFSET_CHECKPOINTS, plan_log_dir, scan_partition_dir
from auditor.scan.filesystem import FS_FIELDS
from auditor.schema import DEPTHS, PARTITION_SCHEMA, SEGMENT_SCHEMA, spark_schema

TASKS_PER_CORE = 4
"""Scan tasks per core of default parallelism: small tasks even out skewed partition sizes."""

KIND_SEGMENT = "segment"
KIND_PARTITION = "partition"

RAW_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("segment", pa.struct(list(SEGMENT_SCHEMA)), nullable=True),
        pa.field("partition", pa.struct(list(PARTITION_SCHEMA)), nullable=True),
    ]
)
"""The union record one scan task emits: ``kind`` names the struct column that is set."""

TASK_SCHEMA = pa.schema([("log_dir", pa.string()), ("dir_name", pa.string()), ("ctx", pa.string())])

LOG_DIR_INFO_KEYS = ("log_dir", "broker_id", "cluster_id", "directory_id", "partition_dirs", "problems",
                     *(name for name, _ in FS_FIELDS))  # the filesystem under it, as the local scan gives it


@dataclass
class Task:
    log_dir: str
    dir_name: str
    ctx: str


def plan_tasks(log_dir: str | os.PathLike) -> tuple[dict, list[Task]]:
    """The log-dir info row and one task per partition directory (names only: no partition is read).

    The listing is :func:`auditor.scan.plan_log_dir`, the in-process scan's own, so both engines
    report the same problems; each task carries the checkpoint values of its partition.
    """
    plan = plan_log_dir(log_dir)
    identity = {k: plan.info[k] for k in ("log_dir", "broker_id", "cluster_id", "directory_id")}
    tasks: list[Task] = []
    for path in plan.partition_dirs:
        parsed = filenames.parse_partition_dir(path.name)
        tp = (parsed.topic, parsed.partition)
        cps = {}
        for file_name in OFFSET_CHECKPOINTS.values():
            value = plan.checkpoints_by_tp.get(file_name, {}).get(tp)
            if value is not None:
                cps[file_name] = value
        tasks.append(Task(str(plan.root), path.name, json.dumps({"info": identity, "checkpoints": cps})))
    return plan.info, tasks


def _interleave(per_dir: Sequence[list[Task]]) -> list[Task]:
    out: list[Task] = []
    longest = max((len(t) for t in per_dir), default=0)
    for i in range(longest):
        out.extend(t[i] for t in per_dir if i < len(t))
    return out



def scan_tasks_arrow(batches: Iterator[pa.RecordBatch], depth: str) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: task batches in, union batches (RAW_SCHEMA) out. Runs on executors."""
    buffer: list[dict] = []
    for batch in batches:
        cols = batch.to_pydict()
        for log_dir, dir_name, ctx in zip(cols["log_dir"], cols["dir_name"], cols["ctx"]):
            c = json.loads(ctx)
            parsed = filenames.parse_partition_dir(dir_name)
            tp = (parsed.topic, parsed.partition)
            by_tp = {file_name: {tp: value} for file_name, value in c["checkpoints"].items()}
            root = Path(log_dir)
            rows, prow = scan_partition_dir(root / dir_name, depth, log_dir_info=c["info"],
                                            checkpoints_by_tp=by_tp, root=root)
            buffer.extend({"kind": KIND_SEGMENT, "segment": r, "partition": None} for r in rows)
            buffer.append({"kind": KIND_PARTITION, "segment": None, "partition": prow})
            if len(buffer) >= BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(buffer, schema=RAW_SCHEMA)
                buffer = []
    if buffer:
        yield pa.RecordBatch.from_pylist(buffer, schema=RAW_SCHEMA)


@dataclass
class SparkScan:
    """The three results of a scan: two DataFrames and the log-dir info rows (driver-side, tiny)."""

    segments: object
    partitions: object
    log_dirs: list[dict]
    raw: object | None = None
    timings_s: dict = field(default_factory=dict)

    def unpersist(self) -> None:
        if self.raw is not None:
            self.raw.unpersist()


def scan_dataframes(spark, log_dirs: Iterable[str | os.PathLike], depth: str = "index",
                    *, num_tasks: int | None = None, persist: bool = True) -> SparkScan:
    """Distributed scan of log dirs readable by the executors (shared mounts or local mode)."""
    from pyspark import StorageLevel

    if depth not in DEPTHS:
        raise ValueError(f"depth = {depth!r}, expected one of {', '.join(DEPTHS)}")
    t0 = time.perf_counter()
    infos, per_dir = [], []
    for log_dir in log_dirs:
        info, tasks = plan_tasks(log_dir)
        infos.append(info)
        per_dir.append(tasks)
    tasks = _interleave(per_dir)
    listing_s = time.perf_counter() - t0
    sc = spark.sparkContext
    n = num_tasks or max(1, min(len(tasks), TASKS_PER_CORE * sc.defaultParallelism))
    rdd = sc.parallelize([(t.log_dir, t.dir_name, t.ctx) for t in tasks], n)
    task_df = spark.createDataFrame(rdd, spark_schema(TASK_SCHEMA))
    raw = task_df.mapInArrow(lambda it: scan_tasks_arrow(it, depth), spark_schema(RAW_SCHEMA))
    if persist:
        raw = raw.persist(StorageLevel.MEMORY_AND_DISK)
    segments = raw.where(raw.kind == KIND_SEGMENT).select("segment.*")
    partitions = raw.where(raw.kind == KIND_PARTITION).select("partition.*")
    return SparkScan(segments, partitions, infos, raw if persist else None,
                     {"listing_s": listing_s, "tasks": len(tasks), "slices": n})



def driver_order(F, log_dirs: list[str], key: Sequence[str]):
    """Sort expressions giving the local engine's order (log dirs as given, then names)."""
    pos = F.array_position(F.array(*[F.lit(d) for d in log_dirs]), F.col("log_dir"))
    return [pos, *[F.col(k).asc_nulls_first() for k in key]]


def rows_to_driver(df, log_dirs: list[str], key: Sequence[str]) -> list[dict]:
    """Collects ``df`` to the driver in the in-process order. For small outputs only."""
    from pyspark.sql import functions as F

    return [r.asDict(recursive=True) for r in df.orderBy(*driver_order(F, log_dirs, key)).collect()]

