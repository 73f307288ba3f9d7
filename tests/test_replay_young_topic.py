"""A topic younger than the replay target is no gap; the same topic after deleteRecords is (issue 14, part 1).

On a real Kafka 4.2.1 broker: two topics created just now (log start offset 0: nothing ever
deleted), the target 15 minutes before. ``replay-check --api modern`` in disk mode exits 0 with an
INFO "the topic's data begins after the target" (a seek to the target answers offset 0, the first
record ever written: the broker's ``offsets_for_times`` says so); protocol mode agrees. Then
``deleteRecords`` on one of them: its log start moves to 12 and the same replay misses [0, 12):
FAIL, exit 1, the predicted answer equal to ``offsets_for_times`` (12), even though the broker
writes the log-start-offset-checkpoint only once a minute (the leader-epoch-checkpoint shows the
new start at once). ``audit --at`` judges both the same way in one run.
"""

from __future__ import annotations

import contextlib
import io
import json
import time

import pytest
from confluent_kafka import TopicPartition

from auditor.cli import main as kafka_audit_main
from harness.cli import kafka_audit
from harness.groups import cleaner_pending
from harness.kafka import wait_past_newest_write
from harness.scenarios import read_cleaner_checkpoint

pytestmark = pytest.mark.live

MINUTE = 60_000
DELETE_BEFORE = 12
APIS_MODERN = ("--api", "modern")


@pytest.fixture(scope="module")
def young(kafka_cluster_factory):
    """A broker with two topics created now, 30 records each, and a target 15 min before."""
    cluster = kafka_cluster_factory(brokers=1)
    for topic in ("young-kept", "young-trimmed"):
        cluster.create_topic(topic)
        cluster.produce(topic, [(f"k{i}", f"v{i}", None) for i in range(30)], partition=0)
    target = int(time.time() * 1000) - 15 * MINUTE
    return cluster, target


