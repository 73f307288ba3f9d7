"""The cluster state the KRaft metadata records build, and the replay that builds it (as Kafka's
``MetadataDelta`` / ``PartitionRegistration.merge``); see :mod:`auditor.cluster.metadata_log`
for the files, the choice of snapshot and the rules of the replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from auditor.formats import kafka_message as km

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


# ----------------------------------------------------------------------------------------------
# Replay
# ----------------------------------------------------------------------------------------------

class Replayer:
    """Applies metadata records to a :class:`ClusterState`, recording a history when asked."""

    def __init__(self, state: ClusterState | None = None, history: list[Change] | None = None,
                 notes: list[Note] | None = None, from_snapshot: bool = False):
        self.state = state or ClusterState()
        # records of a snapshot carry the snapshot's own offsets and times: not a topic's creation
        self.from_snapshot = from_snapshot
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
        if self.from_snapshot:
            self.state.topics[tid] = Topic(d["name"], tid, {})
        else:
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
                   None if self.from_snapshot else e.offset, None if self.from_snapshot else e.timestamp_ms)
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


def describe_change(c: Change, dir_name=lambda d: d) -> str:
    """One sentence for a history event; ``dir_name`` maps a directory ID to a log dir name."""
    where = f"{c.topic}-{c.partition}" if c.partition is not None else c.topic
    if c.kind == "replicas":
        return f"{where} reassigned from {c.before} to {c.after}"
    if c.kind == "directories":
        return f"{where} moved from log dir {dir_name(c.before)} to {dir_name(c.after)} on broker {c.broker}"
    if c.kind == "directory-assigned":
        return f"{where} placed in log dir {dir_name(c.after)} on broker {c.broker} (was {dir_name(c.before)})"
    if c.kind == "partition-created":
        return f"{where} created on replicas {c.after['replicas']}"
    if c.kind == "topic-created":
        return f"topic {c.topic} created (ID {c.topic_id})"
    if c.kind == "topic-deleted":
        return f"topic {c.topic} deleted (ID {c.topic_id}, {len(c.before or [])} partitions)"
    if c.kind == "config":
        rtype, rname = c.resource
        res = {"topic": f"topic {rname}", "broker": f"broker {rname}" if rname else "cluster default"}.get(
            rtype, f"{rtype} {rname}")
        if c.after is None:
            return f"{res}: {c.name} deleted (was {c.before})"
        was = "" if c.before is None else f" (was {c.before})"
        return f"{res}: {c.name} = {c.after}{was}"
    if c.kind == "broker-registered":
        dirs = ", ".join(dir_name(d) for d in c.after or [])
        return f"broker {c.broker} registered (log dirs: {dirs or 'none'})"
    if c.kind == "broker-unregistered":
        return f"broker {c.broker} unregistered"
    if c.kind == "broker-log-dirs":
        return (f"broker {c.broker} log dirs changed from {', '.join(map(dir_name, c.before or []))} "
                f"to {', '.join(map(dir_name, c.after or []))}")
    if c.kind == "feature":
        return f"feature {c.name} level {c.before} -> {c.after}"
    return f"{c.kind} {where or ''}".strip()
