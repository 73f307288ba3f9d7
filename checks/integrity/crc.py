"""KLA050 integrity.crc: batches whose stored CRC does not match their bytes.

What it checks:
    Every segment scanned at depth ``deep`` carries ``crc_failures``: the number of batches whose
    CRC-32C (v2) or CRC-32 (magic 0/1) differs from the one computed over the batch's bytes.

Why it matters:
    The broker verifies CRCs only when it recompresses or when a consumer asks for it
    (``check.crcs``); a corrupt batch on a follower or in an old segment sits unnoticed until a
    replay or a reassignment reads it and fails (``CorruptRecordException``), or worse, a
    consumer without CRC checks gets garbage.

Example finding:
    FAIL orders-3 on broker 2 /data/kafka-1, segment 00000000000001234567.log: 1 batch fails
    its CRC (first at byte 5242880, offsets 1240000..1240099).

How to fix:
    If another replica is healthy, let this one re-replicate: stop the broker, move the
    partition directory away, restart (or reassign the replica away and back). If every replica
    is corrupt, the records are lost: find the range from the evidence, and reset consumers
    past it. Check the disk (SMART, dmesg) of the broker that holds the bad copy.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, cells, opt_int, severity_option


class IntegrityCrc(Check):
    code = "KLA050"
    name = "integrity.crc"
    title = "CRC failures"
    scope = "partition"
    options = {"severity": severity_option("FAIL", "the severity of a CRC failure")}

    def prefilter(self, batch, ctx):
        """Partitions with a row (any state) that has CRC failures."""
        seg = batch.segments
        if seg is None or not len(seg) or "crc_failures" not in seg:
            return []
        return batch.groups_where("segments", (seg["crc_failures"].fillna(0) > 0).to_numpy())

    def run(self, data: CheckInput, ctx, opts):
        seg = data.segments
        if seg is None or not len(seg) or "crc_failures" not in seg:
            return []
        bad = seg[seg["crc_failures"].fillna(0) > 0]
        out = []
        for row in bad.itertuples(index=False):
            crc_notes = [n for n in cells(row.notes) if "crc" in n.lower()]
            out.append(self.finding(
                opts["severity"],
                f"{int(row.crc_failures)} batch(es) of segment {row.base_offset} fail their CRC",
                "Re-replicate this replica from a healthy one (or reassign it away and back); check the "
                "broker's disk. If every replica is corrupt, reset consumers past the evidence's offsets.",
                thresholds={"crc_failures_allowed": 0},
                evidence=[{"file": f"{row.log_dir}/{row.dir_name}/{int(row.base_offset):020d}.log", "note": n}
                          for n in crc_notes] or [{"crc_failures": int(row.crc_failures)}],
                broker_id=opt_int(row.broker_id), log_dir=row.log_dir, topic=row.topic,
                partition=opt_int(row.partition), base_offset=opt_int(row.base_offset),
            ))
        return out
