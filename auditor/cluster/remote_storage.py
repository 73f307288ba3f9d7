"""Tiered storage (KIP-405), read offline: which ranges of a partition are in remote storage.

With ``remote.storage.enable=true`` a broker uploads closed segments to remote storage and then
deletes them locally (``local.retention.ms`` / ``local.retention.bytes``): the local log starts
at the *local* log start offset, above the log start offset, and the records in between are in
remote storage, not deleted. The default (topic-based) remote log metadata manager records every
upload and deletion as records of the internal topic ``__remote_log_metadata``, which lives in
the brokers' own log dirs: a ``RemoteLogSegmentMetadataRecord`` when a copy starts (the
segment's id, offsets, leader epochs, max timestamp, size, state COPY_SEGMENT_STARTED), then
``RemoteLogSegmentMetadataUpdateRecord`` for each later state (COPY_SEGMENT_FINISHED,
DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED), and ``RemotePartitionDeleteMetadataRecord``
when a whole partition is deleted. The records of one partition all go to one metadata
partition (:func:`metadata_partition_for`), in order.

This module folds those events (decoded by :mod:`auditor.formats.remote_log_metadata` from
Kafka's own message specs) into the latest state per remote segment, per user partition
(:class:`RemotePartition`); :mod:`auditor.cluster.remote_lookup` answers what the broker's remote
lookup (``RemoteLogManager.findOffsetByTimestamp``) picks from it.

Records it cannot decode (an unknown version, a value cut short) are kept as notes with the
file, position, field and value, and mark the metadata partition they were found in as
*incomplete*: every user partition whose events go there gets an ``unknown`` entry, so a verdict
built on it says what it cannot know instead of guessing.

``LocalTieredStorage`` (Kafka's test storage manager, also fine for a lab) keeps the remote
segments as ordinary segment files; given its directory, :func:`remote_segment_files` finds a
segment's ``.log``/``.index``/``.timeindex`` so the lookup can be answered exactly.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from auditor.formats import filenames
from auditor.formats import remote_log_metadata as rlm
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.keys.partitioners import murmur2  # Kafka's Utils.murmur2: one implementation for the project

#: The internal topic of the topic-based remote log metadata manager.
METADATA_TOPIC = "__remote_log_metadata"

COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"
DELETE_STATES = (DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED)


# ---------------------------------------------------------------------------------------------
# Which metadata partition holds a user partition's events
# ---------------------------------------------------------------------------------------------

_M32 = 0xFFFFFFFF


def _i32(v: int) -> int:
    v &= _M32
    return v - (1 << 32) if v & 0x80000000 else v


def _long_hash(v: int) -> int:
    v &= (1 << 64) - 1
    return _i32(v ^ (v >> 32))


def uuid_text_to_bits(text: str) -> tuple[int, int]:
    """Kafka's ``Uuid.toString()`` (url-safe base64 of 16 bytes, no padding) -> (msb, lsb)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)


def _positive_hash(topic_id: str, partition: int) -> int:
    """toPositive(murmur2(the 4 bytes of Objects.hash(lsb, msb, partition)))."""
    msb, lsb = uuid_text_to_bits(topic_id)
    h = 1
    for part in (_long_hash(lsb), _long_hash(msb), partition):
        h = _i32(31 * h + part)
    return murmur2((h & _M32).to_bytes(4, "big")) & 0x7FFFFFFF


def metadata_partition_for(topic_id: str, partition: int, partitions: int) -> int:
    """``RemoteLogMetadataTopicPartitioner.metadataPartition``: toPositive(murmur2(the 4 bytes of
    Objects.hash(lsb, msb, partition))) % partitions."""
    return _positive_hash(topic_id, partition) % partitions


#: Largest ``remote.log.metadata.topic.num.partitions`` tried when inferring it (default 50).
MAX_METADATA_PARTITIONS = 1024


def infer_partition_counts(found: Sequence[tuple[str, int, int]], highest: int) -> list[int]:
    """Partition counts n (highest + 1 .. MAX_METADATA_PARTITIONS) under which every (topic id,
    partition, metadata partition it was read from) agrees with the partitioner. One broker's log
    dirs may hold only some metadata partitions, so the count is not simply the dirs found."""
    hashes = [(_positive_hash(tid, p), k) for tid, p, k in found]
    return [n for n in range(highest + 1, MAX_METADATA_PARTITIONS + 1) if all(h % n == k for h, k in hashes)]


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


