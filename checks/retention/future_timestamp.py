"""KLA031 retention.future_timestamp: a future timestamp keeping segments from time retention.

What it checks:
    Kafka's time retention (``UnifiedLog.deleteRetentionMsBreachedSegments``) walks a
    partition's segments from the oldest and deletes each whose ``now - largestTimestamp >
    retention.ms``, stopping at the first that is not deletable. ``largestTimestamp`` is the
    largest record timestamp (the ``.log`` mtime when there is none). A segment holding a
    record stamped in the future is therefore not deletable until ``its timestamp +
    retention.ms``, and it blocks every later segment. This check runs that walk at the audit
    time and reports the blocking segment, the bytes it holds back (itself and every later
    segment already past retention) and when it would become deletable.

Why it matters:
    Disk fills up although ``retention.ms`` says the data is gone; consumers replaying "the
    last 7 days" read months; and the broker only logs a warning ("contains future
    timestamp(s), making it ineligible to be deleted"). One producer with a clock years ahead
    is enough.

Example finding:
    FAIL payments-0 (broker 2): segment 1200 holds a record stamped 2031-01-01T00:00:00Z: time
    retention stops there until 2031-01-08T00:00:00Z; it holds back 14 segments, 12.3 GiB, that
    are past retention.ms (7.0 d).

How to fix:
    Delete the records up to the end of the blocking segment with ``kafka-delete-records`` (it
    moves the log start offset; retention then continues), after checking nobody needs them;
    or lower ``retention.bytes`` for a while; fix the producer's clock (KLA030) and set
    ``message.timestamp.after.max.ms`` so it cannot happen again.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, Severity, frame_records, live_replicas, non_negative, opt_int
from checks.framework.columns import columnar_batch
from auditor.units import human_bytes, human_duration, iso_utc



def largest_timestamp(row) -> int | None:
    """``LogSegment.largestTimestamp()``: the largest record timestamp, else the mtime."""
    ts = opt_int(row["max_timestamp_ms"])
    return ts if ts is not None and ts >= 0 else opt_int(row["log_mtime_ms"])


def largest_timestamps(batch):
    """:func:`largest_timestamp` of every segment row of a batch, as float64 (NaN: unknown)."""
    import numpy as np

    ts = batch.column("max_timestamp_ms")
    return np.where(ts >= 0, ts, batch.column("log_mtime_ms"))  # NaN >= 0 is False: the mtime


def _time_retention(ctx, opts_by_topic) -> dict:
    """topic -> retention.ms, for the topics time retention deletes from (``cleanup.policy`` with
    delete, a retention.ms >= 0): the topics :meth:`RetentionFutureTimestamp.run` judges."""
    out = {}
    for topic in opts_by_topic:
        retention = ctx.kafka_int(topic, "retention.ms")
        if retention is not None and retention >= 0 and "delete" in (ctx.kafka_setting(topic, "cleanup.policy") or "delete"):
            out[topic] = retention
    return out


def largest_of_rows(rows):
    """:func:`largest_timestamp` of each of ``rows``' rows (a :class:`ReplicaRows`), float64 (NaN: unknown)."""
    import numpy as np

    ts = rows.col("max_timestamp_ms")
    return np.where(ts >= 0, ts, rows.col("log_mtime_ms"))


def largest_ints(rows, at) -> list:
    """:func:`largest_timestamp` of the rows ``at`` (indices into ``rows``), exact ints or None."""
    return [ts if ts is not None and ts >= 0 else m
            for ts, m in zip(rows.ints("max_timestamp_ms", at), rows.ints("log_mtime_ms", at))]


