"""The audit pipeline: log dirs or manifests -> engine -> checks -> Great Expectations -> a typed outcome.

Steps, each a function: :func:`audit_context` (config, live topic configs), :func:`read_consumer_groups`,
:func:`run_tables` (on the driver or on Spark), then :class:`AuditOutcome`. The findings document
is built from the outcome by ``reports.document``; printing belongs to ``auditor.cli``.

The table stages are behind one interface (``auditor.engines``: the driver's and Spark's
implementations); this module never asks which one runs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

from auditor.check_runner import worst
from auditor.capacity.rules import BROKER_KEYS
from auditor.live_config import WANTED, fetch_broker_configs, fetch_topic_configs
from auditor.cluster.consumer_groups import commit_rows, read_groups
from auditor.cluster.metadata_log import MetadataLogNotFound, read_metadata_log
from auditor.cluster.metadata_audit import PartitionMoves, effective_topic_configs
from auditor.plan import plan as plan_reassignment, summary as plan_summary
from auditor.capacity.steady import UNKNOWN as STEADY_UNKNOWN
from auditor.plan.inputs import MissingBrokers, add_steady_state, build_input as build_plan_input, from_metadata_state
from auditor.keys.audit_keys import metadata_partitions
from auditor.manifest import read_cluster_metadata as read_manifest_metadata
from auditor.manifest import read_consumer_groups as read_manifest_groups
from auditor.manifest import read_remote_logs
from auditor.schema import MAX_TIMELINE_PARTITIONS
from auditor.engines.base import TableOutcome
from auditor.engines.choose import select_engine
from checks import REGISTRY
from checks.framework.base import AuditContext, Finding, Severity
from checks.framework.config import Config
from checks.framework.expectations import CHECK as GX_CHECK

TIERED_KEYS = ("remote.storage.enable", "local.retention.ms", "local.retention.bytes", "min.cleanable.dirty.ratio",
               "min.compaction.lag.ms")
"""Read from the metadata log besides ``WANTED``, for the capacity projection (tiered topics' local retention,
the cleaner's dirty ratio and compaction lag)."""
TIMELINE_COLUMNS = ("broker_id", "log_dir", "topic", "partition", "base_offset", "log_mtime_ms", "min_timestamp_ms",
                    "min_batch_timestamp_ms", "max_timestamp_ms", "log_size_bytes", "is_active")
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
    replay_at_ms: int | None = None
    replay_topics: list[str] | None = None
    """--topic: the topics the replay time is judged for (None: all)."""
    master: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    bootstrap_server: str | None = None
    parquet_dir: str | None = None
    as_of_ms: int | None = None
    engine: str = "auto"
    """auto (small inputs on the driver, large ones on Spark: auditor.engines), local or spark."""
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
    # a dict, not a list's `in`: 150,000 findings on a fleet on fire made that quadratic (41 s)
    keys: dict[tuple[str, int], None] = {}
    for f in ranked:
        keys.setdefault((f.topic, f.partition))
        if len(keys) == MAX_TIMELINE_PARTITIONS:
            break
    return list(keys)


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
        for topic, cfg in effective_topic_configs(log.state, WANTED + TIERED_KEYS).items():
            configs[topic] = {k: v for k, (v, _where) in cfg.items()}
            sources[topic] = {k: where for k, (_v, where) in cfg.items()}
        notes += [str(n) for n in log.notes]
    if req.bootstrap_server:
        progress(f"reading topic configs from {req.bootstrap_server}")
        for topic, cfg in fetch_topic_configs(req.bootstrap_server, keys=WANTED + TIERED_KEYS).items():
            configs.setdefault(topic, {}).update(cfg)
            sources.setdefault(topic, {}).update({k: "live cluster" for k in cfg})
    return configs, sources, notes


def broker_setting_layers(req: AuditRequest, log) -> dict[str, tuple[str, str]]:
    """The capacity projection's broker settings (``BROKER_KEYS``): the metadata log's dynamic
    cluster defaults, then one live broker's (``--bootstrap-server``), each with where it came from."""
    out = {}
    if log is not None:
        cluster = log.state.broker_configs(None)
        out.update({k: (cluster[k], "metadata log: cluster default") for k in BROKER_KEYS if k in cluster})
    if req.bootstrap_server:
        live = fetch_broker_configs(req.bootstrap_server, BROKER_KEYS)
        out.update({k: (v, "live cluster: broker config") for k, v in live.items()})
    return out


def audit_context(req: AuditRequest, progress: Callable[[str], None]) -> AuditContext:
    """Step 1: the config (file, --fail-on), the KRaft metadata log (topic configs, the history of
    moves for KLA020), the live topic configs."""
    config = Config.load(req.config_path)
    if req.fail_on:
        config.fail_on = Severity.parse(req.fail_on)
    log = read_cluster_metadata(req, progress)
    topic_configs, sources, notes = topic_config_layers(req, progress, log)
    broker_settings = broker_setting_layers(req, log)
    return AuditContext(as_of_ms=req.as_of_ms or int(time.time() * 1000), config=config, topic_configs=topic_configs,
                        replay_at_ms=req.replay_at_ms, replay_topics=tuple(req.replay_topics) if req.replay_topics else None,
                        partition_moves=PartitionMoves.from_log(log) if log is not None else None,
                        cluster_state=log.state if log is not None else None,
                        topic_config_sources=sources, broker_settings=broker_settings, metadata_notes=notes,
                        key_partitions=metadata_partitions(log))


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
    if req.replay_at_ms is None or not (req.log_dirs or req.manifests):
        return
    if not req.manifests:
        progress("reading __remote_log_metadata (tiered storage)")
    ctx.remote_logs, _notes = read_remote_logs(req.log_dirs, req.manifests)
    ctx.remote_storage_dir = req.remote_storage_dir



def run_tables(req: AuditRequest, ctx: AuditContext, progress: Callable[[str], None]) -> TableOutcome:
    """Step 3: scan, aggregates, checks and Great Expectations, on the engine the request picks
    (``auditor.engines``: on the driver or on Spark)."""
    engine, why = select_engine(req)
    progress(f"engine: {engine.name} ({why})")
    out = engine.run_tables(req, ctx, progress, _timeline_keys, TIMELINE_COLUMNS)
    out.engine = {"name": engine.name, "why": why}
    return out


@dataclass
class AuditOutcome:
    """What an audit found, typed: the pipeline's result before any document or rendering
    (``reports.document.build_document`` turns it into the published findings JSON)."""

    request: AuditRequest
    config: Config
    as_of_ms: int
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
    capacity: object | None = None
    """The capacity projection per filesystem (``auditor.capacity.CapacityResult``), None when not made."""
    plan: dict | None = None
    """With KLA002 findings and a metadata log: the summary of the reassignment ``kafka-audit plan``
    would write (``auditor.plan.output.summary``, moves capped), else None."""


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
        request=req, config=ctx.config, as_of_ms=ctx.as_of_ms, elapsed_s=round(time.monotonic() - started, 1),
        tables=tables, findings=tables.findings, worst=worst_severity,
        exit_code=1 if worst_severity >= fail_on and fail_on > Severity.PASS else 0,
        check_titles={**{name: check.title for name, check in REGISTRY.items()}, GX_CHECK: "segment table"},
        groups=groups, topic_config_sources=ctx.topic_config_sources,
        metadata_notes=ctx.metadata_notes, topic_configs=dict(ctx.topic_configs or {}),
        keys=ctx.keys, capacity=ctx.capacity, plan=skew_plan(tables, ctx, progress))


