"""kafka-audit: the command line. One module per command; shared helpers in :mod:`auditor.cli.common`.

Exit codes: 0 ok/safe, 1 unsafe, 2 usage or config error, 3 input problem, 4 internal error (see
:mod:`auditor.cli.common`). ``python -m auditor.cli`` runs :func:`main` (``__main__.py``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import traceback
from pathlib import Path

from auditor import __version__
from auditor.atomic import OutputError
from auditor.object_store import ObjectStoreError
from auditor.cli.common import EXIT_INPUT_PROBLEM, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, FORMATTER, CliError, InputProblem, \
    NeedsExtra, merge_log_dirs, require_extra

COMMANDS = {
    "scan": ("auditor.cli.scan", "read log dirs into the segment and partition tables"),
    "collect": ("auditor.cli.collect", "on a broker: write a Parquet manifest of its log dirs (no Spark, no JVM)"),
    "audit": ("auditor.cli.audit", "the full audit: scan, every check, Great Expectations, HTML + JSON report"),
    "report": ("auditor.cli.report", "re-render the HTML report from a findings JSON (and a history dir)"),
    "demo": ("auditor.cli.demo",
             "the full audit on a bundled sample of real broker data (--engine spark: Spark local mode)"),
    "replay-check": ("auditor.cli.replay_check",
                     "before rewinding consumers: what a seek to a time really returns, per partition"),
    "groups": ("auditor.cli.groups",
               "consumer groups, their committed offsets and lag, read from __consumer_offsets on disk"),
    "metadata": ("auditor.cli.metadata",
                 "the cluster as its KRaft metadata log (__cluster_metadata) records it, read from disk"),
}
"""Command name -> (its module, with ``register(sub)`` and ``run(args)``; the one-line help the
module registers), in the order ``--help`` lists them. A module is imported only when its command
runs: replay-check must not pay for pandas, the audit stack or Spark (tests/test_layers.py), and the
top-level ``--help`` lists the commands from these lines alone (tests/test_cli_commands.py proves they
equal the modules' own)."""

NEEDS_EXTRA = {"audit": "audit", "report": "audit", "demo": "audit"}
"""Command -> the optional extra it needs (pyproject.toml); checked before its module is imported,
so a base install (a broker's) answers with one line naming the extra instead of a traceback.
``scan --engine spark`` checks the same extra where that mode starts."""


def build_parser(only: str | None = None, *, summary: bool = False) -> argparse.ArgumentParser:
    """The whole command line; ``only``: just that command's subparser (its module alone imported);
    ``summary``: every command as a bare entry with its one-line help (no module imported), enough
    for the top-level ``--help``, ``--version`` and the error for an unknown command."""
    parser = argparse.ArgumentParser(
        prog="kafka-audit",
        formatter_class=FORMATTER,
        description=(
            "Audit Apache Kafka log directories, read-only: segment sizes, mtimes, record\n"
            "timestamps, partition skew, replay safety. Never writes under a log dir."
        ),
        epilog="exit codes: 0 ok/safe, 1 unsafe (findings at the failing severity, unsafe replay), 2 usage or config error, "
               "3 input problem (e.g. not a Kafka log dir), 4 internal error (the tool's own failure: the traceback "
               "is written to a file the error line names, or printed with --debug)",
    )
    parser.add_argument("--version", action="version", version=f"kafka-log-auditor {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an internal error (exit 4), print the traceback instead of writing it to a file")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, one_line) in COMMANDS.items():
        if summary:
            sub.add_parser(name, help=one_line)
        elif only is None or name == only:
            importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv[: _command_index(argv)]  # kafka-audit --debug COMMAND ...
    if debug:
        argv.remove("--debug")
    arrow_on_the_c_allocator()
    try:
        if argv and argv[0] in NEEDS_EXTRA:
            require_extra(argv[0], NEEDS_EXTRA[argv[0]])
        return _run(argv)
    except NeedsExtra as exc:
        sys.stderr.write(f"{exc}\n")
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - an unexpected failure must not read as a verdict (exit 1)
        return internal_error(exc, argv[0] if argv else "kafka-audit", debug)


def _command_index(argv: list[str]) -> int:
    return next((i for i, word in enumerate(argv) if word in COMMANDS), len(argv))


def internal_error(exc: BaseException, command: str, debug: bool) -> int:
    """EXIT_INTERNAL, one line on stderr naming the exception and the code line that raised it, and
    the traceback either printed (``--debug``) or written to a file the line names: a crash never
    leaves as Python's exit 1, which means "findings at the failing severity" to a nightly gate."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = "".join(traceback.format_exception(exc))
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    if debug:
        sys.stderr.write(text)
        sys.stderr.write(f"kafka-audit: internal error in {command}: {type(exc).__name__}: {first_line}{where}\n")
        return EXIT_INTERNAL
    try:
        with tempfile.NamedTemporaryFile("w", prefix="kafka-audit-traceback-", suffix=".txt", delete=False) as f:
            f.write(text)
        kept = f"; traceback in {f.name}"
    except OSError:
        kept = "; run with --debug for the traceback"
    sys.stderr.write(f"kafka-audit: internal error in {command}: {type(exc).__name__}: {first_line}{where}{kept} "
                     f"(exit 4: the tool's own failure, not a verdict on the input)\n")
    return EXIT_INTERNAL


def arrow_on_the_c_allocator() -> None:
    """Every Arrow allocation of the process from the C library's allocator, when pyarrow is not
    imported yet (a command's run) and nobody chose a pool: Arrow's C++ default pool is fixed at
    pyarrow's import from ``ARROW_DEFAULT_MEMORY_POOL``, and Acero (the driver's aggregates:
    group-bys, the join) allocates from it whatever ``pa.set_memory_pool`` says. With mimalloc
    there, its freed pages stayed resident (~80 MiB after the aggregates at 100,542 rows; glibc's
    are returned by ``auditor.engines.local.engine.release_memory``; benchmarks/fleet.py)."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _run(argv: list[str]) -> int:
    # a command's own arguments are parsed by its subparser alone: when the first word names a
    # command, the other commands' modules are not imported; anything else (--help, --version,
    # nothing, a word that is no command) is answered from the one-line summaries
    parser = build_parser(argv[0]) if argv and argv[0] in COMMANDS else build_parser(summary=True)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_USAGE
    merge_log_dirs(args)
    try:
        return args.func(args)
    except CliError as exc:
        sys.stderr.write(f"kafka-audit: error: {exc}\n")
        return EXIT_USAGE
    except (OutputError, InputProblem, ObjectStoreError, FileNotFoundError) as exc:
        # an output that cannot be written, no manifest or an incomplete one, an object store that cannot be used
        sys.stderr.write(f"kafka-audit: error: {exc}\n")
        return EXIT_INPUT_PROBLEM
    except BrokenPipeError:
        return EXIT_OK
