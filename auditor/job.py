"""The Spark job: log dirs (or broker manifests) to the segment and partition DataFrames, then aggregates.

Shape of the distributed scan
-----------------------------
1. **Listing, on the driver** (:func:`plan_log_dir`): per log dir, read the log-dir header the
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
4. **Aggregates** (:func:`aggregates`): DataFrame group-bys per partition directory, topic,
   broker and log dir. Only aggregates and the (tiny) log-dir info ever reach the driver;
   :func:`write_parquet` writes the segment table from the executors.

Manifests written on brokers by ``kafka-audit collect`` (:mod:`auditor.collect`) are read by
:func:`read_manifests` into the same three results, with the schema from :mod:`auditor.schema`
enforced on read.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from auditor.schema import PARTITION_FIELDS, PARTITION_SCHEMA, SEGMENT_FIELDS, SEGMENT_SCHEMA, spark_schema

BATCH_ROWS = 2048
"""Rows per Arrow RecordBatch yielded by a scan task."""

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

LOG_DIR_INFO_KEYS = ("log_dir", "broker_id", "cluster_id", "directory_id", "partition_dirs", "problems")

LOCAL_DEFAULTS = {
    # 2-core laptop / CI box: few shuffle partitions (AQE coalesces further), modest heap.
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": None,  # filled from os.cpu_count()
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
COMMON_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": str(BATCH_ROWS),
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.compression.codec": "zstd",
    "spark.sql.debug.maxToStringFields": "200",  # the segment schema is wide; no truncation warning
}


# ---------------------------------------------------------------------------------------
# Session
# ---------------------------------------------------------------------------------------


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` to a dict; a pair without '=' is a usage error (ValueError)."""
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def spark_conf(master: str | None = None, conf: dict[str, str] | None = None) -> dict[str, str]:
    """The settings :func:`build_spark` applies: defaults for the master, then ``conf`` on top."""
    master = master or os.environ.get("KAFKA_AUDIT_SPARK_MASTER") or "local[*]"
    settings = {"spark.master": master, "spark.app.name": "kafka-log-auditor"}
    settings.update(COMMON_DEFAULTS)
    if master.startswith("local"):
        for key, value in LOCAL_DEFAULTS.items():
            settings[key] = value if value is not None else str(os.cpu_count() or 2)
    if not os.environ.get("PYSPARK_PYTHON"):
        # Python workers run the driver's interpreter (its venv has pyarrow and the auditor); on a
        # cluster whose executors live elsewhere, set spark.pyspark.python to their Python.
        settings["spark.pyspark.python"] = sys.executable
    settings.update(conf or {})
    return settings


