"""The cluster's own record, read offline: the KRaft metadata log (``__cluster_metadata-0``).

Every KRaft node keeps the cluster metadata on disk in ``<log dir>/__cluster_metadata-0/``:
log segments (``<base offset>.log``) of metadata records, and snapshots
(``<end offset>-<epoch>.checkpoint``: a SnapshotHeader control batch, the records that rebuild the
state as of ``end offset - 1``, a SnapshotFooter). This module reads them, read-only, and rebuilds
what a broker would: the **state** (brokers and their log-dir IDs, topics with name and ID,
partitions with replicas, ISR, leader, leader epoch and each replica's directory ID, configs at
cluster / broker / topic level, feature levels) and the **history** (each topic creation and
deletion, replica-set change, directory change, config change, broker registration, with its
record's offset and append time).

How it replays (as Kafka's ``MetadataLoader`` / ``MetadataDelta``):

* the state starts from a snapshot (the newest complete one; with ``history=True`` the oldest one
  the log still continues from, or the empty state when the log starts at offset 0, so that the
  history covers every record on disk), then the log records from the snapshot's end offset on;
* ``PartitionChangeRecord`` merges as ``PartitionRegistration.merge``: null / -2 / -1 fields mean
  "unchanged", a new leader bumps the leader epoch, every change bumps the partition epoch;
  directories given replace them; replicas without directories become MIGRATING (Kafka 4.2.1);
* records between ``BeginTransactionRecord`` and ``EndTransactionRecord`` are applied at the end;
  ``AbortTransactionRecord`` drops them (KIP-868); a transaction still open at the end of the log
  is not applied (note);
* ``RemoveTopicRecord`` removes the topic and its configs; a ``ConfigRecord`` with a null value
  deletes the config.

Bad input never stops the reading: a snapshot that is truncated or lacks its header/footer is
skipped for an older one (note), a record whose body is cut short, an unknown api key or a
version newer than the specs becomes a note naming file, byte position, offset, type and version,
and the rest is still read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from auditor.formats import kafka_message as km
from auditor.formats import metadata_records as mr
from auditor.formats import offsets_records as orec
from auditor.formats.checkpoints import read_meta_properties
from auditor.formats.errors import FormatError
from auditor.formats.filenames import parse_metadata_snapshot_file, parse_segment_file
from auditor.formats.log_reader import LogReader

METADATA_DIR_NAME = "__cluster_metadata-0"
META_PROPERTIES = "meta.properties"

#: ConfigResource.Type ids as ConfigRecord.ResourceType carries them.
CONFIG_RESOURCE_TYPES = {2: "topic", 4: "broker", 8: "broker_logger", 16: "client_metrics", 32: "group"}
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

#: Directory IDs with a meaning of their own (``DirectoryId``, Kafka 4.2.1).
MIGRATING_DIR = km.uuid_str(bytes(16))
UNASSIGNED_DIR = km.uuid_str(bytes(15) + b"\x01")
LOST_DIR = km.uuid_str(bytes(15) + b"\x02")
RESERVED_DIRS = {MIGRATING_DIR: "MIGRATING", UNASSIGNED_DIR: "UNASSIGNED", LOST_DIR: "LOST"}

#: PartitionChangeRecord sentinels.
NO_LEADER_CHANGE = -2
LEADER_RECOVERY_NO_CHANGE = -1
#: BrokerRegistrationChangeRecord.Fenced: 1 fence, -1 unfence, 0 no change.
FENCE, UNFENCE = 1, -1


class MetadataLogNotFound(Exception):
    """None of the given directories holds a ``__cluster_metadata-0`` directory."""


@dataclass(slots=True)
class Note:
    file: str
    position: int | None       # byte position in the file
    offset: int | None         # metadata log offset of the record, when known
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.position is not None:
            where += f": byte {self.position}"
        if self.offset is not None:
            where += f" (offset {self.offset})"
        return f"{where}: {self.message}"


@dataclass(slots=True)
class MetadataEntry:
    """One decoded record of a metadata log segment or snapshot."""
    file: str
    position: int              # byte position of its batch in the file
    offset: int
    timestamp_ms: int          # the record's timestamp (the controller's append time)
    control: bool
    type: str                  # spec name ("PartitionRecord", "SnapshotHeaderRecord") or "ABORT"/"COMMIT"
    version: int
    data: dict | None          # None: transaction markers


@dataclass
class Broker:
    broker_id: int
    epoch: int = -1
    incarnation_id: str | None = None
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: list[str] = field(default_factory=list)       # directory IDs
    endpoints: list[dict] = field(default_factory=list)
    registered_offset: int | None = None
    registered_ms: int | None = None


@dataclass
class Partition:
    topic_id: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: list[str]                                    # one directory ID per replica
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0

    def directory_of(self, broker: int) -> str | None:
        for b, d in zip(self.replicas, self.directories):
            if b == broker:
                return d
        return None


@dataclass
class Topic:
    name: str
    topic_id: str
    partitions: dict[int, Partition] = field(default_factory=dict)
    created_offset: int | None = None
    created_ms: int | None = None


@dataclass(slots=True)
class Change:
    """One event of the history (only from log records, never from a snapshot)."""
    offset: int
    timestamp_ms: int
    file: str
    kind: str                  # topic-created | topic-deleted | partition-created | replicas
                               # | directories (a replica moved between two log dirs of its broker)
                               # | directory-assigned (first placement, from UNASSIGNED/MIGRATING/LOST)
                               # | config | broker-registered | broker-unregistered | broker-log-dirs | feature
    topic: str | None = None
    topic_id: str | None = None
    partition: int | None = None
    broker: int | None = None
    before: object = None
    after: object = None
    resource: tuple | None = None   # (resource type name, resource name) for configs
    name: str | None = None         # config or feature name


@dataclass
class ClusterState:
    topics: dict[str, Topic] = field(default_factory=dict)               # by topic ID
    brokers: dict[int, Broker] = field(default_factory=dict)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)   # (resource type, name)
    features: dict[str, int] = field(default_factory=dict)
    last_offset: int | None = None
    last_timestamp_ms: int | None = None

    def topic_named(self, name: str) -> Topic | None:
        for t in self.topics.values():
            if t.name == name:
                return t
        return None

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self.configs.get((TOPIC_RESOURCE, name), {}))

    def broker_configs(self, broker_id: int | None = None) -> dict[str, str]:
        """Dynamic broker configs: cluster-wide defaults (``None``) or one broker's."""
        return dict(self.configs.get((BROKER_RESOURCE, "" if broker_id is None else str(broker_id)), {}))

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())


