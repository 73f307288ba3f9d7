"""Builds auditor/samples/demo-cluster.tar.gz: log dirs written by real Kafka brokers, with
planted anomalies, for ``kafka-audit demo``.

    .venv/bin/python scripts/make_demo_sample.py          # needs java + the Kafka jars (scripts/kafka-jars.sh)

A 2-broker KRaft cluster (2 log dirs each) from the test harness; everything below is done by
the brokers themselves, through a real client and Kafka's Admin API:

* ``clicks``: 6 partitions, one hot key sending most records to one partition (skew);
* ``orders``: 5 record-time segments produced over ~12 s, then partition 0 reassigned from
  broker 1 to brokers 1 and 2 (the new replica's mtimes are all "now": an mtime reset);
* ``audit-log``: records stamped 10..1 days ago with ``retention.ms`` = 3 days: the broker
  deletes the old segments (a retention gap before a replay target 5 days back);
* ``sensor-readings``: CreateTime records 5 days in the past and in the future (limits open);
* ``payments``: a record stamped a day ahead keeps retention (1 hour) from deleting the
  old-stamped segments after it.

The brokers are stopped cleanly, then the log dirs are archived with their files' mtimes
(restored by ``tarfile`` on unpacking). ``demo.json`` records when the sample was made (the
demo audits "as of" that time), the replay target, and ``demo-audit.yaml`` scales the time
thresholds to the seconds the sample took to make.
"""

from __future__ import annotations

import json
import os
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from harness.kafka import KafkaCluster, kafka_classpath  # noqa: E402
from harness.moves import reassign  # noqa: E402

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


def build(work: Path) -> Path:
    cluster = KafkaCluster(work / "kafka", brokers=2, log_dirs_per_broker=2, classpath=kafka_classpath(),
                           broker_config={"log.retention.check.interval.ms": "1000"})
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
    return make_tarball(work, log_dirs, made_at, now)


def make_tarball(work: Path, log_dirs: list[Path], made_at: int, now: int) -> Path:
    root = work / "demo-cluster"
    root.mkdir()
    names = []
    for d in log_dirs:
        name = f"broker{d.parent.name.split('-')[-1]}-{d.name}"
        os.rename(d, root / name)  # a rename keeps every file's mtime
        names.append(name)
    (root / "demo.json").write_text(json.dumps({
        "made_at_ms": made_at, "audit_at_ms": now, "log_dirs": names,
        "replay_at_ms": now - 5 * DAY, "replay_topics": ["audit-log"],
        "kafka_version": "4.2.1",
        "planted": {"clicks": "hot key skew", "orders": "partition 0 reassigned from broker 1 to brokers 1,2",
                    "audit-log": "retention deleted records older than 3 days",
                    "sensor-readings": "CreateTime records 5 days in the past and the future",
                    "payments": "a record a day ahead blocks retention (1 hour) of the segments after it"},
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
