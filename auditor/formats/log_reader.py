"""LogReader: a read-only walker over one Kafka ``.log`` file (or a record set laid out like one).

What it guarantees (docs/principles.md, "Rules for bad input"):

* **Read-only, no mmap.** The file is opened with ``os.open(O_RDONLY)`` and read with
  ``os.pread`` only: nothing is ever written, locked, truncated or renamed. No mmap, because a
  segment truncated by the broker under a mapping would SIGBUS this process.
* **Bounded memory whatever a length field says.** The shallow walk reads windows of at most
  ``CHUNK_BYTES``; ``records()`` reads one batch, and only if it is at most ``max_batch_bytes``;
  decompression is capped at ``max_decompressed_bytes``; ``crc_ok()`` streams.
* **Never a crash, never a silent skip.** The walk ends with ``stop_reason``:

  - ``None``: clean end (``stop_position == size_bytes``);
  - ``"partial-tail"``: the last entry is cut short (fewer than 17 header bytes left, or
    ``position > end - 12 - size``): what ``FileLogInputStream.nextBatch`` silently treats as
    end of file, and what an active segment looks like while the broker appends;
  - ``"zero-tail"``: a zero-filled header where the next entry should start and zeros after it
    (a ``log.preallocate=true`` segment); Kafka would call this corrupt (size 0 < 14);
  - ``"corrupt"``: a size below the smallest message (14; 49 for a v2 batch; 22 for magic 1),
    a size that cannot be a Kafka entry (12 + size overflows an int32), an unknown magic;
  - ``"io-error"``: the file vanished, became unreadable or shrank while being read.

  ``stop_detail`` is one sentence naming the file, byte position, field, value found and the
  bound it broke. Trailing bytes = ``size_bytes - stop_position``.

The shallow walk is the hot loop of the ``headers`` depth: one precompiled ``struct`` unpack on
a window buffer and one slotted dataclass per v2 batch. The exception is a *compressed legacy
wrapper*, whose ``base_offset`` Kafka defines as its first inner offset: that one is read and
decompressed during the walk (legacy data only).
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Iterator

from auditor.formats import compression, legacy
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError
from auditor.formats.java_long import INT64_MAX, INT64_MIN, wrap
from auditor.formats.record_batch import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Record,
)

try:  # optional C fold of v2 headers (setup.py builds it when a compiler is there)
    from auditor.formats import _cwalk
except ImportError:  # pragma: no cover - exercised by the pure-Python equality test
    _cwalk = None


def c_index_ends(log_path, index_path, timeindex_path, base_offset: int):
    """The 'index' depth of one plain segment in one C call (``_cwalk.index_ends``): a tuple of
    facts, or None when the extension is not built or the segment needs the Python path."""
    if _cwalk is None:
        return None
    return _cwalk.index_ends(log_path, index_path, timeindex_path, base_offset)


#: ``(log, index, timeindex, txnindex) -> str | None``: a closed segment's proof for incremental scans
#: in one C call (the text of auditor.scan.state.segment_proof); None when the extension is not built.
c_segment_proof = _cwalk.segment_proof if _cwalk is not None else None

#: ``(log, index, timeindex, base_offset, pos) -> tuple | None``: an active segment's quiet check for
#: incremental scans in one C call (auditor.scan.resume.QUIET_FIELDS); None when the extension is not built.
c_quiet_facts = _cwalk.quiet_facts if _cwalk is not None else None

#: ``(data, start, count, base_offset, base_ts, log_append_ts, control, *state) -> tuple | None``: the
#: 'deep' record fold of one v2 batch's records in C (``_cwalk.fold_records``; its last field says
#: which record iter_records raises for, if one does); None when the extension is not built.
c_fold_records = _cwalk.fold_records if _cwalk is not None else None


def _refused_in(done: tuple | None, data, decompressed: bool) -> tuple[tuple, v2.RecordsFrom | None] | None:
    """A C fold's result (fold_records' tuple, or None) as LogReader.fold_record_times gives it, the
    refused record's place in ``data`` (the batch, or the decompressed records) when there is one."""
    if done is None:
        return None
    if done[-1] is None:
        return done[:-1], None
    index, at = done[-1]
    return done[:-1], v2.RecordsFrom(data, at, len(data), index, decompressed)


