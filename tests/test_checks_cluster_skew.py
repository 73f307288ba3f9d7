"""Partition and broker skew (KLA001, KLA002) and the GX suite, proven on a real Kafka cluster.

Two KRaft brokers on 127.0.0.1. Topic ``clicks`` has 4 partitions with one replica each, two
per broker; a keyed producer sends most records under one hot key (librdkafka's default
partitioner puts them all in one partition) and the rest under 400 distinct keys. Topic
``even`` (2 partitions, 2 replicas) is produced evenly. The brokers are then stopped so the
files are quiet, and everything the test expects is computed from the files themselves
(``os.stat`` of the ``.log`` files) and from the broker's delivery reports, never from the
tool's own tables.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from auditor.engines.spark import aggregates, scan_dataframes
from auditor.scan import scan_log_dirs
from auditor.schema import SEGMENT_COLUMNS, SEGMENT_KEY, SEGMENT_SCHEMA, empty_row, spark_schema, to_table
from checks.framework.base import AuditContext, Severity
from checks.framework.config import Config
from auditor.engines.spark.expectations import run_expectations
from auditor.engines.local.checks import run_local
from auditor.engines.spark.checks import run_spark
from checks.skew.broker_disk import SkewBrokerDisk
from checks.skew.partition_size import SkewPartitionSize
from harness.spark_session import spark  # noqa: F401

pytestmark = pytest.mark.live

TOPIC = "clicks"
EVEN = "even"
PARTITIONS = 4
HOT_RECORDS = 3000
COLD_KEYS = 400
DEPTH = "deep"  # every record read: message counts exact, the deep columns filled for GX


@pytest.fixture(scope="module")
def skewed(kafka_cluster_factory):
    # quiet files must be cleanly closed ones: give the controlled shutdown time on a loaded machine
    kc = kafka_cluster_factory(brokers=2, stop_timeout_s=120)
    kc.create_topic(TOPIC, replica_assignment=[[1], [2], [1], [2]])
    kc.create_topic(EVEN, replica_assignment=[[1, 2], [2, 1]])
    hot = kc.produce(TOPIC, [("the-hot-key", os.urandom(300).hex(), None) for _ in range(HOT_RECORDS)])
    cold = kc.produce(TOPIC, [(f"user-{i}", os.urandom(300).hex(), None) for i in range(COLD_KEYS)])
    kc.produce(EVEN, [dict(key=f"e{i}", value=os.urandom(300).hex(), timestamp=None, partition=i % 2)
                      for i in range(400)])
    hot_partitions = {d.partition for d in hot}
    assert len(hot_partitions) == 1, f"one key, one partition: {hot_partitions}"
    messages = Counter(d.partition for d in hot + cold)
    assert len(messages) == PARTITIONS, f"the cold keys should reach every partition: {messages}"
    kc.stop(require_clean=True)  # quiet files: what the test measures is what the tool reads
    log_dirs = {node: kc.log_dirs(node) for node in sorted(kc.nodes)}
    return {"cluster": kc, "hot": hot_partitions.pop(), "messages": dict(messages), "log_dirs": log_dirs,
            "all_dirs": [d for dirs in log_dirs.values() for d in dirs]}


@pytest.fixture(scope="module")
def scanned(skewed, spark):  # noqa: F811
    scan = scan_dataframes(spark, skewed["all_dirs"], DEPTH)
    aggs = aggregates(scan.segments, scan.partitions)
    yield scan, aggs
    for df in aggs.values():
        df.unpersist()
    scan.unpersist()


def context() -> AuditContext:
    return AuditContext(as_of_ms=int(time.time() * 1000), config=Config(None))


def not_pass(findings):
    return [f for f in findings if f.severity != Severity.PASS]


def log_bytes(directory: Path) -> int:
    """Bytes of the live .log files of one partition directory (``*.log.deleted`` etc. excluded)."""
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def partition_bytes_on_disk(log_dirs, topic: str) -> dict[int, int]:
    """Per partition, the largest replica's .log bytes, straight from the file system."""
    out: dict[int, int] = {}
    for log_dir in log_dirs:
        for d in log_dir.glob(f"{topic}-*"):
            partition = int(d.name.rsplit("-", 1)[1])
            out[partition] = max(out.get(partition, 0), log_bytes(d))
    return out


