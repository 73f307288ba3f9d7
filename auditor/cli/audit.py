"""``kafka-audit audit``: the full audit on Spark, every check, GX, HTML + JSON report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from auditor.nightly.accept import AcceptFileError, load as load_accept
from auditor.atomic import OutputError, check_writable
from auditor.audit import AuditOutcome, AuditRequest, run_audit
from auditor.check_runner import young_objects_collected
from auditor.engines.base import ENGINES
from auditor.cli.common import add_log_dir_arguments, one_input, FORMATTER, CliError, InputProblem, keys_sample_bytes, progress_printer, refuse_urls, wants_progress
from auditor.cli.metrics_file import (MetricsFile, add_metrics_options, metrics_file_from_args, write_failure_metrics,
                                      write_run_metrics)
from auditor.engines.spark import parse_conf
from auditor.live_config import LiveConfigError
from auditor.engines.local.tables import LOCAL_MAX_SEGMENT_ROWS
from auditor.scan.state import StateDirError, check_state_dir
from auditor.schema import DEPTHS
from checks.framework.base import Severity
from auditor.units import human_bytes, parse_time
from checks.framework.config import ConfigError
from reports.document import plain_document, write_outputs
from auditor.nightly.finding_history import append as append_findings, read_previous
from auditor.nightly import capacity_history
from reports.html import where
from auditor.nightly.compare import annotate


def register(sub) -> None:
    audit = sub.add_parser(
        "audit",
        formatter_class=FORMATTER,
        help="the full audit: scan, every check, Great Expectations, HTML + JSON report",
        description=(
            "Scan log dirs (read-only) or broker manifests, run every check and the Great Expectations\n"
            "suite, and write a self-contained HTML report, a JSON of all findings and a history entry.\n"
            "Small inputs run on the driver (pandas, no JVM: seconds); large ones, or any --master, on\n"
            "Spark (see --engine). The exit code follows the worst finding (see --fail-on).\n\n"
            "Topic configs the checks use (retention.ms, segment.bytes, message.timestamp.*, cleanup.policy\n"
            "...), highest precedence first: the live cluster (--bootstrap-server); the KRaft metadata log\n"
            "(__cluster_metadata-0 under the given log dirs, or the most advanced copy the manifests carry:\n"
            "the topic's dynamic config, else the dynamic cluster default); the config file's kafka: block; Kafka's defaults. The JSON names where each\n"
            "came from (inputs.topic_config_sources)."
        ),
        epilog=(
            "examples:\n"
            "  kafka-audit audit --log-dir /data/k1 --log-dir /data/k2 --out report.html --json findings.json\n"
            "  kafka-audit audit --manifest 's3a://audits/manifests/*' --master spark://m:7077 --out r.html\n"
            "  kafka-audit audit --log-dir /data/k1 --at 2024-05-01T00:00:00Z --topic orders --fail-on WARN\n"
            "  kafka-audit audit --log-dir /data/k1 --history hist/ --accept accepted.yaml --fail-on-new FAIL --out r.html\n"
            "exit codes: 0 worst finding below --fail-on (accepted findings left out; with --fail-on-new: no new or\n"
            "worsened finding at or above it), 1 otherwise, 2 usage or config error, 3 input problem"
        ),
    )
    src = audit.add_mutually_exclusive_group()
    add_log_dir_arguments(audit, src)
    src.add_argument("--manifest", action="append", metavar="PATH", help="manifests from `kafka-audit collect` (repeatable)")
    add_audit_options(audit)
    audit.set_defaults(func=run)


def add_audit_options(p) -> None:
    """The audit's options: outputs, config, depth, replay target, Spark, progress."""
    p.add_argument("--out", metavar="REPORT.html", help="write the HTML report here")
    p.add_argument("--json", metavar="FINDINGS.json",
                   help="write every finding (and the summary) as JSON here; - for stdout (the table then goes to stderr)")
    p.add_argument("--history", metavar="DIR", help="append this run to a history dir (Parquet) and draw trends")
    add_metrics_options(p)
    p.add_argument("--accept", metavar="FILE",
                   help="YAML of accepted findings (check, where, reason, owner, expires): they get their own report "
                        "section and do not count for the exit code until they expire (docs/nightly-history.md)")
    p.add_argument("--fail-on-new", metavar="SEVERITY",
                   help="with --history: exit 1 only for findings new or worsened since the previous run at or above "
                        "SEVERITY (INFO, WARN or FAIL), instead of --fail-on's gate")
    p.add_argument("--config", metavar="FILE", help="YAML/JSON config: thresholds, per-topic overrides, fail_on")
    p.add_argument("--fail-on", metavar="SEVERITY", help="exit 1 from this severity on: INFO, WARN or FAIL (default FAIL)")
    p.add_argument("--depth", choices=DEPTHS, default="headers",
                   help="scan depth (default headers; deep adds record-level timestamps and CRCs at ~20x the cost)")
    p.add_argument("--at", metavar="TIME", help="replay target time to judge (ISO-8601 with zone, epoch ms, -6h)")
    p.add_argument("--topic", action="append", metavar="T[,T...]", help="topics for --at (default: all)")
    p.add_argument("--remote-storage-dir", metavar="DIR",
                   help="tiered storage, with --at: LocalTieredStorage's directory (the remote segments' files), for "
                        "exact answers in remote ranges")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="read topic configs from the live cluster (they win over the metadata log's and the config file's)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="where the checks and Great Expectations run: auto (default: on the driver with pandas up "
                        f"to {LOCAL_MAX_SEGMENT_ROWS:,} segments and without --master/--conf/--parquet, else Spark), "
                        "local or spark")
    p.add_argument("--state", metavar="DIR",
                   help="incremental scan: each log dir's closed-segment rows kept in DIR (outside every log dir); "
                        "only what changed since the last run is read; the scan then runs in-process")
    p.add_argument("--keys", action="store_true",
                   help="also read every record's key: the keys.* checks (a key in several partitions, two "
                        "partitioners) and the cause of skew (KLA001); manifests carry theirs (collect --keys)")
    p.add_argument("--keys-sample-mib", type=float, metavar="N",
                   help="key statistics from the newest N MiB of each partition only (implies --keys)")
    p.add_argument("--master", help="Spark master (default local[*]; implies the Spark engine)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)")
    p.add_argument("--parquet", metavar="DIR", help="also keep the segment/partition tables and aggregates as Parquet")
    p.add_argument("--as-of", metavar="TIME", help="audit time (default now): judge the data as of this time")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="progress on stderr (default: when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 whenever the audit ran (orchestrators gate on the JSON's exit_code instead)")


