"""Conformance data produced through a real client into a real broker.

``populate_conformance_data(cluster)`` fills a running ``KafkaCluster`` with topics that
cover what the auditor must read: every codec with mixed batch sizes, committed and aborted
transactions (control batches, ``.txnindex``), a compacted topic the cleaner has really
cleaned (tombstones kept with a delete horizon), a LogAppendTime topic, a partition with
many segments, past/future timestamps, and (because the broker is running) active segments
with preallocated, zero-tailed indexes.  Returns what it made so tests can compare.
"""

from __future__ import annotations

import time
from typing import Any

from .kafka import KafkaCluster, KafkaHarnessError

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DAY_MS = 86_400_000
#: Topic config keeping the scenarios' old records: their timestamps are 30 days old, and with the
#: default retention.ms (7 days) the broker's retention check (first run 30 s after the broker
#: starts, then every 5 min) deletes them while a test still reads them (seen here at load 14:
#: a segment's .timeindex gone in the middle of a DumpLogSegments run).
KEEP = {"retention.ms": "-1"}


def _records(prefix: str, n: int, t0: int, step_ms: int = 1000, value_size: int = 120) -> list[tuple]:
    pad = "x" * value_size
    return [(f"{prefix}-k{i % 17}", f"{prefix}-{i}-{pad}", t0 + i * step_ms) for i in range(n)]


def read_cleaner_checkpoint(cluster: KafkaCluster, topic: str, partition: int = 0) -> int | None:
    """The cleaner's firstDirtyOffset for topic-partition from ``cleaner-offset-checkpoint``."""
    for node_id in cluster.nodes:
        for d in cluster.log_dirs(node_id):
            f = d / "cleaner-offset-checkpoint"
            if not f.exists():
                continue
            lines = f.read_text().split("\n")
            for line in lines[2:]:
                parts = line.split()
                if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition:
                    return int(parts[2])
    return None


