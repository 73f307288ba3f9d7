"""Continuing an active segment's walk where the last run stopped (``--state``, headers depth).

The broker only appends to its active segment (or truncates it, or replaces it: recovery, the
cleaner, a replica moved between log dirs). A nightly scan with ``--state`` need not read the
bytes it already folded: the state keeps, per active segment, where the last walk ended, the
position and the 61 header bytes of the last batch walked (its CRC among them: the CRC covers the
whole batch), the ``(device, inode)`` of the ``.log`` and of its indexes, and the row then.

The next run continues from that end, with the row's totals as the start of the fold, only when
all of this holds (:func:`verified_end`, :func:`same_index_files`):

* the ``.log`` open for the walk is the same file: same device and inode (a cleaner rewrite, a
  move between log dirs or a re-created segment is another inode);
* it is not smaller than where the last walk ended (a truncation below it is caught; one above it
  cut only bytes the last run never counted);
* the batch header at the recorded position is byte for byte the recorded one, and ends where
  the last walk ended (a truncation followed by new appends writes other batches there);
* the ``.index`` and ``.timeindex`` are the same files, present or absent as before (a rebuilt
  index is a new file), and a ``.txnindex`` that was there still is;
* the last run's row was clean: no note, no stop reason, only v2 batches (what a seed needs).

Anything else reads the whole segment, as without state. When the ``.log`` has not grown and
every index file has the inode, size and mtime it had (the nightly case of a quiet partition),
the indexes are read at their ends only (the 'index' depth's O(log n) reads), and their columns
must come out equal to the last run's, else they are read whole. Entries between an index's
first and last are then not re-read: as for a closed segment's proof, a change that keeps a
file's inode, size and mtime (and here its entry count and last entry) is not seen; the broker
writes none (it appends; it trims on a roll and truncates to rebuild on recovery, both of which
change the size or mtime; it deletes a corrupt index and writes a new file). The columns taken from the files
around the walk are never carried over: sizes and mtimes (``lstat``), every index-derived
column (``index_entries``, ``last_index_*``, ``timeindex_entries``, ``last_timeindex_*``: the
indexes are read whole at headers depth, as a full scan reads them), ``aborted_txns`` (the
``.txnindex``), ``trailing_bytes`` and ``stop_reason`` (this walk's end), the notes (the index
readers' and this walk's), ``is_active`` and ``scanned_at_ms``. Carried over and merged: first
batch (offset, max timestamp), last batch (replaced when batches were appended), counts of
batches, records, transactional and control batches, ABORT/COMMIT markers, the largest record
timestamp and the smallest first-record timestamp, timestamp types, magics and codecs. Columns of
the ``deep`` depth (record timestamps' offsets, backward jumps, CRC failures) need every record:
a ``deep`` state never continues a segment.
"""

from __future__ import annotations

import os
import stat as stat_mod
import time

from auditor.formats.log_reader import c_quiet_facts
from auditor.formats.offset_index import read_offset_index
from auditor.formats.record_batch import RECORD_BATCH_OVERHEAD
from auditor.formats.time_index import read_time_index

LENGTH_AT = 8
"""Byte of the batch length field (after the 8-byte base offset)."""


def _stat(stats: dict, suffix: str) -> list[int] | None:
    """[device, inode, size, mtime ns] of one of the segment's files as lstat saw it, or None."""
    found = stats.get(suffix)
    return list(found) if found is not None else None


def _same_file(recorded, now) -> bool:
    return (recorded is None) == (now is None) and (recorded is None or recorded[:2] == now[:2])


def same_index_files(info: dict, stats: dict) -> bool:
    """The segment's indexes are the files the last run read (see the module doc)."""
    for suffix in ("index", "timeindex"):
        if not _same_file(info.get(suffix), _stat(stats, suffix)):
            return False
    txn = info.get("txnindex")
    return txn is None or _same_file(txn, _stat(stats, "txnindex"))


def indexes_unchanged(info: dict, stats: dict) -> bool:
    """Every index file has the inode, size and mtime it had at the last run (or is absent as then)."""
    return all(info.get(suffix) == _stat(stats, suffix) for suffix in ("index", "timeindex", "txnindex"))


