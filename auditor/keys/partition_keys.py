"""One partition directory's records to its key summary (:class:`~auditor.keys.sketches.KeyStats`).

Two modes:

* **all** (``sample_bytes=None``): every record of every segment, oldest first;
* **sampled** (``sample_bytes=N``): only the newest N bytes of the partition's .log files,
  newest segment first, from the batch that holds the N-th newest byte (found through the
  segment's .index, else by walking batch headers from byte 0): at least N bytes (or the whole
  partition), at most N plus one batch. The result says how many .log bytes the sample covered
  and of how many.

Read-only like every scan (:class:`~auditor.formats.log_reader.LogReader`: ``O_RDONLY``,
``pread``, bounded memory). This is a separate walk from the segment scan, so the segment
scan's C fold (``_cwalk``) keeps its speed for scans that do not ask for keys. Bad input never
stops it: a batch whose records cannot be read is counted and noted (the rest still counted), a
walk that stops early (cut or corrupt tail) is noted with the file and byte position.

The per-record work runs in C when ``auditor.keys._ckeys`` is built (``KeyStats.c_fold``):
runs of plain v2 batches are walked and folded there, a compressed batch is decompressed here
piece by piece and its records folded there as the pieces come (``KeyFold.records_feed``: memory
is a piece and a record, whatever the batch: a bomb at the 256 MiB decompression cap included),
and in a batch the C reader would not read exactly as ``record_batch.iter_records`` does (a cut,
a bad varint, ...) the records before the first such one are folded there and that one is read
here alone, so the notes and the sketches are the same either way (``use_c=False`` forces the
pure-Python path).

Control batches are skipped (their keys are Kafka's, not the producers'). Magic 0/1 entries
(legacy message sets, compressed wrappers included) are read like v2 batches: their records'
keys are counted (``legacy_records_read``); a compressed wrapper's inner set is walked in C
(``legacy.walk_inner``, the same walk as the segment scan's) and its messages added there
(``KeyFold.add_legacy``: a wrapper at the cap is 10 million messages), a single message read in
Python. ``legacy_records`` (keys not read) stays 0: an unreadable
legacy entry is an unreadable batch with a note, like a v2 one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from auditor.formats import compression, filenames, legacy
from auditor.formats import record_batch as v2
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader, c_fold_records
from auditor.formats.offset_index import read_offset_index
from auditor.keys.sketches import KeyStats

MIB = 1 << 20
#: At most this many notes per partition (the count of further problems is kept).
MAX_NOTES = 20


@dataclass
class PartitionKeys:
    """The key summary of one partition dir and what it covered."""

    stats: KeyStats
    mode: str                        # "all" or "sampled"
    sample_bytes: int | None         # the budget asked for (sampled mode)
    log_bytes: int = 0               # .log bytes of the partition's plain segments
    scanned_bytes: int = 0           # .log bytes whose batches were read
    first_offset: int | None = None  # first record offset read
    last_offset: int | None = None   # last record offset read
    unreadable_batches: int = 0
    legacy_records: int = 0
    notes: list[str] = field(default_factory=list)
    more_notes: int = 0
    legacy_records_read: int = 0     # records of magic 0/1 entries, keys counted

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)
        else:
            self.more_notes += 1

    def to_json(self, top: int = 10) -> dict:
        """The ``keys`` object of ``scan --json``: fingerprints and counts, never key bytes."""
        out = {"mode": self.mode, "sample_bytes_asked": self.sample_bytes, "log_bytes": self.log_bytes,
               "scanned_bytes": self.scanned_bytes, "first_offset": self.first_offset,
               "last_offset": self.last_offset, "unreadable_batches": self.unreadable_batches,
               "legacy_records_keys_not_read": self.legacy_records,
               "legacy_records_read": self.legacy_records_read}
        out.update(self.stats.summary(top))
        out["notes"] = self.notes + ([f"... and {self.more_notes} more"] if self.more_notes else [])
        return out


def _plain_logs(path: Path) -> list[tuple[int, Path]]:
    """The partition's plain segment .log files (no .deleted/.cleaned/.swap), by base offset."""
    logs = []
    with os.scandir(path) as entries:
        for entry in entries:
            parsed = filenames.parse_segment_file(entry.name)
            if parsed is not None and parsed.suffix == "log" and parsed.state is None and not entry.is_symlink():
                logs.append((parsed.base_offset, Path(entry.path)))
    return sorted(logs)


