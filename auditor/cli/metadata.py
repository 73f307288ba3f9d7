"""``kafka-audit metadata``: the cluster as its KRaft metadata log records it, read offline.

Finds ``__cluster_metadata-0`` among the given log dirs (all of a broker's log dirs, or its
``metadata.log.dir``), loads the newest complete snapshot and the log after it
(:mod:`auditor.cluster.metadata_log`), and prints brokers with their log-dir IDs, topics with
their IDs (as Kafka's tools print them) and configs, partitions with replicas, ISR, leader,
leader epoch and each replica's log dir (directory IDs mapped to paths through the given log
dirs' ``meta.properties``), and the cluster-default and per-broker configs. ``--history``
replays the whole log on disk and lists every topic, replica-set, log-dir and config change
with its time and metadata offset. Read-only, like ``scan``.

``--manifest`` reads the same from ``kafka-audit collect`` manifests (local or ``s3://``): collect
carries the metadata log decoded (``cluster_metadata.jsonl.gz``, docs/manifests.md), as it read
it on the broker with the whole history; of several brokers' copies the most advanced is used
(:func:`auditor.manifest.read_cluster_metadata`). No log dir needs to be reachable.
"""

from __future__ import annotations

import sys
from pathlib import Path

from auditor.cli.common import add_log_dir_arguments, one_input, EXIT_INPUT_PROBLEM, EXIT_OK, FORMATTER, CliError, write_json
from auditor.cluster.metadata_log import (MetadataLog, MetadataLogNotFound, describe_change,
                                          read_metadata_log)
from auditor.cluster.metadata_state import CONFIG_RESOURCE_TYPES, RESERVED_DIRS
from auditor.schema import json_envelope
from auditor.units import iso_utc


def register(sub) -> None:
    p = sub.add_parser(
        "metadata",
        formatter_class=FORMATTER,
        help="the cluster as its KRaft metadata log (__cluster_metadata) records it, read from disk",
        description=(
            "Read a KRaft node's metadata log (__cluster_metadata-0: snapshots *.checkpoint and log\n"
            "segments) from its log dirs, read-only, no broker needed, and print the cluster it\n"
            "describes: brokers and their log-dir IDs; topics with their IDs and configs; partitions\n"
            "with replicas, ISR, leader, leader epoch and the log dir of each replica; cluster and\n"
            "broker configs. Pass all of the broker's log dirs: the one holding the metadata log is\n"
            "found, and every log dir's meta.properties maps directory IDs to paths.\n\n"
            "--history replays every metadata record on disk and lists each topic creation and\n"
            "deletion, reassignment, move between log dirs and config change with its UTC time\n"
            "and metadata offset.\n\n"
            "--manifest reads the same from `kafka-audit collect` manifests instead (local dirs or\n"
            "s3:// / s3a:// URLs, globs, a parent meaning every manifest under it): collect carries the\n"
            "metadata log as it read it on the broker, with its whole history. Of several brokers'\n"
            "copies the most advanced is shown (the others are listed). Paths are the brokers' own."
        ),
        epilog=(
            "examples:\n"
            "  kafka-audit metadata /var/lib/kafka/data-0 /var/lib/kafka/data-1\n"
            "  kafka-audit metadata /var/lib/kafka/data-0 --history\n"
            "  kafka-audit metadata /var/lib/kafka/data-0 --json > cluster.json\n"
            "  kafka-audit metadata --manifest 's3://audits/manifests/*' --history\n"
            "JSON: topics -> {name: {topic_id, configs: {name: value}, partitions: {id: {replicas, isr, leader,\n"
            "      leader_epoch, directories: [{broker, directory_id, log_dir}]}}}}, brokers, configs, notes\n"
            "exit codes: 0 done, 2 usage error, 3 input problem (no __cluster_metadata-0 under the dirs:\n"
            "a ZooKeeper-mode broker, or not the log dir holding the metadata log; manifests that carry\n"
            "no metadata log, an incomplete or changed manifest, an object store that cannot be read)"
        ),
    )
    add_log_dir_arguments(p)
    p.add_argument("--manifest", action="append", metavar="PATH",
                   help="instead of log dirs: `kafka-audit collect` manifests (repeatable; local, s3:// or s3a://, "
                        "globs, a parent dir); the metadata log they carry")
    p.add_argument("--history", action="store_true", help="also list every change the log on disk records")
    p.add_argument("--json", action="store_true", help="print JSON (epoch ms beside UTC times)")
    p.set_defaults(func=run)


