"""``kafka-audit scan``: log dirs to the segment and partition tables (in-process or on Spark)."""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from auditor.cli.common import (
    DEPTH_HELP, FORMATTER, CliError, csv_cell, input_exit_code, progress_printer, require_extra,
    add_log_dir_arguments, wants_progress, write_json, write_scan_table,
)
from auditor.engines.base import ENGINES
from auditor.engines.spark import (
    LOG_DIR_INFO_KEYS, aggregates, build_spark, parse_conf, read_manifests, rows_to_driver, scan_dataframes,
    write_parquet,
)
from auditor.engines.spark.scan_job import driver_order
from auditor.scan import ScanResult, scan_log_dirs
from auditor.schema import DEPTHS, PARTITION_SCHEMA, SEGMENT_FIELDS, SEGMENT_SCHEMA, json_envelope, json_rows_with_utc, to_table
from auditor.units import iso_utc

SEGMENT_ORDER = ("dir_name", "base_offset", "file_state")


def register(sub) -> None:
    scan = sub.add_parser(
        "scan",
        formatter_class=FORMATTER,
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
    add_log_dir_arguments(scan)
    scan.add_argument("--depth", choices=DEPTHS, default="headers",
                      help="see above (default: headers, as collect and audit)")
    fmt = scan.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print log dirs, partitions and segments as JSON")
    fmt.add_argument("--csv", action="store_true", help="print the segment table as CSV")
    scan.add_argument("--parquet", metavar="DIR", help="also write segments.parquet and partitions.parquet to DIR")
    scan.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress on stderr (default: when stderr is a terminal)")
    scan.add_argument("--no-progress", dest="progress", action="store_false")
    scan.add_argument("--engine", choices=ENGINES, default="auto",
                      help="auto (default): spark when --manifest, --master or --conf is given, else local; "
                           "local: in this process; spark: a distributed scan, the same output "
                           "(with --parquet the segment table never reaches the driver; --json and "
                           "the table view collect it, for small outputs)")
    scan.add_argument("--master", help="Spark master for --engine spark (default local[*])")
    scan.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                      help="Spark setting for --engine spark (repeatable; overrides the defaults)")
    scan.add_argument("--manifest", action="append", default=[], metavar="PATH",
                      help="with --engine spark: read manifests from `kafka-audit collect` "
                           "(a manifest dir, a parent dir or a glob; repeatable) instead of log dirs")
    keys = scan.add_argument_group(
        "key statistics (with --json, local engine; docs/keys.md)",
        "Per partition: null keys, distinct keys (HyperLogLog), the heaviest keys and key sizes, and per\n"
        "topic the partitioner that explains where the keys are. Keys are shown as fingerprints\n"
        "(Kafka's murmur2 of the key, its length, whether printable), never as bytes; values never.")
    keys.add_argument("--keys", action="store_true",
                      help="add a 'keys' object to each partition and 'key_partitioners' per topic "
                           "(reads every record of every partition, like --depth deep)")
    keys.add_argument("--keys-sample-mib", type=positive_number, metavar="N",
                      help="read only the newest N MiB of each partition for the key statistics "
                           "(implies --keys; the sample's size is in the output)")
    keys.add_argument("--keys-top", type=positive_integer, default=10, metavar="K", help="heaviest keys shown per partition "
                      "(default 10)")
    scan.set_defaults(func=run)


def positive_number(text: str) -> float:
    """argparse type (its name is in argparse's error line): a number > 0."""
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