@dataclass
class MetadataLog:
    """What :func:`read_metadata_log` found."""
    metadata_dir: Path
    state: ClusterState
    history: list[Change]
    notes: list[Note]
    base_snapshot: Path | None           # the snapshot the state starts from (None: offset 0)
    base_offset: int                     # first log offset replayed
    snapshots: list[Path]                # complete snapshots present
    segments: list[Path]
    records_read: int = 0
    dir_ids: dict[str, tuple[int | None, Path]] = field(default_factory=dict)   # directory.id -> (node, log dir)
    node_id: int | None = None
    other_metadata_dirs: list[Path] = field(default_factory=list)   # other nodes' copies, not read

    def dir_path(self, dir_id: str | None) -> str | None:
        """The log dir path of a directory ID (from the given log dirs' meta.properties), or a
        reserved name (MIGRATING, UNASSIGNED, LOST), or None when unknown."""
        if dir_id is None:
            return None
        if dir_id in RESERVED_DIRS:
            return RESERVED_DIRS[dir_id]
        hit = self.dir_ids.get(dir_id)
        return None if hit is None else str(hit[1])


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------

def find_metadata_dirs(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The ``__cluster_metadata-0`` dirs among ``paths`` (log dirs, or the metadata dir itself)."""
    found = []
    for p in map(Path, paths):
        if p.name == METADATA_DIR_NAME and p.is_dir():
            found.append(p)
        elif (p / METADATA_DIR_NAME).is_dir():
            found.append(p / METADATA_DIR_NAME)
    return found


def log_dir_ids(paths: Iterable[str | os.PathLike], notes: list[Note] | None = None
                ) -> dict[str, tuple[int | None, Path]]:
    """``directory.id`` -> (node id, log dir) from each log dir's ``meta.properties``."""
    out = {}
    for p in map(Path, paths):
        if p.name == METADATA_DIR_NAME:
            p = p.parent
        mp = p / META_PROPERTIES
        if not mp.is_file():
            continue
        try:
            props = read_meta_properties(mp)
        except (FormatError, OSError, UnicodeDecodeError) as e:
            if notes is not None:
                notes.append(Note(str(mp), None, None, f"meta.properties unreadable: {e}"))
            continue
        dir_id = props.get("directory.id")
        if dir_id:
            node = props.get("node.id", props.get("broker.id"))
            out[dir_id] = (int(node) if node is not None else None, p)
    return out


def metadata_files(metadata_dir: Path) -> tuple[list[tuple[int, Path]], list[tuple[int, Path]]]:
    """(complete snapshots as (end offset, path), log segments as (base offset, path)), sorted."""
    snaps, segs = [], []
    for entry in os.scandir(metadata_dir):
        if not entry.is_file(follow_symlinks=False):
            continue
        s = parse_metadata_snapshot_file(entry.name)
        if s is not None:
            if s.state is None:
                snaps.append((s.offset, Path(entry.path)))
            continue
        seg = parse_segment_file(entry.name)
        if seg is not None and seg.suffix == "log" and seg.state is None:
            segs.append((seg.base_offset, Path(entry.path)))
    return sorted(snaps), sorted(segs)


def read_entries(path: str | os.PathLike, notes: list[Note], *, start_offset: int = 0
                 ) -> Iterator[MetadataEntry]:
    """Every record of one metadata log segment or snapshot, decoded (records below
    ``start_offset`` are skipped undecoded). Problems go to ``notes``; reading goes on."""
    label = str(path)
    try:
        reader = LogReader(path)
    except OSError as e:
        notes.append(Note(label, None, None, f"cannot open: {e}"))
        return
    try:
        for batch in reader.batches():
            if batch.last_offset < start_offset:
                continue
            try:
                data = reader.read_batch_bytes(batch)
                kvs = list(orec.iter_key_values(batch, data, label=label))
            except (FormatError, OSError) as e:
                notes.append(Note(label, batch.position, batch.base_offset,
                                  f"batch unreadable, its records skipped: {e}"))
                continue
            pos = batch.position
            if batch.is_control:
                for offset, ts, key, value in kvs:
                    if offset < start_offset:
                        continue
                    try:
                        version, ctype = mr.control_key(key, file=label, base=pos)
                        spec, fields = mr.decode_control_value(ctype, version, value, file=label, base=pos)
                    except FormatError as e:
                        notes.append(Note(label, pos, offset, f"control record undecodable: {e}"))
                        continue
                    name = spec.name if spec is not None else mr.CONTROL_TYPE_NAMES.get(ctype, f"control({ctype})")
                    yield MetadataEntry(label, pos, offset, ts, True, name, version, fields)
                continue
            for offset, ts, key, value in kvs:
                if offset < start_offset:
                    continue
                try:
                    frame = mr.read_frame(value, file=label, base=pos)
                    spec = frame.spec
                    if spec is None:
                        notes.append(Note(label, pos, offset,
                                          f"unknown metadata record type: api key {frame.api_key} (version "
                                          f"{frame.version}) not in the Kafka {km.kafka_metadata.KAFKA_VERSION} "
                                          f"specs; skipped"))
                        continue
                    if not spec.has_version(frame.version):
                        notes.append(Note(label, pos, offset,
                                          f"{spec.name} version {frame.version} is newer than the Kafka "
                                          f"{spec.kafka_version} specs ({km.versions_text(spec.valid_versions)}); "
                                          f"skipped"))
                        continue
                    fields = spec.reader(frame.version)(value, frame.body_position, len(value), label, pos)
                except FormatError as e:
                    notes.append(Note(label, pos, offset, f"metadata record undecodable, skipped: {e}"))
                    continue
                yield MetadataEntry(label, pos, offset, ts, False, spec.name, frame.version, fields)
        if reader.stop_reason is not None:
            notes.append(Note(label, reader.stop_position, None,
                              f"reading stopped ({reader.stop_reason}): {reader.stop_detail}"))
    finally:
        reader.close()


# ----------------------------------------------------------------------------------------------
# Replay
# ----------------------------------------------------------------------------------------------

class Replayer:
    """Applies metadata records to a :class:`ClusterState`, recording a history when asked."""

    def __init__(self, state: ClusterState | None = None, history: list[Change] | None = None,
                 notes: list[Note] | None = None):
        self.state = state or ClusterState()
        self.history = history
        self.notes = notes if notes is not None else []
        self.txn: list[MetadataEntry] | None = None      # records of an open metadata transaction
        self.txn_start: MetadataEntry | None = None
        self.handlers = {
            "TopicRecord": self._topic, "PartitionRecord": self._partition,
            "PartitionChangeRecord": self._partition_change, "RemoveTopicRecord": self._remove_topic,
            "ConfigRecord": self._config, "RegisterBrokerRecord": self._register_broker,
            "UnregisterBrokerRecord": self._unregister_broker,
            "BrokerRegistrationChangeRecord": self._broker_change, "FenceBrokerRecord": self._fence,
            "UnfenceBrokerRecord": self._unfence, "FeatureLevelRecord": self._feature,
        }

    def apply(self, e: MetadataEntry) -> None:
        st = self.state
        st.last_offset = e.offset
        st.last_timestamp_ms = e.timestamp_ms
        if e.control:
            return
        t = e.type
        if t == "BeginTransactionRecord":
            if self.txn is not None:
                self.notes.append(Note(e.file, e.position, e.offset, "BeginTransactionRecord inside an open "
                                       f"metadata transaction (begun at offset {self.txn_start.offset})"))
                self._flush()
            self.txn, self.txn_start = [], e
            return
        if t == "EndTransactionRecord":
            self._flush()
            return
        if t == "AbortTransactionRecord":
            self.txn, self.txn_start = None, None
            return
        if self.txn is not None:
            self.txn.append(e)
            return
        h = self.handlers.get(t)
        if h is not None:
            h(e, e.data)

    def finish(self) -> None:
        if self.txn is not None:
            s = self.txn_start
            self.notes.append(Note(s.file, s.position, s.offset,
                                   f"metadata transaction begun at offset {s.offset} never ended: its "
                                   f"{len(self.txn)} record(s) are not applied"))
            self.txn, self.txn_start = None, None

    def _flush(self) -> None:
        records, self.txn, self.txn_start = self.txn or [], None, None
        for r in records:
            h = self.handlers.get(r.type)
            if h is not None:
                h(r, r.data)

    def _change(self, e: MetadataEntry, kind: str, **kw) -> None:
        if self.history is not None:
            self.history.append(Change(e.offset, e.timestamp_ms, e.file, kind, **kw))

    # --- records ------------------------------------------------------------------------------
    def _topic(self, e, d):
        tid = d["topicId"]
        self.state.topics[tid] = Topic(d["name"], tid, {}, e.offset, e.timestamp_ms)
        self._change(e, "topic-created", topic=d["name"], topic_id=tid)

    def _partition(self, e, d):
        topic = self.state.topics.get(d["topicId"])
        if topic is None:
            self.notes.append(Note(e.file, e.position, e.offset,
                                   f"PartitionRecord for unknown topic ID {d['topicId']}; skipped"))
            return
        replicas = d["replicas"]
        dirs = d.get("directories") or []
        if not dirs or all(x == MIGRATING_DIR for x in dirs):
            dirs = [MIGRATING_DIR] * len(replicas)
        p = Partition(d["topicId"], d["partitionId"], replicas, d["isr"], d["leader"], d["leaderEpoch"],
                      d["partitionEpoch"], dirs, d["removingReplicas"], d["addingReplicas"],
                      d.get("eligibleLeaderReplicas") or [], d.get("lastKnownElr") or [],
                      d.get("leaderRecoveryState", 0))
        existed = p.partition in topic.partitions
        topic.partitions[p.partition] = p
        if not existed:
            self._change(e, "partition-created", topic=topic.name, topic_id=topic.topic_id, partition=p.partition,
                         after={"replicas": list(replicas), "directories": list(dirs)})

    def _partition_change(self, e, d):
        topic = self.state.topics.get(d["topicId"])
        p = topic.partitions.get(d["partitionId"]) if topic is not None else None
        if p is None:
            self.notes.append(Note(e.file, e.position, e.offset,
                                   f"PartitionChangeRecord for unknown partition {d['topicId']}-{d['partitionId']}; "
                                   f"skipped"))
            return
        old_replicas, old_dirs = p.replicas, p.directories
        replicas = d["replicas"]
        if replicas is not None:
            p.replicas = replicas
        dirs = d.get("directories")
        new_dirs = dirs if dirs is not None else old_dirs
        if not new_dirs or all(x == MIGRATING_DIR for x in new_dirs):
            new_dirs = [MIGRATING_DIR] * len(p.replicas)
        p.directories = new_dirs
        if d["isr"] is not None:
            p.isr = d["isr"]
        if d["removingReplicas"] is not None:
            p.removing_replicas = d["removingReplicas"]
        if d["addingReplicas"] is not None:
            p.adding_replicas = d["addingReplicas"]
        if d["leader"] != NO_LEADER_CHANGE:
            p.leader = d["leader"]
            p.leader_epoch += 1
        lrs = d.get("leaderRecoveryState", LEADER_RECOVERY_NO_CHANGE)
        if lrs != LEADER_RECOVERY_NO_CHANGE:
            p.leader_recovery_state = lrs
        if d.get("eligibleLeaderReplicas") is not None:
            p.elr = d["eligibleLeaderReplicas"]
        if d.get("lastKnownElr") is not None:
            p.last_known_elr = d["lastKnownElr"]
        p.partition_epoch += 1
        if self.history is None:
            return
        if p.replicas != old_replicas or d["addingReplicas"] or d["removingReplicas"]:
            self._change(e, "replicas", topic=topic.name, topic_id=topic.topic_id, partition=p.partition,
                         before=list(old_replicas), after=list(p.replicas))
        before = dict(zip(old_replicas, old_dirs))
        after = dict(zip(p.replicas, p.directories))
        for b, dir_after in after.items():
            dir_before = before.get(b)
            if dir_before is not None and dir_before != dir_after:
                # a move between two real dirs, or a first placement (from UNASSIGNED / MIGRATING / LOST)
                kind = "directory-assigned" if dir_before in RESERVED_DIRS else "directories"
                self._change(e, kind, topic=topic.name, topic_id=topic.topic_id, partition=p.partition,
                             broker=b, before=dir_before, after=dir_after)

    def _remove_topic(self, e, d):
        topic = self.state.topics.pop(d["topicId"], None)
        if topic is None:
            self.notes.append(Note(e.file, e.position, e.offset,
                                   f"RemoveTopicRecord for unknown topic ID {d['topicId']}"))
            return
        self.state.configs.pop((TOPIC_RESOURCE, topic.name), None)
        self._change(e, "topic-deleted", topic=topic.name, topic_id=topic.topic_id,
                     before=sorted(topic.partitions))

    def _config(self, e, d):
        key = (d["resourceType"], d["resourceName"])
        configs = self.state.configs.setdefault(key, {})
        before = configs.get(d["name"])
        if d["value"] is None:
            configs.pop(d["name"], None)
            if not configs:
                del self.state.configs[key]
        else:
            configs[d["name"]] = d["value"]
        self._change(e, "config", resource=(CONFIG_RESOURCE_TYPES.get(key[0], str(key[0])), key[1]),
                     name=d["name"], before=before, after=d["value"],
                     topic=key[1] if key[0] == TOPIC_RESOURCE else None,
                     broker=int(key[1]) if key[0] == BROKER_RESOURCE and key[1].isdigit() else None)

    def _register_broker(self, e, d):
        old = self.state.brokers.get(d["brokerId"])
        b = Broker(d["brokerId"], d["brokerEpoch"], d["incarnationId"], d.get("rack"), d["fenced"],
                   d.get("inControlledShutdown", False), list(d.get("logDirs") or []), d["endPoints"],
                   e.offset, e.timestamp_ms)
        self.state.brokers[b.broker_id] = b
        self._change(e, "broker-registered", broker=b.broker_id,
                     before=None if old is None else list(old.log_dirs), after=list(b.log_dirs))

    def _unregister_broker(self, e, d):
        b = self.state.brokers.pop(d["brokerId"], None)
        self._change(e, "broker-unregistered", broker=d["brokerId"], before=None if b is None else list(b.log_dirs))

    def _broker_change(self, e, d):
        b = self.state.brokers.get(d["brokerId"])
        if b is None:
            self.notes.append(Note(e.file, e.position, e.offset,
                                   f"BrokerRegistrationChangeRecord for unregistered broker {d['brokerId']}"))
            return
        if d.get("fenced") == FENCE:
            b.fenced = True
        elif d.get("fenced") == UNFENCE:
            b.fenced = False
        if d.get("inControlledShutdown") == 1:
            b.in_controlled_shutdown = True
        dirs = d.get("logDirs")
        if dirs:
            before = list(b.log_dirs)
            b.log_dirs = list(dirs)
            if before != b.log_dirs:
                self._change(e, "broker-log-dirs", broker=b.broker_id, before=before, after=list(dirs))

    def _fence(self, e, d):
        b = self.state.brokers.get(d["id"])
        if b is not None:
            b.fenced = True

    def _unfence(self, e, d):
        b = self.state.brokers.get(d["id"])
        if b is not None:
            b.fenced = False

    def _feature(self, e, d):
        before = self.state.features.get(d["name"])
        if d["featureLevel"] == 0:
            self.state.features.pop(d["name"], None)
        else:
            self.state.features[d["name"]] = d["featureLevel"]
        self._change(e, "feature", name=d["name"], before=before, after=d["featureLevel"])


# ----------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------

def _read_snapshot(path: Path, notes: list[Note]) -> list[MetadataEntry] | None:
    """A snapshot's entries, or None (with notes) when it is not complete: it must start with a
    SnapshotHeader, end with a SnapshotFooter, and read to its end. Undecodable records inside a
    complete snapshot are noted and the snapshot is still used."""
    local: list[Note] = []
    entries = list(read_entries(path, local))
    notes.extend(local)
    reasons = []
    if not entries or entries[0].type != "SnapshotHeaderRecord":
        reasons.append("it does not start with a SnapshotHeader control record")
    if not entries or entries[-1].type != "SnapshotFooterRecord":
        reasons.append("it does not end with a SnapshotFooter control record")
    if any(n.message.startswith("reading stopped") for n in local):
        reasons.append("it does not read to its end")
    if reasons:
        notes.append(Note(str(path), None, None, "snapshot incomplete (" + "; ".join(reasons)
                          + "): not used, an older snapshot or the log is used instead"))
        return None
    return entries


def read_metadata_log(paths: Iterable[str | os.PathLike], *, history: bool = False) -> MetadataLog:
    """Rebuild the cluster from the metadata log found among ``paths`` (a broker's log dirs, or
    ``__cluster_metadata-0`` itself). Several metadata dirs (log dirs of several nodes): the most
    advanced one (highest snapshot / segment offset) is read, the others listed in
    ``other_metadata_dirs``; every given log dir's ``meta.properties`` maps directory IDs.
    Raises :class:`MetadataLogNotFound` when there is none."""
    paths = [Path(p) for p in paths]
    dirs = find_metadata_dirs(paths)
    if not dirs:
        raise MetadataLogNotFound(
            "no __cluster_metadata-0 directory in " + ", ".join(map(str, paths))
            + " (a ZooKeeper-mode broker, or a log dir other than the one holding the KRaft metadata log: "
              "pass all of the broker's log dirs, or its metadata.log.dir)")
    notes: list[Note] = []
    listing = {d: metadata_files(d) for d in dirs}

    def advance(d):
        snaps, segs = listing[d]
        return max([o for o, _ in snaps] + [o for o, _ in segs] + [-1])
    mdir = max(dirs, key=advance)
    snaps, segs = listing[mdir]
    dir_ids = log_dir_ids(paths, notes)
    node_id = None
    for did, (node, p) in dir_ids.items():
        if p == mdir.parent:
            node_id = node
    log_start = segs[0][0] if segs else None

    # candidate bases, best first: the newest snapshot (what a broker loads); for a history, the
    # oldest base the log continues from, so that every log record on disk is replayed
    newest_first = list(reversed(snaps))
    if history and log_start == 0:
        candidates = [None] + newest_first
    elif history and log_start is not None:
        contiguous = [sn for sn in snaps if sn[0] >= log_start]
        candidates = contiguous + [sn for sn in newest_first if sn not in contiguous]
    else:
        candidates = newest_first
    if None not in candidates:
        candidates.append(None)       # last resort: the log alone (noted below when it has a gap)

    state = ClusterState()
    hist: list[Change] | None = [] if history else None
    base_path, base_offset = None, 0
    replayer = None
    for cand in candidates:
        if cand is None:
            replayer = Replayer(ClusterState(), hist, notes)
            base_path, base_offset = None, 0
            break
        entries = _read_snapshot(cand[1], notes)
        if entries is None:
            continue
        replayer = Replayer(ClusterState(), None, notes)
        for e in entries:
            replayer.apply(e)
        replayer.finish()
        replayer.history = hist
        replayer.state.last_offset = cand[0] - 1      # the snapshot holds the state as of end offset - 1
        base_path, base_offset = cand[1], cand[0]
        break
    if base_path is None and snaps and not (history and log_start == 0):
        notes.append(Note(str(mdir), None, None, "no usable snapshot: the state is rebuilt from the log alone"))
    if log_start is not None and log_start > base_offset:
        notes.append(Note(str(segs[0][1]), None, None,
                          f"the log starts at offset {log_start}, after the state's base offset {base_offset}: "
                          f"records {base_offset}..{log_start - 1} are missing (state may be incomplete)"))
    count = 0
    for seg_base, seg in segs:
        for e in read_entries(seg, notes, start_offset=base_offset):
            replayer.apply(e)
            count += 1
    replayer.finish()
    state = replayer.state
    return MetadataLog(metadata_dir=mdir, state=state, history=hist or [], notes=notes,
                       base_snapshot=base_path, base_offset=base_offset, snapshots=[p for _, p in snaps],
                       segments=[p for _, p in segs], records_read=count, dir_ids=dir_ids, node_id=node_id,
                       other_metadata_dirs=[d for d in dirs if d != mdir])
