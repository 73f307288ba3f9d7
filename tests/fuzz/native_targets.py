"""What the native libFuzzer harnesses (tests/fuzz/native/driver.c, built by native.build_native)
run per input: plain Python, not instrumented, that hands the input to the C decoders and checks
what C alone can be held to. Only the C code is instrumented, so these run at thousands of
executions per second where the atheris harnesses (which trace every Python line and compare
each C result with the pure-Python decoder) run at tens to hundreds. The C-vs-Python agreement
stays the atheris harnesses' job (tests/fuzz/fuzz_*.py); these are there for the sanitizers'
sake, on many more inputs.

Each target reads the input in the same layout as an atheris harness, so both share the
committed seeds (fuzz.targets.NATIVE). Checks: no sanitizer report, no
exception but the documented refusals, and the C-only invariants each target names.
"""

from __future__ import annotations

import os
import struct

from auditor.formats import _cmessage, _coffsets, _cwalk
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError
from auditor.keys import _ckeys
from auditor.keys.partition_keys import scan_partition_keys
from auditor.keys.sketches import KeyStats

from fuzz.common import Disagreement, exact_buffer, scratch, split, write

#: a decompression cap well under the tool's 256 MiB: the native runs are about memory safety at
#: many executions per second; the cap itself is checked by the atheris harness and the unit tests
MAX_DECOMPRESSED = 4 * 1024 * 1024
LABEL = "fuzz.log"
SMALL = {"capacity": 1, "sample_size": 2}   # as fuzz_key_fold: a sketch fold every few distinct keys


_PATHS: dict = {}


def _log(data, name: str = "native/00000000000000000000.log") -> str:
    """``data`` as a scratch file (its path made once: pathlib per execution costs more than the C)."""
    path = _PATHS.get(name)
    if path is None:
        path = _PATHS[name] = str(write(name, b""))
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


_MEMFD: list = []


def _input_fd(data) -> int:
    """``data`` as the contents of one anonymous file of this process (memfd_create: a regular tmpfs
    file with no path), rewritten per input: the fd-taking decoders (walk_v2, fold_plain) read it
    with pread as they read a .log, without the open, close and path lookups of a named scratch file
    each execution. Not closed: reused by the next input."""
    if not _MEMFD:
        _MEMFD.append(os.memfd_create("kla-native-input", os.MFD_CLOEXEC))
    fd = _MEMFD[0]
    os.ftruncate(fd, 0)
    if len(data):
        os.pwrite(fd, data, 0)
    return fd


def _v2_batches(data: memoryview):
    """(header, batch bytes) of the consecutive v2 batches at the start of ``data`` (the walker's
    framing without its file reads: parse_v2_header on the buffer)."""
    pos = 0
    while pos + v2.RECORD_BATCH_OVERHEAD <= len(data):
        try:
            header = v2.parse_v2_header(data, pos, pos)
        except FormatError:
            return
        if header.magic != 2 or header.size_bytes < v2.RECORD_BATCH_OVERHEAD or pos + header.size_bytes > len(data):
            return
        yield header, data[pos:pos + header.size_bytes]
        pos += header.size_bytes


def c_walk(data: memoryview) -> None:
    """_cwalk.walk_v2 over the input as a .log (its stop must be a position in the file), then
    _cwalk.fold_records over the records of every v2 batch framed at the start of the input, each
    in a buffer of exactly its size, the fold state carried from batch to batch as 'deep' does;
    the input as a legacy wrapper's inner message set too (_legacy_set)."""
    folded = _cwalk.walk_v2(_input_fd(data), 0, len(data))
    if not 0 <= folded["stop_position"] <= len(data):
        raise Disagreement(f"walk_v2 stopped at {folded['stop_position']}, outside the file")
    _legacy_set(data)
    _refused_once("c_walk", lambda: _cwalk.walk_v2(0, 5, 4),
                  lambda: _cwalk.fold_records(b"", 0, 0, 0, 0, None, False, "x", None, None, None, None, None))
    state = (None,) * 6
    for batch, raw in _v2_batches(data):
        try:
            records, start = v2.record_bytes(batch, raw, label=LABEL, max_decompressed_bytes=MAX_DECOMPRESSED)
        except (FormatError, OSError):
            continue
        log_append = batch.max_timestamp_ms if batch.timestamp_type == v2.LOG_APPEND_TIME else None
        facts = (batch.base_offset, batch.base_timestamp_ms, log_append, batch.is_control)
        out = _cwalk.fold_records(exact_buffer(memoryview(records)[start:]), 0, batch.record_count, *facts, *state)
        pieces = _in_pieces(memoryview(records)[start:], batch.crc, batch.record_count, facts, state)
        if pieces != out:
            raise Disagreement(f"RecordFold in pieces gave {pieces}, fold_records {out}")
        if out is not None:
            state = tuple(out[:6])
            refused = out[9]
            if refused is None and out[6] != batch.record_count:
                raise Disagreement(f"fold_records folded {out[6]} records of {batch.record_count}")
            if refused is not None and (refused[0] != out[6] or not 0 <= refused[1] <= len(records) - start):
                raise Disagreement(f"fold_records refused record {refused} after folding {out[6]}")


