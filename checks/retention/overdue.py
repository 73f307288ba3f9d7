"""KLA040 retention.overdue: segments still on disk long after time retention should have deleted them.

What it checks:
    Runs the broker's time-retention walk (see KLA031) at the audit time and lists the
    segments it would delete *now*: the oldest segments with ``now - largestTimestamp >
    retention.ms``, in order, up to the first that is not deletable, never the active one, and
    only when they have been due for longer than the broker's check interval plus
    ``file.delete.delay.ms`` plus the grace period. A walk stopped by a future timestamp is
    KLA031's finding, not this one. Each replica is judged on its own (every broker runs its
    own retention). Size retention (``retention.bytes``) is not judged: the files do not tell
    since when a partition has been over its limit, so "overdue" cannot be told from "just grew".

Why it matters:
    Overdue segments mean retention is not running for this partition: a stuck or crashed
    log-cleaner thread, a ``compact``-only policy the operator did not expect, an offline log
    dir, or a broker that has been down. The disk fills up, and replays see data older than
    the retention the team relies on (privacy deletion deadlines too).

Example finding:
    WARN audit-log-0 (broker 1): 8 segment(s), 7.9 GiB, past retention.ms (7.0 d) are still on
    disk: the oldest (segment 0, largest timestamp 2024-01-01T00:00:00Z) was due 2024-01-08T00:00:00Z.

How to fix:
    Check the broker log for retention errors and ``LogCleaner`` failures, the topic's
    ``cleanup.policy`` and ``retention.ms``, and whether the log dir is online; restart the
    broker if its scheduler is stuck.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import EVIDENCE_CAP, Check, CheckInput, Option, frame_records, live_replicas, non_negative, opt_int
from checks.framework.columns import columnar_batch
from checks.retention.future_timestamp import largest_ints, largest_of_rows, largest_timestamp, largest_timestamps
from auditor.units import human_bytes, iso_utc


class RetentionOverdue(Check):
    code = "KLA040"
    name = "retention.overdue"
    title = "Segments overdue for time retention"
    scope = "partition"
    options = {
        "grace_ms": Option(3_600_000, "how long past due (after the check interval and delete delay) before reporting", int, non_negative, ">= 0"),
        "check_interval_ms": Option(300_000, "the broker's log.retention.check.interval.ms", int, non_negative, ">= 0"),
    }

    def prefilter(self, batch, ctx):
        """Partitions of time-retained topics with a closed live segment due more than the slack ago."""
        import numpy as np

        due_after = {}
        for topic, opts in batch.options(self, ctx).items():
            retention = ctx.kafka_int(topic, "retention.ms")
            if retention is None or retention < 0 or "delete" not in (ctx.kafka_setting(topic, "cleanup.policy") or "delete"):
                continue
            delay = ctx.kafka_int(topic, "file.delete.delay.ms") or 0
            due_after[topic] = retention + opts["grace_ms"] + opts["check_interval_ms"] + delay
        seg = batch.segments
        if not len(seg):
            return []
        closed = ~(seg["is_active"] == True).to_numpy()  # noqa: E712 - a null is not active to the check either
        with np.errstate(invalid="ignore"):
            overdue = ctx.as_of_ms - largest_timestamps(batch) > batch.per_topic("segments", due_after)
        return batch.groups_where("segments", batch.live_segments() & closed & overdue)

    def run_batch(self, batch, ctx):
        """The findings of every flagged partition at once (:meth:`_columnar`); :meth:`run` is the reference."""
        return columnar_batch(self, batch, ctx, lambda rows: self._columnar(rows, ctx))

    def _columnar(self, rows, ctx) -> list:
        """:meth:`run`'s walk on every replica at once: the leading closed segments past retention,
        of those the ones due more than the slack ago; one finding per replica with any."""
        import numpy as np

        as_of_ms = ctx.as_of_ms
        judged = {t: _retention_and_slack(ctx, t, o) for t, o in rows.opts.items()}
        judged = {t: v for t, v in judged.items() if v is not None}
        retention = rows.per_topic({t: r for t, (r, _) in judged.items()})  # NaN: a topic the check does not judge
        slack = rows.per_topic({t: s for t, (_, s) in judged.items()})
        largest = largest_of_rows(rows)
        with np.errstate(invalid="ignore"):
            walked = rows.prefix(~rows.truthy("is_active") & (as_of_ms - largest > retention))
            overdue = walked & (as_of_ms - (largest + retention) > slack)
        first = rows.first(overdue)
        found = np.flatnonzero(first >= 0)
        if not len(found):
            return []
        bases, sizes = rows.ints("base_offset"), rows.ints("log_size_bytes")
        exact = largest_ints(rows, np.arange(len(rows.rows)))
        evidence, counts = rows.lists(overdue, lambda ix: [
            {"segment": bases[i], "largest_timestamp_ms": exact[i], "due_ms": exact[i] + judged[t][0], "size_bytes": sizes[i]}
            for i, t in zip(ix.tolist(), (rows.batch.keys[g][0] for g in rows.group[ix].tolist()))], cap=EVIDENCE_CAP)
        size = rows.sums(np.where(overdue, np.nan_to_num(rows.col("log_size_bytes")), 0))
        return [(g, self._finding(where, judged[where[0]], as_of_ms, int(counts[r]), int(size[r]), bases[i], exact[i],
                                  evidence[r]))
                for r, i, g, where in zip(found.tolist(), first[found].tolist(), rows.rep_group[found].tolist(),
                                          rows.where(found))]

    def _finding(self, where, retention_slack, as_of_ms, count, size, first, first_ts, evidence):
        """One finding of :meth:`run`, from its values (``evidence``: the first EVIDENCE_CAP of the
        ``count`` overdue segments)."""
        topic, partition, broker, log_dir = where
        retention, slack = retention_slack
        found = self.finding(
            "WARN",
            f"{count} segment(s), {human_bytes(size)}, past retention.ms ({retention / 86_400_000:.1f} d) "
            f"are still on disk: the oldest (segment {first}, largest timestamp "
            f"{iso_utc(first_ts)}) was due {iso_utc(first_ts + retention)}",
            "Check the broker log for retention and LogCleaner errors, the topic's cleanup.policy and "
            "retention.ms, and whether the log dir is online.",
            thresholds={"retention_ms": retention, "slack_ms": slack, "as_of_ms": as_of_ms},
            evidence=evidence, topic=topic, partition=partition, broker_id=broker, log_dir=log_dir, base_offset=first)
        found.evidence_count = count
        return found

    def run(self, data: CheckInput, ctx, opts):
        judged = _retention_and_slack(ctx, data.topic, opts)
        if judged is None:
            return []
        retention, slack = judged
        as_of_ms = ctx.as_of_ms
        out = []
        for broker, log_dir, rows in live_replicas(data.segments):
            overdue = []
            for r in frame_records(rows):
                largest = largest_timestamp(r)
                if r["is_active"] or largest is None or as_of_ms - largest <= retention:
                    break
                overdue.append((r, largest))
            overdue = [(r, t) for r, t in overdue if as_of_ms - (t + retention) > slack]
            if not overdue:
                continue
            size = sum(opt_int(r["log_size_bytes"]) or 0 for r, _ in overdue)
            first, first_ts = overdue[0]
            evidence = [{"segment": int(r["base_offset"]), "largest_timestamp_ms": t, "due_ms": t + retention,
                         "size_bytes": opt_int(r["log_size_bytes"])} for r, t in overdue]
            out.append(self._finding((data.topic, data.partition, broker, log_dir), judged, as_of_ms, len(overdue), size,
                                     int(first["base_offset"]), first_ts, evidence[:EVIDENCE_CAP]))
        return out


def _retention_and_slack(ctx, topic, opts) -> "tuple[int, int] | None":
    """(retention.ms, slack) of a topic time retention deletes from, None for the others: the slack
    is the grace, the broker's check interval and file.delete.delay.ms."""
    retention = ctx.kafka_int(topic, "retention.ms")
    policy = ctx.kafka_setting(topic, "cleanup.policy") or "delete"
    if retention is None or retention < 0 or "delete" not in policy:
        return None
    delay = ctx.kafka_int(topic, "file.delete.delay.ms") or 0
    return retention, opts["grace_ms"] + opts["check_interval_ms"] + delay
