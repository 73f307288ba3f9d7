"""The files of one ``__consumer_offsets`` replica dir, replayed in offset order into a fold.

:func:`replay_partition_dir` walks every live segment and hands each entry to the fold
(``auditor.cluster.consumer_groups.OffsetsFold``: ``store``, ``pending``, ``records``, ``notes``,
``add_batch``, ``control``, ``bad_keys``). Runs of plain batches (v2, uncompressed, CreateTime,
neither transactional nor control, every record storable without a note) are replayed in C when
the extension is built (:func:`auditor.formats.offsets_records.fold_plain_batches`, one call per
run, no Python object per batch); every other entry, and every entry while a transaction is open,
goes through the Python path (:func:`_fold_batch`), which is the whole replay without the
extension. Both give the same store and notes (tests/test_offsets_c_fold.py).

Read-only: ``os.open(O_RDONLY)`` and pread (LogReader, :class:`_Window`, the C replay); no mmap.
``pace`` (``collect --max-read-rate``: ``auditor.scan.pagecache.ReadRate.pace``) is called after
about every ``PACE_BYTES`` read and after each segment.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterable

from auditor.formats import offsets_records as orec
from auditor.formats.errors import FormatError
from auditor.formats.filenames import parse_partition_dir, parse_segment_file
from auditor.formats.log_reader import CHUNK_BYTES, LogReader

OFFSETS_TOPIC = "__consumer_offsets"


def offsets_partition_dirs(log_dirs: Iterable[str | os.PathLike]) -> dict[int, list[Path]]:
    """__consumer_offsets partition -> its live replica dirs found under ``log_dirs``."""
    out: dict[int, list[Path]] = {}
    for ld in log_dirs:
        try:
            entries = sorted(os.scandir(ld), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if not e.name.startswith(OFFSETS_TOPIC + "-") or not e.is_dir(follow_symlinks=False):
                continue
            pd = parse_partition_dir(e.name)
            if pd is None or pd.topic != OFFSETS_TOPIC or pd.kind != "live":
                continue
            out.setdefault(pd.partition, []).append(Path(e.path))
    return out


def live_segments(partition_dir: Path) -> list[tuple[int, Path]]:
    """(base offset, .log path) of the live segments, by base offset (no .deleted/.cleaned/.swap)."""
    return _listing(partition_dir)[0]


def _listing(partition_dir: Path) -> tuple[list[tuple[int, Path]], list[str]]:
    """The live segments (as :func:`live_segments`) and the names of the ``.log.swap`` files."""
    segs, swaps = [], []
    for e in os.scandir(partition_dir):
        sf = parse_segment_file(e.name)
        if sf is not None and sf.suffix == "log" and sf.state is None:
            segs.append((sf.base_offset, Path(e.path)))
        elif sf is not None and sf.suffix == "log" and sf.state == "swap":
            swaps.append(e.name)
    return sorted(segs), sorted(swaps)


#: How long a read waits for the log cleaner to finish a swap. Kafka's LocalLog.replaceSegments
#: renames the cleaned ``.log.swap`` to ``.log`` only after renaming the segments it replaces to
#: ``.deleted``: in between, the replaced offsets exist only in the ``.swap`` (milliseconds on a
#: live broker; a crash leaves the ``.swap`` for the next start's recovery to complete).
SWAP_SETTLE_S = 5.0
#: Reads of one partition dir before its answer is given with a note, when its segments are
#: replaced (cleaner) or deleted (retention, deleteRecords) while they are read.
MAX_READS = 3


def settled_segments(partition_dir: Path, notes: list[str]) -> list[tuple[int, Path]]:
    """:func:`live_segments`, taken when no cleaner swap is half done (waiting up to
    ``SWAP_SETTLE_S``); a ``.swap`` still there after that is named in ``notes``."""
    settle_s = SWAP_SETTLE_S
    deadline = time.monotonic() + settle_s
    while True:
        segs, swaps = _listing(partition_dir)
        if not swaps:
            return segs
        if time.monotonic() >= deadline:
            notes.append(f"{partition_dir}: {', '.join(swaps)} still there after {settle_s:g} s (a log cleaner "
                         f"swap in progress, or one a broker crash interrupted): the offsets it holds may be "
                         f"missing from this read")
            return segs
        time.sleep(0.05)


def segments_identity(segments: list[tuple[int, Path]]) -> tuple | None:
    """What proves a listing's segments unchanged after they were read: each one's base offset
    and inode (the cleaner's replacement keeps the name, not the inode); None when one is gone."""
    try:
        return tuple((base, os.stat(path).st_ino) for base, path in segments)
    except OSError:
        return None


#: Use the C replay of plain batches when it is built (tests turn it off to compare both paths).
USE_C_FOLD = True
#: The Python path's read-ahead window after the C replay hands a batch over (often one
#: transaction's batch or two before the C replay takes over again: no MiB re-read per hand-over).
HANDOVER_WINDOW_BYTES = 64 * 1024
#: With a ``pace`` callback: bytes replayed between two calls of it (the scan paces per segment;
#: a __consumer_offsets segment is up to 100 MiB by default, so the replay paces within one).
PACE_BYTES = 8 * 1024 * 1024


class _Window:
    """Read-ahead window over one .log (its own O_RDONLY descriptor, pread only): the batches'
    bytes are sliced from windows of ``window_bytes``, one pread per window instead of one per
    batch (__consumer_offsets holds many small batches). Memory: one window, or one batch if larger."""

    __slots__ = ("fd", "size", "start", "buf", "window_bytes")

    def __init__(self, path: Path, window_bytes: int = CHUNK_BYTES):
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self.size = os.fstat(self.fd).st_size
        self.start = 0
        self.buf = b""
        self.window_bytes = window_bytes

    def batch(self, reader: LogReader, batch) -> bytes:
        pos, size = batch.position, batch.size_bytes
        start = self.start
        if pos < start or pos + size > start + len(self.buf):
            if size > CHUNK_BYTES:
                return bytes(reader.read_batch_bytes(batch))
            want = min(max(self.window_bytes, size), self.size - pos)
            buf = os.pread(self.fd, want, pos)
            if len(buf) < size:
                raise OSError(f"{reader.label}: byte {pos}: read returned {len(buf)} bytes, expected at least "
                              f"{size} (the file shrank while being read)")
            self.start, self.buf, start = pos, buf, pos
        return self.buf[pos - start:pos - start + size]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _fold_batch(fold, reader: LogReader, window: _Window, batch, label: str) -> None:
    """One entry of a segment replayed by the Python path; a problem becomes a note."""
    where = (label, batch.position)
    bad = orec.BadKeys()
    try:
        data = window.batch(reader, batch)
        if batch.is_control:
            for rec in orec.iter_key_values(batch, data, label=label):
                fold.control(batch.producer_id, orec.control_type(rec[2]), where, rec[2])
        elif batch.is_transactional or fold.pending:
            fold.add_batch(batch, data, where)
        else:
            fold.records += orec.fold_records_into(fold.store, batch, data, False, where, bad, label=label)
    except (FormatError, OSError) as exc:
        fold.notes.append(f"{exc}; batch at byte {batch.position} (offsets {batch.base_offset}.."
                          f"{batch.last_offset}) not folded")
    finally:
        fold.bad_keys(bad, where)


def _fold_segment_c(fold, reader: LogReader, window: _Window, label: str, pace) -> None:
    """Runs of plain batches replayed in C (:func:`orec.fold_plain_batches`); each entry it hands
    over (transactional, control, compressed, a record the Python fold notes, a cut or corrupt
    tail, ...) is read by the Python path, which keeps the segment while a transaction is open."""
    size = reader.size_bytes
    pos = 0
    budget = PACE_BYTES if pace is not None else 0
    while pos < size:
        if not fold.pending:
            start = pos
            pos, n = orec.fold_plain_batches(window.fd, pos, size, fold.store, label, budget)
            fold.records += n
            if pos >= size:
                return
            if budget and pos - start >= budget:   # not a hand-over: the read budget is spent
                pace()
                continue
        batch = reader.batch_at(pos)
        if batch is None:   # the walk stops here: the full walk says why (reader.stop_reason)
            for batch in reader.batches(pos):
                _fold_batch(fold, reader, window, batch, label)
            return
        _fold_batch(fold, reader, window, batch, label)
        pos = batch.position + batch.size_bytes


def _fold_segment_py(fold, reader: LogReader, window: _Window, label: str, pace) -> None:
    """The whole segment by the Python path."""
    paced_at = 0
    for batch in reader.batches():
        _fold_batch(fold, reader, window, batch, label)
        if pace is not None and batch.position - paced_at >= PACE_BYTES:
            pace()
            paced_at = batch.position


def replay_partition_dir(partition_dir: str | os.PathLike, fold, pace=None,
                         segments: list[tuple[int, Path]] | None = None) -> None:
    """Replay ``segments`` (default: every live segment) of one __consumer_offsets replica dir
    into ``fold`` (read-only); ``pace()``, when given, is called between reads (about every
    ``PACE_BYTES``, and per segment)."""
    pdir = Path(partition_dir)
    use_c = USE_C_FOLD and orec.HAVE_C_FOLD
    for _, log in live_segments(pdir) if segments is None else segments:
        try:
            reader = LogReader(log)
        except OSError as exc:
            fold.notes.append(f"{log}: cannot open: {exc.strerror or exc}; segment not read")
            continue
        label = str(log)
        try:
            window = _Window(log, HANDOVER_WINDOW_BYTES if use_c else CHUNK_BYTES)
        except OSError as exc:
            reader.close()
            fold.notes.append(f"{log}: cannot open: {exc.strerror or exc}; segment not read")
            continue
        try:
            (_fold_segment_c if use_c else _fold_segment_py)(fold, reader, window, label, pace)
            if reader.stop_reason is not None and reader.stop_reason != "zero-tail":
                fold.notes.append(reader.stop_detail or f"{label}: walk stopped ({reader.stop_reason})")
        finally:
            reader.close()
            window.close()
        if pace is not None:
            pace()
