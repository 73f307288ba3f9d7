"""`<offset20>.snapshot`: producer state snapshot (`ProducerStateManager.java`,
`storage/src/main/resources/message/ProducerSnapshot.json`, valid version 1, not flexible).

Layout (big-endian)::

    VERSION        int16   1
    CRC            uint32  CRC-32C of bytes [PRODUCER_ENTRIES_OFFSET, end)
    ENTRY_COUNT    int32   array length of ProducerEntries (non-nullable)
    entries        ENTRY_COUNT * 46 bytes: ProducerId int64, Epoch int16, LastSequence int32,
                   LastOffset int64, OffsetDelta int32, Timestamp int64, CoordinatorEpoch int32,
                   CurrentTxnFirstOffset int64

The CRC covers the entry count as well (it starts at byte 6). Reads stream through the file
with os.pread (CRC computed incrementally), so memory stays bounded whatever the size.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import crc32c

VERSION_OFFSET = 0
VERSION_LENGTH = 2
CRC_OFFSET = VERSION_OFFSET + VERSION_LENGTH
CRC_LENGTH = 4
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + CRC_LENGTH        # 6: the CRC covers [6, end)
ENTRY_COUNT_OFFSET = PRODUCER_ENTRIES_OFFSET
ENTRY_COUNT_LENGTH = 4
HEADER_SIZE = ENTRY_COUNT_OFFSET + ENTRY_COUNT_LENGTH    # 10: an empty snapshot
ENTRY_SIZE = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8               # 46
SUPPORTED_VERSIONS = (1,)
CHUNK_BYTES = 1 << 16

_HEADER = struct.Struct(">hIi")
assert _HEADER.size == HEADER_SIZE


@dataclass(slots=True)
class SnapshotHeader:
    """version / crc_stored / entry_count are None when the file is too short to hold them."""

    version: int | None
    crc_stored: int | None
    crc_computed: int | None
    entry_count: int | None
    ok: bool                     # version supported, CRC matches, size == 10 + 46 * entry_count
    crc_ok: bool
    size_bytes: int
    problems: list[str] = field(default_factory=list)


def read_producer_snapshot_header(path) -> SnapshotHeader:
    """Check one producer snapshot. Missing file: FileNotFoundError propagates."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, HEADER_SIZE, 0)
        problems: list[str] = []
        version = crc_stored = entry_count = crc_computed = None
        if len(head) >= CRC_OFFSET:
            version = struct.unpack_from(">h", head, VERSION_OFFSET)[0]
        if len(head) >= PRODUCER_ENTRIES_OFFSET:
            crc_stored = struct.unpack_from(">I", head, CRC_OFFSET)[0]
        if len(head) >= HEADER_SIZE:
            entry_count = struct.unpack_from(">i", head, ENTRY_COUNT_OFFSET)[0]
        else:
            problems.append(f"{path}: byte 0: size = {size}, expected >= {HEADER_SIZE} "
                            f"(int16 version, uint32 crc, int32 entry count)")
        if version is not None and version not in SUPPORTED_VERSIONS:
            problems.append(f"{path}: byte {VERSION_OFFSET}: version = {version}, expected one of {SUPPORTED_VERSIONS}")
        if crc_stored is not None:
            crc = 0
            pos = PRODUCER_ENTRIES_OFFSET
            while pos < size:
                chunk = os.pread(fd, min(CHUNK_BYTES, size - pos), pos)
                if not chunk:
                    problems.append(f"{path}: file shrank while being read: read ended at byte {pos}, "
                                    f"size was {size} at open")
                    break
                crc = crc32c.crc32c(chunk, value=crc)
                pos += len(chunk)
            crc_computed = crc
            if crc_computed != crc_stored:
                problems.append(f"{path}: byte {CRC_OFFSET}: crc = {crc_stored}, expected CRC-32C of bytes "
                                f"[{PRODUCER_ENTRIES_OFFSET}, {size}) = {crc_computed}")
        if entry_count is not None:
            expected_size = HEADER_SIZE + ENTRY_SIZE * entry_count
            if entry_count < 0:
                problems.append(f"{path}: byte {ENTRY_COUNT_OFFSET}: entry_count = {entry_count}, expected >= 0")
            elif size != expected_size:
                problems.append(f"{path}: byte {ENTRY_COUNT_OFFSET}: entry_count = {entry_count}, expected "
                                f"({size} - {HEADER_SIZE}) / {ENTRY_SIZE} from the file size "
                                f"(size {size}, expected {expected_size})")
        crc_ok = crc_computed is not None and crc_computed == crc_stored
        return SnapshotHeader(version=version, crc_stored=crc_stored, crc_computed=crc_computed,
                              entry_count=entry_count, ok=crc_ok and not problems, crc_ok=crc_ok,
                              size_bytes=size, problems=problems)
    finally:
        os.close(fd)


__all__ = ["ENTRY_SIZE", "HEADER_SIZE", "SnapshotHeader", "read_producer_snapshot_header"]