@dataclass
class AuditRun:
    """One audit as a command asks it: the audit itself and what to do with its outcome. Built by
    ``audit`` from its options (:func:`run_from_args`) and by ``demo`` from its sample; run by
    :func:`execute`."""

    request: AuditRequest
    out_html: str | None = None
    out_json: str | None = None
    """the findings JSON's path; - for stdout (the summary then goes to stderr)."""
    history: str | None = None
    accept_path: str | None = None
    """--accept: the YAML of accepted findings."""
    fail_on_new: str | None = None
    """--fail-on-new: a severity name (with ``history``)."""
    metrics: MetricsFile | None = None
    progress: bool = False


def request_from_args(args) -> AuditRequest:
    """The audit's arguments checked and parsed (CliError for bad ones)."""
    now = int(time.time() * 1000)
    try:
        as_of = parse_time(args.as_of, now) if args.as_of else None
        at = parse_time(args.at, as_of or now) if args.at else None
        conf = parse_conf(args.conf)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.topic and at is None:
        raise CliError("--topic needs --at (the replay target time)")
    one_input(args, "log_dirs", "manifest")
    for d in args.log_dirs or []:
        if not Path(d).is_dir():
            raise CliError(f"{d}: not a directory")
    if args.state:
        if not args.log_dirs:
            raise CliError("--state needs --log-dir (manifests carry their own state on the brokers)")
        try:
            check_state_dir(args.state, args.log_dirs)
        except StateDirError as exc:
            raise CliError(str(exc)) from None
    refuse_urls(out=args.out, json=args.json, history=args.history)
    # outputs that cannot be written fail now (exit 3), not after the scan (and before a --state moves on)
    for path, is_dir in ((args.out, False), (args.json, False), (args.history, True), (args.parquet, True),
                         (args.state, True)):
        if path and path != "-" and "://" not in path:
            check_writable(path, is_dir)
    topics = [t for chunk in (args.topic or []) for t in chunk.split(",") if t] or None
    sample = keys_sample_bytes(args.keys_sample_mib)
    return AuditRequest(log_dirs=args.log_dirs or [], manifests=args.manifest or [], depth=args.depth,
                        config_path=args.config, fail_on=args.fail_on, replay_at_ms=at, replay_topics=topics, master=args.master,
                        spark_conf=conf, bootstrap_server=args.bootstrap_server, parquet_dir=args.parquet, as_of_ms=as_of,
                        engine=args.engine, state_dir=args.state, remote_storage_dir=args.remote_storage_dir,
                        keys=args.keys, keys_sample_bytes=sample)


