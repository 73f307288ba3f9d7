"""The audit: log dirs or manifests -> Spark job -> checks -> Great Expectations -> report.

Only small things reach the driver: the per-partition-dir statistics, the findings, the GX
results and the segments of the few partitions the report draws a timeline for. The segment
table itself stays on the executors (and in Parquet with ``--parquet``).
"""

from __future__ import annotations

import json
import math
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from auditor import __version__
from auditor.audit_local import TableOutcome, choose_engine, run_tables_local
from auditor.check_runner import worst
from auditor.cluster.consumer_groups import commit_rows, read_groups
from auditor.manifest import collect_manifest
from auditor.units import iso_utc
from checks.base import AuditContext, Finding, Severity
from checks.config import Config

SCHEMA_VERSION = 1
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


@dataclass
class AuditResult:
    doc: dict
    findings: list[Finding]
    worst: Severity
    exit_code: int


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
    from auditor.engine import aggregates, build_spark, read_manifests, scan_dataframes, write_parquet
    from checks.expectations import run_expectations

    tmp = None
    progress("starting Spark")
    spark = build_spark(req.master, req.spark_conf)
    try:
        if req.manifests:
            progress(f"reading {len(req.manifests)} manifest location(s)")
            scan = read_manifests(spark, req.manifests)
        elif req.state_dir:
            progress(f"scanning {len(req.log_dirs)} log dir(s) at depth {req.depth} in-process with the scan "
                     f"state, into a manifest for Spark")
            tmp = tempfile.mkdtemp(prefix="kafka-audit-scan-")
            collect_manifest(req.log_dirs, tmp, req.depth, state_dir=req.state_dir)
            scan = read_manifests(spark, [tmp])
        else:
            progress(f"scanning {len(req.log_dirs)} log dir(s) at depth {req.depth}")
            scan = scan_dataframes(spark, req.log_dirs, req.depth)
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
        timelines = {}
        keys = _timeline_keys(findings)
        if keys:
            from pyspark.sql import functions as F

            cond = None
            for topic, partition in keys:
                c = (F.col("topic") == topic) & (F.col("partition") == partition)
                cond = c if cond is None else (cond | c)
            for r in scan.segments.where(cond & F.col("file_state").isNull()).select(*TIMELINE_COLUMNS).collect():
                d = r.asDict()
                timelines.setdefault(f"{d['topic']}-{d['partition']}", []).append(d)
        versions = _versions(spark)
        log_dir_infos = scan.log_dirs
        scan.unpersist()
    finally:
        spark.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return TableOutcome(findings=findings, gx=gx, stats=stats, timelines=timelines, versions=versions,
                        log_dirs=log_dir_infos)


