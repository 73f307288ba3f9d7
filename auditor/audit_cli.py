"""``kafka-audit audit``, ``kafka-audit report`` and ``kafka-audit demo``."""

from __future__ import annotations

import json
import sys
import tarfile
import tempfile
import time
from importlib.resources import files
from pathlib import Path

from auditor.schema import DEPTHS
from auditor.units import parse_time

DEMO_SAMPLE = "demo-cluster.tar.gz"


def register(sub, formatter) -> None:
    audit = sub.add_parser(
        "audit",
        formatter_class=formatter,
        help="the full audit: scan on Spark, every check, Great Expectations, HTML + JSON report",
        description=(
            "Scan log dirs (read-only) or broker manifests on Spark, run every check and the Great\n"
            "Expectations suite, and write a self-contained HTML report, a JSON of all findings and\n"
            "a history entry. The exit code follows the worst finding (see --fail-on)."
        ),
        epilog=(
            "examples:\n"
            "  kafka-audit audit --log-dir /data/k1 --log-dir /data/k2 --out report.html --json findings.json\n"
            "  kafka-audit audit --manifest 's3a://audits/manifests/*' --master spark://m:7077 --out r.html\n"
            "  kafka-audit audit --log-dir /data/k1 --at 2024-05-01T00:00:00Z --topic orders --fail-on WARN\n"
            "exit codes: 0 worst finding below --fail-on, 1 at or above it, 2 usage or config error, 3 input problem"
        ),
    )
    src = audit.add_mutually_exclusive_group(required=True)
    src.add_argument("--log-dir", action="append", metavar="DIR", help="a broker log dir (repeatable)")
    src.add_argument("--manifest", action="append", metavar="PATH", help="manifests from `kafka-audit collect` (repeatable)")
    _common(audit)
    audit.set_defaults(func=run_audit_command)

    report = sub.add_parser("report", formatter_class=formatter,
                            help="re-render the HTML report from a findings JSON (and a history dir)",
                            description="Render the HTML report again from the JSON `audit --json` wrote.")
    report.add_argument("findings_json", metavar="FINDINGS.json")
    report.add_argument("--out", required=True, metavar="REPORT.html")
    report.add_argument("--history", metavar="DIR", help="history dir for the trends")
    report.set_defaults(func=run_report_command)

    demo = sub.add_parser(
        "demo",
        formatter_class=formatter,
        help="the full audit on a bundled sample of real broker data (Spark local mode)",
        description=(
            "Unpack a bundled sample of log dirs written by real Kafka 4.2 brokers, with planted\n"
            "anomalies (a skewed topic, a reassigned partition, a retention gap, out-of-bound and\n"
            "future timestamps), restore its files' mtimes, and run the full audit on Spark local\n"
            "mode. The audit time is the time the sample was made, and the sample's config scales\n"
            "the time thresholds to the minutes the sample took to make."
        ),
    )
    demo.add_argument("--out", metavar="DIR", help="where to unpack and write the report (default: a new temp dir)")
    demo.add_argument("--master", help="Spark master (default local[*])")
    demo.set_defaults(func=run_demo_command)


def _common(p) -> None:
    p.add_argument("--out", metavar="REPORT.html", help="write the HTML report here")
    p.add_argument("--json", metavar="FINDINGS.json",
                   help="write every finding (and the summary) as JSON here; - for stdout (the table then goes to stderr)")
    p.add_argument("--history", metavar="DIR", help="append this run to a history dir (Parquet) and draw trends")
    p.add_argument("--config", metavar="FILE", help="YAML/JSON config: thresholds, per-topic overrides, fail_on")
    p.add_argument("--fail-on", metavar="SEVERITY", help="exit 1 from this severity on: INFO, WARN or FAIL (default FAIL)")
    p.add_argument("--depth", choices=DEPTHS, default="headers",
                   help="scan depth (default headers; deep adds record-level timestamps and CRCs at ~20x the cost)")
    p.add_argument("--at", metavar="TIME", help="replay target time to judge (ISO-8601 with zone, epoch ms, -6h)")
    p.add_argument("--topic", action="append", metavar="T[,T...]", help="topics for --at (default: all)")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="read topic configs from the live cluster")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)")
    p.add_argument("--parquet", metavar="DIR", help="also keep the segment/partition tables and aggregates as Parquet")
    p.add_argument("--as-of", metavar="TIME", help="audit time (default now): judge the data as of this time")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="progress on stderr (default: when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 whenever the audit ran (orchestrators gate on the JSON's exit_code instead)")


