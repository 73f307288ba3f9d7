"""Tiered storage (KIP-405): the broker's remote-then-local lookup (:func:`predict_modern_tiered`),
what is local and what remote (:func:`tier_summary`), and what cannot be known without the
remote metadata or files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.replay.modern import ModernAnswer, choose_segment, local_search, search_segment
from auditor.replay.views import SegmentView

def predict_modern_tiered(views: Sequence[SegmentView], replay_at_ms: int, remote, *, log_start_offset: int,
                          leader_epochs: Sequence[tuple[int, int]], log_end_offset: int | None,
                          fetchable: int | None, remote_storage_dir: str | None = None,
                          read_files: bool = True) -> ModernAnswer:
    """``UnifiedLog.fetchOffsetByTimestamp`` with remote storage on (Kafka 4.2): the broker's
    ``RemoteLogOffsetReader`` runs ``RemoteLogManager.findOffsetByTimestamp`` (the first remote
    segment, epoch by epoch and by start offset, with max timestamp >= T, end >= the log start
    offset, in the leader-epoch lineage, COPY_SEGMENT_FINISHED; read from remote storage when it
    starts below the local log, else the local segments are searched with the log start offset),
    and when that finds nothing, searches the local log from the *local* log start offset.

    From the metadata alone a remote answer is a range (the segment's offsets): the broker then
    searches the segment's time index and records, which are in remote storage. With
    ``remote_storage_dir`` (LocalTieredStorage's directory) the segment's own files are searched
    the same way as a local segment's, and the answer is exact.
    """
    from auditor.cluster import remote_lookup, remote_storage  # tiered storage only: not imported otherwise

    local_start = views[0].base_offset if views else (log_end_offset if log_end_offset is not None else log_start_offset)
    first_local = views[0].base_offset if views else None
    leo = log_end_offset if log_end_offset is not None else local_start
    choice = remote_lookup.find_remote_segment(remote, replay_at_ms, log_start_offset, leader_epochs, leo, first_local)
    if choice.search == "remote":
        seg = choice.segment
        files = remote_storage.remote_segment_files(remote_storage_dir, seg) if remote_storage_dir else None
        if files is not None and read_files and not choice.candidates:
            view = SegmentView(base_offset=seg.start_offset, largest_timestamp_ms=seg.max_timestamp_ms, log_mtime_ms=None,
                               log_size_bytes=seg.size_bytes, first_offset=seg.start_offset, last_offset=seg.end_offset,
                               log_path=files.log_path, index_path=files.index_path, timeindex_path=files.timeindex_path)
            found = search_segment(view, replay_at_ms, log_start_offset)
            if found.offset is not None:
                found.reason = (f"first record with timestamp >= target in remote segment {seg.segment_id} "
                                f"(offsets {seg.start_offset}..{seg.end_offset}), read from the remote storage dir")
                found.tier = "remote"
                return found
            local = local_search(views, replay_at_ms, local_start, fetchable, read_files)
            local.reason = (f"remote segment {seg.segment_id} holds no record at or after the target past the log "
                            f"start offset; the broker then searches the local log: {local.reason}")
            local.tier = "local"
            return local
        return _remote_range(choice, log_start_offset, remote_storage_dir)
    if choice.search == "local":
        seg = choose_segment(views, replay_at_ms)
        if seg is not None:
            found = local_search([seg], replay_at_ms, log_start_offset, fetchable, read_files)
            if found.offset is not None or not found.exact:
                found.reason = f"{choice.reason}: {found.reason}"
                found.tier = "local"
                return found
    local = local_search(views, replay_at_ms, local_start, fetchable, read_files)
    if choice.search == "none":
        local.reason = f"{choice.reason}; {local.reason}"
    local.tier = "local"
    return local


def _remote_range(choice, log_start_offset: int, remote_storage_dir: str | None) -> ModernAnswer:
    """From the metadata alone: the offsets of the remote segment the broker reads."""
    seg = choice.segment
    upper = max([seg.end_offset] + [c.end_offset for c in choice.candidates])
    low = max(min([seg.start_offset] + [c.start_offset for c in choice.candidates]), log_start_offset)
    why = ("; overlapping remote segments match too (a leader change): which one the broker reads depends on "
           "its metadata cache" if choice.candidates else "")
    missing = "" if not remote_storage_dir else f" (its files are not under {remote_storage_dir})"
    return ModernAnswer(low, None, seg.start_offset,
                        f"in remote segment {seg.segment_id} (offsets {low}..{upper}, newest record "
                        f"{seg.max_timestamp_ms} ms): the broker searches that segment's time index, which is in "
                        f"remote storage{missing}; the exact offset needs the remote files{why}",
                        exact=False, upper_bound_offset=upper, tier="remote")


def remote_oldest_timestamp(remote, log_start_offset: int, remote_storage_dir: str | None) -> int | None:
    """The smallest record timestamp at or after the log start offset in the remote segment that
    holds it, from its file when the remote storage dir is given (None otherwise)."""
    from auditor.cluster import remote_storage  # tiered storage only: not imported otherwise

    if not remote_storage_dir:
        return None
    segs = [s for s in remote.finished() if s.end_offset >= log_start_offset]
    if not segs:
        return None
    files = remote_storage.remote_segment_files(remote_storage_dir, segs[0])
    if files is None:
        return None
    smallest = None
    with LogReader(files.log_path) as reader:
        for batch in reader.batches():
            if batch.last_offset < log_start_offset:
                continue
            for record in reader.records(batch):
                if record.offset >= log_start_offset and record.timestamp_ms >= 0:
                    smallest = record.timestamp_ms if smallest is None else min(smallest, record.timestamp_ms)
    return smallest


def tier_summary(views: Sequence[SegmentView], remote, log_start_offset: int | None,
                 log_end_offset: int | None) -> dict:
    """Per partition: which offsets are local and which remote, their bytes, and whether anything
    was ever deleted (a log start offset above 0, or remote segments deleted)."""
    out = {
        "log_start_offset": log_start_offset,
        "local_start_offset": views[0].base_offset if views else None,
        "local_end_offset": log_end_offset,
        "local_bytes": sum(v.log_size_bytes or 0 for v in views),
        "local_segments": len(views),
        "remote_segments": 0, "remote_start_offset": None, "remote_end_offset": None, "remote_bytes": None,
        "remote_segments_deleted": None, "remote_bytes_deleted": None, "remote_copies_in_progress": None,
        "remote_partition_delete_state": None, "remote_unknown": [],
    }
    if remote is not None:
        out.update(remote.summary())
    deleted = []
    if log_start_offset:
        deleted.append(f"offsets 0..{log_start_offset - 1} were deleted (log start offset {log_start_offset})")
    if out["remote_segments_deleted"]:
        deleted.append(f"{out['remote_segments_deleted']} remote segment(s) deleted from remote storage")
    out["ever_deleted"] = bool(deleted) if log_start_offset is not None else None
    out["deleted"] = "; ".join(deleted) if deleted else (
        "nothing was ever deleted (log start offset 0)" if log_start_offset == 0 else None)
    return out


@dataclass
class TieredLookup:
    """What the remote-then-local lookup of one replica is asked (:func:`with_remote`)."""

    views: Sequence[SegmentView]
    """the replica's local segments."""
    replay_at_ms: int
    remote: object
    """the partition's ``auditor.cluster.remote_storage.RemotePartition``."""
    log_start_offset: int
    log_end_offset: int | None
    fetchable: int | None
    """the last fetchable offset (the log end offset, else the high watermark)."""
    leader_epochs: Sequence[tuple[int, int]]
    remote_storage_dir: str | None
    read_files: bool


@dataclass
class TieredAnswer:
    """The modern answer with the retained records' time span, and with tiered storage what is
    local and what remote (:func:`tier_summary`) and what cannot be known."""

    modern: ModernAnswer
    oldest_timestamp_ms: int | None
    newest_timestamp_ms: int | None
    tiers: dict | None = None
    unknown: list[str] = field(default_factory=list)


def with_remote(ask: TieredLookup, local: TieredAnswer, notes: list[str]) -> TieredAnswer:
    """The local-only answer ``local`` made the broker's remote-then-local one; problems reading
    remote files are added to ``notes``."""
    views, replay_at_ms, remote, lso, log_end_offset = (ask.views, ask.replay_at_ms, ask.remote, ask.log_start_offset,
                                                     ask.log_end_offset)
    modern, oldest, newest = local.modern, local.oldest_timestamp_ms, local.newest_timestamp_ms
    unknown = [f"__remote_log_metadata is incomplete for this partition: {u}" for u in remote.unknown]
    if remote.finished():
        tiered = dict(log_start_offset=lso, leader_epochs=ask.leader_epochs, log_end_offset=log_end_offset,
                      fetchable=ask.fetchable, read_files=ask.read_files)
        try:
            modern = predict_modern_tiered(views, replay_at_ms, remote, remote_storage_dir=ask.remote_storage_dir, **tiered)
        except (OSError, FormatError) as exc:
            notes.append(f"cannot read a remote segment's files ({exc}); answered from the remote metadata")
            modern = predict_modern_tiered(views, replay_at_ms, remote, **tiered)
        rmax = remote.max_timestamp_ms
        newest = rmax if newest is None else max(newest, rmax)
        held = [s for s in remote.finished() if s.end_offset >= lso]
        if held and (not views or held[0].start_offset < views[0].base_offset):
            # the oldest retained record is in remote storage
            try:
                exact = remote_oldest_timestamp(remote, lso, ask.remote_storage_dir)
            except (OSError, FormatError) as exc:
                notes.append(f"cannot read the oldest remote segment's records ({exc})")
                exact = None
            oldest = exact
            if exact is None and lso > 0 and replay_at_ms <= held[0].max_timestamp_ms:
                unknown.append(
                    f"records below the log start offset {lso} were deleted, and the oldest retained one is in "
                    f"remote segment {held[0].segment_id} (offsets {held[0].start_offset}..{held[0].end_offset}, "
                    f"newest record {held[0].max_timestamp_ms} ms); whether a deleted record was at or after the "
                    f"target needs that segment's own timestamps, in remote storage (give its directory)")
    elif views and lso < views[0].base_offset:
        without = remote_unknown(views, lso, log_end_offset, modern)
        modern, oldest, newest = without.modern, without.oldest_timestamp_ms, without.newest_timestamp_ms
        unknown += without.unknown
    if unknown and modern.exact and modern.tier == "remote":
        modern.exact = False
        modern.upper_bound_offset = modern.offset
    return TieredAnswer(modern, oldest, newest, tier_summary(views, remote, lso, log_end_offset), unknown)


def remote_unknown(views, lso, log_end_offset, modern) -> TieredAnswer:
    """The local log starts above the log start offset (tiered storage, or a log-start checkpoint
    older than a deletion) and no remote metadata says what is in between: the answer is somewhere
    from the log start to the local answer."""
    upper = modern.offset if modern.offset is not None else log_end_offset
    reason = (f"the log start offset {lso} is below the first local segment {views[0].base_offset}: offsets "
              f"{lso}..{views[0].base_offset - 1} are in remote storage (tiered storage), or the log-start checkpoint "
              f"predates a deletion (it is rewritten every minute); no __remote_log_metadata here says which: the "
              f"broker's answer is between {lso} and {upper}")
    answer = ModernAnswer(lso, None, None, reason, exact=False, upper_bound_offset=upper, tier="remote")
    unknown = [f"offsets {lso}..{views[0].base_offset - 1} are below the first local segment and above the log "
               f"start offset: in remote storage (tiered storage) or deleted after the last log-start checkpoint; "
               f"__remote_log_metadata is not under the given log dirs, so what a seek to the target returns, and "
               f"whether records were deleted, cannot be told from these files"]
    return TieredAnswer(answer, None, None, tier_summary(views, None, lso, log_end_offset), unknown)
