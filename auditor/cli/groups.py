"""``kafka-audit groups``: consumer groups and their lag, read offline from the brokers' log dirs.

Reads ``__consumer_offsets`` (every partition found under the given log dirs; with several
replicas, the furthest) the way the group coordinator replays it
(:mod:`auditor.cluster.consumer_groups`), then, for every committed topic-partition, scans that
partition's directory at depth ``index`` for its log start and end offsets and reads its offset
index to place the committed offset in bytes. Prints every live group: protocol, state as last
recorded, and per topic-partition the committed offset, its commit time, the log start and end
offsets, and the lag in records and bytes. Deleted groups are not listed as live (the JSON names
them under ``deleted_groups``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from auditor.cli.common import add_log_dir_arguments, EXIT_INPUT_PROBLEM, EXIT_OK, FORMATTER, CliError, write_json
from auditor.cluster.consumer_groups import OFFSETS_TOPIC, GroupsResult, read_groups
from auditor.formats import filenames
from auditor.manifest import find_manifests, read_consumer_groups, read_manifest
from auditor.replay import offset_position, segment_views
from auditor.scan import plan_log_dir, scan_partition_dir
from auditor.schema import json_envelope
from auditor.units import human_bytes, iso_utc


def register(sub) -> None:
    p = sub.add_parser(
        "groups",
        formatter_class=FORMATTER,
        help="consumer groups, their committed offsets and lag, read from __consumer_offsets on disk",
        description=(
            "List every consumer group recorded in __consumer_offsets under the given log dirs\n"
            "(read-only, no broker needed): its protocol (classic / consumer (KIP-848) / share /\n"
            "streams), its state as last recorded, and per topic-partition the committed offset,\n"
            "when it was committed, the partition's log start and end offsets, and the lag in\n"
            "records (offsets) and bytes. Tombstoned (deleted) groups are not listed as live.\n\n"
            "Pass every broker's log dirs: each group lives in one __consumer_offsets partition,\n"
            "and its topics' partitions may be on any broker."
        ),
        epilog=(
            "examples:\n"
            "  kafka-audit groups /var/lib/kafka/data\n"
            "  kafka-audit groups /mnt/broker1/data /mnt/broker2/data --group billing --json\n"
            "  kafka-audit groups --manifest /audit/manifests/\n"
            "JSON: groups -> {group: {protocol, state, ..., topics: {topic: {partition: {committed_offset, ...}}}}}\n"
            "exit codes: 0 done, 2 usage error, 3 input problem (no __consumer_offsets under the log dirs)"
        ),
    )
    add_log_dir_arguments(p)
    p.add_argument("--manifest", action="append", metavar="PATH",
                   help="instead of log dirs: `kafka-audit collect` manifests (repeatable); the committed offsets "
                        "from the groups they carry (older manifests: from the __consumer_offsets files at the "
                        "paths they recorded), log start/end offsets from the manifests' rows")
    p.add_argument("--group", action="append", metavar="G", help="only these groups (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON (exact bytes and epoch ms beside UTC times)")
    p.set_defaults(func=run)


def partition_facts(log_dirs: list[str], wanted: set[tuple[str, int]]) -> tuple[dict, list[str]]:
    """(topic, partition) -> {"views", "log_start_offset", "log_end_offset", "high_watermark",
    "broker_id", "log_dir"} for the wanted partitions' live replicas (the furthest replica when
    several), scanned at depth index; plus problems."""
    facts: dict[tuple[str, int], dict] = {}
    problems: list[str] = []
    for log_dir in log_dirs:
        plan = plan_log_dir(log_dir)
        problems += plan.info["problems"]
        for pdir in plan.partition_dirs:
            parsed = filenames.parse_partition_dir(pdir.name)
            if parsed is None or parsed.kind != "live" or (parsed.topic, parsed.partition) not in wanted:
                continue
            rows, prow = scan_partition_dir(pdir, "index", log_dir_info=plan.info,
                                            checkpoints_by_tp=plan.checkpoints_by_tp, root=plan.root)
            views = segment_views(rows)
            leo = prow.get("log_end_offset")
            key = (parsed.topic, parsed.partition)
            old = facts.get(key)
            if old is not None and (old["log_end_offset"] or -1) >= (leo or -1):
                continue
            facts[key] = {"views": views, "log_start_offset": prow.get("log_start_offset"), "log_end_offset": leo,
                          "high_watermark": prow.get("high_watermark"), "broker_id": prow.get("broker_id"),
                          "log_dir": str(plan.root)}
    return facts, problems


def partition_facts_from_manifests(paths: list[str], wanted: set[tuple[str, int]]) -> tuple[dict, list[str]]:
    """Like :func:`partition_facts`, from manifests' rows (no scan)."""
    by_replica: dict[tuple, list[dict]] = {}
    prows: dict[tuple, dict] = {}
    for d in find_manifests(paths):
        seg, part, _ = read_manifest(d)
        for r in seg.to_pylist():
            if (r["topic"], r["partition"]) in wanted and r.get("dir_kind", "live") == "live":
                by_replica.setdefault((r["topic"], r["partition"], r.get("broker_id"), r.get("log_dir")), []).append(r)
        for r in part.to_pylist():
            key = (r["topic"], r["partition"])
            if key in wanted and r.get("dir_kind", "live") == "live":
                old = prows.get(key)
                if old is None or (r.get("log_end_offset") or -1) > (old.get("log_end_offset") or -1):
                    prows[key] = r
    facts = {}
    for key, r in prows.items():
        facts[key] = {"views": segment_views(by_replica.get((key[0], key[1], r.get("broker_id"), r.get("log_dir")), [])),
                      "log_start_offset": r.get("log_start_offset"), "log_end_offset": r.get("log_end_offset"),
                      "high_watermark": r.get("high_watermark"), "broker_id": r.get("broker_id"),
                      "log_dir": r.get("log_dir")}
    return facts, []