@dataclass
class RemoteSegment:
    """One remote segment, in its latest recorded state."""

    segment_id: str
    topic: str
    partition: int
    topic_id: str
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    size_bytes: int
    leader_epochs: list[tuple[int, int]]
    """(epoch, start offset) of the records in the segment."""
    broker_id: int
    state: str
    state_event_ms: int
    copy_started_ms: int
    txn_index_empty: bool | None = None
    history: list[tuple[str, int, int]] = field(default_factory=list)
    """(state, event time, broker) in the order recorded."""
    where: str = ""
    """file and byte position of the record that created it."""

    @property
    def finished(self) -> bool:
        return self.state == COPY_SEGMENT_FINISHED

    def to_dict(self) -> dict:
        return {"segment_id": self.segment_id, "start_offset": self.start_offset, "end_offset": self.end_offset,
                "max_timestamp_ms": self.max_timestamp_ms, "size_bytes": self.size_bytes,
                "leader_epochs": [list(e) for e in self.leader_epochs], "state": self.state,
                "state_event_ms": self.state_event_ms, "broker_id": self.broker_id}


@dataclass
class RemotePartition:
    """What ``__remote_log_metadata`` says about one user partition."""

    topic: str
    partition: int
    topic_id: str | None = None
    segments: dict[str, RemoteSegment] = field(default_factory=dict)
    delete_state: str | None = None
    """RemotePartitionDeleteState of the last RemotePartitionDeleteMetadataRecord, if any."""
    notes: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    """What cannot be known (undecodable records in this partition's metadata partition...)."""
    metadata_partitions: set[int] = field(default_factory=set)
    """the ``__remote_log_metadata`` partitions its events were read from (one, normally)."""

    def finished(self) -> list[RemoteSegment]:
        """Segments in COPY_SEGMENT_FINISHED (readable from remote storage), by start offset."""
        return sorted((s for s in self.segments.values() if s.finished), key=lambda s: (s.start_offset, s.segment_id))

    @property
    def remote_bytes(self) -> int:
        return sum(s.size_bytes for s in self.finished())

    @property
    def remote_range(self) -> tuple[int, int] | None:
        segs = self.finished()
        if not segs:
            return None
        return min(s.start_offset for s in segs), max(s.end_offset for s in segs)

    @property
    def deleted_segments(self) -> list[RemoteSegment]:
        return [s for s in self.segments.values() if s.state in DELETE_STATES]

    @property
    def max_timestamp_ms(self) -> int | None:
        return max((s.max_timestamp_ms for s in self.finished()), default=None)

    def summary(self) -> dict:
        rng = self.remote_range
        deleted = self.deleted_segments
        return {
            "remote_segments": len(self.finished()),
            "remote_start_offset": rng[0] if rng else None,
            "remote_end_offset": rng[1] if rng else None,
            "remote_bytes": self.remote_bytes,
            "remote_segments_deleted": len(deleted),
            "remote_bytes_deleted": sum(s.size_bytes for s in deleted),
            "remote_copies_in_progress": sum(1 for s in self.segments.values() if s.state == COPY_SEGMENT_STARTED),
            "remote_partition_delete_state": self.delete_state,
            "remote_unknown": list(self.unknown),
        }


@dataclass
class RemoteLogMetadata:
    """Everything read from the ``__remote_log_metadata`` partition dirs found."""

    partitions: dict[tuple[str, int], RemotePartition] = field(default_factory=dict)
    metadata_dirs: list[str] = field(default_factory=list)
    metadata_partitions: set[int] = field(default_factory=set)
    incomplete: dict[int, list[str]] = field(default_factory=dict)
    """metadata partition -> why its events are not fully known."""
    notes: list[str] = field(default_factory=list)
    records: int = 0
    partition_counts: list[int] = field(default_factory=list)
    """partition counts of ``__remote_log_metadata`` under which every decoded event sits in the
    metadata partition its user partition hashes to (:func:`infer_partition_counts`)."""

    def get(self, topic: str, partition: int, topic_id: str | None = None) -> RemotePartition | None:
        """The partition's remote view with what cannot be known about it attached; None when the
        metadata says nothing about it and nothing is unknown."""
        rp = self.partitions.get((topic, partition))
        unknown = self.unknown_for(topic_id or (rp.topic_id if rp else None), partition)
        if rp is None and not unknown:
            return None
        if rp is None:
            rp = RemotePartition(topic, partition, topic_id)
        rp.unknown = unknown
        return rp

    def unknown_for(self, topic_id: str | None, partition: int) -> list[str]:
        """What is unknown about one user partition: the problems of the metadata partition its
        events hash to under every partition count consistent with what was read (all problems
        when that is not one partition: never less than may concern it)."""
        if not self.incomplete:
            return []
        everything = [f"{METADATA_TOPIC}-{k}: {why}" for k, whys in sorted(self.incomplete.items()) for why in whys]
        if topic_id is None or not self.partition_counts:
            return everything
        try:
            h = _positive_hash(topic_id, partition)
        except ValueError:
            return everything
        homes = {h % n for n in self.partition_counts}
        if len(homes) != 1:
            return everything
        (k,) = homes
        return [f"{METADATA_TOPIC}-{k}: {why}" for why in self.incomplete.get(k, [])]


