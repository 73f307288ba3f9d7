"""``kafka-audit plan``: from skew to a reassignment plan that Kafka's own tool executes.

Reads each replica's bytes and record times from the log dirs (or manifests), the replica sets, leaders and racks
from the KRaft metadata log those dirs hold (or ``--bootstrap-server``), with the topics' retention
rules each replica's steady state (:mod:`auditor.cli.plan_steady`), plans with
:mod:`auditor.plan`, and writes the file ``kafka-reassign-partitions --execute
--reassignment-json-file`` takes (``--out``), today's assignment (``--rollback``) and a summary
(``--json``); prints a table. Read-only on the log dirs, like ``scan``.
"""

from __future__ import annotations

import json
import os
import re
import sys

from auditor.atomic import atomic_write
from auditor.cli.common import EXIT_OK, EXIT_UNSAFE, FORMATTER, CliError, InputProblem, add_log_dir_arguments, one_input
from auditor.cli.plan_input import (build_input, disk_rows, metadata_from_cluster, metadata_from_disk,
                                    parse_bytes, parse_capacities)
from auditor.cli.plan_steady import compact_only, key_statistics, rules_from_cluster, rules_from_state, weigh_steady
from auditor.plan import PlanOptions, plan, reassignment, rollback, summary
from auditor.units import human_bytes

NEEDS_METADATA = ("kafka-audit plan needs the replica sets: no __cluster_metadata-0 under the given log dirs "
                  "(give the log dir holding a KRaft node's metadata log, or --bootstrap-server HOST:PORT)")


def register(sub) -> None:
    p = sub.add_parser(
        "plan", formatter_class=FORMATTER,
        help="from skew to a reassignment plan that kafka-reassign-partitions executes",
        description=(
            "Plan replica moves that bring every broker, and every log dir of each broker, within\n"
            "--tolerance of its peers' mean (by default in what each replica will weigh at retention\n"
            "steady state, see --balance), moving as few bytes as it can; keep the replication\n"
            "factor, one replica per broker and the racks' spread; never take a log dir above\n"
            "--headroom of its capacity while the old and the new copy both exist.\n"
            "Bytes come from the log dirs (or manifests); replica sets, leaders and racks from the\n"
            "KRaft metadata log among those dirs, or from --bootstrap-server."),
        epilog=(
            "examples:\n"
            "  kafka-audit plan --log-dir /data/b1/d0 --log-dir /data/b1/d1 ... --out plan.json --rollback rollback.json\n"
            "  kafka-reassign-partitions --bootstrap-server HOST:9092 --reassignment-json-file plan.json \\\n"
            "      --execute --throttle 50000000\n"
            "exit codes: 0 the plan reaches the target (or nothing to do), 1 it does not (the summary says\n"
            "why; the moves it could plan are written), 2 usage error (no metadata log and no\n"
            "--bootstrap-server, a broker that does not exist), 3 input problem"),
    )
    add_log_dir_arguments(p)
    p.add_argument("--manifest", action="append", default=[], metavar="PATH",
                   help="manifests from `kafka-audit collect` instead of log dirs (repeatable)")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="read replica sets, leaders and racks from this cluster instead of the metadata log")
    p.add_argument("--out", metavar="FILE", help="the reassignment JSON for kafka-reassign-partitions --execute")
    p.add_argument("--rollback", metavar="FILE", help="today's assignment of the partitions the plan moves")
    p.add_argument("--json", metavar="FILE", help="the plan's summary (bytes moved, before/after, lower bound, throttle)")
    p.add_argument("--balance", choices=("steady", "current"), default="steady",
                   help="what to balance: steady (the default): each replica's bytes at retention steady state, "
                        "projected from its ingress rate and its topic's retention rules (where unknown: its bytes "
                        "of today, and the summary says how many and why); current: today's bytes. Bytes moved, "
                        "and the headroom while both copies exist, are always today's bytes")
    p.add_argument("--depth", choices=("index", "headers", "deep"), default="headers",
                   help="how deep the log dirs are read (default headers, as collect and audit): the steady state's "
                        "ingress rates come from the segments' record times and counts; index reads less "
                        "(O(1) per segment) and leaves more replicas without a rate")
    p.add_argument("--keys", action="store_true",
                   help="read every record's key of the compact-only topics: their distinct keys bound their steady "
                        "state (without: they weigh their bytes of today); manifests carry theirs (collect --keys)")
    p.add_argument("--tolerance", type=float, default=0.10, help="within this fraction of the mean (default 0.10)")
    p.add_argument("--headroom", type=float, default=0.85, help="fraction of a log dir's capacity never passed (default 0.85)")
    p.add_argument("--capacity", action="append", default=[], metavar="[DIR=]BYTES",
                   help="a log dir's disk size (every log dir's without DIR=); without it headroom is not checked")
    p.add_argument("--capacity-from-disk", action="store_true",
                   help="each log dir's file system (statvfs: size, bytes used by anything) bounds the headroom; "
                        "log dirs on one file system share it")
    p.add_argument("--drain-broker", action="append", type=int, default=[], metavar="ID",
                   help="move every replica off this broker (repeatable)")
    p.add_argument("--exclude-topic", action="append", default=[], metavar="PATTERN",
                   help="never move partitions of topics matching this regular expression (repeatable)")
    p.add_argument("--max-move-bytes", metavar="BYTES", help="stop planning before moving more bytes than this")
    p.add_argument("--max-moves", type=int, metavar="N", help="stop planning after N replica moves")
    p.add_argument("--throttle", metavar="BYTES_PER_S", default="50MiB",
                   help="replication throttle the duration is computed at (default 50MiB)")
    p.set_defaults(func=run)


