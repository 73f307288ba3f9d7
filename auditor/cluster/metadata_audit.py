"""What the audit takes from the KRaft metadata log (:mod:`auditor.cluster.metadata_log`): the topic
configs it sets, and a small picklable view of the replica assignments and their history for the
checks (KLA020 naming moves, KLA080 stray partition dirs)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from auditor.cluster.metadata_state import RESERVED_DIRS, TOPIC_RESOURCE, Change, ClusterState


#: Topic configs and the broker (cluster-default) configs that set their default
#: (``ServerTopicConfigSynonyms``; only the ``.ms`` / ``.bytes`` spellings).
TOPIC_CONFIG_BROKER_DEFAULTS = {
    "retention.ms": "log.retention.ms", "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes", "segment.ms": "log.roll.ms", "cleanup.policy": "log.cleanup.policy",
    "file.delete.delay.ms": "log.segment.delete.delay.ms", "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "remote.storage.enable": None,
}


def effective_topic_configs(state: ClusterState, keys=None) -> dict[str, dict[str, tuple[str, str]]]:
    """{topic: {config: (value, where)}} as the metadata log sets them: the topic's own dynamic
    config ("metadata log: topic config"), else the dynamic cluster default of its broker synonym
    ("metadata log: cluster default"). Static server.properties values are not in the log."""
    keys = tuple(keys) if keys is not None else tuple(TOPIC_CONFIG_BROKER_DEFAULTS)
    cluster = state.broker_configs(None)
    out = {}
    for t in state.topics.values():
        own = state.configs.get((TOPIC_RESOURCE, t.name), {})
        cfg = {}
        for k in keys:
            if k in own:
                cfg[k] = (own[k], "metadata log: topic config")
            else:
                synonym = TOPIC_CONFIG_BROKER_DEFAULTS.get(k)
                if synonym is not None and synonym in cluster:
                    cfg[k] = (cluster[synonym], "metadata log: cluster default")
        out[t.name] = cfg
    return out


@dataclass
class PartitionMoves:
    """What the audit's checks need of the metadata history, small and picklable (Spark tasks
    carry it): per (topic, partition) its replica-set changes and log-dir moves, and the log dir
    path of each directory ID known from the audited log dirs' meta.properties."""
    by_partition: dict[tuple[str, int], list[Change]]
    dir_paths: dict[str, str]
    metadata_dir: str
    assignments: dict[tuple[str, int], dict[int, str | None]] = field(default_factory=dict)
    """(topic, partition) -> {broker: its replica's directory ID} as the metadata log says now."""
    topic_ids: dict[str, str] = field(default_factory=dict)
    """topic name -> its current topic ID."""
    brokers: dict[int, list[str]] = field(default_factory=dict)
    """broker -> its registered log-dir IDs."""
    dir_nodes: dict[str, int | None] = field(default_factory=dict)
    """directory ID -> node id (meta.properties) of the audited log dirs."""

    @classmethod
    def from_log(cls, log) -> "PartitionMoves":
        """From a :class:`auditor.cluster.metadata_log.MetadataLog` (read with ``history=True``)."""
        view = cls.from_history(log.history, {d: str(p) for d, (_n, p) in log.dir_ids.items()}, str(log.metadata_dir))
        for t in log.state.topics.values():
            view.topic_ids[t.name] = t.topic_id
            for i, p in t.partitions.items():
                view.assignments[(t.name, i)] = dict(zip(p.replicas, p.directories))
        view.brokers = {b.broker_id: list(b.log_dirs) for b in log.state.brokers.values()}
        view.dir_nodes = {d: node for d, (node, _p) in log.dir_ids.items()}
        return view

    def fully_audited(self, broker: int) -> bool:
        """Every log dir the broker registered is among the audited log dirs (its absences mean something)."""
        dirs = self.brokers.get(broker)
        return bool(dirs) and all(d in self.dir_paths for d in dirs)

    def dir_path(self, dir_id: str | None) -> str | None:
        """The log dir path of a directory ID among the audited log dirs, else None."""
        return None if dir_id is None else self.dir_paths.get(dir_id)

    @classmethod
    def from_history(cls, history: list[Change], dir_paths: dict[str, str], metadata_dir: str) -> "PartitionMoves":
        by: dict[tuple[str, int], list[Change]] = {}
        for c in history:
            if c.kind in ("replicas", "directories", "partition-created") and c.partition is not None:
                by.setdefault((c.topic, c.partition), []).append(c)
        return cls(by, dir_paths, metadata_dir)

    def dir_name(self, dir_id: str | None) -> str:
        if dir_id in RESERVED_DIRS:
            return RESERVED_DIRS[dir_id]
        return self.dir_paths.get(dir_id, f"{dir_id} (directory ID)")

    @staticmethod
    def _flip_flop_start(events: list[Change], i: int) -> Change:
        """The first of the directory changes that end at ``events[i]``, one move told in several:
        Kafka records A->B, B->A, A->B when a metadata delta reaches the broker between the
        controller accepting the future replica's directory and the swap of the logs (the broker
        re-asserts where the log still is)."""
        first, j = events[i], i - 1
        while j >= 0:
            c = events[j]
            if c.kind != "directories" or c.broker != first.broker or c.after != first.before:
                break
            first, j = c, j - 1
        return first

    def event_for(self, topic: str, partition: int, broker: int | None, log_dir: str | None) -> dict | None:
        """The latest recorded event that put this partition's replica on ``broker`` (in ``log_dir``):
        {"kind": "moved"|"reassigned", "text", "offset", "timestamp_ms", "first_offset", "first_timestamp_ms"}."""
        events = self.by_partition.get((topic, partition), [])
        norm = os.path.abspath(log_dir) if log_dir else None
        for i in range(len(events) - 1, -1, -1):
            c = events[i]
            if c.kind == "directories" and c.broker == broker and (
                    norm is None or os.path.abspath(self.dir_name(c.after)) == norm):
                first = self._flip_flop_start(events, i)
                return {"kind": "moved", "offset": c.offset, "timestamp_ms": c.timestamp_ms,
                        "first_offset": first.offset, "first_timestamp_ms": first.timestamp_ms,
                        "text": f"moved from log dir {self.dir_name(c.before)} to {self.dir_name(c.after)} "
                                f"on broker {broker}"}
            if c.kind == "replicas" and broker in (c.after or []) and broker not in (c.before or []):
                end = c
                for d in events[i + 1:]:        # the reassignment's completion (adding/removing done)
                    if d.kind != "replicas":
                        break
                    end = d
                return {"kind": "reassigned", "offset": end.offset, "timestamp_ms": end.timestamp_ms,
                        "first_offset": c.offset, "first_timestamp_ms": c.timestamp_ms,
                        "text": f"reassigned from {c.before} to {end.after}"}
        return None