def fold_events(events: Iterable[rlm.RemoteLogEvent], into: RemoteLogMetadata) -> None:
    """Apply decoded events in log order (one metadata partition at a time)."""
    for ev in events:
        key = (ev.topic, ev.partition)
        rp = into.partitions.get(key)
        if rp is None:
            rp = into.partitions[key] = RemotePartition(ev.topic, ev.partition, ev.topic_id)
        if ev.metadata_partition is not None:
            rp.metadata_partitions.add(ev.metadata_partition)
        if ev.kind == rlm.SEGMENT_METADATA:
            if ev.segment_id in rp.segments:
                rp.notes.append(f"{ev.where}: segment {ev.segment_id} recorded again (its first record is kept, "
                                f"its state set to {ev.state})")
                seg = rp.segments[ev.segment_id]
                seg.state, seg.state_event_ms = ev.state, ev.event_ms
                seg.history.append((ev.state, ev.event_ms, ev.broker_id))
                continue
            rp.segments[ev.segment_id] = RemoteSegment(
                segment_id=ev.segment_id, topic=ev.topic, partition=ev.partition, topic_id=ev.topic_id,
                start_offset=ev.start_offset, end_offset=ev.end_offset, max_timestamp_ms=ev.max_timestamp_ms,
                size_bytes=ev.size_bytes, leader_epochs=list(ev.leader_epochs), broker_id=ev.broker_id,
                state=ev.state, state_event_ms=ev.event_ms, copy_started_ms=ev.event_ms,
                txn_index_empty=ev.txn_index_empty, history=[(ev.state, ev.event_ms, ev.broker_id)], where=ev.where)
        elif ev.kind == rlm.SEGMENT_UPDATE:
            seg = rp.segments.get(ev.segment_id)
            if seg is None:
                # the metadata topic's own retention, or a snapshot we do not have, dropped its start
                rp.unknown.append(f"{ev.where}: state {ev.state} for remote segment {ev.segment_id}, whose "
                                  f"offsets were never recorded here (its first record is gone)")
                continue
            seg.state, seg.state_event_ms = ev.state, ev.event_ms
            seg.history.append((ev.state, ev.event_ms, ev.broker_id))
        elif ev.kind == rlm.PARTITION_DELETE:
            rp.delete_state = ev.state
            rp.notes.append(f"{ev.where}: partition delete state {ev.state} at {ev.event_ms}")


def read_log_events(log: str | os.PathLike) -> tuple[list[rlm.RemoteLogEvent], list[str], int]:
    """The decoded events of one ``.log`` of ``__remote_log_metadata`` (read-only), in log order;
    the problems met (each names the file, position, field and value); the records read. A
    problem means the events of that file are not all known."""
    events: list[rlm.RemoteLogEvent] = []
    problems: list[str] = []
    records = 0
    try:
        with LogReader(log) as reader:
            for batch in reader.batches():
                if batch.is_control:
                    continue
                try:
                    values = list(rlm.record_values(reader, batch))
                except FormatError as exc:
                    problems.append(str(exc))
                    continue
                for offset, value, position in values:
                    records += 1
                    where = f"{log}: record at offset {offset} (batch at byte {position}), byte in its value"
                    try:
                        ev = rlm.decode_value(value, where)
                    except FormatError as exc:
                        problems.append(str(exc))
                        continue
                    if ev is not None:
                        ev.metadata_offset = offset
                        events.append(ev)
            if reader.stop_reason not in (None, "partial-tail"):
                problems.append(reader.stop_detail or f"{log}: {reader.stop_reason}")
    except (OSError, FormatError) as exc:
        problems.append(f"{log}: {exc}")
    return events, problems, records


