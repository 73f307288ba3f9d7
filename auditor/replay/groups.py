"""Consumer groups: what ``kafka-consumer-groups --reset-offsets --to-datetime T`` sets per
partition, and what the group then re-reads or skips (:func:`group_reset`), from the group's
committed offsets on disk (:func:`group_offsets_from_disk`) and the partitions' rows
(:func:`resets_from_rows`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

from auditor.cluster.consumer_groups import GroupsResult, read_groups
from auditor.replay.positions import bytes_between, offset_positions
from auditor.replay.prediction import ReplayPrediction, predict
from auditor.replay.views import SegmentView, segment_views

@dataclass
class GroupReset:
    """One partition of a group rewound to a time, against the group's committed offset.

    ``kafka-consumer-groups --reset-offsets --to-datetime T`` (``ConsumerGroupCommand``
    ``resetToDateTime``, Kafka 4.2) asks ListOffsets for T (read_uncommitted) and, when the
    broker answers -1 (no record at or after T), falls back to the latest offset (the log end
    offset) with "Partition ... is empty. Falling back to latest known offset."; it never
    clamps the answer. Records are counted in offsets (compaction gaps and transaction markers
    included); bytes are ``.log`` bytes between the two positions."""

    topic: str
    partition: int
    committed_offset: int | None
    reset_offset: int | None
    reset_source: str
    """"timestamp": the broker's answer for T; "log end offset": the tool's fallback."""
    exact: bool
    log_start_offset: int | None
    log_end_offset: int | None
    records_reread: int | None
    """offsets between the reset and the committed offset the group reads again (reset < committed)."""
    records_skipped: int | None
    """offsets the group never reads (reset > committed)."""
    bytes_reread: int | None
    bytes_skipped: int | None
    committed_position_bytes: int | None = None
    reset_position_bytes: int | None = None

    def to_dict(self) -> dict:
        # every field is a scalar: asdict's deep copy, 1,000 times per group, is not needed
        return {f: getattr(self, f) for f in _GROUP_RESET_FIELDS}


_GROUP_RESET_FIELDS = tuple(f.name for f in fields(GroupReset))


def group_reset(views: Sequence[SegmentView], prediction: "ReplayPrediction", topic: str, partition: int,
                committed_offset: int | None, *, read_files: bool = True) -> GroupReset:
    """What --reset-offsets --to-datetime sets for one partition (from ``predict``'s answer) and
    what the group re-reads or skips relative to its committed offset."""
    modern = prediction.modern
    if modern.offset is not None:
        reset, source, exact = modern.offset, "timestamp", modern.exact
    else:
        reset, source, exact = prediction.log_end_offset, "log end offset", prediction.log_end_offset is not None
    reread = skipped = bytes_reread = bytes_skipped = None
    c_pos = r_pos = None
    if reset is not None and committed_offset is not None:
        reread = max(committed_offset - reset, 0)
        skipped = max(reset - committed_offset, 0)
        if read_files:
            (c_pos, c_exact), (r_pos, r_exact) = offset_positions(views, [committed_offset, reset])
        else:
            c_pos = r_pos = None
        lo, hi = sorted(((reset, r_pos), (committed_offset, c_pos)))
        between = bytes_between(views, lo[0], lo[1], hi[0], hi[1])
        if reset < committed_offset:
            bytes_reread, bytes_skipped = between, 0
        else:
            bytes_reread, bytes_skipped = 0, between
    return GroupReset(topic, partition, committed_offset, reset, source, exact, prediction.log_start_offset,
                      prediction.log_end_offset, reread, skipped, bytes_reread, bytes_skipped, c_pos, r_pos)


class GroupNotFound(LookupError):
    """No live group of that name in the source."""


@dataclass
class GroupCommits:
    """A consumer group's committed offsets as a source holds them."""

    committed: dict[tuple[str, int], int]
    """(topic, partition) -> committed offset."""
    facts: dict
    """group, protocol, state, members, offsets_partition."""
    notes: list[str]


def group_offsets_from_disk(log_dirs: list[str], group: str) -> GroupCommits:
    """The group's committed offsets from __consumer_offsets under the log dirs (GroupNotFound)."""
    result: GroupsResult = read_groups(log_dirs)
    if not result.partitions:
        raise GroupNotFound(f"no __consumer_offsets partition under {', '.join(log_dirs)}")
    grp = result.live.get(group)
    if grp is None:
        deleted = group in result.groups
        raise GroupNotFound(f"group {group!r} is {'deleted (tombstoned)' if deleted else 'not'} in __consumer_offsets "
                            f"under {', '.join(log_dirs)}")
    return GroupCommits({k: c.offset for k, c in grp.offsets.items()}, group_facts(group, grp), result.notes)


def group_facts(name: str, grp) -> dict:
    """What a group's record says of it (``auditor.cluster.consumer_groups``), for the report."""
    return {"group": name, "protocol": grp.protocol, "state": grp.state, "members": grp.members,
            "offsets_partition": grp.offsets_partition}


def resets_from_rows(segments: list[dict], partitions: list[dict], committed: dict, replay_at_ms: int, as_of_ms: int,
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
            pred = predict(views, replay_at_ms, log_start_offset=p.get("log_start_offset"),
                           log_end_offset=p.get("log_end_offset"), high_watermark=p.get("high_watermark"),
                           as_of_ms=as_of_ms, read_files=True)
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