def verified_end(reader, info: dict) -> int | None:
    """Where the last run's walk ended, when the open ``.log`` proves its bytes up to there are the
    ones that run folded; None otherwise (the whole segment is read)."""
    try:
        st = os.fstat(reader._fd)  # the descriptor the walk reads: what is checked is what is read
        if [st.st_dev, st.st_ino] != info["log"] or reader.size_bytes < info["end"]:
            return None
        head = bytes(reader._read(info["pos"], RECORD_BATCH_OVERHEAD))
    except (OSError, KeyError, TypeError, ValueError):
        return None
    return info["end"] if _header_proves_end(head, info) else None


def _header_proves_end(head: bytes, info: dict) -> bool:
    """The header read at the recorded position is the recorded one, and its batch ends where the
    last run's walk ended."""
    return (head.hex() == info.get("head")
            and info["pos"] + 12 + int.from_bytes(head[LENGTH_AT:LENGTH_AT + 4], "big", signed=True) == info["end"])


INDEX_COLUMNS = ("index_entries", "last_index_offset", "last_index_position", "timeindex_entries",
                 "last_timeindex_timestamp_ms", "last_timeindex_offset", "aborted_txns")
"""The row's columns read from the index files (.index, .timeindex, .txnindex)."""
WALK_COLUMNS = ("first_offset", "first_batch_max_timestamp_ms", "last_offset", "last_batch_max_timestamp_ms",
                "max_timestamp_ms", "min_batch_timestamp_ms", "batch_count", "record_count", "timestamp_types",
                "magics", "codecs", "transactional_batches", "control_batches", "abort_markers", "commit_markers")
"""The row's columns the headers walk of the .log folds (what a continued walk carries over)."""


