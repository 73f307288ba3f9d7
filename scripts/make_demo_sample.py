"""Builds auditor/samples/demo-cluster.tar.gz: log dirs written by real Kafka brokers, with
planted anomalies, for ``kafka-audit demo``.

    .venv/bin/python scripts/make_demo_sample.py          # needs java + the Kafka jars (scripts/kafka-jars.sh)

A 2-broker KRaft cluster (2 log dirs each) from the test harness; everything below is done by
the brokers themselves, through a real client, Kafka's Admin API and Kafka's kafka-topics:

* ``clicks``: 6 partitions, one hot key sending most records to one partition (skew);
* ``orders``: 5 record-time segments produced over ~12 s, then partition 0 reassigned from
  broker 1 to brokers 1 and 2 (the new replica's mtimes are all "now": an mtime reset);
* ``audit-log``: records stamped 10..1 days ago with ``retention.ms`` = 3 days: the broker
  deletes the old segments (a retention gap before a replay target 5 days back);
* ``sensor-readings``: CreateTime records 5 days in the past and in the future (limits open);
* ``payments``: a record stamped a day ahead keeps retention (1 hour) from deleting the
  old-stamped segments after it;
* (then every broker restarts with tiered storage on: created first, ``__remote_log_metadata``
  would have changed which log dir each partition above went to)
* ``history``: a tiered-storage topic (Kafka's LocalTieredStorage from the Kafka jars, as in
  tests/harness/tiered.py): groups of records 9..1 days old and one stamped now, uploaded and
  then deleted locally (the broker also rolls the active segment once it is older than
  ``local.retention.ms``), so no record is left on disk; LocalTieredStorage's files are archived
  as ``remote-storage/`` so replay answers in the remote range are exact;
* ``customers``: keyed records through the Java client's partitioner (murmur2), one hot key,
  records with null keys, then ``kafka-topics --alter --partitions`` from 3 to 6 and the same
  keys written again (a key's records now sit in two partitions);
* consumer groups: ``billing`` read all of ``orders`` (lag 0, healthy); ``audit-archiver``
  committed offset 15 on ``audit-log`` (below the log start once retention ran);
  ``legacy-etl`` committed on ``old-events``, deleted while the group's coordinator broker was
  down (Kafka drops a deleted topic's offsets when its coordinator sees the deletion; one that
  was stopped then may never see it: tried again with a new topic and group when it did).

The brokers are stopped cleanly, then the log dirs are archived with their files' mtimes
(restored by ``tarfile`` on unpacking). ``demo.json`` records when the sample was made (the
demo audits "as of" that time), the replay target, and ``demo-audit.yaml`` scales the time
thresholds to the seconds the sample took to make.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))  # tests.harness.tiered imports tests.harness.*

from harness.groups import commit_offsets, consume_and_commit  # noqa: E402
from harness.kafka import KafkaCluster, KafkaHarnessError, kafka_classpath, wait_until  # noqa: E402
from harness.moves import reassign  # noqa: E402
from harness.tiered import TIERED_TOPIC_CONFIG, produce_groups, remote_storage_dir, tiered_broker_config, \
    wait_tiered  # noqa: E402

DAY = 86_400_000
HOUR = 3_600_000
OUT = REPO / "auditor" / "samples" / "demo-cluster.tar.gz"
TEXT = ("ts=%d level=INFO svc=checkout region=eu-west-1 user=%05d action=view item=%04d "
        "latency_ms=%03d status=200 path=/api/v2/items/%04d ")

DEMO_CONFIG = """\
# Thresholds for the demo sample, which real brokers wrote in about a minute: time thresholds
# are scaled from hours/days down to seconds. Production defaults are in each check's Options.
fail_on: FAIL
checks:
  mtime.reset: {min_record_span_ms: 4000, replica_skew_ms: 3000, packed_ratio: 0.2}
  timestamps.bounds: {before_max_ms: 86400000, after_max_ms: 3600000}
  skew.partition_size: {min_topic_bytes: 200000}
  skew.broker_disk: {min_bytes: 200000}
topics:
  audit-log: {kafka: {retention.ms: 259200000}}
  payments: {kafka: {retention.ms: 3600000}}
