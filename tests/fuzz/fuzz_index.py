"""The 'index' depth and the index readers: .index, .timeindex, .txnindex beside a .log
(auditor/formats/_fixed_index.py, offset_index.py, time_index.py, txn_index.py; the C one-call
segment ends _cwalk.index_ends and the quiet check _cwalk.quiet_facts).

Input (tests/fuzz/common.py split): a control piece (base offset, quiet position, mtime), the .index,
the .timeindex, the .txnindex, and the rest is the .log. Checks:

* ``scan_segment`` at 'index' (and 'headers' with the index files) never raises;
* 'index' with the C call equals 'index' without it. When ``index_ends`` answers, its values were
  computed in C alone (lstat, binary search of both indexes, the first batch and the batches after
  the last index entry): independent of Python. When it returns None the Python path scans the
  segment in both runs (equal by construction);
* ``quiet_facts`` (C) equals ``quiet_facts_py`` (independent implementations; None both or equal),
  and so does ``segment_proof`` (C) with ``segment_proof_py``, with and without a missing file;
* the full read of a small index without numpy equals the numpy read (``_read_all_small`` and
  ``_read_all``: independent), and the tail read's count and last entry equal the full read's
  when the full read has no problem and its entries are a valid prefix;
* ``read_txn_index`` raises nothing.
"""

from __future__ import annotations

import pyarrow as pa
import os
import struct

import auditor.scan.segment as segment
from auditor.formats import _fixed_index, offset_index, time_index
from auditor.formats.txn_index import read_txn_index
from auditor.scan.resume import quiet_facts_py
from auditor.scan.state import segment_proof_py
from auditor.scan.segment import SegmentFiles, scan_segment

from auditor.schema import SEGMENT_SCHEMA

from fuzz.common import Disagreement, scratch, split, write

from auditor.formats import _cwalk  # the build under test (tests/fuzz/native.py install)

IGNORED = {"scanned_at_ms"}
#: base offsets the control byte picks from (a file name's offset: 0, small, large, near int64's end)
BASES = (0, 1, 4, 18, 1000, 2**31 - 1, 2**31, 2**40, 2**63 - 2**31, 2**63 - 1)
#: file mtimes (ns) the control piece's 10th byte picks from: none set, now-ish, and ones whose
#: nanoseconds leave int64 (after 2262, before 1678) or sit at its edges
MTIMES = (None, 1_700_000_000_123_456_789, 2**63 - 1, 2**63, 10**19, -1, -(2**63), -10**19 + 5)


def _paths(base: int, index: bytes, timeindex: bytes, txnindex: bytes, log: bytes) -> dict:
    """One segment's files, alone in this harness's directory."""
    stem = f"index/{base:020d}"
    paths = {"log": str(write(stem + ".log", log)), "index": str(write(stem + ".index", index)),
             "timeindex": str(write(stem + ".timeindex", timeindex))}
    if txnindex:
        paths["txnindex"] = str(write(stem + ".txnindex", txnindex))
    for old in (scratch() / "index").iterdir():
        if str(old) not in paths.values():
            old.unlink()
    return paths


def _row(base: int, paths: dict, depth: str, use_c: bool) -> dict:
    segment.USE_C_WALK = use_c
    try:
        row = scan_segment(SegmentFiles(base, None, dict(paths)), depth, is_active=False, location={})
    finally:
        segment.USE_C_WALK = True
    return row


def _check_reader(path: str, base: int, layout, check_order) -> None:
    full = _fixed_index.read_index(path, base, layout, check_order=check_order)
    if 0 <= base <= _fixed_index._SMALL_MAX_BASE:
        # read_index's own first problem (a size that is not a multiple of the entry) counts in the cap
        first = full.problems[:1] if full.size_bytes % layout.entry_size else []
        numpy = _fixed_index.IndexRead([], 0, full.size_bytes, 0, list(first))
        problems = _fixed_index._Problems(numpy.problems)
        fd = os.open(path, os.O_RDONLY)
        try:
            _fixed_index._read_all(fd, path, base, layout, full.size_bytes // layout.entry_size, numpy, problems,
                                   check_order)
        finally:
            os.close(fd)
        problems.finish(path)
        if (numpy.entries, numpy.entry_count, numpy.zero_tail_bytes, numpy.problems) != \
                (full.entries, full.entry_count, full.zero_tail_bytes, full.problems):
            raise Disagreement(f"{layout.kind}: numpy read {numpy} != plain read {full}")
    tail = _fixed_index.read_index(path, base, layout, tail_only=True, check_order=check_order)
    if not full.problems and full.zero_tail_bytes == 0:
        if tail.entry_count != full.entry_count or tail.entries[-1:] != full.entries[-1:]:
            raise Disagreement(f"{layout.kind}: tail read {tail} != full read {full}")


def one_input(data: bytes) -> None:
    control, index, timeindex, txnindex, log = split(data, 5)
    control = control.ljust(10, b"\0")
    base = BASES[control[0] % len(BASES)]
    (pos,) = struct.unpack_from(">q", control, 1)
    paths = _paths(base, index, timeindex, txnindex, log)
    mtime = MTIMES[control[9] % len(MTIMES)]
    if mtime is not None:
        for path in paths.values():
            os.utime(path, ns=(mtime, mtime))
    rows = [_row(base, paths, "index", True), _row(base, paths, "index", False),
            _row(base, paths, "headers", True)]
    # what collect writes: every value fits its column (one table: Table.from_pylist costs ~1 ms a call)
    pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA)
    with_c, pure = ({k: v for k, v in row.items() if k not in IGNORED} for row in rows[:2])
    if with_c != pure:
        diff = {k: (with_c[k], pure.get(k)) for k in with_c if with_c[k] != pure.get(k)}
        raise Disagreement(f"'index' row with _cwalk.index_ends differs from the pure-Python row: {diff}")
    for p in (pos, 0, max(0, len(log) - 61)):
        c = _cwalk.quiet_facts(paths["log"], paths["index"], paths["timeindex"], base, p)
        py = quiet_facts_py(paths["log"], paths["index"], paths["timeindex"], base, p)
        if c != py:
            raise Disagreement(f"quiet_facts at {p}: C {c} != Python {py}")
    for missing in (None, "index", "txnindex"):
        ps = {k: (v if k != missing else v + ".gone") for k, v in paths.items()}
        c = _cwalk.segment_proof(ps["log"], ps["index"], ps["timeindex"], ps.get("txnindex"))
        py = segment_proof_py(SegmentFiles(base, None, ps))
        if c != py:
            raise Disagreement(f"segment_proof: C {c} != Python {py}")
    _check_reader(paths["index"], base, offset_index.LAYOUT, offset_index._check_order)
    _check_reader(paths["timeindex"], base, time_index.LAYOUT, time_index._check_order)
    if "txnindex" in paths:
        read_txn_index(paths["txnindex"])