def _start_position(log: Path, base_offset: int, cut: int) -> int:
    """A batch boundary at or before ``cut`` from the segment's .index (0 without a usable one);
    the walk skips the batches that end at or before ``cut``."""
    index = log.with_suffix(".index")
    try:
        entries = read_offset_index(index, base_offset).entries
    except (FormatError, OSError):
        return 0
    best = 0
    for _offset, position in entries:
        if position <= cut:
            best = max(best, position)
    return best


def scan_partition_keys(path: Path, *, sample_bytes: int | None = None, capacity: int | None = None,
                        sample_size: int | None = None, prefix_bytes: int = 0,
                        use_c: bool | None = None) -> PartitionKeys:
    """The key summary of the partition dir ``path``; see the module docstring. ``use_c``: None
    = the C fold when built, False = pure Python, True = the C fold or ImportError."""
    kwargs = {k: v for k, v in (("capacity", capacity), ("sample_size", sample_size)) if v is not None}
    result = PartitionKeys(KeyStats(prefix_bytes=prefix_bytes, **kwargs), "all" if sample_bytes is None else "sampled",
                           sample_bytes)
    try:
        logs = _plain_logs(path)
    except OSError as exc:
        result.note(f"{path}: cannot list: {exc}")
        return result
    sizes = {}
    for base, log in logs:
        try:
            sizes[base] = log.stat().st_size
        except OSError as exc:
            result.note(f"{log}: cannot stat: {exc}")
    result.log_bytes = sum(sizes.values())
    plan: list[tuple[int, Path, int]] = []  # (base offset, file, skip batches before this byte)
    if sample_bytes is None:
        plan = [(base, log, 0) for base, log in logs if base in sizes]
    else:
        left = sample_bytes
        for base, log in reversed(logs):
            if base not in sizes or left <= 0:
                continue
            cut = max(0, sizes[base] - left)
            left -= sizes[base] - cut
            plan.append((base, log, cut))
        plan.reverse()  # oldest first, as the records were written
    fold = result.stats.c_fold() if use_c is not False else None
    if use_c and fold is None:
        raise ImportError("auditor.keys._ckeys is not built (use_c=True)")
    try:
        for base, log, cut in plan:
            _read_segment(result, log, base, cut, fold)
    finally:
        if fold is not None:
            result.stats.absorb(fold)
    result.stats.seal()
    return result


def _read_segment(result: PartitionKeys, log: Path, base_offset: int, cut: int, fold) -> None:
    try:
        reader = LogReader(log)
    except OSError as exc:
        result.note(f"{log}: cannot open: {exc}")
        return
    try:
        start = _start_position(log, base_offset, cut) if cut else 0
        if fold is None:
            for batch in reader.batches(start):
                _read_batch(result, reader, batch, cut, result.stats.add)
        else:
            _walk_with_fold(result, reader, start, cut, fold)
        if reader.stop_reason is not None:
            result.note(reader.stop_detail or f"{log}: walk stopped at byte {reader.stop_position}: {reader.stop_reason}")
    finally:
        reader.close()


