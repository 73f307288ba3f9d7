"""Replay prediction equals the broker: for hundreds of target times per scenario, the offset
``auditor.replay`` predicts from the files equals what a real Kafka 4.2 broker answers to
ListOffsets (``offsets_for_times``), -1 answers included.

Scenarios (one broker, each its own topic): record-time rolled segments of every codec with
multi-record batches, out-of-order and far-future timestamps; a LogAppendTime topic; committed
and aborted transactions (control batches); a retention gap the broker made by really deleting
old segments. The legacy (v0) lookup no longer exists on 4.x brokers: it is proven against a real
Kafka 3.9.1 broker's ListOffsets v0 answers in tests/test_legacy_lookup_v0.py.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

# tier (tests/harness/tiers.py): test_comparison_totals reads what the broker tests of this module compared
pytestmark = pytest.mark.live
from confluent_kafka import Consumer, TopicPartition

from auditor import replay
from auditor.formats.log_reader import LogReader
from auditor.scan import scan_log_dirs
from harness.groups import wait_segments_below_log_start_deleted
from harness.kafka import ROLL_TOPIC_CONFIG, wait_until

DAY = 86_400_000
COMPARED: dict[str, int] = {}
MIN_TARGETS = 200


@pytest.fixture(scope="module")
def cluster(kafka_cluster_factory):
    return kafka_cluster_factory(brokers=1, broker_config={
        "log.retention.check.interval.ms": "1000",
        "log.segment.delete.delay.ms": "1000",
    })


def _all_records(partition_dir: Path) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record on disk, read with our own reader."""
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        reader = LogReader(log)
        try:
            for batch in reader.batches(0):
                out.extend((r.offset, r.timestamp_ms) for r in reader.records(batch))
        finally:
            reader.close()
    return out


def _targets(records: list[tuple[int, int]], seed: int, as_of_ms: int) -> list[int]:
    stamps = sorted({ts for _, ts in records if ts >= 0})
    lo, hi = stamps[0], stamps[-1]
    targets = {0, lo - DAY, lo - 1, lo, hi, hi + 1, hi + DAY, as_of_ms, as_of_ms + 365 * DAY}
    for a, b in zip(stamps, stamps[1:]):
        targets.update((a - 1, a, a + 1, (a + b) // 2))
    rng = random.Random(seed)
    while len(targets) < MIN_TARGETS + 20:
        targets.add(rng.randint(lo - 1000, hi + 1000))
    ordered = sorted(targets)
    if len(ordered) > 400:  # keep every kind, thin the dense middle
        keep = set(ordered[:50] + ordered[-50:])
        keep.update(rng.sample(ordered, 300))
        ordered = sorted(keep)
    return ordered


def _broker_answers(bootstrap: str, topic: str, partition: int, targets: list[int]) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"replay-oracle-{topic}",
                         "isolation.level": "read_uncommitted", "enable.auto.commit": False})
    try:
        answers = []
        for t in targets:
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, partition, t)], timeout=60)
            assert tp.error is None, tp.error
            answers.append(tp.offset if tp.offset >= 0 else -1)
        return answers
    finally:
        consumer.close()


def _compare(cluster, topic: str, partition: int = 0, seed: int = 1) -> dict:
    pdir = cluster.partition_dir(topic, partition)
    log_dir = pdir.parent
    result = scan_log_dirs([log_dir], "headers")
    rows = [r for r in result.segments if r["topic"] == topic and r["partition"] == partition]
    prow = next(p for p in result.partitions if p["topic"] == topic and p["partition"] == partition)
    views = replay.segment_views(rows)
    records = _all_records(pdir)
    now = int(time.time() * 1000)
    targets = _targets(records, seed, now)
    broker = _broker_answers(cluster.bootstrap_servers, topic, partition, targets)
    mismatches = []
    minus_ones = 0
    for target, answer in zip(targets, broker):
        pred = replay.predict(views, target, log_start_offset=prow["log_start_offset"],
                              log_end_offset=prow["log_end_offset"], high_watermark=prow["high_watermark"],
                              as_of_ms=now)
        mine = pred.modern.offset if pred.modern.offset is not None else -1
        minus_ones += answer == -1
        if mine != answer:
            mismatches.append((target, mine, answer, pred.modern.reason))
        # the rows-only answer names the segment the exact answer is in, and bounds it
        rough = replay.predict(views, target, log_start_offset=prow["log_start_offset"],
                               log_end_offset=prow["log_end_offset"], high_watermark=None, as_of_ms=now,
                               read_files=False).modern
        if answer != -1 and rough.offset is not None:
            assert rough.offset <= answer <= rough.upper_bound_offset, (target, rough, answer)
    assert not mismatches, f"{topic}: {len(mismatches)} of {len(targets)} predictions differ from the broker: {mismatches[:10]}"
    assert len(targets) >= MIN_TARGETS
    COMPARED[topic] = len(targets)
    return {"targets": len(targets), "minus_ones": minus_ones, "segments": len(views), "records": len(records)}


