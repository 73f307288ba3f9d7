"""KLA071 keys.two_partitioners: a topic whose keyed records follow two partitioners.

What it checks:
    With the key statistics read (``audit --keys``, or manifests collected with ``--keys``),
    per topic at its partition count (the metadata log's, else the highest partition dir + 1):
    when no single known partitioner (murmur2: Kafka's Java client; crc32: librdkafka's and
    confluent-kafka's default; fnv1a: Go clients) explains the keyed records, whether two of them
    together do (``auditor.keys.attribution.two_explanations``): two producers placing the same
    topic's keys by different hash functions. A pair made of one partitioner at the current and
    at an older partition count is a changed partition count, not two partitioners: KLA070 names
    that. Null and empty keys are left out. Without key statistics nothing is judged.

Why it matters:
    Two producers that hash the same key differently write it to two partitions: per-key order
    is broken for every key they share (KLA070 lists them), compacted topics keep two "latest"
    values, and joins or co-partitioned stream processing (Kafka Streams, Flink) read the wrong
    partition for half the keys.

Example finding:
    WARN payments: the keyed records follow two partitioners: crc32 (librdkafka consistent /
    consistent_random) explains 61.20% and murmur2 (Kafka Java client default) 38.70% of the
    rest; together 99.90% at 6 partitions (metadata log).

How to fix:
    Find the producers of the topic (client ids in the broker's request logs) and give them one
    partitioner: in librdkafka/confluent-kafka ``partitioner=murmur2_random`` matches the Java
    client; in Java a custom ``partitioner.class`` can match librdkafka's CRC32. Keys written
    already stay where they are.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, severity_option


class TwoPartitioners(Check):
    code = "KLA071"
    name = "keys.two_partitioners"
    title = "Two partitioners in one topic"
    scope = "cluster"
    identity = ("topic",)
    options = {
        "severity": severity_option("WARN"),
        "include_internal": Option(False, "also judge topics whose name starts with \"__\"", bool),
    }

    def run(self, data: CheckInput, ctx, opts):
        from auditor.keys.audit_keys import judged_topics

        out = []
        for topic, verdict, topts in judged_topics(self, ctx):
            pair = two_partitioners(verdict)
            if pair is not None:
                out.append(self._finding(topic, verdict, pair, ctx.keys, topts))
        return out

    def _finding(self, topic: str, verdict: dict, pair: dict, audit, topts):
        from auditor.keys.partitioners import FAMILY_BY_NAME

        first, second = pair["first"], pair["second"]
        clients = {name: FAMILY_BY_NAME[name].clients for name in (first["family"], second["family"])}
        message = (f"the keyed records follow two partitioners: {first['family']} ({clients[first['family']]}) "
                   f"explains {first['share']:.2%} and {second['family']} ({clients[second['family']]}) "
                   f"{second['share_not_explained_by_first']:.2%} of the rest; together {pair['share']:.2%} at "
                   f"{first['partition_count']} partitions ({verdict.get('partition_count_source')})")
        shares = {f["family"]: f["share"] for f in verdict.get("families", [])}
        return self.finding(
            topts["severity"], message,
            "Give every producer of the topic one partitioner (librdkafka partitioner=murmur2_random matches the "
            "Java client's default); keys already written stay where they are (KLA070 lists the split ones).",
            thresholds={"name_at_share": verdict.get("name_at_share"), "partition_count": verdict.get("partition_count"),
                        "partition_count_source": verdict.get("partition_count_source"),
                        "checked_records": verdict.get("checked_records"), "key_source": audit.source},
            evidence=[{"family": name, "clients": clients[name], "share_alone": shares.get(name),
                       "share_not_explained_by_the_other": (first["share"] if name == first["family"]
                                                            else second["share_not_explained_by_first"]),
                       "together": pair["share"], "partition_count": first["partition_count"]}
                      for name in (first["family"], second["family"])],
            topic=topic)


def two_partitioners(verdict: dict) -> dict | None:
    """The verdict's pair when it is two families at the current count (not a changed count)."""
    pair = verdict.get("two_explanations")
    if not pair or verdict.get("partitioner"):
        return None
    first, second = pair["first"], pair["second"]
    if first["family"] == second["family"] or first["partition_count"] != second["partition_count"]:
        return None
    return pair
