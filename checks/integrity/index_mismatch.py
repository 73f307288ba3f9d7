"""KLA043 integrity.index_mismatch: .index / .timeindex files that disagree with their .log.

What it checks:
    Per segment: the last offset-index entry points past the ``.log`` (position >= size) or
    past the last offset; the last time-index entry names an offset past the last offset or
    (at depth ``headers`` and deeper, where the largest timestamp is exact) a timestamp above
    the largest record timestamp; index files with entries out of order or with a size that is
    not a multiple of the entry size (the reader's notes); missing index files beside a
    non-empty closed ``.log``; an empty ``.timeindex`` beside a closed ``.log`` whose records
    carry timestamps (the broker writes the segment's largest timestamp into it when it rolls,
    ``LogSegment.onBecomeInactiveSegment``). An empty ``.index`` is normal (no entry is written
    before ``index.interval.bytes``, 4 KiB by default, of batches, nor for a lone large batch)
    and is not reported.

Why it matters:
    The broker trusts its indexes for every fetch and every time seek: a wrong entry sends
    consumers to the wrong byte (errors, or silently skipped data) and makes time seeks
    answer wrong offsets. The broker rebuilds indexes only when it recovers a segment after an
    unclean shutdown, so a bad index on a closed segment stays bad.

Example finding:
    WARN orders-1 (broker 3): segment 52000: .timeindex last entry (2024-05-02T10:00:00Z, offset
    53999) is after the .log's last offset 53100.

How to fix:
    Stop the broker, delete the bad segment's ``.index`` and ``.timeindex`` (never the
    ``.log``), and start it: Kafka rebuilds missing indexes on load. Or let the replica
    re-replicate from a healthy one. Check the disk if it happens more than once.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, cells, opt_int, replica_records, severity_option
from auditor.units import iso_utc

_NOTE_MARKERS = ("expected strictly increasing", "expected non-decreasing", "not a multiple of the",
                 "index points past the log")
_EMPTY_TIMEINDEX = "empty .timeindex"


class IntegrityIndexMismatch(Check):
    code = "KLA043"
    name = "integrity.index_mismatch"
    title = "Index files inconsistent with the log"
    scope = "partition"
    options = {"severity": severity_option("WARN")}

    def prefilter(self, batch, ctx):
        """Partitions with a live segment where one of the tests can hold (the timestamp test without
        its depth condition; any note with a marker)."""
        import numpy as np

        col = batch.column
        with np.errstate(invalid="ignore"):
            suspect = ((col("last_index_position") >= col("log_size_bytes")) | (col("last_index_offset") > col("last_offset"))
                       | (col("last_timeindex_offset") > col("last_offset"))
                       | (col("last_timeindex_timestamp_ms") > col("max_timestamp_ms")))
        seg = batch.segments
        if len(seg):
            closed = ~(seg["is_active"] == True).to_numpy()  # noqa: E712 - a null is not active to the check either
            size = np.nan_to_num(col("log_size_bytes"), nan=0.0) != 0
            no_index = np.isnan(col("index_size_bytes")) | np.isnan(col("timeindex_size_bytes"))
            suspect |= closed & size & seg["file_state"].isna().to_numpy() & no_index
            notes = seg["notes"].to_numpy()
            suspect |= np.fromiter((not (n is None or isinstance(n, float)) and len(n) > 0
                                    and any(m in x for x in n for m in _NOTE_MARKERS + (_EMPTY_TIMEINDEX,)) for n in notes),
                                   dtype=bool, count=len(notes))
        return batch.groups_where("segments", batch.live_segments() & suspect)

    replica_columns = ("base_offset", "last_offset", "log_size_bytes", "last_index_position", "last_index_offset",
                       "last_timeindex_timestamp_ms", "last_timeindex_offset", "depth", "max_timestamp_ms", "magics",
                       "notes", "is_active", "file_state", "index_size_bytes", "timeindex_size_bytes")

    def run(self, data: CheckInput, ctx, opts):
        return self.judge(data, replica_records(data.segments), ctx, opts)

    def judge(self, data, replicas, ctx, opts):
        out = []
        for broker, log_dir, recs in replicas:
            problems = []
            for r in recs:
                base = int(r["base_offset"])
                last = opt_int(r["last_offset"])
                size = opt_int(r["log_size_bytes"])
                pos = opt_int(r["last_index_position"])
                idx_off = opt_int(r["last_index_offset"])
                t_ts, t_off = opt_int(r["last_timeindex_timestamp_ms"]), opt_int(r["last_timeindex_offset"])
                exact_max = r["depth"] in ("headers", "deep")
                if pos is not None and size is not None and pos >= size:
                    problems.append((base, f".index last entry position {pos} is at or past the .log size {size}"))
                if idx_off is not None and last is not None and idx_off > last:
                    problems.append((base, f".index last entry offset {idx_off} is after the .log's last offset {last}"))
                if t_off is not None and last is not None and t_off > last:
                    problems.append((base, f".timeindex last entry ({iso_utc(t_ts)}, offset {t_off}) is after the "
                                           f".log's last offset {last}"))
                max_ts = opt_int(r["max_timestamp_ms"])
                if exact_max and t_ts is not None and max_ts is not None and t_ts > max_ts:
                    problems.append((base, f".timeindex last timestamp {iso_utc(t_ts)} is above the largest record "
                                           f"timestamp {iso_utc(max_ts)}"))
                has_timestamps = max_ts is not None and max_ts >= 0 and any(m >= 1 for m in cells(r["magics"]))
                for note in cells(r["notes"]):
                    if any(m in note for m in _NOTE_MARKERS):
                        problems.append((base, note))
                    elif _EMPTY_TIMEINDEX in note and not r["is_active"] and has_timestamps:
                        problems.append((base, note))
                if not r["is_active"] and size and r["file_state"] is None and (
                        opt_int(r["index_size_bytes"]) is None or opt_int(r["timeindex_size_bytes"]) is None):
                    problems.append((base, "closed segment without its .index or .timeindex"))
            if not problems:
                continue
            first_base, first_text = problems[0]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            out.append(self.finding(
                opts["severity"], f"segment {first_base}: {first_text}{more}",
                "Stop the broker, delete the segment's .index and .timeindex (never the .log) and restart: Kafka "
                "rebuilds them; or re-replicate from a healthy replica. Check the disk.",
                evidence=[{"segment": b, "problem": t} for b, t in problems],
                topic=data.topic, partition=data.partition, broker_id=broker, log_dir=log_dir, base_offset=first_base))
        return out
