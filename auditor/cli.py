"""kafka-audit: the command line.

Exit codes (so scripts can gate on them):
  0  done, nothing unsafe
  1  unsafe: findings reached the failing severity (audit), the replay would lose or
     re-read data or crash a client (replay-check)
  2  usage or configuration error (one clear line on stderr)
  3  done, but something is wrong with the input (e.g. a path that is not a Kafka log dir)
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from auditor import __version__
from auditor.schema import DEPTHS, PARTITION_SCHEMA, SEGMENT_FIELDS, SEGMENT_SCHEMA, to_table
from auditor.units import human_bytes, iso_utc

EXIT_OK = 0
EXIT_UNSAFE = 1
EXIT_USAGE = 2
EXIT_INPUT_PROBLEM = 3

DEPTH_HELP = """\
how much of each segment to read (cost grows with depth):
  stat     names, sizes, mtimes only (one lstat per file)
  index    + first batch header, .index/.timeindex tails and the batches after the
           last index entry: constant work per segment (default)
  headers  + every batch header: exact offsets, counts, max timestamps, codecs
  deep     + every record: decompression, per-record timestamps, CRC checks"""


class CliError(Exception):
    """A usage or configuration problem: reported as one line, exit 2."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def _progress_printer(stream):
    last = [0.0]

    def show(progress) -> None:
        now = time.monotonic()
        if now - last[0] < 1.0:
            return
        last[0] = now
        rate = progress.segments_done / max(progress.elapsed_s, 1e-9)
        stream.write(
            f"\rscanned {progress.log_dirs_done}/{progress.log_dirs_total} log dirs, "
            f"{progress.partitions_done} partitions, {progress.segments_done} segments, "
            f"{human_bytes(progress.bytes_done)} ({rate:,.0f} segments/s)   "
        )
        stream.flush()

    return show


def _with_utc(row: dict) -> dict:
    """JSON rows keep exact integers and add a readable UTC twin for every *_ms column."""
    out = dict(row)
    for key, value in row.items():
        if key.endswith("_ms") and isinstance(value, int):
            out[key[:-3] + "_utc"] = iso_utc(value)
    return out


def _write_table(result, out) -> None:
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


def _cmd_scan(args) -> int:
    from auditor.scan import scan_log_dirs

    for path in args.log_dirs:
        if not Path(path).exists():
            raise CliError(f"log dir {path!r} does not exist")
    if getattr(args, "manifest", None) and getattr(args, "engine", "local") != "spark":
        raise CliError("--manifest needs --engine spark")
    if not args.log_dirs and not getattr(args, "manifest", None):
        raise CliError("give at least one LOGDIR (or --manifest with --engine spark)")
    if getattr(args, "engine", "local") == "spark":
        from auditor.job import scan_command

        try:
            return scan_command(args)
        except (ValueError, FileNotFoundError) as exc:
            raise CliError(str(exc)) from exc
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    on_progress = _progress_printer(sys.stderr) if show_progress else None
    result = scan_log_dirs(args.log_dirs, args.depth, on_progress=on_progress)
    if show_progress:
        sys.stderr.write("\n")

    if args.parquet:
        import pyarrow.parquet as pq

        out_dir = Path(args.parquet)
        out_dir.mkdir(parents=True, exist_ok=True)
        pq.write_table(to_table(result.segments, SEGMENT_SCHEMA), out_dir / "segments.parquet")
        pq.write_table(to_table(result.partitions, PARTITION_SCHEMA), out_dir / "partitions.parquet")
        sys.stderr.write(f"wrote {out_dir / 'segments.parquet'} and {out_dir / 'partitions.parquet'}\n")
    if args.json:
        doc = {
            "tool": "kafka-log-auditor",
            "version": __version__,
            "depth": args.depth,
            "generated_at_utc": iso_utc(time.time_ns() // 1_000_000),
            "log_dirs": result.log_dirs,
            "partitions": [_with_utc(p) for p in result.partitions],
            "segments": [_with_utc(s) for s in result.segments],
        }
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=SEGMENT_FIELDS)
        writer.writeheader()
        for seg in result.segments:
            writer.writerow({k: (";".join(map(str, v)) if isinstance(v, list) else v) for k, v in seg.items()})
    elif not args.parquet:
        _write_table(result, sys.stdout)
    bad = [info for info in result.log_dirs if info["partition_dirs"] == 0 and info["broker_id"] is None]
    return EXIT_INPUT_PROBLEM if bad else EXIT_OK


def _cmd_collect(args) -> int:
    # Pure Python on the broker: auditor.collect never imports pyspark.
    from auditor.collect import CollectError, collect

    for path in args.log_dirs:
        if not Path(path).is_dir():
            raise CliError(f"log dir {path!r} is not a directory")
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    try:
        res = collect(args.log_dirs, args.out, args.depth, nice=args.nice,
                      on_progress=_progress_printer(sys.stderr) if show_progress else None)
    except CollectError as exc:
        raise CliError(str(exc)) from exc
    if show_progress:
        sys.stderr.write("\n")
    for line in res.priority:
        sys.stderr.write(f"priority: {line}\n")
    sys.stderr.write(
        f"wrote manifest {res.out}: {res.segments} segments, {res.partitions} partition dirs, "
        f"{len(res.log_dirs)} log dirs in {res.elapsed_s:.1f} s\n"
    )
    bad = [info for info in res.log_dirs if info["partition_dirs"] == 0 and info["broker_id"] is None]
    return EXIT_INPUT_PROBLEM if bad else EXIT_OK


