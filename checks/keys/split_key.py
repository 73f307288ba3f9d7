"""KLA070 keys.split_key: a key found in more than one partition of a topic (per-key order broken).

What it checks:
    With the key statistics read (``audit --keys``, or manifests collected with ``--keys``),
    per topic: the keys each partition's summary holds with a count (its uniform sample of
    distinct keys and its heavy hitters), and which of them sit in more than one partition. Per
    such key: the partitions, its records in each, its first record in each (offset and time),
    and since when it is split (the first record in the partition it reached last). The likely
    cause comes from the topic's partitioner verdict: the partition count changed (the metadata
    log's record of partitions added: when, at which offset), or producers with different
    partitioners; else explicit partitions or a custom partitioner. Null and empty keys are not
    judged (clients place them at random). Without key statistics nothing is judged.

Why it matters:
    Kafka orders records per partition only. Consumers that rely on per-key order (state
    machines, changelogs, CDC, compacted topics' "last value wins") see a split key's records
    interleaved from two partitions in any order, and a compacted topic keeps one "latest" value
    per partition: two live values for one key. Nothing in Kafka reports it.

Example finding:
    WARN orders: 37 keys found in more than one partition (per-key order broken), e.g.
    key#5f0c1a2e (len 12) in partitions 1, 4 since 2026-11-27T20:41:07.120Z (offset 0 of
    partition 4); likely cause: the partition count changed: murmur2 at 4 partitions explains
    the records the current count does not; the metadata log records partitions 4, 5 added at
    2026-11-27T20:41:05.002Z (offset 212).

How to fix:
    After a partition count change: keys written before it stay where they were; consumers that
    need order must drain the old partitions first, or re-key the topic into a new one with the
    final count. With two partitioners: make every producer use the same one (librdkafka
    ``partitioner=murmur2_random`` matches Java's default). Key fingerprints are Kafka's murmur2
    of the key: compute it for a suspected key to find it.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, positive, severity_option
from auditor.units import iso_utc

#: Split keys shown per finding (the count is kept in full).
EXAMPLES = 10


class SplitKey(Check):
    code = "KLA070"
    name = "keys.split_key"
    title = "Keys in more than one partition"
    scope = "cluster"
    identity = ("topic",)
    options = {
        "severity": severity_option("WARN"),
        "min_split_keys": Option(1, "findings start at this many split keys in a topic", int, positive, ">= 1"),
        "include_internal": Option(False, "also judge topics whose name starts with \"__\"", bool),
    }

    def run(self, data: CheckInput, ctx, opts):
        from auditor.keys.audit_keys import judged_topics

        out = []
        for topic, verdict, topts in judged_topics(self, ctx):
            split = split_keys_with_times(ctx.keys, topic)
            if len(split) >= topts["min_split_keys"]:
                out.append(self._finding(topic, split, verdict, ctx.keys, topts))
        return out

    def _finding(self, topic: str, split: list[dict], verdict: dict, audit, topts):
        from auditor.keys.audit_keys import key_label

        first = split[0]
        cause = likely_cause(verdict)
        where = ", ".join(str(p["partition"]) for p in first["partitions"])
        since = (f" since {first['since_utc']} (offset {first['since_offset']} of partition {first['since_partition']})"
                 if first["since_offset"] is not None else "")
        estimate = verdict.get("split_keys", {}).get("split_share_estimate")
        share = f"; about {estimate:.1%} of the topic's keys" if estimate else ""
        message = (f"{len(split)} key(s) found in more than one partition (per-key order broken){share}, e.g. "
                   f"{key_label(first['key'])} in partitions {where}{since}; likely cause: {cause}")
        fix = _fix(cause)
        return self.finding(
            topts["severity"], message, fix,
            thresholds={"min_split_keys": topts["min_split_keys"], "partition_count": verdict.get("partition_count"),
                        "partition_count_source": verdict.get("partition_count_source"),
                        "keys_checked": verdict.get("split_keys", {}).get("keys_checked"),
                        "split_share_estimate": estimate, "key_source": audit.source},
            evidence=({**item, "likely_cause": cause, "partitions_added": verdict.get("partitions_added", [])}
                      for item in split),
            cap=EXAMPLES, topic=topic)


def split_keys_with_times(audit, topic: str) -> list[dict]:
    """The topic's keys held (with a count) by more than one partition's summary, heaviest first:
    key (shown), partitions with records and first record (offset, time), and since when split."""
    from auditor.keys.attribution import checked_keys
    from auditor.keys.partitioners import FAMILIES

    stats_by_partition = audit.topic_stats(topic)
    where: dict[int, dict[int, int]] = {}
    infos = {}
    for p, stats in stats_by_partition.items():
        for info, count, ident in checked_keys(stats):
            where.setdefault(ident, {})[p] = count
            infos[ident] = info
    count = audit.verdicts.get(topic, {}).get("partition_count") or (max(stats_by_partition) + 1)
    out = []
    for ident in sorted((i for i, parts in where.items() if len(parts) > 1), key=lambda i: (-sum(where[i].values()), i)):
        parts = []
        for p, records in sorted(where[ident].items()):
            seen = stats_by_partition[p].first_seen.get(ident)
            parts.append({"partition": p, "records": records, "first_offset": None if seen is None else seen[0],
                          "first_timestamp_utc": None if seen is None else iso_utc(seen[1])})
        known = [(seen["first_timestamp_utc"] or "", seen["first_offset"], seen["partition"]) for seen in parts
                 if seen["first_offset"] is not None]
        latest = max(known, default=None, key=lambda k: k[0])  # the partition the key reached last
        info = infos[ident]
        out.append({"key": audit.shown(info), "records": sum(where[ident].values()), "partitions": parts,
                    "since_utc": latest[0] or None if latest else None,
                    "since_offset": latest[1] if latest else None, "since_partition": latest[2] if latest else None,
                    "partition_by_family": {f.name: f.to_partition(getattr(info.hashes, f.hash_name), count)
                                            for f in FAMILIES}})
    return out


def likely_cause(verdict: dict) -> str:
    """The cause the topic's partitioner verdict points to (two explanations, partitions added)."""
    pair = verdict.get("two_explanations")
    if pair:
        return pair["cause"]
    added = verdict.get("partitions_added")
    if added:
        first = min(added, key=lambda a: a["offset"])
        return (f"the partition count changed: the metadata log records partitions "
                f"{', '.join(str(a['partition']) for a in added)} added at {first['timestamp_utc']} "
                f"(offset {first['offset']}); keys written before then hash elsewhere now")
    if verdict.get("partitioner"):
        return (f"unknown: {verdict['partitioner']} explains the keys; a producer that sets partitions "
                f"explicitly for some records")
    return "unknown: explicit partitions or a custom partitioner (no known partitioner, nor a pair, explains the keys)"


def _fix(cause: str) -> str:
    if cause.startswith("the partition count changed"):
        return ("Keys written before the partitions were added stay where they were: consumers that need per-key "
                "order must finish the old partitions first, or re-key the topic into a new one with the final count.")
    if cause.startswith("two partitioners"):
        return ("Make every producer of the topic use one partitioner (librdkafka partitioner=murmur2_random "
                "matches Java's default); keys already split stay split.")
    return "Find the producer that chooses partitions itself (or a custom partitioner) and make it follow the key."