def _replay_check(cluster, topic, target, *extra):
    """``kafka-audit replay-check ... --json`` run in-process (the command's own code; audit and
    collect below run as subprocesses, as scripts call them)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = kafka_audit_main(["replay-check", "--topic", topic, "--at", str(target), *map(str, extra), "--json"])
    assert rc in (0, 1), out.getvalue() + err.getvalue()
    (part,) = json.loads(out.getvalue())["partitions"]
    return rc, part


def _delete_records(cluster, topic):
    tp = TopicPartition(topic, 0, DELETE_BEFORE)
    (fut,) = cluster.admin().delete_records([tp]).values()
    fut.result(timeout=30)
    assert cluster.list_offsets(topic, 0, "earliest")[0] == DELETE_BEFORE


def _wait_epochs_start_at(cluster, topic, offset: int, timeout_s: float = 60.0) -> None:
    """Until the leader-epoch-checkpoint names ``offset`` as its first epoch's start: the broker
    moves the log start at once but writes that file later, from its scheduler
    (``LeaderEpochFileCache.truncateFromStartAsyncFlush``), which a loaded machine delays."""
    epochs = cluster.partition_dir(topic, 0) / "leader-epoch-checkpoint"
    deadline = time.monotonic() + timeout_s
    while (last := epochs.read_text().split()[-1:]) != [str(offset)]:
        assert time.monotonic() < deadline, f"{epochs} ends with {last}, not {offset}, after {timeout_s:.0f} s"
        time.sleep(0.1)


def test_young_topic_is_safe_for_the_modern_lookup(young):
    cluster, target = young
    log_dir = cluster.log_dirs(1)[0]
    assert cluster.offsets_for_times("young-kept", 0, target) == 0  # the seek lands on the first record
    rc, part = _replay_check(cluster, "young-kept", target, "--log-dir", log_dir, *APIS_MODERN)
    assert rc == 0, part
    assert part["severity"] == "INFO" and "the topic's data begins after the target" in part["message"], part
    ev = part["evidence"][0]
    assert ev["modern_offset"] == 0 and ev["log_start_offset"] == 0 and ev["records_ever_deleted"] is False
    assert ev["log_start_source"] == "first segment's base offset" and ev["gap_ms"] == 0
    # the legacy (v0) lookup still answers nothing: every .log was written after the target (right)
    rc_both, both = _replay_check(cluster, "young-kept", target, "--log-dir", log_dir)
    assert rc_both == 1 and "legacy (v0) lookup answers an empty list" in both["message"]
    assert "data begins after the target" in both["message"]
    # protocol mode: the broker's earliest offset is 0
    rc_proto, proto = _replay_check(cluster, "young-kept", target, "--bootstrap-server", cluster.bootstrap_servers)
    assert rc_proto == 0 and proto["severity"] == "INFO", proto


def test_after_delete_records_the_gap_is_real(young):
    cluster, target = young
    log_dir = cluster.log_dirs(1)[0]
    _delete_records(cluster, "young-trimmed")
    broker = cluster.offsets_for_times("young-trimmed", 0, target)
    assert broker == DELETE_BEFORE
    _wait_epochs_start_at(cluster, "young-trimmed", DELETE_BEFORE)
    rc, part = _replay_check(cluster, "young-trimmed", target, "--log-dir", log_dir, *APIS_MODERN)
    assert rc == 1 and part["severity"] == "FAIL", part
    assert "misses [target, oldest)" in part["message"] and f"below log start offset {DELETE_BEFORE}" in part["message"]
    ev = part["evidence"][0]
    assert ev["modern_offset"] == broker == DELETE_BEFORE and ev["records_ever_deleted"] is True
    assert ev["log_start_source"] in ("leader-epoch-checkpoint", "log-start-offset-checkpoint"), ev
    rc_proto, proto = _replay_check(cluster, "young-trimmed", target, "--bootstrap-server", cluster.bootstrap_servers)
    assert rc_proto == 1 and proto["severity"] == "FAIL", proto


def test_compacted_topic_is_no_gap(young):
    """The cleaner removes superseded records (offsets 0-9 here) but never moves the log start: a
    target before the oldest retained record is no time gap (INFO), and the seek lands on the first
    retained record, as the broker says."""
    cluster, target = young
    topic = "young-compacted"
    cluster.create_topic(topic, config={"cleanup.policy": "compact", "segment.ms": "100", "segment.jitter.ms": "0",
                                        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"})
    for round_ in range(3):  # each round rolls a segment (record time); rounds 1-2 supersede round 0's keys
        cluster.produce(topic, [(f"k{i}", f"r{round_}", None) for i in range(10)], partition=0)
        wait_past_newest_write(cluster.partition_dirs(topic, 0).values(), 100, f"{topic}-0 round {round_}")
    deadline = time.monotonic() + 120
    while cluster.consume(topic, 0)[0].offset() == 0:
        assert time.monotonic() < deadline, "the cleaner did not compact the first segment"
        time.sleep(0.5)
    # ... and has nothing left to clean: a later pass (a round split over two segments) would move
    # the first retained record between the broker's answer and the read of the files
    pdir = cluster.partition_dir(topic, 0)
    while pending := cleaner_pending(pdir, read_cleaner_checkpoint(cluster, topic, 0), 0.01):
        assert time.monotonic() < deadline, f"the cleaner is not done with {topic}-0: {pending}"
        time.sleep(0.5)
    broker = cluster.offsets_for_times(topic, 0, target)
    assert broker > 0 and cluster.list_offsets(topic, 0, "earliest")[0] == 0
    rc, part = _replay_check(cluster, topic, target, "--log-dir", cluster.log_dirs(1)[0], *APIS_MODERN)
    assert rc == 0 and part["severity"] == "INFO" and "data begins after the target" in part["message"], part
    ev = part["evidence"][0]
    assert ev["modern_offset"] == broker and ev["log_start_offset"] == 0 and ev["records_ever_deleted"] is False


def test_manifest_mode_agrees(young, tmp_path):
    """``collect`` manifests judged by ``replay-check --manifest``: the same verdicts and answers as disk mode."""
    cluster, target = young
    if cluster.list_offsets("young-trimmed", 0, "earliest")[0] != DELETE_BEFORE:
        _delete_records(cluster, "young-trimmed")
    manifest = tmp_path / "manifest"
    proc = kafka_audit("collect", cluster.log_dirs(1)[0], "--out", manifest, "--depth", "headers")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for topic, rc_expected, severity, offset in (("young-kept", 0, "INFO", 0), ("young-trimmed", 1, "FAIL", DELETE_BEFORE)):
        rc, part = _replay_check(cluster, topic, target, "--manifest", manifest, *APIS_MODERN)
        assert (rc, part["severity"]) == (rc_expected, severity), part
        assert part["evidence"][0]["modern_offset"] == offset == cluster.offsets_for_times(topic, 0, target)


def test_audit_at_judges_both_alike(young, tmp_path):
    """One ``audit --at`` over the broker's log dir: the young topic INFO, the trimmed one FAIL."""
    cluster, target = young
    if cluster.list_offsets("young-trimmed", 0, "earliest")[0] != DELETE_BEFORE:
        _delete_records(cluster, "young-trimmed")
    config = tmp_path / "audit.yaml"
    config.write_text("checks:\n  replay.safety:\n    api: modern\n")
    out = tmp_path / "findings.json"
    proc = kafka_audit("audit", "--log-dir", cluster.log_dirs(1)[0], "--at", target, "--topic", "young-kept,young-trimmed",
                       "--config", config, "--json", out)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # young-trimmed fails
    findings = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "KLA010"]
    by_topic = {f["topic"]: f for f in findings}
    assert set(by_topic) == {"young-kept", "young-trimmed"}, findings
    assert by_topic["young-kept"]["severity"] == "INFO", by_topic["young-kept"]
    assert "the topic's data begins after the target" in by_topic["young-kept"]["message"]
    assert by_topic["young-trimmed"]["severity"] == "FAIL", by_topic["young-trimmed"]
    assert by_topic["young-trimmed"]["evidence"][0]["modern_offset"] == cluster.offsets_for_times(
        "young-trimmed", 0, target) == DELETE_BEFORE


