"""kafka-audit: the command line. One module per command; shared helpers in :mod:`auditor.cli.common`.

Exit codes: 0 ok/safe, 1 unsafe, 2 usage or config error, 3 input problem (see
:mod:`auditor.cli.common`). ``python -m auditor.cli`` runs :func:`main` (``__main__.py``).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from auditor import __version__
from auditor.cli.common import EXIT_OK, EXIT_USAGE, FORMATTER, CliError

COMMANDS = {
    "scan": "auditor.cli.scan",
    "collect": "auditor.cli.collect",
    "audit": "auditor.cli.audit",
    "report": "auditor.cli.report",
    "demo": "auditor.cli.demo",
    "replay-check": "auditor.cli.replay_check",
    "groups": "auditor.cli.groups",
    "metadata": "auditor.cli.metadata",
}
"""Command name -> its module (``register(sub)`` and ``run(args)``), in the order ``--help`` lists
them. A module is imported only when its command runs, or for the full ``--help``: replay-check
must not pay for pandas, the audit stack or Spark (tests/test_layers.py)."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``only``: just that command's subparser (its module alone imported)."""
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
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # a command's own arguments are parsed by its subparser alone: when the first word names a
    # command, the other commands' modules are not imported (every other case: the whole parser)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
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