def _legacy_set(data: memoryview) -> None:
    """_cwalk.legacy_frames over the input (in an exact buffer) as a decompressed inner message set:
    it stops inside it; legacy_fold then folds exactly the messages it counted, as relative offsets
    (the largest base) and with a LogAppendTime."""
    records = exact_buffer(data)
    count, _first, _last, stop = _cwalk.legacy_frames(records)
    if stop is not None and not 0 <= stop <= len(data) - 12:
        raise Disagreement(f"legacy_frames stopped at {stop}, outside the set of {len(data)} bytes")
    for base, relative, log_append in ((0, False, None), (2**64 - 1, True, 5)):
        out = _cwalk.legacy_fold(records, count, base, relative, log_append, *(None,) * 6)
        if out[6] != count or out[9] is not None:
            raise Disagreement(f"legacy_fold folded {out[6]} of the {count} inner messages legacy_frames read")


#: piece sizes RecordFold is fed in (picked by the batch's CRC): cuts inside varints and bodies
PIECE_SIZES = ((1, 4093), (2, 5, 2048), (7, 1, 64, 1024), (4096,), (3, 1000, 1))


def _in_pieces(records: memoryview, crc: int, count: int, facts: tuple, state: tuple):
    """_cwalk.RecordFold fed ``records`` cut in the sizes PIECE_SIZES[crc] cycles through, each piece
    in a buffer of exactly its size: its result must be fold_records' over the whole (compared by
    the caller); all the bytes counted, and a refused record's kept bytes those of the records there."""
    fold = _cwalk.RecordFold(count, *facts, *state)
    sizes = PIECE_SIZES[crc % len(PIECE_SIZES)]
    pos = i = 0
    while pos < len(records):
        n = sizes[i % len(sizes)]
        fold.feed(exact_buffer(records[pos:pos + n]))
        pos += n
        i += 1
    out = fold.result()
    if fold.fed != len(records):
        raise Disagreement(f"RecordFold counted {fold.fed} bytes fed of {len(records)}")
    kept = fold.refused_bytes()
    if (out is None or out[9] is None) != (kept is None):
        raise Disagreement(f"RecordFold kept {kept!r} with the result {out}")
    if kept is not None and kept != bytes(records[out[9][1]:out[9][1] + len(kept)]):
        raise Disagreement(f"RecordFold kept {kept.hex()} at {out[9][1]}, not the records' bytes there")
    return out


#: as fuzz_index: base offsets and file mtimes the control piece picks from
BASES = (0, 1, 4, 18, 1000, 2**31 - 1, 2**31, 2**40, 2**63 - 2**31, 2**63 - 1)
MTIMES = (None, 1_700_000_000_123_456_789, 2**63 - 1, 2**63, 10**19, -1, -(2**63), -10**19 + 5)