def read_metadata_partition_dir(path: str | os.PathLike, into: RemoteLogMetadata) -> None:
    """Every record of one ``__remote_log_metadata-N`` dir (read-only), folded into ``into``."""
    path = Path(path)
    parsed = filenames.parse_partition_dir(path.name)
    if parsed is None or parsed.topic != METADATA_TOPIC or parsed.kind != "live":
        into.notes.append(f"{path}: not a live {METADATA_TOPIC} partition dir (left alone)")
        return
    k = parsed.partition
    into.metadata_dirs.append(str(path))
    into.metadata_partitions.add(k)
    try:
        logs = sorted(e.path for e in os.scandir(path)
                      if e.name.endswith(".log") and not e.is_symlink() and e.is_file())
    except OSError as exc:
        into.incomplete.setdefault(k, []).append(f"{path}: unreadable ({exc})")
        return
    for log in logs:
        events, problems, records = read_log_events(log)
        into.records += records
        for problem in problems:
            into.incomplete.setdefault(k, []).append(problem)
            into.notes.append(problem)
        for ev in events:
            ev.metadata_partition = k
        fold_events(events, into)


def read_log_dirs(log_dirs: Sequence[str | os.PathLike]) -> RemoteLogMetadata:
    """``__remote_log_metadata`` from every given log dir (a replica of each metadata partition
    is enough; the first one found for a partition is read, the others are left alone)."""
    out = RemoteLogMetadata()
    seen: set[int] = set()
    for log_dir in log_dirs:
        try:
            entries = sorted(os.scandir(log_dir), key=lambda e: e.name)
        except OSError as exc:
            out.notes.append(f"{log_dir}: unreadable ({exc})")
            continue
        for entry in entries:
            parsed = filenames.parse_partition_dir(entry.name)
            if parsed is None or parsed.topic != METADATA_TOPIC or parsed.kind != "live" or entry.is_symlink():
                continue
            if parsed.partition in seen:
                continue
            seen.add(parsed.partition)
            read_metadata_partition_dir(entry.path, out)
    _check_partitioner(out)
    return out


def _check_partitioner(meta: RemoteLogMetadata) -> None:
    """Infer the metadata topic's partition count from where each partition's events were found;
    say so when no count fits (events in the wrong metadata partition)."""
    if not meta.metadata_partitions:
        return
    found = [(rp.topic_id, p, k) for (_t, p), rp in meta.partitions.items() if rp.topic_id
             for k in rp.metadata_partitions]
    meta.partition_counts = infer_partition_counts(found, max(meta.metadata_partitions))
    if found and not meta.partition_counts:
        meta.notes.append(f"no {METADATA_TOPIC} partition count up to {MAX_METADATA_PARTITIONS} puts every "
                          f"partition's events where they were found: what an undecodable record concerns is "
                          f"taken to be every partition")


# ---------------------------------------------------------------------------------------------
# LocalTieredStorage's files (the remote segments themselves, when their directory is given)
# ---------------------------------------------------------------------------------------------

#: LocalTieredStorage's root under its configured dir, and its file names:
#: ``<dir>/kafka-tiered-storage/<topic>-<partition>-<topic id>/<start offset, 20 digits>-<segment id>.<suffix>``
LOCAL_TIERED_ROOT = "kafka-tiered-storage"


@dataclass
class RemoteSegmentFiles:
    log_path: str
    index_path: str | None
    timeindex_path: str | None


def remote_segment_files(storage_dir: str | os.PathLike, seg: RemoteSegment) -> RemoteSegmentFiles | None:
    """The segment's files in a LocalTieredStorage directory, or None when absent."""
    root = Path(storage_dir)
    if (root / LOCAL_TIERED_ROOT).is_dir():
        root = root / LOCAL_TIERED_ROOT
    pdir = root / f"{seg.topic}-{seg.partition}-{seg.topic_id}"
    stem = f"{seg.start_offset:020d}-{seg.segment_id}"
    log = pdir / f"{stem}.log"
    if not log.is_file() or log.is_symlink():
        return None
    idx, tidx = pdir / f"{stem}.index", pdir / f"{stem}.timeindex"
    return RemoteSegmentFiles(str(log), str(idx) if idx.is_file() else None, str(tidx) if tidx.is_file() else None)
