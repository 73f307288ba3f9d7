"""KLA001 skew.partition_size: partitions of a topic far larger than their siblings.

What it checks:
    Per topic, from the per-partition-dir statistics of the Spark job: each partition's bytes
    (the largest live replica's ``.log`` bytes) and messages against the topic's median
    partition, the coefficient of variation of partition sizes, and each partition's share of
    the topic's bytes. Topics too small or with too few partitions are not judged.

Why it matters:
    A skewed partition fills one broker's disk first, lags behind in consumers, and is the one
    whose oldest segment is oldest: with mtime-based (legacy) lookups the *small* partitions of
    a skewed topic are the ones whose every segment is newer than a replay target, so their
    answer is empty and old clients crash (docs/principles.md, "Why this tool exists", 1). Skew usually
    comes from a hot key, records without a key, or producers with another partitioner.

    With the key statistics read (``audit --keys``, or manifests collected with ``--keys``) the
    finding names the cause of each flagged partition's excess over the median: the keys that
    hold it (fingerprints, their share of the partition's records and bytes), or null keys, or a
    partitioner mismatch (two partitioners, a changed partition count: KLA071, KLA070), or no
    single cause among the keys; the fix text follows the cause of the worst partition.

Example finding:
    FAIL clicks: partition 7 holds 61% of the topic's 120.4 GiB: 23.5x the median partition
    (3.1 GiB), messages 21.9x the median; coefficient of variation 2.31 over 12 partitions;
    cause: hot keys: key#5f0c1a2e (len 12) holds 58% of its records, 60% of its bytes.

How to fix:
    Find the hot keys (a consumer sampling keys of the partition, or producer metrics) and
    spread them: a better key, a salted key for the hot ones, or a partitioner that does not
    pin them. Adding partitions does not move existing data. Until fixed, give the brokers
    hosting the hot partition more disk, and size retention by the hot partition.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

import statistics

from checks.framework.base import Check, CheckInput, Option, Severity, non_negative, opt_int, positive
from auditor.units import human_bytes


class SkewPartitionSize(Check):
    code = "KLA001"
    name = "skew.partition_size"
    title = "Partition size skew"
    scope = "cluster"
    identity = ("topic",)
    options = {
        "warn_ratio": Option(3.0, "WARN when a partition's bytes or messages reach this multiple of the median", float, positive, "> 0"),
        "fail_ratio": Option(10.0, "FAIL at this multiple", float, positive, "> 0"),
        "min_partitions": Option(2, "topics with fewer partitions are not judged", int, positive, ">= 1"),
        "min_topic_bytes": Option(1 << 20, "topics smaller than this are not judged", int, non_negative, ">= 0"),
        "include_internal": Option(False, "also judge topics whose name starts with \"__\"", bool),
        "cause_share": Option(0.5, "a cause (hot keys, null keys) is named when it holds this share of the "
                              "partition's excess records or bytes over the median", float,
                              lambda v: 0 < v <= 1, "> 0 and <= 1"),
    }

    def run(self, data: CheckInput, ctx, opts):
        stats = data.replica_stats
        if stats is None or not len(stats):
            return []
        live = stats[stats["dir_kind"] == "live"]
        out = []
        for topic, per_partition in largest_replicas_by_topic(live).items():
            topts = ctx.options(self, topic)
            if not topts.get("enabled", True) or (topic.startswith("__") and not topts["include_internal"]):
                continue
            finding = self._judge_topic(topic, per_partition, topts)
            if finding is not None:
                out.append(with_key_cause(finding, ctx.keys, topts["cause_share"]))
        return out

    def _judge_topic(self, topic: str, per_partition: dict, topts):
        """The topic's finding (its most skewed partition, every flagged one in the evidence), or None."""
        if len(per_partition) < topts["min_partitions"]:
            return None
        sizes = [v[0] for v in per_partition.values()]
        total = sum(sizes)
        if total < topts["min_topic_bytes"]:
            return None
        median = statistics.median(sizes)
        mean = total / len(sizes)
        cv = statistics.pstdev(sizes) / mean if mean else 0.0
        counts = [v[1] for v in per_partition.values()]
        median_msgs = statistics.median(counts) if all(c is not None for c in counts) else None
        flagged = []
        for p, (size, msgs, broker) in sorted(per_partition.items()):
            ratio = _ratio(size, median)
            msg_ratio = _ratio(msgs, median_msgs)
            worst = max(_severity_ratio(size, ratio), _severity_ratio(msgs, msg_ratio))
            if worst >= topts["warn_ratio"]:
                flagged.append((worst, p, size, msgs, ratio, msg_ratio, broker))
        if not flagged:
            return None
        flagged.sort(reverse=True)
        worst, p, size, msgs, ratio, msg_ratio, broker = flagged[0]
        severity = Severity.FAIL if worst >= topts["fail_ratio"] else Severity.WARN
        share = size / total if total else 0.0
        others = f" (and {len(flagged) - 1} more partition(s) above {topts['warn_ratio']:g}x)" if len(flagged) > 1 else ""
        msg_part = f", messages {msg_ratio:.1f}x the median" if msg_ratio is not None else ""
        size_part = (f"{ratio:.1f}x the median partition ({human_bytes(median)})" if ratio is not None
                     else "while the median partition is empty")
        message = (f"partition {p} holds {share:.0%} of the topic's {human_bytes(total)}: {size_part}{msg_part}; "
                   f"coefficient of variation {cv:.2f} over {len(sizes)} partitions{others}")
        evidence = [{"partition": fp, "size_bytes": fs, "messages": fm,
                     "ratio_to_median_bytes": None if fr is None else round(fr, 3),
                     "ratio_to_median_messages": None if fmr is None else round(fmr, 3),
                     "share_of_topic_bytes": round(fs / total, 4) if total else None, "largest_replica_broker": fb,
                     # topic-wide figures repeated so one evidence item reads on its own in JSON
                     "median_partition_bytes": median, "topic_bytes": total,
                     "topic_coefficient_of_variation": round(cv, 4)}
                    for _, fp, fs, fm, fr, fmr, fb in flagged]
        return self.finding(
            severity, message,
            "Spread the hot keys (better or salted keys, another partitioner); adding partitions does not move "
            "existing data. Meanwhile size disks and retention by the largest partition.",
            thresholds={"warn_ratio": topts["warn_ratio"], "fail_ratio": topts["fail_ratio"],
                        "median_partition_bytes": median, "coefficient_of_variation": round(cv, 4),
                        "topic_bytes": total, "partitions": len(sizes)},
            evidence=evidence, topic=topic, partition=p, broker_id=broker,
        )