def dir_namer(log: MetadataLog):
    def name(dir_id):
        if dir_id is None:
            return "-"
        path = log.dir_path(dir_id)
        return path if path is not None else f"{dir_id} (not among the given log dirs)"
    return name


def state_document(log: MetadataLog, history: bool) -> dict:
    st = log.state
    topics = {}
    for t in sorted(st.topics.values(), key=lambda t: t.name):
        parts = {}
        for i, p in sorted(t.partitions.items()):
            parts[str(i)] = {
                "replicas": p.replicas, "isr": p.isr, "leader": p.leader, "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch, "adding_replicas": p.adding_replicas,
                "removing_replicas": p.removing_replicas,
                "directories": [{"broker": b, "directory_id": d, "log_dir": log.dir_path(d)}
                                for b, d in zip(p.replicas, p.directories)]}
        topics[t.name] = {"topic_id": t.topic_id, "configs": st.topic_configs(t.name),
                          "created_offset": t.created_offset, "created_ms": t.created_ms,
                          "created_utc": iso_utc(t.created_ms), "partitions": parts}
    brokers = [{"broker_id": b.broker_id, "epoch": b.epoch, "rack": b.rack, "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown,
                "log_dirs": [{"directory_id": d, "log_dir": log.dir_path(d)} for d in b.log_dirs],
                "endpoints": b.endpoints} for b in sorted(st.brokers.values(), key=lambda b: b.broker_id)]
    other = {f"{CONFIG_RESOURCE_TYPES.get(k[0], k[0])}:{k[1]}": v for k, v in sorted(st.configs.items())
             if CONFIG_RESOURCE_TYPES.get(k[0]) not in ("topic", "broker")}
    doc = dict(
        metadata_dir=str(log.metadata_dir), node_id=log.node_id,
        base_snapshot=None if log.base_snapshot is None else str(log.base_snapshot), base_offset=log.base_offset,
        last_offset=st.last_offset, last_timestamp_ms=st.last_timestamp_ms, last_time_utc=iso_utc(st.last_timestamp_ms),
        records_read=log.records_read, features=st.features, brokers=brokers, topics=topics,
        configs={"cluster": st.broker_configs(None),
                 "brokers": {k[1]: v for k, v in sorted(st.configs.items()) if k[0] == 4 and k[1]},
                 "other": other},
        other_metadata_dirs=[str(d) for d in log.other_metadata_dirs],
        notes=[str(n) for n in log.notes])
    if history:
        name = dir_namer(log)
        doc["history"] = [{"offset": c.offset, "timestamp_ms": c.timestamp_ms, "time_utc": iso_utc(c.timestamp_ms),
                           "kind": c.kind, "topic": c.topic, "topic_id": c.topic_id, "partition": c.partition,
                           "broker": c.broker, "before": c.before, "after": c.after,
                           "resource": list(c.resource) if c.resource else None, "name": c.name,
                           "text": describe_change(c, name)} for c in log.history]
    return doc


