"""``kafka-audit audit --metrics FILE.prom``: the run's metrics for node_exporter's textfile
collector (reports.metrics renders them; docs/metrics.md lists them). Written after the report
and JSON; a run that fails writes ``kafka_audit_run_success 0`` where it can."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from auditor.cli.common import CliError, refuse_urls
from reports.metrics import MetricsPathError, check_path, parse_const_label, render, render_failure, write_textfile


def add_metrics_options(p) -> None:
    p.add_argument("--metrics", metavar="FILE.prom",
                   help="write the run's metrics (Prometheus text format) here, atomically, for node_exporter's "
                        "textfile collector (docs/metrics.md); a run that fails writes kafka_audit_run_success 0")
    p.add_argument("--metrics-label", action="append", default=[], metavar="NAME=VALUE",
                   help="a label on every metric, e.g. cluster=prod (repeatable): keeps the files of several "
                        "audited clusters in one textfile directory apart")


@dataclass(frozen=True)
class MetricsFile:
    """``--metrics FILE.prom`` with its ``--metrics-label``s, checked."""

    path: str
    labels: dict[str, str] = field(default_factory=dict)


def metrics_file_from_args(args) -> MetricsFile | None:
    """``--metrics`` and ``--metrics-label NAME=VALUE`` checked before anything runs (CliError for an
    unusable path, a bad label, or a label without --metrics); None without --metrics."""
    if args.metrics_label and not args.metrics:
        raise CliError("--metrics-label needs --metrics")
    try:
        labels = dict(parse_const_label(text) for text in args.metrics_label)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not args.metrics:
        return None
    refuse_urls(metrics=args.metrics)
    try:
        check_path(args.metrics)
    except MetricsPathError as exc:
        raise CliError(str(exc)) from None
    return MetricsFile(args.metrics, labels)


def write_run_metrics(metrics: MetricsFile, doc: dict) -> str:
    """The findings document's metrics written to --metrics; returns the path."""
    return str(write_textfile(metrics.path, render(doc, const_labels=metrics.labels)))


def write_failure_metrics(metrics: MetricsFile, started_s: float, duration_s: float, exc: BaseException) -> None:
    """A failed run's metrics (success 0), so the alerting stack hears of it; a problem writing
    them is one more stderr line, never a mask on the failure itself."""
    try:
        text = render_failure(started_s, duration_s, 2 if isinstance(exc, CliError) else None,
                              const_labels=metrics.labels)
        write_textfile(metrics.path, text)
        sys.stderr.write(f"wrote {metrics.path} (kafka_audit_run_success 0)\n")
    except (OSError, CliError) as write_exc:
        sys.stderr.write(f"kafka-audit: could not write the metrics file {metrics.path}: {write_exc}\n")
