"""The key statistics an audit's checks read (``AuditContext.keys``): per topic-partition one
summary, per topic the partitioner verdict (issue 23, items 3 and 5).

Where the summaries come from, both engines alike:

* a direct scan with keys on (``audit --keys`` / ``--keys-sample-mib N``): every partition dir of
  the log dirs, on the driver (:func:`scan_keys_local`) or one Spark task per partition dir on the
  executors (:func:`scan_keys_spark`: the summaries travel back serialised, a few KiB each);
* manifests written by ``collect --keys`` (their ``keys.jsonl.gz`` parts); a manifest without the
  part (older ones, or collected without ``--keys``) still reads: :func:`from_manifests` notes it
  and, when no manifest has one, the key checks do not run (said in the report).

Then :func:`build_key_audit`: per topic-partition, the live dirs' summaries. Replicas hold copies
of the same records, so they are never added up (that would double every count): the fullest
replica's summary is used (the most records). Parts of one replica (its segments; its summaries
from two manifests of the same dir) merge with :meth:`KeyStats.merge`. Per topic,
:func:`auditor.keys.attribution.attribute_topic` with the metadata log's partition count and the
partitions it records as added after the topic's creation.

Keys are data: :func:`shown_key` is the one place a key becomes text for people: its murmur2
fingerprint, length and printability, and a printable prefix only when the config's
``keys.show_prefix_bytes`` allows one (and the scan kept one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from auditor.keys.attribution import attribute_topic
from auditor.keys.partition_keys import PartitionKeys, scan_partition_keys
from auditor.keys.sketches import KeyInfo, KeyStats

LIVE = "live"


@dataclass
class PartitionKeyRead:
    """The summary used for one topic-partition and what it covered."""

    topic: str
    partition: int
    stats: KeyStats
    broker_id: int | None
    log_dir: str | None
    mode: str
    sample_bytes: int | None
    scanned_bytes: int
    log_bytes: int
    first_offset: int | None
    last_offset: int | None
    replicas_seen: int = 1
    notes: list[str] = field(default_factory=list)


@dataclass
class KeyAudit:
    """What the key checks and the report read; ``ran`` False: no key statistics (``notes`` say why)."""

    ran: bool
    source: str
    partitions: dict[tuple[str, int], PartitionKeyRead] = field(default_factory=dict)
    verdicts: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    prefix_bytes: int = 0

    def topic_stats(self, topic: str) -> dict[int, KeyStats]:
        return {p: read.stats for (t, p), read in sorted(self.partitions.items()) if t == topic}

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.partitions})

    def read(self, topic: str, partition: int) -> PartitionKeyRead | None:
        return self.partitions.get((topic, partition))

    def shown(self, info: KeyInfo | None) -> dict | None:
        return shown_key(info, self.prefix_bytes)


def shown_key(info: KeyInfo | None, prefix_bytes: int = 0) -> dict | None:
    """A key as people may see it: murmur2 (as Kafka computes it), length, printable; a printable
    prefix of at most ``prefix_bytes`` only when allowed and kept by the scan. Never its bytes."""
    if info is None:
        return None
    out = {"murmur2": info.hashes.murmur2, "length": info.length, "printable": info.printable}
    if prefix_bytes > 0 and info.prefix is not None:
        out["prefix"] = info.prefix.encode("utf-8")[:prefix_bytes].decode("utf-8", "ignore")
    return out


def key_label(shown: dict | None) -> str:
    """One line for a shown key: ``key#<murmur2 hex> (len N[, "prefix"])``."""
    if not shown:
        return "key#?"
    extra = f', "{shown["prefix"]}…"' if shown.get("prefix") else ("" if shown["printable"] else ", binary")
    return f"key#{shown['murmur2'] & 0xFFFFFFFF:08x} (len {shown['length']}{extra})"


