"""KLA062 groups.missing_partition: consumer groups with commits to partitions that no longer exist.

What it checks:
    Every committed offset of every live consumer group (from ``__consumer_offsets`` on disk)
    whose topic-partition has no live partition directory among the audited log dirs: the topic
    was deleted (or recreated with fewer partitions) while the group kept its offsets, or the
    commits name a topic that is not on these brokers at all. Kafka 4.x drops the offsets of a
    deleted topic itself when it processes the deletion; offsets that survive it are left over
    from older brokers, a deletion the coordinator missed, or a partial audit.

Why it matters:
    A group whose offsets point at a topic that is gone is a stale consumer or a broken pipeline
    (it reads a topic that no longer exists, or a recreated topic of the same name starts it from
    a stale offset). If the topic is recreated, the old committed offsets apply to new data.

Example finding:
    WARN group 'etl-v1' has committed offsets on 3 partition(s) that no longer exist: payments-0,
    payments-1, payments-2 (no partition directory in the audited log dirs).

How to fix:
    Delete the group's stale offsets (``kafka-consumer-groups --delete-offsets --group G --topic
    T``) or the whole group if it is retired; if the audit covered only some brokers, audit all of
    them before acting.

Options:
    severity (WARN): the severity of a finding.
"""

from __future__ import annotations

from checks.base import Check, CheckInput, opt_int, severity_option


class GroupMissingPartition(Check):
    code = "KLA062"
    name = "groups.missing_partition"
    title = "Consumer group commits to partitions that no longer exist"
    scope = "cluster"
    options = {
        "severity": severity_option("WARN"),
    }

    def run(self, data: CheckInput, ctx, opts):
        commits = ctx.all_commits()
        if not commits:
            return []
        parts = data.partitions
        existing = set()
        if parts is not None and len(parts):
            live = parts[parts["dir_kind"] == "live"]
            existing = {(t, opt_int(p)) for t, p in zip(live["topic"], live["partition"])}
        missing: dict[str, list[dict]] = {}
        for c in commits:
            if (c["topic"], c["partition"]) not in existing and not c["topic"].startswith("__"):
                missing.setdefault(c["group"], []).append(c)
        out = []
        for group, items in sorted(missing.items()):
            items.sort(key=lambda c: (c["topic"], c["partition"]))
            names = ", ".join(f"{c['topic']}-{c['partition']}" for c in items[:10]) + (" ..." if len(items) > 10 else "")
            out.append(self.finding(
                opts["severity"],
                f"group {group!r} has committed offsets on {len(items)} partition(s) that no longer exist: {names} "
                f"(no partition directory in the audited log dirs)",
                "Delete the group's stale offsets (kafka-consumer-groups --delete-offsets) or the group if it is "
                "retired; audit every broker before acting if this audit covered only some.",
                evidence=[{"group": group, "topic": c["topic"], "partition": c["partition"],
                           "committed_offset": c["committed_offset"], "commit_timestamp_ms": c.get("commit_timestamp_ms")}
                          for c in items]))
        return out
