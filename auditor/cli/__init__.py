"""kafka-audit: the command line. One module per command; shared helpers in :mod:`auditor.cli.common`.

Exit codes: 0 ok/safe, 1 unsafe, 2 usage or config error, 3 input problem (see
:mod:`auditor.cli.common`). ``python -m auditor.cli`` runs :func:`main` (``__main__.py``).
"""

from __future__ import annotations

import argparse
import sys

from auditor import __version__
from auditor.cli import audit, collect, demo, groups, metadata, replay_check, report, scan
from auditor.cli.common import EXIT_OK, EXIT_USAGE, FORMATTER, CliError

COMMANDS = (scan, collect, audit, report, demo, replay_check, groups, metadata)
"""The command modules, in the order ``--help`` lists them; each has ``register(sub)``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-audit",
        formatter_class=FORMATTER,
        description=(
            "Audit Apache Kafka log directories, read-only: segment sizes, mtimes, record\n"
            "timestamps, partition skew, replay safety. Never writes under a log dir."
        ),
        epilog="exit codes: 0 ok/safe, 1 unsafe (findings at the failing severity, unsafe replay), 2 usage or config error, 3 input problem (e.g. not a Kafka log dir)",
    )
    parser.add_argument("--version", action="version", version=f"kafka-log-auditor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.func(args)
    except CliError as exc:
        sys.stderr.write(f"kafka-audit: error: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
