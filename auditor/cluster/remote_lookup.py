"""The broker's remote lookup, on the remote log metadata (KIP-405, Kafka 4.2).

For a timestamp lookup on a partition with remote storage, ``RemoteLogManager.findOffsetByTimestamp``
walks the partition's leader epochs from the one holding the log start offset upwards, and per
epoch the remote segments listed for it by start offset, and stops at the first with max
timestamp >= target, end offset >= log start offset, within the leader-epoch lineage
(``isRemoteSegmentWithinLeaderEpochs``) and in state COPY_SEGMENT_FINISHED. It reads that segment
from remote storage when it starts below the local log, else searches the local log.
:func:`find_remote_segment` makes the same choice from :class:`~auditor.cluster.remote_storage.RemotePartition`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from auditor.cluster.remote_storage import RemotePartition, RemoteSegment




def _filtered_epochs(entries: Sequence[tuple[int, int]]) -> dict[int, int]:
    """``buildFilteredLeaderEpochMap``: drop an epoch whose start offset equals the next one's
    (an epoch with no records)."""
    out: dict[int, int] = {}
    prev = None
    for epoch, offset in sorted(entries):
        if prev is not None and prev[1] != offset:
            out[prev[0]] = prev[1]
        prev = (epoch, offset)
    if prev is not None:
        out[prev[0]] = prev[1]
    return out


def within_leader_epochs(seg: RemoteSegment, log_end_offset: int, leader_epochs: Mapping[int, int]) -> bool:
    """``RemoteLogManager.isRemoteSegmentWithinLeaderEpochs``: the segment belongs to the
    partition's leader-epoch lineage (``leader_epochs`` already filtered) and ends below the log
    end offset."""
    if not leader_epochs:
        return False
    seg_epochs = _filtered_epochs(seg.leader_epochs)
    if not seg_epochs:
        return False
    keys = sorted(leader_epochs)
    seg_keys = sorted(seg_epochs)
    seg_last = seg_keys[-1]
    if seg_last < keys[0] or seg_last > keys[-1]:
        return False
    seg_first = next((e for e in seg_keys if e >= keys[0]), None)
    if seg_first is None:
        return False
    for epoch in seg_keys:
        offset = seg_epochs[epoch]
        if epoch < seg_first:
            continue
        if epoch not in leader_epochs:
            return False
        lower = [k for k in keys if k < epoch]
        if epoch == seg_first and lower and offset < leader_epochs[epoch]:
            return False
        higher = [k for k in keys if k > epoch]
        if epoch == seg_last:
            if higher and seg.end_offset > leader_epochs[higher[0]] - 1:
                return False
        else:
            seg_higher = [k for k in seg_keys if k > epoch]
            a = (higher[0], leader_epochs[higher[0]]) if higher else None
            b = (seg_higher[0], seg_epochs[seg_higher[0]]) if seg_higher else None
            if a != b:
                return False
    return seg.end_offset < log_end_offset


def epoch_for_offset(entries: Sequence[tuple[int, int]], offset: int) -> int | None:
    """``LeaderEpochFileCache.epochForOffset``."""
    previous = None
    for epoch, start in sorted(entries):
        if start == offset:
            return epoch
        if start > offset:
            return previous
        previous = epoch
    return previous


@dataclass
class RemoteChoice:
    """What ``findOffsetByTimestamp`` does for a target: which remote segment matched first and
    whether the broker then reads it from remote storage or searches its local log instead."""

    segment: RemoteSegment | None
    search: str
    """'remote' (the segment is below the local log: read from remote storage), 'local' (a remote
    segment matched but its offsets are still local: the local log is searched), or 'none' (no
    remote segment matched: the broker searches the local log from the local log start)."""
    reason: str
    candidates: list[RemoteSegment] = field(default_factory=list)
    """other matching segments that overlap the chosen one (a leader change): the broker's pick
    among them depends on the metadata cache's order, so the answer is only a range."""


def find_remote_segment(rp: RemotePartition, target_ms: int, log_start_offset: int,
                        leader_epoch_entries: Sequence[tuple[int, int]], log_end_offset: int,
                        first_local_base_offset: int | None) -> RemoteChoice:
    """The remote segment ``RemoteLogManager.findOffsetByTimestamp`` stops at for ``target_ms``:
    from the epoch holding the log start offset upwards, the segments listed for each epoch by
    start offset, the first with max timestamp >= target, end offset >= log start offset, within
    the leader-epoch lineage, in state COPY_SEGMENT_FINISHED."""
    epochs = _filtered_epochs(leader_epoch_entries)
    epoch = epoch_for_offset(leader_epoch_entries, log_start_offset)
    if epoch is None:
        return RemoteChoice(None, "none", f"no leader epoch holds the log start offset {log_start_offset} "
                                          f"(leader-epoch-checkpoint): the broker skips remote storage")
    by_epoch: dict[int, list[RemoteSegment]] = {}
    for seg in rp.segments.values():
        for e, _ in seg.leader_epochs:
            by_epoch.setdefault(e, []).append(seg)
    for segs in by_epoch.values():
        segs.sort(key=lambda s: s.start_offset)
    current: int | None = epoch
    all_epochs = sorted({e for e, _ in leader_epoch_entries})
    while current is not None:
        for seg in by_epoch.get(current, []):
            if (seg.max_timestamp_ms >= target_ms and seg.end_offset >= log_start_offset
                    and seg.finished and within_leader_epochs(seg, log_end_offset, epochs)):
                others = [s for s in rp.finished() if s is not seg and s.max_timestamp_ms >= target_ms
                          and s.start_offset <= seg.end_offset and s.end_offset >= seg.start_offset]
                if first_local_base_offset is None or seg.start_offset < first_local_base_offset:
                    return RemoteChoice(seg, "remote", f"remote segment {seg.segment_id} (offsets "
                                        f"{seg.start_offset}..{seg.end_offset}) is the first with max timestamp >= "
                                        f"target; it is below the local log, so the broker reads it from remote "
                                        f"storage", others)
                return RemoteChoice(seg, "local", f"remote segment {seg.segment_id} (offsets {seg.start_offset}.."
                                    f"{seg.end_offset}) matches first but is also local (local log from "
                                    f"{first_local_base_offset}): the broker searches its local segments", others)
        later = [e for e in all_epochs if e > current]
        current = later[0] if later else None
    return RemoteChoice(None, "none", "no remote segment has a record at or after the target: the broker "
                                      "searches the local log from the local log start offset")