def run_audit(req: AuditRequest, progress: Callable[[str], None] = lambda msg: None) -> AuditResult:
    """Runs the whole audit; raises ConfigError / LiveConfigError for bad input (exit 2)."""

    started = time.monotonic()
    config = Config.load(req.config_path)
    if req.fail_on:
        config.fail_on = Severity.parse(req.fail_on)
    topic_configs = {}
    if req.bootstrap_servers:
        from auditor.live_config import fetch_topic_configs

        progress(f"reading topic configs from {req.bootstrap_servers}")
        topic_configs = fetch_topic_configs(req.bootstrap_servers)
    now_ms = req.now_ms or int(time.time() * 1000)
    ctx = AuditContext(now_ms=now_ms, config=config, topic_configs=topic_configs, replay_at_ms=req.at_ms,
                       replay_topics=tuple(req.topics) if req.topics else None)
    groups = None
    if req.log_dirs:
        # the consumer groups' committed offsets, for the groups.* checks (__consumer_offsets on disk)
        progress("reading consumer groups from __consumer_offsets")
        groups = read_groups(req.log_dirs)
        ctx.group_offsets = commit_rows(groups)

    engine, why = choose_engine(req)
    progress(f"engine: {engine} ({why})")
    if engine == "local":
        out = run_tables_local(req, ctx, progress, _timeline_keys, TIMELINE_COLUMNS)
    else:
        out = _run_tables_spark(req, ctx, progress)
    out.engine = {"name": engine, "why": why}
    findings, gx, stats, timelines = out.findings, out.gx, out.stats, out.timelines
    versions, log_dir_infos = out.versions, out.log_dirs
    if engine == "spark":
        versions["engine"] = "spark"

    worst_sev = worst(findings)
    exit_code = 1 if worst_sev >= config.fail_on and config.fail_on > Severity.PASS else 0
    counts = {s.name: sum(1 for f in findings if f.severity == s) for s in Severity}
    live = [s for s in stats if s.get("dir_kind") == "live"]
    totals = {
        "brokers": len({s["broker_id"] for s in stats if s.get("broker_id") is not None}),
        "log_dirs": len(log_dir_infos),
        "topics": len({s["topic"] for s in live}),
        "partitions": len({(s["topic"], s["partition"]) for s in live}),
        "partition_dirs": len(stats),
        "segments": int(sum(s.get("segment_count") or 0 for s in stats)),
        "size_bytes": int(sum(s.get("size_bytes") or 0 for s in stats)),
        "consumer_groups": len(groups.live) if groups is not None else 0,
    }
    doc = {
        "tool": "kafka-log-auditor",
        "version": __version__,
        "schema_version": SCHEMA_VERSION,
        "generated_at_ms": now_ms,
        "generated_at_utc": iso_utc(now_ms),
        "elapsed_s": round(time.monotonic() - started, 1),
        "verdict": worst_sev.name,
        "fail_on": config.fail_on.name,
        "exit_code": exit_code,
        "counts": counts,
        "totals": totals,
        "inputs": {"log_dirs": [str(d) for d in req.log_dirs], "manifests": [str(m) for m in req.manifests],
                   "depth": req.depth if not req.manifests else "manifest",
                   "log_dir_problems": [p for i in log_dir_infos for p in (i.get("problems") or [])],
                   "consumer_group_notes": list(groups.notes) if groups is not None else []},
        "replay": ({"at_ms": req.at_ms, "at_utc": iso_utc(req.at_ms), "topics": req.topics or None}
                   if req.at_ms is not None else None),
        "versions": versions,
        "engine": out.engine,
        "config": config.to_dict(),
        "expectations": {"success": gx.success, "gx_version": gx.gx_version, "element_count": gx.element_count,
                         "results": gx.results},
        "findings": [_finding_doc(f) for f in findings],
        "tables": {"partition_stats": [_jsonable(s) for s in stats], "timelines": timelines},
    }
    return AuditResult(doc=doc, findings=findings, worst=worst_sev, exit_code=exit_code)


def _finding_doc(f: Finding) -> dict:
    return f.to_dict()


def _jsonable(row: dict) -> dict:
    return {k: (float(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, (int, float)) else v) for k, v in row.items()}


def summary_lines(result: AuditResult, min_severity: Severity = Severity.WARN) -> list[str]:
    """The verdict, the cluster totals, then the findings from ``min_severity`` up as a table."""
    doc = result.doc
    t = doc["totals"]
    from auditor.units import human_bytes

    lines = [f"verdict {doc['verdict']} (exit {doc['exit_code']}, fails at {doc['fail_on']}): "
             + ", ".join(f"{doc['counts'][s]} {s}" for s in ("FAIL", "WARN", "INFO", "PASS")),
             f"{t['brokers']} broker(s), {t['log_dirs']} log dir(s), {t['topics']} topic(s), {t['partitions']} partition(s), "
             f"{t['segments']} segment(s), {human_bytes(t['size_bytes'])}; {doc['elapsed_s']} s"]
    rows = [(f.severity.name, f.code, _where(f), f.message) for f in result.findings if f.severity >= min_severity]
    if rows:
        width = min(max(len(r[2]) for r in rows), 40)
        lines.append("")
        lines.append(f"  {'SEVERITY':8s} {'CODE':6s} {'WHERE':{width}s} FINDING")
        lines.extend(f"  {sev:8s} {code:6s} {where:{width}s} {message}" for sev, code, where, message in rows)
    return lines


def _where(f: Finding) -> str:
    if f.topic is not None and f.partition is not None:
        return f"{f.topic}-{f.partition}"
    return f.topic or "cluster"


def progress_printer(stream=sys.stderr) -> Callable[[str], None]:
    started = time.monotonic()

    def show(msg: str) -> None:
        stream.write(f"[{time.monotonic() - started:6.1f}s] {msg}\n")
        stream.flush()

    return show
