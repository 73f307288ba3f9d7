"""`.txnindex`: aborted transactions of one segment (`AbortedTxn.java`, `TransactionIndex.java`).

Entry layout (34 bytes, big-endian), appended through a FileChannel, never preallocated::

    VERSION             int16  0 (AbortedTxn.CURRENT_VERSION)
    PRODUCER_ID         int64
    FIRST_OFFSET        int64
    LAST_OFFSET         int64
    LAST_STABLE_OFFSET  int64

Kafka iterates while ``size - position >= 34``, so a trailing partial entry is ignored by the
broker; we report it as a problem. (Kafka's ``AbortedTxn.version()`` reads only the first byte of
the int16; we read the whole int16 and report any version other than 0.)
Reads use os.open(O_RDONLY) + os.pread in chunks; never mmap, write, lock or rename.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

VERSION_OFFSET = 0
VERSION_LENGTH = 2
PRODUCER_ID_OFFSET = VERSION_OFFSET + VERSION_LENGTH
PRODUCER_ID_LENGTH = 8
FIRST_OFFSET_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
FIRST_OFFSET_LENGTH = 8
LAST_OFFSET_OFFSET = FIRST_OFFSET_OFFSET + FIRST_OFFSET_LENGTH
LAST_OFFSET_LENGTH = 8
LAST_STABLE_OFFSET_OFFSET = LAST_OFFSET_OFFSET + LAST_OFFSET_LENGTH
LAST_STABLE_OFFSET_LENGTH = 8
ENTRY_SIZE = LAST_STABLE_OFFSET_OFFSET + LAST_STABLE_OFFSET_LENGTH     # 34
CURRENT_VERSION = 0

_ENTRY = struct.Struct(">hqqqq")
assert _ENTRY.size == ENTRY_SIZE
_ENTRIES_PER_CHUNK = 2048
MAX_PROBLEMS = 20


class AbortedTxn(NamedTuple):
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def decode_entry(buf: bytes, at: int = 0) -> AbortedTxn:
    return AbortedTxn(*_ENTRY.unpack_from(buf, at))


@dataclass(slots=True)
class TxnIndexRead:
    """The aborted transactions, plus evidence. Behaves as the list of entries
    (``len()``, iteration, indexing), so ``len(read_txn_index(p))`` counts aborted transactions."""

    entries: list[AbortedTxn]
    size_bytes: int
    problems: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.entries)

    def __getitem__(self, i):
        return self.entries[i]


def _check(path, i: int, txn: AbortedTxn, problems: list[str]) -> None:
    pos = i * ENTRY_SIZE
    if txn.version != CURRENT_VERSION:
        problems.append(f"{path}: byte {pos}: entry {i}: version = {txn.version}, expected {CURRENT_VERSION}")
    if txn.last_offset < txn.first_offset:
        problems.append(f"{path}: byte {pos + LAST_OFFSET_OFFSET}: entry {i}: last_offset = {txn.last_offset}, "
                        f"expected >= first_offset {txn.first_offset}")


def read_txn_index(path) -> TxnIndexRead:
    """All aborted transactions of one `.txnindex`. Missing file: FileNotFoundError propagates."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        result = TxnIndexRead(entries=[], size_bytes=size, problems=[])
        problems: list[str] = []
        count = size // ENTRY_SIZE
        i = 0
        while i < count:
            want = min(_ENTRIES_PER_CHUNK, count - i)
            buf = os.pread(fd, want * ENTRY_SIZE, i * ENTRY_SIZE)
            got = len(buf) // ENTRY_SIZE
            for j in range(got):
                txn = decode_entry(buf, j * ENTRY_SIZE)
                _check(path, i + j, txn, problems)
                result.entries.append(txn)
            i += got
            if got < want:
                problems.append(f"{path}: file shrank while being read: read ended at byte {i * ENTRY_SIZE}, "
                                f"size was {size} at open")
                break
        if size % ENTRY_SIZE:
            problems.append(f"{path}: byte {count * ENTRY_SIZE}: trailing partial entry of {size % ENTRY_SIZE} "
                            f"bytes, expected a multiple of the {ENTRY_SIZE}-byte aborted-txn entry "
                            f"(Kafka ignores it)")
        if len(problems) > MAX_PROBLEMS:
            dropped = len(problems) - MAX_PROBLEMS
            problems = problems[:MAX_PROBLEMS] + [f"{path}: {dropped} more problems of the same file not listed"]
        result.problems = problems
        return result
    finally:
        os.close(fd)


__all__ = ["ENTRY_SIZE", "AbortedTxn", "TxnIndexRead", "decode_entry", "read_txn_index"]
