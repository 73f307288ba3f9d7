"""The same questions asked of a live cluster through the Kafka protocol (no disk access): the
broker's own answers per partition (:func:`ask_partitions`) and a consumer group's reset
(:func:`resets_from_protocol`). No mtimes over the protocol: the modern lookup only."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from auditor.replay.groups import GroupNotFound, GroupReset
from auditor.replay.legacy import LegacyAnswer
from auditor.replay.log_start import LogStart
from auditor.replay.modern import ModernAnswer
from auditor.replay.prediction import ReplayPrediction, ReplicaPrediction


@dataclass
class BrokerAnswers:
    """One partition's broker answers: ListOffsets by timestamp, earliest, latest, max timestamp."""

    topic: str
    partition: int
    modern_offset: int | None
    """None: the broker answered -1."""
    log_start_offset: int
    log_end_offset: int
    oldest_timestamp_ms: int | None
    """the earliest record's timestamp (None: the partition is empty)."""
    max_timestamp_offset: int
    newest_timestamp_ms: int | None

    def replica_prediction(self, replay_at_ms: int) -> ReplicaPrediction:
        """The answers as a replay prediction of one replica: the earliest offset is the log start
        (0: nothing was ever deleted)."""
        lso = self.log_start_offset
        start = LogStart(lso, "broker's earliest offset", None if lso is None else lso > 0,
                         "ListOffsets earliest, asked the broker")
        prediction = ReplayPrediction(
            replay_at_ms=replay_at_ms, log_start_offset=lso, log_end_offset=self.log_end_offset,
            modern=ModernAnswer(self.modern_offset, None, None, "asked the broker (ListOffsets by timestamp)"),
            legacy=LegacyAnswer(None, None, None, "not asked: the protocol mode judges the modern lookup only"),
            oldest_timestamp_ms=self.oldest_timestamp_ms, newest_timestamp_ms=self.newest_timestamp_ms, segments=0)
        prediction.log_start = start
        return ReplicaPrediction(None, None, [], prediction)


def ask_partitions(bootstrap: str, topics: list[str], replay_at_ms: int) -> list[BrokerAnswers]:
    """Per partition of the topics: the broker's own answers (LookupError for an unknown topic)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=15)
    rows = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kafka-audit-replay-check-{int(time.time())}",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        for topic in topics:
            meta = md.topics.get(topic)
            if meta is None or meta.error is not None:
                raise LookupError(f"{bootstrap}: topic {topic!r} not found ({meta.error if meta else 'no metadata'})")
            for partition in sorted(meta.partitions):
                tp = TopicPartition(topic, partition)
                specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
                         "max_timestamp": OffsetSpec.max_timestamp()}
                answers = {}
                for name, spec in specs.items():
                    info = admin.list_offsets({tp: spec}, request_timeout=15)[tp].result(timeout=15)
                    answers[name] = (info.offset, info.timestamp)
                (modern,) = consumer.offsets_for_times([TopicPartition(topic, partition, replay_at_ms)], timeout=15)
                earliest_ts = None
                if answers["earliest"][0] < answers["latest"][0]:
                    consumer.assign([TopicPartition(topic, partition, answers["earliest"][0])])
                    msg = consumer.consume(1, timeout=10)
                    if msg and msg[0].error() is None:
                        earliest_ts = msg[0].timestamp()[1]
                    consumer.unassign()
                rows.append(BrokerAnswers(
                    topic=topic, partition=partition, modern_offset=modern.offset if modern.offset >= 0 else None,
                    log_start_offset=answers["earliest"][0], log_end_offset=answers["latest"][0],
                    oldest_timestamp_ms=earliest_ts, max_timestamp_offset=answers["max_timestamp"][0],
                    newest_timestamp_ms=answers["max_timestamp"][1] if answers["max_timestamp"][1] >= 0 else None))
    finally:
        consumer.close()
    return rows


@dataclass
class ProtocolResets:
    """A group's reset as the cluster answers it: per committed partition, and the group's facts."""

    resets: list[GroupReset]
    facts: dict


def resets_from_protocol(bootstrap: str, group: str, replay_at_ms: int) -> ProtocolResets:
    """The cluster's own answers: committed offsets, ListOffsets(T), earliest and latest (no bytes)."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    committed = {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}
    if not committed:
        raise GroupNotFound(f"{bootstrap}: group {group!r} has no committed offsets")
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    facts = {"group": group, "protocol": getattr(getattr(desc, "type", None), "name", "").lower() or None,
             "state": desc.state.name.title(), "members": len(desc.members), "offsets_partition": None}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kafka-audit-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    out = []
    try:
        for (topic, part), offset in sorted(committed.items()):
            tp = TopicPartition(topic, part)
            start = admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=15)[tp].result(timeout=15).offset
            end = admin.list_offsets({tp: OffsetSpec.latest()}, request_timeout=15)[tp].result(timeout=15).offset
            (ans,) = consumer.offsets_for_times([TopicPartition(topic, part, replay_at_ms)], timeout=15)
            if ans.offset >= 0:
                reset, source = ans.offset, "timestamp"
            else:
                reset, source = end, "log end offset"
            out.append(GroupReset(topic, part, offset, reset, source, True, start, end,
                                  max(offset - reset, 0), max(reset - offset, 0), None, None))
    finally:
        consumer.close()
    return ProtocolResets(out, facts)