def options(args, brokers) -> PlanOptions:
    if not 0 <= args.tolerance < 1:
        raise CliError(f"--tolerance {args.tolerance}: expected 0 <= value < 1")
    if not 0 < args.headroom <= 1:
        raise CliError(f"--headroom {args.headroom}: expected 0 < value <= 1")
    unknown = sorted(set(args.drain_broker) - set(brokers))
    if unknown:
        raise CliError(f"--drain-broker {', '.join(map(str, unknown))}: no such broker (brokers: "
                       f"{', '.join(map(str, sorted(brokers)))})")
    for pattern in args.exclude_topic:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise CliError(f"--exclude-topic {pattern}: not a regular expression: {exc}") from None
    if args.max_moves is not None and args.max_moves < 0:
        raise CliError(f"--max-moves {args.max_moves}: expected >= 0")
    return PlanOptions(tolerance=args.tolerance, headroom=args.headroom, drain=frozenset(args.drain_broker),
                       exclude_topics=tuple(args.exclude_topic),
                       max_move_bytes=None if args.max_move_bytes is None else parse_bytes(args.max_move_bytes,
                                                                                             "--max-move-bytes"),
                       max_moves=args.max_moves)


def run(args) -> int:
    one_input(args, "log_dirs", "manifest")
    log_dirs = list(args.log_dirs)
    if args.capacity_from_disk and args.manifest:
        raise CliError("--capacity-from-disk reads the log dirs' file systems: give --log-dir, not --manifest")
    if args.manifest:
        from auditor.manifest import find_manifests
        try:
            find_manifests(args.manifest)
        except FileNotFoundError as exc:
            raise InputProblem(str(exc)) from None
    rate = parse_bytes(args.throttle, "--throttle")
    capacities = parse_capacities(args.capacity)
    meta = (metadata_from_cluster(args.bootstrap_server) if args.bootstrap_server
            else metadata_from_disk(log_dirs, args.manifest))
    if meta is None:
        raise CliError(NEEDS_METADATA)
    brokers, parts, meta_notes, state = meta
    opts = options(args, brokers)
    rows, dir_brokers, notes, segments, dir_rows = disk_rows(log_dirs, args.manifest, depth=args.depth)
    inp = build_input(rows, dir_brokers, brokers, parts, capacities, meta_notes + notes)
    rules = rules_from_cluster(args.bootstrap_server) if args.bootstrap_server else rules_from_state(state)
    keys, key_notes = key_statistics(log_dirs, args.manifest, compact_only(rules), args.keys)
    inp.notes += key_notes
    weigh_steady(inp, segments, dir_rows, rules, args.balance, keys)
    if args.capacity_from_disk:
        file_systems(inp)
    result = plan(inp, opts)
    doc = summary(result, inp, rate)
    if args.out:
        atomic_write(args.out, json.dumps(reassignment(result), indent=1) + "\n")
    if args.rollback:
        atomic_write(args.rollback, json.dumps(rollback(result, inp), indent=1) + "\n")
    if args.json:
        atomic_write(args.json, json.dumps(doc, indent=1) + "\n")
    write_table(doc, sys.stdout)
    return EXIT_OK if result.target_reached else EXIT_UNSAFE


