"""Shared read-only reader for Kafka's fixed-size index files (`.index`, `.timeindex`).

Invariants of the on-disk format (`AbstractIndex.java`, `OffsetIndex.java`, `TimeIndex.java`):

* the file is an array of fixed-size big-endian entries; an existing file is taken by Kafka as
  ``size // entry_size`` entries (a trailing partial entry is ignored, `roundDownToExactMultiple`);
* each entry carries a 4-byte *relative* offset (offset - the segment's base offset);
* the active segment's index is preallocated (10485760 B by default) and zero-filled past the
  last entry. `DumpLogSegments` stops at the first entry with ``i > 0`` and ``relativeOffset == 0``
  ("since it is a sparse file ... stop if we see one"); we do the same. We also treat an
  **all-zero entry 0** as the start of the zero tail (a freshly preallocated index holds no entry;
  Kafka never indexes the batch at position 0, and never writes timestamp 0 at relative offset 0
  in practice). DumpLogSegments would print that entry; that is the one deviation.

I/O: ``os.open(O_RDONLY)`` + ``os.pread`` only. Never mmap (the broker truncates index files on
roll with `trimToValidSize`; a mapped page past the new end would SIGBUS this process), never
write, lock or rename. Full reads stream in chunks; ``tail_only`` does O(log n) small preads.

Full reads decode with numpy, except small files (at most ``SMALL_ENTRIES`` slots: the closed
segments of a quiet topic, an empty index) which one plain loop decodes to the very same result:
numpy's per-call cost is most of such a read, and its import (~0.1 s) is not paid until an index
needs it (``replay-check`` on small partitions never imports it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

#: Bytes per pread when streaming a whole index (a multiple of 8 and 12).
CHUNK_BYTES = 1 << 16
#: Whole reads of files of at most this many entry slots are decoded without numpy (same result).
SMALL_ENTRIES = 64
#: Above this base offset the absolute offsets may leave int64 (numpy's arithmetic): numpy path.
_SMALL_MAX_BASE = (1 << 63) - 1 - (1 << 31)
#: At most this many problem strings per file; the rest are counted in one summary line.
MAX_PROBLEMS = 20


@dataclass(slots=True)
class IndexRead:
    """What one index file holds.

    entries: ``.index``: (absolute offset, position); ``.timeindex``: (timestamp_ms, absolute offset).
    With ``tail_only`` only the last valid entry is listed; ``entry_count`` still counts all of them.
    """

    entries: list[tuple[int, int]]
    entry_count: int
    size_bytes: int
    zero_tail_bytes: int
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """How to read one index kind. ``decode(buf, at)`` returns the raw entry
    (first value, relative offset, second value as reported)."""

    kind: str                       # "offset index" | "time index"
    entry_size: int
    decode: Callable[[bytes, int], tuple[int, int]]   # -> (raw key field, relative offset)
    to_entry: Callable[[int, int, int], tuple[int, int]]  # (key, rel, base) -> reported tuple
    key_name: str                   # "position" | "timestamp_ms"
    np_fields: tuple                # the entry as numpy record fields "key" and "rel": ((name, dtype), ...)
    offset_first: bool              # reported tuple is (offset, key) rather than (key, offset)


class _Problems:
    def __init__(self, out: list[str]):
        self.out = out
        self.dropped = 0

    def add(self, text: str) -> None:
        if len(self.out) < MAX_PROBLEMS:
            self.out.append(text)
        else:
            self.dropped += 1

    def finish(self, path) -> None:
        if self.dropped:
            self.out.append(f"{path}: {self.dropped} more problems of the same file not listed")


def _pread_exact(fd: int, size: int, offset: int) -> bytes:
    """pread until ``size`` bytes or EOF (a short result means the file shrank)."""
    parts = []
    got = 0
    while got < size:
        chunk = os.pread(fd, size - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _is_zero_tail(i: int, key: int, rel: int) -> bool:
    """The stop rule of docs/kafka-format-notes.md, "Index files" (DumpLogSegments'), plus an all-zero entry 0."""
    if i > 0:
        return rel == 0
    return rel == 0 and key == 0


def read_index(path, base_offset: int, layout: IndexLayout, *, tail_only: bool = False,
               check_order: Callable[[tuple[int, int], tuple[int, int]], list[str]] | None = None) -> IndexRead:
    """Read one index file; FileNotFoundError / OSError propagate (the scanner turns them into notes)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        result = IndexRead(entries=[], entry_count=0, size_bytes=size, zero_tail_bytes=0, problems=[])
        problems = _Problems(result.problems)
        es = layout.entry_size
        slots = size // es
        if size % es:
            problems.add(
                f"{path}: size {size} bytes is not a multiple of the {layout.kind} entry size {es} B "
                f"({size % es} trailing bytes ignored, as Kafka does)")
        if tail_only:
            _read_tail(fd, path, base_offset, layout, slots, result, problems, check_order)
        elif slots <= SMALL_ENTRIES and 0 <= base_offset <= _SMALL_MAX_BASE:
            _read_all_small(fd, path, base_offset, layout, slots, result, problems, check_order)
        else:
            _read_all(fd, path, base_offset, layout, slots, result, problems, check_order)
        problems.finish(path)
        return result
    finally:
        os.close(fd)


def _read_all(fd, path, base_offset, layout, slots, result, problems, check_order) -> None:
    """Every entry, decoded a chunk at a time with numpy (the headers depth reads whole indexes;
    per-entry Python was a third of its time). Entries that may break a rule are found
    vectorised, then described one by one by ``_check_entry``, the one place messages are made."""
    import numpy as np  # here: small files never need it (_read_all_small)

    dtype = np.dtype(list(layout.np_fields))
    es = layout.entry_size
    per_chunk = max(1, CHUNK_BYTES // es)
    i = 0
    prev = None
    while i < slots:
        want = min(per_chunk, slots - i)
        buf = _pread_exact(fd, want * es, i * es)
        if len(buf) < want * es:
            problems.add(f"{path}: file shrank while being read: read ended at byte {i * es + len(buf)}, "
                         f"size was {result.size_bytes} at open (the broker trims indexes on roll)")
            want = len(buf) // es
            slots = i + want
        chunk = np.frombuffer(buf, dtype=dtype, count=want)
        key = chunk["key"].astype(np.int64)
        rel = chunk["rel"].astype(np.int64)
        zero = rel == 0
        if i == 0 and want:
            zero[0] = _is_zero_tail(0, int(key[0]), int(rel[0]))
        zeros = np.flatnonzero(zero)
        n = int(zeros[0]) if len(zeros) else want
        key, rel = key[:n], rel[:n]
        absolute = rel + base_offset
        first, second = (absolute, key) if layout.offset_first else (key, absolute)
        # A superset of what check_order can report (both layouts compare each component with
        # the previous entry's), plus negative relative offsets.
        suspect = rel < 0
        if n > 1:
            suspect[1:] |= (first[1:] <= first[:-1]) | (second[1:] <= second[:-1])
        if n and prev is not None:
            suspect[0] |= bool(first[0] <= prev[0] or second[0] <= prev[1])
        entries = list(zip(first.tolist(), second.tolist()))
        for j in np.flatnonzero(suspect).tolist():
            _check_entry(path, layout, i + j, int(key[j]), int(rel[j]), entries[j],
                         entries[j - 1] if j else prev, problems, check_order)
        result.entries.extend(entries)
        if entries:
            prev = entries[-1]
        i += n
        if n < want:
            result.zero_tail_bytes = (slots - i) * es
            result.entry_count = i
            return
    result.entry_count = i


def _read_all_small(fd, path, base_offset, layout, slots, result, problems, check_order) -> None:
    """:func:`_read_all` of a file of at most SMALL_ENTRIES slots (one chunk), entry by entry without
    numpy: the same entries, counts and problems, in the same order (tests/test_index_and_text_formats.py
    compares both on real and damaged files)."""
    es = layout.entry_size
    buf = _pread_exact(fd, slots * es, 0)
    if len(buf) < slots * es:
        problems.add(f"{path}: file shrank while being read: read ended at byte {len(buf)}, "
                     f"size was {result.size_bytes} at open (the broker trims indexes on roll)")
        slots = len(buf) // es
    decode, to_entry = layout.decode, layout.to_entry
    entries = result.entries
    prev = None
    for i in range(slots):
        key, rel = decode(buf, i * es)
        if rel == 0 and (i > 0 or key == 0):  # _is_zero_tail
            result.zero_tail_bytes = (slots - i) * es
            result.entry_count = i
            return
        entry = to_entry(key, rel, base_offset)
        if rel < 0 or (prev is not None and (entry[0] <= prev[0] or entry[1] <= prev[1])):
            _check_entry(path, layout, i, key, rel, entry, prev, problems, check_order)
        entries.append(entry)
        prev = entry
    result.entry_count = slots


def _check_entry(path, layout, i, key, rel, entry, prev, problems, check_order) -> None:
    pos = i * layout.entry_size
    if rel < 0:
        problems.add(f"{path}: byte {pos}: entry {i}: relative offset = {rel}, expected >= 0 "
                     f"(offset - segment base offset fits a non-negative int32)")
    if prev is not None and check_order is not None:
        for what in check_order(prev, entry):
            problems.add(f"{path}: byte {pos}: entry {i}: {what}")


def _read_tail(fd, path, base_offset, layout, slots, result, problems, check_order) -> None:
    """Find the last valid entry with O(log n) preads: valid entries are a prefix [0, n)."""
    es = layout.entry_size

    # Entries already read, by slot: a trimmed index (every closed segment) then costs two preads,
    # the first entry and the last two, whatever its length.
    seen: dict[int, tuple[int, int] | None] = {}

    def read_run(i: int, count: int) -> None:
        buf = _pread_exact(fd, es * count, i * es)
        for j in range(count):
            seen[i + j] = layout.decode(buf, j * es) if len(buf) >= (j + 1) * es else None

    def entry_at(i: int):
        if i not in seen:
            read_run(i, 1)
        return seen[i]

    def valid(i: int) -> bool:
        raw = entry_at(i)
        return raw is not None and not _is_zero_tail(i, *raw)

    if slots >= 2:
        read_run(slots - 2, 2)
    if slots == 0 or not valid(0):
        n = 0
    elif valid(slots - 1):
        n = slots                      # trimmed (inactive) index: the common case
    else:
        lo, hi = 0, slots - 1          # valid(lo) and not valid(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if valid(mid):
                lo = mid
            else:
                hi = mid
        n = hi
    result.entry_count = n
    result.zero_tail_bytes = (slots - n) * es
    if n == 0:
        return
    first_raw = entry_at(0)
    last_raw = entry_at(n - 1)
    if first_raw is None or last_raw is None:
        problems.add(f"{path}: file shrank while being read (size was {result.size_bytes} at open)")
        return
    first = layout.to_entry(*first_raw, base_offset)
    last = layout.to_entry(*last_raw, base_offset)
    if n >= 2:
        prev_raw = entry_at(n - 2)
        if prev_raw is not None:
            _check_entry(path, layout, n - 1, *last_raw, last, layout.to_entry(*prev_raw, base_offset),
                         problems, check_order)
        if n > 2 and check_order is not None:
            # Kafka's sanityCheck compares the last entry with the first one.
            for what in check_order(first, last):
                problems.add(f"{path}: byte {(n - 1) * layout.entry_size}: entry {n - 1} vs entry 0: {what}")
    else:
        _check_entry(path, layout, 0, *last_raw, last, None, problems, check_order)
    result.entries.append(last)
