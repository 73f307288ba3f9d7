"""KLA060 groups.below_log_start: a consumer group committed below the partition's log start offset.

What it checks:
    For every consumer group with a committed offset on the partition (read from
    ``__consumer_offsets`` on disk, or handed in by the caller), whether that offset is below
    the partition's log start offset on a live replica (the ``log-start-offset-checkpoint``,
    else the first segment's base offset). The records between the committed offset and the
    log start were deleted (retention, ``DeleteRecords``, a compaction of the whole prefix)
    before the group read them.

Why it matters:
    When the group restarts, its committed offset is out of range: the consumer falls back to
    ``auto.offset.reset`` (``earliest`` re-reads from the log start, ``latest`` jumps to the end
    and silently skips everything in between, ``none`` crashes). Either way the records the group
    never read are gone; a lagging consumer lost data and nobody was told.

Example finding:
    FAIL orders-3 (broker 1): group 'billing' committed offset 1,200 but the log starts at
    5,000: 3,800 records it never read are gone; on restart it jumps by auto.offset.reset.

How to fix:
    Find why the group stopped (its members, its lag history); decide whether the lost range
    must be restored from a backup or a mirror; reset the group explicitly
    (``kafka-consumer-groups --reset-offsets --to-earliest``) rather than relying on
    ``auto.offset.reset``; raise ``retention.ms`` for topics with slow consumers.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, frame_records, opt_int, positive, severity_option


class GroupBelowLogStart(Check):
    code = "KLA060"
    name = "groups.below_log_start"
    title = "Consumer groups committed below the log start"
    scope = "partition"
    identity = ("topic", "partition", "broker_id", "log_dir", "evidence.group")
    options = {
        "severity": severity_option("FAIL", "the severity of a group committed below the log start"),
        "min_records": Option(1, "report only when at least this many unread records are gone", int, positive, ">= 1"),
    }

    def prefilter(self, batch, ctx):
        """Partitions a consumer group committed on: the others have nothing to compare."""
        return batch.groups_of((c["topic"], c["partition"]) for c in ctx.group_offsets)

    def run(self, data: CheckInput, ctx, opts):
        commits = ctx.commits_on(data.topic, data.partition)
        if not commits or data.partitions is None or not len(data.partitions):
            return []
        live = data.partitions[data.partitions["dir_kind"] == "live"]
        out = []
        for row in frame_records(live):
            start = opt_int(row.get("log_start_offset"))
            if start is None:
                continue
            below = [c for c in commits if c["committed_offset"] is not None
                     and start - c["committed_offset"] >= opts["min_records"]]
            for c in below:
                gone = start - c["committed_offset"]
                out.append(self.finding(
                    opts["severity"],
                    f"group {c['group']!r} committed offset {c['committed_offset']:,} but the log starts at {start:,}: "
                    f"{gone:,} records it never read are gone; on restart it jumps by auto.offset.reset",
                    "Find why the group stopped; restore the lost range if it matters; reset the group explicitly "
                    "(kafka-consumer-groups --reset-offsets) instead of relying on auto.offset.reset; raise "
                    "retention.ms for topics with slow consumers.",
                    thresholds={"min_records": opts["min_records"]},
                    evidence=[{"group": c["group"], "committed_offset": c["committed_offset"],
                               "commit_timestamp_ms": c.get("commit_timestamp_ms"), "log_start_offset": start,
                               "log_start_offset_source": row.get("log_start_offset_source"),
                               "records_gone": gone}],
                    broker_id=opt_int(row.get("broker_id")), log_dir=row.get("log_dir"), topic=data.topic,
                    partition=data.partition))
        return out