def submitted_conf() -> dict[str, str]:
    """spark-submit's settings when it started this process, else {}.

    spark-submit starts the Python driver with its JVM already running (PYSPARK_GATEWAY_PORT);
    the settings live in that JVM's system properties, which SparkConf only sees once PySpark
    is attached to the gateway. In a plain interpreter nothing is attached here: the JVM is
    launched later by the builder, with the builder's settings (driver memory among them).
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def build_spark(master: str | None = None, conf: dict[str, str] | None = None, *, ship_code: bool | None = None):
    """A SparkSession for the audit: local[*] with small-machine defaults, or any master.

    ``conf`` overrides every default (``--conf k=v`` on the command line). Under ``spark-submit``
    pass ``master=None``: the submitted master and settings win over the defaults
    (:func:`submitted_conf`). For a non-local master the
    ``auditor`` package is zipped and shipped to executors (``ship_code``) so they need only
    pyarrow, crc32c and cramjam installed.
    """
    from pyspark.sql import SparkSession

    # Under spark-submit the launcher's settings (master, resources, --conf) win over the
    # defaults; an explicit master or --conf given to the audit wins over both.
    submitted = submitted_conf()
    submitted_master = submitted.pop("spark.master", None)
    settings = spark_conf(master or submitted_master, {**submitted, **(conf or {})})
    if "spark.pyspark.python" in settings:
        # PySpark takes the workers' interpreter from this variable when it creates the context.
        os.environ.setdefault("PYSPARK_PYTHON", settings["spark.pyspark.python"])
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.get("spark.log.level", "WARN"))
    if ship_code is None:
        ship_code = not settings["spark.master"].startswith("local")
    if ship_code:
        _ship_package(spark)
    return spark


def _ship_package(spark) -> None:
    import tempfile
    import zipfile

    import auditor

    root = Path(auditor.__file__).resolve().parent
    target = Path(tempfile.mkdtemp(prefix="kafka-audit-pkg-")) / "auditor.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*.py")):
            zf.write(path, Path("auditor") / path.relative_to(root))
    spark.sparkContext.addPyFile(str(target))


# ---------------------------------------------------------------------------------------
# Listing on the driver
# ---------------------------------------------------------------------------------------


@dataclass
class Task:
    log_dir: str
    dir_name: str
    ctx: str


def plan_log_dir(log_dir: str | os.PathLike) -> tuple[dict, list[Task]]:
    """The log-dir info row and one task per partition directory (names only: no partition is read).

    The listing is :func:`auditor.scan.plan_log_dir`, the in-process scan's own, so both engines
    report the same problems; each task carries the checkpoint values of its partition.
    """
    from auditor.formats import filenames
    from auditor.scan import OFFSET_CHECKPOINTS, plan_log_dir as list_log_dir

    plan = list_log_dir(log_dir)
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


# ---------------------------------------------------------------------------------------
# The scan on executors
# ---------------------------------------------------------------------------------------


def scan_tasks_arrow(batches: Iterator[pa.RecordBatch], depth: str) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: task batches in, union batches (RAW_SCHEMA) out. Runs on executors."""
    from auditor.formats import filenames
    from auditor.scan import scan_partition_dir

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
    import time

    from pyspark import StorageLevel

    from auditor.schema import DEPTHS

    if depth not in DEPTHS:
        raise ValueError(f"depth = {depth!r}, expected one of {', '.join(DEPTHS)}")
    t0 = time.perf_counter()
    infos, per_dir = [], []
    for log_dir in log_dirs:
        info, tasks = plan_log_dir(log_dir)
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


# ---------------------------------------------------------------------------------------
# Manifests
# ---------------------------------------------------------------------------------------


def _manifest_dirs(paths: Iterable[str]) -> list[str]:
    """Manifest directories (holding segments.parquet) named by paths, globs or parent dirs."""
    from auditor.collect import SEGMENTS_FILE

    found: list[str] = []
    for spec in paths:
        spec = str(spec)
        if "://" in spec:  # hdfs://, s3a://: the driver cannot list it; trust it is one manifest dir
            found.append(spec.rstrip("/"))
            continue
        matches = sorted(glob.glob(spec)) or [spec]
        for m in matches:
            p = Path(m)
            if (p / SEGMENTS_FILE).exists():
                found.append(str(p))
            elif p.name == SEGMENTS_FILE and p.exists():
                found.append(str(p.parent))
            elif p.is_dir():
                found.extend(str(s.parent) for s in sorted(p.rglob(SEGMENTS_FILE)))
    if not found:
        raise FileNotFoundError(f"no manifest ({SEGMENTS_FILE}) found under {', '.join(map(str, paths))}")
    return sorted(dict.fromkeys(found))


def read_manifests(spark, paths: Iterable[str]) -> SparkScan:
    """Any number of manifests written by ``kafka-audit collect`` into the same three results."""
    from auditor.collect import LOG_DIRS_FILE, LOG_DIRS_SCHEMA, PARTITIONS_FILE, SEGMENTS_FILE

    dirs = _manifest_dirs(paths)
    segments = spark.read.schema(spark_schema(SEGMENT_SCHEMA)).parquet(*[f"{d}/{SEGMENTS_FILE}" for d in dirs])
    partitions = spark.read.schema(spark_schema(PARTITION_SCHEMA)).parquet(*[f"{d}/{PARTITIONS_FILE}" for d in dirs])
    infos_df = spark.read.schema(spark_schema(LOG_DIRS_SCHEMA)).parquet(*[f"{d}/{LOG_DIRS_FILE}" for d in dirs])
    infos = [r.asDict(recursive=True) for r in infos_df.collect()]
    return SparkScan(segments.select(*SEGMENT_FIELDS), partitions.select(*PARTITION_FIELDS), infos)


