"""``kafka-audit report``: the HTML report rendered again from a findings JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from auditor.atomic import atomic_write
from auditor.cli.common import EXIT_OK, FORMATTER, CliError, refuse_urls
from auditor.nightly import run_history as hist
from reports.html import render


def register(sub) -> None:
    report = sub.add_parser("report", formatter_class=FORMATTER,
                            help="re-render the HTML report from a findings JSON (and a history dir)",
                            description="Render the HTML report again from the JSON `audit --json` wrote.")
    report.add_argument("findings_json", metavar="FINDINGS.json")
    report.add_argument("--out", required=True, metavar="REPORT.html")
    report.add_argument("--history", metavar="DIR", help="history dir for the trends")
    report.set_defaults(func=run)


def run(args) -> int:
    refuse_urls(out=args.out, history=args.history)
    try:
        doc = json.loads(Path(args.findings_json).read_text())
    except (OSError, ValueError) as exc:
        raise CliError(f"{args.findings_json}: cannot read the findings JSON: {exc}") from None
    tables = doc.get("tables") or {}
    if "partition_stats" in tables and "replica_stats" not in tables:  # written before schema v4
        tables["replica_stats"] = tables.pop("partition_stats")
    atomic_write(args.out, render(doc, hist.read(args.history)))  # whole or not at all
    sys.stderr.write(f"wrote {args.out}\n")
    return EXIT_OK
