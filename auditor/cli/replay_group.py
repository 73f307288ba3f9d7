"""``kafka-audit replay-check --group G --at T``: a consumer group rewound to a time.

A replay is almost always a consumer group rewound with ``kafka-consumer-groups --reset-offsets
--to-datetime T``. For each topic-partition the group has committed, this predicts what that
command sets (``ConsumerGroupCommand.resetToDateTime``: ListOffsets for T, read_uncommitted; the
log end offset when the broker answers -1, i.e. T after the newest record), and how many records
(offsets) and ``.log`` bytes the group would re-read (reset below its committed offset) or skip
(reset above it). The safety verdicts are those of ``replay-check --topic`` (check
``replay.safety``) for exactly the group's partitions.

Sources: log dirs (the group's committed offsets from ``__consumer_offsets`` on disk, exact
answers from the files), manifests (the committed offsets from the ``__consumer_offsets`` files
at the paths the manifests recorded; answers from the rows, exact where the files are
reachable), or ``--bootstrap-server`` (``list_consumer_group_offsets``, ``offsets_for_times``
and the earliest / latest offsets; no bytes).
"""

from __future__ import annotations

import uuid

from auditor.cluster.consumer_groups import GroupsResult, read_groups
from auditor.replay import GroupReset, ReplayPrediction, group_reset, predict, segment_views
from auditor.units import human_bytes

TOTAL_KEYS = ("records_reread", "records_skipped", "bytes_reread", "bytes_skipped")


class GroupNotFound(LookupError):
    """No live group of that name in the source."""


def group_offsets_from_disk(log_dirs: list[str], group: str) -> tuple[dict, dict, list[str]]:
    """((topic, partition) -> committed offset, group facts, notes) from __consumer_offsets."""
    result: GroupsResult = read_groups(log_dirs)
    if not result.partitions:
        raise GroupNotFound(f"no __consumer_offsets partition under {', '.join(log_dirs)}")
    grp = result.live.get(group)
    if grp is None:
        deleted = group in result.groups
        raise GroupNotFound(f"group {group!r} is {'deleted (tombstoned)' if deleted else 'not'} in __consumer_offsets "
                            f"under {', '.join(log_dirs)}")
    facts = {"group": group, "protocol": grp.protocol, "state": grp.state, "members": grp.members,
             "offsets_partition": grp.offsets_partition}
    return {k: c.offset for k, c in grp.offsets.items()}, facts, result.notes


def resets_from_rows(segments: list[dict], partitions: list[dict], committed: dict, target_ms: int, now_ms: int,
                     searched: dict | None = None) -> list[GroupReset]:
    """Per committed partition: the furthest live replica's prediction and the group's reset.

    ``searched``: (topic, partition) -> the replay search replay.safety was handed
    (``auditor.replay.predict_replicas`` with the files read, for the same target and time); a
    replica's prediction there is used instead of searching its files again when it is the one
    ``predict`` gives here (:func:`_same_search`)."""
    by_replica: dict[tuple, list[dict]] = {}
    for r in segments:
        if r.get("dir_kind", "live") == "live":
            by_replica.setdefault((r["topic"], r["partition"], r.get("broker_id"), r.get("log_dir")), []).append(r)
    prows: dict[tuple, dict] = {}
    for p in partitions:
        if p.get("dir_kind", "live") != "live":
            continue
        key = (p["topic"], p["partition"])
        old = prows.get(key)
        if old is None or (p.get("log_end_offset") or -1) > (old.get("log_end_offset") or -1):
            prows[key] = p
    out = []
    for (topic, part), offset in sorted(committed.items()):
        p = prows.get((topic, part))
        if p is None:
            out.append(GroupReset(topic, part, offset, None, "partition not found", False, None, None,
                                  None, None, None, None))
            continue
        views = segment_views(by_replica.get((topic, part, p.get("broker_id"), p.get("log_dir")), []))
        pred = _same_search((searched or {}).get((topic, part)), p, views)
        if pred is None:
            pred = predict(views, target_ms, log_start_offset=p.get("log_start_offset"),
                           log_end_offset=p.get("log_end_offset"), high_watermark=p.get("high_watermark"),
                           now_ms=now_ms, read_files=True)
        out.append(group_reset(views, pred, topic, part, offset, read_files=True))
    return out


