"""KLA081 metadata.absent_replica: replicas the metadata log assigns to a broker that has no copy.

What it checks:
    With the KRaft metadata log read, every replica it assigns (topic-partition on broker b)
    whose broker's log dirs were all audited (every log-dir ID the broker registered is among
    the audited dirs' ``meta.properties``) and none of them holds a live directory of that
    partition. Brokers audited only in part, or not at all, are not judged.

Why it matters:
    The cluster counts that replica (replication factor, ISR membership, leadership) but the
    broker has no data for it: the directory was deleted or lost with a disk, or the broker's
    log dirs were re-created. Until it re-replicates the partition has fewer copies than
    everyone believes, and a replay or restore from that broker's files misses it entirely.

Example finding:
    FAIL orders-3: assigned to broker 2 by the metadata log (replicas [2, 3], directory
    /data/k1) but none of broker 2's log dirs (/data/k0, /data/k1) holds orders-3.

How to fix:
    Look at the broker's log for the partition (a log dir failure, a manual deletion); let the
    broker re-replicate it (restart it, or reassign the partition away and back); check the disk.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, opt_int, severity_option


class AbsentReplica(Check):
    code = "KLA081"
    name = "metadata.absent_replica"
    title = "Assigned replicas absent from every log dir of their broker"
    scope = "cluster"
    identity = ("topic", "partition", "broker_id")
    options = {
        "severity": severity_option("FAIL"),
    }

    def run(self, data: CheckInput, ctx, opts):
        moves = ctx.partition_moves
        if moves is None:
            return []
        parts = data.partitions
        present = set()
        if parts is not None and len(parts):
            live = parts[parts["dir_kind"] == "live"]
            present = {(t, opt_int(p), opt_int(b)) for t, p, b in zip(live["topic"], live["partition"], live["broker_id"])}
        out = []
        for (topic, partition), replicas in sorted(moves.assignments.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            for broker, dir_id in replicas.items():
                if (topic, partition, broker) in present or not moves.fully_audited(broker):
                    continue
                where = moves.dir_path(dir_id) or moves.dir_name(dir_id)
                dirs = ", ".join(moves.dir_path(d) or d for d in moves.brokers.get(broker, []))
                out.append(self.finding(
                    opts["severity"],
                    f"assigned to broker {broker} by the metadata log (replicas "
                    f"{list(replicas)}, directory {where}) but none of broker {broker}'s log dirs ({dirs}) holds it",
                    "Read the broker's log for the partition (log dir failure, manual deletion); let it re-replicate "
                    "(restart the broker, or reassign away and back); check the disk.",
                    evidence=[{"topic": topic, "partition": partition, "broker_id": broker, "directory_id": dir_id,
                               "assigned_replicas": list(replicas), "metadata_log": moves.metadata_dir}],
                    topic=topic, partition=partition, broker_id=broker))
        return out
