"""What every ``kafka-audit`` command shares, under public names.

Exit codes (so scripts can gate on them):
  0  done, nothing unsafe
  1  unsafe: findings reached the failing severity (audit), the replay would lose or
     re-read data or crash a client (replay-check)
  2  usage or configuration error (one clear line on stderr)
  3  done, but something is wrong with the input (e.g. a path that is not a Kafka log dir)
  4  internal error: the tool failed in a way it does not expect (one line on stderr naming what
     failed and where the traceback was written; ``--debug`` prints it instead)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable, Iterable

from auditor.json_stream import write_document
from auditor.units import human_bytes, iso_utc

EXIT_OK = 0
EXIT_UNSAFE = 1
EXIT_USAGE = 2
EXIT_INPUT_PROBLEM = 3
EXIT_INTERNAL = 4

#: argparse formatter of every command: descriptions and epilogs keep their line breaks.
FORMATTER = argparse.RawDescriptionHelpFormatter

DEPTH_HELP = """\
how much of each segment to read (cost grows with depth):
  stat     names, sizes, mtimes only (one lstat per file)
  index    + first batch header, .index/.timeindex tails and the batches after the
           last index entry: constant work per segment
  headers  + every batch header: exact offsets, counts, max timestamps, codecs (default
           of scan, collect and audit: every check has its facts)
  deep     + every record: decompression, per-record timestamps, CRC checks"""


class CliError(Exception):
    """A usage or configuration problem: reported as one line, exit 2."""


class InputProblem(Exception):
    """An input the command cannot use as it is (e.g. a manifest a killed collect left): one line, exit 3.
    (An output that cannot be written, :class:`auditor.atomic.OutputError`, is also exit 3.)"""


EXTRA_MODULES = {"audit": ("pyspark", "great_expectations", "pandas", "matplotlib", "jinja2")}
"""An optional extra of pyproject.toml -> the top-level modules of the packages it adds. The base
install (collect, scan, replay-check, groups, metadata) needs none of them; tests/test_wheel_install.py
checks this list against pyproject.toml's."""


class NeedsExtra(Exception):
    """A command (or one of its modes) needs an optional extra that is not installed: one line,
    naming the extra and how to install it, exit 2 (a usage error: this install cannot do that)."""

    def __init__(self, what: str, extra: str, missing: list[str]):
        super().__init__(f"kafka-audit {what}: needs the [{extra}] extra: "
                         f"pip install 'kafka-log-auditor[{extra}]' (not installed here: {', '.join(missing)})")


def add_log_dir_arguments(parser, flag_group=None) -> None:
    """Log dirs, given the same way on every command: ``--log-dir DIR`` (repeatable; the preferred
    form, beside ``--manifest`` and ``--bootstrap-server``) or as words after the options (the form
    scan, collect, groups and metadata took first). Both may be mixed; :func:`merge_log_dirs` makes
    ``args.log_dirs`` of them, flags first. ``flag_group``: where ``--log-dir`` goes (a mutually
    exclusive group of input sources)."""
    (flag_group or parser).add_argument(
        "--log-dir", dest="log_dir_flags", action="append", default=[], metavar="DIR",
        help="a broker log dir, the broker's log.dirs entry (repeatable; read-only)")
    parser.add_argument("log_dir_words", nargs="*", metavar="LOG_DIR",
                        help="a broker log dir, the same as --log-dir DIR (which is preferred)")


def merge_log_dirs(args) -> None:
    """``args.log_dirs``: every log dir given, as ``--log-dir`` then as words (:func:`add_log_dir_arguments`)."""
    if hasattr(args, "log_dir_words"):
        args.log_dirs = [*args.log_dir_flags, *args.log_dir_words]


def one_input(args, *sources: str) -> None:
    """CliError unless exactly one of the input ``sources`` (``log_dirs``, ``manifest``,
    ``bootstrap_server``) is given: log dirs as words cannot be put in argparse's exclusive group."""
    flags = {"log_dirs": "--log-dir", "manifest": "--manifest", "bootstrap_server": "--bootstrap-server"}
    given = [flags[s] for s in sources if getattr(args, s, None)]
    if len(given) != 1:
        if len(sources) == 1:
            raise CliError("give at least one log dir: --log-dir DIR (repeatable), or the dirs as words")
        wanted = ", ".join(flags[s] for s in sources[:-1]) + " or " + flags[sources[-1]]
        raise CliError(f"give exactly one input: {wanted}" + (f" (got {' and '.join(given)})" if given else ""))


def require_extra(what: str, extra: str) -> None:
    """Raise :class:`NeedsExtra` unless every module of ``extra`` can be imported. Looked up with
    ``find_spec`` (nothing imported): the check costs a few path lookups, not the audit stack."""
    missing = [m for m in EXTRA_MODULES[extra] if importlib.util.find_spec(m) is None]
    if missing:
        raise NeedsExtra(what, extra, missing)


def input_exit_code(log_dirs: Iterable[dict]) -> int:
    """EXIT_INPUT_PROBLEM when a given path is not a Kafka log dir (no meta.properties and no
    partition directory), else EXIT_OK: the one exit-3 rule of scan and collect."""
    bad = [info for info in log_dirs if info["partition_dirs"] == 0 and info["broker_id"] is None]
    return EXIT_INPUT_PROBLEM if bad else EXIT_OK