# ---------------------------------------------------------------------------------------
# Aggregates
# ---------------------------------------------------------------------------------------

PARTITION_DIR_KEYS = ("broker_id", "log_dir", "topic", "partition", "dir_kind", "dir_name")


def _exact_sum(F, col: str, unknown: str):
    """Sum of ``col`` that is None when any input was unknown (flagged by ``unknown``)."""
    return F.when(F.sum(unknown) > 0, F.lit(None)).otherwise(F.coalesce(F.sum(col), F.lit(0))).cast("long")


def _rollup(F, df, keys: Sequence[str]):
    """Shared columns of the topic / broker / log-dir rollups over per-partition-dir stats."""
    return df.groupBy(*keys).agg(
        F.count("*").alias("partition_dirs"),
        F.sum(F.when(F.col("dir_kind") == "live", 1).otherwise(0)).cast("long").alias("replicas"),
        F.sum("segment_count").cast("long").alias("segment_count"),
        F.sum("size_bytes").cast("long").alias("size_bytes"),
        _exact_sum(F, "message_count", F.col("message_count").isNull().cast("int")).alias("message_count"),
        F.min("oldest_record_timestamp_ms").alias("oldest_record_timestamp_ms"),
        F.max("newest_record_timestamp_ms").alias("newest_record_timestamp_ms"),
        F.min("oldest_log_mtime_ms").alias("oldest_log_mtime_ms"),
        F.max("newest_log_mtime_ms").alias("newest_log_mtime_ms"),
        F.sum("notes").cast("long").alias("notes"),
    ).withColumn("mtime_spread_ms", F.col("newest_log_mtime_ms") - F.col("oldest_log_mtime_ms"))


