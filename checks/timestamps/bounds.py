"""KLA030 timestamps.bounds: CreateTime records stamped too far from when the broker appended them.

What it checks:
    For every live replica of a CreateTime topic, each segment's smallest and largest record
    timestamps against the window in which its records were appended: after the previous
    segment's last write (its ``.log`` mtime) and before this segment's own last write (its
    mtime), when those mtimes are trustworthy (increasing, not re-written by a move: see
    KLA020); otherwise only the audit time bounds the future side. A record is flagged when
    ``lower_append_bound - timestamp > before.max.ms`` (stamped too far in the past) or
    ``timestamp - upper_append_bound > after.max.ms`` (too far in the future), so only records
    that certainly broke the limits are reported. The limits are the topic's
    ``message.timestamp.before.max.ms`` / ``after.max.ms`` (older brokers:
    ``message.timestamp.difference.max.ms`` for both), or the check's own options, which let an
    operator audit against the limits they intend even where the broker was left open.

Why it matters:
    A producer with a wrong clock or replayed old data writes timestamps that time-based seeks,
    retention and windowed stream processing all trust. Future timestamps keep segments from
    ever being deleted by time (KLA031) and pull time seeks back (KLA010); past ones make data
    expire the moment it is written. Kafka 4.0 rejects CreateTime records more than an hour in
    the future by default, older brokers accepted anything.

Example finding:
    WARN events-2 (broker 1): 2 segment(s) hold records stamped beyond the limits (before 7.0 d,
    after 1.0 h): offset 81234 at 2031-01-01T00:00:00Z, 6.2 y after it can have been appended.

How to fix:
    Find the producer (the offsets and the record keys in the evidence) and fix its clock or
    its timestamp logic; set ``message.timestamp.before.max.ms`` / ``after.max.ms`` on the topic
    so the broker rejects such records; for data already written, expect KLA031 / KLA010.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, capped, non_negative, opt_int, replica_records, severity_option
from checks.framework.columns import columnar_batch
from checks.framework.config import LONG_MAX
from auditor.units import human_duration, iso_utc



def limits(ctx, topic: str, opts) -> tuple[int | None, int | None]:
    """(before, after) in ms; None = no limit. Options first, then the topic's configs."""
    def setting(key):
        value = ctx.kafka_int(topic, key)
        return None if value is None or value >= LONG_MAX or value < 0 else value

    diff = setting("message.timestamp.difference.max.ms")
    before = opts["before_max_ms"] if opts["before_max_ms"] is not None else (setting("message.timestamp.before.max.ms") or diff)
    after = opts["after_max_ms"] if opts["after_max_ms"] is not None else (setting("message.timestamp.after.max.ms") or diff)
    return before, after


