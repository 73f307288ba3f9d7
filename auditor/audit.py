"""The audit pipeline: log dirs or manifests -> engine -> checks -> Great Expectations -> a typed outcome.

Steps, each a function: :func:`audit_context` (config, live topic configs), :func:`read_consumer_groups`,
:func:`run_tables` (on the driver or on Spark), then :class:`AuditOutcome`. The findings document
is built from the outcome by ``reports.document``; printing belongs to ``auditor.cli``.

Only small things reach the driver: the per-partition-dir statistics, the findings, the GX
results and the segments of the few partitions the report draws a timeline for. The segment
table itself stays on the executors (and in Parquet with ``--parquet``).
"""

from __future__ import annotations

import math
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from auditor import __version__
from auditor.audit_local import TableOutcome, choose_engine, run_tables_local
from auditor.check_runner import worst
from auditor.live_config import WANTED, fetch_topic_configs
from auditor.cluster.consumer_groups import commit_rows, read_groups
from auditor.cluster.remote_storage import read_log_dirs as read_remote_log_metadata
from auditor.cluster.metadata_log import MetadataLogNotFound, read_metadata_log
from auditor.cluster.metadata_audit import PartitionMoves, effective_topic_configs
from auditor.keys.audit_keys import build_key_audit, from_manifests, metadata_partitions, scan_keys_local, scan_keys_spark
from auditor.manifest import collect_manifest, find_manifests
from auditor.manifest import read_cluster_metadata as read_manifest_metadata
from auditor.manifest import read_consumer_groups as read_manifest_groups
from auditor.manifest import read_remote_log_metadata as read_manifest_remote
from auditor.units import iso_utc
from checks import REGISTRY
from checks.base import AuditContext, Finding, Severity
from checks.config import Config
from checks.expectations import CHECK as GX_CHECK

TIMELINE_COLUMNS = ("broker_id", "log_dir", "topic", "partition", "base_offset", "log_mtime_ms", "min_timestamp_ms",
                    "min_batch_timestamp_ms", "max_timestamp_ms", "log_size_bytes", "is_active")
MAX_TIMELINE_PARTITIONS = 6
#: Checks whose flagged partitions get a segment timeline chart in the report.
TIMELINE_CHECKS = ("mtime.reset", "timestamps.bounds", "retention.future_timestamp", "replay.safety",
                   "timestamps.backward", "retention.overdue")


@dataclass
class AuditRequest:
    log_dirs: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    depth: str = "headers"
    config_path: str | None = None
    fail_on: str | None = None
    at_ms: int | None = None
    topics: list[str] | None = None
    master: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    bootstrap_servers: str | None = None
    parquet_dir: str | None = None
    now_ms: int | None = None
    engine: str = "auto"
    """auto (small inputs on the driver, large ones on Spark: auditor.audit_local), local or spark."""
    state_dir: str | None = None
    """Incremental scans: the scan state dir (auditor.scan.state); the scan then runs in-process."""
    remote_storage_dir: str | None = None
    """Tiered storage: LocalTieredStorage's directory (the remote segments' files), for exact replay answers."""
    keys: bool = False
    """Key statistics from the log dirs (issue 23): every record's key (``keys_sample_bytes``: the
    newest N bytes of each partition); manifests carry theirs when collected with --keys."""
    keys_sample_bytes: int | None = None


def _timeline_keys(findings: list[Finding]) -> list[tuple[str, int]]:
    ranked = sorted((f for f in findings if f.check in TIMELINE_CHECKS and f.severity >= Severity.WARN
                     and f.topic is not None and f.partition is not None), key=Finding.sort_key)
    keys: list[tuple[str, int]] = []
    for f in ranked:
        if (f.topic, f.partition) not in keys:
            keys.append((f.topic, f.partition))
    return keys[:MAX_TIMELINE_PARTITIONS]


def _versions(spark) -> dict:
    import great_expectations as gx
    import pyspark

    return {"kafka-log-auditor": __version__, "python": platform.python_version(), "pyspark": pyspark.__version__,
            "spark": spark.version, "great_expectations": gx.__version__}