"""


def text(n: int, width: int = 400) -> str:
    s = "".join(TEXT % (n, n % 99991, n % 7919, n % 997, n % 7919) for _ in range(4))
    return s[:width]


#: Broker settings beyond the harness's: __consumer_offsets without replicas (each group's
#: offsets on one broker: stopping it stops the group's coordinator), the log start checkpoint
#: written within a second. Tiered storage (LocalTieredStorage, one __remote_log_metadata
#: partition) is added by a restart once the original sample's topics are written.
BASE_BROKER_CONFIG = {"log.retention.check.interval.ms": "1000", "offsets.topic.replication.factor": "1",
                      "log.flush.start.offset.checkpoint.interval.ms": "1000"}


def java_hash(s: str) -> int:
    """Java's String.hashCode (what the group coordinator partitions group ids by)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def offsets_partition_on(cluster: KafkaCluster, node: int) -> int:
    """A __consumer_offsets partition whose only replica is on ``node``."""
    n = int(cluster.nodes[1].config["offsets.topic.num.partitions"])
    for p in range(n):
        if node in cluster.partition_dirs("__consumer_offsets", p):
            return p
    raise KafkaHarnessError(f"no __consumer_offsets partition on broker {node}")


def group_on_partition(stem: str, partition: int, partitions: int) -> str:
    """``stem`` or ``stem-N``: the first name the coordinator places in ``partition``."""
    for i in range(100):
        name = stem if i == 0 else f"{stem}-{i}"
        if (java_hash(name) & 0x7FFFFFFF) % partitions == partition:
            return name
    raise ValueError(stem)