def run_from_args(args, metrics: MetricsFile | None) -> AuditRun:
    """``kafka-audit audit``'s options as an :class:`AuditRun` (CliError for bad ones)."""
    return AuditRun(request=request_from_args(args), out_html=args.out, out_json=args.json, history=args.history,
                    accept_path=args.accept, fail_on_new=args.fail_on_new, metrics=metrics,
                    progress=wants_progress(args))


def execute(audit_run: AuditRun) -> int:
    """Runs the audit, writes its outputs and the summary; returns the audit's exit code."""
    out_html, out_json, history = audit_run.out_html, audit_run.out_json, audit_run.history
    progress = progress_printer() if audit_run.progress else (lambda msg: None)
    accept, fail_on_new = night_options(audit_run)
    try:
        outcome: AuditOutcome = run_audit(audit_run.request, progress)
    except (ConfigError, LiveConfigError, ValueError) as exc:
        raise CliError(str(exc)) from None
    except FileNotFoundError as exc:  # no manifest there, or one a killed collect left (IncompleteManifest)
        raise InputProblem(str(exc)) from None
    progress("building the findings document")
    previous = read_previous(history, outcome.as_of_ms) if history else None
    if history:
        capacity_history.observe(history, outcome.capacity, outcome.as_of_ms)
    capacity = outcome.capacity
    # the cyclic collector paused while the document is made and written (as for each check:
    # young_objects_collected): its automatic full collections walked a fleet on fire's 150,000
    # finding dicts again and again, ~2 s of the report's CPU at 100,542 rows (benchmarks/fleet.py)
    with young_objects_collected():
        # annotated once (identities, statuses) and the Finding objects given up as they become dicts
        doc, history_rows, accept_entries = annotate(plain_document(outcome, release_findings=True), previous, accept,
                                                     fail_on_new)
        del outcome
        try:
            written = write_outputs(doc, out_html, out_json, history, progress)
            if history:
                written.append(append_findings(history, doc["as_of_ms"], history_rows, accept_entries))
                if capacity is not None:
                    written.append(capacity_history.append(history, doc["as_of_ms"], doc.get("capacity") or [],
                                                           getattr(capacity, "ledger", None)))
        except OutputError:
            raise
        except OSError as exc:  # (a full disk under the history's Parquet writer names no path)
            raise OutputError(exc.filename or history or out_json or out_html, exc) from exc
    for path in written:
        sys.stderr.write(f"wrote {path}\n")
    if audit_run.metrics is not None:  # after the outputs
        sys.stderr.write(f"wrote {write_run_metrics(audit_run.metrics, doc)}\n")
    # with --json - stdout carries the JSON alone, so the summary goes to stderr
    summary = sys.stderr if out_json == "-" else sys.stdout
    progress("the summary")
    for line in summary_lines(doc):
        summary.write(line + "\n")
    return doc["exit_code"]


def night_options(audit_run: AuditRun):
    """``--accept`` (loaded and checked now: exit 2 before any scanning) and ``--fail-on-new``."""
    accept_path, fail_on_new, history = audit_run.accept_path, audit_run.fail_on_new, audit_run.history
    if history and Path(history).exists() and not Path(history).is_dir():
        raise CliError(f"--history {history}: not a directory")
    if fail_on_new is not None:
        try:
            fail_on_new = Severity.parse(fail_on_new).name
        except ValueError as exc:
            raise CliError(f"--fail-on-new: {exc}") from None
        if fail_on_new == "PASS":
            raise CliError("--fail-on-new: PASS is not a problem; use INFO, WARN or FAIL")
        if not history:
            raise CliError("--fail-on-new needs --history DIR (new and worsened are judged against the previous audit_run)")
    if not accept_path:
        return None, fail_on_new
    try:
        return load_accept(accept_path, datetime.now(timezone.utc).date()), fail_on_new
    except AcceptFileError as exc:
        raise CliError(str(exc)) from None


#: The terminal lists every finding from WARN up while there are at most this many; above, the
#: counts per check and the worst this many (the full list: --json and the HTML report).
MAX_SUMMARY_FINDINGS = 50