#: moves listed in the findings document's plan (the whole list: ``kafka-audit plan --json``)
PLAN_MOVES_SHOWN = 50


def skew_plan(tables: TableOutcome, ctx: AuditContext, progress: Callable[[str], None]) -> dict | None:
    """The fix for disk skew, when KLA002 found some and the metadata log gives the replica sets:
    the summary of the plan ``kafka-audit plan`` writes from the same inputs (default options)."""
    if ctx.cluster_state is None or not any(f.code == "KLA002" and f.severity > Severity.PASS
                                            for f in tables.findings):
        return None
    progress("planning the reassignment that fixes the disk skew")
    brokers, parts, notes = from_metadata_state(ctx.cluster_state)
    dirs = {os.path.abspath(i["log_dir"]): i.get("broker_id") for i in tables.log_dirs if i.get("log_dir")}
    try:
        inp = build_plan_input(_rows(tables.stats), dirs, brokers, parts, {}, notes)
    except MissingBrokers as exc:
        return {"error": str(exc)}
    steady = getattr(ctx.capacity, "replica_steady", None)
    if steady is not None:      # balanced as kafka-audit plan does by default: the retention steady state
        add_steady_state(inp, steady.get, STEADY_UNKNOWN, "steady")
    result = plan_reassignment(inp)
    doc = plan_summary(result, inp, None)
    doc["moves_total"] = len(doc["moves"])
    doc["moves"] = doc["moves"][:PLAN_MOVES_SHOWN]
    return doc


def _rows(stats) -> list[dict]:
    if hasattr(stats, "to_pylist"):
        return stats.to_pylist()
    if hasattr(stats, "to_dict"):
        return stats.to_dict("records")
    return list(stats)
