"""The text files of a log dir and a partition dir (auditor/formats/checkpoints.py): offset
checkpoints, leader-epoch-checkpoint, meta.properties, partition.metadata.

Input: a selector byte, then the file's bytes. Check: each reader returns or raises FormatError
(naming file and position), nothing else; what a checkpoint reader returns has the types it
promises.
"""

from __future__ import annotations

from auditor.formats import checkpoints
from auditor.formats.errors import FormatError

from fuzz.common import write

READERS = (
    ("replication-offset-checkpoint", checkpoints.read_offset_checkpoint),
    ("leader-epoch-checkpoint", checkpoints.read_leader_epoch_checkpoint),
    ("meta.properties", checkpoints.read_meta_properties),
    ("partition.metadata", checkpoints.read_partition_metadata),
)


def one_input(data: bytes) -> None:
    if not data:
        return
    name, read = READERS[data[0] % len(READERS)]
    path = write(name, data[1:])
    try:
        result = read(path)
    except FormatError:
        return
    if name == "replication-offset-checkpoint":
        assert all(isinstance(t, str) and type(p) is int and type(o) is int for (t, p), o in result.items())
    elif name == "leader-epoch-checkpoint":
        assert all(type(e) is int and type(o) is int for e, o in result)
