"""Both answers for one replica (:func:`predict`) and for every live replica of a partition
(:func:`predict_replicas`: the search the pipeline runs before the checks; checks/replay/safety.py is
handed the result and never reads a file)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

from auditor.formats.errors import FormatError
from auditor.replay.legacy import LegacyAnswer, predict_legacy, predict_legacy_offsets
from auditor.replay.log_start import LOG_START_LEADER_EPOCH, LogStart, log_start
from auditor.replay.modern import ModernAnswer, predict_modern, predict_modern_from_rows
from auditor.replay.remote import TieredAnswer, TieredLookup, remote_unknown, with_remote
from auditor.replay.views import SegmentView, segment_views

@dataclass
class ReplayPrediction:
    replay_at_ms: int
    modern: ModernAnswer
    legacy: LegacyAnswer
    log_start_offset: int | None
    log_end_offset: int | None
    oldest_timestamp_ms: int | None
    newest_timestamp_ms: int | None
    segments: int
    notes: list[str] = field(default_factory=list)
    tiers: dict | None = None
    """tiered storage: local vs remote offsets and bytes, whether anything was ever deleted
    (:func:`tier_summary`); None when the partition has no remote storage known."""
    unknown: list[str] = field(default_factory=list)
    """what the prediction cannot know (a verdict built on it must say so, not guess)."""
    log_start: "LogStart | None" = None
    """where the log start offset came from and whether records were ever deleted below it
    (:func:`log_start`; set by the caller that read the partition's checkpoints)."""

    def to_dict(self) -> dict:
        return asdict(self)


def predict(views: Sequence[SegmentView], replay_at_ms: int, *, log_start_offset: int | None,
            log_end_offset: int | None, high_watermark: int | None, as_of_ms: int,
            read_files: bool = True, remote=None, leader_epochs: Sequence[tuple[int, int]] | None = None,
            remote_storage_dir: str | None = None) -> ReplayPrediction:
    """Both answers for one replica. ``read_files=False`` answers the modern lookup from rows.

    Tiered storage: ``remote`` (an ``auditor.cluster.remote_storage.RemotePartition``, from
    ``__remote_log_metadata``) with the partition's ``leader_epochs`` (leader-epoch-checkpoint)
    makes the modern answer the broker's remote-then-local lookup (:func:`predict_modern_tiered`);
    ``remote_storage_dir`` (LocalTieredStorage's directory) makes remote answers exact.
    """
    notes: list[str] = []
    if log_end_offset is None and views and views[-1].last_offset is not None:
        log_end_offset = views[-1].last_offset + 1
    lso = log_start_offset if log_start_offset is not None else (views[0].base_offset if views else None)
    if lso is not None and leader_epochs:
        start = log_start(views, lso, leader_epochs)  # a deleteRecords the checkpoint does not show yet
        if start.source == LOG_START_LEADER_EPOCH:
            notes.append(f"log-start-offset-checkpoint says {lso}, the leader-epoch-checkpoint starts at "
                         f"{start.offset}: the log start offset moved since the checkpoint; the latter is used")
            lso = start.offset
    # The on-disk high watermark is a checkpoint written every few seconds and lags the live one;
    # a settled replica's live high watermark is its log end offset, so that bounds the answer.
    fetchable = log_end_offset if log_end_offset is not None else high_watermark
    modern: ModernAnswer
    if read_files:
        try:
            modern = predict_modern(views, replay_at_ms, lso, fetchable)
        except (OSError, FormatError) as exc:
            notes.append(f"cannot read the segment to search ({exc}); answered from the segment rows")
            modern = predict_modern_from_rows(views, replay_at_ms, lso)
    else:
        modern = predict_modern_from_rows(views, replay_at_ms, lso)
    legacy = predict_legacy(views, replay_at_ms, lso, log_end_offset, as_of_ms)
    # segments wholly below the log start (not yet deleted by the retention check) hold no retained record
    stamped_min = [v.min_timestamp_ms for v in views if v.min_timestamp_ms is not None
                   and (lso is None or v.last_offset is None or v.last_offset >= lso)]
    stamped_max = [v.largest_timestamp_ms for v in views if v.largest_timestamp_ms is not None]
    oldest = min(stamped_min) if stamped_min else None
    newest = max(stamped_max) if stamped_max else None
    answer = TieredAnswer(modern, oldest, newest)
    if remote is not None and lso is not None:
        answer = with_remote(TieredLookup(views, replay_at_ms, remote, lso, log_end_offset, fetchable, leader_epochs or [],
                                           remote_storage_dir, read_files), answer, notes)
    elif views and lso is not None and lso < views[0].base_offset:
        # a log start below the first local segment: tiered storage keeps the records in between
        # remotely (or the checkpoint predates a deletion), and nothing here says which
        answer = remote_unknown(views, lso, log_end_offset, modern)
    return ReplayPrediction(
        replay_at_ms=replay_at_ms, modern=answer.modern, legacy=legacy, log_start_offset=lso, log_end_offset=log_end_offset,
        oldest_timestamp_ms=answer.oldest_timestamp_ms, newest_timestamp_ms=answer.newest_timestamp_ms,
        segments=len(views), notes=notes, tiers=answer.tiers, unknown=answer.unknown,
    )


@dataclass
class ReplicaPrediction:
    """One live replica of a partition (broker, log dir): its segment views and both answers."""

    broker_id: int | None
    log_dir: str | None
    views: list[SegmentView]
    prediction: ReplayPrediction


def _int(value) -> int | None:
    return None if value is None or (isinstance(value, float) and value != value) else int(value)


def epoch_starts(prow) -> list[tuple[int, int]]:
    """(epoch, start offset) of a partition row's leader-epoch-checkpoint (list or array)."""
    epochs = prow.get("leader_epochs") if prow else None
    if epochs is None or isinstance(epochs, float):
        return []
    return [(int(e["epoch"]), int(e["start_offset"])) for e in epochs]


def _records(rows) -> list:
    """Rows as a list of dicts: a DataFrame (the engines hand the checks pandas) converted once,
    plain rows (replay-check, manifests) as they are. Nulls may be None or NaN: read with _int/_text."""
    if rows is None:
        return []
    return rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)


