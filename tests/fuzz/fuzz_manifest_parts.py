"""The manifest's cluster parts: gzip JSON Lines with a header line and an end line
(auditor/cluster/portable.py read_metadata / read_remote / read_groups, read through
auditor/manifest.py _part_of as the audit and replay-check read them).

Input: a selector byte, then the part. Selector bit 0x80 clear: the rest is the JSON Lines text,
gzip-compressed by the harness (so the fuzzer mutates the lines, not deflate's bits); set: the
rest is the file's bytes as they are (a damaged gzip stream). Check: ``_part_of`` returns the
part, or None with a note saying why; it never raises, whatever the file holds.
"""

from __future__ import annotations

import gzip

from auditor import manifest
from auditor.cluster import portable

from fuzz.common import scratch

PARTS = (
    (manifest.CLUSTER_METADATA_FILE, portable.read_metadata),
    (manifest.CLUSTER_METADATA_FILE, portable.read_metadata_header),
    (manifest.REMOTE_LOG_METADATA_FILE, portable.read_remote),
    (manifest.CONSUMER_GROUPS_FILE, portable.read_groups),
)


def one_input(data: bytes) -> None:
    if not data:
        return
    name, read = PARTS[data[0] % len(PARTS)]
    body = data[1:] if data[0] & 0x80 else gzip.compress(data[1:], compresslevel=1, mtime=0)
    directory = scratch() / "manifest"
    directory.mkdir(exist_ok=True)
    (directory / name).write_bytes(body)
    part, note = manifest._part_of(str(directory), name, read)
    if part is None and note is None:
        raise AssertionError("_part_of gave neither the part nor a note for a file that is there")