#: Segment rows per Spark partition for the checks and the Great Expectations suite.
ROWS_PER_CHECK_SLICE = 100_000


def _run_tables_spark(req: AuditRequest, ctx: AuditContext, progress: Callable[[str], None]) -> TableOutcome:
    """The table stages on Spark (started here, once, and stopped before returning)."""
    from auditor.check_runner import run_spark
    from auditor.engine import aggregates, build_spark, write_parquet
    from checks.expectations import run_expectations

    tmp = None
    progress("starting Spark")
    spark = build_spark(req.master, req.spark_conf)
    if req.state_dir and not req.manifests:
        if spark.sparkContext.master.startswith("local"):
            tmp = tempfile.mkdtemp(prefix="kafka-audit-scan-")
        else:  # executors elsewhere cannot read a manifest in this driver's temp dir
            progress(f"--state not used: the executors of {spark.sparkContext.master} cannot read the driver's "
                     "temporary manifest (run `kafka-audit collect --state` on the brokers and audit the manifests)")
    try:
        read_keys(req, ctx, progress, spark)
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
        progress(f"running the checks ({segment_rows:,} segment rows)")
        findings = run_spark(segments, partitions, aggs, ctx)
        progress("validating the segment table (Great Expectations)")
        gx = run_expectations(segments, ctx)
        findings = sorted(findings + gx.findings, key=Finding.sort_key)
        progress("collecting what the report shows")
        stats = [r.asDict(recursive=True) for r in aggs["partition_stats"].collect()]
        timelines = _spark_timelines(scan.segments, _timeline_keys(findings))
        versions = _versions(spark)
        log_dir_infos = scan.log_dirs
        scan.unpersist()
    finally:
        spark.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return TableOutcome(findings=findings, gx=gx, stats=stats, timelines=timelines, versions=versions,
                        log_dirs=log_dir_infos)


def _spark_scan(spark, req: AuditRequest, tmp: str | None, progress: Callable[[str], None]):
    """The segment and partition tables on Spark: from manifests, from log dirs, or (``--state``)
    scanned in-process with the scan state into the temporary manifest ``tmp``."""
    from auditor.engine import read_manifests, scan_dataframes

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


def _spark_timelines(segments, keys: list[tuple[str, int]]) -> dict[str, list[dict]]:
    """The live segments of the partitions the report draws a timeline for (few, small)."""
    if not keys:
        return {}
    from pyspark.sql import functions as F

    cond = None
    for topic, partition in keys:
        c = (F.col("topic") == topic) & (F.col("partition") == partition)
        cond = c if cond is None else (cond | c)
    timelines: dict[str, list[dict]] = {}
    for r in segments.where(cond & F.col("file_state").isNull()).select(*TIMELINE_COLUMNS).collect():
        d = r.asDict()
        timelines.setdefault(f"{d['topic']}-{d['partition']}", []).append(d)
    return timelines


def read_cluster_metadata(req: AuditRequest, progress: Callable[[str], None]):
    """The KRaft metadata log under the audited log dirs, with its history, or the copy the
    manifests carry (the most advanced one; auditor.manifest). None: none there."""
    if req.manifests:
        log, notes = read_manifest_metadata(req.manifests)
        for note in notes:
            progress(f"metadata log copy not used: {note}")
        if log is not None:
            progress(f"metadata log {log.metadata_dir} (from a manifest): {len(log.state.topics)} topics, "
                     f"{len(log.history)} changes")
        return log
    if not req.log_dirs:
        return None
    try:
        log = read_metadata_log(req.log_dirs, history=True)
    except MetadataLogNotFound:
        return None
    progress(f"metadata log {log.metadata_dir}: {len(log.state.topics)} topics, {len(log.history)} changes")
    return log


