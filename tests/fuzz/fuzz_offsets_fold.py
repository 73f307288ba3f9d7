"""The replay of __consumer_offsets: the C fold of plain batches (_coffsets.fold_plain) against the
Python fold (auditor/formats/offsets_records.py fold_records_into / iter_key_values).

Input: the bytes of one __consumer_offsets .log. Checks:

* ``fold_plain`` from byte 0 stores, for the batches before its stop position, exactly what the
  Python fold of the Python walker's batches stores (key -> offset, timestamp, value, where): the
  C parse of every record is independent of Python;
* the hand-over is checked too: at the C stop position the Python side must find a reason the C
  fold documents (not a plain v2 batch, larger than 1 MiB, a record the Python fold notes or
  rejects, an int64 sum that overflows), or the walk's end; a C fold that stopped at a batch it
  should have taken is a disagreement;
* with a read pace (``max_bytes``), folding in steps gives the same store as one call;
* the Python fold and ``iter_key_values`` raise nothing but FormatError;
* every compressed v2 batch folded by ``_coffsets.StreamFold`` (fold_records_into with a BadKeys,
  the stream in pieces of 1 KiB) stores, counts and raises exactly what the Python fold does
  (store, bad keys, records, the FormatError's text), as plain and as transactional records.
"""

from __future__ import annotations


from auditor.formats import offsets_records as orec
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader

from fuzz.common import Disagreement, write

from auditor.formats import _coffsets  # the build under test (tests/fuzz/native.py install)

LABEL = "fuzz.log"
WINDOW_BYTES = 1024 * 1024
INT64 = (-(1 << 63), (1 << 63) - 1)
NOT_FOLDED = 0x07 | 0x08 | 0x10 | 0x20   # codec, LogAppendTime, transactional, control


def _c_would_take(header, data) -> bool:
    """Whether the C fold documents taking this batch (its rules, in Python)."""
    if header.magic != 2 or header.size_bytes > WINDOW_BYTES:
        return False
    attrs = (data[21] << 8) | data[22]
    if attrs & NOT_FOLDED:
        return False
    store, bad = {}, []
    try:
        orec.fold_records_into(store, header, data, False, (LABEL, header.position), bad, label=LABEL)
    except FormatError:
        return False
    if bad:
        return False
    records = list(orec.iter_key_values(header, data, label=LABEL))
    for offset, ts, _key, _value in records:
        if not (INT64[0] <= offset <= INT64[1] and INT64[0] <= ts <= INT64[1]):
            return False
    return True


def _python_fold(reader: LogReader, stop: int) -> tuple[dict, object]:
    """The Python store of every batch before ``stop``, and the header at ``stop`` (None: none)."""
    store: dict = {}
    for header in reader.batches(0):
        data = bytes(reader.read_batch_bytes(header))
        if header.position >= stop:
            return store, (header, data)
        if not _c_would_take(header, data):
            raise Disagreement(f"fold_plain folded the batch at byte {header.position}, which it must hand over")
        orec.fold_records_into(store, header, data, False, (LABEL, header.position), [], label=LABEL)
    return store, None


def _fold(header, batch, transactional: bool, use_c: bool) -> tuple:
    orec.USE_C_STREAM = use_c
    store, bad = {}, orec.BadKeys()
    try:
        n = orec.fold_records_into(store, header, batch, transactional, (LABEL, header.position), bad, label=LABEL)
    except FormatError as exc:
        n = str(exc)
    finally:
        orec.USE_C_STREAM = True
    return store, (bad.first, bad.more, bad.more_first, bad.more_last), n


def _check_stream(header, batch) -> None:
    """StreamFold against the Python loop on one compressed v2 batch."""
    chunk = orec.compression.CHUNK_BYTES
    orec.compression.CHUNK_BYTES = 1024   # records carried across pieces
    try:
        for transactional in (False, True):
            c, python = _fold(header, batch, transactional, True), _fold(header, batch, transactional, False)
            if c != python:
                raise Disagreement(f"StreamFold gave {c[1:]} ({len(c[0])} keys), the Python fold {python[1:]} "
                                   f"({len(python[0])} keys) for the batch at byte {header.position}")
    finally:
        orec.compression.CHUNK_BYTES = chunk


def one_input(data: bytes) -> None:
    path = write("00000000000000000000.log", data)
    with LogReader(path, label=LABEL) as reader:
        store: dict = {}
        stop, folded = _coffsets.fold_plain(reader._fd, 0, reader.size_bytes, store, LABEL)
        expected, at_stop = _python_fold(reader, stop)
        if store != expected:
            raise Disagreement(f"fold_plain stored {len(store)} keys != the Python fold's {len(expected)}: "
                               f"{sorted(set(store.items()) ^ set(expected.items()))[:3]}")
        if at_stop is None:
            if stop != reader.stop_position:
                raise Disagreement(f"fold_plain stopped at {stop}, the Python walk ends at {reader.stop_position}")
        elif at_stop[0].position != stop:
            raise Disagreement(f"fold_plain stopped at {stop}, not at a batch the Python walker yields")
        elif _c_would_take(*at_stop):
            raise Disagreement(f"fold_plain handed over the batch at byte {stop}, which it should have folded")
        for header in reader.batches(stop):
            batch = bytes(reader.read_batch_bytes(header)) if header.size_bytes <= WINDOW_BYTES else None
            if batch is None:
                continue
            if header.magic == 2 and batch[22] & 0x07:
                _check_stream(header, batch)
            try:
                orec.fold_records_into({}, header, batch, header.is_transactional, (LABEL, header.position), [],
                                       label=LABEL)
                for _ in orec.iter_key_values(header, batch, label=LABEL):
                    pass
            except FormatError:
                pass
        # paced: the same replay in steps of at least max_bytes
        step = 1 + (data[0] if data else 0) * 64
        paced: dict = {}
        pos = 0
        while True:
            pos2, _n = _coffsets.fold_plain(reader._fd, pos, reader.size_bytes, paced, LABEL, step)
            if pos2 == pos or pos2 >= stop:
                break
            pos = pos2
        if paced != store:
            raise Disagreement(f"fold_plain in steps of {step} bytes stored another replay than in one call")
