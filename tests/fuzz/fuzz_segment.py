"""The .log walkers at every depth: v2 batches, magic 0/1 messages and wrappers, cut and corrupt
tails (auditor/formats/log_reader.py, record_batch.py, legacy.py, compression.py; the C fold of
_cwalk.walk_v2).

Input: the bytes of one .log. Checks:

* ``scan_segment`` at 'stat', 'headers' and 'deep' never raises (bad input is a note);
* 'headers' with the C fold equals 'headers' without it, row for row. The C fold's totals for the
  batches it takes are computed in C alone (independent of Python); the rest of the file is
  walked by Python in both runs (equal by construction);
* the hand-over is independent too: ``walk_v2`` must stop exactly at the first entry the Python
  walker does not yield as a v2 batch (or where that walker stops), and its totals must equal
  a fold of the Python walker's headers up to there;
* 'deep' with the C record fold (``_cwalk.fold_records``: record count, markers, min / max
  timestamps and the largest step back, each with its offset) equals 'deep' in pure Python: the
  C fold computes its values alone, and must stop exactly at the record
  ``record_batch.iter_records`` raises for, whose error read from that record alone (what the
  fold kept of it: ``refused_record_error``) is the whole batch loop's;
* the inner messages of legacy compressed wrappers walked in C (``_cwalk.legacy_frames`` and
  ``legacy_fold``: the walk's base offsets and the 'deep' fold) give the pure-Python rows;
* every batch's records (``LogReader.records``) and CRC raise nothing but FormatError / OSError.
"""

from __future__ import annotations

import pyarrow as pa
from auditor.formats import legacy
from auditor.formats.compression import CODEC_NAMES
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.formats.record_batch import refused_record_error
import auditor.scan.segment as segment
from auditor.scan.segment import SegmentFiles, scan_segment

from auditor.schema import SEGMENT_SCHEMA

from fuzz.common import Disagreement, write

NAME = "00000000000000000000.log"
IGNORED = {"scanned_at_ms"}


def _row(path, depth: str, use_c: bool) -> dict:
    segment.USE_C_WALK = segment.USE_C_RECORDS = legacy.USE_C_INNER = use_c
    try:
        row = scan_segment(SegmentFiles(0, None, {"log": str(path)}), depth, is_active=False, location={},
                           indexes=False)
    finally:
        segment.USE_C_WALK = segment.USE_C_RECORDS = legacy.USE_C_INNER = True
    return row


def _fits(rows: list[dict]) -> None:
    """What collect writes: every value fits its column. One table for all of an input's rows
    (Table.from_pylist costs ~1 ms a call whatever its rows, more than a scan of a small file)."""
    pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA)


def _compared(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in IGNORED}


def _python_fold(headers) -> dict:
    """What walk_v2 must report for these v2 headers (scan.py's fold)."""
    out = {"batch_count": len(headers), "record_count": 0, "transactional_batches": 0, "max_timestamp_ms": None,
           "min_first_timestamp_ms": None, "codec_mask": 0, "timestamp_type_mask": 0, "control_positions": []}
    for h in headers:
        out["record_count"] += h.record_count
        out["transactional_batches"] += h.is_transactional
        if h.max_timestamp_ms != -1 and (out["max_timestamp_ms"] is None or h.max_timestamp_ms > out["max_timestamp_ms"]):
            out["max_timestamp_ms"] = h.max_timestamp_ms
        if h.timestamp_type == "LogAppendTime":
            first = h.max_timestamp_ms
        elif h.has_delete_horizon or h.record_count == 0:
            first = -1
        else:
            first = h.base_timestamp_ms
        if first != -1 and (out["min_first_timestamp_ms"] is None or first < out["min_first_timestamp_ms"]):
            out["min_first_timestamp_ms"] = first
        out["codec_mask"] |= 1 << CODEC_NAMES.index(h.codec)
        out["timestamp_type_mask"] |= 1 << (h.timestamp_type == "LogAppendTime")
        if h.is_control:
            out["control_positions"].append(h.position)
    if headers:
        out.update(first_base_offset=headers[0].base_offset, first_max_timestamp_ms=headers[0].max_timestamp_ms,
                   last_offset=headers[-1].last_offset, last_max_timestamp_ms=headers[-1].max_timestamp_ms,
                   last_position=headers[-1].position)
    else:
        out.update(first_base_offset=None, first_max_timestamp_ms=None, last_offset=None,
                   last_max_timestamp_ms=None, last_position=None)
    return out


def _check_c_fold(path) -> None:
    with LogReader(path) as reader:
        folded = reader.fold_v2_headers(0)
        if folded is None:
            raise Disagreement("the _cwalk extension is not loaded")
        v2 = []
        stop = None
        for h in reader.batches(0):
            if h.magic != 2:
                stop = h.position
                break
            v2.append(h)
        if stop is None:
            stop = reader.stop_position
        if folded["stop_position"] != stop:
            raise Disagreement(f"walk_v2 stopped at {folded['stop_position']}, the Python walker's first "
                               f"non-v2 entry or stop is at {stop}")
        want = _python_fold(v2)
        got = {k: folded[k] for k in want}
        if got != want:
            raise Disagreement(f"walk_v2 folded {got}, the Python walker's headers fold to {want}")
        for h in v2 + [b for b in reader.batches(stop) if b.position >= stop][:64]:
            try:
                reader.crc_ok(h)
            except (FormatError, OSError):
                pass
            error = None
            try:
                for _ in reader.records(h):
                    pass
            except (FormatError, OSError) as exc:
                error = exc
            if h.magic == 2:
                _check_refusal(reader, h, error)


def _check_refusal(reader: LogReader, batch, error) -> None:
    """The C record fold stops at a record exactly when the Python loop raises there, and the error
    read from that record alone is the whole loop's (segment.py falls back to the whole batch when
    it is not, which hides a disagreement from the row comparison)."""
    try:
        done = reader.fold_record_times(batch, (None,) * 6)
    except (FormatError, OSError):
        return   # before any record: compared through the rows
    if done is None:
        raise Disagreement(f"fold_record_times gave None for the v2 batch at byte {batch.position}")
    fold, refused = done
    if refused is None:
        if error is not None:
            raise Disagreement(f"the C record fold read every record; Python raised {error}")
        return
    again = refused_record_error(batch, refused, label=reader.label)
    if again is None or str(again) != str(error):
        raise Disagreement(f"the C record fold refused record {refused.index} at {refused.position}; read alone "
                           f"it gives {again}, the whole batch {error}")


def one_input(data: bytes) -> None:
    path = write(NAME, data)
    rows = [_row(path, "stat", True)]
    with_c = _compared(_row(path, "headers", True))
    rows.append(_row(path, "headers", False))   # equal to with_c, or a Disagreement below
    pure = _compared(rows[-1])
    if with_c != pure:
        diff = {k: (with_c[k], pure[k]) for k in with_c if with_c[k] != pure.get(k)}
        raise Disagreement(f"'headers' row with the C fold differs from the pure-Python row: {diff}")
    with_c = _compared(_row(path, "deep", True))
    rows.append(_row(path, "deep", False))
    pure = _compared(rows[-1])
    if with_c != pure:
        diff = {k: (with_c[k], pure[k]) for k in with_c if with_c[k] != pure.get(k)}
        raise Disagreement(f"'deep' row with the C record fold differs from the pure-Python row: {diff}")
    _fits(rows)
    _check_c_fold(path)
