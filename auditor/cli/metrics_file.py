"""``kafka-audit audit --metrics FILE.prom``: the run's metrics for node_exporter's textfile
collector (auditor.metrics renders them; docs/metrics.md lists them). Written after the report
and JSON; a run that fails writes ``kafka_audit_run_success 0`` where it can."""

from __future__ import annotations

import sys

from auditor.cli.common import CliError
from auditor.metrics import MetricsPathError, check_path, parse_const_label, render, render_failure, write_atomic


def add_metrics_options(p) -> None:
    p.add_argument("--metrics", metavar="FILE.prom",
                   help="write the run's metrics (Prometheus text format) here, atomically, for node_exporter's "
                        "textfile collector (docs/metrics.md); a run that fails writes kafka_audit_run_success 0")
    p.add_argument("--metrics-label", action="append", default=[], metavar="NAME=VALUE",
                   help="a label on every metric, e.g. cluster=prod (repeatable): keeps the files of several "
                        "audited clusters in one textfile directory apart")


def metrics_labels(args) -> dict[str, str]:
    """``--metrics-label NAME=VALUE`` as a dict (CliError for a bad one, or one without --metrics)."""
    texts = getattr(args, "metrics_label", None) or []
    if texts and not getattr(args, "metrics", None):
        raise CliError("--metrics-label needs --metrics")
    try:
        return dict(parse_const_label(text) for text in texts)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def check_metrics_args(args) -> None:
    """CliError for an unusable --metrics path or --metrics-label, before anything runs."""
    metrics_labels(args)
    if getattr(args, "metrics", None):
        try:
            check_path(args.metrics)
        except MetricsPathError as exc:
            raise CliError(str(exc)) from None


def write_run_metrics(args, doc: dict) -> str:
    """The findings document's metrics written to --metrics; returns the path."""
    return str(write_atomic(args.metrics, render(doc, const_labels=metrics_labels(args))))


def write_failure_metrics(args, started_s: float, duration_s: float, exc: BaseException) -> None:
    """A failed run's metrics (success 0), so the alerting stack hears of it; a problem writing
    them is one more stderr line, never a mask on the failure itself."""
    try:
        text = render_failure(started_s, duration_s, 2 if isinstance(exc, CliError) else None,
                              const_labels=metrics_labels(args))
        write_atomic(args.metrics, text)
        sys.stderr.write(f"wrote {args.metrics} (kafka_audit_run_success 0)\n")
    except (OSError, CliError) as write_exc:
        sys.stderr.write(f"kafka-audit: could not write the metrics file {args.metrics}: {write_exc}\n")
