"""KLA061 groups.time_to_loss: a lagging group's unread records sit in segments time retention deletes soon.

What it checks:
    For every consumer group with a committed offset on the partition, the segments of each
    live replica that still hold records the group has not read (``last_offset >=`` the
    committed offset) and that time retention will delete within ``warn_hours``: the broker
    deletes the oldest closed segments whose largest timestamp is older than ``retention.ms``
    (in order: a segment goes when it and every older one are due, so its deletion time is the
    largest of ``largestTimestamp + retention.ms`` over it and the segments before it; the
    active segment is never deleted by time). The finding gives the **time to data loss** (when
    the first unread segment goes) and the **bytes at risk** (the unread segments due within the
    window; the first one counted whole, so an upper bound).

Why it matters:
    A stopped or slow consumer does not fail: it lags. Once retention deletes records it has
    not read, they are gone for it (see KLA060), and nothing warns before. This is the warning:
    how long is left, and how much would be lost.

Example finding:
    WARN orders-0 (broker 1): group 'billing' (committed offset 120) loses unread records in
    3.2 h (2024-03-10T03:12:00Z): 2 segment(s), 1.9 GiB, due for time retention (retention.ms
    7.0 d).

How to fix:
    Restart or scale the consumer group so it catches up; or raise the topic's ``retention.ms``
    (``kafka-configs --alter --add-config retention.ms=...``) until it has; or copy the range out
    first if it must be kept.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from auditor.units import human_bytes, iso_utc
from checks.framework.base import Check, CheckInput, Option, frame_records, live_replicas, non_negative, opt_int
from checks.retention.future_timestamp import largest_timestamp

HOUR_MS = 3_600_000


def deletion_times(rows, retention_ms: int) -> list[int | None]:
    """Per segment (base-offset order): when time retention deletes it (None: never, the active
    segment or a segment after one without a timestamp)."""
    out: list[int | None] = []
    running: int | None = None
    blocked = False
    for r in rows:
        ts = largest_timestamp(r)
        if r["is_active"] or ts is None or blocked:
            blocked = True
            out.append(None)
            continue
        due = ts + retention_ms
        running = due if running is None else max(running, due)
        out.append(running)
    return out


class GroupTimeToLoss(Check):
    code = "KLA061"
    name = "groups.time_to_loss"
    title = "Lagging consumer groups: time to data loss"
    scope = "partition"
    identity = ("topic", "partition", "broker_id", "log_dir", "evidence.group")
    options = {
        "warn_hours": Option(24.0, "report groups that lose unread records within this many hours", float, non_negative, ">= 0"),
        "fail_hours": Option(1.0, "FAIL instead of WARN within this many hours (or when already overdue)", float, non_negative, ">= 0"),
    }

    def prefilter(self, batch, ctx):
        """Partitions a consumer group committed on: the others have nothing to compare."""
        return batch.groups_of((c["topic"], c["partition"]) for c in ctx.group_offsets)

    def run(self, data: CheckInput, ctx, opts):
        commits = ctx.commits_on(data.topic, data.partition)
        retention = ctx.kafka_int(data.topic, "retention.ms")
        policy = ctx.kafka_setting(data.topic, "cleanup.policy") or "delete"
        if not commits or retention is None or retention < 0 or "delete" not in policy:
            return []
        as_of_ms = ctx.as_of_ms
        warn_until = as_of_ms + opts["warn_hours"] * HOUR_MS
        fail_until = as_of_ms + opts["fail_hours"] * HOUR_MS
        out = []
        for broker, log_dir, frame in live_replicas(data.segments):
            rows = frame_records(frame)
            due = deletion_times(rows, retention)
            for c in commits:
                committed = c["committed_offset"]
                if committed is None:
                    continue
                at_risk = []
                for r, d in zip(rows, due):
                    last = opt_int(r.get("last_offset"))
                    if d is None or d > warn_until:
                        break
                    if last is not None and last >= committed:
                        at_risk.append((r, d))
                if not at_risk:
                    continue
                first_due = at_risk[0][1]
                size = sum(opt_int(r["log_size_bytes"]) or 0 for r, _ in at_risk)
                severity = "FAIL" if first_due <= fail_until else "WARN"
                left = first_due - as_of_ms
                when = (f"in {left / HOUR_MS:.1f} h ({iso_utc(first_due)})" if left > 0
                        else f"now: already due since {iso_utc(first_due)} (deleted at the next retention check)")
                out.append(self.finding(
                    severity,
                    f"group {c['group']!r} (committed offset {committed:,}) loses unread records {when}: "
                    f"{len(at_risk)} segment(s), {human_bytes(size)}, due for time retention "
                    f"(retention.ms {retention / 86_400_000:.1f} d)",
                    "Restart or scale the consumer group so it catches up, or raise the topic's retention.ms until "
                    "it has, or copy the range out first.",
                    thresholds={"warn_hours": opts["warn_hours"], "fail_hours": opts["fail_hours"],
                                "retention_ms": retention, "as_of_ms": as_of_ms},
                    evidence=[{"group": c["group"], "committed_offset": committed, "segment": int(r["base_offset"]),
                               "last_offset": opt_int(r.get("last_offset")), "deletion_time_ms": d,
                               "time_to_loss_ms": max(d - as_of_ms, 0), "size_bytes": opt_int(r["log_size_bytes"])}
                              for r, d in at_risk],
                    broker_id=broker, log_dir=log_dir, topic=data.topic, partition=data.partition,
                    base_offset=int(at_risk[0][0]["base_offset"])))
        return out
