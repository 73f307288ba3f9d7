"""Producer state snapshots (auditor/formats/producer_snapshot.py).

Input: the bytes of one ``.snapshot``. Checks: the reader never raises for the file's content;
``ok`` only when the version is supported, the CRC-32C matches and the size is exactly
10 + 46 * entry_count; every problem names the file.
"""

from __future__ import annotations

from auditor.formats.producer_snapshot import ENTRY_SIZE, HEADER_SIZE, read_producer_snapshot_header

from fuzz.common import Disagreement, write


def one_input(data: bytes) -> None:
    path = write("00000000000000000000.snapshot", data)
    h = read_producer_snapshot_header(path)
    if h.ok and not (h.version == 1 and h.crc_ok and h.entry_count is not None
                     and h.size_bytes == HEADER_SIZE + ENTRY_SIZE * h.entry_count):
        raise Disagreement(f"snapshot read as ok but it is not: {h}")
    if not h.ok and not h.problems:
        raise Disagreement(f"snapshot not ok without a problem saying why: {h}")
    if any(str(path) not in p for p in h.problems):
        raise Disagreement(f"a problem that does not name the file: {h.problems}")