def topics_tool(cluster: KafkaCluster, *args: str) -> str:
    """``kafka-topics`` (Kafka's own TopicCommand) against broker 1; its output."""
    cmd = ["java", "-cp", cluster.classpath, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
           f"127.0.0.1:{cluster.nodes[1].port}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise KafkaHarnessError(f"kafka-topics {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def alter_partitions(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    """``kafka-topics --alter --partitions``, then until every new partition has a leader and a log dir."""
    topics_tool(cluster, "--alter", "--topic", topic, "--partitions", str(partitions))

    def ready() -> bool:
        md = cluster.admin().list_topics(topic, timeout=10).topics[topic]
        return len(md.partitions) == partitions and all(
            p.leader >= 0 and cluster.partition_dirs(topic, p.id) for p in md.partitions.values())
    wait_until(ready, 120, f"{topic} to have {partitions} partitions with leaders and log dirs")


def restart_with(cluster: KafkaCluster, config: dict[str, str]) -> None:
    """Stop every broker cleanly, add ``config`` to each one's server.properties, start them again."""
    cluster._admin = None  # no Python client connected across the restart (see the old-events note)
    gc.collect()
    cluster.stop(require_clean=True)
    for node in cluster.nodes.values():
        node.config.update(config)
        cluster._write_files(node)
    cluster.start()


def commit_on_deleted_topic(cluster: KafkaCluster, attempt: int) -> tuple[str, str] | None:
    """A group's commit on a topic deleted while the group's coordinator (broker 2) was down.
    Kafka drops a deleted topic's offsets when a running coordinator sees the deletion; when broker
    2 restarts, whether it sees it depends on whether its first metadata image already lacks the
    topic (a race). Returns (group, topic) when the commit survived in __consumer_offsets (read
    from broker 2's files, as the audit reads them), else None."""
    from auditor.cluster.consumer_groups import commit_rows, read_groups
    topic = "old-events" if attempt == 0 else f"old-events-{attempt}"
    cluster.create_topic(topic, replica_assignment=[[1]], config={"file.delete.delay.ms": "500"})
    cluster.produce(topic, [(f"e{i}", text(i, 120), None) for i in range(20)], partition=0)
    n = int(cluster.nodes[1].config["offsets.topic.num.partitions"])
    group = group_on_partition("legacy-etl" if attempt == 0 else f"legacy-etl-v{attempt}", offsets_partition_on(cluster, 2), n)
    commit_offsets(cluster, group, {(topic, 0): 20, ("orders", 1): 0})
    # no Python client is connected while broker 2 is down: librdkafka clients reconnecting to it
    # crashed this process (SIGSEGV in rdk:main) more than once; Kafka's own tool deletes the topic
    cluster._admin = None
    gc.collect()
    cluster.stop_broker(2, require_clean=True)
    topics_tool(cluster, "--delete", "--topic", topic)
    wait_until(lambda: topic not in topics_tool(cluster, "--list").split(), 90, f"{topic} to leave the metadata")
    cluster.start_broker(2)
    server_log = cluster.nodes[2].server_log
    # broker 2's coordinator logs "Loaded classic group <group> with N members" once it has loaded
    wait_until(lambda: f"group {group} with" in server_log.read_text(errors="replace"), 120,
               f"broker 2's coordinator to load group {group} ({server_log})")
    time.sleep(5)  # a deletion the coordinator does see is written within milliseconds of loading
    kept = {(c["group"], c["topic"], c["partition"])
            for c in commit_rows(read_groups(cluster.log_dirs(2)))}
    print(f"{group}: commit on deleted {topic} kept in __consumer_offsets: {(group, topic, 0) in kept}")
    def leftovers() -> list[Path]:  # the deleted topic's dir, renamed *-delete until file.delete.delay.ms
        return [p for node in cluster.nodes for d in cluster.log_dirs(node) for p in d.glob(f"{topic}-0*")]
    wait_until(lambda: not leftovers(), 120, f"the broker to remove {topic}'s directory")
    return (group, topic) if (group, topic, 0) in kept else None


def build(work: Path) -> Path:
    kafka_dir = work / "kafka"
    # first the topics of the original sample, on brokers without tiered storage (so each log dir
    # gets the same partitions as before: a broker puts a new partition in its log dir holding the
    # fewest); tiered storage is switched on by a restart afterwards
    cluster = KafkaCluster(kafka_dir, brokers=2, log_dirs_per_broker=2, classpath=kafka_classpath(),
                           broker_config=BASE_BROKER_CONFIG)
    cluster.start()
    try:
        # skew
        cluster.create_topic("clicks", replica_assignment=[[1], [2], [1], [2], [1], [2]])
        hot = cluster.produce("clicks", [("user-42", text(i), None) for i in range(4000)])
        cluster.produce("clicks", [(f"user-{i}", text(i), None) for i in range(1200)])
        print("clicks: hot partition", Counter(d.partition for d in hot).most_common(1))
        # reassignment
        cluster.create_topic("orders", replica_assignment=[[1], [2]],
                             config={"segment.ms": "2000", "segment.jitter.ms": "0"})
        for g in range(5):
            cluster.produce("orders", [(f"o{g}-{i}", text(g * 100 + i), None) for i in range(40)], partition=0)
            time.sleep(2.3)
        time.sleep(5)
        reassign(cluster, "orders", 0, [1, 2])
        # retention gap
        now = int(time.time() * 1000)
        cluster.create_topic("audit-log", replica_assignment=[[2]], config={
            "retention.ms": str(3 * DAY), "segment.ms": "60000", "segment.jitter.ms": "0", "file.delete.delay.ms": "500"})
        for days_ago in range(10, 0, -1):
            cluster.produce("audit-log", [(f"a{days_ago}-{i}", text(i), now - days_ago * DAY + i * 1000) for i in range(30)],
                            partition=0)
        # out-of-bound timestamps
        cluster.create_topic("sensor-readings", replica_assignment=[[1]],
                             config={"segment.ms": "60000", "segment.jitter.ms": "0"})
        cluster.produce("sensor-readings", [(f"s{i}", text(i), None) for i in range(50)], partition=0)
        time.sleep(1.5)
        cluster.produce("sensor-readings", [("clock-ahead", "reading from a device 5 days ahead", now + 5 * DAY)], partition=0)
        cluster.produce("sensor-readings", [("replayed", "reading replayed from 5 days ago", now - 5 * DAY)], partition=0)
        cluster.produce("sensor-readings", [(f"t{i}", text(i), None) for i in range(50)], partition=0)
        # future timestamp blocking retention
        cluster.create_topic("payments", replica_assignment=[[2]], config={
            "retention.ms": str(HOUR), "segment.bytes": str(1 << 20), "segment.ms": "60000", "segment.jitter.ms": "0",
            "file.delete.delay.ms": "500"})
        old = now - 2 * DAY
        cluster.produce("payments", [(f"p{i}", text(i), old + i) for i in range(50)], partition=0)
        cluster.produce("payments", [("future", "stamped a day ahead", now + DAY)], partition=0)
        for chunk in range(3):
            cluster.produce("payments", [(f"q{chunk}-{i}", text(chunk * 1000 + i, 1800), old + 600_000 + i)
                                         for i in range(650)], partition=0)
        cluster.produce("payments", [("recent", "now", None)], partition=0)

        restart_with(cluster, tiered_broker_config(kafka_dir, metadata_partitions=1))
        # healthy consumer group: read every record of orders, committed (lag 0)
        billing = consume_and_commit(cluster, "billing", ["orders"], 200, **{"group.protocol": "classic"})
        print("billing committed", billing)
        # consumer group committed below the log start: retention deletes audit-log's old days
        commit_offsets(cluster, "audit-archiver", {("audit-log", 0): 15})
        # tiered storage: one group of records per day, 9..1 days old (the replay target, 5 days
        # back, inside one), then one stamped now; local copies deleted once uploaded
        cluster.create_topic("history", replica_assignment=[[2]], config=dict(
            TIERED_TOPIC_CONFIG, **{"index.interval.bytes": "1024", "file.delete.delay.ms": "500"}))
        per_group = 4 * 10
        for days_ago in (9, 7, 5, 3, 1):
            produce_groups(cluster, "history", 0, now - days_ago * DAY - 5_000, 1, segment_ms=60_000,
                           value_size=200)
        produce_groups(cluster, "history", 0, now - 2_000, 1, segment_ms=60_000, value_size=200)
        # consumer group on a deleted topic whose coordinator missed the deletion
        legacy = None
        for attempt in range(4):
            legacy = commit_on_deleted_topic(cluster, attempt)
            if legacy:
                break
        if legacy is None:
            raise KafkaHarnessError("broker 2's coordinator saw every deletion: no commit on a deleted topic kept")
        # keys, after broker 2's restarts (a librdkafka producer that had seen the partition count
        # change crashed in its main thread when broker 2 restarted): the Java client's
        # partitioner (murmur2; null keys spread), a hot key, null keys; then 3 -> 6 partitions
        # and the same keys again: each key's records in two partitions
        cluster.create_topic("customers", partitions=3, config={"segment.ms": "600000", "segment.jitter.ms": "0"})
        java_partitioner = {"partitioner": "murmur2_random"}

        def customer_records(round_: int):
            recs = [(f"cust-{i:03d}", f"round={round_} order={i} amount={i * 7 % 500}", None) for i in range(200)]
            recs += [("cust-vip", f"round={round_} order=hot-{i}", None) for i in range(300)]
            recs += [(None, f"round={round_} anonymous visit {i}", None) for i in range(150)]
            return recs
        cluster.produce("customers", customer_records(1), producer_config=java_partitioner)
        alter_partitions(cluster, "customers", 6)
        cluster.produce("customers", customer_records(2), producer_config=java_partitioner)
        # every closed segment of history in remote storage and deleted locally
        tiered_to = 5 * per_group - 1
        wait_tiered(cluster, "history", 0, tiered_at_least=tiered_to, local_start_at_least=tiered_to + 1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (cluster.list_offsets("audit-log", 0, "earliest")[0] == 0
                                               or cluster.list_offsets("payments", 0, "earliest")[0] == 0):
            time.sleep(0.5)
        time.sleep(3)
        print("audit-log earliest", cluster.list_offsets("audit-log", 0, "earliest"),
              "payments earliest", cluster.list_offsets("payments", 0, "earliest"))
        log_dirs = [d for node in sorted(cluster.nodes) for d in cluster.log_dirs(node)]
        made_at = int(time.time() * 1000)  # the demo audits the sample as of this moment
    finally:
        cluster.stop()
    return make_tarball(work, log_dirs, made_at, now, remote_storage_dir(kafka_dir), legacy)


def make_tarball(work: Path, log_dirs: list[Path], made_at: int, now: int, remote: Path,
                 legacy: tuple[str, str]) -> Path:
    root = work / "demo-cluster"
    root.mkdir()
    os.rename(remote, root / "remote-storage")
    names = []
    for d in log_dirs:
        name = f"broker{d.parent.name.split('-')[-1]}-{d.name}"
        os.rename(d, root / name)  # a rename keeps every file's mtime
        names.append(name)
    (root / "demo.json").write_text(json.dumps({
        "made_at_ms": made_at, "audit_at_ms": now, "log_dirs": names,
        "replay_at_ms": now - 5 * DAY, "replay_topics": ["audit-log", "history"],
        "remote_storage_dir": "remote-storage", "replay_group": "audit-archiver",
        "kafka_version": "4.2.1",
        "planted": {"clicks": "hot key skew", "orders": "partition 0 reassigned from broker 1 to brokers 1,2",
                    "audit-log": "retention deleted records older than 3 days",
                    "sensor-readings": "CreateTime records 5 days in the past and the future",
                    "payments": "a record a day ahead blocks retention (1 hour) of the segments after it",
                    "history": "tiered storage: closed segments only in remote storage (LocalTieredStorage files "
                               "in remote-storage/)",
                    "customers": "hot key cust-vip, null keys, 3 -> 6 partitions (kafka-topics --alter): keys split",
                    "group billing": "read all of orders (lag 0)",
                    "group audit-archiver": "committed offset 15 on audit-log, below its log start",
                    f"group {legacy[0]}": f"committed on {legacy[1]}, deleted while the group's coordinator was down"},
    }, indent=1) + "\n")
    (root / "demo-audit.yaml").write_text(DEMO_CONFIG)
    OUT.parent.mkdir(parents=True, exist_ok=True)

    def strip_lock(info: tarfile.TarInfo):
        return None if info.name.endswith(".lock") else info

    with tarfile.open(OUT, "w:gz", compresslevel=9) as tar:
        tar.add(root, arcname="demo-cluster", filter=strip_lock)
    return OUT


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kla-demo-") as tmp:
        out = build(Path(tmp))
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
