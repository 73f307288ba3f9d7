"""KLA010 replay.safety: what a consumer rewound to a target time really gets, per partition.

What it checks:
    For every partition of the topics asked (``kafka-audit audit --at T --topic ...`` or
    ``replay-check``), the answer the broker would give to a seek to T, with both lookups
    (``auditor.replay``): the modern one (record timestamps and the time index; exact when the
    segment files are readable, else bounded from the segment rows) and the legacy v0 one
    (segment ``.log`` mtimes). It flags: (a) the oldest retained record is newer than T (the
    replay silently starts later than asked); (b) the legacy lookup answers nothing (every
    mtime is newer than T) or lands far before T; (c) T is after the newest record (the modern
    answer is -1), or the broker answers -1 before it (the segment it searches lies wholly below
    a ``deleteRecords``' log start until its retention check deletes it); (d) the modern seek
    lands far before T because a stray future or outlier timestamp in an older segment makes the
    broker pick that segment.
    A target before the oldest record is a gap only when records were deleted: when the replica
    still starts at offset 0 (a topic younger than the target, or a compacted one: the cleaner
    never moves the log start) the seek lands on the first record ever written and nothing is
    missed: INFO "the topic's data begins after the target". The log start offset is the
    log-start-offset-checkpoint's, else the first segment's base offset, raised to the first
    leader-epoch-checkpoint entry when that is higher (a deleteRecords the checkpoint, rewritten
    every minute, does not show yet; ``auditor.replay.log_start``); the evidence names the source.

Why it matters:
    (a) loses [T, oldest) without an error: retention already deleted it. (b) old clients
    (storm-kafka, SimpleConsumer code) crash on an empty answer (ArrayIndexOutOfBounds,
    UpdateOffsetException), and one such partition breaks a whole multi-partition replay; when
    it lands early they re-read whole segments. (c) the broker answers -1: the Java consumer's
    ``offsetsForTimes`` returns null for that partition, so replay code that calls ``.offset()``
    on the result throws a NullPointerException (the modern twin of the legacy empty-list
    crash); a consumer without a position falls back to ``auto.offset.reset`` (earliest:
    everything again; latest: nothing); ``kafka-consumer-groups --reset-offsets --to-datetime``
    warns that the partition is empty and sets it to the log end offset (ConsumerGroupCommand
    asks the latest offset for every partition whose timestamp lookup found none). (d) a replay
    re-processes everything between the stray record and T.

Example finding:
    FAIL orders-3: oldest retained record 2024-05-02T00:00:00Z is 26.0 h after the target
    2024-04-30T22:00:00Z: a replay from the target misses about 3.1 GiB (retention deleted it);
    modern answer 0 (the log start), legacy answer: empty list (every .log mtime is newer).

How to fix:
    Pick a target at or after the oldest retained record (shown per partition), or restore the
    data from a backup; raise ``retention.ms`` of the topic before the next replay window. For
    legacy clients, seek by offset (the modern answer in the evidence) instead of by time. For
    a -1 answer, make replay code test each ``offsetsForTimes`` entry for null before calling
    ``.offset()`` (seek that partition to its end, or to an offset chosen by hand). For stray
    timestamps, seek by offset, and find the producer writing them (the timestamps check).

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, Severity, non_negative, severity_option
from auditor import replay
from auditor.units import human_bytes, human_duration, iso_utc


#: Shortest retained time span whose byte rate is used to estimate the bytes of a gap.
MIN_RATE_SPAN_MS = 3_600_000


#: What a -1 answer does to the clients that see it (ConsumerGroupCommand.getLogTimestampOffsets:
#: a partition whose timestamp lookup found nothing is reset to its latest offset).
NULL_ANSWER = ("the Java consumer's offsetsForTimes returns null for this partition (replay code calling .offset() "
               "on it throws NullPointerException), a consumer without a position falls back to auto.offset.reset, "
               "and kafka-consumer-groups --reset-offsets --to-datetime warns the partition is empty and resets it "
               "to the log end offset")

#: The fix for a -1 answer, before the general one.
NULL_FIX = ("Test each offsetsForTimes entry for null before calling .offset() (seek that partition to its end, or to "
            "an offset chosen by hand); kafka-consumer-groups --to-datetime sets such a partition to its log end offset. ")


def _never_deleted(pred) -> bool:
    """The replica still starts at offset 0: nothing was ever deleted (retention, deleteRecords)."""
    return pred.log_start is not None and pred.log_start.ever_deleted is False


def _gap_problem(pred, target: int, main: dict, opts, cleanup_policy: str | None) -> tuple[Severity, str] | None:
    """(a): the oldest record is newer than the target. A gap (FAIL) only when records were deleted;
    when the replica still starts at offset 0 (a young topic, or a compacted one) the seek lands on
    the first record ever written: INFO."""
    if pred.oldest_timestamp_ms is None or pred.oldest_timestamp_ms <= target:
        return None
    after = f"{iso_utc(pred.oldest_timestamp_ms)} is {human_duration(pred.oldest_timestamp_ms - target)} after"
    if _never_deleted(pred):
        compacted = "; compaction removes superseded records, not time ranges" if "compact" in (cleanup_policy or "") else ""
        return (Severity.INFO,
                f"the topic's data begins after the target: its oldest record {after} it and nothing was ever "
                f"deleted (log start offset 0, from the {pred.log_start.source}{compacted}): a replay from the target "
                f"reads every record from the first one on")
    deleted = (f" below log start offset {pred.log_start.offset} (from the {pred.log_start.source})"
               if pred.log_start is not None and pred.log_start.ever_deleted else "")
    return (Severity.parse(opts["gap_severity"]),
            f"oldest retained record {after} the target: a replay from the target misses [target, oldest)"
            + (f", about {human_bytes(main['gap_bytes'])}" if main["gap_bytes"] else "")
            + f" (retention or deleteRecords deleted it{deleted})")


def _legacy_problems(replicas: "list[replay.ReplicaPrediction]", main: dict, opts) -> list[tuple[Severity, str]]:
    """(b): the legacy (v0) lookup answers nothing on some replica, or lands far before the target
    (judged on the first replica, the most complete)."""
    problems = []
    empty = [r for r in replicas if r.prediction.legacy.offset is None]
    if empty:
        where = ", ".join(f"broker {r.broker_id} {r.log_dir}" for r in empty)
        problems.append((Severity.parse(opts["legacy_empty_severity"]),
                         f"legacy (v0) lookup answers an empty list on {where}: every .log mtime is newer "
                         f"than the target; old clients crash"))
    redundant = main["redundant_bytes_legacy"]
    if redundant is not None and redundant > opts["legacy_redundant_bytes"]:
        problems.append((Severity.WARN, f"legacy (v0) lookup lands at offset {replicas[0].prediction.legacy.offset}, "
                                        f"{human_bytes(redundant)} before the target's position"))
    return problems


#: The lookups a replay can be judged on (the ``api`` option, ``replay-check --api``).
LOOKUP_APIS = ("modern", "legacy", "both")


def _api_name(v) -> bool:
    return v in LOOKUP_APIS



class ReplaySafety(Check):
    code = "KLA010"
    name = "replay.safety"
    title = "Replay safety at the target time"
    scope = "partition"
    options = {
        "api": Option("both", "which lookups to judge: modern, legacy or both", str, _api_name, "modern | legacy | both"),
        "gap_severity": severity_option("FAIL", "severity when the oldest retained record is newer than the target"),
        "legacy_empty_severity": severity_option("FAIL", "severity when the legacy lookup answers nothing"),
        "after_newest_severity": severity_option("FAIL", "severity when the broker answers -1 (the target is after "
                                                         "the newest record, or the segment it searches lies wholly "
                                                         "below the log start)"),
        "legacy_redundant_bytes": Option(1 << 30, "WARN when the legacy answer re-reads more bytes than this", int, non_negative, ">= 0"),
        "modern_redundant_bytes": Option(100 << 20, "WARN when the modern answer lands this many bytes early", int, non_negative, ">= 0"),
        "read_files": Option(True, "the pipeline reads the chosen segment for the exact offset before the check runs "
                                   "and hands it the result (the check itself reads no file); false: rows only", bool),
    }

    def run(self, data: CheckInput, ctx, opts):
        if not ctx.wants_replay(data.topic):
            return []
        target = ctx.replay_at_ms
        found = data.replay
        if found is None:  # not searched by the pipeline: answer from the rows alone, read nothing
            found = replay.predict_replicas(data.topic, data.partition, data.segments, data.partitions, ctx,
                                            search_files=False)
        if not found:
            return [self.finding("WARN", f"no live segment of {data.topic}-{data.partition} to predict a replay from",
                                 "Scan the brokers that host this partition.", topic=data.topic, partition=data.partition)]
        main_replica = found[0]  # the most complete replica (highest log end offset)
        broker, log_dir, views, pred = (main_replica.broker_id, main_replica.log_dir, main_replica.views,
                                        main_replica.prediction)
        problems: list[tuple[Severity, str]] = []
        api = opts["api"]
        evidence = [self._evidence(main_replica)]
        main = evidence[0]
        if api in ("modern", "both"):
            problems += _modern_problems(pred, views, target, main, opts, ctx.kafka_setting(data.topic, "cleanup.policy"))
        if api in ("legacy", "both"):
            problems += _legacy_problems(found, main, opts)
        evidence += [self._evidence(r) for r in found[1:]]
        thresholds = {k: opts[k] for k in self.options}
        thresholds["replay_at_ms"] = target
        location = dict(topic=data.topic, partition=data.partition, broker_id=broker, log_dir=log_dir)
        answers = (f"modern answer {pred.modern.offset if pred.modern.offset is not None else -1}"
                   f"{'' if pred.modern.exact else _inexact(pred.modern)}")
        if api in ("legacy", "both"):
            answers += f", legacy answer {pred.legacy.offset if pred.legacy.offset is not None else 'empty'}"
        if not problems:
            return [self.finding(Severity.PASS, f"replay to {iso_utc(target)} is safe: {answers}",
                                 thresholds=thresholds, evidence=evidence, **location)]
        worst = max(s for s, _ in problems)
        message = "; ".join(m for _, m in problems) + f" ({answers})"
        fix = ("Choose a target at or after the oldest retained record, or restore the missing range; seek legacy "
               "clients by offset (the modern answer) instead of by time; see the evidence per replica.")
        if api in ("modern", "both") and pred.modern.offset is None and (pred.modern.exact or pred.modern.below_log_start):
            fix = NULL_FIX + fix
        return [self.finding(worst, message, fix, thresholds=thresholds, evidence=evidence, **location)]

    @staticmethod
    def _evidence(replica: "replay.ReplicaPrediction") -> dict:
        broker, log_dir, views, pred = replica.broker_id, replica.log_dir, replica.views, replica.prediction
        target = pred.replay_at_ms
        span_bytes = sum(v.log_size_bytes or 0 for v in views)
        gap_ms = (pred.oldest_timestamp_ms - target) if (pred.oldest_timestamp_ms or 0) > target else 0
        if _never_deleted(pred):
            gap_ms = 0  # the data begins after the target: nothing before it was ever deleted
        gap_bytes = None
        retained_ms = (pred.newest_timestamp_ms or 0) - (pred.oldest_timestamp_ms or 0)
        if gap_ms and retained_ms >= min(gap_ms, MIN_RATE_SPAN_MS):
            # estimated at the retained data's own byte rate, only when that rate was measured over a
            # span long enough to mean something (not minutes extrapolated to days)
            gap_bytes = int(span_bytes * gap_ms / retained_ms)
        ideal, _ = replay.ideal_offset(views, target)
        modern = pred.modern
        redundant_modern = None
        if modern.offset is not None and ideal is not None and modern.offset < ideal and modern.tier != "remote":
            redundant_modern = replay.bytes_between(views, modern.offset, modern.position_bytes, ideal, 0)
        redundant_legacy = None
        if pred.legacy.offset is not None:
            to = modern.offset if modern.offset is not None else ideal
            to_pos = modern.position_bytes if modern.offset is not None else 0
            if to is not None:
                redundant_legacy = replay.bytes_between(views, pred.legacy.offset, 0, to, to_pos)
        return {
            "replay_at_ms": target,
            "oldest_timestamp_ms": pred.oldest_timestamp_ms,
            "newest_timestamp_ms": pred.newest_timestamp_ms,
            "log_start_offset": pred.log_start_offset,
            "log_end_offset": pred.log_end_offset,
            "modern_offset": modern.offset,
            "modern_timestamp_ms": modern.timestamp_ms,
            "modern_exact": modern.exact,
            "modern_segment": modern.segment_base_offset,
            "modern_reason": modern.reason,
            "modern_upper_offset": modern.upper_bound_offset,
            "modern_tier": modern.tier,
            "legacy_offset": pred.legacy.offset,
            "legacy_segment": pred.legacy.segment_base_offset,
            "legacy_reason": pred.legacy.reason,
            "gap_ms": gap_ms,
            "gap_bytes": gap_bytes,
            "redundant_bytes_modern": redundant_modern,
            "redundant_bytes_legacy": redundant_legacy,
            "broker_id": broker,
            "log_dir": log_dir,
            "notes": pred.notes,
            "log_start_source": pred.log_start.source if pred.log_start is not None else None,
            "log_start_detail": pred.log_start.detail if pred.log_start is not None else None,
            "records_ever_deleted": pred.log_start.ever_deleted if pred.log_start is not None else None,
            "unknown": pred.unknown,
            **_tier_evidence(pred),
        }


#: Tiered-storage evidence keys (auditor.replay.tier_summary), None when no remote storage is known.
TIER_KEYS = ("local_start_offset", "local_end_offset", "local_bytes", "local_segments", "remote_segments",
             "remote_start_offset", "remote_end_offset", "remote_bytes", "remote_segments_deleted",
             "remote_bytes_deleted", "remote_copies_in_progress", "remote_partition_delete_state", "ever_deleted",
             "deleted")


def _tier_evidence(pred) -> dict:
    tiers = pred.tiers or {}
    return {k: tiers.get(k) for k in TIER_KEYS}


def _inexact(modern) -> str:
    if modern.tier == "remote" and modern.upper_bound_offset is not None:
        return f" (between {modern.offset} and {modern.upper_bound_offset}: in remote storage)"
    return " (lower bound, files not read)"


def _modern_problems(pred, views, target: int, main: dict, opts, cleanup_policy) -> list[tuple[Severity, str]]:
    """What is wrong with the modern (record timestamp) answer: unknown tiers, a gap, -1, an early landing."""
    problems: list[tuple[Severity, str]] = []
    if pred.unknown:  # tiered storage: say what cannot be known, never guess PASS or FAIL
        problems.append((Severity.WARN, "cannot tell: " + "; ".join(pred.unknown)))
    gap = _gap_problem(pred, target, main, opts, cleanup_policy)
    if gap is not None:
        problems.append(gap)
    if pred.modern.offset is None and pred.modern.exact and pred.newest_timestamp_ms is None:
        problems.append((Severity.parse(opts["after_newest_severity"]),
                         f"the partition holds no record: the broker answers -1: {NULL_ANSWER}"))
    elif pred.modern.offset is None and pred.modern.below_log_start:
        problems.append((Severity.parse(opts["after_newest_severity"]),
                         f"the broker answers -1: {pred.modern.reason}; {NULL_ANSWER}, skipping every record "
                         f"(wait for the retention check, then check again)"))
    elif pred.modern.offset is None and pred.modern.exact and target > pred.newest_timestamp_ms:
        problems.append((Severity.parse(opts["after_newest_severity"]),
                         f"target is after the newest record ({iso_utc(pred.newest_timestamp_ms)}): the broker "
                         f"answers -1: {NULL_ANSWER}"))
    early = main["redundant_bytes_modern"]
    if early is not None and early > opts["modern_redundant_bytes"]:
        problems.append((Severity.WARN,
                         f"the modern seek lands {human_bytes(early)} before the target's position: segment "
                         f"{pred.modern.segment_base_offset} holds a record stamped "
                         f"{iso_utc(views[[v.base_offset for v in views].index(pred.modern.segment_base_offset)].largest_timestamp_ms)}"
                         f" (a stray future or outlier timestamp)"))
    return problems
