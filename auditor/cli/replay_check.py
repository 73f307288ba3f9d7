"""``kafka-audit replay-check``: the pre-replay gate, in seconds and without Spark.

Disk mode (``--log-dir``) scans only the asked topics' partition directories at depth
``headers`` and predicts, per partition, the broker's answer for both lookups
(``auditor.replay``; the modern one exact, from the files). Manifest mode reads
``kafka-audit collect`` manifests (answers from the rows; exact when the files are also
reachable at the recorded paths; tiered storage from the ``__remote_log_metadata`` copy the
manifests carry, as disk mode reads it from the log dirs). Protocol mode (``--bootstrap-server``) asks the cluster
itself: the modern answer (ListOffsets by timestamp), the earliest offset and its record's
timestamp, and the offset of the largest timestamp; it cannot know mtimes, so it judges the
modern lookup only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from auditor.check_runner import replay_safety_on_rows
from auditor.cli.common import add_log_dir_arguments, one_input, EXIT_INPUT_PROBLEM, EXIT_OK, EXIT_UNSAFE, FORMATTER, CliError, write_json
from auditor.replay.evidence_text import gap_text, log_start_text, tier_text
from auditor.replay.groups import GroupCommits, GroupNotFound, GroupReset, group_facts, group_offsets_from_disk, \
    resets_from_rows
from auditor.replay.prediction import legacy_offsets_of
from auditor.replay.protocol import BrokerAnswers, ask_partitions, resets_from_protocol
from auditor.replay.rows import ReplayRows, by_partition, rows_from_log_dirs
from auditor.schema import json_envelope
from auditor.units import iso_utc, parse_time
from checks.framework.base import AuditContext, CheckInput, Finding, Severity
from checks.framework.config import Config, ConfigError
from checks.replay.safety import LOOKUP_APIS, ReplaySafety

#: The --json document's version (reports/replay-check.schema.json has its changelog).
SCHEMA_VERSION = 2



def register(sub) -> None:
    p = sub.add_parser(
        "replay-check",
        formatter_class=FORMATTER,
        help="before rewinding consumers: what a seek to a time really returns, per partition",
        description=(
            "Predict, per partition of the given topics, what the broker answers when a consumer\n"
            "seeks to --at (both the modern timestamp lookup and the legacy v0 mtime lookup), and\n"
            "exit non-zero when the replay would silently miss data, re-read far too much, or\n"
            "crash an old client. Without Spark; seconds, not minutes.\n\n"
            "sources (one of):\n"
            "  --log-dir DIR         read the brokers' log dirs (read-only); exact answers\n"
            "  --manifest PATH       manifests from `kafka-audit collect`\n"
            "  --bootstrap-server    ask the cluster through the Kafka protocol (no disk access;\n"
            "                        the modern lookup only)"
        ),
        epilog=(
            "times: ISO-8601 with a zone (2024-05-01T12:00:00Z), epoch ms, or relative (--at=-6h, --at=-2d: with =)\n"
            "examples:\n"
            "  kafka-audit replay-check --topic orders --at 2024-05-01T00:00:00Z --log-dir /var/lib/kafka/data\n"
            "  kafka-audit replay-check --topic orders,payments --at=-6h --bootstrap-server kafka1:9092 --json\n"
            "  kafka-audit replay-check --group billing --at 2024-05-01T00:00:00Z --log-dir /var/lib/kafka/data\n"
            "exit codes: 0 safe, 1 unsafe (reason printed), 2 usage error, 3 input problem"
        ),
    )
    p.add_argument("--topic", action="append", metavar="T[,T...]",
                   help="topic(s) to replay (repeatable); with --group: only these of the group's topics")
    p.add_argument("--group", metavar="G",
                   help="a consumer group rewound with kafka-consumer-groups --reset-offsets --to-datetime: its "
                        "committed partitions, what the reset sets, records and bytes re-read or skipped")
    p.add_argument("--at", required=True, metavar="TIME", help="the replay's target time")
    src = p.add_mutually_exclusive_group()
    add_log_dir_arguments(p, src)
    src.add_argument("--manifest", action="append", metavar="PATH", help="a collect manifest dir (repeatable)")
    src.add_argument("--bootstrap-server", metavar="HOST:PORT", help="ask the cluster (protocol only)")
    p.add_argument("--remote-storage-dir", metavar="DIR",
                   help="tiered storage: LocalTieredStorage's directory (the remote segments' files), for exact "
                        "answers in remote ranges; without it they are the remote segment's offset range")
    p.add_argument("--api", choices=LOOKUP_APIS, default="both", help="lookup(s) to judge (default both)")
    p.add_argument("--legacy-max-offsets", type=_max_offsets, metavar="N",
                   help="also print the whole ListOffsets v0 answer a client asking for up to N offsets\n"
                        "gets (old clients asked several to step back segment by segment): the\n"
                        "newest N (.log mtime <= --at) segment offsets, largest first; in the table\n"
                        "and as evidence legacy_offsets in --json. Disk and manifest modes, --topic")
    p.add_argument("--fail-on", default="FAIL", metavar="SEVERITY",
                   help="unsafe from this severity on: WARN also fails on redundant re-reads (default FAIL)")
    p.add_argument("--config", metavar="FILE", help="audit config (replay.safety thresholds)")
    p.add_argument("--json", action="store_true", help="print the per-partition answers as JSON")
    p.set_defaults(func=run)


def _topics(args) -> list[str]:
    _legacy_list_usable(args)
    return [t for chunk in args.topic for t in chunk.split(",") if t]


def _rows_from_manifests(paths: list[str], topics: set[str]) -> ReplayRows:
    from auditor.manifest import find_manifests, read_manifest  # manifest mode only (pyarrow.parquet)

    out = ReplayRows()
    for d in find_manifests(paths):
        seg, part, _ = read_manifest(d)
        out.segments += [r for r in seg.to_pylist() if r["topic"] in topics]
        out.partitions += [r for r in part.to_pylist() if r["topic"] in topics]
    return out


def _remote_logs(args, ctx) -> list[str]:
    """Tiered storage: what ``__remote_log_metadata`` in the same log dirs, or the copy collect
    wrote into the manifests, says is in remote storage (``auditor.manifest.read_remote_logs``,
    as the audit reads it); its notes. Here: --group never reads it."""
    from auditor.manifest import read_remote_logs

    ctx.remote_logs, notes = read_remote_logs(args.log_dirs or [], args.manifest or [])
    ctx.remote_storage_dir = args.remote_storage_dir
    return notes


def _legacy_list_usable(args) -> None:
    """--legacy-max-offsets is answered from the files' mtimes: --topic in disk or manifest mode,
    with the legacy lookup judged; anything else is a usage error (exit 2), never ignored."""
    if args.legacy_max_offsets is None:
        return
    if args.group or args.bootstrap_server or args.api == "modern":
        raise CliError("--legacy-max-offsets needs --topic, --api legacy or both, and --log-dir or --manifest "
                       "(the protocol mode cannot see mtimes; --group prints no v0 lists)")


def _max_offsets(text: str) -> int:
    """--legacy-max-offsets: an integer >= 1 (argparse turns the ValueError into exit 2)."""
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def _legacy_lists(findings: list[Finding], segments, partitions, ctx, max_offsets: int) -> None:
    """Adds to each partition's evidence the v0 answer with up to ``max_offsets`` offsets
    (``legacy_offsets``, ``legacy_max_offsets``: ``auditor.replay.prediction.legacy_offsets_of``)."""
    seg_by, part_by = by_partition(segments), by_partition(partitions)
    for f in findings:
        if not f.evidence or "legacy_offset" not in f.evidence[0]:
            continue
        key = (f.topic, f.partition)
        offsets = legacy_offsets_of(f.topic, f.partition, seg_by.get(key, []), part_by.get(key, []), ctx, max_offsets)
        if offsets is None:
            continue
        f.evidence[0]["legacy_offsets"] = offsets
        f.evidence[0]["legacy_max_offsets"] = max_offsets


def _disk_findings(segments, partitions, ctx, legacy_max_offsets: int | None = None,
                   searches: dict | None = None) -> list[Finding]:
    """replay.safety per partition through the check runner, on the plain rows (no pandas): the
    replay search (reading the chosen segment's files) first, its result handed to the check (and
    kept in ``searches`` when given)."""
    out = replay_safety_on_rows(segments, partitions, ctx, searches)
    if legacy_max_offsets is not None and ctx.config.checks["replay.safety"].get("api") != "modern":
        _legacy_lists(out, segments, partitions, ctx, legacy_max_offsets)
    return out


def _protocol_findings(rows: list[BrokerAnswers], ctx) -> list[Finding]:
    """Protocol mode through the same replay.safety check: the broker's own answers are handed in as
    the prediction of one replica; no mtimes over the protocol, so the modern lookup only."""
    check = ReplaySafety()
    out = []
    for r in rows:
        data = CheckInput(topic=r.topic, partition=r.partition, replay=[r.replica_prediction(ctx.replay_at_ms)])
        out += check.run(data, ctx, {**ctx.options(check, r.topic), "api": "modern"})
    return out


def run(args) -> int:
    one_input(args, "log_dirs", "manifest", "bootstrap_server")
    now = int(time.time() * 1000)
    try:
        target = parse_time(args.at, now)
        fail_on = Severity.parse(args.fail_on)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.group:
        return _run_group(args, target, now, fail_on)
    if not args.topic:
        raise CliError("replay-check needs --topic or --group")
    topics = _topics(args)
    config = _load_config(args.config)
    config.checks.setdefault("replay.safety", {})["api"] = args.api
    ctx = AuditContext(as_of_ms=now, config=config, replay_at_ms=target, replay_topics=tuple(topics))
    problems: list[str] = []
    if args.bootstrap_server:
        try:
            rows = ask_partitions(args.bootstrap_server, topics, target)
        except LookupError as exc:
            raise CliError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a cluster we cannot reach is one clear line
            raise CliError(f"{args.bootstrap_server}: {type(exc).__name__}: {exc}") from None
        findings = _protocol_findings(rows, ctx)
        mode = "protocol"
    else:
        for d in args.log_dirs or args.manifest:
            if "://" not in d and not Path(d).exists():  # (a URL is checked where it is listed)
                raise CliError(f"{d}: does not exist")
        if args.log_dirs:
            rows = rows_from_log_dirs(args.log_dirs, set(topics))
            problems = rows.problems + _remote_logs(args, ctx)
        else:
            rows = _rows_from_manifests(args.manifest, set(topics))
            problems = rows.problems + _remote_logs(args, ctx)
        found = {r["topic"] for r in rows.partitions}
        missing = [t for t in topics if t not in found]
        if missing:
            sys.stderr.write(f"kafka-audit: error: no partition of {', '.join(missing)} under the given "
                             f"{'log dirs' if args.log_dirs else 'manifests'}\n")
            return EXIT_INPUT_PROBLEM
        findings = _disk_findings(rows.segments, rows.partitions, ctx, args.legacy_max_offsets)
        mode = "disk" if args.log_dirs else "manifest"
    findings.sort(key=lambda f: (f.topic, f.partition))
    worst = max((f.severity for f in findings), default=Severity.PASS)
    unsafe = worst >= fail_on
    if args.json:
        write_json(json_envelope(schema_version=SCHEMA_VERSION, mode=mode, replay_at_ms=target, replay_at_utc=iso_utc(target), api=args.api, safe=not unsafe,
                                 worst=worst.name, fail_on=fail_on.name, partitions=[f.to_dict() for f in findings],
                                 problems=problems))
    else:
        _print_table(findings, target, mode, args.api)
        verdict = "UNSAFE" if unsafe else "safe"
        print(f"\n{verdict}: replay of {', '.join(topics)} to {iso_utc(target)} ({mode} mode, api {args.api}); "
              f"worst {worst.name}, fails at {fail_on.name}")
    return EXIT_UNSAFE if unsafe else EXIT_OK


def _load_config(path: str | None) -> Config:
    """The audit config; a bad one is one line on stderr and exit 2, as for ``audit``."""
    try:
        return Config.load(path)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


@dataclass
class GroupReplay:
    """``--group``: what the reset sets per partition, the group's facts and the safety verdicts."""

    resets: list[GroupReset]
    facts: dict
    findings: list[Finding]
    mode: str
    """protocol, disk or manifest."""
    problems: list[str] = field(default_factory=list)