def judged_topics(check, ctx) -> Iterator[tuple[str, dict, dict]]:
    """``(topic, partitioner verdict, options)`` of each topic with key statistics that ``check``
    judges (enabled for it; ``__internal`` ones only with its ``include_internal``); nothing when
    the audit read no key statistics."""
    audit = ctx.keys
    if audit is None or not audit.ran:
        return
    for topic, verdict in sorted(audit.verdicts.items()):
        topts = ctx.options(check, topic)
        if topts.get("enabled", True) and (not topic.startswith("__") or topts["include_internal"]):
            yield topic, verdict, topts


# -- reading -----------------------------------------------------------------------------------
def _location(broker_id, log_dir: str, dir_name: str) -> dict | None:
    from auditor.formats.filenames import parse_partition_dir

    parsed = parse_partition_dir(dir_name)
    if parsed is None:
        return None
    return {"broker_id": broker_id, "log_dir": str(log_dir), "topic": parsed.topic, "partition": parsed.partition,
            "dir_kind": parsed.kind, "dir_name": dir_name}


def _key_tasks(log_dirs: Iterable[str]) -> list[tuple[int | None, str, str]]:
    """(broker id, log dir, partition dir name) of every partition dir, listed as the scan lists them."""
    from auditor.scan import plan_log_dir

    tasks = []
    for log_dir in log_dirs:
        plan = plan_log_dir(log_dir)
        tasks += [(plan.info.get("broker_id"), str(plan.root), path.name) for path in plan.partition_dirs]
    return tasks


def _scan_task(task: tuple, sample_bytes: int | None, prefix_bytes: int) -> tuple[dict, PartitionKeys] | None:
    broker_id, log_dir, dir_name = task
    location = _location(broker_id, log_dir, dir_name)
    if location is None:
        return None
    return location, scan_partition_keys(Path(log_dir) / dir_name, sample_bytes=sample_bytes, prefix_bytes=prefix_bytes)


def scan_keys_local(log_dirs: Iterable[str], sample_bytes: int | None, prefix_bytes: int = 0,
                    topics: set[str] | None = None) -> list[tuple[dict, PartitionKeys]]:
    """Every partition dir's key summary (only ``topics``' when given), read on the driver."""
    from auditor.formats.filenames import parse_partition_dir

    tasks = _key_tasks(log_dirs)
    if topics is not None:
        tasks = [t for t in tasks if (parsed := parse_partition_dir(t[2])) is not None and parsed.topic in topics]
    found = (_scan_task(t, sample_bytes, prefix_bytes) for t in tasks)
    return [pair for pair in found if pair is not None]


def scan_keys_spark(spark, log_dirs: Iterable[str], sample_bytes: int | None, prefix_bytes: int = 0) -> list[tuple[dict, PartitionKeys]]:
    """Every partition dir's key summary, one Spark task per partition dir on the executors (the
    driver lists names only, as the segment scan does); summaries come back serialised."""
    tasks = _key_tasks(log_dirs)
    if not tasks:
        return []
    slices = min(len(tasks), 4 * spark.sparkContext.defaultParallelism)

    def on_executor(task):
        pair = _scan_task(task, sample_bytes, prefix_bytes)
        return None if pair is None else (pair[0], _to_wire(pair[1]))

    rows = spark.sparkContext.parallelize(tasks, slices).map(on_executor).filter(lambda r: r is not None).collect()
    return [(location, _from_wire(wire)) for location, wire in rows]


def _to_wire(found: PartitionKeys) -> dict:
    return {"stats": found.stats.to_bytes(), "mode": found.mode, "sample_bytes": found.sample_bytes,
            "log_bytes": found.log_bytes, "scanned_bytes": found.scanned_bytes, "first_offset": found.first_offset,
            "last_offset": found.last_offset, "unreadable_batches": found.unreadable_batches,
            "legacy_records": found.legacy_records, "notes": found.notes}


def _from_wire(wire: dict) -> PartitionKeys:
    return PartitionKeys(KeyStats.from_bytes(wire["stats"]), wire["mode"], wire["sample_bytes"], wire["log_bytes"],
                         wire["scanned_bytes"], wire["first_offset"], wire["last_offset"], wire["unreadable_batches"],
                         wire["legacy_records"], list(wire["notes"]))