def offsets_log_dirs_from_manifests(paths: list[str]) -> list[str]:
    """The log dirs the manifests recorded __consumer_offsets partitions in (those reachable here)."""
    dirs = set()
    for d in find_manifests(paths):
        _, part, _ = read_manifest(d)
        for r in part.to_pylist():
            if r["topic"] == OFFSETS_TOPIC and r.get("log_dir") and Path(r["log_dir"]).is_dir():
                dirs.add(r["log_dir"])
    return sorted(dirs)


def lag_rows(result: GroupsResult, facts: dict, groups: list[str]) -> list[dict]:
    """One row per (group, topic, partition): committed offset, times, log offsets, lag."""
    rows = []
    for g in groups:
        grp = result.groups[g]
        for (topic, part), c in sorted(grp.offsets.items()):
            f = facts.get((topic, part))
            row = {"group": g, "protocol": grp.protocol, "state": grp.state, "topic": topic, "partition": part,
                   "committed_offset": c.offset, "metadata": c.metadata, "commit_timestamp_ms": c.commit_timestamp_ms,
                   "commit_time_utc": iso_utc(c.commit_timestamp_ms), "log_start_offset": None, "log_end_offset": None,
                   "lag_records": None, "lag_bytes": None, "partition_found": f is not None}
            if f is not None:
                start, end = f["log_start_offset"], f["log_end_offset"]
                row.update(log_start_offset=start, log_end_offset=end, broker_id=f["broker_id"], log_dir=f["log_dir"])
                if end is not None:
                    row["lag_records"] = max(end - max(c.offset, start or 0), 0)
                    views = f["views"]
                    pos, _ = offset_position(views, max(c.offset, start or 0))
                    if pos is not None and views:
                        from_seg = _segment_index(views, max(c.offset, start or 0))
                        row["lag_bytes"] = (max((views[from_seg].log_size_bytes or 0) - pos, 0)
                                            + sum(v.log_size_bytes or 0 for v in views[from_seg + 1:]))
            rows.append(row)
    return rows


def _segment_index(views, offset: int) -> int:
    i = 0
    for k, v in enumerate(views):
        if v.base_offset <= offset:
            i = k
    return i


