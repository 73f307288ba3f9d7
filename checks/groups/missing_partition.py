"""KLA062 groups.missing_partition: consumer groups with commits to partitions that no longer exist.

What it checks:
    Every committed offset of every live consumer group (from ``__consumer_offsets`` on disk)
    whose topic-partition no longer exists: the topic was deleted (or recreated with fewer
    partitions) while the group kept its offsets, or the commits name a topic that is not in the
    cluster at all. When the KRaft metadata log is readable (under the log dirs, or carried by
    the manifests) this is judged from the cluster's own record, exactly: the topic-partition is
    not in the cluster's current state, or the commit was made before the partition's current
    incarnation was created (the topic was deleted and re-created: a new topic ID), as far as the
    log's history reaches. Without a metadata log it falls back to the audited log dirs (no live
    partition directory), and the finding says so: a partition on a broker that was not audited
    looks missing then. Kafka 4.x drops the offsets of a deleted topic itself when it processes
    the deletion; offsets that survive it are left over from older brokers, a deletion the
    coordinator missed, or a partial audit.

Why it matters:
    A group whose offsets point at a topic that is gone is a stale consumer or a broken pipeline
    (it reads a topic that no longer exists, or a recreated topic of the same name starts it from
    a stale offset). If the topic is recreated, the old committed offsets apply to new data.

Example finding:
    WARN group 'etl-v1' has committed offsets on 3 partition(s) that no longer exist: payments-0,
    payments-1, payments-2 (judged from the KRaft metadata log /data/k1/__cluster_metadata-0: 2
    not in the cluster, 1 committed before its topic was re-created).

How to fix:
    Delete the group's stale offsets (``kafka-consumer-groups --delete-offsets --group G --topic
    T``) or the whole group if it is retired; if the audit covered only some brokers, audit all of
    them before acting.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, opt_int, severity_option

#: Evidence ``reason`` values.
NOT_IN_CLUSTER = "not in the cluster"
RECREATED = "committed before its topic was re-created"
NO_DIR = "no partition directory in the audited log dirs"


def _recreated_after(moves, topic: str, partition: int, commit_ms: int | None) -> dict | None:
    """The partition's current incarnation's creation (metadata history), when the commit is older
    than it; None when it is not, or the history does not reach back to the creation."""
    if commit_ms is None:
        return None
    created = [c for c in moves.by_partition.get((topic, partition), []) if c.kind == "partition-created"]
    if not created or commit_ms >= created[-1].timestamp_ms:
        return None
    last = created[-1]
    return {"created_offset": last.offset, "created_timestamp_ms": last.timestamp_ms,
            "topic_id": moves.topic_ids.get(topic) or last.topic_id}


def missing_by_metadata(commits: list[dict], moves) -> list[dict]:
    """Commits to partitions the metadata log says do not exist (now, or in the commit's time)."""
    out = []
    for c in commits:
        if c["topic"].startswith("__"):
            continue
        key = (c["topic"], c["partition"])
        if key not in moves.assignments:
            out.append({**c, "reason": NOT_IN_CLUSTER})
            continue
        recreated = _recreated_after(moves, c["topic"], c["partition"], c.get("commit_timestamp_ms"))
        if recreated is not None:
            out.append({**c, "reason": RECREATED, **recreated})
    return out


def missing_by_dirs(commits: list[dict], parts) -> list[dict]:
    """Commits to partitions with no live partition directory among the audited log dirs."""
    existing = set()
    if parts is not None and len(parts):
        live = parts[parts["dir_kind"] == "live"]
        existing = {(t, opt_int(p)) for t, p in zip(live["topic"], live["partition"])}
    return [{**c, "reason": NO_DIR} for c in commits
            if (c["topic"], c["partition"]) not in existing and not c["topic"].startswith("__")]


class GroupMissingPartition(Check):
    code = "KLA062"
    name = "groups.missing_partition"
    title = "Consumer group commits to partitions that no longer exist"
    scope = "cluster"
    identity = ("evidence.group",)
    options = {
        "severity": severity_option("WARN"),
    }

    def run(self, data: CheckInput, ctx, opts):
        commits = ctx.all_commits()
        if not commits:
            return []
        moves = ctx.partition_moves
        if moves is not None and moves.assignments:
            found, source = missing_by_metadata(commits, moves), f"metadata log {moves.metadata_dir}"
        else:
            found, source = missing_by_dirs(commits, data.partitions), "scanned partition dirs"
        missing: dict[str, list[dict]] = {}
        for c in found:
            missing.setdefault(c["group"], []).append(c)
        return [self._finding(group, sorted(items, key=lambda c: (c["topic"], c["partition"])), source, opts)
                for group, items in sorted(missing.items())]

    def _finding(self, group: str, items: list[dict], source: str, opts):
        names = ", ".join(f"{c['topic']}-{c['partition']}" for c in items[:10]) + (" ..." if len(items) > 10 else "")
        if source.startswith("metadata log"):
            counts = [(sum(c["reason"] == r for c in items), r) for r in (NOT_IN_CLUSTER, RECREATED)]
            why = (f"judged from the KRaft {source}: "
                   + ", ".join(f"{n} {r.replace('its topic', 'their topic') if n > 1 else r}" for n, r in counts if n))
        else:
            why = (f"{NO_DIR}; no KRaft metadata log was readable, so this is judged from the scanned dirs: "
                   f"a partition on a broker that was not audited looks missing too")
        return self.finding(
            opts["severity"],
            f"group {group!r} has committed offsets on {len(items)} partition(s) that no longer exist: {names} ({why})",
            "Delete the group's stale offsets (kafka-consumer-groups --delete-offsets) or the group if it is "
            "retired; audit every broker before acting if this audit covered only some.",
            evidence=[{"group": group, "topic": c["topic"], "partition": c["partition"],
                       "committed_offset": c["committed_offset"], "commit_timestamp_ms": c.get("commit_timestamp_ms"),
                       "reason": c["reason"], "source": source,
                       **{k: c[k] for k in ("topic_id", "created_offset", "created_timestamp_ms") if k in c}}
                      for c in items])