def populate_conformance_data(cluster: KafkaCluster, prefix: str = "conf",
                              cleaner_timeout_s: float = 120.0) -> dict[str, Any]:
    """Create and fill the conformance topics.  Returns::

        {"topics": {name: {"partitions": n, "records": data records written per partition
                           (list), "kind": ..., ...}},
         "t0_ms": base timestamp used, "elapsed_s": ...}
    """
    start = time.monotonic()
    now = int(time.time() * 1000)
    t0 = now - 30 * DAY_MS  # well in the past: CreateTime data is "old"
    topics: dict[str, dict[str, Any]] = {}

    # 1. Every codec, mixed batch sizes (1, 7 and up to 200 records per batch), small
    #    index.interval.bytes so the offset/time indexes get entries.
    for codec in CODECS:
        name = f"{prefix}-codec-{codec}"
        cluster.create_topic(name, partitions=1, config={**KEEP, "index.interval.bytes": "512"})
        n = 0
        for bn, count in ((1, 5), (7, 21), (200, 400)):
            recs = _records(f"{codec}{bn}", count, t0 + n * 1000)
            cluster.produce(name, recs, compression=codec, partition=0, linger_ms=50,
                            batch_num_messages=bn)
            n += count
        topics[name] = {"kind": "codec", "codec": codec, "partitions": 1, "records": [n]}

    # 2. Transactions: committed, aborted, committed -> 3 data batches + 3 control batches;
    #    the aborted one adds one .txnindex entry.
    name = f"{prefix}-txn"
    cluster.create_topic(name, partitions=1, config=KEEP)
    committed = aborted = 0
    for i, (n, commit) in enumerate(((5, True), (3, False), (4, True))):
        cluster.transaction(name, _records(f"tx{i}", n, t0 + i * 60_000), commit=commit,
                            transactional_id=f"{prefix}-txid", partition=0, compression="lz4")
        if commit:
            committed += n
        else:
            aborted += n
    topics[name] = {"kind": "transactions", "partitions": 1, "records": [committed + aborted],
                    "committed": committed, "aborted": aborted, "control_batches": 3,
                    "aborted_txns": 1, "end_offset": committed + aborted + 3}

    # 3. LogAppendTime: the broker stamps maxTimestamp with its clock.
    name = f"{prefix}-logappendtime"
    cluster.create_topic(name, partitions=1, config={**KEEP, "message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    cluster.produce(name, _records("lat", 30, t0), compression="gzip", partition=0,
                    batch_num_messages=10)
    cluster.produce(name, _records("lat2", 5, t0), compression="none", partition=0)
    after = int(time.time() * 1000)
    topics[name] = {"kind": "logappendtime", "partitions": 1, "records": [35],
                    "append_window_ms": (before, after)}

    # 4. Many segments: record-time roll (segment.ms) with spaced timestamps.
    name = f"{prefix}-many-segments"
    seg_ms = 60_000
    cluster.create_topic(name, partitions=2, config={**KEEP, "segment.ms": str(seg_ms),
                                                     "segment.jitter.ms": "0"})
    n_seg = 12
    firsts = [cluster.roll_segments(name, p, segments=n_seg, records_per_segment=6, segment_ms=seg_ms,
                                    base_timestamp_ms=t0 + p * 1000, compression="snappy")
              for p in (0, 1)]
    topics[name] = {"kind": "many-segments", "partitions": 2, "records": [n_seg * 6] * 2,
                    "segments": n_seg, "segment_first_timestamps": firsts}

    # 5. Odd timestamps: far past, future (+1 year), out of order, broker-assigned (None).
    name = f"{prefix}-timestamps"
    cluster.create_topic(name, partitions=1, config=KEEP)
    ts = [t0, t0 + 5000, now + 365 * DAY_MS, t0 + 1000, None, 0]
    cluster.produce(name, [(f"k{i}", f"v{i}", t) for i, t in enumerate(ts)], partition=0,
                    batch_num_messages=1)
    topics[name] = {"kind": "timestamps", "partitions": 1, "records": [len(ts)], "timestamps": ts}

    # 6. Compacted: duplicate keys and tombstones across several (record-time rolled)
    #    segments; wait until the cleaner has really cleaned.
    name = f"{prefix}-compacted"
    cluster.create_topic(name, partitions=1, config={
        "cleanup.policy": "compact", "segment.ms": "1000", "segment.jitter.ms": "0",
        "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": "1000"})
    written = 0
    keys = [f"key-{i}" for i in range(10)]
    for s in range(5):
        base = t0 + s * 5000
        recs: list[Any] = [(k, f"v{s}-{k}", base + j) for j, k in enumerate(keys)]
        if s == 4:
            # Tombstones as the latest value of two keys: the cleaner keeps them (until
            # delete.retention.ms) and stamps their batch with a delete horizon (KIP-534).
            recs += [(keys[0], None, base + 50), (keys[1], None, base + 51)]
        cluster.produce(name, recs, partition=0, linger_ms=100)
        written += len(recs)
    # One more record far later, so the last data group is in a closed segment: the active
    # segment starts at this record (offset written - 1).
    cluster.produce(name, [("key-last", "v", t0 + 100_000)], partition=0)
    written += 1
    # The cleaner may already have cleaned the first segments while the later groups were being
    # written (max.compaction.lag.ms=1000): wait until it has cleaned everything up to the active
    # segment, or a test reads a half-cleaned log while the cleaner rewrites it.
    deadline = time.monotonic() + cleaner_timeout_s
    checkpoint = None
    while time.monotonic() < deadline:
        checkpoint = read_cleaner_checkpoint(cluster, name)
        if checkpoint is not None and checkpoint >= written - 1:
            break
        time.sleep(0.25)
    else:
        raise KafkaHarnessError(f"the log cleaner did not clean {name} up to offset {written - 1} within "
                                f"{cleaner_timeout_s}s (cleaner-offset-checkpoint: {checkpoint})")
    topics[name] = {"kind": "compacted", "partitions": 1, "records": [written],
                    "keys": len(keys) + 1, "tombstones": 2, "cleaner_checkpoint": checkpoint,
                    # after cleaning: the latest value of each key (2 of them tombstones)
                    "records_after_cleaning": len(keys) + 1}

    return {"topics": topics, "t0_ms": t0, "as_of_ms": now, "prefix": prefix,
            "elapsed_s": time.monotonic() - start}


def make_retention_gap(cluster: KafkaCluster, topic: str = "history", days: int = 10,
                       records_per_day: int = 10) -> int:
    """A topic with one record-time segment per day for ``days`` days back, and
    ``retention.ms`` of 3.5 days: the broker itself deletes the 7 oldest days (the cluster needs
    ``log.retention.check.interval.ms`` of about a second). Returns the "now" the timestamps
    are relative to; the log start offset is then ``7 * records_per_day``."""
    import time

    from harness.kafka import ROLL_TOPIC_CONFIG

    day = 86_400_000
    cluster.create_topic(topic, config={**ROLL_TOPIC_CONFIG, "retention.ms": str(int(3.5 * day)),
                                        "file.delete.delay.ms": "500"})
    now = int(time.time() * 1000)
    for days_ago in range(days, 0, -1):
        cluster.produce(topic, [(f"d{days_ago}-{i}", "x" * 50, now - days_ago * day + i) for i in range(records_per_day)],
                        partition=0)
    expected = (days - 3) * records_per_day
    deadline = time.monotonic() + 180
    while cluster.list_offsets(topic, 0, "earliest")[0] < expected and time.monotonic() < deadline:
        time.sleep(0.5)
    if cluster.list_offsets(topic, 0, "earliest")[0] != expected:
        raise RuntimeError(f"{topic}: the broker did not delete the old segments within 180 s")
    return now