def test_rolled_segments_every_codec_out_of_order_and_future(cluster):
    topic = "replay-mixed"
    cluster.create_topic(topic, config=ROLL_TOPIC_CONFIG)
    step = 2 * 60_000 + 1
    t0 = int(time.time() * 1000) - 40 * step
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for g in range(15):
        base = t0 + g * step
        recs = [(f"k{g}-{i}", f"value-{g}-{i}" * 5, base + 100 * i) for i in range(12)]
        if g == 6:  # out of order inside a batch: steps back in time
            recs[5] = (recs[5][0], recs[5][1], base - 30_000)
            recs[9] = (recs[9][0], recs[9][1], base - 45_000)
        if g == 9:  # one record stamped a month in the future
            recs[3] = (recs[3][0], recs[3][1], base + 30 * DAY)
        cluster.produce(topic, recs, compression=codecs[g % len(codecs)], partition=0, linger_ms=50)
    facts = _compare(cluster, topic, seed=11)
    assert facts["segments"] >= 8 and facts["minus_ones"] > 0


def test_log_append_time_topic(cluster):
    topic = "replay-lat"
    cluster.create_topic(topic, config={"message.timestamp.type": "LogAppendTime"})
    for g in range(12):
        cluster.produce(topic, [(f"k{g}-{i}", "v" * 50, 1_000 + i) for i in range(8)],
                        compression=["none", "lz4", "zstd"][g % 3], partition=0, linger_ms=20)
        time.sleep(0.02)
    facts = _compare(cluster, topic, seed=12)
    assert facts["records"] == 96


def test_transactions_commit_and_abort(cluster):
    topic = "replay-txn"
    cluster.create_topic(topic, config=ROLL_TOPIC_CONFIG)
    base = int(time.time() * 1000) - 3_600_000
    for g in range(8):
        recs = [(f"k{g}-{i}", "t" * 40, base + g * 10_000 + i * 10) for i in range(6)]
        cluster.transaction(topic, recs, commit=g % 3 != 1, partition=0)
        cluster.produce(topic, [(f"plain{g}", "p", base + g * 10_000 + 500)], partition=0)
    facts = _compare(cluster, topic, seed=13)
    assert facts["records"] > 8 * 7  # data records plus one marker per transaction


def test_retention_gap_made_by_the_broker(cluster):
    topic = "replay-gap"
    cluster.create_topic(topic, config={**ROLL_TOPIC_CONFIG, "retention.ms": str(3 * DAY),
                                         "file.delete.delay.ms": "1000"})
    now = int(time.time() * 1000)
    for days_ago in (10, 9, 8, 7, 6, 5, 4, 2, 1):
        t = now - days_ago * DAY
        cluster.produce(topic, [(f"d{days_ago}-{i}", "g" * 80, t + i * 1000) for i in range(10)], partition=0)
    cluster.produce(topic, [("recent", "r", now - 60_000)], partition=0)
    # the broker's own log start (ListOffsets earliest); 180 s as make_retention_gap: a retention
    # check every second, but a broker JVM on a loaded machine stalls for tens of seconds
    earliest = wait_until(lambda: (e := cluster.list_offsets(topic, 0, "earliest")[0]) >= 70 and e, 180,
                          f"the broker to delete {topic}'s segments older than 3 days (log start 70 or more)")
    # the broker moves the log start before it renames the segments below it to .deleted: until
    # then the files still hold them (and a scan would predict from them)
    wait_segments_below_log_start_deleted(cluster, topic, 0, earliest)
    facts = _compare(cluster, topic, seed=14)
    # targets before the oldest retained record: the broker answers the first retained offset
    assert facts["segments"] <= 4


def test_comparison_totals(capsys):
    with capsys.disabled():
        print("\nreplay predictions vs broker offsets_for_times: "
              + ", ".join(f"{k}={v}" for k, v in sorted(COMPARED.items()))
              + f", total={sum(COMPARED.values())}")
    assert len(COMPARED) == 4 and all(v >= MIN_TARGETS for v in COMPARED.values())
