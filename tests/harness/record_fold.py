"""The deep scan's two record loops, as the record-fold tests drive them: :func:`deep_row` scans a
segment at depth ``deep`` with the C record fold or with the pure-Python loop alone, and
:class:`PythonRecords` counts what the Python loop does while installed."""

from __future__ import annotations

import auditor.scan.segment as segment
from auditor.formats import record_batch as v2
from auditor.scan.segment import SegmentFiles, scan_segment


def deep_row(path, use_c: bool) -> dict:
    """The row of a ``deep`` scan of the segment ``path`` (without its scan time), the C record fold on or off."""
    segment.USE_C_RECORDS = use_c
    try:
        row = scan_segment(SegmentFiles(0, None, {"log": str(path)}), "deep", is_active=False, location={},
                           indexes=False)
    finally:
        segment.USE_C_RECORDS = True
    row.pop("scanned_at_ms")
    return row


class PythonRecords:
    """Counts what the Python record loop (record_batch.iter_records) does: whole-batch loops
    started, and records it yields, while installed."""

    def __init__(self, monkeypatch):
        self.loops = self.records = 0
        original = v2.iter_records

        def counting(*args, **kwargs):
            if kwargs.get("resume") is None:
                self.loops += 1
            for record in original(*args, **kwargs):
                self.records += 1
                yield record
        monkeypatch.setattr(v2, "iter_records", counting)
