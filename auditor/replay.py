"""What a broker answers when a consumer seeks a partition to a time: both APIs, predicted.

Two lookups (DESIGN.md, "Why this tool exists"; kafka-format.md §3):

* **modern** (ListOffsets v1+, ``offsetsForTimes``): Kafka 4.2 ``UnifiedLog.fetchOffsetByTimestamp``
  -> ``LogSegment.findOffsetByTimestamp`` -> ``FileRecords.searchForTimestamp``:

  1. the *first* segment (base-offset order) whose ``largestTimestamp`` >= T, where
     ``largestTimestamp`` is the segment's largest record timestamp, or the ``.log`` mtime
     when it has none (magic 0); only that segment is searched;
  2. ``timeIndex.lookup(T)`` (the last entry with timestamp <= T, else (-1, base offset)), then
     ``offsetIndex.lookup(max(that offset, logStartOffset))`` (the last entry with offset <=
     it, else (base offset, 0)) gives a byte position;
  3. from there, the first batch with ``maxTimestamp`` >= T is opened and the first record in
     it with timestamp >= T and offset >= logStartOffset is the answer (later batches of the
     segment are tried when none qualifies). Control batches are not skipped;
  4. no match, or an offset at or past the last fetchable offset (high watermark for
     read_uncommitted, last stable offset for read_committed): the broker answers **-1**.

* **legacy** (ListOffsets v0, removed from brokers in 4.0 but still what old clients ask of
  older brokers): ``UnifiedLog.legacyFetchOffsetsBefore``: pairs (max(base offset, log start
  offset), ``.log`` mtime) per segment, plus (log end offset, now) when the last segment is not
  empty; the answer is the offset of the newest pair whose mtime <= T, or **nothing** when every
  mtime is newer than T (old clients crash on the empty answer). With max offsets > 1 the broker
  answers older pairs' offsets too (:func:`predict_legacy_offsets`). Both are proven equal to a
  real Kafka 3.9.1 broker's v0 answers (tests/test_legacy_lookup_v0.py, moves included).

The exact modern answer needs the records of one segment: :func:`predict_partition_dir` reads
that segment (read-only, through ``auditor.formats``). :func:`predict_from_rows` answers from
segment rows alone (manifests, no disk access): which segment, and offset bounds.
"""

from __future__ import annotations

# long module: the broker's time lookups (UnifiedLog's modern, legacy and, with tiered storage, remote
# halves) and the log start they depend on, kept together so each can be read against the others

import bisect
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable, Sequence

from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.formats.offset_index import read_offset_index
from auditor.formats.time_index import read_time_index
from auditor.units import human_bytes

NO_ANSWER = -1


@dataclass
class SegmentView:
    """What the lookups need of one segment (a live, normal segment of one replica)."""

    base_offset: int
    largest_timestamp_ms: int | None
    """largest record timestamp (None: no timestamps in the segment)."""
    log_mtime_ms: int | None
    log_size_bytes: int | None
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp_ms: int | None = None
    log_path: str | None = None
    index_path: str | None = None
    timeindex_path: str | None = None

    @property
    def broker_largest_timestamp_ms(self) -> int | None:
        """``LogSegment.largestTimestamp()``: the max record timestamp, else the mtime."""
        if self.largest_timestamp_ms is not None and self.largest_timestamp_ms >= 0:
            return self.largest_timestamp_ms
        return self.log_mtime_ms

    @property
    def is_empty(self) -> bool:
        return not self.log_size_bytes


@dataclass
class ModernAnswer:
    offset: int | None
    """None when the broker answers -1."""
    timestamp_ms: int | None
    segment_base_offset: int | None
    reason: str
    exact: bool = True
    """False when answered from rows alone: ``offset`` is then the lower bound (segment start)."""
    upper_bound_offset: int | None = None
    position_bytes: int | None = None
    """byte position in its segment where the broker starts reading (index lookup)."""
    tier: str | None = None
    """tiered storage: 'remote' when the broker reads the answer from remote storage, 'local'
    when from the local log (None: no remote storage known)."""
    below_log_start: bool = False
    """True: -1 because the searched segment lies wholly below the log start (not yet deleted)."""


