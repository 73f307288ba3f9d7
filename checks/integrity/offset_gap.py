"""KLA045 integrity.offset_gap: missing offsets between consecutive segments of a non-compacted topic.

What it checks:
    For topics whose ``cleanup.policy`` does not include ``compact``: each segment's first
    offset must follow the previous segment's last offset (transaction markers take offsets
    too, so they leave no gap). A gap means offsets that exist in no segment. Compacted topics
    have gaps by design and are not judged; nor is the first segment (the log start offset may
    fall inside it after DeleteRecords).

Why it matters:
    A non-compacted log has no holes unless a segment file was lost or deleted by hand, or a
    copy/restore skipped files: consumers jump the gap silently and the records are gone.

Example finding:
    FAIL clicks-5 (broker 2): offsets 120000..129999 (10000) are in no segment: segment
    110000 ends at 119999, the next starts at 130000.

How to fix:
    Re-replicate the replica from a healthy one if another replica has the range; otherwise
    the records are lost: tell the consumers of the topic which range. Find who removed files
    under the log dir.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, opt_int, replica_records, severity_option


class IntegrityOffsetGap(Check):
    code = "KLA045"
    name = "integrity.offset_gap"
    title = "Offset gaps between segments"
    scope = "partition"
    options = {"severity": severity_option("FAIL", "severity of a gap")}

    def prefilter(self, batch, ctx):
        """Partitions of delete-policy, non-internal topics where a live segment starts after the
        previous one of its replica ends + 1 (or ties on its base offset: then any order is checked)."""
        import numpy as np

        allowed = {t: 1 for t in batch.options(self, ctx)
                   if t is not None and not t.startswith("__")
                   and "compact" not in (ctx.kafka_setting(t, "cleanup.policy") or "delete")}
        live = batch.live_segments() & (batch.per_topic("segments", allowed) == 1)
        rows = np.flatnonzero(live)
        if len(rows) < 2:
            return []
        replica = batch.replica_ids()[rows]
        first, last, base = batch.column("first_offset")[rows], batch.column("last_offset")[rows], batch.column("base_offset")[rows]
        same = replica[1:] == replica[:-1]
        with np.errstate(invalid="ignore"):
            gap = first[1:] > last[:-1] + 1  # NaN on either side: False, as the check resets there
        tie = base[1:] == base[:-1]
        hit = np.zeros(len(live), dtype=bool)  # the rows that start a gap or a tie (np.isin over a million row numbers sorted them)
        hit[rows[1:][same & (gap | tie)]] = True
        return batch.groups_where("segments", hit)

    replica_columns = ("base_offset", "first_offset", "last_offset")

    def run(self, data: CheckInput, ctx, opts):
        return self.judge(data, replica_records(data.segments), ctx, opts)

    def judge(self, data, replicas, ctx, opts):
        if "compact" in (ctx.kafka_setting(data.topic, "cleanup.policy") or "delete"):
            return []
        if data.topic.startswith("__"):
            return []  # internal topics (__consumer_offsets, __transaction_state) are compacted
        out = []
        for broker, log_dir, recs in replicas:
            gaps = []
            prev = None
            for r in recs:
                first, last = opt_int(r["first_offset"]), opt_int(r["last_offset"])
                if first is None or last is None:
                    prev = None
                    continue
                if prev is not None and first > prev[1] + 1:
                    gaps.append({"after_segment": prev[0], "after_last_offset": prev[1],
                                 "next_segment": int(r["base_offset"]), "next_first_offset": first,
                                 "missing_offsets": first - prev[1] - 1})
                prev = (int(r["base_offset"]), last)
            if not gaps:
                continue
            g = gaps[0]
            more = f" (and {len(gaps) - 1} more gap(s))" if len(gaps) > 1 else ""
            out.append(self.finding(
                opts["severity"],
                f"offsets {g['after_last_offset'] + 1}..{g['next_first_offset'] - 1} ({g['missing_offsets']}) are in "
                f"no segment: segment {g['after_segment']} ends at {g['after_last_offset']}, the next starts at "
                f"{g['next_first_offset']}{more}",
                "Re-replicate from a healthy replica if one has the range; otherwise tell consumers the range is lost "
                "and find who removed files under the log dir.",
                evidence=gaps, topic=data.topic, partition=data.partition, broker_id=broker, log_dir=log_dir,
                base_offset=g["next_segment"]))
        return out