def _group_from_protocol(args, target: int, now: int, config) -> GroupReplay:
    """--group with --bootstrap-server: the cluster's own answers (no bytes)."""
    only = set(_topics(args)) if args.topic else None
    try:
        asked = resets_from_protocol(args.bootstrap_server, args.group, target)
        resets = [r for r in asked.resets if only is None or r.topic in only]
        topics = sorted({r.topic for r in resets})
        keys = {(r.topic, r.partition) for r in resets}
        rows = [r for r in ask_partitions(args.bootstrap_server, topics, target) if (r.topic, r.partition) in keys]
    except GroupNotFound:
        raise
    except LookupError as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a cluster we cannot reach is one clear line
        raise CliError(f"{args.bootstrap_server}: {type(exc).__name__}: {exc}") from None
    ctx = AuditContext(as_of_ms=now, config=config, replay_at_ms=target, replay_topics=tuple(topics))
    return GroupReplay(resets, asked.facts, _protocol_findings(rows, ctx), "protocol")


def _group_from_files(args, target: int, now: int, config) -> GroupReplay:
    """--group with --log-dir or --manifest: committed offsets from __consumer_offsets files."""
    only = set(_topics(args)) if args.topic else None
    for d in args.log_dirs or args.manifest:
        if "://" not in d and not Path(d).exists():  # (a URL is checked where it is listed)
            raise CliError(f"{d}: does not exist")
    group = _carried_group(args.manifest, args.group) if args.manifest else None
    if group is None:
        dirs = args.log_dirs
        if not dirs:  # a manifest without the groups part: the __consumer_offsets files at the recorded paths
            offsets_rows = _rows_from_manifests(args.manifest, {"__consumer_offsets"}).segments
            dirs = sorted({r["log_dir"] for r in offsets_rows if r.get("log_dir") and Path(r["log_dir"]).is_dir()})
            if not dirs:
                raise GroupNotFound("the manifests list no reachable __consumer_offsets log dir: the group's "
                                    "committed offsets are read from those files")
        group = group_offsets_from_disk(dirs, args.group)
    committed = {k: v for k, v in group.committed.items() if only is None or k[0] in only}
    topics = sorted({t for t, _ in committed})
    if args.log_dirs:
        rows = rows_from_log_dirs(args.log_dirs, set(topics))
    else:
        rows = _rows_from_manifests(args.manifest, set(topics))
    rows = rows.only(committed)
    ctx = AuditContext(as_of_ms=now, config=config, replay_at_ms=target, replay_topics=tuple(topics))
    searches: dict = {}
    findings = _disk_findings(rows.segments, rows.partitions, ctx, searches=searches)
    # the resets use the same lookup where it read the files: each partition's files searched once
    searched = {k: v for k, v in searches.items() if v and ctx.options(ReplaySafety, k[0])["read_files"]}
    resets = resets_from_rows(rows.segments, rows.partitions, committed, target, now, searched)
    return GroupReplay(resets, group.facts, findings, "disk" if args.log_dirs else "manifest",
                       group.notes + rows.problems)