__all__ = ["LogReader", "BatchHeader", "Record", "CHUNK_BYTES", "DEFAULT_MAX_BATCH_BYTES", "c_index_ends",
           "c_segment_proof", "c_quiet_facts", "c_fold_records"]

#: Window size of the shallow walk and of chunked reads.
CHUNK_BYTES = 1 << 20
#: After a batch at least this large, the next window is only HEADER_PROBE_BYTES (don't read a
#: MiB of records just to see 61 header bytes).
HEADER_PROBE_BYTES = 4096
#: Default cap on one batch read whole by records() (Kafka's max.message.bytes is ~1 MiB by default).
DEFAULT_MAX_BATCH_BYTES = 64 * 1024 * 1024
#: The largest size field a Kafka entry can have: 12 + size must fit in an int32 (sizeInBytes()).
MAX_SIZE_FIELD = 0x7FFFFFFF - LOG_OVERHEAD
#: Bytes checked after a zero header to call the tail preallocated rather than corrupt.
ZERO_TAIL_CHECK_BYTES = CHUNK_BYTES

_FRAMING = struct.Struct(">qi")
_V2 = v2.V2_HEADER
_ZERO_HEADER = bytes(HEADER_SIZE_UP_TO_MAGIC)
_CODECS = compression.CODEC_NAMES
_TS_TYPES = (v2.CREATE_TIME, v2.LOG_APPEND_TIME)