def print_table(log: MetadataLog, out=None) -> None:
    out = out or sys.stdout
    st = log.state
    name = dir_namer(log)
    base = log.base_snapshot.name if log.base_snapshot is not None else "offset 0 (no snapshot)"
    print(f"metadata log {log.metadata_dir} (node {log.node_id if log.node_id is not None else '?'}): "
          f"state from {base} + {log.records_read:,} log record(s), up to offset {st.last_offset}"
          f"{' at ' + iso_utc(st.last_timestamp_ms) if st.last_timestamp_ms is not None else ''}", file=out)
    print(f"\nbrokers ({len(st.brokers)}):", file=out)
    for b in sorted(st.brokers.values(), key=lambda b: b.broker_id):
        state = "fenced" if b.fenced else "unfenced"
        dirs = ", ".join(name(d) for d in b.log_dirs) or "-"
        print(f"  {b.broker_id:>4}  {state:8s}  rack {b.rack or '-'}  log dirs: {dirs}", file=out)
    print(f"\ntopics ({len(st.topics)}), partitions ({st.partition_count}):", file=out)
    header = f"  {'topic':30s} {'topic id':22s} {'part':>4s} {'leader':>6s} {'epoch':>5s} {'replicas':12s} {'isr':12s} log dirs"
    print(header, file=out)
    for t in sorted(st.topics.values(), key=lambda t: t.name):
        for i, p in sorted(t.partitions.items()):
            dirs = " ".join(f"{b}:{name(d) if d not in RESERVED_DIRS else RESERVED_DIRS[d]}"
                            for b, d in zip(p.replicas, p.directories))
            print(f"  {t.name[:30]:30s} {t.topic_id:22s} {i:>4d} {p.leader:>6d} {p.leader_epoch:>5d} "
                  f"{','.join(map(str, p.replicas)):12s} {','.join(map(str, p.isr)):12s} {dirs}", file=out)
    print("\nconfigs:", file=out)
    for (rtype, rname), cfg in sorted(st.configs.items()):
        what = CONFIG_RESOURCE_TYPES.get(rtype, str(rtype))
        label = "cluster default" if (rtype == 4 and rname == "") else f"{what} {rname}"
        print(f"  {label}: " + ", ".join(f"{k}={v}" for k, v in sorted(cfg.items())), file=out)


def from_manifests(paths: list[str]) -> MetadataLog:
    """The metadata log the manifests carry (MetadataLogNotFound when none does)."""
    from auditor.manifest import read_cluster_metadata  # manifest mode only (pyarrow)

    for d in paths:
        if "://" not in d and not any(c in d for c in "*?[") and not Path(d).exists():  # (URLs, globs: where listed)
            raise CliError(f"{d}: does not exist")
    log, notes = read_cluster_metadata(paths)
    if log is None:
        why = "; ".join(str(n) for n in notes) or (
            "collected from brokers without __cluster_metadata-0 (ZooKeeper mode, or not the log dir "
            "holding the metadata log), or by a collect older than manifest format 2")
        raise MetadataLogNotFound(f"no metadata log in the manifests under {', '.join(paths)}: {why}")
    return log


def run(args) -> int:
    one_input(args, "log_dirs", "manifest")
    for d in args.log_dirs:
        if not Path(d).is_dir():
            raise CliError(f"{d}: not a directory")
    try:
        log = from_manifests(args.manifest) if args.manifest else read_metadata_log(args.log_dirs, history=args.history)
    except MetadataLogNotFound as e:
        sys.stderr.write(f"kafka-audit: error: {e}\n")
        return EXIT_INPUT_PROBLEM
    if args.json:
        write_json(json_envelope(**state_document(log, args.history)))
        return EXIT_OK
    print_table(log)
    if args.history:
        name = dir_namer(log)
        print(f"\nhistory ({len(log.history)} change(s) in the log on disk):")
        for c in log.history:
            print(f"  {iso_utc(c.timestamp_ms)}  offset {c.offset:>8d}  {describe_change(c, name)}")
    for n in log.notes:
        print(f"note: {n}", file=sys.stderr)
    return EXIT_OK


__all__ = ["register", "run", "state_document", "print_table"]
