"""Leave the broker's page cache as it was, and read at a bounded rate (``collect --nice``).

A scan pulls every page it reads into the page cache, evicting what the broker's consumers
read (the hot tail). :class:`PageCacheCare` wraps the scan of one segment: before it, the
residency of each of the segment's files is taken with ``mincore`` (the file mapped read-only,
``PROT_READ`` + ``MAP_SHARED`` on an ``O_RDONLY`` descriptor: mapping touches no page, nothing is
locked or written, and ``mincore`` never faults a page in); after it, the ranges that were not
resident before, within the size the file had before, are dropped with
``posix_fadvise(POSIX_FADV_DONTNEED)``. Pages that were resident stay; bytes the broker
appended during the scan (beyond the old size) are never dropped.

:class:`ReadRate` bounds the scan's reads to ``--max-read-rate`` MiB/s: after each segment it
sleeps as long as the bytes read so far require (bytes from ``/proc/self/io`` ``rchar``: every
byte the process read through system calls, the C walker's included).

Linux only; elsewhere both are inactive and say so (``available``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

PAGE = mmap.PAGESIZE
_PROT_READ = 0x1
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value
NICE_READ_RATE_MIB_S = 64.0
"""``collect --nice`` reads at most this many MiB/s unless ``--max-read-rate`` says otherwise."""


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long)
        libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()
AVAILABLE = _LIBC is not None and hasattr(os, "posix_fadvise")


def residency(fd: int, size: int) -> bytes | None:
    """One byte per page of the first ``size`` bytes: bit 0 set when the page is in the page cache.
    None when it cannot be told (not Linux, mapping refused)."""
    if not AVAILABLE or size <= 0:
        return b"" if size <= 0 else None
    addr = _LIBC.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        return None
    try:
        pages = (size + PAGE - 1) // PAGE
        vec = (ctypes.c_ubyte * pages)()
        if _LIBC.mincore(ctypes.c_void_p(addr), size, vec) != 0:
            return None
        return bytes(vec)
    finally:
        _LIBC.munmap(ctypes.c_void_p(addr), size)


def file_residency(path: str | os.PathLike) -> tuple[int, int]:
    """(resident pages, total pages) of a file, read-only; (0, 0) when it cannot be told."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return 0, 0
    try:
        size = os.fstat(fd).st_size
        vec = residency(fd, size)
        if vec is None:
            return 0, 0
        return sum(b & 1 for b in vec), len(vec)
    finally:
        os.close(fd)


def cold_ranges(vec: bytes) -> list[tuple[int, int]]:
    """(offset, length) in bytes of each run of pages whose residency bit is clear."""
    out = []
    start = None
    for i, b in enumerate(vec):
        if not b & 1:
            if start is None:
                start = i
        elif start is not None:
            out.append((start * PAGE, (i - start) * PAGE))
            start = None
    if start is not None:
        out.append((start * PAGE, (len(vec) - start) * PAGE))
    return out


class PageCacheCare:
    """Drops from the page cache exactly the pages a segment's scan brought in (see the module doc)."""

    def __init__(self) -> None:
        self.dropped_bytes = 0
        self.files = 0

    def around(self, paths: Iterable[str | os.PathLike], scan: Callable[[], T]) -> T:
        """Runs ``scan()``, then drops the pages of ``paths`` it brought into the page cache."""
        held = []
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOATIME", 0))
            except PermissionError:  # O_NOATIME needs ownership
                try:
                    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                except OSError:
                    continue
            except OSError:
                continue  # the scan writes the note
            try:
                vec = residency(fd, os.fstat(fd).st_size)
            except OSError:
                vec = None
            if vec is None:
                os.close(fd)
                continue
            held.append((fd, vec))
        try:
            return scan()
        finally:
            for fd, vec in held:
                try:
                    for offset, length in cold_ranges(vec):
                        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
                        self.dropped_bytes += length
                    self.files += 1
                except OSError:
                    pass
                finally:
                    os.close(fd)


def read_chars() -> int | None:
    """This process's ``rchar`` (bytes read through system calls), or None off Linux."""
    try:
        with open("/proc/self/io", "rb") as fh:
            for line in fh:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class ReadRate:
    """Sleeps between segments so that the bytes read stay under ``mib_per_s``."""

    def __init__(self, mib_per_s: float) -> None:
        if mib_per_s <= 0:
            raise ValueError(f"--max-read-rate {mib_per_s}: expected a positive number of MiB/s")
        self.bytes_per_s = mib_per_s * 1024 * 1024
        self.start_bytes = read_chars()
        self.started = time.monotonic()
        self.slept_s = 0.0

    def pace(self) -> None:
        now_bytes = read_chars()
        if now_bytes is None or self.start_bytes is None:
            return
        due = (now_bytes - self.start_bytes) / self.bytes_per_s - (time.monotonic() - self.started)
        if due > 0:
            time.sleep(due)
            self.slept_s += due