def _live_bases(cluster, topic) -> list[int]:
    return sorted(int(p.name[:-4]) for p in cluster.partition_dir(topic, 0).glob("*.log"))


def test_segments_below_the_log_start_not_yet_deleted_make_the_broker_answer_minus_one(young):
    """deleteRecords into a later segment: until the broker's retention check (every 5 min by
    default) deletes the segments wholly below the new log start, a time lookup before the data
    searches the first of them and the broker answers -1 (kafka-consumer-groups --to-datetime then
    resets to the log end). replay-check predicts that -1, disk and manifest-free, and says why; the
    comparison counts only when the segment list did not change around both lookups (the check may
    run in between: then the next topic is tried)."""
    cluster, target = young
    log_dir = cluster.log_dirs(1)[0]
    t0 = target + 5 * MINUTE
    for attempt in range(3):
        topic = f"young-split-{attempt}"
        # one record per batch, 2 min of record time apart with segment.ms 1 min: a segment each
        cluster.create_topic(topic, config={"segment.ms": "60000", "segment.jitter.ms": "0"})
        for i in range(8):
            cluster.produce(topic, [(f"k{i}", f"v{i}", t0 + i * 2 * MINUTE)], partition=0)
        assert len(_live_bases(cluster, topic)) == 8, _live_bases(cluster, topic)
        (fut,) = cluster.admin().delete_records([TopicPartition(topic, 0, 5)]).values()
        fut.result(timeout=30)
        _wait_epochs_start_at(cluster, topic, 5)
        before = _live_bases(cluster, topic)
        broker = cluster.offsets_for_times(topic, 0, target)
        rc, part = _replay_check(cluster, topic, target, "--log-dir", log_dir, *APIS_MODERN)
        if _live_bases(cluster, topic) != before or before[0] != 0:
            continue   # the retention check ran meanwhile: another topic
        assert broker == -1, broker
        ev = part["evidence"][0]
        assert ev["modern_offset"] is None and ev["log_start_offset"] == 5, ev
        assert rc == 1 and part["severity"] == "FAIL", part
        assert ("the broker answers -1: segment 0 (offsets up to 0), the first whose largestTimestamp >= target, "
                "lies wholly below the log start offset 5") in part["message"], part["message"]
        return
    raise AssertionError("the retention check ran during each of 3 attempts")