class RetentionFutureTimestamp(Check):
    code = "KLA031"
    name = "retention.future_timestamp"
    title = "Future timestamps blocking time retention"
    scope = "partition"
    options = {
        "tolerance_ms": Option(3_600_000, "timestamps at most this far after the audit time are not reported", int, non_negative, ">= 0"),
        "fail_after_ms": Option(30 * 86_400_000, "FAIL when the segment becomes deletable this far after the audit "
                                                 "time (else WARN)", int, non_negative, ">= 0"),
    }

    def prefilter(self, batch, ctx):
        """Partitions of time-retained topics with a live segment stamped beyond the tolerance."""
        tolerance = {}
        for topic, opts in batch.options(self, ctx).items():
            retention = ctx.kafka_int(topic, "retention.ms")
            if retention is not None and retention >= 0 and "delete" in (ctx.kafka_setting(topic, "cleanup.policy") or "delete"):
                tolerance[topic] = opts["tolerance_ms"]
        ahead = largest_timestamps(batch) - ctx.as_of_ms
        return batch.groups_where("segments", batch.live_segments() & (ahead > batch.per_topic("segments", tolerance)))

    def run_batch(self, batch, ctx):
        """The findings of every flagged partition at once (:meth:`_columnar`); :meth:`run` is the reference."""
        return columnar_batch(self, batch, ctx, lambda rows: self._columnar(rows, ctx))

    def _columnar(self, rows, ctx) -> list:
        """:meth:`run`'s walk on every replica at once: the first segment not deletable by time
        decides; a finding where it is stamped beyond the tolerance, with the later segments it holds back."""
        import numpy as np

        as_of_ms = ctx.as_of_ms
        retention = rows.per_topic(_time_retention(ctx, rows.opts))  # NaN: a topic the check does not judge
        largest = largest_of_rows(rows)
        with np.errstate(invalid="ignore"):
            deletable = as_of_ms - largest > retention
            stopper = rows.first(~deletable)  # NaN largest: not deletable, stops the walk without a finding
            at = stopper[stopper >= 0]
            hit = at[~np.isnan(retention[at]) & (largest[at] - as_of_ms > rows.topic_option("tolerance_ms")[at])]
        if not len(hit):
            return []
        # held back: the replica's later segments already past retention (an unknown or 0 largest
        # timestamp counts as the audit time, as ``largest_timestamp(x) or as_of_ms`` does)
        after = np.zeros(len(rows.rows), dtype=bool)
        after[hit] = True
        after = (rows.running(after) > 0) & ~after
        lead = np.where(np.isnan(largest) | (largest == 0), float(as_of_ms), largest)
        with np.errstate(invalid="ignore"):
            held = after & (lead < as_of_ms - retention)
        bases = rows.ints("base_offset")
        sizes = rows.ints("log_size_bytes")
        held_segments, _ = rows.lists(held, lambda ix: [bases[i] for i in ix.tolist()])
        held_bytes = rows.sums(np.where(held, np.nan_to_num(rows.col("log_size_bytes")), 0))
        replicas = rows.rep[hit]
        exact = largest_ints(rows, hit)
        offsets = rows.ints("max_timestamp_offset", hit)
        by_topic = _time_retention(ctx, rows.opts)
        return [(g, self._finding(where, bases[i], largest_ms, offset, sizes[i], held_segments[r], int(held_bytes[r]),
                                  by_topic[where[0]], as_of_ms, rows.opts[where[0]]))
                for i, r, g, where, largest_ms, offset in zip(hit.tolist(), replicas.tolist(), rows.rep_group[replicas].tolist(),
                                                              rows.where(replicas), exact, offsets)]

    def _finding(self, where, base, largest, offset, size, held, held_bytes, retention, as_of_ms, opts):
        """One finding of :meth:`run`, from its values."""
        topic, partition, broker, log_dir = where
        deletable_at = largest + retention
        severity = Severity.FAIL if deletable_at - as_of_ms > opts["fail_after_ms"] else Severity.WARN
        at = f" (offset {offset})" if offset is not None else ""
        return self.finding(
            severity,
            f"segment {base} holds a record stamped {iso_utc(largest)}{at}, "
            f"{human_duration(largest - as_of_ms)} after the audit time: time retention stops there until "
            f"{iso_utc(deletable_at)}; it holds back {len(held)} later segment(s), {human_bytes(held_bytes)}, "
            f"already past retention.ms ({human_duration(retention)})",
            "kafka-delete-records up to the end of this segment (after checking nobody needs it), or lower "
            "retention.bytes for a while; fix the producer clock and set message.timestamp.after.max.ms.",
            thresholds={"retention_ms": retention, "tolerance_ms": opts["tolerance_ms"], "as_of_ms": as_of_ms},
            evidence=[{"segment": base, "largest_timestamp_ms": largest, "offset": offset,
                       "deletable_at_ms": deletable_at, "segment_bytes": size,
                       "held_segments": held, "held_bytes": held_bytes}],
            topic=topic, partition=partition, broker_id=broker, log_dir=log_dir, base_offset=base)

    def run(self, data: CheckInput, ctx, opts):
        retention = ctx.kafka_int(data.topic, "retention.ms")
        policy = ctx.kafka_setting(data.topic, "cleanup.policy") or "delete"
        if retention is None or retention < 0 or "delete" not in policy:
            return []
        as_of_ms = ctx.as_of_ms
        out = []
        for broker, log_dir, rows in live_replicas(data.segments):
            recs = frame_records(rows)
            for i, r in enumerate(recs):
                largest = largest_timestamp(r)
                if largest is None:
                    break
                if as_of_ms - largest > retention:
                    continue  # deletable: the walk goes on
                if largest - as_of_ms <= opts["tolerance_ms"]:
                    break  # not yet due, and not a future timestamp: the walk stops normally
                held = [x for x in recs[i + 1:] if (largest_timestamp(x) or as_of_ms) < as_of_ms - retention]
                held_bytes = sum(opt_int(x["log_size_bytes"]) or 0 for x in held)
                out.append(self._finding((data.topic, data.partition, broker, log_dir), int(r["base_offset"]), largest,
                                         opt_int(r["max_timestamp_offset"]), opt_int(r["log_size_bytes"]),
                                         [int(x["base_offset"]) for x in held], held_bytes, retention, as_of_ms, opts))
                break
        return out