def wants_progress(args) -> bool:
    """``--progress`` / ``--no-progress``, else progress when stderr is a terminal."""
    return args.progress if args.progress is not None else sys.stderr.isatty()


def progress_printer(stream=None) -> Callable:
    """The one progress printer of every command, on stderr: a step message (``str``, from the
    audit pipeline) becomes a line with the elapsed time; a scan's :class:`auditor.scan.Progress`
    becomes one status line, redrawn at most once a second."""
    started = time.monotonic()
    last = [0.0]

    def show(progress) -> None:
        out = stream or sys.stderr
        if isinstance(progress, str):
            out.write(f"[{time.monotonic() - started:6.1f}s] {progress}\n")
            out.flush()
            return
        now = time.monotonic()
        if now - last[0] < 1.0:
            return
        last[0] = now
        rate = progress.segments_done / max(progress.elapsed_s, 1e-9)
        out.write(
            f"\rscanned {progress.log_dirs_done}/{progress.log_dirs_total} log dirs, "
            f"{progress.partitions_done} partitions, {progress.segments_done} segments, "
            f"{human_bytes(progress.bytes_done)} ({rate:,.0f} segments/s)   "
        )
        out.flush()

    return show


def write_json(doc: dict, stream=None) -> None:
    """A JSON document on ``stream``: C-encoded and streamed, one list item per line (lists may be
    iterators: rows are encoded as they come), with a final newline (auditor.json_stream)."""
    # sys.stdout looked up at each call, not bound at import: redirect_stdout and captured
    # stdout (in-process callers, tests) then receive the document
    stream = sys.stdout if stream is None else stream
    write_document(doc, stream, default=str)


def csv_cell(value):
    """A CSV cell: lists joined with ';', everything else as is."""
    return ";".join(map(str, value)) if isinstance(value, list) else value


def write_scan_table(result, out) -> None:
    """The scan's text view: one line per partition dir, then every note, then totals."""
    header = f"{'broker':>6} {'topic-partition':<40} {'kind':<7} {'segs':>5} {'size':>10} {'offsets':>23} {'newest record (UTC)':<25} notes"
    out.write(header + "\n")
    by_partition: dict[tuple, list[dict]] = {}
    for seg in result.segments:
        by_partition.setdefault((seg["log_dir"], seg["dir_name"]), []).append(seg)
    for p in result.partitions:
        segs = by_partition.get((p["log_dir"], p["dir_name"]), [])
        newest = max((s["max_timestamp_ms"] for s in segs if s["max_timestamp_ms"] is not None), default=None)
        end = p["log_end_offset"]
        offsets = f"{p['log_start_offset']}..{end - 1}" if end is not None and p["log_start_offset"] is not None else "-"
        n_notes = len(p["notes"]) + sum(len(s["notes"]) for s in segs)
        out.write(
            f"{p['broker_id'] if p['broker_id'] is not None else '-':>6} {p['topic'] + '-' + str(p['partition']):<40} "
            f"{p['dir_kind']:<7} {p['segment_count']:>5} {human_bytes(p['size_bytes']):>10} {offsets:>23} "
            f"{iso_utc(newest) or '-':<25} {n_notes}\n"
        )
    notes = [n for info in result.log_dirs for n in info["problems"]]
    notes += [n for p in result.partitions for n in p["notes"]]
    notes += [n for s in result.segments for n in s["notes"]]
    if notes:
        out.write(f"\nnotes ({len(notes)}):\n")
        for n in notes:
            out.write(f"  - {n}\n")
    total = sum(p["size_bytes"] or 0 for p in result.partitions)
    out.write(
        f"\n{len(result.log_dirs)} log dirs, {len(result.partitions)} partition dirs, "
        f"{len(result.segments)} segments, {human_bytes(total)} ({total} bytes)\n"
    )


def keys_sample_bytes(mib: float | None) -> int | None:
    """``--keys-sample-mib N`` (audit, collect) as bytes; None when not given. CliError when not > 0."""
    if mib is None:
        return None
    if not mib > 0:
        raise CliError(f"--keys-sample-mib {mib:g}: expected a number > 0")
    return int(mib * (1 << 20))


LOCAL_ONLY = {
    "--out": "the HTML report is written locally, whole or not at all (a temporary file renamed into place); "
             "copy it to object storage after the run (e.g. `aws s3 cp`)",
    "--json": "the findings JSON is written locally, whole or not at all (a temporary file renamed into place); "
              "copy it to object storage after the run (e.g. `aws s3 cp`)",
    "--history": "the history is a local directory that every run appends Parquet files to and reads back; "
                 "keep it on a local or mounted disk",
    "--metrics": "node_exporter's textfile collector reads a local file",
}
"""The outputs that take no object-store URL, and why (docs/object-storage.md)."""


def refuse_urls(**values) -> None:
    """CliError (one line, exit 2) for an output option given a URL: ``refuse_urls(out=..., json=...)``."""
    for name, value in values.items():
        option = "--" + name.replace("_", "-")
        if value and "://" in str(value):
            raise CliError(f"{option} {value}: takes a local path, not a URL: {LOCAL_ONLY[option]}")