def test_hot_partition_named_with_the_ratio_measured_on_disk(skewed, scanned):
    scan, aggs = scanned
    findings = run_spark(scan.segments, scan.partitions, aggs, context())
    opts = Config(None).options(SkewPartitionSize)

    sizes = partition_bytes_on_disk(skewed["all_dirs"], TOPIC)
    assert sorted(sizes) == list(range(PARTITIONS))
    hot = skewed["hot"]
    median = statistics.median(sizes.values())
    total = sum(sizes.values())
    ratio = sizes[hot] / median
    msgs = skewed["messages"]
    msg_ratio = msgs[hot] / statistics.median(msgs.values())
    cv = statistics.pstdev(sizes.values()) / (total / PARTITIONS)
    assert total >= opts["min_topic_bytes"], "the topic must be big enough to be judged"
    assert ratio >= opts["warn_ratio"], f"the producer should have made a hot partition: {sizes}"
    cold_ratios = {p: max(s / median, msgs[p] / statistics.median(msgs.values())) for p, s in sizes.items() if p != hot}
    assert all(r < opts["warn_ratio"] for r in cold_ratios.values()), cold_ratios

    skew = [f for f in not_pass(findings) if f.code == "KLA001"]
    assert [(f.topic, f.partition) for f in skew] == [(TOPIC, hot)], [f.message for f in skew]
    f = skew[0]
    worst = max(ratio, msg_ratio)
    assert f.severity == (Severity.FAIL if worst >= opts["fail_ratio"] else Severity.WARN)
    assert [e["partition"] for e in f.evidence] == [hot], "the cold partitions are not flagged"
    ev = f.evidence[0]
    assert ev["size_bytes"] == sizes[hot]
    assert ev["messages"] == msgs[hot]
    assert ev["ratio_to_median_bytes"] == pytest.approx(ratio, abs=1e-3)
    assert ev["ratio_to_median_messages"] == pytest.approx(msg_ratio, abs=1e-3)
    assert ev["share_of_topic_bytes"] == pytest.approx(sizes[hot] / total, abs=1e-4)
    assert f.thresholds["topic_bytes"] == total
    assert f.thresholds["median_partition_bytes"] == median
    assert f.thresholds["coefficient_of_variation"] == pytest.approx(cv, abs=1e-4)
    assert ev["topic_coefficient_of_variation"] == pytest.approx(cv, abs=1e-4)
    assert ev["median_partition_bytes"] == median and ev["topic_bytes"] == total
    assert f"{ratio:.1f}x the median" in f.message and f"{sizes[hot] / total:.0%}" in f.message
    assert f.broker_id == (1 if hot in (0, 2) else 2), "replica_assignment puts partitions 0 and 2 on broker 1"


def test_broker_and_log_dir_skew_match_the_disk(skewed, scanned):
    scan, aggs = scanned
    findings = run_spark(scan.segments, scan.partitions, aggs, context(), names=[SkewBrokerDisk.name])
    opts = Config(None).options(SkewBrokerDisk)
    # Disk bytes per broker / log dir: every partition directory, metadata log included.
    per_dir = {(node, str(d)): sum(log_bytes(p) for p in d.iterdir() if p.is_dir())
               for node, dirs in skewed["log_dirs"].items() for d in dirs}
    per_broker = Counter()
    for (node, _), size in per_dir.items():
        per_broker[node] += size

    def expected(sizes: dict) -> dict:
        mean = sum(sizes.values()) / len(sizes)
        out = {}
        for key, size in sizes.items():
            r = size / mean
            if size >= opts["min_bytes"] and r >= opts["warn_ratio"]:
                out[key] = (Severity.FAIL if r >= opts["fail_ratio"] else Severity.WARN, round(r, 3))
        return out

    want_broker = expected(dict(per_broker))
    want_dir = expected(per_dir)
    assert want_broker, f"the hot partition should make its broker heavy: {dict(per_broker)}"
    got_broker = {f.broker_id: f for f in not_pass(findings) if f.log_dir is None}
    got_dir = {(f.broker_id, f.log_dir): f for f in not_pass(findings) if f.log_dir is not None}
    assert {k: f.severity for k, f in got_broker.items()} == {k: v[0] for k, v in want_broker.items()}
    assert {k: f.severity for k, f in got_dir.items()} == {k: v[0] for k, v in want_dir.items()}
    for node, f in got_broker.items():
        mine = next(e for e in f.evidence if e["broker_id"] == node)
        assert mine["size_bytes"] == per_broker[node]
        assert mine["ratio_to_mean"] == pytest.approx(want_broker[node][1], abs=1e-3)
    hot_broker = 1 if skewed["hot"] in (0, 2) else 2
    assert set(got_broker) == {hot_broker}