def summary_lines(doc: dict, min_severity: Severity = Severity.WARN, limit: int = MAX_SUMMARY_FINDINGS) -> list[str]:
    """The verdict, the cluster totals, then the findings from ``min_severity`` up as a table: all
    of them up to ``limit``; above, the counts per check and the worst ``limit``, saying how many
    are left out and where they are."""
    t = doc["totals"]
    lines = [f"verdict {doc['verdict']} (exit {doc['exit_code']}, fails at {doc['fail_on']}): "
             + ", ".join(f"{doc['counts'][s]} {s}" for s in ("FAIL", "WARN", "INFO", "PASS")),
             f"{t['brokers']} broker(s), {t['log_dirs']} log dir(s), {t['topics']} topic(s), {t['partitions']} partition(s), "
             f"{t['segments']} segment(s), {human_bytes(t['size_bytes'])}; {doc['elapsed_s']} s"]
    since = doc.get("since")
    if since is not None:
        history = doc.get("history") or {}
        lines.append(f"since the previous run ({history.get('previous_run_utc') or 'none'}): {since['new']} new, "
                     f"{since['worsened']} worsened, {since['resolved']} resolved, {since['persisting']} still open"
                     + (f"; {len(doc.get('accepted') or [])} accepted" if doc.get("acceptance") else ""))
        lines.extend(f"note: {n}" for n in history.get("notes") or [])
    elif doc.get("acceptance"):
        lines.append(f"{len(doc.get('accepted') or [])} accepted finding(s)")
    lines.extend(capacity_lines(doc))
    floor = int(min_severity)
    shown = [f for f in doc["findings"] if Severity.parse(f["severity"]) >= floor]
    total = len(shown)
    if total > limit:
        per_check: dict[tuple[str, str], dict[str, int]] = {}
        for f in shown:
            counts = per_check.setdefault((f["code"], f["check"]), {})
            counts[f["severity"]] = counts.get(f["severity"], 0) + 1
        lines.append("")
        lines.append(f"{total:,} findings at {min_severity.name} or above, by check:")
        names = [s.name for s in reversed(Severity) if s >= floor]  # FAIL first
        lines.append(f"  {'CODE':6s} {'CHECK':32s}" + "".join(f" {n:>9s}" for n in names))
        for (code, check), counts in sorted(per_check.items(), key=lambda kv: ([-kv[1].get(n, 0) for n in names], kv[0])):
            lines.append(f"  {code:6s} {check:32s}" + "".join(f" {counts.get(n, 0):9,d}" for n in names))
        shown = sorted(shown, key=lambda f: -Severity.parse(f["severity"]))[:limit]  # stable: the document's order within a severity
    rows = [(f["severity"], f["code"], where(f, detail=False), f["message"]) for f in shown]
    if rows:
        width = min(max(len(r[2]) for r in rows), 40)
        lines.append("")
        if total > limit:
            lines.append(f"the worst {limit} of them (the other {total - limit:,} are in the --json document and the HTML report):")
        lines.append(f"  {'SEVERITY':8s} {'CODE':6s} {'WHERE':{width}s} FINDING")
        lines.extend(f"  {sev:8s} {code:6s} {place:{width}s} {message}" for sev, code, place, message in rows)
    return lines


def capacity_lines(doc: dict) -> list[str]:
    """With --history: per filesystem the bytes written since the previous run beside the model's growth."""
    lines = []
    for e in doc.get("capacity") or []:
        observed = e.get("observed_growth_bytes_per_s")
        if observed is None:
            continue
        pct = e.get("model_difference_percent")
        model = e.get("model_growth_compared_bytes_per_s")
        lines.append(f"capacity {e.get('mount') or (e.get('log_dirs') or ['?'])[0]}: written {human_bytes(int(observed))}/s "
                     f"since {e['observed_since_utc']}, "
                     + (f"model ({e['model_compared']}) {human_bytes(int(model))}/s" if model is not None else "no model")
                     + (f" ({pct:+.0f}%)" if pct is not None else ""))
        if e.get("observed_statement"):
            lines.append(f"  note: {e['observed_statement']}")
    return lines


def run(args) -> int:
    started_s, started = time.time(), time.monotonic()
    metrics = metrics_file_from_args(args)
    try:
        code = execute(run_from_args(args, metrics))
    except Exception as exc:
        if metrics is not None:
            write_failure_metrics(metrics, started_s, time.monotonic() - started, exc)
        raise
    return 0 if args.exit_zero else code