@dataclass
class LegacyAnswer:
    offset: int | None
    """None: the broker answers an empty list."""
    segment_base_offset: int | None
    mtime_ms: int | None
    reason: str


@dataclass
class ReplayPrediction:
    target_ms: int
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


# ---------------------------------------------------------------------------------------
# Legacy (v0): mtimes
# ---------------------------------------------------------------------------------------


def predict_legacy(segments: Sequence[SegmentView], target_ms: int, log_start_offset: int | None,
                   log_end_offset: int | None, now_ms: int) -> LegacyAnswer:
    """``legacyFetchOffsetsBefore(target, maxNumOffsets=1)``, as the broker computed it."""
    if not segments:
        return LegacyAnswer(None, None, None, "no segments")
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    pairs = [(max(s.base_offset, start), s.log_mtime_ms, s.base_offset) for s in segments]
    if not segments[-1].is_empty and log_end_offset is not None:
        pairs.append((log_end_offset, now_ms, None))
    for offset, mtime, base in reversed(pairs):
        if mtime is not None and mtime <= target_ms:
            if base is None:
                return LegacyAnswer(offset, segments[-1].base_offset, mtime,
                                    "target at or after the audit time: the log end offset")
            return LegacyAnswer(offset, base, mtime, f"newest segment whose .log mtime <= target is {base}")
    oldest = min((m for _, m, _ in pairs if m is not None), default=None)
    return LegacyAnswer(None, None, oldest,
                        "every segment's .log mtime is newer than the target: the broker answers an empty list")


def predict_legacy_offsets(segments: Sequence[SegmentView], target_ms: int, log_start_offset: int | None,
                           log_end_offset: int | None, now_ms: int, max_num_offsets: int = 1,
                           high_watermark: int | None = None) -> list[int]:
    """The whole ListOffsets v0 answer: ``legacyFetchOffsetsBefore(target, maxNumOffsets)``.

    The broker pairs (max(base offset, log start offset), ``.log`` mtime) per segment, plus (log end
    offset, now) when the last segment is not empty; it finds the newest pair whose mtime <= T and
    answers that pair's offset and those of up to ``max_num_offsets - 1`` older pairs, largest first
    (old clients asked for several to step back segment by segment). Empty when every mtime is
    newer than T. An ordinary consumer (replica id -1) is answered by the leader, and offsets above
    its ``high_watermark`` are replaced by the high watermark
    (``Partition.legacyFetchOffsetsForTimestamp``); None leaves them as they are (a debugging
    client, replica id -2, asks any replica and gets its answer unclamped). Proven against a real
    Kafka 3.9.1 broker in tests/test_legacy_lookup_v0.py. A segment whose mtime is unknown (None) is
    skipped (the broker would have one).
    """
    if max_num_offsets < 0:
        raise ValueError(f"max_num_offsets {max_num_offsets} < 0 (the broker fails the request)")
    if not segments:
        return []
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    pairs = [(max(s.base_offset, start), s.log_mtime_ms) for s in segments]
    if not segments[-1].is_empty and log_end_offset is not None:
        pairs.append((log_end_offset, now_ms))
    newest = len(pairs) - 1
    while newest >= 0 and (pairs[newest][1] is None or pairs[newest][1] > target_ms):
        newest -= 1
    count = min(max_num_offsets, newest + 1)
    offsets = sorted((pairs[newest - j][0] for j in range(count)), reverse=True)
    if high_watermark is not None and any(o > high_watermark for o in offsets):
        offsets = [high_watermark] + [o for o in offsets if o <= high_watermark]
    return offsets


# ---------------------------------------------------------------------------------------
# The log start offset, and whether anything was ever deleted
# ---------------------------------------------------------------------------------------

#: Where a replica's log start offset was read (named in the replay finding's evidence).
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
LOG_START_FIRST_SEGMENT = "first segment's base offset"
LOG_START_LEADER_EPOCH = "leader-epoch-checkpoint"


