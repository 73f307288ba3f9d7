"""What a broker answers when a consumer seeks a partition to a time: both APIs, predicted.

Two lookups (docs/kafka-format-notes.md, "Time lookups"), a module each:

* **modern** (``modern``; ListOffsets v1+, ``offsetsForTimes``): Kafka 4.2 ``UnifiedLog.fetchOffsetByTimestamp``
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

* **legacy** (``legacy``; ListOffsets v0, removed from brokers in 4.0 but still what old clients ask of
  older brokers): ``UnifiedLog.legacyFetchOffsetsBefore``: pairs (max(base offset, log start
  offset), ``.log`` mtime) per segment, plus (log end offset, now) when the last segment is not
  empty; the answer is the offset of the newest pair whose mtime <= T, or **nothing** when every
  mtime is newer than T (old clients crash on the empty answer). With max offsets > 1 the broker
  answers older pairs' offsets too (:func:`predict_legacy_offsets`). Both are proven equal to a
  real Kafka 3.9.1 broker's v0 answers (tests/test_legacy_lookup_v0.py, moves included).

Beside them: ``remote`` (tiered storage: the broker's remote-then-local lookup), ``log_start``
(the log start offset and whether anything was ever deleted), ``views`` (the segments a lookup
sees, from scanner rows), ``positions`` (byte positions and bytes between answers),
``prediction`` (both answers per replica and per partition: :func:`predict`,
:func:`predict_replicas`), ``groups`` (what a consumer group's reset to a time sets),
``rows`` (the asked topics' rows, scanned) and ``protocol`` (the same answers asked of a live
cluster).

The exact modern answer needs the records of one segment: :func:`predict` with ``read_files``
reads that segment (read-only, through ``auditor.formats``); without, it answers from segment
rows alone (manifests, no disk access): which segment, and offset bounds.
"""

from auditor.replay.groups import GroupReset, group_reset
from auditor.replay.legacy import LegacyAnswer, predict_legacy, predict_legacy_offsets
from auditor.replay.log_start import (LOG_START_CHECKPOINT, LOG_START_FIRST_SEGMENT, LOG_START_LEADER_EPOCH, LogStart,
                                      log_start)
from auditor.replay.modern import (ModernAnswer, choose_segment, predict_modern, predict_modern_from_rows,
                                   search_segment)
from auditor.replay.positions import bytes_between, ideal_offset, offset_position, offset_positions
from auditor.replay.prediction import ReplayPrediction, ReplicaPrediction, epoch_starts, predict, predict_replicas
from auditor.replay.remote import predict_modern_tiered, remote_oldest_timestamp, tier_summary
from auditor.replay.views import SegmentView, segment_views

__all__ = [
    "GroupReset", "group_reset", "LegacyAnswer", "predict_legacy", "predict_legacy_offsets", "LOG_START_CHECKPOINT",
    "LOG_START_FIRST_SEGMENT", "LOG_START_LEADER_EPOCH", "LogStart", "log_start", "ModernAnswer", "choose_segment",
    "predict_modern", "predict_modern_from_rows", "search_segment", "bytes_between", "ideal_offset", "offset_position",
    "offset_positions", "ReplayPrediction", "ReplicaPrediction", "epoch_starts", "predict", "predict_replicas",
    "predict_modern_tiered", "remote_oldest_timestamp", "tier_summary", "SegmentView", "segment_views",
]