def pandas_partition_stats(segments: list[dict], partitions: list[dict]) -> pd.DataFrame:
    """``replica_stats`` built in-process from scan rows, as ``auditor.engines.spark.aggregates`` documents
    it: one row per partition dir; live segments (no file state, a .log) count; message_count is
    None as soon as one live segment's count is unknown."""
    by_dir: dict[tuple, list[dict]] = {}
    for s in segments:
        by_dir.setdefault((s["broker_id"], s["log_dir"], s["dir_name"]), []).append(s)
    rows = []
    for p in partitions:
        live = [s for s in by_dir.get((p["broker_id"], p["log_dir"], p["dir_name"]), [])
                if s["file_state"] is None and s["log_size_bytes"] is not None]
        counts = [s["record_count"] for s in live]
        rows.append({"broker_id": p["broker_id"], "log_dir": p["log_dir"], "topic": p["topic"],
                     "partition": p["partition"], "dir_kind": p["dir_kind"], "dir_name": p["dir_name"],
                     "segment_count": len(live), "size_bytes": sum(s["log_size_bytes"] for s in live),
                     "message_count": None if any(c is None for c in counts) else sum(counts)})
    return pd.DataFrame(rows)


def test_in_process_engine_gives_the_same_findings(skewed, scanned):
    scan, aggs = scanned
    ctx = context()
    on_spark = run_spark(scan.segments, scan.partitions, aggs, ctx)
    rows = scan_log_dirs(skewed["all_dirs"], DEPTH)
    stats = pandas_partition_stats(rows.segments, rows.partitions)
    # The hand-built stats agree with the Spark job's on what the skew checks read.
    spark_stats = aggs["replica_stats"].toPandas()
    key = ["broker_id", "log_dir", "dir_name"]
    cols = ["topic", "partition", "dir_kind", "size_bytes", "message_count"]
    mine = {tuple(r[k] for k in key): tuple(r[c] for c in cols) for r in stats.to_dict("records")}
    theirs = {tuple(r[k] for k in key): tuple(None if pd.isna(r[c]) else r[c] for c in cols)
              for r in spark_stats.to_dict("records")}
    assert mine == theirs
    local = run_local(rows.segments, rows.partitions, ctx, stats={"replica_stats": stats})

    def view(f):
        return (f.code, f.severity.name, f.topic, f.partition, f.broker_id, f.log_dir, f.base_offset, f.message,
                f.evidence_count)

    assert Counter(map(view, not_pass(local))) == Counter(map(view, not_pass(on_spark)))
    assert any(f.code == "KLA001" for f in not_pass(local)), "the comparison must include the skew finding"


def test_gx_suite_passes_on_the_real_table(skewed, scanned):
    scan, _ = scanned
    res = run_expectations(scan.segments, context())
    failed = [r for r in res.results if not r["success"]]
    assert res.success, failed
    n_rows = scan.segments.count()
    assert n_rows >= PARTITIONS + 2 * 2, "clicks, even (2 replicas) and the metadata log"
    assert res.element_count == n_rows
    assert [f.severity for f in res.findings] == [Severity.PASS]
    assert f"{n_rows:,} segment rows" in res.findings[0].message
    assert res.gx_version.startswith("1.")


