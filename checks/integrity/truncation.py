"""KLA044 integrity.truncation: closed segments that end early, are cut or hold corrupt bytes.

What it checks:
    The reader's walk of each ``.log`` (depth ``index`` and deeper) ends with a reason: a
    closed segment must end exactly on a batch boundary. Reported: ``corrupt`` (an impossible
    length or magic: bytes after it are unreadable) in any segment, and a cut last batch
    (``partial-tail``), a zero-filled tail or other trailing bytes in a *closed* segment. The
    active segment's partial tail is a write in progress and is never reported.

Why it matters:
    A fetch that reaches the damaged position fails (``CorruptRecordException``) or stops: a
    follower cannot replicate past it, consumers stall or skip, and a replay through that
    range fails. On a closed segment it means the disk, a copy, or a crash damaged the file.

Example finding:
    FAIL orders-1 (broker 3): segment 52000: byte 1048576: size = -1937, expected >= 14
    (corrupt): 4.0 MiB after it are unreadable.

How to fix:
    If another replica is healthy, re-replicate this one from it (stop the broker, move the
    partition directory aside, restart; or reassign away and back). If not, the records after
    the position are lost: find the offset range from the evidence and skip it in consumers.
    Check the disk (SMART, dmesg).

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, cells, frame_records, live_replicas, opt_int, severity_option
from auditor.units import human_bytes


class IntegrityTruncation(Check):
    code = "KLA044"
    name = "integrity.truncation"
    title = "Truncated or corrupt segments"
    scope = "partition"
    options = {
        "corrupt_severity": severity_option("FAIL", "severity of corrupt bytes"),
        "cut_severity": severity_option("WARN", "severity of a cut or zero-filled tail of a closed segment"),
    }

    def prefilter(self, batch, ctx):
        """Partitions with a live segment that has a stop reason or trailing bytes."""
        import numpy as np

        seg = batch.segments
        if not len(seg):
            return []
        odd = seg["stop_reason"].notna().to_numpy() | (np.nan_to_num(batch.column("trailing_bytes"), nan=0.0) != 0)
        return batch.groups_where("segments", batch.live_segments() & odd)

    def run(self, data: CheckInput, ctx, opts):
        out = []
        for broker, log_dir, rows in live_replicas(data.segments):
            for r in frame_records(rows):
                reason = r["stop_reason"]
                trailing = opt_int(r["trailing_bytes"]) or 0
                if reason is None and not trailing:
                    continue
                if reason in ("corrupt", "io-error"):
                    severity = opts["corrupt_severity"]
                elif r["is_active"]:
                    continue  # a write in progress
                else:
                    severity = opts["cut_severity"]
                detail = next((n for n in reversed(cells(r["notes"])) if reason and f"({reason})" in n), None)
                out.append(self.finding(
                    severity,
                    f"segment {int(r['base_offset'])}: {detail or f'{trailing} trailing bytes'}: "
                    f"{human_bytes(trailing)} after the last complete batch are unreadable",
                    "Re-replicate this replica from a healthy one (or reassign away and back); if none is healthy, "
                    "skip the offsets after the last good batch in consumers. Check the disk.",
                    evidence=[{"segment": int(r["base_offset"]), "stop_reason": reason, "trailing_bytes": trailing,
                               "last_good_offset": opt_int(r["last_offset"]), "active": bool(r["is_active"]),
                               "note": detail}],
                    topic=data.topic, partition=data.partition, broker_id=broker, log_dir=log_dir,
                    base_offset=int(r["base_offset"])))
        return out
