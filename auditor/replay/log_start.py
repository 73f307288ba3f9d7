"""The log start offset of a replica as the broker holds it, and whether records were ever
deleted below it, from what the disk says (:func:`log_start`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from auditor.replay.views import SegmentView

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