def _carried_group(manifests: list[str], group: str) -> GroupCommits | None:
    """--group from manifests that carry the consumer groups (collect's consumer_groups.jsonl.gz):
    the committed offsets as from the files; None when none carries them."""
    from auditor.manifest import read_consumer_groups

    result, _notes = read_consumer_groups(manifests)
    if result is None:
        return None
    grp = result.live.get(group)
    if grp is None:
        raise GroupNotFound(f"group {group!r} is {'deleted (tombstoned)' if group in result.groups else 'not'} in the "
                            f"__consumer_offsets the manifests carry")
    return GroupCommits({k: c.offset for k, c in grp.offsets.items()}, group_facts(group, grp), result.notes)


def _run_group(args, target: int, now: int, fail_on: Severity) -> int:
    """``--group G``: the group's committed partitions, what --reset-offsets --to-datetime sets
    (auditor.replay.group_reset), re-read/skipped records and bytes, and the usual verdicts."""
    _legacy_list_usable(args)
    from auditor.cli import replay_group as rg

    config = _load_config(args.config)
    config.checks.setdefault("replay.safety", {})["api"] = args.api
    try:
        source = _group_from_protocol if args.bootstrap_server else _group_from_files
        found = source(args, target, now, config)
    except GroupNotFound as exc:
        sys.stderr.write(f"kafka-audit: error: {exc}\n")
        return EXIT_INPUT_PROBLEM
    findings, mode, problems = found.findings, found.mode, found.problems
    findings.sort(key=lambda f: (f.topic, f.partition))
    verdicts: dict = {}
    for f in findings:
        key = (f.topic, f.partition)
        if key not in verdicts or Severity.parse(verdicts[key]) < f.severity:
            verdicts[key] = f.severity.name
    doc = rg.group_document(found.facts, found.resets, verdicts)
    worst = max((f.severity for f in findings), default=Severity.PASS)
    unsafe = worst >= fail_on
    if args.json:
        write_json(json_envelope(schema_version=SCHEMA_VERSION, mode=mode, replay_at_ms=target, replay_at_utc=iso_utc(target), api=args.api, safe=not unsafe,
                                 worst=worst.name, fail_on=fail_on.name, group=doc,
                                 partitions=[f.to_dict() for f in findings], problems=problems))
    else:
        rg.print_group_table(doc)
        for f in findings:
            if f.severity != Severity.PASS:
                print(f"{f.severity.name} {f.topic}-{f.partition}: {f.message}")
        verdict = "UNSAFE" if unsafe else "safe"
        print(f"\n{verdict}: replay of group {args.group!r} to {iso_utc(target)} ({mode} mode, api {args.api}); "
              f"worst {worst.name}, fails at {fail_on.name}")
    return EXIT_UNSAFE if unsafe else EXIT_OK