def _walk_with_fold(result: PartitionKeys, reader: LogReader, pos: int, cut: int, fold) -> None:
    """Runs of plain v2 batches in C; each entry the C walk hands back is read here, then C again."""
    size = reader.size_bytes
    while pos < size:
        pos, scanned, records, first, last, packed = fold.walk(reader.fileno(), pos, size, cut)
        result.scanned_bytes += scanned
        if records:
            _saw_offsets(result, first, last)
        if pos >= size:
            return
        folded = None
        if packed is not None:
            folded = _fold_packed(result, reader, packed, fold)
            if folded is not None and folded.whole:
                result.scanned_bytes += packed[4]
                pos += packed[4]
                continue
        batch = reader.entry_at(pos)
        if batch is None:
            return  # the walk stops here: reader.stop_* say why
        _read_batch(result, reader, batch, cut, fold.add, fold, folded)
        pos = batch.position + batch.size_bytes


def _saw_offsets(result: PartitionKeys, first: int, last: int) -> None:
    if result.first_offset is None:
        result.first_offset = first
    result.last_offset = last


def _read_batch(result: PartitionKeys, reader: LogReader, batch, cut: int, add, fold=None, folded=None) -> None:
    """One entry of the walk: skipped before the sample's cut, counted, its keys added (the
    records of a v2 batch through the C fold when there is one: _fold_in_c; ``folded``: this
    compressed batch already through _fold_stream, its readable records added)."""
    if batch.position + batch.size_bytes <= cut:
        return  # wholly older than the sample
    result.scanned_bytes += batch.size_bytes
    if batch.is_control:
        return
    is_legacy = batch.magic < 2
    try:
        if fold is not None and not is_legacy and _fold_in_c(result, reader, batch, fold, folded):
            return
        if fold is not None and is_legacy and _legacy_in_c(result, reader, batch, fold):
            return
        for record in reader.records(batch, keys=True):
            add(record.key, record.value_size, record.offset, record.timestamp_ms)
            _saw_offsets(result, record.offset, record.offset)
            result.legacy_records_read += is_legacy
    except (FormatError, OSError) as exc:
        result.unreadable_batches += 1
        result.note(f"{reader.label}: byte {batch.position}: batch {batch.base_offset}..{batch.last_offset}: "
                    f"records unreadable, keys of the records before the error counted: {exc}")


def _legacy_in_c(result: PartitionKeys, reader: LogReader, batch, fold) -> bool:
    """A legacy compressed wrapper's inner messages added in C (KeyFold.add_legacy) as the Python
    loop adds them (True): a wrapper of 26-byte messages at the 256 MiB cap is 10 million records,
    ~35 s one Python call each. legacy.iter_records reads the whole inner set before its first
    record, so its errors come first here too (legacy.walk_inner raises them) and nothing is added
    from a wrapper it refuses. False, having added nothing, for an uncompressed message or when the
    C walk cannot tell (the Python loop then reads the entry)."""
    if not legacy.is_compressed(batch):
        return False
    data = reader.read_batch_bytes(batch)
    if data[v2.MAGIC_OFFSET] != batch.magic:
        return False   # (the file changed: records() says so)
    inner = reader.legacy_inner(batch, data)
    if inner is None:
        return False
    count, first, last = fold.add_legacy(inner.data, inner.count,
                                         *legacy.inner_offsets_and_times(batch, inner, reader.label))
    _saw_offsets(result, first, last)
    result.legacy_records_read += count
    return True