class TimestampsBounds(Check):
    code = "KLA030"
    name = "timestamps.bounds"
    title = "Record timestamps beyond the before/after limits"
    scope = "partition"
    options = {
        "before_max_ms": Option(None, "the past limit; null = the topic's own setting", int, non_negative, ">= 0"),
        "after_max_ms": Option(None, "the future limit; null = the topic's own setting", int, non_negative, ">= 0"),
        "severity": severity_option("WARN"),
    }

    def prefilter(self, batch, ctx):
        """Partitions with a live segment beyond a limit against its own mtime or the audit time:
        the append window the check uses is never wider (a trusted previous mtime is <= this one's)."""
        import numpy as np

        before, after = {}, {}
        for topic, opts in batch.options(self, ctx).items():
            if (ctx.kafka_setting(topic, "message.timestamp.type") or "CreateTime") != "LogAppendTime":
                before[topic], after[topic] = limits(ctx, topic, opts)
        before, after = batch.per_topic("segments", before), batch.per_topic("segments", after)
        hi, mtime = batch.column("max_timestamp_ms"), batch.column("log_mtime_ms")
        lo = np.where(np.isnan(batch.column("min_timestamp_ms")), batch.column("min_batch_timestamp_ms"),
                      batch.column("min_timestamp_ms"))
        with np.errstate(invalid="ignore"):
            future = hi - np.fmin(mtime, float(ctx.as_of_ms)) > after
            past = mtime - lo > before
        return batch.groups_where("segments", batch.live_segments() & (future | past))

    replica_columns = ("base_offset", "is_active", "log_mtime_ms", "timestamp_types", "min_timestamp_ms",
                       "min_timestamp_offset", "min_batch_timestamp_ms", "max_timestamp_ms", "max_timestamp_offset")

    def run(self, data: CheckInput, ctx, opts):
        return self.judge(data, replica_records(data.segments), ctx, opts)

    def run_batch(self, batch, ctx):
        """The findings of every flagged partition at once (:meth:`_columnar`); :meth:`run` is the reference."""
        return columnar_batch(self, batch, ctx, lambda rows: self._columnar(rows, ctx))

    def _columnar(self, rows, ctx) -> list:
        """:meth:`judge` on every replica at once: each row's append window from the vectors (the
        replica's mtimes trusted or not, its previous row's mtime), the rows that can break a limit
        found with a float margin, then each of those judged exactly on its integers (the
        reference's arithmetic: no float rounding decides a finding)."""
        import numpy as np

        judged = {t: limits(ctx, t, o) for t, o in rows.opts.items()
                  if (ctx.kafka_setting(t, "message.timestamp.type") or "CreateTime") != "LogAppendTime"}
        judged = {t: v for t, v in judged.items() if v != (None, None)}
        before = rows.per_topic({t: b for t, (b, _) in judged.items() if b is not None})
        after = rows.per_topic({t: a for t, (_, a) in judged.items() if a is not None})
        mtimes = rows.ints("log_mtime_ms")
        m = np.array([0 if v is None else v for v in mtimes], dtype=np.int64)
        first = np.zeros(len(m), dtype=bool)
        first[rows.starts] = True
        untrusted = np.array([v is None for v in mtimes], dtype=bool)
        untrusted[1:] |= ~first[1:] & (m[1:] < m[:-1])  # exact: int64 mtimes
        trusted = (np.bincount(rows.rep, weights=untrusted, minlength=len(rows)) == 0)[rows.rep]
        mf = m.astype(np.float64)
        active = rows.truthy("is_active")
        upper = np.where(trusted & ~active, mf, float(ctx.as_of_ms))
        lower = np.where(trusted & ~first, np.r_[np.nan, mf[:-1]], np.nan)
        lo = rows.col("min_timestamp_ms")
        lo = np.where(np.isnan(lo), rows.col("min_batch_timestamp_ms"), lo)
        hi = rows.col("max_timestamp_ms")
        appended = ~rows.batch.list_contains("timestamp_types", ("LogAppendTime",))[rows.rows]
        with np.errstate(invalid="ignore"):  # candidates: a margin for float rounding, judged exactly below
            future = hi - upper - after > -(np.abs(hi) + np.abs(upper) + np.abs(after)) * 1e-12 - 2
            past = lower - lo - before > -(np.abs(lower) + np.abs(lo) + np.abs(before)) * 1e-12 - 2
        candidates = np.flatnonzero(appended & (future | past))
        if not len(candidates):
            return []
        bad = self._bad_rows(rows, candidates, mtimes, trusted, active, first, ctx.as_of_ms, judged)
        found = list(bad)
        return [(g, self._finding(where, bad[r], *judged[where[0]], t, rows.opts[where[0]]))
                for r, g, where, t in zip(found, rows.rep_group[found].tolist(), rows.where(found),
                                          trusted[rows.starts[found]].tolist())]

    @staticmethod
    def _bad_rows(rows, at, mtimes, trusted, active, first, as_of_ms, judged) -> dict:
        """replica -> the evidence items of its rows ``at`` (indices into ``rows``) that break a
        limit, in row order (future before past), as :meth:`judge` builds them, on integers."""
        values = [rows.ints(name, at) for name in ("base_offset", "min_timestamp_ms", "min_batch_timestamp_ms",
                                                   "min_timestamp_offset", "max_timestamp_ms", "max_timestamp_offset")]
        topics = [rows.batch.keys[g][0] for g in rows.group[at].tolist()]
        bad: dict = {}
        for i, rep, topic, is_trusted, is_active, is_first, base, lo_ts, lo_batch, lo_off, hi_ts, hi_off in zip(
                at.tolist(), rows.rep[at].tolist(), topics, trusted[at].tolist(), active[at].tolist(), first[at].tolist(),
                *values):
            before, after = judged[topic]
            lo_ts = lo_batch if lo_ts is None else lo_ts
            upper = mtimes[i] if is_trusted and not is_active else as_of_ms
            lower = mtimes[i - 1] if is_trusted and not is_first else None
            if after is not None and hi_ts is not None and hi_ts - upper > after:
                bad.setdefault(rep, []).append({"segment": base, "side": "future", "offset": hi_off, "timestamp_ms": hi_ts,
                                                "appended_before_ms": upper, "excess_ms": hi_ts - upper - after})
            if before is not None and lo_ts is not None and lower is not None and lower - lo_ts > before:
                bad.setdefault(rep, []).append({"segment": base, "side": "past", "offset": lo_off, "timestamp_ms": lo_ts,
                                                "appended_after_ms": lower, "excess_ms": lower - lo_ts - before})
        return bad

    def judge(self, data, replicas, ctx, opts):
        if (ctx.kafka_setting(data.topic, "message.timestamp.type") or "CreateTime") == "LogAppendTime":
            return []
        before, after = limits(ctx, data.topic, opts)
        if before is None and after is None:
            return []
        out = []
        for broker, log_dir, recs in replicas:
            mtimes = [opt_int(r["log_mtime_ms"]) for r in recs]
            trusted = all(m is not None for m in mtimes) and all(a <= b for a, b in zip(mtimes, mtimes[1:]))
            bad = []
            for i, r in enumerate(recs):
                if "LogAppendTime" in list(r["timestamp_types"] if r["timestamp_types"] is not None else []):
                    continue
                lo_ts = opt_int(r["min_timestamp_ms"])
                lo_off = opt_int(r["min_timestamp_offset"])
                if lo_ts is None:
                    lo_ts = opt_int(r["min_batch_timestamp_ms"])
                hi_ts, hi_off = opt_int(r["max_timestamp_ms"]), opt_int(r["max_timestamp_offset"])
                # the window in which this segment's records were appended
                upper = mtimes[i] if trusted and not r["is_active"] else ctx.as_of_ms
                lower = mtimes[i - 1] if trusted and i > 0 else None
                if after is not None and hi_ts is not None and hi_ts - upper > after:
                    bad.append({"segment": int(r["base_offset"]), "side": "future", "offset": hi_off,
                                "timestamp_ms": hi_ts, "appended_before_ms": upper, "excess_ms": hi_ts - upper - after})
                if before is not None and lo_ts is not None and lower is not None and lower - lo_ts > before:
                    bad.append({"segment": int(r["base_offset"]), "side": "past", "offset": lo_off,
                                "timestamp_ms": lo_ts, "appended_after_ms": lower, "excess_ms": lower - lo_ts - before})
            if bad:
                out.append(self._finding((data.topic, data.partition, broker, log_dir), bad, before, after, trusted, opts))
        return out

    def _finding(self, where, bad, before, after, trusted, opts):
        """One replica's finding from its evidence items (``bad``, in row order; sorted here)."""
        topic, partition, broker, log_dir = where
        bad.sort(key=lambda b: -b["excess_ms"])
        worst = bad[0]
        if worst["side"] == "future":
            what = (f"offset {worst['offset']} at {iso_utc(worst['timestamp_ms'])}, "
                    f"{human_duration(worst['timestamp_ms'] - worst['appended_before_ms'])} after it can have been appended")
        else:
            what = (f"offset {worst['offset']} at {iso_utc(worst['timestamp_ms'])}, "
                    f"{human_duration(worst['appended_after_ms'] - worst['timestamp_ms'])} before it can have been appended")
        if worst["offset"] is None:
            what = what.replace("offset None", "a record (offset known at depth deep)")
        segments = sorted({b["segment"] for b in bad})
        kept, count = capped(bad)
        limits_txt = ", ".join(x for x in (f"before {human_duration(before)}" if before is not None else "",
                                           f"after {human_duration(after)}" if after is not None else "") if x)
        basis = "neighbouring segments' mtimes" if trusted else "the audit time (mtimes not trustworthy)"
        found = self.finding(
            opts["severity"],
            f"{len(segments)} segment(s) hold records stamped beyond the limits ({limits_txt}; append time bounded "
            f"by {basis}): worst {what}",
            "Find the producer (offsets in the evidence) and fix its clock or timestamp logic; set "
            "message.timestamp.before.max.ms / after.max.ms on the topic so the broker rejects such records.",
            thresholds={"before_max_ms": before, "after_max_ms": after, "mtimes_trusted": trusted},
            evidence=kept, topic=topic, partition=partition, broker_id=broker, log_dir=log_dir,
            base_offset=worst["segment"])
        found.evidence_count = count
        return found
