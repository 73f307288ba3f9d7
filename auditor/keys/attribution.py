"""Which partitioner placed a topic's keyed records (pure, on the partitions' key summaries).

For every hash family of :mod:`auditor.keys.partitioners` and the topic's partition count, the
share of the *checked* keyed records whose key that family sends to the partition they are in.
The checked records are those of the keys each partition's summary holds with their counts:
its uniform sample of distinct keys (exact counts) and its heavy hitters (the lower-bound counts;
a key in both counts once, with the sample's exact count). Null keys say nothing (most clients
place them at random) and neither do empty keys (random under librdkafka's default): both are
left out and counted.

* A family that explains >= :data:`NAME_AT` of the checked records is named; several may (one
  partition, or a handful of keys): all are listed and the verdict says it is ambiguous.
* None does: the verdict says so (explicit partitions or a custom partitioner); none is claimed.
* The partition count comes from the metadata log when it was read, else from the partition
  dirs seen (highest partition number + 1: a lower bound when a broker's dirs are missing). In the
  second case the counts each family is consistent with are also searched and reported as an
  inference (:func:`consistent_counts`).
"""

from __future__ import annotations

from auditor.keys.partitioners import FAMILIES, HashFamily
from auditor.keys.sketches import KeyStats
from auditor.units import iso_utc

#: The share of checked keyed records a family must explain to be named.
NAME_AT = 0.99
#: Inference searches partition counts up to this many times the highest partition seen + 1.
INFER_UP_TO_FACTOR = 4
INFER_MAX_COUNT = 1024


def checked_keys(stats: KeyStats) -> list[tuple[object, int, int]]:
    """``(KeyInfo, records, key id)`` of the non-empty keys the summary holds with a count."""
    counts: dict[int, int] = {ident: count for ident, count, _ in stats.heavy.top() if count > 0}
    counts.update({ident: entry[0] for ident, entry in stats.sample.entries.items()})
    out = []
    for ident, count in counts.items():
        info = stats.info.get(ident)
        if info is not None and info.length > 0:
            out.append((info, count, ident))
    return out


def _share(family: HashFamily, keys_by_partition: dict[int, list], partitions: int) -> tuple[int, int, int, int]:
    """(records explained, records checked, keys explained, keys checked) of one family at one count."""
    hits = total = key_hits = key_total = 0
    for partition, keys in keys_by_partition.items():
        for info, count, _ in keys:
            total += count
            key_total += 1
            if family.to_partition(getattr(info.hashes, family.hash_name), partitions) == partition:
                hits += count
                key_hits += 1
    return hits, total, key_hits, key_total


def consistent_counts(family: HashFamily, keys_by_partition: dict[int, list], candidates: range,
                      at: float = NAME_AT) -> list[int]:
    """The partition counts among ``candidates`` at which ``family`` explains >= ``at`` of the
    checked records (an inference: a count may fit by chance when few keys are checked)."""
    out = []
    for n in candidates:
        hits, total, _, _ = _share(family, keys_by_partition, n)
        if total and hits / total >= at:
            out.append(n)
    return out


def attribute_topic(topic: str, stats_by_partition: dict[int, KeyStats], partition_count: int | None = None,
                    count_source: str | None = None, partitions_added: list[dict] | None = None) -> dict:
    """The partitioner verdict of one topic, as JSON: per family its share, the family named (or
    none), the partition count used and where it came from, and an inference when it was not known.
    ``partitions_added``: the metadata log's record of partitions added after the topic was created
    (``partition``, ``offset``, ``timestamp_ms``), named when a changed count explains the keys."""
    keys_by_partition = {p: checked_keys(s) for p, s in stats_by_partition.items()}
    seen_max = max(stats_by_partition) if stats_by_partition else -1
    null_records = sum(s.null_keys for s in stats_by_partition.values())
    empty_records = sum(s.empty_keys for s in stats_by_partition.values())
    out: dict = {"topic": topic, "null_key_records": null_records, "empty_key_records": empty_records,
                 "checked_keys": sum(len(k) for k in keys_by_partition.values()),
                 "checked_records": sum(c for keys in keys_by_partition.values() for _, c, _ in keys),
                 "name_at_share": NAME_AT}
    if partition_count is None:
        partition_count, count_source = seen_max + 1, "partition dirs seen (highest partition + 1)"
    out["partition_count"] = partition_count
    out["partition_count_source"] = count_source
    if partition_count < 1 or out["checked_records"] == 0:
        out.update(families=[], partitioner=None, verdict="no keyed records to attribute")
        out["skewed_partitions"] = skew_causes(stats_by_partition, out)
        return out
    families = []
    for family in FAMILIES:
        hits, total, key_hits, key_total = _share(family, keys_by_partition, partition_count)
        families.append({"family": family.name, "clients": family.clients, "records_explained": hits,
                         "share": round(hits / total, 6), "keys_explained": key_hits, "keys_checked": key_total})
    out["families"] = families
    out.update(_named(families, partition_count))
    if out["partitioner"] is None and partition_count > 1 and "candidates" not in out:
        out["two_explanations"] = two_explanations(keys_by_partition, partition_count)
    out["split_keys"] = split_keys(stats_by_partition, keys_by_partition, partition_count)
    out["skewed_partitions"] = skew_causes(stats_by_partition, out)
    if partitions_added:
        out["partitions_added"] = [{**a, "timestamp_utc": iso_utc(a["timestamp_ms"])} for a in partitions_added]
        pair = out.get("two_explanations")
        if pair and pair["cause"].startswith("the partition count changed"):
            added = sorted(partitions_added, key=lambda a: a["offset"])
            pair["cause"] += (f"; the metadata log records partitions {', '.join(str(a['partition']) for a in added)} "
                              f"added at {iso_utc(added[0]['timestamp_ms'])} (offset {added[0]['offset']})")
    if count_source is not None and count_source.startswith("partition dirs seen"):
        top = min(INFER_MAX_COUNT, max(partition_count, INFER_UP_TO_FACTOR * (seen_max + 1)))
        candidates = range(max(seen_max + 1, 2), top + 1)
        out["inferred_counts"] = {
            "note": (f"inference: the partition count was not read from the metadata log; partition counts in "
                     f"{candidates.start}..{candidates.stop - 1} at which each family explains >= {NAME_AT:.0%}"),
            **{f.name: consistent_counts(f, keys_by_partition, candidates) for f in FAMILIES},
        }
    return out