def aggregates(segments, partitions, *, cache: bool = True) -> dict:
    """Per partition dir, topic, broker and log dir, as DataFrames (nothing is collected).

    Definitions (the in-process twin is in tests/test_job.py):

    * a *live segment* has no file-state suffix and a ``.log`` (the scanner's ``segment_count``);
      ``segment_count``, ``size_bytes`` (of ``.log`` files), ``message_count`` and mtimes count
      live segments only; ``index_bytes`` adds up .index/.timeindex/.txnindex of live segments;
    * ``message_count`` is the sum of ``record_count``: None as soon as one live segment's count is
      unknown (depths ``stat``/``index``, legacy compressed wrappers at ``headers``);
    * ``oldest_record_timestamp_ms`` = min over segments of ``min_timestamp_ms`` (exact, ``deep``)
      else ``min_batch_timestamp_ms`` (an upper bound, ``headers``); ``newest_record_timestamp_ms``
      = max ``max_timestamp_ms``;
    * ``mtime_spread_ms`` = newest - oldest ``.log`` mtime;
    * ``replicas`` counts ``live`` partition dirs (not -future/-delete/-stray copies, not metadata);
    * topic rows use live dirs only; broker and log-dir rows use every partition dir (disk usage).

    With ``cache`` the per-partition-dir DataFrame is persisted (unpersist it when done with the
    results, or let the session's end drop it).
    """
    from pyspark.sql import functions as F

    live = F.col("file_state").isNull() & F.col("log_size_bytes").isNotNull()
    seg = segments.groupBy(*PARTITION_DIR_KEYS).agg(
        F.sum(F.when(live, 1).otherwise(0)).cast("long").alias("_live"),
        F.sum(F.when(~live, 1).otherwise(0)).cast("long").alias("other_segment_files"),
        F.sum(F.when(live, F.col("log_size_bytes"))).cast("long").alias("_size"),
        F.sum(F.when(live, F.coalesce("index_size_bytes", F.lit(0)) + F.coalesce("timeindex_size_bytes", F.lit(0))
                     + F.coalesce("txnindex_size_bytes", F.lit(0)))).cast("long").alias("index_bytes"),
        _exact_sum(F, F.when(live, F.col("record_count")),
                   F.when(live & F.col("record_count").isNull(), 1).otherwise(0)).alias("message_count"),
        F.min(F.coalesce("min_timestamp_ms", "min_batch_timestamp_ms")).alias("oldest_record_timestamp_ms"),
        F.max("max_timestamp_ms").alias("newest_record_timestamp_ms"),
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.sum(F.size("notes")).cast("long").alias("segment_notes"),
    )
    part = partitions.select(
        *PARTITION_DIR_KEYS, "cluster_id", "topic_id", "segment_count", "size_bytes", "log_start_offset",
        "log_end_offset", "high_watermark", "oldest_log_mtime_ms", "newest_log_mtime_ms",
        F.size("notes").cast("long").alias("partition_notes"),
    )
    per_partition = (
        part.join(seg, list(PARTITION_DIR_KEYS), "left")
        .withColumn("other_segment_files", F.coalesce("other_segment_files", F.lit(0)).cast("long"))
        .withColumn("index_bytes", F.coalesce("index_bytes", F.lit(0)).cast("long"))
        .withColumn("message_count", F.when(F.col("_live").isNull(), F.lit(0)).otherwise(F.col("message_count")).cast("long"))
        .withColumn("mtime_spread_ms", F.col("newest_log_mtime_ms") - F.col("oldest_log_mtime_ms"))
        .withColumn("notes", F.col("partition_notes") + F.coalesce("segment_notes", F.lit(0)))
        .drop("_live", "_size", "segment_notes", "partition_notes")
    )
    if cache:
        # One row per partition dir (small): computed once from the segment table, reused by the
        # three rollups instead of re-reading the segments three more times.
        from pyspark import StorageLevel

        per_partition = per_partition.persist(StorageLevel.MEMORY_AND_DISK)

    live_dirs = per_partition.where(F.col("dir_kind") == "live")
    # Per topic-partition first (replicas agree on data, not on bytes): the largest replica counts.
    tp = live_dirs.groupBy("topic", "partition").agg(
        F.count("*").alias("replicas"),
        F.max("size_bytes").alias("size_bytes"),
        F.max("message_count").alias("message_count"),
        F.sum(F.col("message_count").isNull().cast("int")).alias("_unknown"),
    )
    topic_tp = tp.groupBy("topic").agg(
        F.count("*").alias("partitions"),
        F.min("replicas").alias("min_replicas"),
        F.max("replicas").alias("max_replicas"),
        F.max("size_bytes").alias("max_partition_size_bytes"),
        F.percentile("size_bytes", 0.5).alias("median_partition_size_bytes"),
        F.when(F.sum("_unknown") > 0, F.lit(None)).otherwise(F.sum("message_count")).cast("long")
        .alias("partition_message_count"),
    )
    brokers_per_topic = live_dirs.groupBy("topic").agg(F.countDistinct("broker_id").cast("long").alias("brokers"))
    per_topic = _rollup(F, live_dirs, ["topic"]).drop("partition_dirs").join(topic_tp, "topic").join(brokers_per_topic, "topic")
    per_broker = _rollup(F, per_partition, ["broker_id"]).join(
        per_partition.groupBy("broker_id").agg(F.countDistinct("log_dir").cast("long").alias("log_dirs")), "broker_id")
    per_log_dir = _rollup(F, per_partition, ["broker_id", "log_dir"])
    return {"partition_stats": per_partition, "topic_stats": per_topic,
            "broker_stats": per_broker, "log_dir_stats": per_log_dir}


# ---------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------