@dataclass
class LogStart:
    offset: int | None
    source: str | None
    """one of the ``LOG_START_*`` names (None: no segment)."""
    ever_deleted: bool | None
    """True: records below ``offset`` were deleted (retention or deleteRecords); False: the log
    still starts at offset 0, the first record ever written; None: unknown."""
    detail: str


def log_start(views: Sequence[SegmentView], checkpoint_offset: int | None,
              leader_epochs: Sequence[tuple[int, int]] | None) -> LogStart:
    """The replica's log start offset as the broker holds it, from what the disk says.

    What the broker writes where (Kafka 4.2; 3.9 the same):

    * retention deletes whole segments and moves the log start to the next segment's base offset
      (the deleted ones are renamed ``*.deleted`` at once): the **first live segment's base
      offset** says so immediately;
    * ``deleteRecords`` moves the log start *inside* a segment. The **log-start-offset-checkpoint**
      gets it only at the next checkpoint (``log.flush.start.offset.checkpoint.interval.ms``, 60 s
      by default) and only while it is above the first segment's base offset (tiered storage: always),
      so it is stale or absent for up to a minute. The broker also truncates its leader-epoch cache
      to the new log start and rewrites **leader-epoch-checkpoint** right away (asynchronously in 4.x;
      on a real 4.2.1 broker within 0.5 s), so its first entry's start offset, when above both,
      is the newer log start;
    * the cleaner (compaction) keeps base offsets and never moves the log start: a compacted
      topic's missing offsets are not deletions.

    The checkpoint, else the first segment's base offset, raised to the first leader-epoch entry
    when that is higher. A log start of 0 means nothing was ever deleted. Blind spot: a first
    segment with pre-0.11 (magic 0/1) batches has no epoch entries for them, so a deleteRecords
    inside it shows only at the next checkpoint; and such batches followed by v2 ones make the
    first entry start late, which reads as a deletion (a false alarm, never a false all-clear).
    """
    if not views and checkpoint_offset is None:
        return LogStart(None, None, None, "no live segment")
    if checkpoint_offset is not None:
        offset, source = checkpoint_offset, LOG_START_CHECKPOINT
    else:
        offset, source = views[0].base_offset, LOG_START_FIRST_SEGMENT
    detail = f"{source} says {offset}"
    if checkpoint_offset is not None and views and checkpoint_offset < views[0].base_offset:
        detail += (f", below the first segment's base offset {views[0].base_offset}: tiered storage keeps the "
                   f"records in between remotely, or the checkpoint predates a later deletion")
    epoch_start = min((o for _, o in leader_epochs), default=None) if leader_epochs else None
    if epoch_start is not None and epoch_start > offset:
        detail += (f"; the leader-epoch-checkpoint starts at {epoch_start}: the log start moved since "
                   f"(deleteRecords, retention), the checkpoint is not rewritten yet")
        offset, source = epoch_start, LOG_START_LEADER_EPOCH
    elif epoch_start is None:
        detail += "; no leader-epoch entry to tell a recent deleteRecords"
    return LogStart(offset, source, offset > 0, detail)


# ---------------------------------------------------------------------------------------
# Modern (v1+): record timestamps
# ---------------------------------------------------------------------------------------


def choose_segment(segments: Sequence[SegmentView], target_ms: int) -> SegmentView | None:
    """The first segment whose largestTimestamp >= target (only that one is searched)."""
    for seg in segments:
        largest = seg.broker_largest_timestamp_ms
        if largest is not None and largest >= target_ms:
            return seg
    return None


def _time_index_lookup(entries: Sequence[tuple[int, int]], target_ms: int, base_offset: int) -> int:
    """TimeIndex.lookup: offset of the last entry with timestamp <= target, else the base offset."""
    timestamps = [t for t, _ in entries]
    i = bisect.bisect_right(timestamps, target_ms)
    return entries[i - 1][1] if i else base_offset


def _offset_index_lookup(entries: Sequence[tuple[int, int]], target_offset: int) -> int:
    """OffsetIndex.lookup: position of the last entry with offset <= target, else 0."""
    offsets = [o for o, _ in entries]
    i = bisect.bisect_right(offsets, target_offset)
    return entries[i - 1][1] if i else 0