def _named(families: list[dict], partition_count: int) -> dict:
    """``partitioner`` and ``verdict`` (and ``candidates`` when several fit) from the families' shares."""
    named = [f["family"] for f in families if f["share"] >= NAME_AT]
    if partition_count == 1:
        return {"partitioner": None, "verdict": "one partition: every partitioner explains it (nothing to tell)"}
    if len(named) == 1:
        best = next(f for f in families if f["family"] == named[0])
        return {"partitioner": named[0],
                "verdict": f"{named[0]} ({best['clients']}) explains {best['share']:.2%} of the checked keyed records"}
    if named:
        return {"partitioner": None, "candidates": named,
                "verdict": f"ambiguous: {', '.join(named)} each explain >= {NAME_AT:.0%} (too few distinct keys to tell)"}
    best = max(families, key=lambda f: f["share"])
    return {"partitioner": None,
            "verdict": (f"no known partitioner explains the keys (best: {best['family']}, {best['share']:.2%}): "
                        f"explicit partitions, a custom partitioner, mixed producers or a changed partition count")}


def _placements(keys_by_partition: dict[int, list], family: HashFamily, partitions: int) -> set[tuple[int, int]]:
    """The (key id, partition) pairs the family at ``partitions`` explains."""
    return {(ident, p) for p, keys in keys_by_partition.items() for info, _, ident in keys
            if family.to_partition(getattr(info.hashes, family.hash_name), partitions) == p}


def two_explanations(keys_by_partition: dict[int, list], partition_count: int) -> dict | None:
    """When no single partitioner explains a topic: the best pair of (family, partition count),
    one of them at the current count, that together explain >= NAME_AT of the checked records:
    two producers with different partitioners (two families at the current count), or a partition
    count raised after keys were written (one family at the current and at an older count). None
    when no pair does (explicit partitions or a custom partitioner)."""
    weights = {(ident, p): count for p, keys in keys_by_partition.items() for _, count, ident in keys}
    total = sum(weights.values())
    if not total:
        return None
    placed: dict[tuple[str, int], set] = {}

    def explained(family: HashFamily, count: int) -> set:
        if (family.name, count) not in placed:
            placed[family.name, count] = _placements(keys_by_partition, family, count)
        return placed[family.name, count]

    def weight(pairs) -> float:
        return sum(weights[pair] for pair in pairs) / total

    best = None
    for first in FAMILIES:
        mine = explained(first, partition_count)
        for second in FAMILIES:
            for count in range(1, partition_count + 1):
                if second is first and count == partition_count:
                    continue
                other = explained(second, count)
                share, alone = weight(mine | other), weight(other - mine)
                if share >= NAME_AT and alone > 1 - NAME_AT and (best is None or share > best[0]):
                    best = (share, first, second, count, weight(mine), alone)
    if best is None:
        return None
    share, first, second, count, first_share, second_share = best
    if count == partition_count:
        cause = f"two partitioners: {first.name} ({first.clients}) and {second.name} ({second.clients})"
    else:
        cause = (f"the partition count changed: {second.name} at {count} partitions explains "
                 f"{second_share:.2%} of the records the current count does not (keys written before the "
                 f"partitions were added)" if first.name == second.name else
                 f"{first.name} at {partition_count} partitions and {second.name} at {count}")
    return {"share": round(share, 6), "first": {"family": first.name, "partition_count": partition_count,
                                               "share": round(first_share, 6)},
            "second": {"family": second.name, "partition_count": count, "share_not_explained_by_first":
                       round(second_share, 6)}, "cause": cause}