def topic_config_layers(req: AuditRequest, progress: Callable[[str], None], log=None) -> tuple[dict, dict, list[str]]:
    """(topic configs, where each came from, notes). Precedence, highest first: the live cluster
    (``--bootstrap-server``), the KRaft metadata log under the log dirs (the topic's dynamic config,
    else the dynamic cluster default), then (in ``AuditContext.kafka_setting``) the config file's
    ``kafka:`` block, then Kafka's defaults. ``log``: the metadata log when already read."""
    configs: dict[str, dict[str, str]] = {}
    sources: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    if log is None:
        log = read_cluster_metadata(req, progress)
    if log is not None:
        for topic, cfg in effective_topic_configs(log.state, WANTED).items():
            configs[topic] = {k: v for k, (v, _where) in cfg.items()}
            sources[topic] = {k: where for k, (_v, where) in cfg.items()}
        notes += [str(n) for n in log.notes]
    if req.bootstrap_servers:
        progress(f"reading topic configs from {req.bootstrap_servers}")
        for topic, cfg in fetch_topic_configs(req.bootstrap_servers).items():
            configs.setdefault(topic, {}).update(cfg)
            sources.setdefault(topic, {}).update({k: "live cluster" for k in cfg})
    return configs, sources, notes


def audit_context(req: AuditRequest, progress: Callable[[str], None]) -> AuditContext:
    """Step 1: the config (file, --fail-on), the KRaft metadata log (topic configs, the history of
    moves for KLA020), the live topic configs."""
    config = Config.load(req.config_path)
    if req.fail_on:
        config.fail_on = Severity.parse(req.fail_on)
    log = read_cluster_metadata(req, progress)
    topic_configs, sources, notes = topic_config_layers(req, progress, log)
    ctx = AuditContext(now_ms=req.now_ms or int(time.time() * 1000), config=config, topic_configs=topic_configs,
                       replay_at_ms=req.at_ms, replay_topics=tuple(req.topics) if req.topics else None)
    if log is not None:
        ctx.partition_moves = PartitionMoves.from_log(log)
    ctx.__dict__["key_partitions"] = metadata_partitions(log)  # partition counts and additions, for read_keys
    ctx.__dict__["topic_config_sources"] = sources     # read by run_audit for the outcome
    ctx.__dict__["metadata_notes"] = notes
    return ctx


def read_consumer_groups(req: AuditRequest, ctx: AuditContext, progress: Callable[[str], None]):
    """Step 2: the consumer groups' committed offsets, for the groups.* checks (__consumer_offsets
    on disk, or the copy the manifests carry); None when there is none."""
    if req.manifests:
        groups, notes = read_manifest_groups(req.manifests)
        for note in notes:
            progress(f"consumer groups copy not used: {note}")
    elif req.log_dirs:
        progress("reading consumer groups from __consumer_offsets")
        groups = read_groups(req.log_dirs)
    else:
        return None
    if groups is not None:
        ctx.group_offsets = commit_rows(groups)
    return groups


def read_remote_storage(req: AuditRequest, ctx: AuditContext, progress: Callable[[str], None]) -> None:
    """Step 2b, with --at: tiered storage (KIP-405): what ``__remote_log_metadata`` in the log dirs
    (or the manifests' copy) says is in remote storage, for replay.safety (remote ranges are no gap; the answer there)."""
    if req.at_ms is None or not (req.log_dirs or req.manifests):
        return
    if req.manifests:   # the copy collect wrote (None: the manifests carry none; as before)
        ctx.remote_logs = read_manifest_remote(req.manifests)[0]
    else:
        progress("reading __remote_log_metadata (tiered storage)")
        ctx.remote_logs = read_remote_log_metadata(req.log_dirs)
    ctx.remote_storage_dir = req.remote_storage_dir


def wants_keys(req: AuditRequest) -> bool:
    return bool(req.manifests) or req.keys or req.keys_sample_bytes is not None