def quiet_end(log_path, info: dict) -> bool:
    """True when the .log is the file the last run walked, exactly as long as where that walk ended,
    with the recorded header at the recorded position: nothing was appended, nothing is to be walked
    (:func:`verified_end` without a LogReader: one open, one fstat, one 61-byte pread)."""
    try:
        fd = os.open(log_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if [st.st_dev, st.st_ino] != info["log"] or st.st_size != info["end"]:
            return False
        head = os.pread(fd, RECORD_BATCH_OVERHEAD, info["pos"])
    except (OSError, KeyError, TypeError, ValueError):
        return False
    finally:
        os.close(fd)
    return _header_proves_end(head, info)


def took_quiet_walk(row: dict, log_path, resume: tuple[dict, dict], out: dict | None, stats: dict) -> bool:
    """True, with the walk's columns of the last run's row in ``row`` (and ``out`` filled for the next
    run), when nothing was appended to the .log since (:func:`quiet_end`); False having set nothing."""
    info, old = resume
    if row["log_size_bytes"] != info.get("end") or not quiet_end(log_path, info):
        return False
    row.update({column: old[column] for column in WALK_COLUMNS})
    row["trailing_bytes"] = 0
    if out is not None:
        out["continued_from"] = info["end"]
        out["resume"] = {**info, **{suffix: _stat(stats, suffix) for suffix in ("index", "timeindex", "txnindex")}}
    return True


def record_end(row: dict, reader, last_pos: int | None, inodes: dict, out: dict, known: dict | None = None) -> None:
    """Fills ``out["resume"]`` with where this walk ended, when the next run may continue from there.
    ``known``: the last run's record when this walk verified its last batch and appended nothing."""
    if (last_pos is None or reader.stop_reason is not None or row["magics"] != [2]
            or row["record_count"] is None or reader.stop_position != reader.size_bytes):
        return
    if known is not None and known["end"] == reader.stop_position:  # verified by verified_end on this descriptor
        log, head = known["log"], known["head"]
    else:
        try:
            st = os.fstat(reader._fd)
            log, head = [st.st_dev, st.st_ino], bytes(reader._read(last_pos, RECORD_BATCH_OVERHEAD)).hex()
        except OSError:
            return
    out["resume"] = {"log": log, "pos": last_pos, "end": reader.stop_position, "head": head,
                     **{suffix: _stat(inodes, suffix) for suffix in ("index", "timeindex", "txnindex")}}


def can_seed(row: dict) -> bool:
    """A last run's row that a walk may continue from: clean, v2 only, at headers depth."""
    return (row.get("depth") == "headers" and not row.get("notes") and row.get("stop_reason") is None
            and row.get("magics") == [2] and row.get("record_count") is not None and not row.get("trailing_bytes")
            and row.get("file_state") is None)


QUIET_FIELDS = ("log_dev", "log_ino", "log_size_bytes", "log_mtime_ns", "index_dev", "index_ino", "index_size_bytes",
                "index_mtime_ns", "timeindex_dev", "timeindex_ino", "timeindex_size_bytes", "timeindex_mtime_ns",
                "index_entries", "last_index_offset", "last_index_position", "timeindex_entries",
                "last_timeindex_timestamp_ms", "last_timeindex_offset", "head")
"""What :func:`quiet_facts` returns, in order: lstat of the three files, the index tails (the
'index' depth's O(log n) reads), the RECORD_BATCH_OVERHEAD bytes at the recorded position."""


def quiet_facts(log, index, timeindex, base_offset: int, pos: int) -> tuple | None:
    """QUIET_FIELDS of an active segment, or None when anything would need a note (then the segment
    goes the usual way). One C call when the extension is built (tests/test_scan_resume.py proves
    it gives :func:`quiet_facts_py`'s tuple)."""
    if c_quiet_facts is None:
        return quiet_facts_py(log, index, timeindex, base_offset, pos)
    try:
        return c_quiet_facts(log, index, timeindex, base_offset, pos)
    except (OSError, ValueError, OverflowError):
        return None


def quiet_facts_py(log, index, timeindex, base_offset: int, pos: int) -> tuple | None:
    """:func:`quiet_facts` in Python (the extension's fallback)."""
    try:
        st = [os.lstat(path) for path in (log, index, timeindex)]
        if not all(stat_mod.S_ISREG(s.st_mode) for s in st) or (st[2].st_size == 0 and st[0].st_size > 0):
            return None
        tails = []
        for path, read in ((index, read_offset_index), (timeindex, read_time_index)):
            found = read(path, base_offset, tail_only=True)
            if found.problems:
                return None
            tails += [found.entry_count, *(found.entries[-1] if found.entries else (None, None))]
        if pos < 0 or pos + RECORD_BATCH_OVERHEAD > st[0].st_size:
            return None
        fd = os.open(log, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
        try:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino, fst.st_size) != (st[0].st_dev, st[0].st_ino, st[0].st_size):
                return None
            head = os.pread(fd, RECORD_BATCH_OVERHEAD, pos)
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None
    if len(head) != RECORD_BATCH_OVERHEAD:
        return None
    return (*(v for s in st for v in (s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns)), *tails, head)


def quiet_row(paths: dict, base_offset: int, resume: tuple[dict, dict]) -> dict | None:
    """An active segment's row without the scan, when nothing was appended since the last run: the
    .log is the same file exactly as long as where that walk ended with the recorded header at the
    recorded position (:func:`quiet_end`), the indexes are the same files with the inode, size and
    mtime they had and the entry counts and last entries of the last run's row, no .txnindex, and
    that row was clean (:func:`can_seed`). The row is the last run's with this run's lstat sizes
    and mtimes: what the scan's quiet path gives (:func:`took_quiet_walk`); None otherwise (the
    segment is scanned: continued, or read whole)."""
    info, old = resume
    if paths.keys() != _QUIET_FILES or info.get("txnindex") is not None or old["aborted_txns"] is not None:
        return None
    try:
        facts = quiet_facts(paths["log"], paths["index"], paths["timeindex"], base_offset, info["pos"])
        if facts is None:
            return None
        # (by position, QUIET_FIELDS: this runs once per active segment of a nightly run)
        if (facts[2] != info["end"] or [facts[0], facts[1]] != info["log"] or list(facts[4:8]) != info["index"]
                or list(facts[8:12]) != info["timeindex"] or not _header_proves_end(facts[18], info)):
            return None
    except (KeyError, TypeError, ValueError):
        return None
    if facts[12:18] != tuple(old[column] for column in INDEX_COLUMNS[:-1]):
        return None
    first, last = old["first_offset"], old["last_offset"]
    if first is not None and first < base_offset and last is not None and last < base_offset:
        return None  # the scan writes a note about it
    row = old  # (decoded for this segment alone: the caller uses it no further)
    row["log_size_bytes"], row["log_mtime_ms"] = facts[2], facts[3] // 1_000_000
    row["index_size_bytes"], row["index_mtime_ms"] = facts[6], facts[7] // 1_000_000
    row["timeindex_size_bytes"], row["timeindex_mtime_ms"] = facts[10], facts[11] // 1_000_000
    row["is_active"] = True
    row["scanned_at_ms"] = time.time_ns() // 1_000_000
    return row


_QUIET_FILES = {"log", "index", "timeindex"}