def from_manifests(manifest_dirs: Iterable[str]) -> tuple[list[tuple[dict, PartitionKeys]], list[str]]:
    """The key parts of local manifest dirs (``auditor.manifest.find_manifests`` names them), and a
    note per manifest without one (older manifests, or collected without --keys) or with an
    unreadable one."""
    from auditor.keys.manifest_part import KEYS_FILE, read_keys_parts

    from auditor.object_store import exists, is_s3

    dirs = [str(d) for d in manifest_dirs]
    readable = [d for d in dirs if "://" not in d or is_s3(d)]   # local, or s3:// / s3a:// (auditor.object_store)
    pairs, notes = read_keys_parts(readable)
    notes += [f"{d}: key statistics of remote manifests other than s3:// are not read (copy the manifest here)"
              for d in dirs if d not in readable]
    notes += [f"{d}: no key statistics ({KEYS_FILE}: an older manifest, or collected without --keys)"
              for d in readable if not (exists(f"{d}/{KEYS_FILE}") if is_s3(d) else (Path(d) / KEYS_FILE).is_file())]
    return pairs, notes


# -- the metadata log --------------------------------------------------------------------------
def metadata_partitions(log) -> tuple[dict[str, int], dict[str, list[dict]]]:
    """(partition count per topic, partitions added after each topic's creation: partition, offset,
    time) from a metadata log read with its history; empty without one."""
    if log is None:
        return {}, {}
    topics = {t.name: t for t in log.state.topics.values()}
    added: dict[str, list[dict]] = {}
    for change in log.history:  # CreatePartitions: partition-created records after the topic's creation
        topic = topics.get(change.topic)
        if change.kind == "partition-created" and topic is not None and (
                topic.created_ms is None or change.timestamp_ms > topic.created_ms):
            added.setdefault(change.topic, []).append(
                {"partition": change.partition, "offset": change.offset, "timestamp_ms": change.timestamp_ms})
    return {name: len(t.partitions) for name, t in topics.items()}, added


# -- building ----------------------------------------------------------------------------------
def _fullest(pairs: list[tuple[dict, PartitionKeys]]) -> PartitionKeyRead:
    """One topic-partition's summary from its live dirs' pairs (one per replica, or several parts
    of one replica): parts of a replica merged, then the replica with the most records."""
    by_replica: dict[tuple, list[tuple[dict, PartitionKeys]]] = {}
    for location, found in pairs:
        by_replica.setdefault((location["broker_id"], location["log_dir"]), []).append((location, found))
    best = None
    for (broker_id, log_dir), parts in by_replica.items():
        stats = KeyStats.from_dict(parts[0][1].stats.to_dict())  # a copy: the pair's own stays as read
        for _, found in parts[1:]:
            stats.merge(found.stats)
        first = parts[0][1]
        offsets = [f.first_offset for _, f in parts if f.first_offset is not None]
        lasts = [f.last_offset for _, f in parts if f.last_offset is not None]
        read = PartitionKeyRead(parts[0][0]["topic"], parts[0][0]["partition"], stats, broker_id, log_dir, first.mode,
                                first.sample_bytes, sum(f.scanned_bytes for _, f in parts),
                                max(f.log_bytes for _, f in parts), min(offsets, default=None), max(lasts, default=None),
                                notes=[n for _, f in parts for n in f.notes])
        if best is None or stats.records > best.stats.records:
            best = read
    best.replicas_seen = len(by_replica)
    return best