def write_parquet(scan: SparkScan, aggs: dict, out_dir: str | os.PathLike, mode: str = "overwrite") -> list[str]:
    """Writes segments/partitions (from the executors) and the aggregates as Parquet directories."""
    out = str(out_dir).rstrip("/")
    written = []
    for name, df in (("segments", scan.segments), ("partitions", scan.partitions), *aggs.items()):
        path = f"{out}/{name}.parquet"
        df.write.mode(mode).parquet(path)
        written.append(path)
    path = f"{out}/log_dirs.json"
    if "://" not in out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(scan.log_dirs, indent=1) + "\n")
        written.append(path)
    return written


def _order(F, log_dirs: list[str], key: Sequence[str]):
    """Sort expressions giving the in-process engine's order (log dirs as given, then names)."""
    pos = F.array_position(F.array(*[F.lit(d) for d in log_dirs]), F.col("log_dir"))
    return [pos, *[F.col(k).asc_nulls_first() for k in key]]


def collect_rows(df, log_dirs: list[str], key: Sequence[str]) -> list[dict]:
    """Collects ``df`` to the driver in the in-process order. For small outputs only."""
    from pyspark.sql import functions as F

    return [r.asDict(recursive=True) for r in df.orderBy(*_order(F, log_dirs, key)).collect()]


def scan_command(args) -> int:
    """``kafka-audit scan --engine spark``: same outputs as the in-process engine.

    ``--parquet DIR`` is the scalable path: the segment table goes from executors to Parquet,
    the driver only sees aggregates. ``--json`` and the default table view collect both tables
    to the driver (fine for small clusters); ``--csv`` streams segment rows through the driver
    (``toLocalIterator``: one Spark partition in memory at a time).
    """
    import csv
    import time

    from auditor import cli

    spark = build_spark(args.master, parse_conf(args.conf))
    try:
        if getattr(args, "manifest", None):
            scan = read_manifests(spark, args.manifest)
            order_dirs = [i["log_dir"] for i in scan.log_dirs]
        else:
            scan = scan_dataframes(spark, args.log_dirs, args.depth)
            order_dirs = [i["log_dir"] for i in scan.log_dirs]
        seg_key = ("dir_name", "base_offset", "file_state")
        if args.parquet:
            aggs = aggregates(scan.segments, scan.partitions)
            for path in write_parquet(scan, aggs, args.parquet):
                sys.stderr.write(f"wrote {path}\n")
        if args.json:
            doc = {
                "tool": "kafka-log-auditor",
                "version": cli.__version__,
                "depth": args.depth,
                "engine": "spark",
                "generated_at_utc": cli.iso_utc(time.time_ns() // 1_000_000),
                "log_dirs": [{k: i.get(k) for k in LOG_DIR_INFO_KEYS} for i in scan.log_dirs],
                "partitions": [cli._with_utc(p) for p in collect_rows(scan.partitions, order_dirs, ("dir_name",))],
                "segments": [cli._with_utc(s) for s in collect_rows(scan.segments, order_dirs, seg_key)],
            }
            json.dump(doc, sys.stdout, indent=1)
            sys.stdout.write("\n")
        elif args.csv:
            from pyspark.sql import functions as F

            writer = csv.DictWriter(sys.stdout, fieldnames=SEGMENT_FIELDS)
            writer.writeheader()
            for r in scan.segments.orderBy(*_order(F, order_dirs, seg_key)).toLocalIterator():
                writer.writerow({k: (";".join(map(str, v)) if isinstance(v, list) else v) for k, v in r.asDict().items()})
        elif not args.parquet:
            from auditor.scan import ScanResult

            result = ScanResult(collect_rows(scan.segments, order_dirs, seg_key),
                                collect_rows(scan.partitions, order_dirs, ("dir_name",)), scan.log_dirs)
            cli._write_table(result, sys.stdout)
        scan.unpersist()
    finally:
        spark.stop()
    bad = [i for i in scan.log_dirs if i["partition_dirs"] == 0 and i["broker_id"] is None]
    return cli.EXIT_INPUT_PROBLEM if bad else cli.EXIT_OK