def file_systems(inp) -> None:
    """Each log dir's file system (its device), its size and the bytes used on it today (statvfs)."""
    for b, spec in inp.brokers.items():
        for d in spec.log_dirs:
            try:
                dev, fs = os.stat(d).st_dev, os.statvfs(d)
            except OSError as exc:
                raise CliError(f"--capacity-from-disk: {d}: {exc.strerror}") from None
            disk = f"{os.major(dev)}:{os.minor(dev)}"
            inp.disks[(b, d)] = disk
            inp.disk_capacity[disk] = fs.f_blocks * fs.f_frsize
            inp.disk_used[disk] = (fs.f_blocks - fs.f_bfree) * fs.f_frsize


def write_table(doc: dict, out) -> None:
    steady = doc["steady_state"] is not None

    def both(x: dict, when: str) -> str:
        now = human_bytes(x[f"bytes_{when}"])
        return f"{now:>10} {human_bytes(x[f'steady_bytes_{when}']) if steady else '-':>10}"

    balanced = "steady state" if doc["balance"] == "steady" else "bytes today"
    out.write(f"balanced: {balanced}; each pair: bytes today, at retention steady state\n")
    out.write(f"{'broker':>6} {'rack':<8} {'before':>21} {'x mean':>7} {'after':>21} {'x mean':>7}\n")
    for b in doc["brokers"]:
        out.write(f"{b['broker_id']:>6} {b['rack'] or '-':<8} {both(b, 'before')} {b['ratio_to_mean_before']:>7.2f} "
                  f"{both(b, 'after')} {b['ratio_to_mean_after']:>7.2f}{'  (drained)' if b['drained'] else ''}\n")
    out.write(f"\n{'broker':>6} {'log dir':<36} {'before':>21} {'after':>21} {'peak':>10} {'capacity':>10}\n")
    for d in doc["log_dirs"]:
        cap = human_bytes(d["capacity_bytes"]) if d["capacity_bytes"] else "-"
        out.write(f"{d['broker_id']:>6} {d['log_dir'][-36:]:<36} {both(d, 'before')} {both(d, 'after')} "
                  f"{human_bytes(d['bytes_peak']):>10} {cap:>10}\n")
    if steady and doc["steady_state"]["fallbacks"]:
        s = doc["steady_state"]
        out.write(f"\nsteady state unknown for {s['replicas_at_bytes_today']} of {s['replicas']} replicas "
                  f"({human_bytes(s['bytes_at_bytes_today'])}): weighed at their bytes of today\n")
        for f in s["fallbacks"]:
            out.write(f"  {f['replicas']} replicas, {human_bytes(f['bytes'])}: {f['why']}\n")
    t = doc["throttle"]
    out.write(f"\n{doc['replicas_moved']} replica moves ({doc['partitions_changed']} partitions): "
              f"{human_bytes(doc['bytes_moved'])} ({doc['bytes_moved']} bytes; between brokers "
              f"{human_bytes(doc['bytes_moved_between_brokers'])}, between log dirs "
              f"{human_bytes(doc['bytes_moved_between_log_dirs'])}); lower bound {human_bytes(doc['lower_bound_bytes'])}"
              f" ({doc['lower_bound_bytes']} bytes)\n")
    if t.get("expected_duration_s") is not None:
        out.write(f"at {human_bytes(t['rate_bytes_per_s'])}/s: about {t['expected_duration_s']:.1f} s "
                  f"(kafka-reassign-partitions --throttle {t['rate_bytes_per_s']})\n")
    out.write("target reached\n" if doc["target_reached"] else "target NOT reached:\n")
    for r in doc["reasons"]:
        out.write(f"  - {r}\n")
    for n in doc["notes"]:
        out.write(f"note: {n}\n")