def _unpack_sample(out_dir: Path | None) -> list[Path]:
    """Unpacks the bundled real-broker sample; returns its log dirs."""
    import tarfile
    import tempfile
    from importlib.resources import files

    target = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="kafka-audit-demo-"))
    target.mkdir(parents=True, exist_ok=True)
    with files("auditor.samples").joinpath("real-broker-dirs.tar.gz").open("rb") as fh, tarfile.open(fileobj=fh) as tar:
        tar.extractall(target, filter="data")
    return sorted(p for p in target.glob("*/*") if p.is_dir())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-audit",
        formatter_class=_Formatter,
        description=(
            "Audit Apache Kafka log directories, read-only: segment sizes, mtimes, record\n"
            "timestamps, partition skew, replay safety. Never writes under a log dir."
        ),
        epilog="exit codes: 0 ok/safe, 1 unsafe (findings at the failing severity, unsafe replay), 2 usage or config error, 3 input problem (e.g. not a Kafka log dir)",
    )
    parser.add_argument("--version", action="version", version=f"kafka-log-auditor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan = sub.add_parser(
        "scan",
        formatter_class=_Formatter,
        help="read log dirs into the segment and partition tables",
        description=(
            "Read Kafka log dirs (read-only) and print one row per partition directory,\n"
            "or the full segment table as JSON / CSV / Parquet.\n\n" + DEPTH_HELP
        ),
        epilog=(
            "examples:\n"
            "  kafka-audit scan /var/lib/kafka/data\n"
            "  kafka-audit scan --depth headers --json /data/d1 /data/d2 > segments.json\n"
            "  kafka-audit scan --depth deep --parquet out/ /var/lib/kafka/data\n\n"
            "JSON keeps exact bytes and epoch milliseconds and adds a *_utc ISO-8601 twin for each time."
        ),
    )
    scan.add_argument("log_dirs", nargs="*", metavar="LOGDIR", help="a Kafka log dir (the broker's log.dirs entry)")
    scan.add_argument("--depth", choices=DEPTHS, default="index", help="see above (default: index)")
    fmt = scan.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print log dirs, partitions and segments as JSON")
    fmt.add_argument("--csv", action="store_true", help="print the segment table as CSV")
    scan.add_argument("--parquet", metavar="DIR", help="also write segments.parquet and partitions.parquet to DIR")
    scan.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress on stderr (default: when stderr is a terminal)")
    scan.add_argument("--no-progress", dest="progress", action="store_false")
    scan.add_argument("--engine", choices=("local", "spark"), default="local",
                      help="local: in-process (default); spark: distributed scan, same output "
                           "(with --parquet the segment table never reaches the driver; --json and "
                           "the table view collect it, for small outputs)")
    scan.add_argument("--master", help="Spark master for --engine spark (default local[*])")
    scan.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                      help="Spark setting for --engine spark (repeatable; overrides the defaults)")
    scan.add_argument("--manifest", action="append", default=[], metavar="PATH",
                      help="with --engine spark: read manifests from `kafka-audit collect` "
                           "(a manifest dir, a parent dir or a glob; repeatable) instead of log dirs")
    scan.set_defaults(func=_cmd_scan)

    collect = sub.add_parser(
        "collect",
        formatter_class=_Formatter,
        help="on a broker: write a Parquet manifest of its log dirs (no Spark, no JVM)",
        description=(
            "Scan log dirs (read-only) into a Parquet manifest directory: segments.parquet,\n"
            "partitions.parquet, log_dirs.parquet (broker id, host, collection time).\n"
            "Pure Python, for brokers; `kafka-audit scan --engine spark --manifest` reads them.\n\n"
            + DEPTH_HELP
        ),
        epilog="example:\n  kafka-audit collect --nice --out /tmp/manifest-$(hostname) /var/lib/kafka/data",
    )
    collect.add_argument("log_dirs", nargs="+", metavar="LOGDIR", help="a Kafka log dir")
    collect.add_argument("--out", required=True, metavar="PATH",
                         help="manifest directory to write (refused inside a scanned log dir)")
    collect.add_argument("--depth", choices=DEPTHS, default="index", help="see above (default: index)")
    collect.add_argument("--nice", action="store_true",
                         help="lowest CPU priority (nice 19) and idle I/O class (Linux ioprio)")
    collect.add_argument("--progress", dest="progress", action="store_true", default=None)
    collect.add_argument("--no-progress", dest="progress", action="store_false")
    collect.set_defaults(func=_cmd_collect)

    from auditor import audit_cli, replay_cli

    audit_cli.register(sub, _Formatter)
    replay_cli.register(sub, _Formatter)
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


if __name__ == "__main__":
    # `python -m auditor.cli`: run the imported module's main, so that CliError raised by the
    # subcommand modules (which import auditor.cli) is the class main() catches
    from auditor.cli import main as _main

    sys.exit(_main())