def _fold_in_c(result: PartitionKeys, reader: LogReader, batch, fold, folded: "_Folded | None" = None) -> bool:
    """A v2 batch the C walk handed back, its records added in C as the Python loop would add them:
    all of them (True); or, at a record iter_records raises for (e.g. the last of 38 million, cut
    short: the Python loop read them all again, minutes at the decompression cap), those before it,
    then the loop's FormatError raised, read from that record alone (a plain batch: the scan's C
    record fold, c_fold_records, says which one; a compressed one is decompressed piece by piece
    into KeyFold, which stops there and keeps its bytes: _fold_stream). False, having added
    nothing, when C cannot tell (the extension missing): the Python loop then reads the batch.
    Raises FormatError / OSError as the loop does before its first record. ``folded``: the walk
    already took this compressed batch through _fold_stream."""
    if c_fold_records is None:
        return False
    if folded is None:
        data = reader.read_batch_bytes(batch)
        if data[v2.MAGIC_OFFSET] != 2:
            return False   # (the file changed: records() says so)
        codec_id, payload, start = v2.record_payload(batch, data, label=reader.label)
        if codec_id != compression.CODEC_NONE:
            folded = _fold_stream(result, fold, _Stream(batch.position, codec_id, payload, batch.record_count,
                                                        batch.base_offset, batch.base_timestamp_ms,
                                                        _log_append(batch), reader.label,
                                                        reader.max_decompressed_bytes))
    if folded is not None:
        return _fold_checked(result, reader, batch, fold, folded)
    log_append = _log_append(batch)
    done = c_fold_records(data, start, batch.record_count, batch.base_offset, batch.base_timestamp_ms,
                          log_append, batch.is_control, *(None,) * 6)
    if done is None:
        return False
    error = None
    end, count = len(data), batch.record_count
    if done[-1] is not None:
        count, end = done[-1]
        error = v2.refused_record_error(batch, v2.RecordsFrom(data, end, len(data), count, False),
                                        label=reader.label)
        if error is None:
            return False
    if count:
        added = fold.add_records(memoryview(data)[:end], start, count, batch.base_offset, batch.base_timestamp_ms,
                                 log_append)
        if added is None:
            return False   # nothing added: the Python loop reads the batch
        if added[0]:
            _saw_offsets(result, added[1], added[2])
    if error is not None:
        try:
            raise error
        finally:
            del error   # (else error -> its traceback -> this frame -> error: a cycle holding the batch)
    return True


def _log_append(batch) -> int | None:
    return batch.max_timestamp_ms if batch.timestamp_type == v2.LOG_APPEND_TIME else None


# ---- compressed batches: decompressed and added in pieces ------------------------------------

#: A compressed batch's decompressed pieces up to this many bytes are kept (copied) and added to the
#: key fold once the stream has ended well; past it (a bomb at the 256 MiB cap: 38 million records)
#: each piece is added as it comes, after a copy of the key fold is taken (put back should the
#: stream then fail: nothing of an unreadable stream is added, as the Python loop adds nothing).
#: Memory: a piece, a record and this, whatever the stream.
KEEP_DECOMPRESSED_BYTES = 16 * MIB


@dataclass
class _Stream:
    """A compressed v2 batch's records: what to decompress, and the facts of its records."""

    position: int          # the batch's byte position in the .log
    codec_id: int
    payload: object        # the compressed records
    count: int             # recordsCount
    base_offset: int
    base_timestamp: int
    log_append: int | None  # maxTimestamp of a LogAppendTime batch
    label: str
    max_bytes: int         # the decompression cap

    def pieces(self, whole: bool):
        """The decompressed records in pieces (compression.decompress_chunks); ``whole``: in one
        piece (compression.decompress: a gzip stream zlib refuses, which only cramjam decides)."""
        where = {"magic": v2.MAGIC_VALUE_V2, "max_bytes": self.max_bytes, "label": self.label,
                 "position": self.position + v2.RECORDS_OFFSET}
        if whole:
            return [compression.decompress(self.codec_id, self.payload, **where)]
        return compression.decompress_chunks(self.codec_id, self.payload, **where)


@dataclass
class _Folded:
    """A stream as :func:`_fold_stream` left it: ``added`` records in the key fold, the next at
    stream position ``next_at`` of ``fed`` bytes; ``refused``: None when all recordsCount were
    added, else the bytes KeyFold kept of the record it refused (or that the stream ended in)."""

    stream: _Stream
    added: int
    next_at: int
    fed: int
    refused: bytes | None

    @property
    def whole(self) -> bool:
        """Every record added, and they fill the stream to its last byte (what iter_records reads)."""
        return self.refused is None and self.next_at == self.fed


