"""Whole batches of KRaft metadata records: the C framing and decoding of _cmessage.metadata_batch
against the Python framing (auditor/formats/metadata_records.py iter_records: its fast path and
offsets_records.iter_key_values) and the Python readers of each record.

Input: one v2 batch as it sits in a .log (its batchLength and magic are set from the input's size,
so that the batch reaches the record framing; the rest is as given). Checks:

* the framing decision is independent: ``metadata_batch`` returns None exactly when the Python
  fast path (``_fast_records``) gives up, or when an offset or timestamp sum leaves int64 (the C
  side's own rule);
* every record C frames is the Python framing's record (offset, timestamp, key, value), in
  order (all of them: ``start_offset`` is the lowest int64); a record C decodes itself gives the
  entry the Python reader's fields make (independent);
  a record it hands to ``fallback`` is the Python path's by construction;
* with ``start_offset`` the batch's baseOffset (the metadata log reader passes its state's base
  offset), the entries are exactly the records at or above it, i.e. all of them: a negative
  offsetDelta (a record below its batch's baseOffset, corrupt) makes the batch irregular for both
  framings, and the Python path (metadata_log._python_entries) notes such a record;
* a ``fallback`` that returns None leaves that record out: with one that always does, the
  entries are exactly the records C decodes itself;
* ``_cmessage.metadata_batch`` refuses arguments its callers never pass (a frame table of the
  wrong size, data that is not a buffer, missing arguments) with an exception, never a crash;
* ``iter_records`` and the record value decoders raise nothing but FormatError.
"""

from __future__ import annotations

import struct

from auditor.formats import kafka_message as km
from auditor.formats import metadata_records as mrec
from auditor.formats.errors import FormatError
from auditor.formats.record_batch import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, parse_v2_header

from fuzz.common import Disagreement, exact_buffer

INT64 = (-(1 << 63), (1 << 63) - 1)


def _fill_frames() -> None:
    """Every metadata (api key, version) the C batch path may decode (as the metadata log reader
    fills the table as it meets them)."""
    for spec in km.specs("kafka_metadata"):
        if spec.type != "metadata" or spec.api_key is None:
            continue
        low, high = spec.valid_versions
        for version in range(low, (high if high is not None else low) + 1):
            mrec.remember_frame(spec.api_key, version, spec.name, spec.reader(version))


_fill_frames()


def _python_entry(offset, ts, key, value):
    """What the C path must give for a record it decodes itself: the Python reader's fields."""
    frame = mrec.read_frame(value)
    hit = mrec.C_FRAMES[frame.api_key << 7 | frame.version] if frame.api_key < 128 and frame.version < 128 else None
    name, version, dec = hit
    return ("C", offset, ts, name, version, dec.fallback(value, frame.body_position, len(value), "fuzz", 0))


def _refused_arguments(batch: bytes, count: int) -> None:
    """The argument checks of _cmessage.metadata_batch (its callers never fail them)."""
    c = mrec._cmessage
    good = (batch, count, 0, 0, None, 0, mrec.C_FRAMES, print, print, "fuzz", 0)
    for args, error in (((batch, count, 0, 0, None, 0, [None] * 3) + good[7:], ValueError),
                        ((5,) + good[1:], TypeError), (good[:5], TypeError)):
        try:
            c.metadata_batch(*args)
        except error:
            continue
        raise Disagreement(f"metadata_batch took bad arguments ({error.__name__} expected)")


def one_input(data: bytes) -> None:
    if len(data) < RECORD_BATCH_OVERHEAD:
        return
    batch = bytearray(data)
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    batch[16] = 2
    batch = bytes(batch)
    header = parse_v2_header(batch, 0, 0)
    if mrec._cmessage is not None and header.record_count is not None and header.record_count >= 0:
        _refused_arguments(batch, header.record_count)
    try:
        records = list(mrec.iter_records(header, batch, label="fuzz"))
    except FormatError:
        records = None
    try:
        fast = mrec._fast_records(header, batch) if header.codec == "none" else None
    except (mrec._Irregular, IndexError):
        fast = None
    factory = lambda label, position, offset, ts, _ctl, name, version, fields: ("C", offset, ts, name, version, fields)  # noqa: E731
    fallback = lambda offset, ts, key, value: ("PY", offset, ts, key, value)  # noqa: E731
    # start_offset: the lowest int64, so that no record is left out (the default 0 leaves out the
    # records below offset 0, which a negative offsetDelta makes: that rule is checked apart below)
    it = mrec.c_metadata_batch(header, exact_buffer(batch), factory, fallback, label="fuzz", position=0,
                               start_offset=INT64[0])
    if header.codec != "none":
        if it is not None:
            raise Disagreement("metadata_batch took a compressed batch")
        return
    overflow = fast is not None and any(not (INT64[0] <= o <= INT64[1] and INT64[0] <= t <= INT64[1])
                                        for o, t, _k, _v in fast)
    if (it is None) != (fast is None or overflow):
        raise Disagreement(f"metadata_batch framed={it is not None}, Python fast path framed={fast is not None} "
                           f"(int64 overflow: {overflow})")
    if it is None:
        return
    if records != fast:
        raise Disagreement("the Python fast path and iter_records frame the batch differently")
    entries = list(it)
    if len(entries) != len(fast):
        raise Disagreement(f"metadata_batch gave {len(entries)} entries for {len(fast)} records")
    start = header.base_offset
    kept = [e[1] for e in mrec.c_metadata_batch(header, exact_buffer(batch), factory, fallback, label="fuzz",
                                                 position=0, start_offset=start)]
    if kept != [offset for offset, _ts, _k, _v in fast]:
        raise Disagreement(f"metadata_batch with start_offset {start} kept offsets {kept}")
    dropped = mrec.c_metadata_batch(header, exact_buffer(batch), factory, lambda *_record: None, label="fuzz",
                                    position=0, start_offset=INT64[0])
    if list(dropped) != [e for e in entries if e[0] == "C"]:
        raise Disagreement("a fallback returning None did not leave out exactly the records C hands over")
    for entry, (offset, ts, key, value) in zip(entries, fast):
        if entry[0] == "PY":
            if entry[1:] != (offset, ts, key, value):
                raise Disagreement(f"fallback got {entry[1:]}, the Python framing {(offset, ts, key, value)}")
            continue
        try:
            want = _python_entry(offset, ts, key, value)
        except (FormatError, TypeError) as exc:
            raise Disagreement(f"C decoded record {offset} as {entry}, Python: {exc}") from None
        if repr(entry) != repr(want):
            raise Disagreement(f"C decoded record {offset} as {entry!r}, Python as {want!r}")
    for _offset, _ts, key, value in records or []:
        for call in (lambda: mrec.decode_metadata_value(value), lambda: mrec.control_key(key)):
            try:
                call()
            except FormatError:
                pass