def _text(value) -> str | None:
    return None if value is None or (isinstance(value, float) and value != value) else value


def _replica_order(key: tuple) -> tuple:
    """(broker id, log dir) ascending, unknown ones last (as pandas' sorted groupby puts NaN)."""
    broker, log_dir = key
    return (broker is None, broker or 0, log_dir is None, log_dir or "")


def _live_partition_row(partitions: list, broker: int | None, log_dir: str | None) -> dict | None:
    """The first live partition-dir row of this replica; None when its broker or log dir is unknown."""
    if broker is None or log_dir is None:
        return None
    for p in partitions:
        if p.get("dir_kind") == "live" and _int(p.get("broker_id")) == broker and p.get("log_dir") == log_dir:
            return p
    return None


def predict_replicas(topic: str, partition: int, segments, partitions, ctx, *,
                     search_files: bool) -> list[ReplicaPrediction]:
    """Both answers for every live replica of one topic-partition, the most complete replica
    (highest log end offset) first; [] when no live segment was scanned.

    ``segments`` / ``partitions``: the partition's rows, as the checks get them (pandas) or as
    plain dicts (replay-check: no pandas); ``ctx``: the audit context (``replay_at_ms``, ``as_of_ms``, tiered storage: ``remote_partition``, ``remote_storage_dir``). ``search_files``: read
    the chosen segment's files for the exact modern answer. The pipeline searches (check_runner,
    replay-check) and hands the result to the replay.safety check; without it the check answers
    from the rows alone, reading nothing.
    """
    by_replica: dict[tuple, list[dict]] = {}
    for row in _records(segments):
        if row.get("dir_kind") == "live":
            by_replica.setdefault((_int(row.get("broker_id")), _text(row.get("log_dir"))), []).append(row)
    replicas = []
    for broker, log_dir in sorted(by_replica, key=_replica_order):
        views = segment_views(by_replica[(broker, log_dir)])
        if views:
            replicas.append((broker, log_dir, views))
    partitions = _records(partitions)
    out = []
    for broker, log_dir, views in replicas:
        prow = _live_partition_row(partitions, broker, log_dir)
        lso = _int(prow.get("log_start_offset")) if prow else None
        start = log_start(views, lso if prow and prow.get("log_start_offset_source") == "checkpoint" else None,
                          epoch_starts(prow))
        if start.source == LOG_START_LEADER_EPOCH:
            lso = start.offset  # a deleteRecords the log-start-offset-checkpoint does not show yet
        pred = predict(views, ctx.replay_at_ms, log_start_offset=lso,
                       log_end_offset=_int(prow.get("log_end_offset")) if prow else None,
                       high_watermark=_int(prow.get("high_watermark")) if prow else None,
                       as_of_ms=ctx.as_of_ms, read_files=search_files,
                       remote=ctx.remote_partition(topic, partition, prow.get("topic_id") if prow else None),
                       leader_epochs=epoch_starts(prow),
                       remote_storage_dir=ctx.remote_storage_dir if search_files else None)
        pred.log_start = start
        out.append(ReplicaPrediction(broker, log_dir, views, pred))
    out.sort(key=lambda r: (-(r.prediction.log_end_offset or -1), r.broker_id if r.broker_id is not None else 1 << 30))
    return out


def legacy_offsets_of(topic: str, partition: int, segments, partitions, ctx, max_offsets: int) -> list[int] | None:
    """The whole ListOffsets v0 answer with up to ``max_offsets`` offsets of the replica a verdict
    judges (the most complete one, as replay.safety picks it), answered as its leader answers a
    consumer (clamped to the log end offset); None when no live segment was scanned."""
    replicas = predict_replicas(topic, partition, segments, partitions, ctx, search_files=False)
    if not replicas:
        return None
    pred = replicas[0].prediction
    return predict_legacy_offsets(replicas[0].views, ctx.replay_at_ms, pred.log_start_offset, pred.log_end_offset,
                                  ctx.as_of_ms, max_offsets, high_watermark=pred.log_end_offset)