def _print_table(findings: list[Finding], target: int, mode: str, api: str) -> None:
    header = (f"{'partition':28s} {'verdict':7s} {'oldest record':24s} {'log start':>20s} {'modern':>10s} {'legacy':>10s} "
              f"{'gap':>14s}  reason")
    print(header)
    print("-" * len(header))
    for f in findings:
        e = f.evidence[0] if f.evidence else {}
        modern = e.get("modern_offset")
        legacy = e.get("legacy_offset")
        gap_txt = gap_text(e) or "-"
        legacy_txt = "n/a" if mode == "protocol" else (str(legacy) if legacy is not None else "EMPTY")
        print(f"{f.topic + '-' + str(f.partition):28s} {f.severity.name:7s} {iso_utc(e.get('oldest_timestamp_ms')) or '-':24s} "
              f"{log_start_text(e):>20s} {(str(modern) if modern is not None else '-1'):>10s} {legacy_txt:>10s} {gap_txt:>14s}  "
              f"{'' if f.severity == Severity.PASS else f.message}")
        if e.get("legacy_max_offsets") is not None:
            print(f"{'':28s} legacy v0 answer with max offsets {e['legacy_max_offsets']}: {e.get('legacy_offsets')}")
        tiers = tier_text(e)
        if tiers:
            print(f"{'':28s} {tiers}")
