"""The modern lookup's two index lookups by binary search in the index file (a few 12- or 8-byte
preads) instead of reading it whole, where that is proven to give the answer of the whole read.

Our lookups are Python's ``bisect_right`` over the entries the whole read keeps
(``auditor.formats._fixed_index``: the entries up to the first zero-tail entry). A binary search
that reads only the entries it visits visits the same ones, so it answers the same exactly when it
searches the same number of entries. That number is in the segment's scanned row
(``index_entries`` / ``timeindex_entries``) when the row came from a whole read: a closed segment
scanned at depth headers or deep (depth index reads tails only; an incremental scan re-reads an
active segment's tails, never a closed one's). The row's file size and mtime must also be the
file's now (a broker rebuilding an index on recovery, or trimming it on a roll, changes them).
Otherwise, and for files a single pread reads whole anyway (< ``LAZY_MIN_BYTES``), None: the
caller reads the file whole, as before.
"""

from __future__ import annotations

import os

from auditor.formats import offset_index, time_index

#: Index files smaller than this are read whole (one pread: a binary search would take more calls).
LAZY_MIN_BYTES = 1 << 16
#: Depths whose rows carry the entry counts of a whole read of the indexes.
WHOLE_READ_DEPTHS = ("headers", "deep")


def _last_at_or_below(path: str | None, base_offset: int, layout, entries: int | None,
                      size: int | None, mtime_ms: int | None, target: int) -> tuple[int, int] | None | bool:
    """The entry (as the whole read reports it) of ``bisect_right(keys, target) - 1`` over the first
    ``entries`` entries of the file, read by binary search: the entry, None when there is none
    (the target is below the first key), False when the search is not proven equal to a whole read.
    ``layout``: the index kind's ``LAYOUT`` (``auditor.formats.time_index`` / ``offset_index``)."""
    if not path or entries is None or size is None or mtime_ms is None or size < LAZY_MIN_BYTES:
        return False
    es = layout.entry_size
    if entries < 0 or entries * es > size:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if st.st_size != size or st.st_mtime_ns // 1_000_000 != mtime_ms:
            return False

        def entry(i: int) -> tuple[int, int] | None:
            buf = os.pread(fd, es, i * es)
            return layout.to_entry(*layout.decode(buf, 0), base_offset) if len(buf) == es else None

        lo, hi = 0, entries
        while lo < hi:  # bisect.bisect_right, one entry read per step
            mid = (lo + hi) // 2
            found = entry(mid)
            if found is None:
                return False
            if target < found[0]:
                hi = mid
            else:
                lo = mid + 1
        if lo == 0:
            return None
        last = entry(lo - 1)
        return False if last is None else last
    except OSError:
        return False
    finally:
        os.close(fd)


def _proven(seg) -> bool:
    return seg.is_active is not None and not seg.is_active and seg.depth in WHOLE_READ_DEPTHS


def time_index_lookup_in_file(seg, replay_at_ms: int) -> int | None:
    """``TimeIndex.lookup`` (the offset of the last entry with timestamp <= target, else the base
    offset) by binary search in ``seg``'s ``.timeindex``; None: read it whole instead."""
    if not _proven(seg):
        return None
    found = _last_at_or_below(seg.timeindex_path, seg.base_offset, time_index.LAYOUT, seg.timeindex_entries,
                              seg.timeindex_size_bytes, seg.timeindex_mtime_ms, replay_at_ms)
    if found is False:
        return None
    return seg.base_offset if found is None else found[1]


def offset_index_lookup_in_file(seg, target_offset: int) -> int | None:
    """``OffsetIndex.lookup`` (the position of the last entry with offset <= target, else 0) by
    binary search in ``seg``'s ``.index``; None: read it whole instead."""
    if not _proven(seg):
        return None
    found = _last_at_or_below(seg.index_path, seg.base_offset, offset_index.LAYOUT, seg.index_entries,
                              seg.index_size_bytes, seg.index_mtime_ms, target_offset)
    if found is False:
        return None
    return 0 if found is None else found[1]