def build_key_audit(pairs: Iterable[tuple[dict, PartitionKeys]], source: str, log=None, notes: Iterable[str] = (),
                    prefix_bytes: int = 0, counts: dict[str, int] | None = None,
                    added: dict[str, list[dict]] | None = None) -> KeyAudit:
    """The :class:`KeyAudit` of the pairs read (see the module docstring); ``log``: the metadata
    log (partition counts, partitions added), or ``counts`` / ``added`` as :func:`metadata_partitions` gives them."""
    grouped: dict[tuple[str, int], list] = {}
    for location, found in pairs:
        if location.get("dir_kind") == LIVE and location.get("topic") is not None and location.get("partition") is not None:
            grouped.setdefault((location["topic"], int(location["partition"])), []).append((location, found))
    audit = KeyAudit(ran=bool(grouped), source=source, notes=list(notes), prefix_bytes=prefix_bytes)
    if not grouped:
        audit.notes.append("key checks did not run: no key statistics were read")
    audit.partitions = {tp: _fullest(group) for tp, group in sorted(grouped.items())}
    if log is not None:
        counts, added = metadata_partitions(log)
    counts, added = counts or {}, added or {}
    for topic in audit.topics():
        if topic.startswith("__"):
            continue  # Kafka's own topics: placed by Kafka, not by a client partitioner
        audit.verdicts[topic] = attribute_topic(topic, audit.topic_stats(topic), counts.get(topic),
                                                "metadata log" if topic in counts else None, added.get(topic))
    return audit


def iter_shown_top(stats: KeyStats, audit: KeyAudit, top: int = 5) -> Iterator[dict]:
    """The heaviest keys of one summary as the report shows them: key, records, shares of records and bytes."""
    for ident, count, nbytes in stats.heavy.top(top):
        yield {"key": audit.shown(stats.info.get(ident)), "records_min": count,
               "records_max": count + stats.heavy.decrement,
               "share_of_records": round(count / stats.records, 6) if stats.records else None,
               "bytes_min": nbytes,
               "share_of_bytes": round(nbytes / stats.record_bytes, 6) if stats.record_bytes else None}


#: Heaviest keys shown per skewed partition in the findings document and the report.
TOP_KEYS_SHOWN = 5


def key_document(audit: KeyAudit | None, skewed: Iterable[tuple[str, int]] = ()) -> dict:
    """The findings document's ``keys`` member (findings.schema.json): whether key checks ran and
    why not, per topic the partitioner verdict, per partition its counts, and for each skewed
    partition (``skewed``: KLA001's flagged ones, plus those >= 1.5x their topic's median records)
    its heaviest keys as fingerprints with their shares of records and bytes."""
    if audit is None:
        return {"ran": False, "source": None, "prefix_bytes": 0, "topics": [],
                "notes": ["key checks did not run: not asked (audit --keys, or manifests collected with --keys)"]}
    flagged = set(skewed)
    topics = []
    for topic in audit.topics():
        verdict = audit.verdicts.get(topic, {})
        flagged |= {(topic, s["partition"]) for s in verdict.get("skewed_partitions", [])}
        partitions = []
        for partition, stats in audit.topic_stats(topic).items():
            read = audit.read(topic, partition)
            row = {"partition": partition, "broker_id": read.broker_id, "mode": read.mode,
                   "sample_bytes": read.sample_bytes, "scanned_bytes": read.scanned_bytes, "log_bytes": read.log_bytes,
                   "records": stats.records, "record_bytes": stats.record_bytes, "null_key_records": stats.null_keys,
                   "distinct_keys_estimate": stats.hll.estimate(),
                   "distinct_keys_relative_std_error": round(stats.hll.relative_error, 4),
                   "heavy_hitters_error_records": stats.heavy.decrement, "skewed": (topic, partition) in flagged}
            if row["skewed"]:
                row["top_keys"] = list(iter_shown_top(stats, audit, TOP_KEYS_SHOWN))
            partitions.append(row)
        topics.append({"topic": topic, "partitioner": verdict.get("partitioner"), "verdict": verdict.get("verdict"),
                       "partition_count": verdict.get("partition_count"),
                       "partition_count_source": verdict.get("partition_count_source"),
                       "families": verdict.get("families", []),
                       "split_keys_found": verdict.get("split_keys", {}).get("split_keys_found", 0),
                       "partitions_added": verdict.get("partitions_added", []), "partitions": partitions})
    return {"ran": audit.ran, "source": audit.source, "prefix_bytes": audit.prefix_bytes, "notes": list(audit.notes),
            "topics": topics}