def _planted(base_offset: int, **values) -> dict:
    """A consistent segment row of 10 records at ``base_offset``, then the planted values."""
    row = empty_row(SEGMENT_COLUMNS)
    row.update(broker_id=9, cluster_id="planted", log_dir="/planted", topic="p", partition=0, dir_kind="live",
               dir_name="p-0", depth="deep", is_active=False, log_size_bytes=1000, log_mtime_ms=1_700_000_100_000,
               base_offset=base_offset, first_offset=base_offset, last_offset=base_offset + 9,
               min_timestamp_ms=1_700_000_000_000, max_timestamp_ms=1_700_000_009_000,
               min_timestamp_offset=base_offset, max_timestamp_offset=base_offset + 9, max_backward_jump_ms=0,
               batch_count=1, record_count=10, trailing_bytes=0)
    row.update(values)
    return row


def test_gx_reports_each_violation_planted_beside_real_rows(skewed, scanned, spark):  # noqa: F811
    scan, _ = scanned
    ahead = int(time.time() * 1000) + 30 * 86_400_000
    planted = [
        _planted(0), _planted(0), _planted(0),                                   # one key, three rows
        _planted(100, last_offset=40, max_timestamp_offset=40),                  # last < base, last < first
        _planted(200, min_timestamp_offset=150, max_timestamp_offset=260),       # record offsets outside
        _planted(300, min_timestamp_ms=1_700_000_009_000, max_timestamp_ms=1_700_000_000_000),  # min > max
        _planted(400, log_size_bytes=5 << 30),                                   # > segment.bytes
        _planted(500, max_backward_jump_ms=-5),
        _planted(600, log_mtime_ms=ahead),                                       # a clock set ahead
        _planted(700, dir_kind="sideways", file_state="moved"),
        _planted(800, topic=None, depth="deeper"),
        _planted(900, min_timestamp_ms=-1),                                      # Kafka's sentinel leaked in
    ]
    planted_df = spark.createDataFrame(to_table(planted, SEGMENT_SCHEMA).to_pandas(), spark_schema(SEGMENT_SCHEMA))
    table = scan.segments.unionByName(planted_df)
    total = scan.segments.count() + len(planted)
    res = run_expectations(table, context())
    assert not res.success
    pair = "expect_column_pair_values_a_to_be_greater_than_b"
    between = "expect_column_values_to_be_between"
    failed = {(r["expectation"], tuple(r["columns"] or [r["column"]])): r["unexpected_count"]
              for r in res.results if not r["success"]}
    assert failed == {
        ("expect_compound_columns_to_be_unique", tuple(SEGMENT_KEY)): 3,
        (pair, ("last_offset", "base_offset")): 1,
        (pair, ("last_offset", "first_offset")): 1,
        (pair, ("min_timestamp_offset", "first_offset")): 1,
        (pair, ("last_offset", "max_timestamp_offset")): 1,
        (pair, ("max_timestamp_ms", "min_timestamp_ms")): 1,
        (between, ("log_size_bytes",)): 1,
        (between, ("max_backward_jump_ms",)): 1,
        (between, ("log_mtime_ms",)): 1,
        (between, ("min_timestamp_ms",)): 1,
        ("expect_column_values_to_be_in_set", ("dir_kind",)): 1,
        ("expect_column_values_to_be_in_set", ("file_state",)): 1,
        ("expect_column_values_to_be_in_set", ("depth",)): 1,
        ("expect_column_values_to_not_be_null", ("topic",)): 1,
    }
    for r in res.results:
        assert r["element_count"] in (total, None), r  # table-level expectations have no element count
        assert r["description"] and r["expectation"].startswith("expect_")
    size = next(r for r in res.results if r["column"] == "log_size_bytes")
    assert size["partial_unexpected"] == [5 << 30]
    assert size["unexpected_percent"] == pytest.approx(100 / total)
    findings = [f for f in res.findings if f.severity != Severity.PASS]
    assert len(findings) == len(failed) and all(f.code == "KLA090" for f in findings)
    dup = next(f for f in findings if "appears once" in f.message)
    assert dup.severity == Severity.FAIL and f"3 of {total:,} rows" in dup.message and dup.evidence_count == 3
    assert {f.severity for f in findings if "log_size_bytes" in f.message} == {Severity.WARN}
