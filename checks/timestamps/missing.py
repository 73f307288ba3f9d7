"""KLA041 timestamps.missing: segments with records that carry no timestamp (magic 0).

What it checks:
    Segments whose batches are magic 0 (Kafka before 0.10) or carry the "no timestamp" value:
    the ``magics`` / ``timestamp_types`` columns of the segment table.

Why it matters:
    Without record timestamps the broker falls back to the ``.log`` mtime: time retention
    restarts whenever the file is re-written (a reassignment keeps such data a whole
    ``retention.ms`` longer), time seeks pick segments by mtime and can answer nothing, and the
    time index is empty. Data this old is also a sign of a topic nobody migrated.

Example finding:
    WARN legacy-events-0 (broker 1): 3 segment(s), 1.2 GiB, hold records without timestamps
    (magic 0): retention and time seeks use their .log mtimes.

How to fix:
    Let the data expire, or re-produce it with timestamps (a consumer/producer copy to a new
    topic). Keep its replicas where they are: moving them restarts their retention clock.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, cells, frame_records, live_replicas, opt_int, severity_option
from auditor.units import human_bytes


class TimestampsMissing(Check):
    code = "KLA041"
    name = "timestamps.missing"
    title = "Records without timestamps (magic 0)"
    scope = "partition"
    options = {"severity": severity_option("WARN")}

    def prefilter(self, batch, ctx):
        """Partitions with a live segment holding magic 0 or NoTimestampType."""
        hits = batch.list_contains("magics", (0,)) | batch.list_contains("timestamp_types", ("NoTimestampType",))
        return batch.groups_where("segments", batch.live_segments() & hits)

    def run(self, data: CheckInput, ctx, opts):
        out = []
        for broker, log_dir, rows in live_replicas(data.segments):
            hits = [r for r in frame_records(rows)
                    if 0 in cells(r["magics"]) or "NoTimestampType" in cells(r["timestamp_types"])]
            if not hits:
                continue
            size = sum(opt_int(r["log_size_bytes"]) or 0 for r in hits)
            out.append(self.finding(
                opts["severity"],
                f"{len(hits)} segment(s), {human_bytes(size)}, hold records without timestamps (magic 0): retention and "
                f"time seeks use their .log mtimes",
                "Let the data expire or re-produce it with timestamps; avoid moving these replicas (it restarts "
                "their retention clock).",
                evidence=[{"segment": int(r["base_offset"]), "magics": [int(m) for m in cells(r["magics"])],
                           "timestamp_types": cells(r["timestamp_types"]), "log_mtime_ms": opt_int(r["log_mtime_ms"]),
                           "size_bytes": opt_int(r["log_size_bytes"])} for r in hits],
                topic=data.topic, partition=data.partition, broker_id=broker, log_dir=log_dir,
                base_offset=int(hits[0]["base_offset"])))
        return out