def _same_search(replicas, prow: dict, views: list) -> ReplayPrediction | None:
    """The searched prediction of this replica when ``predict(views, ..., read_files=True)`` with the
    row's log start and end offsets would compute the very same one: the same segments, no remote
    storage in it (``tiers`` None), the same log start offset (not raised by a leader-epoch entry)
    and the same, known, log end offset (the last fetchable offset then); else None."""
    if not replicas or not views:
        return None
    lso = prow.get("log_start_offset")
    lso = views[0].base_offset if lso is None else lso
    leo = prow.get("log_end_offset")
    if leo is None and views[-1].last_offset is not None:
        leo = views[-1].last_offset + 1
    for r in replicas:
        pred = r.prediction
        if (r.broker_id == prow.get("broker_id") and r.log_dir == prow.get("log_dir") and pred.tiers is None
                and leo is not None and pred.log_start_offset == lso and pred.log_end_offset == leo and r.views == views):
            return pred
    return None


def resets_from_protocol(bootstrap: str, group: str, target_ms: int) -> tuple[list[GroupReset], dict]:
    """The cluster's own answers: committed offsets, ListOffsets(T), earliest and latest."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    committed = {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}
    if not committed:
        raise GroupNotFound(f"{bootstrap}: group {group!r} has no committed offsets")
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    facts = {"group": group, "protocol": getattr(getattr(desc, "type", None), "name", "").lower() or None,
             "state": desc.state.name.title(), "members": len(desc.members), "offsets_partition": None}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kafka-audit-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    out = []
    try:
        for (topic, part), offset in sorted(committed.items()):
            tp = TopicPartition(topic, part)
            start = admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=15)[tp].result(timeout=15).offset
            end = admin.list_offsets({tp: OffsetSpec.latest()}, request_timeout=15)[tp].result(timeout=15).offset
            (ans,) = consumer.offsets_for_times([TopicPartition(topic, part, target_ms)], timeout=15)
            if ans.offset >= 0:
                reset, source = ans.offset, "timestamp"
            else:
                reset, source = end, "log end offset"
            out.append(GroupReset(topic, part, offset, reset, source, True, start, end,
                                  max(offset - reset, 0), max(reset - offset, 0), None, None))
    finally:
        consumer.close()
    return out, facts


def group_document(facts: dict, resets: list[GroupReset], verdicts: dict) -> dict:
    parts = []
    for r in resets:
        d = r.to_dict()
        d["verdict"] = verdicts.get((r.topic, r.partition))
        parts.append(d)
    totals = {k: sum(p[k] or 0 for p in parts) for k in TOTAL_KEYS}
    return dict(facts, partitions=parts, totals=totals)


def print_group_table(doc: dict) -> None:
    print(f"group {doc['group']!r}: protocol {doc['protocol']}, state {doc['state']}, {len(doc['partitions'])} partition(s)")
    header = (f"{'partition':28s} {'verdict':7s} {'committed':>10s} {'reset to':>10s} {'from':14s} "
              f"{'re-read':>9s} {'skipped':>9s} {'bytes':>10s}")
    print(header)
    print("-" * len(header))

    def num(v):
        return "-" if v is None else f"{v:,}"
    for p in doc["partitions"]:
        moved = p["bytes_reread"] if p["records_reread"] else p["bytes_skipped"]
        print(f"{p['topic'] + '-' + str(p['partition']):28s} {str(p['verdict'] or '-'):7s} {num(p['committed_offset']):>10s} "
              f"{num(p['reset_offset']):>10s} {p['reset_source'][:14]:14s} {num(p['records_reread']):>9s} "
              f"{num(p['records_skipped']):>9s} {(human_bytes(moved) if moved else '-'):>10s}")
    t = doc["totals"]
    print(f"total: re-reads {t['records_reread']:,} records ({human_bytes(t['bytes_reread'])}), skips "
          f"{t['records_skipped']:,} records ({human_bytes(t['bytes_skipped'])})")


__all__ = ["GroupNotFound", "group_offsets_from_disk", "resets_from_rows", "resets_from_protocol", "group_document",
           "print_group_table"]