def _request(args):
    from auditor import cli
    from auditor.audit import AuditRequest
    from auditor.job import parse_conf

    now = int(time.time() * 1000)
    try:
        as_of = parse_time(args.as_of, now) if getattr(args, "as_of", None) else None
        at = parse_time(args.at, as_of or now) if args.at else None
        conf = parse_conf(args.conf)
    except ValueError as exc:
        raise cli.CliError(str(exc)) from None
    if args.topic and at is None:
        raise cli.CliError("--topic needs --at (the replay target time)")
    for d in args.log_dir or []:
        if not Path(d).is_dir():
            raise cli.CliError(f"{d}: not a directory")
    topics = [t for chunk in (args.topic or []) for t in chunk.split(",") if t] or None
    return AuditRequest(log_dirs=args.log_dir or [], manifests=args.manifest or [], depth=args.depth,
                        config_path=args.config, fail_on=args.fail_on, at_ms=at, topics=topics, master=args.master,
                        spark_conf=conf, bootstrap_servers=args.bootstrap_server, parquet_dir=args.parquet, now_ms=as_of)


def _execute(req, args, out_html, out_json, history) -> int:
    from auditor import cli
    from auditor.audit import progress_printer, run_audit, summary_lines, write_outputs
    from checks.config import ConfigError
    from auditor.live_config import LiveConfigError

    show = args.progress if args.progress is not None else sys.stderr.isatty()
    progress = progress_printer() if show else (lambda msg: None)
    try:
        result = run_audit(req, progress)
    except (ConfigError, LiveConfigError, ValueError) as exc:
        raise cli.CliError(str(exc)) from None
    for path in write_outputs(result, out_html, out_json, history):
        sys.stderr.write(f"wrote {path}\n")
    # with --json - stdout carries the JSON alone, so the summary goes to stderr
    summary = sys.stderr if out_json == "-" else sys.stdout
    for line in summary_lines(result):
        summary.write(line + "\n")
    return result.exit_code


def run_audit_command(args) -> int:
    code = _execute(_request(args), args, args.out, args.json, args.history)
    return 0 if args.exit_zero else code


def run_report_command(args) -> int:
    from auditor import cli
    from reports import history as hist
    from reports.html import render

    try:
        doc = json.loads(Path(args.findings_json).read_text())
    except (OSError, ValueError) as exc:
        raise cli.CliError(f"{args.findings_json}: cannot read the findings JSON: {exc}") from None
    Path(args.out).write_text(render(doc, hist.read(args.history)))
    sys.stderr.write(f"wrote {args.out}\n")
    return cli.EXIT_OK


def unpack_demo_sample(target: Path) -> tuple[list[Path], dict]:
    """Unpacks the planted-anomaly sample (mtimes restored from the archive); returns its log
    dirs and its description (demo.json: when it was made, the replay target, the config)."""
    target.mkdir(parents=True, exist_ok=True)
    with files("auditor.samples").joinpath(DEMO_SAMPLE).open("rb") as fh, tarfile.open(fileobj=fh) as tar:
        tar.extractall(target, filter="data")  # keeps each member's mtime: the sample's evidence
    root = target / "demo-cluster"
    meta = json.loads((root / "demo.json").read_text())
    log_dirs = [root / d for d in meta["log_dirs"]]
    return log_dirs, meta


def run_demo_command(args) -> int:
    from auditor.audit import AuditRequest

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="kafka-audit-demo-"))
    log_dirs, meta = unpack_demo_sample(out / "sample")
    sys.stderr.write(f"demo: sample of {len(log_dirs)} real broker log dirs unpacked under {out / 'sample'}\n")
    req = AuditRequest(log_dirs=[str(d) for d in log_dirs], depth="deep", config_path=str(log_dirs[0].parent / "demo-audit.yaml"),
                       at_ms=meta["replay_at_ms"], topics=meta["replay_topics"], master=args.master,
                       now_ms=meta["made_at_ms"])
    args.progress = True
    _execute(req, args, str(out / "report.html"), str(out / "findings.json"), str(out / "history"))
    print(f"\nreport: {out / 'report.html'}\nfindings: {out / 'findings.json'}")
    # the sample's findings are planted: the demo succeeded when the report is written
    print("(the sample's anomalies are planted: `kafka-audit audit` would exit 1 on them; the demo exits 0)")
    return 0