def largest_replicas_by_topic(live) -> dict[str, dict[int, tuple[int, int | None, int | None]]]:
    """topic (sorted) -> :func:`_largest_replicas` of its rows, made in column operations over
    every topic at once: the rows sorted by (topic, partition, size descending, a known broker
    before an unknown one, broker ascending, row order) and the first row of each partition kept;
    Python touches one value per partition, not per replica row. :func:`_largest_replicas` (a walk
    over one topic's rows) is the reference it is tested against (tests/test_skew_columnar.py)."""
    import numpy as np
    import pandas as pd

    live = live[live["topic"].notna()]  # as groupby("topic") drops a null topic
    if not len(live):
        return {}
    topic_codes, topics = pd.factorize(live["topic"], sort=True)
    partition = live["partition"].to_numpy().astype("int64")
    size = pd.to_numeric(live["size_bytes"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    size = np.nan_to_num(size, nan=0.0)
    broker = pd.to_numeric(live["broker_id"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    unknown = np.isnan(broker)
    order = np.lexsort((np.arange(len(live)), np.where(unknown, 0.0, broker), unknown, -size, partition, topic_codes))
    t, p = topic_codes[order], partition[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (t[1:] != t[:-1]) | (p[1:] != p[:-1])
    keep = order[first]
    sizes = [opt_int(v) or 0 for v in live["size_bytes"].to_numpy()[keep].tolist()]
    messages = [opt_int(v) for v in live["message_count"].to_numpy()[keep].tolist()]
    brokers = [opt_int(v) for v in live["broker_id"].to_numpy()[keep].tolist()]
    out: dict[str, dict] = {}
    for code, part, size_v, msgs, b in zip(topic_codes[keep].tolist(), partition[keep].tolist(), sizes, messages, brokers):
        out.setdefault(topics[code], {})[part] = (size_v, msgs, b)
    return out


def _largest_replicas(rows) -> dict[int, tuple[int, int | None, int | None]]:
    """partition -> (size_bytes, message_count, broker_id) of its largest live replica; among
    replicas of the same size the lowest broker id (replicas often are equal: the answer must not
    depend on the order of the rows, which differs between the engines). The reference walk of
    :func:`largest_replicas_by_topic`."""
    per_partition: dict[int, tuple[int, int | None, int | None]] = {}
    for row in rows.itertuples(index=False):
        p = int(row.partition)
        size, broker = opt_int(row.size_bytes) or 0, opt_int(row.broker_id)
        best = per_partition.get(p)
        if best is None or size > best[0] or (size == best[0] and _lower_broker(broker, best[2])):
            per_partition[p] = (size, opt_int(row.message_count), broker)
    return per_partition


def _lower_broker(broker: int | None, than: int | None) -> bool:
    """Whether ``broker`` comes before ``than`` (a known id before an unknown one)."""
    return broker is not None and (than is None or broker < than)


def _ratio(value: int | None, median: float | None) -> float | None:
    """value / median; None when either is unknown or the median is 0 (no ratio exists)."""
    if value is None or median is None or median <= 0:
        return None
    return value / median


def _severity_ratio(value: int | None, ratio: float | None) -> float:
    """The ratio that decides the severity: a non-empty partition beside an empty median
    partition is as skewed as it gets (infinite), an unknown one is not judged (0)."""
    if ratio is not None:
        return ratio
    return float("inf") if value else 0.0


#: A key holding less than this share of its partition's records is an ordinary key, not a hot one.
HOT_KEY_SHARE = 0.01
#: Hot keys named per partition at most.
HOT_KEYS_SHOWN = 5


def with_key_cause(finding, audit, cause_share: float):
    """The finding with the cause of each flagged partition's excess (``cause`` in its evidence
    item), the worst partition's cause in the message and the fix text following it; unchanged
    without key statistics for the topic."""
    if audit is None or not audit.ran or finding.topic not in audit.verdicts:
        return finding
    stats_by_partition = audit.topic_stats(finding.topic)
    verdict = audit.verdicts[finding.topic]
    for item in finding.evidence:
        item["cause"] = key_cause(stats_by_partition, item["partition"], verdict, audit, cause_share)
    worst = next((i["cause"] for i in finding.evidence if i["partition"] == finding.partition), None)
    if worst is not None:
        finding.message += f"; cause: {worst['text']}"
        finding.fix = worst["fix"]
    return finding


def key_cause(stats_by_partition: dict, partition: int, verdict: dict, audit, cause_share: float) -> dict | None:
    """What holds one partition's excess records and bytes over the topic's median partition:
    hot keys, null keys, a partitioner mismatch, or no single cause; None when its keys were not read."""
    from auditor.keys.audit_keys import key_label

    stats = stats_by_partition.get(partition)
    if stats is None or not stats.records:
        return None
    excess_records = max(0.0, stats.records - statistics.median(s.records for s in stats_by_partition.values()))
    excess_bytes = max(0.0, stats.record_bytes - statistics.median(s.record_bytes for s in stats_by_partition.values()))
    hot, held_records, held_bytes = [], 0, 0
    for ident, count, nbytes in stats.heavy.top(HOT_KEYS_SHOWN):
        if (held_records >= excess_records and held_bytes >= excess_bytes) or count < HOT_KEY_SHARE * stats.records:
            break  # the excess is held, or the rest are ordinary keys
        hot.append({"key": audit.shown(stats.info.get(ident)), "records_min": count,
                    "share_of_records": round(count / stats.records, 6),
                    "bytes_min": nbytes, "share_of_bytes": round(nbytes / stats.record_bytes, 6) if stats.record_bytes else None})
        held_records, held_bytes = held_records + count, held_bytes + nbytes
    out = {"records": stats.records, "record_bytes": stats.record_bytes, "excess_records": excess_records,
           "excess_bytes": excess_bytes, "null_key_records": stats.null_keys, "key_mode": audit.read(verdict["topic"], partition).mode}
    pair = verdict.get("two_explanations")
    if hot and (held_records >= cause_share * excess_records > 0 or held_bytes >= cause_share * excess_bytes > 0):
        shown = ", ".join(f"{key_label(k['key'])} holds {k['share_of_records']:.0%} of its records"
                          + (f", {k['share_of_bytes']:.0%} of its bytes" if k["share_of_bytes"] is not None else "")
                          for k in hot)
        return {**out, "cause": "hot keys", "keys": hot, "text": f"hot keys: {shown}",
                "fix": ("Spread the hot keys named here (a composite or salted key), or give them a topic of their own; "
                        "adding partitions does not move them. Meanwhile size disks and retention by this partition.")}
    if stats.null_keys >= cause_share * excess_records > 0:
        return {**out, "cause": "null keys",
                "text": f"records without a key: {stats.null_keys:,} ({stats.null_keys / stats.records:.0%} of its records)",
                "fix": ("Records without a key went here (a sticky or fixed partition for null keys): give them keys, "
                        "or use a partitioner that spreads null keys (Java's default since 3.3, librdkafka *_random).")}
    if pair:
        return {**out, "cause": "partitioner mismatch", "mismatch": pair["cause"],
                "text": f"partitioner mismatch: {pair['cause']}",
                "fix": ("Make every producer of the topic use one partitioner (librdkafka partitioner=murmur2_random "
                        "matches Java's default); records already written stay where they are.")}
    return {**out, "cause": "no single cause among the keys",
            "text": "no single cause among the keys (many ordinary keys, or explicit partitions)",
            "fix": ("No hot key, null keys or partitioner mismatch holds the excess: check how the producers choose "
                    "partitions (explicit partitions, a custom partitioner). Meanwhile size disks by this partition.")}