def _read_if_there(read, path: str | None, base_offset: int):
    """``read(path, base_offset)``, or None when there is no such file (``os.path.exists`` is False:
    asked only when the read fails, so a file that is there costs no extra stat); a file that is
    there but cannot be read raises, as the read does."""
    if not path:
        return None
    try:
        return read(path, base_offset)
    except OSError:
        if os.path.exists(path):
            raise
        return None


def search_segment(seg: SegmentView, target_ms: int, log_start_offset: int) -> ModernAnswer:
    """``LogSegment.findOffsetByTimestamp`` on the files of one segment (read-only)."""
    notes = []
    time_entries: list[tuple[int, int]] = []
    offset_entries: list[tuple[int, int]] = []
    read = _read_if_there(read_time_index, seg.timeindex_path, seg.base_offset)
    if read is not None:
        time_entries, notes = read.entries, read.problems
    read = _read_if_there(read_offset_index, seg.index_path, seg.base_offset)
    if read is not None:
        offset_entries = read.entries
        notes += read.problems
    from_time = _time_index_lookup(time_entries, target_ms, seg.base_offset)
    position = _offset_index_lookup(offset_entries, max(from_time, log_start_offset))
    reader = LogReader(seg.log_path)
    try:
        if position >= reader.size_bytes:
            position = 0
        for batch in reader.batches(position):
            if batch.max_timestamp_ms < target_ms:
                continue
            for record in reader.records(batch):
                if record.timestamp_ms >= target_ms and record.offset >= log_start_offset:
                    return ModernAnswer(record.offset, record.timestamp_ms, seg.base_offset,
                                        f"first record with timestamp >= target in segment {seg.base_offset}",
                                        position_bytes=position)
    finally:
        reader.close()
    return ModernAnswer(None, None, seg.base_offset,
                        f"segment {seg.base_offset} has largestTimestamp >= target but no record at or after it "
                        f"(past the log start offset) from byte {position}: the broker answers -1",
                        position_bytes=position)


def _below_log_start(seg: SegmentView, start: int) -> str | None:
    """Why the broker answers -1 when the segment it searches lies wholly below the log start.

    ``deleteRecords`` moves the log start at once, but the segments wholly below it stay in the
    broker's segment list until its retention check (``log.retention.check.interval.ms``, 5 min by
    default) deletes them; a time lookup picks the first segment whose largestTimestamp >= target,
    one of those, finds no record at or past the log start in it and answers -1
    (``UnifiedLog.searchOffsetInLocalLog``). Seen on a real 4.2.1 broker: a target before the data
    answered -1, and the log start once the check had run."""
    if seg.last_offset is None or seg.last_offset >= start:
        return None
    return (f"segment {seg.base_offset} (offsets up to {seg.last_offset}), the first whose largestTimestamp >= "
            f"target, lies wholly below the log start offset {start} (deleteRecords): the broker searches only "
            f"it and answers -1 until its retention check (log.retention.check.interval.ms) deletes the "
            f"segments below the log start")


def predict_modern(segments: Sequence[SegmentView], target_ms: int, log_start_offset: int | None,
                   last_fetchable_offset: int | None) -> ModernAnswer:
    """The modern answer, reading the chosen segment's files (exact)."""
    seg = choose_segment(segments, target_ms)
    if seg is None:
        return ModernAnswer(None, None, None,
                            "no segment has a record timestamp (or mtime) >= target: the broker answers -1")
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    answer = search_segment(seg, target_ms, start)
    if answer.offset is None and (below := _below_log_start(seg, start)):
        return ModernAnswer(None, None, seg.base_offset, below, position_bytes=answer.position_bytes,
                            below_log_start=True)
    if answer.offset is not None and last_fetchable_offset is not None and answer.offset >= last_fetchable_offset:
        return ModernAnswer(None, None, seg.base_offset,
                            f"offset {answer.offset} is not below the last fetchable offset {last_fetchable_offset} "
                            f"(high watermark): the broker answers -1", position_bytes=answer.position_bytes)
    return answer


