"""KLA080 metadata.stray_dir: partition directories the cluster's metadata does not assign there.

What it checks:
    With the KRaft metadata log read (the audited log dirs hold ``__cluster_metadata-0``), every
    live partition directory found on disk against the assignment the metadata records: a
    directory whose topic-partition is not assigned to its broker at all (the topic was deleted,
    the partition reassigned away, or the directory copied there by hand), or whose
    ``partition.metadata`` topic ID is not the topic's current ID (a deleted and re-created
    topic's leftovers). Without a metadata log nothing is judged.

Why it matters:
    Kafka ignores or deletes such directories (a stray dir is renamed ``-stray`` and removed at
    the next start), so their bytes are not the topic's data: they inflate disk use, skew the
    per-broker and per-log-dir sizes, and anyone reading them (a replay from files, a restore)
    gets a dead topic's records under a live topic's name.

Example finding:
    WARN orders-0 on broker 2 (/data/k1): not assigned to broker 2 by the metadata log (replicas
    [3, 1]); its partition.metadata topic ID Xh3... is not the current ID of orders (R2b...): a
    deleted and re-created topic's leftover. 14.2 MiB.

How to fix:
    Confirm with ``kafka-topics --describe`` that the broker does not host the partition, then
    move the directory out of the log dir (Kafka itself removes stray dirs on restart in 3.7+);
    never copy partition directories between brokers by hand.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, metadata_partition_rows, opt_int, severity_option
from auditor.units import human_bytes


class StrayDir(Check):
    code = "KLA080"
    name = "metadata.stray_dir"
    title = "Partition directories the metadata log does not assign there"
    scope = "cluster"
    options = {
        "severity": severity_option("WARN"),
    }

    def run(self, data: CheckInput, ctx, opts):
        out = []
        for moves, row, topic, partition, broker in metadata_partition_rows(data, ctx):
            if topic is None or partition is None or topic == "__cluster_metadata":
                continue
            reasons = self._reasons(moves, topic, partition, broker, row.get("topic_id"))
            if not reasons:
                continue
            size = opt_int(row.get("size_bytes"))
            out.append(self.finding(
                opts["severity"],
                f"on broker {broker} ({row['log_dir']}): " + "; ".join(reasons)
                + (f". {human_bytes(size)}" if size is not None else ""),
                "Check with kafka-topics --describe that the broker does not host it, then move the directory out "
                "of the log dir (Kafka removes stray dirs on restart); never copy partition dirs by hand.",
                evidence=[{"topic": topic, "partition": partition, "broker_id": broker, "log_dir": row["log_dir"],
                           "dir_topic_id": row.get("topic_id"), "current_topic_id": moves.topic_ids.get(topic),
                           "assigned_replicas": sorted(moves.assignments.get((topic, partition), {})),
                           "size_bytes": size, "metadata_log": moves.metadata_dir}],
                topic=topic, partition=partition, broker_id=broker, log_dir=row["log_dir"]))
        return out

    @staticmethod
    def _reasons(moves, topic, partition, broker, dir_topic_id) -> list[str]:
        reasons = []
        current = moves.topic_ids.get(topic)
        if current is None:
            reasons.append(f"topic {topic} does not exist in the metadata log (deleted)")
            return reasons
        assigned = moves.assignments.get((topic, partition))
        if assigned is None:
            reasons.append(f"{topic} has no partition {partition} in the metadata log")
        elif broker not in assigned:
            reasons.append(f"not assigned to broker {broker} by the metadata log (replicas {list(assigned)})")
        if dir_topic_id and dir_topic_id != current:
            reasons.append(f"its partition.metadata topic ID {dir_topic_id} is not the current ID of {topic} "
                           f"({current}): a deleted and re-created topic's leftover")
        return reasons
