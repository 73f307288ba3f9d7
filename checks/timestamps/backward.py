"""KLA042 timestamps.backward: record timestamps that jump far back in time within a segment.

What it checks:
    At depth ``deep`` every record is read; ``max_backward_jump_ms`` is the largest drop of a
    record's timestamp below the largest timestamp before it in the same segment, and
    ``max_backward_jump_offset`` where it happened. Jumps larger than the threshold are reported.

Why it matters:
    Time seeks answer the *first* record at or after T: after a big step back, records older
    than T sit after the answer (read by a replay that wanted to skip them) and records after T
    can precede it. Time-windowed consumers drop or mis-assign them as late data. It usually
    means several producers with different clocks, or replayed data mixed with live data.

Example finding:
    WARN sensor-readings-4 (broker 2): segment 88000: timestamps step back 3.2 d at offset 88153.

How to fix:
    Find the producers writing into this partition (keys at the offsets in the evidence) and
    align their clocks, or stamp records at the source consistently; consider LogAppendTime for
    topics whose consumers only need arrival order.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from auditor.units import human_duration
from checks.framework.base import Check, CheckInput, Option, frame_records, live_replicas, opt_int, positive



class TimestampsBackward(Check):
    code = "KLA042"
    name = "timestamps.backward"
    title = "Large backward jumps of record timestamps"
    scope = "partition"
    options = {"threshold_ms": Option(3_600_000, "smallest backward jump reported", int, positive, "> 0")}

    def prefilter(self, batch, ctx):
        """Partitions with a live segment jumping back more than the topic's threshold."""
        import numpy as np

        limit = batch.per_topic("segments", {t: o["threshold_ms"] for t, o in batch.options(self, ctx).items()})
        jump = np.nan_to_num(batch.column("max_backward_jump_ms"), nan=0.0)
        return batch.groups_where("segments", batch.live_segments() & (jump > limit))

    def run(self, data: CheckInput, ctx, opts):
        out = []
        for broker, log_dir, rows in live_replicas(data.segments):
            hits = [r for r in frame_records(rows)
                    if (opt_int(r["max_backward_jump_ms"]) or 0) > opts["threshold_ms"]]
            if not hits:
                continue
            hits.sort(key=lambda r: -r["max_backward_jump_ms"])
            worst = hits[0]
            out.append(self.finding(
                "WARN",
                f"{len(hits)} segment(s) with timestamps stepping back more than {human_duration(opts['threshold_ms'])}: worst in "
                f"segment {int(worst['base_offset'])}, {human_duration(worst['max_backward_jump_ms'])} at offset "
                f"{opt_int(worst['max_backward_jump_offset'])}",
                "Align the producers' clocks (keys at the offsets in the evidence) or stamp records consistently at the "
                "source; LogAppendTime if consumers only need arrival order.",
                thresholds={"threshold_ms": opts["threshold_ms"]},
                evidence=[{"segment": int(r["base_offset"]), "jump_ms": opt_int(r["max_backward_jump_ms"]),
                           "offset": opt_int(r["max_backward_jump_offset"])} for r in hits],
                topic=data.topic, partition=data.partition, broker_id=broker, log_dir=log_dir,
                base_offset=int(worst["base_offset"])))
        return out