def _fold_stream(result: PartitionKeys, fold, stream: _Stream) -> _Folded:
    """The stream decompressed piece by piece (compression.decompress_chunks, as the segment scan's
    LogReader.fold_record_times) into ``KeyFold.records_feed``, which adds each record as
    iter_records reads it (a record cut by a piece's end carried) and stops at the first one
    iter_records raises for, keeping its bytes (the fuzz harnesses check that it adds exactly the
    records iter_records yields). Raises FormatError as record_bytes does (decompression, the cap),
    the key fold then as it was."""
    whole = False
    while True:
        one_piece = whole or stream.codec_id not in (compression.CODEC_GZIP, compression.CODEC_LZ4)
        kept, kept_bytes, before = [], 0, None
        fold.records_begin(stream.count, stream.base_offset, stream.base_timestamp, stream.log_append)
        try:
            for piece in stream.pieces(whole):
                if kept is not None:
                    kept_bytes += len(piece)
                    if one_piece or kept_bytes <= KEEP_DECOMPRESSED_BYTES:
                        kept.append(piece if one_piece else bytes(piece))   # (a piece lives until the next)
                        continue
                    before = fold.copy()
                    backlog, kept = kept, None
                    for earlier in backlog:
                        fold.records_feed(earlier)
                fold.records_feed(piece)
        except BaseException as exc:
            if before is not None:
                fold.swap(before)   # the key fold as before this batch (its stream state too: ended)
            else:
                fold.records_end()
            if not isinstance(exc, compression.IrregularStream):
                raise
            whole = True   # only cramjam's reading decides this gzip stream: once more, in one piece
            continue
        break
    for piece in kept or ():
        fold.records_feed(piece)   # (all of them, a record refused or not: fed is then the stream's end)
    added, first, last, next_at, fed, refused = fold.records_end()
    if added:
        _saw_offsets(result, first, last)
    return _Folded(stream, added, next_at, fed, refused)


def _fold_checked(result: PartitionKeys, reader: LogReader, batch, fold, folded: _Folded) -> bool:
    """After _fold_stream: the error of the record KeyFold refused (or of the bytes after the last
    record) raised as the Python loop raises it, read by iter_records from that record's bytes alone
    (v2.refused_in_stream: a sparse map, never the stream); where iter_records reads that record
    (C and Python disagreeing: never seen) it reads on from there in the whole stream."""
    if folded.whole:
        return True
    kept = folded.refused if folded.refused is not None else b""
    error = v2.refused_record_error(batch, v2.refused_in_stream(kept, folded.next_at, folded.fed, folded.added),
                                    label=reader.label)
    if error is None:
        records = folded.stream.pieces(True)[0]
        for record in v2.iter_records(batch, None, label=reader.label, keys=True,
                                      resume=v2.RecordsFrom(records, folded.next_at, len(records), folded.added,
                                                            True)):
            fold.add(record.key, record.value_size, record.offset, record.timestamp_ms)
            _saw_offsets(result, record.offset, record.offset)
    if error is not None:
        try:
            raise error
        finally:
            del error   # (no cycle through this frame: see _fold_in_c)
    return True


def _fold_packed(result: PartitionKeys, reader: LogReader, packed: tuple, fold) -> _Folded | None:
    """A compressed v2 batch the C walk handed back (``packed``: position, codec id, recordsCount,
    baseOffset, size, compressed records, baseTimestamp, maxTimestamp if LogAppendTime else None),
    through _fold_stream; None (nothing added) when decompressing it gives an error: the Python
    reader then reads the batch and notes what."""
    position, codec_id, count, base_offset, _size, payload, base_timestamp, log_append_timestamp = packed
    if count < 0:
        return None   # (a negative recordsCount: record_payload names it)
    try:
        return _fold_stream(result, fold, _Stream(position, codec_id, payload, count, base_offset, base_timestamp,
                                                  log_append_timestamp, reader.label, reader.max_decompressed_bytes))
    except (FormatError, OSError):
        return None
