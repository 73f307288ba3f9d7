"""A real Kafka broker with tiered storage on (KIP-405), for tests.

The broker is a plain :class:`tests.harness.kafka.KafkaCluster` with these broker settings
(:func:`tiered_broker_config`):

* ``remote.log.storage.system.enable=true``;
* the remote storage manager is Kafka's own ``LocalTieredStorage`` from the kafka-storage TEST
  jar (``tools/kafka/pom.xml``): it keeps every "remote" segment, with its offset index, time
  index, producer snapshot, leader-epoch checkpoint and transaction index, as files under
  ``rsm.config.dir`` (here ``<workdir>/remote-storage``), and is told not to delete them when
  the broker stops (``delete.on.close=false``) so tests can read them afterwards;
* the remote log metadata manager is the default topic-based one: it writes
  ``__remote_log_metadata`` (RemoteLogSegmentMetadata*Record values) in the broker's own log
  dir.  It needs ``remote.log.metadata.manager.listener.name``: without it the broker starts,
  but nothing is ever uploaded, silently;
* the tiering and retention tasks run every second (defaults: 30 s and 5 min), so segments are
  uploaded and then deleted locally within seconds.

A topic tiers when created with ``remote.storage.enable=true``; :data:`TIERED_TOPIC_CONFIG`
adds a record-time roll (``segment.ms``) and ``local.retention.ms=5000``, so a closed segment
whose records are older than 5 s is deleted locally as soon as it is in remote storage (the
local files become ``*.deleted``, the local log start moves up, the log start stays).

:func:`wait_tiered` waits until the broker says (ListOffsets EARLIEST_LOCAL / LATEST_TIERED,
through the raw protocol: librdkafka has no spec for them) that the data moved.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.harness.encoding import uvarint
from tests.harness.kafka import KafkaCluster, KafkaHarnessError, wait_topic_config_applied, wait_until

LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"

#: Topic config of a tiered test topic: record-time roll (one segment per group of records
#: timestamped 2 * segment.ms apart), local copies deleted 5 s after their newest record once
#: uploaded, and the whole log kept (retention.ms=-1: nothing is ever deleted for good).
TIERED_TOPIC_CONFIG: dict[str, str] = {
    "remote.storage.enable": "true",
    "segment.ms": "60000",
    "segment.jitter.ms": "0",
    "local.retention.ms": "5000",
    "retention.ms": "-1",
}

#: ListOffsets special timestamps (ListOffsetsRequest.java): the local log start offset (v8+)
#: and the highest offset in remote storage (v9+).
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


def remote_storage_dir(workdir: str | os.PathLike) -> Path:
    """Where LocalTieredStorage keeps the remote segments of a cluster made in ``workdir``."""
    return Path(workdir).resolve() / "remote-storage"


def tiered_broker_config(workdir: str | os.PathLike, metadata_partitions: int = 3,
                         task_interval_ms: int = 1000) -> dict[str, str]:
    """Broker settings for tiered storage on LocalTieredStorage (pass as ``broker_config``)."""
    storage = remote_storage_dir(workdir)
    storage.mkdir(parents=True, exist_ok=True)
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(storage),
        "rsm.config.delete.on.close": "false",
        "rsm.config.delete.enable": "true",
        # the topic-based metadata manager talks to the cluster through this listener; without it
        # RemoteLogManager never starts copying (no error, no upload)
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": str(metadata_partitions),
        "remote.log.manager.task.interval.ms": str(task_interval_ms),
        "log.retention.check.interval.ms": str(task_interval_ms),
        "remote.log.manager.thread.pool.size": "2",
        "remote.log.manager.copier.thread.pool.size": "1",
        "remote.log.manager.expiration.thread.pool.size": "1",
        "remote.log.reader.threads": "2",
    }


def tiered_cluster(workdir: str | os.PathLike, brokers: int = 1,
                   broker_config: Mapping[str, str] | None = None, **kwargs) -> KafkaCluster:
    """A :class:`KafkaCluster` with tiered storage on (not started)."""
    cfg = tiered_broker_config(workdir)
    cfg.update({k: str(v) for k, v in (broker_config or {}).items()})
    return KafkaCluster(workdir, brokers=brokers, broker_config=cfg, **kwargs)


# ---------------------------------------------------------------------------------------------
# ListOffsets with the tiered special timestamps (raw protocol: request v9, KIP-1005)
# ---------------------------------------------------------------------------------------------

_LIST_OFFSETS_KEY = 2


def _ustr(s: str) -> bytes:  # compact string
    b = s.encode()
    return uvarint(len(b) + 1) + b


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def list_offsets_raw(host: str, port: int, topic: str, partition: int, timestamp: int,
                     timeout_s: float = 15.0) -> tuple[int, int, int]:
    """One ListOffsets v9 request (flexible, request header v2) for one partition:
    (error code, offset, timestamp) as the broker answered.  Used for the special timestamps
    EARLIEST_LOCAL (-4) and LATEST_TIERED (-5), which client libraries do not expose."""
    version = 9
    body = struct.pack(">ib", -1, 0)  # replica_id, isolation_level
    body += uvarint(2) + _ustr(topic)  # topics: 1 entry
    body += uvarint(2) + struct.pack(">iiq", partition, -1, timestamp) + uvarint(0)  # partitions: 1, tags
    body += uvarint(0)  # topic tags
    body += uvarint(0)  # request tags (v9 has no timeout_ms: that is v10+)
    client = b"kla-tiered"
    header = struct.pack(">hhi", _LIST_OFFSETS_KEY, version, 1) + struct.pack(">h", len(client)) + client + uvarint(0)
    msg = header + body
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", _recv(s, 4))[0]
        resp = _recv(s, size)
    pos = 4  # correlation id
    _, pos = _read_uvarint(resp, pos)  # response header tags
    pos += 4  # throttle
    n_topics, pos = _read_uvarint(resp, pos)
    for _ in range(n_topics - 1):
        name_len, pos = _read_uvarint(resp, pos)
        pos += name_len - 1
        n_parts, pos = _read_uvarint(resp, pos)
        for _ in range(n_parts - 1):
            idx, err, ts, off, epoch = struct.unpack_from(">ihqqi", resp, pos)
            pos += 26
            _, pos = _read_uvarint(resp, pos)
            if idx == partition:
                return err, off, ts
    raise KafkaHarnessError(f"ListOffsets v9 answer without {topic}-{partition}")


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise KafkaHarnessError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def leader_address(kc: KafkaCluster, topic: str, partition: int) -> tuple[str, int]:
    node = kc.nodes[kc.leader(topic, partition)]
    return "127.0.0.1", node.port


def local_log_start(kc: KafkaCluster, topic: str, partition: int = 0) -> int:
    host, port = leader_address(kc, topic, partition)
    err, off, _ = list_offsets_raw(host, port, topic, partition, EARLIEST_LOCAL_TIMESTAMP)
    if err:
        raise KafkaHarnessError(f"ListOffsets EARLIEST_LOCAL {topic}-{partition}: error {err}")
    return off


def highest_tiered_offset(kc: KafkaCluster, topic: str, partition: int = 0) -> int:
    host, port = leader_address(kc, topic, partition)
    err, off, _ = list_offsets_raw(host, port, topic, partition, LATEST_TIERED_TIMESTAMP)
    if err:
        raise KafkaHarnessError(f"ListOffsets LATEST_TIERED {topic}-{partition}: error {err}")
    return off


def wait_tiered(kc: KafkaCluster, topic: str, partition: int = 0, *, tiered_at_least: int,
                local_start_at_least: int | None = None, timeout_s: float = 240.0) -> tuple[int, int]:
    """Until remote storage holds every offset below ``tiered_at_least + 1`` and, if asked, the
    local log starts at or above ``local_start_at_least``.  Returns (highest tiered offset, local
    log start offset)."""
    deadline = time.monotonic() + timeout_s
    while True:
        tiered = highest_tiered_offset(kc, topic, partition)
        local = local_log_start(kc, topic, partition)
        if tiered >= tiered_at_least and (local_start_at_least is None or local >= local_start_at_least):
            return tiered, local
        if time.monotonic() > deadline:
            raise KafkaHarnessError(
                f"{topic}-{partition} not tiered after {timeout_s} s: highest tiered offset {tiered} "
                f"(want >= {tiered_at_least}), local log start {local} (want >= {local_start_at_least}); "
                f"broker log: {kc.nodes[1].server_log}")
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# Data and the oracle
# ---------------------------------------------------------------------------------------------


def produce_groups(kc: KafkaCluster, topic: str, partition: int, first_ms: int, groups: int, *,
                   segment_ms: int, batches_per_group: int = 4, records_per_batch: int = 10,
                   record_step_ms: int = 250, value_size: int = 300) -> list[list[int]]:
    """Groups of records, each group timestamped ``2 * segment_ms + 1`` after the previous one's
    start (so each group starts a new segment on a record-time roll), each group sent as
    ``batches_per_group`` batches (one flush each: several batches per segment, so its indexes
    have entries), records ``record_step_ms`` apart.  Returns the timestamps per group."""
    p = Producer({"bootstrap.servers": kc.bootstrap_servers, "linger.ms": 1000, "acks": "all",
                  "enable.idempotence": False, "batch.num.messages": 10000})
    out = []
    step = 2 * segment_ms + 1
    for g in range(groups):
        t0 = first_ms + g * step
        stamps = []
        for b in range(batches_per_group):
            recs = []
            for r in range(records_per_batch):
                ts = t0 + (b * records_per_batch + r) * record_step_ms
                stamps.append(ts)
                recs.append((f"g{g}-{b}-{r}", os.urandom(value_size // 2).hex(), ts))
            kc._send(p, topic, recs, partition, 180.0)
        out.append(stamps)
    return out


class OffsetsForTimes:
    """The broker's answers to ListOffsets by timestamp (Consumer.offsets_for_times), one
    consumer for many targets."""

    def __init__(self, kc: KafkaCluster):
        self.consumer = Consumer({"bootstrap.servers": kc.bootstrap_servers,
                                  "group.id": f"tiered-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})

    #: Answers that are no answer: the broker's remote lookup (DelayedRemoteListOffsets) timed out,
    #: or the client's request did. Retriable in Kafka's protocol (the Java consumer retries them);
    #: seen once on a loaded machine (load 14) for the very first lookup into remote storage.
    RETRIABLE = (KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT)

    def __call__(self, topic: str, partition: int, target_ms: int, timeout_s: float = 180.0) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                (tp,) = self.consumer.offsets_for_times([TopicPartition(topic, partition, target_ms)], timeout=30)
                error = tp.error
            except KafkaException as e:  # the whole call failed (a local timeout)
                error = e.args[0]
            if error is None:
                return tp.offset
            if error.code() not in self.RETRIABLE or time.monotonic() > deadline:
                raise KafkaHarnessError(f"offsets_for_times {topic}-{partition}@{target_ms}: {error}")
            time.sleep(0.5)

    def many(self, topic: str, partition: int, targets: Sequence[int]) -> list[int]:
        return [self(topic, partition, t) for t in targets]

    def close(self) -> None:
        self.consumer.close()


# ---------------------------------------------------------------------------------------------
# The scenario shared by the tiered-storage tests
# ---------------------------------------------------------------------------------------------


class TieredScenario:
    """One topic, two partitions, data in three zones per partition:

    * remote only: the first ``remote_groups`` segments, uploaded and then deleted locally
      (``local.retention.ms=5000``; their local files become ``*.deleted``);
    * remote and local: the next ``both_groups`` segments, uploaded after ``local.retention.ms``
      was set back to -2 (= retention.ms = -1, keep), so their local copies stay;
    * local only: the active segment (never uploaded).

    Partition 1 also gets ``delete_records`` to ``deleted_to`` inside the remote range: its log
    start offset moves up and the remote segments wholly below it are deleted from remote
    storage (DELETE_SEGMENT_STARTED / FINISHED in the metadata), a real gap.
    Record timestamps are in the past, ``record_step_ms`` apart inside a group, groups
    ``2 * segment.ms + 1`` apart (one segment each).
    """

    topic = "tiered"
    partitions = 2
    segment_ms = 60000
    batches_per_group = 4
    records_per_batch = 10
    remote_groups = 8
    both_groups = 5
    deleted_to = 100

    def __init__(self, kc: KafkaCluster, workdir: str | os.PathLike):
        self.kc = kc
        self.remote_dir = remote_storage_dir(workdir)
        self.group_stamps: dict[int, list[list[int]]] = {}
        self.per_group = self.batches_per_group * self.records_per_batch

    def build(self) -> "TieredScenario":
        kc, topic = self.kc, self.topic
        cfg = dict(TIERED_TOPIC_CONFIG, **{"segment.ms": str(self.segment_ms), "index.interval.bytes": "1024"})
        kc.create_topic(topic, partitions=self.partitions, config=cfg)
        step = 2 * self.segment_ms + 1
        groups = self.remote_groups + self.both_groups + 1
        first = int(time.time() * 1000) - (groups + 2) * step
        self.first_ms = first
        # phase 1: remote-only groups (+ the group that stays active for now)
        for p in range(self.partitions):
            self.group_stamps[p] = produce_groups(
                kc, topic, p, first, self.remote_groups + 1, segment_ms=self.segment_ms,
                batches_per_group=self.batches_per_group, records_per_batch=self.records_per_batch)
        last_remote = self.remote_groups * self.per_group - 1
        for p in range(self.partitions):
            wait_tiered(kc, topic, p, tiered_at_least=last_remote, local_start_at_least=last_remote + 1)
        # keep everything local from now on: the broker must apply this before phase 2's segments
        # are uploaded (their records are half an hour old: with local.retention.ms=5000 still in
        # force they would be deleted locally at once), so wait until the broker reports it
        kc.alter_topic_config(topic, {"local.retention.ms": "-2"})
        # the broker's DynamicConfigPublisher line, not DescribeConfigs (answered from the metadata
        # image before the logs get the change); the phase-2 check below fails if it still raced
        wait_topic_config_applied(kc, topic, "local.retention.ms", -2)
        # partition 1: records deleted for good below deleted_to
        from confluent_kafka import TopicPartition as TP
        fut = kc.admin().delete_records([TP(topic, 1, self.deleted_to)])
        for f in fut.values():
            f.result(timeout=30)
        # phase 2: groups that are uploaded but stay local, and the active one
        for p in range(self.partitions):
            self.group_stamps[p] += produce_groups(
                kc, topic, p, first + (self.remote_groups + 1) * step, self.both_groups, segment_ms=self.segment_ms,
                batches_per_group=self.batches_per_group, records_per_batch=self.records_per_batch)
        last_tiered = (self.remote_groups + self.both_groups) * self.per_group - 1
        for p in range(self.partitions):
            _, local = wait_tiered(kc, topic, p, tiered_at_least=last_tiered)
            if local != last_remote + 1:
                raise KafkaHarnessError(f"{topic}-{p}: the local log start moved to {local} in phase 2 "
                                        f"(want {last_remote + 1}: phase 2's segments stay local)")
        self._wait_remote_deleted(1)
        self._wait_log_start_checkpoint()
        return self

    def _wait_log_start_checkpoint(self, timeout_s: float = 180.0) -> None:
        """Until the broker's log-start-offset-checkpoint holds every partition's log start (0, and
        ``deleted_to`` for partition 1). The broker rewrites that file about once a minute: a disk
        read before then sees partition 1 start at 0 while the broker answers ``deleted_to``."""
        checkpoint = self.kc.log_dirs(1)[0] / "log-start-offset-checkpoint"
        want = {f"{self.topic} {p} {self.deleted_to if p == 1 else 0}" for p in range(self.partitions)}

        def written() -> bool:
            try:
                return want <= set(checkpoint.read_text().splitlines())
            except FileNotFoundError:  # between the broker's write of a temp file and its rename
                return False
        wait_until(written, timeout_s, f"{checkpoint} to hold {sorted(want)}")

    def _wait_remote_deleted(self, partition: int, timeout_s: float = 180.0) -> None:
        """Until the remote segments wholly below ``deleted_to`` are gone from remote storage."""
        below = {f"{g * self.per_group:020d}" for g in range(self.remote_groups)
                 if (g + 1) * self.per_group - 1 < self.deleted_to}
        deadline = time.monotonic() + timeout_s
        while True:
            left = [p.name for p in self.remote_dir.rglob(f"{self.topic}-{partition}-*/*.log")
                    if p.name.split("-")[0] in below]
            if not left:
                return
            if time.monotonic() > deadline:
                raise KafkaHarnessError(f"remote segments below {self.deleted_to} of {self.topic}-{partition} "
                                        f"still in remote storage after {timeout_s} s: {left}")
            time.sleep(0.5)

    def targets(self, partition: int) -> list[int]:
        """Target times before, inside, at the edges of and between every group, and after all."""
        out = [self.first_ms - 3_600_000, self.first_ms - 1]
        for stamps in self.group_stamps[partition]:
            lo, hi = stamps[0], stamps[-1]
            out += [lo - 1, lo, lo + 1, (lo + hi) // 2, (lo + hi) // 2 + 125, hi - 1, hi, hi + 1,
                    hi + self.segment_ms]
        out += [self.group_stamps[partition][-1][-1] + 3_600_000]
        return out