def run(args) -> int:
    if bool(args.log_dirs) == bool(args.manifest):
        raise CliError("groups needs log dirs or --manifest (one of them)")
    for d in args.log_dirs or args.manifest:
        if "://" not in d and not Path(d).exists():  # (a URL is checked where it is listed)
            raise CliError(f"{d}: does not exist")
    # manifests: the groups collect carried (consumer_groups.jsonl.gz), else the files at the recorded paths
    result = read_consumer_groups(args.manifest)[0] if args.manifest else None
    if result is None:
        result = read_groups(args.log_dirs or offsets_log_dirs_from_manifests(args.manifest))
    if not result.partitions:
        where = ", ".join(args.log_dirs) if args.log_dirs else "the log dirs the manifests recorded (reachable here)"
        sys.stderr.write(f"kafka-audit: error: no {OFFSETS_TOPIC} partition under {where}\n")
        return EXIT_INPUT_PROBLEM
    names = sorted(result.live)
    if args.group:
        missing = [g for g in args.group if g not in result.live]
        if missing:
            sys.stderr.write(f"kafka-audit: error: no live group {', '.join(map(repr, missing))} in {OFFSETS_TOPIC}\n")
            return EXIT_INPUT_PROBLEM
        names = [g for g in names if g in args.group]
    wanted = {k for g in names for k in result.groups[g].offsets}
    if args.manifest:
        facts, problems = partition_facts_from_manifests(args.manifest, wanted)
    else:
        facts, problems = partition_facts(args.log_dirs, wanted)
    rows = lag_rows(result, facts, names)
    if args.json:
        write_json(_json_document(result, names, rows, problems))
        return EXIT_OK
    header = (f"{'group':24s} {'protocol':9s} {'state':11s} {'partition':24s} {'committed':>10s} "
              f"{'commit time (UTC)':24s} {'start':>9s} {'end':>9s} {'lag':>9s} {'lag bytes':>10s}")
    print(header)
    print("-" * len(header))
    for r in rows:
        def num(v):
            return "-" if v is None else f"{v:,}"
        print(f"{r['group'][:24]:24s} {r['protocol']:9s} {r['state']:11s} {(r['topic'] + '-' + str(r['partition']))[:24]:24s} "
              f"{num(r['committed_offset']):>10s} {str(r['commit_time_utc'] or '-'):24s} {num(r['log_start_offset']):>9s} "
              f"{num(r['log_end_offset']):>9s} {num(r['lag_records']):>9s} "
              f"{(human_bytes(r['lag_bytes']) if r['lag_bytes'] is not None else '-'):>10s}")
    empty = [g for g in names if not result.groups[g].offsets]
    for g in empty:
        grp = result.groups[g]
        print(f"{g[:24]:24s} {grp.protocol:9s} {grp.state:11s} (no committed offsets)")
    deleted = sorted(g for g, grp in result.groups.items() if grp.deleted)
    print(f"\n{len(names)} live group(s), {len(rows)} committed partition(s); {len(deleted)} deleted group(s) not listed; "
          f"{result.records:,} records replayed from {len(result.partitions)} {OFFSETS_TOPIC} partition(s)")
    for n in result.notes + problems:
        print(f"note: {n}", file=sys.stderr)
    return EXIT_OK


def _json_document(result: GroupsResult, names: list[str], rows: list[dict], problems: list[str]) -> dict:
    """group -> {protocol, state, ..., topics: {topic: {partition: {committed_offset, ...}}}}."""
    doc_groups: dict = {}
    for g in names:
        d = result.groups[g].to_dict()
        d.pop("group")
        d["state_time_utc"] = iso_utc(d["state_timestamp_ms"])
        d["topics"] = {}
        doc_groups[g] = d
    for r in rows:
        entry = {k: r[k] for k in ("committed_offset", "metadata", "commit_timestamp_ms", "commit_time_utc",
                                   "log_start_offset", "log_end_offset", "lag_records", "lag_bytes",
                                   "partition_found")}
        doc_groups[r["group"]]["topics"].setdefault(r["topic"], {})[str(r["partition"])] = entry
    return json_envelope(
        groups=doc_groups,
        deleted_groups=sorted(g for g, grp in result.groups.items() if grp.deleted),
        offsets_partitions={str(p): d for p, d in sorted(result.partitions.items())},
        records_replayed=result.records, notes=result.notes, problems=problems)


__all__ = ["register", "run", "partition_facts", "lag_rows"]