#: Split keys shown per topic (the count is kept in full).
SPLIT_EXAMPLES = 10


def split_keys(stats_by_partition: dict[int, KeyStats], keys_by_partition: dict[int, list],
               partition_count: int) -> dict:
    """Keys found in more than one partition of the topic (per-key order broken for them).

    Every partition's sample keeps the keys with the smallest ids (one hash for all partitions),
    so below the smallest of the partitions' sample thresholds a key is checked in every
    partition it is in: the share of split keys among those is an estimate for all the topic's
    keys. Heavy hitters listed in two partitions are found too (exactly, as far as they are listed)."""
    where: dict[int, dict[int, int]] = {}
    infos = {}
    for p, keys in keys_by_partition.items():
        for info, count, ident in keys:
            where.setdefault(ident, {})[p] = count
            infos[ident] = info
    thresholds = [s.sample.threshold for s in stats_by_partition.values() if s.sample.threshold is not None]
    tau = min(thresholds) if thresholds else None
    uniform = [ident for ident in where if tau is None or ident <= tau]
    split = sorted((ident for ident, parts in where.items() if len(parts) > 1),
                   key=lambda ident: -sum(where[ident].values()))
    split_uniform = sum(1 for ident in uniform if len(where[ident]) > 1)
    examples = []
    for ident in split[:SPLIT_EXAMPLES]:
        info = infos[ident]
        placed = {f.name: f.to_partition(getattr(info.hashes, f.hash_name), partition_count) for f in FAMILIES}
        examples.append({"key": info.fingerprint(), "records_by_partition": {str(p): c for p, c in sorted(where[ident].items())},
                         "partition_by_family": placed})
    return {"keys_checked": len(where), "split_keys_found": len(split),
            "uniform_keys_checked": len(uniform),
            "split_share_estimate": round(split_uniform / len(uniform), 6) if uniform else None,
            "examples": examples}


#: A partition is explained as skewed when it holds at least this many times the median records of
#: its topic's partitions (informational: the skew check, KLA001, keeps its own thresholds).
SKEW_FACTOR = 1.5
#: The share of a partition's excess records a cause must hold to be named.
CAUSE_SHARE = 0.5
#: A key holding less than this share of its partition's records is an ordinary key, not a hot one.
HOT_KEY_SHARE = 0.01


def skew_causes(stats_by_partition: dict[int, KeyStats], verdict: dict, top: int = 5) -> list[dict]:
    """For each partition holding >= SKEW_FACTOR x the median records of the topic's partitions:
    the keys that hold its excess (fingerprint, records, share of the partition), or its null keys,
    or the topic's partitioner mismatch / changed count, or that no cause was found among its keys."""
    counts = sorted(s.records for s in stats_by_partition.values())
    if len(counts) < 2:
        return []
    median = counts[len(counts) // 2] if len(counts) % 2 else (counts[len(counts) // 2 - 1] + counts[len(counts) // 2]) / 2
    out = []
    for partition, stats in sorted(stats_by_partition.items()):
        if median <= 0 or stats.records < SKEW_FACTOR * median:
            continue
        excess = stats.records - median
        hot, held = [], 0
        for ident, count, nbytes in stats.heavy.top(top):
            if held >= excess or count < HOT_KEY_SHARE * stats.records:
                break  # the excess is held, or the rest are ordinary keys
            info = stats.info.get(ident)
            hot.append({"key": info.fingerprint() if info else None, "records_min": count,
                        "share": round(count / stats.records, 6), "bytes_min": nbytes})
            held += count
        item = {"partition": partition, "records": stats.records, "median_records": median,
                "ratio": round(stats.records / median, 3), "excess_records": excess}
        pair = verdict.get("two_explanations")
        if held >= CAUSE_SHARE * excess:
            item.update(cause="hot keys", keys=hot,
                        fix="spread the hot keys (a composite or salted key), or give them a topic of their own")
        elif stats.null_keys >= CAUSE_SHARE * excess:
            item.update(cause="null keys", null_key_records=stats.null_keys,
                        fix="records without a key went here (sticky/random placement): give them keys, "
                            "or check the producer's partitioner for null keys")
        elif pair:
            item.update(cause=pair["cause"],
                        fix="make every producer use one partitioner (or the same explicit placement)")
        else:
            item.update(cause="no single cause among the keys (many ordinary keys, or explicit partitions)",
                        fix="check how the producers choose partitions")
        out.append(item)
    return out
