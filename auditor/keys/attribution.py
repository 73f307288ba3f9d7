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
                    count_source: str | None = None) -> dict:
    """The partitioner verdict of one topic, as JSON: per family its share, the family named (or
    none), the partition count used and where it came from, and an inference when it was not known."""
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
        return out
    families = []
    for family in FAMILIES:
        hits, total, key_hits, key_total = _share(family, keys_by_partition, partition_count)
        families.append({"family": family.name, "clients": family.clients, "records_explained": hits,
                         "share": round(hits / total, 6), "keys_explained": key_hits, "keys_checked": key_total})
    out["families"] = families
    named = [f["family"] for f in families if f["share"] >= NAME_AT]
    if partition_count == 1:
        out.update(partitioner=None, verdict="one partition: every partitioner explains it (nothing to tell)")
    elif len(named) == 1:
        best = next(f for f in families if f["family"] == named[0])
        out.update(partitioner=named[0],
                   verdict=f"{named[0]} ({best['clients']}) explains {best['share']:.2%} of the checked keyed records")
    elif named:
        out.update(partitioner=None, candidates=named,
                   verdict=f"ambiguous: {', '.join(named)} each explain >= {NAME_AT:.0%} (too few distinct keys to tell)")
    else:
        best = max(families, key=lambda f: f["share"])
        out.update(partitioner=None,
                   verdict=(f"no known partitioner explains the keys (best: {best['family']}, {best['share']:.2%}): "
                            f"explicit partitions, a custom partitioner, mixed producers or a changed partition count"))
    if count_source is not None and count_source.startswith("partition dirs seen"):
        top = min(INFER_MAX_COUNT, max(partition_count, INFER_UP_TO_FACTOR * (seen_max + 1)))
        candidates = range(max(seen_max + 1, 2), top + 1)
        out["inferred_counts"] = {
            "note": (f"inference: the partition count was not read from the metadata log; partition counts in "
                     f"{candidates.start}..{candidates.stop - 1} at which each family explains >= {NAME_AT:.0%}"),
            **{f.name: consistent_counts(f, keys_by_partition, candidates) for f in FAMILIES},
        }
    return out
