"""Names of partition directories and of the files in log dirs and partition dirs.

Sources: `LocalLog.scala` (`parseTopicPartitionName`, `logDirNameWithSuffixCappedLength`,
Delete/Future/StrayDirPattern ``^(\\S+)-(\\S+)\\.(\\S+)<suffix>``), `LogFileUtils.java`
(20-digit base offset + suffix; `.deleted`, `.cleaned`, `.swap`), `Snapshots.java` (KRaft
``<offset20>-<epoch10>.checkpoint``, ``.checkpoint.deleted``, ``<offset20>-<epoch10>-<tmp>.checkpoint.part``).

Partition dirs are parsed the way Kafka parses them (so an odd name the broker would load is
not called foreign), with one stricter rule: the partition must be ASCII digits (Java's
parseInt would also take a leading '+'). `-delete` and `-stray` names are capped at 255
characters by truncating the topic, so for a 255-character name the topic may be a prefix:
``PartitionDir.topic_maybe_truncated`` says so. Kafka writes the unique id as 32 lowercase hex
characters but accepts any non-space run; ``uuid`` is what the name holds.
"""

from __future__ import annotations

import re
from typing import NamedTuple

METADATA_DIR_NAME = "__cluster_metadata-0"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
DIR_SUFFIX_KINDS = {DELETE_DIR_SUFFIX: "delete", FUTURE_DIR_SUFFIX: "future", STRAY_DIR_SUFFIX: "stray"}
MAX_DIR_NAME_LENGTH = 255
OFFSET_WIDTH = 20
EPOCH_WIDTH = 10

SEGMENT_SUFFIXES = ("log", "index", "timeindex", "txnindex", "snapshot")
FILE_STATES = ("deleted", "cleaned", "swap")
TMP_SUFFIX = ".tmp"          # CheckpointFile, PartitionMetadataFile, PropertiesUtils, FileQuorumStateStore

_CHECKPOINTS = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                "log-start-offset-checkpoint", "cleaner-offset-checkpoint")
#: Files Kafka keeps directly in a log dir (with the `.tmp` names of atomic rewrites in flight).
LOG_DIR_FILES = frozenset(
    ("meta.properties", ".lock", ".kafka_cleanshutdown", "bootstrap.checkpoint", *_CHECKPOINTS)
    + tuple(n + TMP_SUFFIX for n in ("meta.properties", "bootstrap.checkpoint", *_CHECKPOINTS))
)
#: Sub-directories of a log dir that are not partition directories (RemoteIndexCache.DIR_NAME).
LOG_DIR_SUBDIRS = frozenset({"remote-log-index-cache"})
#: Non-segment files Kafka keeps in a partition dir (`quorum-state` and `.lock` in __cluster_metadata-0).
PARTITION_DIR_FILES = frozenset(
    ("leader-epoch-checkpoint", "partition.metadata", "quorum-state", ".lock")
    + tuple(n + TMP_SUFFIX for n in ("leader-epoch-checkpoint", "partition.metadata", "quorum-state"))
)

_SPECIAL_DIR = {k: re.compile(rf"^(\S+)-(\S+)\.(\S+){re.escape(s)}\Z") for s, k in DIR_SUFFIX_KINDS.items()}
_SEGMENT = re.compile(rf"^([0-9]{{{OFFSET_WIDTH}}})\.({'|'.join(SEGMENT_SUFFIXES)})(?:\.({'|'.join(FILE_STATES)}))?\Z")
_METADATA_SNAPSHOT = re.compile(
    rf"^([0-9]{{{OFFSET_WIDTH}}})-([0-9]{{{EPOCH_WIDTH}}})(-[0-9]+)?\.checkpoint(\.part|\.deleted)?\Z")
_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1


class PartitionDir(NamedTuple):
    topic: str
    partition: int
    kind: str                     # "live" | "future" | "delete" | "stray" | "metadata"
    uuid: str | None              # the unique id of -future / -delete / -stray names
    topic_maybe_truncated: bool = False


class SegmentFile(NamedTuple):
    base_offset: int
    suffix: str                   # "log" | "index" | "timeindex" | "txnindex" | "snapshot"
    state: str | None             # None | "deleted" | "cleaned" | "swap"


class MetadataSnapshotFile(NamedTuple):
    offset: int
    epoch: int
    state: str | None             # None (complete) | "partial" (being written) | "deleted"


def parse_partition_dir(name: str) -> PartitionDir | None:
    """`<topic>-<partition>` or `<topic>-<partition>.<uuid>-future|-delete|-stray`; None if not one."""
    if name == METADATA_DIR_NAME:
        return PartitionDir("__cluster_metadata", 0, "metadata", None)
    if not name or "-" not in name:
        return None
    kind, uuid = "live", None
    for suffix, k in DIR_SUFFIX_KINDS.items():
        if name.endswith(suffix):
            if not _SPECIAL_DIR[k].match(name):
                return None
            dot = name.rindex(".")
            kind, uuid, name_part = k, name[dot + 1:-len(suffix)], name[:dot]
            break
    else:
        name_part = name
    dash = name_part.rfind("-")
    topic, partition = name_part[:dash], name_part[dash + 1:]
    if not topic or not partition.isascii() or not partition.isdigit() or int(partition) > _INT32_MAX:
        return None
    truncated = kind in ("delete", "stray") and len(name) == MAX_DIR_NAME_LENGTH
    return PartitionDir(topic, int(partition), kind, uuid, truncated)


def parse_segment_file(name: str) -> SegmentFile | None:
    """`<offset20>.<suffix>[.<state>]`; None for any other name (or an offset beyond int64)."""
    m = _SEGMENT.match(name)
    if not m or int(m.group(1)) > _INT64_MAX:
        return None
    return SegmentFile(int(m.group(1)), m.group(2), m.group(3))


def parse_metadata_snapshot_file(name: str) -> MetadataSnapshotFile | None:
    """Any KRaft snapshot name, with its state (`Snapshots.parse`)."""
    m = _METADATA_SNAPSHOT.match(name)
    if not m:
        return None
    tmp, tail = m.group(3), m.group(4)
    if (tmp is not None) != (tail == ".part"):     # only partial files carry the temp-file part
        return None
    offset, epoch = int(m.group(1)), int(m.group(2))
    if offset > _INT64_MAX or epoch > _INT32_MAX:
        return None
    state = {None: None, ".part": "partial", ".deleted": "deleted"}[tail]
    return MetadataSnapshotFile(offset, epoch, state)


def parse_metadata_snapshot(name: str) -> tuple[int, int] | None:
    """A KRaft snapshot name, complete or not: (end offset, epoch). State: parse_metadata_snapshot_file."""
    parsed = parse_metadata_snapshot_file(name)
    return None if parsed is None else (parsed.offset, parsed.epoch)


def segment_file_name(base_offset: int, suffix: str, state: str | None = None) -> str:
    """Inverse of parse_segment_file (LogFileUtils.filenamePrefixFromOffset)."""
    return f"{base_offset:0{OFFSET_WIDTH}d}.{suffix}" + (f".{state}" if state else "")


__all__ = ["LOG_DIR_FILES", "LOG_DIR_SUBDIRS", "PARTITION_DIR_FILES", "MetadataSnapshotFile", "PartitionDir",
           "SegmentFile", "parse_metadata_snapshot", "parse_metadata_snapshot_file", "parse_partition_dir",
           "parse_segment_file", "segment_file_name"]
