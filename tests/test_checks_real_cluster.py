"""The checks, proven on a real Kafka cluster (2 brokers x 2 log dirs, KRaft, 127.0.0.1).

Every condition is made by the broker itself: keyed producing into one hot partition, a real
inter-broker reassignment and a real log-dir move (Kafka's Admin API), CreateTime records
produced days in the past and in the future into a topic whose limits allow them, and a
future-stamped record that keeps the broker's own retention from deleting what follows it.
Thresholds are scaled to seconds through the config, never by faking mtimes or timestamps.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from auditor.engines.spark import aggregates, scan_dataframes
from auditor.scan import scan_log_dirs
from checks.framework.base import AuditContext, Severity
from checks.framework.config import Config
from auditor.live_config import LiveConfigError, fetch_topic_configs
from auditor.engines.local.checks import run_local
from auditor.engines.spark.checks import run_spark
from harness.kafka import free_port, wait_past_newest_write, wait_until
from harness.moves import move_log_dir, reassign, wait_replica_quiet
from harness.spark_session import spark  # noqa: F401

# its fast test, a CLI subprocess: 3 s at load 2 (tests/conftest.py: long files first)
pytestmark = pytest.mark.schedule_first(cpu_s=3)

DAY = 86_400_000
HOUR = 3_600_000
TEST_CONFIG = {
    "checks": {
        "mtime.reset": {"min_record_span_ms": 4_000, "replica_skew_ms": 3_000, "packed_ratio": 0.2},
        "timestamps.bounds": {"before_max_ms": DAY, "after_max_ms": HOUR},
        "skew.partition_size": {"min_topic_bytes": 100_000},
    }
}


@pytest.fixture(scope="module")
def cluster(kafka_cluster_factory):
    kc = kafka_cluster_factory(brokers=2, log_dirs_per_broker=2,
                               broker_config={"log.retention.check.interval.ms": "1000"})
    yield kc
    kc.stop()   # not at the session's end: its brokers would load the machine under every later module


def all_log_dirs(cluster) -> list[Path]:
    return [d for node in sorted(cluster.nodes) for d in cluster.log_dirs(node)]


def context(**kw) -> AuditContext:
    return AuditContext(as_of_ms=int(time.time() * 1000), config=Config(TEST_CONFIG, source="test"), **kw)


def bad(findings, code=None):
    return [f for f in findings if f.severity not in (Severity.PASS,) and (code is None or f.code == code)]


def produce_spaced_groups(cluster, topic: str, groups: int, gap_s: float, partition: int = 0) -> None:
    """Record-time rolls with real-time spacing: timestamps (set by the client) follow the clock,
    so segment mtimes and record timestamps agree, as on a healthy broker."""
    for g in range(groups):
        cluster.produce(topic, [(f"g{g}-{i}", os.urandom(200).hex(), None) for i in range(20)], partition=partition)
        wait_past_newest_write(cluster.partition_dirs(topic, partition).values(), int(gap_s * 1000),
                               f"{topic}-{partition} group {g}")


@pytest.mark.live
def test_skew_from_a_hot_key_on_spark_and_in_process(cluster, spark):  # noqa: F811
    topic = "skewed"
    cluster.create_topic(topic, replica_assignment=[[1], [2], [1], [2]])
    hot = cluster.produce(topic, [("the-hot-key", os.urandom(500).hex(), None) for _ in range(1500)])
    cold = cluster.produce(topic, [(f"key-{i}", os.urandom(500).hex(), None) for i in range(300)])
    hot_partition = Counter(d.partition for d in hot).most_common(1)[0][0]
    assert Counter(d.partition for d in cold)[hot_partition] < 200

    # the truth, from the files themselves
    sizes = {}
    for p in range(4):
        pdir = cluster.partition_dir(topic, p)
        sizes[p] = sum(f.stat().st_size for f in pdir.glob("*.log"))
    others = sorted(v for k, v in sizes.items())
    median = (others[1] + others[2]) / 2
    truth_ratio = sizes[hot_partition] / median

    ctx = context()
    scan = scan_dataframes(spark, all_log_dirs(cluster), "headers")
    aggs = aggregates(scan.segments, scan.partitions)
    on_spark = run_spark(scan.segments, scan.partitions, aggs, ctx)
    skew = [f for f in bad(on_spark, "KLA001") if f.topic == topic]
    assert len(skew) == 1, skew
    finding = skew[0]
    assert finding.partition == hot_partition
    assert [e["partition"] for e in finding.evidence] == [hot_partition]  # the cold ones are not flagged
    assert finding.evidence[0]["ratio_to_median_bytes"] == pytest.approx(truth_ratio, rel=1e-3)
    assert finding.severity == (Severity.FAIL if truth_ratio >= 10 else Severity.WARN)

    # the local engine gives the same findings on the same data
    rows = scan_log_dirs(all_log_dirs(cluster), "headers")
    stats = {k: v.toPandas() for k, v in aggs.items()}
    local = run_local(rows.segments, rows.partitions, ctx, stats=stats)

    def key(f):
        return (f.code, f.severity, f.topic, f.partition, f.broker_id, f.log_dir, f.base_offset, f.message)

    assert sorted(map(key, bad(local))) == sorted(map(key, bad(on_spark)))
    scan.unpersist()


@pytest.mark.live
def test_reassignment_detected_as_mtime_reset_naming_both_replicas(cluster):
    topic = "moved"
    cluster.create_topic(topic, replica_assignment=[[1]], config={"segment.ms": "2000", "segment.jitter.ms": "0"})
    produce_spaced_groups(cluster, topic, groups=5, gap_s=2.3)
    wait_replica_quiet(cluster, topic, 0, quiet_s=5)   # the move's mtimes clearly after the old ones
    reassign(cluster, topic, 0, [1, 2])
    dirs = cluster.partition_dirs(topic, 0)
    assert set(dirs) == {1, 2}
    result = scan_log_dirs(all_log_dirs(cluster), "headers")
    findings = run_local(result.segments, result.partitions, context(), names=["mtime.reset"])
    resets = [f for f in bad(findings) if f.topic == topic]
    assert len(resets) == 1, [f.message for f in bad(findings)]
    f = resets[0]
    assert f.broker_id == 2 and f.log_dir == str(dirs[2].parent)
    assert f.message.startswith("reassigned to broker 2: the replica on broker 2")
    assert f"broker 1's ({dirs[1].parent})" in f.message
    pair = f.evidence[0]
    assert pair["replica_a"].startswith("broker 1 ") and pair["replica_b"].startswith("broker 2 ")


@pytest.mark.live
def test_log_dir_move_detected_as_mtime_reset(cluster):
    topic = "dirmove"
    cluster.create_topic(topic, replica_assignment=[[1, 2]], config={"segment.ms": "2000", "segment.jitter.ms": "0"})
    produce_spaced_groups(cluster, topic, groups=5, gap_s=2.3)
    wait_replica_quiet(cluster, topic, 0, quiet_s=5)   # the move's mtimes clearly after the old ones
    before = cluster.partition_dirs(topic, 0)[1].parent
    target = next(d for d in cluster.log_dirs(1) if d != before)
    move_log_dir(cluster, topic, 0, 1, target)
    assert cluster.partition_dirs(topic, 0)[1].parent == target
    result = scan_log_dirs(all_log_dirs(cluster), "headers")
    findings = run_local(result.segments, result.partitions, context(), names=["mtime.reset"])
    resets = [f for f in bad(findings) if f.topic == topic]
    assert len(resets) == 1, [f.message for f in bad(findings)]
    f = resets[0]
    assert f.broker_id == 1 and f.log_dir == str(target)
    assert f.message.startswith(f"moved between log dirs of broker 1 (from {before})"), f.message
    assert "broker 2's" in f.message  # compared with the untouched replica


@pytest.mark.live
def test_out_of_bound_timestamps_flagged_and_nothing_else(cluster):
    topic = "stamps"
    # segment.ms of a minute: the future-stamped batch rolls a new segment (record-time roll), so the
    # past-stamped one lands in a segment whose predecessor's mtime bounds its append time
    cluster.create_topic(topic, replica_assignment=[[2]], config={"segment.ms": "60000", "segment.jitter.ms": "0"})
    now = int(time.time() * 1000)
    cluster.produce(topic, [(f"n{i}", "normal", None) for i in range(20)], partition=0)
    # the normal segment's mtime clearly before the next appends (its own last write, as measured)
    wait_past_newest_write(cluster.partition_dirs(topic, 0).values(), 1500, f"{topic}-0's normal records")
    (future,) = cluster.produce(topic, [("future", "from a clock 5 days ahead", now + 5 * DAY)], partition=0)
    (past,) = cluster.produce(topic, [("past", "replayed from 5 days ago", now - 5 * DAY)], partition=0)
    cluster.produce(topic, [(f"m{i}", "normal", None) for i in range(20)], partition=0)
    result = scan_log_dirs(all_log_dirs(cluster), "deep")
    findings = run_local(result.segments, result.partitions, context(), names=["timestamps.bounds"])
    flagged = bad(findings)
    assert [f.topic for f in flagged] == [topic], [f.message for f in flagged]
    sides = {e["side"]: e for e in flagged[0].evidence}
    assert sides["future"]["offset"] == future.offset and sides["future"]["timestamp_ms"] == now + 5 * DAY
    assert sides["past"]["offset"] == past.offset and sides["past"]["timestamp_ms"] == now - 5 * DAY
    assert flagged[0].thresholds["mtimes_trusted"] is True


@pytest.mark.live
def test_future_timestamp_blocks_the_brokers_own_retention(cluster):
    topic = "blocked"
    cluster.create_topic(topic, replica_assignment=[[1]], config={
        "retention.ms": str(HOUR), "segment.bytes": str(1 << 20), "segment.ms": "60000", "segment.jitter.ms": "0",
        "file.delete.delay.ms": "500"})
    now = int(time.time() * 1000)
    old = now - 2 * DAY
    cluster.produce(topic, [(f"a{i}", "old", old + i) for i in range(20)], partition=0)
    (future,) = cluster.produce(topic, [("future", "stamped a day ahead", now + DAY)], partition=0)
    # old-stamped data after it, enough to roll two more segments by size
    for chunk in range(3):
        cluster.produce(topic, [(f"c{chunk}-{i}", os.urandom(5000).hex(), old + 600_000 + i) for i in range(120)],
                        partition=0)
    cluster.produce(topic, [("recent", "now", None)], partition=0)

    # a retention check every second, but a loaded machine stalls
    wait_until(lambda: cluster.list_offsets(topic, 0, "earliest")[0] >= 20, 180,
               f"the broker to delete the first (old) segment of {topic!r}")
    assert cluster.list_offsets(topic, 0, "earliest")[0] == 20
    # Proof that retention ran again after that deletion and still held the rest: a probe topic on
    # the same broker, with two expired segments made only now; once the broker deleted them, a
    # later retention pass (every log of the broker, 'blocked' included) has happened.
    probe = "blocked-probe"
    cluster.create_topic(probe, replica_assignment=[[1]], config={
        "retention.ms": str(HOUR), "segment.ms": "60000", "segment.jitter.ms": "0", "file.delete.delay.ms": "500"})
    cluster.produce(probe, [("p0", "old", old)], partition=0)
    cluster.produce(probe, [("p1", "old, a record-time roll later", old + 120_000)], partition=0)
    cluster.produce(probe, [("p2", "now: rolls again, stays", None)], partition=0)
    wait_until(lambda: cluster.list_offsets(probe, 0, "earliest")[0] >= 2, 180,
               f"the broker's retention to delete {probe!r}'s two expired segments")
    assert cluster.list_offsets(topic, 0, "earliest")[0] == 20, "retention deleted past the future-stamped segment"

    pdir = cluster.partition_dir(topic, 0)
    logs = sorted(int(p.name.split(".")[0]) for p in pdir.glob("*.log"))
    assert logs[0] == future.offset and len(logs) >= 3, logs  # the future segment and everything after it stay

    live = fetch_topic_configs(cluster.bootstrap_servers, [topic])
    assert live[topic]["retention.ms"] == str(HOUR)
    result = scan_log_dirs(cluster.log_dirs(1), "headers")
    ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=Config(None), topic_configs=live)
    findings = [f for f in run_local(result.segments, result.partitions, ctx,
                                     names=["retention.future_timestamp", "retention.overdue"]) if f.topic == topic]
    blocked = bad(findings, "KLA031")
    assert len(blocked) == 1 and not bad(findings, "KLA040"), [f.message for f in findings]
    ev = blocked[0].evidence[0]
    assert blocked[0].base_offset == future.offset and ev["largest_timestamp_ms"] == now + DAY
    assert ev["deletable_at_ms"] == now + DAY + HOUR
    assert ev["held_segments"] and set(ev["held_segments"]) <= set(logs[1:])
    assert ev["held_bytes"] == sum((pdir / f"{b:020d}.log").stat().st_size for b in ev["held_segments"])


@pytest.mark.unit
def test_live_config_errors_name_the_server():
    port = free_port()
    with pytest.raises(LiveConfigError, match=f"127.0.0.1:{port}: cannot read topic configs"):
        fetch_topic_configs(f"127.0.0.1:{port}", ["x"], timeout_s=0.5)  # nothing listens: any timeout gives the error