class LogReader:
    """Read-only walker over one .log file (or a record-set slice laid out like one).

    Opens with os.open(O_RDONLY), reads with os.pread in bounded chunks (no mmap: a file
    truncated under us must not SIGBUS the process). Memory is bounded whatever a length says.
    ``batches()`` may be called again (e.g. from an index position); each complete walk sets
    ``stop_position``, ``stop_reason`` and ``stop_detail``.
    """

    def __init__(self, path, *, label: str | None = None, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 max_decompressed_bytes: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES):
        self._path = path  # a Path is built only when asked for (replay-check opens thousands of readers)
        self.label = label if label is not None else str(path)
        self.max_batch_bytes = max_batch_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self._fd: int | None = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            self.size_bytes: int = os.fstat(self._fd).st_size
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise
        self.stop_position: int = 0
        self.stop_reason: str | None = None
        self.stop_detail: str | None = None
        #: (position, entry bytes, legacy.walk_inner's outcome) of the wrapper the walk is at (_walk_inner)
        self._inner_kept: tuple | None = None

    @property
    def path(self) -> Path:
        return Path(self._path)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        self._inner_kept = None
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> "LogReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # a forgotten close() must not leak the descriptor
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer must not raise
            pass

    # -- shallow walk -------------------------------------------------------------------------
    def batches(self, start_position: int = 0) -> Iterator[BatchHeader]:
        """Every top-level entry from ``start_position`` (a batch start) to where the walk stops."""
        stop = yield from self._walk(start_position)
        self.stop_position, self.stop_reason, self.stop_detail = stop

    def fold_v2_headers(self, start_position: int = 0) -> dict | None:
        """Totals of the well-formed v2 batches from ``start_position``, folded in C; None when
        the C extension is not built. ``stop_position`` in the result is where it stopped: the
        end of the file, or the first entry that :meth:`batches` must look at (legacy, cut,
        corrupt, unreadable). It sets no stop_* attribute: continue with ``batches(stop)``."""
        if _cwalk is None:
            return None
        if self._fd is None:
            raise ValueError(f"{self.label}: LogReader is closed")
        return _cwalk.walk_v2(self._fd, start_position, self.size_bytes)

    def first_batch(self) -> BatchHeader | None:
        """The entry at byte 0, or None (empty file, or no complete valid entry there).
        Leaves the stop_* attributes of the last full walk untouched."""
        return self.batch_at(0)

    def batch_at(self, position: int) -> BatchHeader | None:
        """The entry starting at ``position``, or None; leaves the stop_* attributes untouched."""
        # one header is wanted, not a MiB of records (the 'index' depth calls this per segment)
        walk = self._walk(position, first_window=HEADER_PROBE_BYTES)
        try:
            return next(walk)
        except StopIteration:
            return None
        finally:
            walk.close()

    def entry_at(self, position: int) -> BatchHeader | None:
        """The entry at ``position`` alone (one small first read), for a caller that walks the rest
        itself (a C fold); None when a walk from ``position`` stops there, and then the stop_*
        attributes say why, as after :meth:`batches`."""
        walk = self._walk(position, first_window=HEADER_PROBE_BYTES)
        try:
            return next(walk)
        except StopIteration as stop:
            self.stop_position, self.stop_reason, self.stop_detail = stop.value
            return None
        finally:
            walk.close()

    def fileno(self) -> int:
        """The read-only descriptor (for a C fold that preads the same file)."""
        if self._fd is None:
            raise ValueError(f"{self.label}: LogReader is closed")
        return self._fd

    def _stop(self, pos: int, reason: str, field: str, found, expected: str) -> tuple[int, str, str]:
        return pos, reason, f"{self.label}: byte {pos}: {field} = {found!r}, expected {expected} ({reason})"

    # long function: the shallow walk's hot loop over every batch header of a .log (window refills,
    # framing checks and the stop reasons in one place: a call per batch costs the headers depth)
    def _walk(self, start: int, first_window: int = CHUNK_BYTES):
        fd = self._fd
        if fd is None:
            raise ValueError(f"{self.label}: LogReader is closed")
        size = self.size_bytes
        pread = os.pread
        unpack_framing = _FRAMING.unpack_from
        unpack_v2 = _V2.unpack_from
        codecs = _CODECS
        ts_types = _TS_TYPES
        chunk = CHUNK_BYTES
        pos = start
        if pos < 0 or pos > size:
            return self._stop(pos, "corrupt", "start position", pos, f"0..{size} (the file size)")
        buf = b""
        buf_start = buf_end = pos
        last_size = 0
        next_window = first_window
        while pos < size:
            if pos + RECORD_BATCH_OVERHEAD > buf_end and buf_end < size:
                want = min(next_window if last_size < chunk else HEADER_PROBE_BYTES, size - pos)
                next_window = chunk
                try:
                    buf = pread(fd, want, pos)
                except OSError as exc:
                    return pos, "io-error", (f"{self.label}: byte {pos}: read of {want} bytes failed: "
                                             f"{exc.strerror or exc} (errno {exc.errno}) (io-error)")
                if len(buf) != want:
                    return pos, "io-error", (f"{self.label}: byte {pos}: read returned {len(buf)} bytes, expected "
                                             f"{want} (the file shrank below its size at open, {size}: truncated "
                                             f"or replaced while being read) (io-error)")
                buf_start = pos
                buf_end = pos + want
            at = pos - buf_start
            avail = buf_end - pos
            if avail < HEADER_SIZE_UP_TO_MAGIC:
                # fewer than 17 bytes left: FileLogInputStream ends here (position >= end - 17).
                # Always partial-tail, even if zero: a cut header often starts with zero bytes
                # (offset high bytes), while a preallocated tail is far longer than 17 bytes.
                return self._stop(pos, "partial-tail", "bytes left", avail,
                                  f">= {HEADER_SIZE_UP_TO_MAGIC} (offset, size, up to the magic byte)")
            offset, length = unpack_framing(buf, at)
            if length < legacy.RECORD_OVERHEAD_V0:
                if length == 0 and buf[at:at + HEADER_SIZE_UP_TO_MAGIC] == _ZERO_HEADER:
                    return self._zero_tail(buf, at, pos, avail)
                return self._stop(pos, "corrupt", "size", length,
                                  f">= {legacy.RECORD_OVERHEAD_V0} (the smallest message, RECORD_OVERHEAD_V0)")
            if length > MAX_SIZE_FIELD:
                return self._stop(pos, "corrupt", "size", length,
                                  f"<= {MAX_SIZE_FIELD} (12 + size must fit in an int32)")
            if pos > size - LOG_OVERHEAD - length:
                return self._stop(pos, "partial-tail", "size", length,
                                  f"<= {size - pos - LOG_OVERHEAD} (the bytes left after the entry framing; "
                                  f"entry cut short)")
            magic = buf[at + MAGIC_OFFSET]
            if magic == 2:
                if length < MIN_BATCH_LENGTH:
                    return self._stop(pos, "corrupt", "batchLength", length,
                                      f">= {MIN_BATCH_LENGTH} (a v2 batch header is {RECORD_BATCH_OVERHEAD} bytes)")
                (base, length, ple, magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq,
                 count) = unpack_v2(buf, at)
                last = base + lod
                if not INT64_MIN <= last <= INT64_MAX:
                    last = wrap(last)  # Java long arithmetic (java_long.py)
                header = BatchHeader(
                    pos, base, last, LOG_OVERHEAD + length, 2, codecs[attrs & 7], ts_types[(attrs & 8) >> 3],
                    base_ts, max_ts, count, (attrs & 0x10) != 0, (attrs & 0x20) != 0, (attrs & 0x40) != 0,
                    pid, pepoch, bseq, ple, crc)
            elif magic == 0 or magic == 1:
                if length < legacy.RECORD_OVERHEAD[magic]:
                    return self._stop(pos, "corrupt", "messageSize", length,
                                      f">= {legacy.RECORD_OVERHEAD[magic]} (RECORD_OVERHEAD_V{magic})")
                header = legacy.parse_legacy_header(buf, at, pos)
                if header.codec != "none":
                    header.base_offset = self._legacy_base_offset(header)
            else:
                return self._stop(pos, "corrupt", "magic", magic, "0, 1 or 2")
            yield header
            self._inner_kept = None   # (the caller is done with that entry)
            last_size = LOG_OVERHEAD + length
            pos += last_size
        return pos, None, None

    def _zero_tail(self, buf, at: int, pos: int, avail: int):
        """A zero header: preallocated tail if what follows (up to ZERO_TAIL_CHECK_BYTES) is zero too."""
        window = buf[at:at + avail]
        if len(window) < ZERO_TAIL_CHECK_BYTES and pos + len(window) < self.size_bytes:
            try:
                window = os.pread(self._fd, min(ZERO_TAIL_CHECK_BYTES, self.size_bytes - pos), pos)
            except OSError as exc:
                return pos, "io-error", f"{self.label}: byte {pos}: read failed: {exc.strerror or exc} (io-error)"
        stripped = window.lstrip(b"\0")
        if stripped:
            first = pos + len(window) - len(stripped)
            return self._stop(pos, "corrupt", "size", 0,
                              f">= {legacy.RECORD_OVERHEAD_V0}: a zero-filled header, but non-zero byte "
                              f"{stripped[0]:#04x} at byte {first} (not a preallocated zero tail)")
        return pos, "zero-tail", (f"{self.label}: byte {pos}: zero-filled entry header, "
                                  f"{self.size_bytes - pos} bytes of zero-filled tail (preallocated segment; "
                                  f"checked {len(window)} bytes) (zero-tail)")

    def _legacy_base_offset(self, header: BatchHeader) -> int:
        """Kafka's baseOffset() of a compressed legacy wrapper (first inner absolute offset).
        Falls back to the wrapper offset when the wrapper cannot be read (records() then raises)."""
        if header.size_bytes > self.max_batch_bytes:
            return header.last_offset
        try:
            data = self._read(header.position, header.size_bytes)
            return legacy.first_inner_offset(header, data, label=self.label,
                                             max_decompressed_bytes=self.max_decompressed_bytes,
                                             inner=self._walk_inner(header, data))
        except (FormatError, OSError):
            return header.last_offset

    def _walk_inner(self, header: BatchHeader, data) -> legacy.InnerSet | None:
        """legacy.walk_inner of the wrapper whose bytes are ``data``, or its FormatError, once for the
        walk's base offset and the 'deep' fold of that wrapper (a wrapper at the cap is 256 MiB to
        decompress): kept while the walk's caller handles that entry, for the same bytes only. An
        error is kept as its fields and raised anew each time (a kept exception would hold, through
        its traceback, the frames that hold it)."""
        kept = self._inner_kept
        if kept is None or kept[0] != header.position or kept[1] != data:
            try:
                outcome = legacy.walk_inner(header, data, label=self.label,
                                            max_decompressed_bytes=self.max_decompressed_bytes)
            except FormatError as exc:
                outcome = (exc.file, exc.position, exc.field, exc.found, exc.expected)
            kept = self._inner_kept = (header.position, data, outcome)
        if isinstance(kept[2], tuple):
            raise FormatError(*kept[2])
        return kept[2]

    def legacy_inner(self, header: BatchHeader, data) -> legacy.InnerSet | None:
        """legacy.walk_inner of the compressed wrapper whose bytes are ``data`` (the walk's own when it
        already decompressed that wrapper for its base offset): for the C folds of its inner set."""
        return self._walk_inner(header, data)

    # -- deep -----------------------------------------------------------------------------------
    def _read(self, position: int, n: int) -> bytearray:
        """Exactly n bytes at position, read in CHUNK_BYTES preads (OSError if the file shrank)."""
        if self._fd is None:
            raise ValueError(f"{self.label}: LogReader is closed")
        out = bytearray(n)
        view = memoryview(out)
        done = 0
        while done < n:
            step = min(CHUNK_BYTES, n - done)
            got = os.preadv(self._fd, [view[done:done + step]], position + done)
            if got <= 0:
                raise OSError(f"{self.label}: byte {position + done}: read returned {got} bytes, expected {step} "
                              f"(file truncated while being read)")
            done += got
        return out

    def read_batch_bytes(self, batch: BatchHeader) -> bytearray:
        """The whole entry, if at most max_batch_bytes."""
        if batch.size_bytes > self.max_batch_bytes:
            raise FormatError(self.label, batch.position, "batch size", batch.size_bytes,
                              f"<= {self.max_batch_bytes} bytes (max_batch_bytes: larger batches are walked "
                              f"shallowly only)")
        return self._read(batch.position, batch.size_bytes)

    def records(self, batch: BatchHeader, *, keys: bool = False) -> Iterator[Record]:
        """Every record of one batch (decompressed); reads only that batch's bytes. ``keys=True``:
        each record carries its key's bytes (v2 and legacy)."""
        data = self.read_batch_bytes(batch)
        magic = data[MAGIC_OFFSET]
        if magic != batch.magic:
            raise FormatError(self.label, batch.position + MAGIC_OFFSET, "magic", magic,
                              f"{batch.magic} (as during the walk: the file changed)")
        if magic == 2:
            return v2.iter_records(batch, data, label=self.label, max_decompressed_bytes=self.max_decompressed_bytes,
                                   keys=keys)
        return legacy.iter_records(batch, data, label=self.label, max_decompressed_bytes=self.max_decompressed_bytes,
                                   keys=keys)

    def fold_record_times(self, batch: BatchHeader, state: tuple) -> tuple[tuple, v2.RecordsFrom | None] | None:
        """The 'deep' depth's fold over one batch's records in C (v2: ``_cwalk.fold_records``; a
        legacy compressed wrapper's inner messages: legacy.fold_inner): (fold, refused). fold:
        ``state`` (min timestamp, its offset, running max timestamp, its offset, largest step back,
        its offset; None when absent) updated, then records, abort and commit markers. refused:
        None when every record was read; else where :meth:`records` would raise on a v2 record
        (v2.RecordsFrom, for v2.refused_record_error: that record alone is read again to name the
        problem), fold then covering the records before it, as the Python loop's state does when
        it raises there (a legacy wrapper raises instead: the Python loop reads no inner message
        before its error). None when the extension is not built, the entry is an uncompressed
        legacy message or the state does not fit (the Python path then reads it). Raises
        FormatError as :meth:`records` does before its first record (size, recordsCount,
        decompression, its cap)."""
        if _cwalk is None:
            return None
        if batch.magic != 2:
            if not legacy.is_compressed(batch):
                return None   # one record: the Python loop's
            data = self.read_batch_bytes(batch)
            if data[MAGIC_OFFSET] != batch.magic:
                return None
            done = legacy.fold_inner(batch, data, state, label=self.label,
                                     max_decompressed_bytes=self.max_decompressed_bytes,
                                     inner=self._walk_inner(batch, data))
            return None if done is None else _refused_in(done, None, True)
        data = self.read_batch_bytes(batch)
        if data[MAGIC_OFFSET] != 2:
            return None
        codec_id, payload, start = v2.record_payload(batch, data, label=self.label)
        log_append = batch.max_timestamp_ms if batch.timestamp_type == v2.LOG_APPEND_TIME else None
        facts = (batch.base_offset, batch.base_timestamp_ms, log_append, batch.is_control)
        if codec_id == compression.CODEC_NONE:
            return _refused_in(_cwalk.fold_records(payload, start, batch.record_count, *facts, *state), payload, False)
        # decompressed piece by piece into the fold (compression.decompress_chunks: a bomb at the cap
        # is never one 256 MiB buffer); once the fold refuses a record the pieces are still drawn, so
        # that a decompression error or the cap is raised exactly as record_bytes raises it, and the
        # stream's end (fold.fed) is known to the refused record's note
        fold = _cwalk.RecordFold(batch.record_count, *facts, *state)
        try:
            for piece in compression.decompress_chunks(codec_id, payload, magic=2, label=self.label,
                                                       max_bytes=self.max_decompressed_bytes,
                                                       position=batch.position + v2.RECORDS_OFFSET):
                fold.feed(piece)
        except compression.IrregularStream:
            records, start = v2.record_bytes(batch, data, label=self.label,
                                             max_decompressed_bytes=self.max_decompressed_bytes)
            return _refused_in(_cwalk.fold_records(records, start, batch.record_count, *facts, *state), records, True)
        done = fold.result()
        if done is None or done[-1] is None:
            return _refused_in(done, None, True)
        index, at = done[-1]
        return done[:-1], v2.refused_in_stream(fold.refused_bytes(), at, fold.fed, index)

    def crc_ok(self, batch: BatchHeader) -> tuple[bool, int, int]:
        """(ok, stored, computed): CRC-32C over [21, end) for v2, CRC32 over [16, end) for legacy.
        Streams the batch in CHUNK_BYTES pieces (any size)."""
        if batch.magic >= 2:
            import crc32c  # here: its import (importlib.metadata, ~25 ms) is for CRC checks only ('deep')

            start, update = v2.ATTRIBUTES_OFFSET, crc32c.crc32c
        else:
            start, update = legacy.ENTRY_MAGIC_OFFSET, zlib.crc32
        pos = batch.position + start
        end = batch.position + batch.size_bytes
        crc = 0
        while pos < end:
            step = min(CHUNK_BYTES, end - pos)
            piece = self._read(pos, step)
            crc = update(piece, crc)
            pos += step
        return crc == batch.crc, batch.crc, crc