def c_index(data: memoryview) -> None:
    """_cwalk.index_ends, quiet_facts and segment_proof on the files of fuzz_index's layout."""
    control, index, timeindex, txnindex, log = split(bytes(data), 5)
    control = control.ljust(10, b"\0")
    base = BASES[control[0] % len(BASES)]
    (pos,) = struct.unpack_from(">q", control, 1)
    stem = f"native-index/{base:020d}"
    paths = [str(write(stem + ext, part)) for ext, part in
             ((".log", log), (".index", index), (".timeindex", timeindex), (".txnindex", txnindex))]
    for old in (scratch() / "native-index").iterdir():
        if str(old) not in paths:
            old.unlink()
    mtime = MTIMES[control[9] % len(MTIMES)]
    if mtime is not None:
        for path in paths:
            os.utime(path, ns=(mtime, mtime))
    _cwalk.index_ends(paths[0], paths[1], paths[2], base)
    for p in (pos, 0, max(0, len(log) - 61)):
        _cwalk.quiet_facts(paths[0], paths[1], paths[2], base, p)
    for gone in (None, 1, 3):
        ps = [p + ".gone" if i == gone else p for i, p in enumerate(paths)]
        _cwalk.segment_proof(*ps[:3], ps[3] if txnindex else None)


def c_offsets(data: memoryview) -> None:
    """_coffsets.fold_plain over the input as a __consumer_offsets .log: its stop is a position in
    the file, and folding in steps of max_bytes stores what one call stores; StreamFold over the
    input as one batch's decompressed records, in pieces."""
    fd, size = _input_fd(data), len(data)
    store: dict = {}
    stop, _n = _coffsets.fold_plain(fd, 0, size, store, LABEL)
    if not 0 <= stop <= size:
        raise Disagreement(f"fold_plain stopped at {stop}, outside the file")
    # at most ~32 steps: each call reads a window of up to 64 KiB from its start, so steps of a
    # few bytes over a 100 KiB input cost more than all the rest (the atheris harness keeps them)
    step = max(1 + (data[0] if size else 0) * 64, size // 32)
    paced: dict = {}
    pos = 0
    while True:
        pos2, _n = _coffsets.fold_plain(fd, pos, size, paced, LABEL, step)
        if pos2 == pos or pos2 >= stop:
            break
        pos = pos2
    _refused_once("c_offsets", lambda: _coffsets.fold_plain(0, 5, 4, {}, LABEL),
                  lambda: _coffsets.fold_plain("fd", 0, 0, {}, LABEL),
                  lambda: _coffsets.StreamFold(-1, 0, 0, None, {}, False, None),
                  lambda: _coffsets.StreamFold(0, 0, 0, None, [], False, None),
                  lambda: _coffsets.StreamFold.__new__(_coffsets.StreamFold).feed(b""),
                  lambda: _coffsets.StreamFold.__new__(_coffsets.StreamFold).result())
    if paced != store:
        raise Disagreement(f"fold_plain in steps of {step} bytes stored another replay than in one call")
    # the input after its first byte as one compressed batch's decompressed records (StreamFold), fed
    # in pieces of 1..64 bytes; the first byte is recordsCount, the length picks LogAppendTime and
    # transactional
    raw = bytes(data)
    count = raw[0] if size else 0
    stream = _coffsets.StreamFold(count, (1 << 63) - 20 if size % 5 == 0 else 7, 1000, 5 if size % 2 else None, {},
                                  size % 3 == 0, (LABEL, 0))
    pos = i = 0
    while pos < size - 1:
        n = 1 + raw[i % size] % 64
        stream.feed(exact_buffer(raw[1 + pos:1 + pos + n]))
        pos, i = pos + n, i + 1
    folded, first_bad, more, _first, _last, refused = stream.result()
    if folded > count or len(first_bad) > 3 or folded < len(first_bad) + more or \
            (refused is not None and not 0 <= refused[1] <= max(size - 1, 0)):
        raise Disagreement(f"StreamFold folded {folded} of {count} records, bad keys {first_bad} + {more}, "
                           f"refused {refused}")


def c_keys(data: memoryview) -> None:
    """_ckeys.KeyFold: the production walk (scan_partition_keys with the C fold, whole and
    sampled, as fuzz_key_fold), add_records on the input as one batch's records (exact buffer,
    both timestamp types), the same records through records_feed in pieces (with limits), state()
    and load() (_state_checks), and the argument refusals."""
    raw = bytes(data)
    (scratch() / "native-keys" / "keyfold-0").mkdir(parents=True, exist_ok=True)
    _log(raw, "native-keys/keyfold-0/00000000000000000000.log")
    sample = None if not raw or raw[0] < 128 else 1 + raw[0] * 8
    for mode in {None, sample}:
        scan_partition_keys(scratch() / "native-keys" / "keyfold-0", use_c=True, sample_bytes=mode, prefix_bytes=2,
                            **SMALL)
    stats = KeyStats(**SMALL)
    fold = stats.c_fold()
    count = raw[0] if raw else 0
    added = fold.add_records(exact_buffer(raw[1:]), 0, count, 7, (1 << 63) - 5000,
                             1_700_000_000_000 if len(raw) % 2 else None)
    if added is not None and added[0] > count:
        raise Disagreement(f"add_records added {added[0]} records of {count}")
    fold.records_begin(count, 7, (1 << 63) - 5000, 1_700_000_000_000 if len(raw) % 2 else None)
    pos = i = 0
    while pos < len(raw) - 1:   # the same records in pieces of 1..64 bytes (the key scan's compressed path)
        n = 1 + raw[i % len(raw)] % 64
        fold.records_feed(exact_buffer(raw[1 + pos:1 + pos + n]), count if i % 3 else i)
        pos, i = pos + n, i + 1
    fed = fold.records_end()
    if fed[0] > count or fed[3] > max(len(raw) - 1, 0):
        raise Disagreement(f"records_feed added {fed[0]} records of {count}, the next at {fed[3]}")
    twin = fold.copy()   # (the key scan's copy before a long stream, swapped back when the stream fails)
    fold.swap(twin)
    if _normal(twin.state()) != _normal(fold.state()):
        raise Disagreement("KeyFold.copy() holds another state than the fold's")
    _state_checks(raw)
    _ckeys.KeyFold.key_id(raw[:300])
    _refusals_once()


#: state() positions that list hash-table contents (heavy, sample, info, buffer, pending,
#: first_seen, first_pending): their order is the table's, which a load may change
_UNORDERED = (9, 10, 11, 12, 13, 15, 16)
#: what load() may raise for a state it refuses (never a crash, never a half-loaded fold that crashes later)
_LOAD_REFUSED = (TypeError, ValueError, RuntimeError, OverflowError)


def _normal(state: tuple) -> tuple:
    return tuple(sorted(x, key=repr) if i in _UNORDERED else x for i, x in enumerate(state))


def _state_checks(raw: bytes) -> None:
    """KeyFold.state() and load(): a fold fed the input's bytes as many short keys (tables that
    fill and fold), its state loaded into a fold of the same shape gives the same state; loaded
    into a fold of tiny tables (capacity and buffer of 1), load's own table growth runs; a state
    damaged where the input says is refused with an exception, or loaded, never a crash."""
    rich = KeyStats(capacity=8, sample_size=4)
    fold = rich.c_fold()
    for i in range(0, min(len(raw), 256), 2):
        fold.add(raw[i:i + 2], raw[i] - 2, i, None if raw[i] & 1 else i * 7)
    state = fold.state()
    again = KeyStats(capacity=8, sample_size=4).c_fold()
    again.load(state)
    if _normal(again.state()) != _normal(state):
        raise Disagreement("KeyFold.load(state()) gave another state")
    factory = len  # any callable: load and state make no KeyInfo
    tiny = _ckeys.KeyFold(rich.hll.precision, 1, 4, 1, 64, factory)
    tiny.load(state)
    tiny.state()
    if len(raw) > 1:
        damaged = list(state)
        at, how = raw[-1] % len(state), raw[-2] % 5
        value = damaged[at]
        if how == 0:
            damaged[at] = None
        elif how == 1 and isinstance(value, list) and value:   # an entry of another shape
            damaged[at] = value[:-1] + [(raw[0],) * (raw[0] % 4)]
        elif how == 2 and isinstance(value, (list, bytes)):    # one more entry or byte: the first again,
            # a list's with its second field one less (first_seen: an earlier offset for an id it holds)
            extra = value[:1]
            if extra and isinstance(extra[0], tuple) and len(extra[0]) > 1 and isinstance(extra[0][1], int):
                extra = [(extra[0][0], extra[0][1] - 1, *extra[0][2:])]
            damaged[at] = value + extra
        elif how == 3 and isinstance(value, list) and value and isinstance(value[0], tuple):  # an id elsewhere
            damaged[at] = [(value[0][0] ^ 1, *value[0][1:]), *value[1:]]
        else:
            damaged[at] = -1 if isinstance(value, int) else value
        try:
            KeyStats(capacity=8, sample_size=4).c_fold().load(tuple(damaged))
        except _LOAD_REFUSED:
            pass
        try:
            again.load(state)   # not empty any more
        except RuntimeError:
            pass
        else:
            raise Disagreement("KeyFold.load into a fold that holds records was taken")


_REFUSALS_DONE: set = set()


def _refused_once(name: str, *calls) -> None:
    """Argument refusals the callers never make (a start past the end, a state of another type):
    each call must raise, never crash; once per process and target."""
    if name in _REFUSALS_DONE:
        return
    _REFUSALS_DONE.add(name)
    for call in calls:
        try:
            call()
        except _LOAD_REFUSED:
            continue
        raise Disagreement(f"{name}: a call with arguments it must refuse was taken")


def _refusals_once() -> None:
    fold = KeyStats(**SMALL).c_fold()
    _refused_once("c_keys", lambda: _ckeys.KeyFold(12, 1, 1, 1, 0, 5), lambda: _ckeys.KeyFold(3, 1, 1, 1, 0, len),
                  lambda: fold.__init__(12, 1, 1, 1, 0, len), lambda: fold.add_records(b"", 1, 0, 0, 0, None),
                  lambda: fold.walk(0, 5, 4, 0), lambda: _ckeys.KeyFold.__new__(_ckeys.KeyFold).state(),
                  lambda: fold.records_feed(b"\x00"), lambda: fold.records_end(),
                  lambda: fold.records_begin(-1, 0, 0, None), lambda: fold.swap(5),
                  lambda: _ckeys.KeyFold.__new__(_ckeys.KeyFold).copy())


def c_message(data: memoryview) -> None:
    """_cmessage.Decoder.c_decode, in fuzz_message's layout: its program compiler (0xFE) and odd
    call forms (0xFF) as there; any other mode byte: two bytes naming a (message, version), then
    the body, decoded exact (even mode) or not, from an exact buffer, by the C decoder alone."""
    from fuzz import fuzz_message as fm

    raw = bytes(data)
    if not raw:
        return
    mode, body = raw[0], raw[1:]
    if mode == fm.PROGRAM_MODE:
        fm._program_mode(body)
        return
    if mode == fm.CALLS_MODE:
        fm._calls_mode(body)
        return
    n = struct.unpack_from(">H", body)[0] if len(body) >= 2 else 0
    spec, version = fm.TARGETS[n % len(fm.TARGETS)]
    if not spec.has_version(version):
        return
    _python, c = fm._readers(spec, version, mode % 2 == 0)
    if c is not None:
        c.c_decode(exact_buffer(body), 2, len(body))


def c_metadata_batch(data: memoryview) -> None:
    """_cmessage.metadata_batch on fuzz_metadata_batch's input (one v2 batch, its batchLength and
    magic set from the input's size), every entry iterated, with a fallback that keeps and one
    that drops the records C hands over."""
    from fuzz import fuzz_metadata_batch as fmb  # noqa: F401  (fills the frame table)
    from auditor.formats import metadata_records as mrec

    if len(data) < v2.RECORD_BATCH_OVERHEAD:
        return
    batch = bytearray(data)
    struct.pack_into(">i", batch, 8, len(batch) - v2.LOG_OVERHEAD)
    batch[16] = 2
    header = v2.parse_v2_header(bytes(batch), 0, 0)
    if header.record_count is None or header.record_count < 0:
        return
    factory = lambda label, position, offset, ts, _ctl, name, version, fields: (offset, name, fields)  # noqa: E731
    for fallback in (lambda offset, ts, key, value: (offset, key, value), lambda *_record: None):
        it = _cmessage.metadata_batch(exact_buffer(batch), header.record_count, header.base_offset,
                                      header.base_timestamp_ms,
                                      header.max_timestamp_ms if header.timestamp_type == v2.LOG_APPEND_TIME else None,
                                      -(1 << 63), mrec.C_FRAMES, factory, fallback, "fuzz", 0)
        if it is not None:
            for _entry in it:
                pass


#: name -> the function one input goes to (driver.c's FUZZ_TARGET)
TARGETS = {"c_walk": c_walk, "c_index": c_index, "c_offsets": c_offsets, "c_keys": c_keys, "c_message": c_message,
           "c_metadata_batch": c_metadata_batch}