def predict_modern_from_rows(segments: Sequence[SegmentView], target_ms: int,
                             log_start_offset: int | None) -> ModernAnswer:
    """Without the files: the segment the broker would search, and the offset range of its answer."""
    seg = choose_segment(segments, target_ms)
    if seg is None:
        return ModernAnswer(None, None, None, "no segment has a record timestamp (or mtime) >= target: "
                            "the broker answers -1", exact=True)
    start = log_start_offset if log_start_offset is not None else segments[0].base_offset
    below = _below_log_start(seg, start)
    if below:
        return ModernAnswer(None, None, seg.base_offset, below, exact=True, below_log_start=True)
    low = max(seg.first_offset if seg.first_offset is not None else seg.base_offset, start)
    return ModernAnswer(low, None, seg.base_offset,
                        f"in segment {seg.base_offset} (offsets {low}..{seg.last_offset}); exact offset needs the files",
                        exact=False, upper_bound_offset=seg.last_offset)


# ---------------------------------------------------------------------------------------
# From scanner rows
# ---------------------------------------------------------------------------------------


def _get(row, key):
    value = row.get(key) if isinstance(row, dict) else getattr(row, key, None)
    if value is None or (isinstance(value, float) and value != value):
        return None
    return int(value) if isinstance(value, float) else value


#: The row columns a SegmentView is made of, read in one pass per row (:func:`_values`).
_VIEW_COLUMNS = ("file_state", "log_size_bytes", "log_dir", "dir_name", "base_offset", "max_timestamp_ms",
                 "log_mtime_ms", "first_offset", "last_offset", "min_timestamp_ms", "min_batch_timestamp_ms")


def _values(row, keys: tuple) -> list:
    """``[_get(row, key) for key in keys]``, the NaN / float cleaning only for rows that hold a float
    (pandas'); plain scanner rows are read as they are."""
    values = [row.get(k) for k in keys] if isinstance(row, dict) else [getattr(row, k, None) for k in keys]
    if any(isinstance(v, float) for v in values):
        return [_get(row, k) for k in keys]
    return values


def segment_views(rows: Iterable) -> list[SegmentView]:
    """Live, normal segments of one replica (one partition dir), in base-offset order."""
    views = []
    dirs: dict[tuple, str] = {}
    for row in rows:
        (state, size, log_dir, dir_name, base, largest, mtime, first, last, min_ts,
         min_batch_ts) = _values(row, _VIEW_COLUMNS)
        if state is not None or size is None:
            continue
        where = (log_dir or "", dir_name or "")
        directory = dirs.get(where)
        if directory is None:  # one Path per partition dir, not three per segment
            directory = dirs[where] = _dir_prefix(Path(where[0]) / where[1])
        base = int(base)
        name = f"{directory}{base:020d}"
        views.append(SegmentView(
            base_offset=base,
            largest_timestamp_ms=largest,
            log_mtime_ms=mtime,
            log_size_bytes=size,
            first_offset=first,
            last_offset=last,
            min_timestamp_ms=min_ts if min_ts is not None else min_batch_ts,
            log_path=f"{name}.log",
            index_path=f"{name}.index",
            timeindex_path=f"{name}.timeindex",
        ))
    return sorted(views, key=lambda v: v.base_offset)


def _dir_prefix(directory: Path) -> str:
    """What ``str(directory / name)`` puts before a plain file name: '' for '.', else the path and
    a separator (none after a root)."""
    text = str(directory)
    if text == ".":
        return ""
    return text if text.endswith("/") else text + "/"