def positive_integer(text: str) -> int:
    """argparse type (its name is in argparse's error line): an integer >= 1."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def run(args) -> int:
    if args.engine == "auto":
        args.engine = "spark" if (args.manifest or args.master or args.conf) else "local"
    for path in args.log_dirs:
        if not Path(path).exists():
            raise CliError(f"log dir {path!r} does not exist")
    if args.manifest and args.engine != "spark":
        raise CliError("--manifest is read on Spark: --engine spark or auto, not local")
    if not args.log_dirs and not args.manifest:
        raise CliError("give at least one log dir (--log-dir DIR) or --manifest")
    want_keys = args.keys or args.keys_sample_mib is not None
    if want_keys and (args.engine != "local" or not args.json):
        raise CliError("--keys / --keys-sample-mib need --json and the local engine")
    if args.engine == "spark":
        require_extra("scan --engine spark", "audit")
        try:
            return run_spark(args)
        except (ValueError, FileNotFoundError) as exc:
            raise CliError(str(exc)) from exc
    show_progress = wants_progress(args)
    result = scan_log_dirs(args.log_dirs, args.depth, on_progress=progress_printer() if show_progress else None)
    if show_progress:
        sys.stderr.write("\n")
    if args.parquet:
        from auditor.atomic import check_writable, atomic_write  # each file whole or not at all

        out_dir = Path(args.parquet)
        check_writable(out_dir, is_dir=True)
        for name, rows, schema in (("segments.parquet", result.segments, SEGMENT_SCHEMA),
                                   ("partitions.parquet", result.partitions, PARTITION_SCHEMA)):
            table = to_table(rows, schema)
            atomic_write(out_dir / name, lambda fh, table=table: pq.write_table(table, fh))
        sys.stderr.write(f"wrote {out_dir / 'segments.parquet'} and {out_dir / 'partitions.parquet'}\n")
    if args.json:
        extra = key_statistics(args, result) if want_keys else {}
        write_json(scan_document(args.depth, None, result.log_dirs, result.partitions, result.segments, **extra))
    elif args.csv:
        write_csv(result.segments)
    elif not args.parquet:
        write_scan_table(result, sys.stdout)
    return input_exit_code(result.log_dirs)


SCAN_SCHEMA_VERSION = 2
"""``scan --json``'s format. Changelog: v2 adds ``schema_version`` and names the time of the scan as
the findings JSON names the audit time: ``generated_at_utc`` -> ``as_of_ms`` and ``as_of_utc``.
v1: no ``schema_version``."""


def scan_document(depth: str, engine: str | None, log_dirs: list[dict], partitions: list[dict],
                  segments: list[dict], **extra) -> dict:
    """``scan --json``: the log-dir rows, then partition and segment rows with a UTC twin of every instant
    (``extra``: more top-level members, e.g. ``key_partitioners``)."""
    as_of_ms = time.time_ns() // 1_000_000
    head = {"schema_version": SCAN_SCHEMA_VERSION, "depth": depth, **({"engine": engine} if engine else {}),
            "as_of_ms": as_of_ms, "as_of_utc": iso_utc(as_of_ms)}
    # rows encoded with their UTC twins as they are written (auditor.json_stream streams them)
    return json_envelope(**head, log_dirs=log_dirs, partitions=json_rows_with_utc(partitions, default=str),
                         segments=json_rows_with_utc(segments, default=str), **extra)


def key_statistics(args, result: ScanResult) -> dict:
    """Adds a ``keys`` object to each partition row (:mod:`auditor.keys.partition_keys`) and returns
    the document's ``key_partitioners``: per topic, the partitioner verdict (:mod:`auditor.keys.attribution`)
    with the partition count of the metadata log when the log dirs hold one."""
    from auditor.cluster.metadata_log import MetadataLogNotFound, read_metadata_log
    from auditor.keys.attribution import attribute_topic
    from auditor.keys.audit_keys import metadata_partitions
    from auditor.keys.partition_keys import MIB, scan_partition_keys

    sample = None if args.keys_sample_mib is None else int(args.keys_sample_mib * MIB)
    by_topic: dict[str, dict[int, object]] = {}
    for row in result.partitions:
        found = scan_partition_keys(Path(row["log_dir"]) / row["dir_name"], sample_bytes=sample)
        row["keys"] = found.to_json(args.keys_top)
        if row["topic"] is not None and row["partition"] is not None and row.get("dir_kind") == "live":
            stats = by_topic.setdefault(row["topic"], {})
            known = stats.get(row["partition"])
            if known is None or found.stats.records > known.records:  # replicas hold the same records: the fullest
                stats[row["partition"]] = found.stats
    try:
        counts, added = metadata_partitions(read_metadata_log(args.log_dirs, history=True))
    except (MetadataLogNotFound, OSError, ValueError):
        counts, added = {}, {}  # no metadata log here: the counts come from the partition dirs seen (said in the output)
    verdicts = [attribute_topic(topic, stats, counts.get(topic), "metadata log" if topic in counts else None,
                                added.get(topic))
                for topic, stats in sorted(by_topic.items()) if not topic.startswith("__")]
    return {"key_partitioners": verdicts}


def write_csv(rows) -> None:
    """The segment table as CSV on stdout (lists joined with ';')."""
    writer = csv.DictWriter(sys.stdout, fieldnames=SEGMENT_FIELDS)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(v) for k, v in row.items()})


def run_spark(args) -> int:
    """``kafka-audit scan --engine spark``: same outputs as the local engine.

    ``--parquet DIR`` is the scalable path: the segment table goes from executors to Parquet,
    the driver only sees aggregates. ``--json`` and the default table view collect both tables
    to the driver (fine for small clusters); ``--csv`` streams segment rows through the driver
    (``toLocalIterator``: one Spark partition in memory at a time).
    """
    from pyspark.sql import functions as F

    spark = build_spark(args.master, parse_conf(args.conf), reads=args.manifest or ())
    try:
        scan = read_manifests(spark, args.manifest) if args.manifest else scan_dataframes(spark, args.log_dirs, args.depth)
        order_dirs = [i["log_dir"] for i in scan.log_dirs]
        if args.parquet:
            for path in write_parquet(scan, aggregates(scan.segments, scan.partitions), args.parquet):
                sys.stderr.write(f"wrote {path}\n")
        if args.json:
            write_json(scan_document(args.depth, "spark", [{k: i.get(k) for k in LOG_DIR_INFO_KEYS} for i in scan.log_dirs],
                                     rows_to_driver(scan.partitions, order_dirs, ("dir_name",)),
                                     rows_to_driver(scan.segments, order_dirs, SEGMENT_ORDER)))
        elif args.csv:
            write_csv(r.asDict() for r in scan.segments.orderBy(*driver_order(F, order_dirs, SEGMENT_ORDER)).toLocalIterator())
        elif not args.parquet:
            result = ScanResult(rows_to_driver(scan.segments, order_dirs, SEGMENT_ORDER),
                                rows_to_driver(scan.partitions, order_dirs, ("dir_name",)), scan.log_dirs)
            write_scan_table(result, sys.stdout)
        scan.unpersist()
    finally:
        spark.stop()
    return input_exit_code(scan.log_dirs)