def read_keys(req: AuditRequest, ctx: AuditContext, progress: Callable[[str], None], spark=None) -> None:
    """Step 2c: the key statistics for the keys.* checks and KLA001's cause (``ctx.keys``): the
    manifests' key parts, or (``--keys``) the log dirs' keys, on the executors when ``spark`` is given."""
    if not wants_keys(req):
        return
    counts, added = ctx.__dict__.get("key_partitions") or ({}, {})
    prefix = ctx.config.key_prefix_bytes
    if req.manifests:
        pairs, notes = from_manifests(find_manifests(req.manifests))
        source = "manifests (collect --keys)"
    else:
        mode = "all records" if req.keys_sample_bytes is None else f"the newest {req.keys_sample_bytes:,} bytes per partition"
        progress(f"reading the keys of every partition ({mode}{', on the executors' if spark is not None else ''})")
        scan = scan_keys_local if spark is None else (lambda *a: scan_keys_spark(spark, *a))
        pairs, notes, source = scan(req.log_dirs, req.keys_sample_bytes, prefix), [], f"log dirs ({mode})"
    ctx.keys = build_key_audit(pairs, source, notes=notes, prefix_bytes=prefix, counts=counts, added=added)
    for note in ctx.keys.notes:
        progress(f"keys: {note}")


def run_tables(req: AuditRequest, ctx: AuditContext, progress: Callable[[str], None]) -> TableOutcome:
    """Step 3: scan, aggregates, checks and Great Expectations, on the driver or on Spark."""
    engine, why = choose_engine(req)
    progress(f"engine: {engine} ({why})")
    if engine == "local":
        read_keys(req, ctx, progress)
        out = run_tables_local(req, ctx, progress, _timeline_keys, TIMELINE_COLUMNS)
    else:
        out = _run_tables_spark(req, ctx, progress)
        out.versions["engine"] = "spark"
    out.engine = {"name": engine, "why": why}
    return out


@dataclass
class AuditOutcome:
    """What an audit found, typed: the pipeline's result before any document or rendering
    (``reports.document.build_document`` turns it into the published findings JSON)."""

    request: AuditRequest
    config: Config
    now_ms: int
    elapsed_s: float
    tables: TableOutcome
    findings: list[Finding]
    worst: Severity
    exit_code: int
    """1 when the worst finding reaches the config's fail_on (above PASS), else 0."""
    check_titles: dict[str, str]
    """Every registered check's title by name, so the document carries them (reports never read the registry)."""
    groups: object | None = None
    """The consumer groups read from disk or carried by the manifests (``auditor.cluster.consumer_groups``),
    None when there were none."""
    topic_config_sources: dict = field(default_factory=dict)
    """{topic: {config: "live cluster" | "metadata log: topic config" | "metadata log: cluster default"}};
    a config absent here came from the config file's kafka: block or Kafka's defaults."""
    metadata_notes: list = field(default_factory=list)
    """Problems met reading the KRaft metadata log (file, offset, what)."""
    keys: object | None = None
    """The key statistics the checks read (``auditor.keys.audit_keys.KeyAudit``), None when not asked."""
    topic_configs: dict = field(default_factory=dict)
    """{topic: {config: value}} as the cluster gave them (live cluster or metadata log), the values
    behind ``topic_config_sources`` (the report's "Topic configs" table)."""


def run_audit(req: AuditRequest, progress: Callable[[str], None] = lambda msg: None) -> AuditOutcome:
    """Runs the whole audit; raises ConfigError / LiveConfigError for bad input (exit 2)."""
    started = time.monotonic()
    ctx = audit_context(req, progress)
    groups = read_consumer_groups(req, ctx, progress)
    read_remote_storage(req, ctx, progress)
    tables = run_tables(req, ctx, progress)
    worst_severity = worst(tables.findings)
    fail_on = ctx.config.fail_on
    return AuditOutcome(
        request=req, config=ctx.config, now_ms=ctx.now_ms, elapsed_s=round(time.monotonic() - started, 1),
        tables=tables, findings=tables.findings, worst=worst_severity,
        exit_code=1 if worst_severity >= fail_on and fail_on > Severity.PASS else 0,
        check_titles={**{name: check.title for name, check in REGISTRY.items()}, GX_CHECK: "segment table"},
        groups=groups, topic_config_sources=ctx.__dict__.get("topic_config_sources", {}),
        metadata_notes=ctx.__dict__.get("metadata_notes", []), topic_configs=dict(ctx.topic_configs or {}),
        keys=ctx.keys)