def predict(views: Sequence[SegmentView], target_ms: int, *, log_start_offset: int | None,
            log_end_offset: int | None, high_watermark: int | None, now_ms: int,
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
            modern = predict_modern(views, target_ms, lso, fetchable)
        except (OSError, FormatError) as exc:
            notes.append(f"cannot read the segment to search ({exc}); answered from the segment rows")
            modern = predict_modern_from_rows(views, target_ms, lso)
    else:
        modern = predict_modern_from_rows(views, target_ms, lso)
    legacy = predict_legacy(views, target_ms, lso, log_end_offset, now_ms)
    # segments wholly below the log start (not yet deleted by the retention check) hold no retained record
    stamped_min = [v.min_timestamp_ms for v in views if v.min_timestamp_ms is not None
                   and (lso is None or v.last_offset is None or v.last_offset >= lso)]
    stamped_max = [v.largest_timestamp_ms for v in views if v.largest_timestamp_ms is not None]
    oldest = min(stamped_min) if stamped_min else None
    newest = max(stamped_max) if stamped_max else None
    tiers, unknown = None, []
    if remote is not None and lso is not None:
        modern, oldest, newest, tiers, unknown = _with_remote(
            views, target_ms, remote, lso, log_end_offset, fetchable, leader_epochs or [], remote_storage_dir,
            read_files, modern, oldest, newest, notes)
    elif views and lso is not None and lso < views[0].base_offset:
        # a log start below the first local segment: tiered storage keeps the records in between
        # remotely (or the checkpoint predates a deletion), and nothing here says which
        modern, oldest, newest, tiers, unknown = _remote_unknown(views, lso, log_end_offset, modern)
    return ReplayPrediction(
        target_ms=target_ms, modern=modern, legacy=legacy, log_start_offset=lso, log_end_offset=log_end_offset,
        oldest_timestamp_ms=oldest, newest_timestamp_ms=newest, segments=len(views), notes=notes,
        tiers=tiers, unknown=unknown,
    )


def bytes_between(views: Sequence[SegmentView], from_offset: int | None, from_position: int | None,
                  to_offset: int | None, to_position: int | None) -> int | None:
    """Bytes a consumer reads from one answer to another (segment granularity, plus the index
    positions inside the first and last segment when known)."""
    if from_offset is None or to_offset is None or to_offset <= from_offset:
        return 0 if from_offset is not None and to_offset is not None else None

    def seg_index(offset):
        bases = [v.base_offset for v in views]
        return max(bisect.bisect_right(bases, offset) - 1, 0)

    a, b = seg_index(from_offset), seg_index(to_offset)
    if a == b:
        return max((to_position or 0) - (from_position or 0), 0)
    total = (views[a].log_size_bytes or 0) - (from_position or 0)
    total += sum(v.log_size_bytes or 0 for v in views[a + 1:b])
    total += to_position or 0
    return max(total, 0)


def ideal_offset(views: Sequence[SegmentView], target_ms: int) -> tuple[int | None, int | None]:
    """Where a replay to T 'should' start if timestamps grew with offsets: the start of the last
    segment whose oldest record is at or before T (segment granularity). (offset, segment index)"""
    best = None
    for i, v in enumerate(views):
        if v.min_timestamp_ms is not None and v.min_timestamp_ms <= target_ms:
            best = i
    if best is None:
        return (views[0].base_offset, 0) if views else (None, None)
    return views[best].base_offset, best


# ---------------------------------------------------------------------------------------
# Consumer groups: what `kafka-consumer-groups --reset-offsets --to-datetime T` sets
# ---------------------------------------------------------------------------------------


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


def offset_position(views: Sequence[SegmentView], offset: int | None) -> tuple[int | None, bool]:
    """(byte position of the batch holding ``offset`` in its segment, exact?). Reads the segment's
    offset index and walks batches from there (read-only); without files, the segment start."""
    return offset_positions(views, [offset])[0]


def offset_positions(views: Sequence[SegmentView], offsets: Sequence[int | None]) -> list[tuple[int | None, bool]]:
    """:func:`offset_position` of each offset; offsets in one segment share its index read and
    its reader (a group reset asks for the committed offset's and the reset's)."""
    out: list = [None] * len(offsets)
    by_segment: dict[int, list[int]] = {}
    bases = [v.base_offset for v in views]
    for k, offset in enumerate(offsets):
        if offset is None or not views:
            out[k] = (None, False)
            continue
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            out[k] = (0, True)
            continue
        seg = views[i]
        last = seg.last_offset
        if last is not None and offset > last:
            # past the last batch of this segment: its end (the log end offset, or a gap before the next)
            out[k] = (seg.log_size_bytes, seg.log_size_bytes is not None)
        elif not seg.log_path:
            out[k] = (0, False)
        else:
            by_segment.setdefault(i, []).append(k)
    for i, ks in by_segment.items():
        _positions_in(views[i], [(k, offsets[k]) for k in ks], out)
    return out


def _positions_in(seg: SegmentView, wanted: list[tuple[int, int]], out: list) -> None:
    """out[k] = (position, exact) of each (k, offset) of one segment: its .log opened once (absent or
    unreadable: (0, False)), its offset index read once (absent or unreadable: from byte 0)."""
    try:
        reader = LogReader(seg.log_path)
    except OSError:
        for k, _ in wanted:
            out[k] = (0, False)
        return
    try:
        try:
            read = _read_if_there(read_offset_index, seg.index_path, seg.base_offset)
            entries = read.entries if read is not None else []
        except (OSError, FormatError):
            entries = []
        for k, offset in wanted:
            start = _offset_index_lookup(entries, offset)
            if start >= reader.size_bytes:
                start = 0
            for batch in reader.batches(start):
                if batch.last_offset >= offset:
                    out[k] = (batch.position, True)
                    break
            else:
                out[k] = (reader.stop_position, reader.stop_reason is None)
    finally:
        reader.close()


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


# ---------------------------------------------------------------------------------------
# Tiered storage (KIP-405): the remote lookup first, then the local log
# ---------------------------------------------------------------------------------------


def _local_search(views: Sequence[SegmentView], target_ms: int, start: int | None, fetchable: int | None,
                  read_files: bool) -> ModernAnswer:
    if read_files:
        return predict_modern(views, target_ms, start, fetchable)
    return predict_modern_from_rows(views, target_ms, start)


def predict_modern_tiered(views: Sequence[SegmentView], target_ms: int, remote, *, log_start_offset: int,
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
    choice = remote_lookup.find_remote_segment(remote, target_ms, log_start_offset, leader_epochs, leo, first_local)
    if choice.search == "remote":
        seg = choice.segment
        files = remote_storage.remote_segment_files(remote_storage_dir, seg) if remote_storage_dir else None
        if files is not None and read_files and not choice.candidates:
            view = SegmentView(base_offset=seg.start_offset, largest_timestamp_ms=seg.max_timestamp_ms, log_mtime_ms=None,
                               log_size_bytes=seg.size_bytes, first_offset=seg.start_offset, last_offset=seg.end_offset,
                               log_path=files.log_path, index_path=files.index_path, timeindex_path=files.timeindex_path)
            found = search_segment(view, target_ms, log_start_offset)
            if found.offset is not None:
                found.reason = (f"first record with timestamp >= target in remote segment {seg.segment_id} "
                                f"(offsets {seg.start_offset}..{seg.end_offset}), read from the remote storage dir")
                found.tier = "remote"
                return found
            local = _local_search(views, target_ms, local_start, fetchable, read_files)
            local.reason = (f"remote segment {seg.segment_id} holds no record at or after the target past the log "
                            f"start offset; the broker then searches the local log: {local.reason}")
            local.tier = "local"
            return local
        return _remote_range(choice, log_start_offset, remote_storage_dir)
    if choice.search == "local":
        seg = choose_segment(views, target_ms)
        if seg is not None:
            found = _local_search([seg], target_ms, log_start_offset, fetchable, read_files)
            if found.offset is not None or not found.exact:
                found.reason = f"{choice.reason}: {found.reason}"
                found.tier = "local"
                return found
    local = _local_search(views, target_ms, local_start, fetchable, read_files)
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


def _with_remote(views, target_ms, remote, lso, log_end_offset, fetchable, leader_epochs, remote_storage_dir,
                 read_files, modern, oldest, newest, notes):
    unknown = [f"__remote_log_metadata is incomplete for this partition: {u}" for u in remote.unknown]
    if remote.finished():
        try:
            modern = predict_modern_tiered(views, target_ms, remote, log_start_offset=lso, leader_epochs=leader_epochs,
                                           log_end_offset=log_end_offset, fetchable=fetchable,
                                           remote_storage_dir=remote_storage_dir, read_files=read_files)
        except (OSError, FormatError) as exc:
            notes.append(f"cannot read a remote segment's files ({exc}); answered from the remote metadata")
            modern = predict_modern_tiered(views, target_ms, remote, log_start_offset=lso, leader_epochs=leader_epochs,
                                           log_end_offset=log_end_offset, fetchable=fetchable, read_files=read_files)
        rmax = remote.max_timestamp_ms
        newest = rmax if newest is None else max(newest, rmax)
        held = [s for s in remote.finished() if s.end_offset >= lso]
        if held and (not views or held[0].start_offset < views[0].base_offset):
            # the oldest retained record is in remote storage
            try:
                exact = remote_oldest_timestamp(remote, lso, remote_storage_dir)
            except (OSError, FormatError) as exc:
                notes.append(f"cannot read the oldest remote segment's records ({exc})")
                exact = None
            oldest = exact
            if exact is None and lso > 0 and target_ms <= held[0].max_timestamp_ms:
                unknown.append(
                    f"records below the log start offset {lso} were deleted, and the oldest retained one is in "
                    f"remote segment {held[0].segment_id} (offsets {held[0].start_offset}..{held[0].end_offset}, "
                    f"newest record {held[0].max_timestamp_ms} ms); whether a deleted record was at or after the "
                    f"target needs that segment's own timestamps, in remote storage (give its directory)")
    elif views and lso < views[0].base_offset:
        modern, oldest, newest, _, more = _remote_unknown(views, lso, log_end_offset, modern)
        unknown += more
    if unknown and modern.exact and modern.tier == "remote":
        modern.exact = False
        modern.upper_bound_offset = modern.offset
    return modern, oldest, newest, tier_summary(views, remote, lso, log_end_offset), unknown


def _remote_unknown(views, lso, log_end_offset, modern):
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
    return answer, None, None, tier_summary(views, None, lso, log_end_offset), unknown


# ---------------------------------------------------------------------------------------
# One partition's replicas: the search the pipeline runs before the checks (checks/safety.py
# is handed the result and never reads a file)
# ---------------------------------------------------------------------------------------


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


def tiers_text(e: dict, remote_unknown: str = "remote: not known") -> str | None:
    """A replay evidence's tiered-storage ranges for people (report and replay-check): the local
    offsets and bytes, the remote ones, whether anything was ever deleted; None without tiers."""
    if e.get("local_start_offset") is None and not e.get("remote_segments"):
        return None
    start, end = e.get("local_start_offset"), e.get("local_end_offset")
    if start is None:
        local = "local: none"
    elif end is None or end <= start:  # every local segment deleted after its upload: the active one is empty
        local = f"local: no record (from offset {start})"
    else:
        local = f"local {start}..{end - 1} ({human_bytes(e.get('local_bytes') or 0)})"
    remote = (f"remote {e['remote_start_offset']}..{e['remote_end_offset']} ({human_bytes(e.get('remote_bytes') or 0)}, "
              f"{e['remote_segments']} segments)" if e.get("remote_segments") else remote_unknown)
    return f"{local}; {remote}; {e.get('deleted') or 'deletions unknown'}"


def predict_replicas(topic: str, partition: int, segments, partitions, ctx, *,
                     search_files: bool) -> list[ReplicaPrediction]:
    """Both answers for every live replica of one topic-partition, the most complete replica
    (highest log end offset) first; [] when no live segment was scanned.

    ``segments`` / ``partitions``: the partition's rows, as the checks get them (pandas) or as
    plain dicts (replay-check: no pandas); ``ctx``: the audit context (``replay_at_ms``, ``now_ms``, tiered storage: ``remote_partition``, ``remote_storage_dir``). ``search_files``: read
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
                       now_ms=ctx.now_ms, read_files=search_files,
                       remote=ctx.remote_partition(topic, partition, prow.get("topic_id") if prow else None),
                       leader_epochs=epoch_starts(prow),
                       remote_storage_dir=ctx.remote_storage_dir if search_files else None)
        pred.log_start = start
        out.append(ReplicaPrediction(broker, log_dir, views, pred))
    out.sort(key=lambda r: (-(r.prediction.log_end_offset or -1), r.broker_id if r.broker_id is not None else 1 << 30))
    return out
