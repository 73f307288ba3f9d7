"""The KRaft metadata log of a real 3-broker x 2-log-dir cluster, read offline, against Kafka:

- every record of every metadata segment and snapshot equals ``DumpLogSegments
  --cluster-metadata-decoder`` (type, version, every field);
- the rebuilt state equals the live cluster's ``describe_topics`` (IDs, replicas, ISR, leader),
  ``describe_configs`` (dynamic topic, broker and cluster-default configs) and
  ``describeLogDirs`` (which log dir of which broker holds each replica, through each log dir's
  ``meta.properties`` directory.id);
- the history names the inter-broker reassignment, the log-dir move, the config changes and the
  delete + re-create of a topic, at times within the test's own clock.

One cluster for the module (a snapshot is forced by low snapshot thresholds).
"""

from __future__ import annotations

import shutil
import struct
import time

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from auditor.cluster import metadata_log as ml
from auditor.formats import kafka_message as km
from harness.kafka import kafka_tool, wait_past_newest_write
from harness.log_dirs import copy_live_dir, describe_log_dirs
from harness.metadata_dump import assert_equal_to_dump
from harness.moves import move_log_dir, reassign, wait_replica_quiet

pytestmark = pytest.mark.live

SNAPSHOT_CONFIG = {
    # a snapshot as soon as a few KiB of records or 2 s have gone by
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "metadata.log.max.snapshot.interval.ms": "2000",
}


def _wait(cond, what, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _dir_id(log_dir) -> str:
    """The directory.id of a log dir (its meta.properties)."""
    (dir_id,) = ml.log_dir_ids([log_dir])
    return dir_id


def _at_rest(kc, admin, moved) -> bool:
    """Every node's copy of the metadata log places each moved replica ((topic, partition, broker,
    log dir)) in its new log dir and has every partition's ISR full, and the brokers say the same
    ISR. Kafka may record a log-dir move as A->B, B->A, A->B, the last after the move is reported
    done; an ISR grows back a moment after a reassignment."""
    for node in kc.nodes.values():
        st = ml.read_metadata_log([node.log_dirs[0] / ml.METADATA_DIR_NAME]).state
        for topic, partition, broker, log_dir in moved:
            t = st.topic_named(topic)
            if t is None or t.partitions[partition].directory_of(broker) != _dir_id(log_dir):
                return False
        if any(sorted(p.isr) != sorted(p.replicas) for t in st.topics.values() for p in t.partitions.values()):
            return False
    names = [t.name for t in st.topics.values()]
    described = admin.describe_topics(TopicCollection(names))
    if not all(sorted(n.id for n in p.isr) == sorted(n.id for n in p.replicas)
               for f in described.values() for p in f.result(timeout=30).partitions):
        return False
    return _placed_where_brokers_say(kc)


def _placed_where_brokers_say(kc) -> bool:
    """The metadata log places every replica in the log dir its broker reports (describeLogDirs).
    A broker picks the log dir of a replica it creates itself and tells the controller afterwards
    (AssignReplicasToDirs), so the log can name another dir for a moment after the replica exists:
    a replica the test never moved (on broker 1) was once caught in between.
    The replicas still apart are kept in ``_APART`` for the timeout's message."""
    log = ml.read_metadata_log(_all_log_dirs(kc))
    live = describe_log_dirs(kc)
    where = {(b, tp): path for b, dirs in live.items() for path, tps in dirs.items() for tp in tps}
    placed = [(t.name, p.partition, b, log.dir_path(p.directory_of(b)), where.get((b, (t.name, p.partition))))
              for t in log.state.topics.values() for p in t.partitions.values() for b in p.replicas]
    # a reserved name (UNASSIGNED: a reassignment's new replica may stay so for minutes) places
    # nothing, and KLA082 judges only named dirs
    _APART[:] = [r for r in placed if r[3] not in ml.RESERVED_DIRS.values() and r[3] != r[4]]
    return not _APART


_APART: list[tuple] = []


def _wait_at_rest(kc, admin, moved) -> int:
    """Wait for :func:`_at_rest`; the time (ms) it was seen, after every record of the moves."""
    try:
        _wait(lambda: _at_rest(kc, admin, moved), f"the cluster at rest after the moves {moved}", timeout_s=180)
    except AssertionError as e:
        raise AssertionError(f"{e}; replicas where the metadata log and describeLogDirs last differed "
                             f"(topic, partition, broker, log's dir, broker's dir): {_APART}") from None
    return int(time.time() * 1000)


def _config_command(kc, *args):
    kafka_tool(kc, "kafka.admin.ConfigCommand", *args, timeout=120)


def _alter(admin, resource: ConfigResource):
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(timeout=30)


@pytest.fixture(scope="module")
def scenario(kafka_cluster_factory):
    kc = kafka_cluster_factory(brokers=3, log_dirs_per_broker=2, broker_config=SNAPSHOT_CONFIG)
    admin = kc.admin()
    t0_ms = int(time.time() * 1000)
    kc.create_topic("orders", replica_assignment=[[1, 2], [2, 3], [3, 1]])
    kc.create_topic("events", replica_assignment=[[1, 2, 3], [2, 3, 1]], config={"retention.ms": "86400000"})
    kc.create_topic("gone", replica_assignment=[[2]])
    kc.alter_topic_config("orders", {"retention.ms": "3600000", "message.timestamp.type": "LogAppendTime"})
    _alter(admin, ConfigResource("broker", "2", incremental_configs=[
        ConfigEntry("log.cleaner.backoff.ms", "700", incremental_operation=AlterConfigOpType.SET)]))
    # the cluster-wide default (librdkafka refuses a broker resource with an empty name): Kafka's tool
    _config_command(kc, "--entity-type", "brokers", "--entity-default", "--alter",
                    "--add-config", "log.retention.ms=604800001")
    kc.produce("orders", [(b"k", b"v", None)] * 20)
    t_reassign_ms = int(time.time() * 1000)
    reassign(kc, "orders", 0, [3, 2])
    t_move_ms = int(time.time() * 1000)
    src = kc.partition_dirs("events", 1)[2]
    target = next(d for d in kc.nodes[2].log_dirs if d != src.parent)
    move_log_dir(kc, "events", 1, 2, target)
    t_moved_ms = int(time.time() * 1000)
    old_gone = kafka_uuid(admin.describe_topics(TopicCollection(["gone"]))["gone"].result(timeout=30).topic_id)
    # a copy of the topic's partition dir before its deletion, for the stray-dir test to plant
    old_gone_copy = kc.workdir / "old-gone-0"
    copy_live_dir(kc.partition_dirs("gone", 0)[2], old_gone_copy)
    admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(timeout=30)
    _wait(lambda: "gone" not in kc.admin().list_topics(timeout=10).topics, "topic 'gone' deleted")
    kc.create_topic("gone", replica_assignment=[[3], [1]])
    metadata_dir = kc.nodes[1].log_dirs[0] / ml.METADATA_DIR_NAME
    # wait until a snapshot covers the whole scenario
    end = ml.read_metadata_log([metadata_dir]).state.last_offset
    _wait(lambda: any(s[0] > end for s in ml.metadata_files(metadata_dir)[0]), f"a snapshot past offset {end}",
          timeout_s=120)
    t_settled_ms = _wait_at_rest(kc, admin, [("events", 1, 2, target)])
    yield dict(kc=kc, admin=admin, t0_ms=t0_ms, t_reassign_ms=t_reassign_ms, t_move_ms=t_move_ms,
                t_moved_ms=t_moved_ms, t_settled_ms=t_settled_ms, move_src=src.parent, move_target=target,
                old_gone=old_gone, old_gone_copy=old_gone_copy, metadata_dir=metadata_dir)
    # the session's factory would stop it only at the end: three brokers writing a snapshot every
    # 2 s would load the machine under every later module
    kc.stop()


def kafka_uuid(u) -> str:
    """A confluent-kafka Uuid as Kafka's tools print it (librdkafka's str() is standard base64,
    Kafka's Uuid.toString() URL-safe base64)."""
    return km.uuid_str(struct.pack(">qq", u.get_most_significant_bits(), u.get_least_significant_bits()))


def _all_log_dirs(kc):
    return [d for n in kc.nodes.values() for d in n.log_dirs]


def test_every_record_equals_dumplogsegments(scenario, dump_log_segments, tmp_path):
    # a copy: the live log keeps growing (NoOpRecords) while Kafka's tool and ours read it
    copy = copy_live_dir(scenario["metadata_dir"], tmp_path / ml.METADATA_DIR_NAME)
    snaps, segs = ml.metadata_files(copy)
    assert snaps, "no snapshot was written"
    files = [p for _, p in snaps] + [p for _, p in segs]
    total = assert_equal_to_dump(files, dump_log_segments)
    assert total > 100
    types = {e.type for p in files for e in ml.read_entries(p, [])}
    for t in ("TopicRecord", "PartitionRecord", "PartitionChangeRecord", "ConfigRecord", "RemoveTopicRecord",
              "RegisterBrokerRecord", "FeatureLevelRecord", "NoOpRecord", "SnapshotHeaderRecord",
              "SnapshotFooterRecord"):
        assert t in types, (t, sorted(types))


def test_state_equals_the_live_cluster(scenario):
    kc, admin = scenario["kc"], scenario["admin"]
    log = ml.read_metadata_log(_all_log_dirs(kc))
    assert log.notes == [], [str(n) for n in log.notes]
    # every node keeps a copy (node 1 the controller's, 2 and 3 their replicas); the most advanced is read
    copies = {n.log_dirs[0] / ml.METADATA_DIR_NAME for n in kc.nodes.values()}
    assert log.metadata_dir in copies and set(log.other_metadata_dirs) == copies - {log.metadata_dir}
    assert log.base_snapshot is not None
    st = log.state
    names = ["orders", "events", "gone"]
    described = {n: f.result(timeout=30) for n, f in admin.describe_topics(TopicCollection(names)).items()}
    live_topics = {t for t in kc.admin().list_topics(timeout=10).topics}
    assert {t.name for t in st.topics.values()} == live_topics
    for name, d in described.items():
        t = st.topic_named(name)
        assert t.topic_id == kafka_uuid(d.topic_id)
        assert sorted(t.partitions) == [p.id for p in d.partitions]
        for p in d.partitions:
            ours = t.partitions[p.id]
            assert ours.replicas == [n.id for n in p.replicas], (name, p.id)
            assert sorted(ours.isr) == sorted(n.id for n in p.isr), (name, p.id)
            assert ours.leader == p.leader.id, (name, p.id)
    assert st.topic_named("gone").topic_id != scenario["old_gone"]
    # configs: every dynamic config the cluster reports, and nothing else
    for name in names:
        entries = admin.describe_configs([ConfigResource("topic", name)])
        live = {k: e.value for fut in entries.values() for k, e in fut.result(timeout=30).items()
                if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        assert st.topic_configs(name) == live, name
    assert st.topic_configs("orders") == {"retention.ms": "3600000", "message.timestamp.type": "LogAppendTime"}
    for broker in (1, 2, 3):
        entries = admin.describe_configs([ConfigResource("broker", str(broker))])
        cfg = {k: e for fut in entries.values() for k, e in fut.result(timeout=30).items()}
        assert st.broker_configs(broker) == {k: e.value for k, e in cfg.items()
                                             if e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}, broker
        assert st.broker_configs(None) == {k: e.value for k, e in cfg.items()
                                           if e.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}
    assert st.broker_configs(2) == {"log.cleaner.backoff.ms": "700"}
    assert st.broker_configs(None)["log.retention.ms"] == "604800001"   # (Kafka sets min.insync.replicas there too)
    # brokers and their log-dir IDs: each log dir's meta.properties directory.id
    assert sorted(st.brokers) == [1, 2, 3]
    for b in st.brokers.values():
        assert sorted(b.log_dirs) == sorted(did for did, (node, _p) in log.dir_ids.items() if node == b.broker_id)
        assert not b.fenced
    # every replica's directory = the log dir describeLogDirs reports for it
    live_dirs = describe_log_dirs(kc)
    where = {(b, tp): path for b, dirs in live_dirs.items() for path, tps in dirs.items() for tp in tps}
    checked = 0
    for t in st.topics.values():
        for p in t.partitions.values():
            for b in p.replicas:
                assert log.dir_path(p.directory_of(b)) == where[(b, (t.name, p.partition))], (t.name, p.partition, b)
                checked += 1
    assert checked == sum(len(tps) for dirs in live_dirs.values() for tps in dirs.values())


def test_history_names_the_moves_and_changes(scenario):
    kc = scenario["kc"]
    log = ml.read_metadata_log(_all_log_dirs(kc), history=True)
    assert log.notes == [], [str(n) for n in log.notes]
    # the whole log on disk is replayed: from offset 0 (the controller's copy), or from the snapshot
    # a broker's copy starts with (its log begins at that snapshot's offset)
    log_start = ml.metadata_files(log.metadata_dir)[1][0][0]
    assert log.base_offset == log_start and (log.base_snapshot is None) == (log_start == 0)
    fast = ml.read_metadata_log(_all_log_dirs(kc))
    def summary(st):
        return ({t.topic_id: (t.name, {i: (p.replicas, p.isr, p.leader, p.leader_epoch, p.directories)
                                                  for i, p in t.partitions.items()}) for t in st.topics.values()},
                          {b.broker_id: b.log_dirs for b in st.brokers.values()}, st.configs, st.features)
    # the same state whether replayed from offset 0 or loaded from the newest snapshot (compare
    # up to the offset both reached: the live log grows)
    if fast.state.last_offset == log.state.last_offset:
        assert summary(fast.state) == summary(log.state)
    else:
        assert summary(fast.state)[:3] == summary(log.state)[:3]
    h = log.history
    as_of_ms = int(time.time() * 1000)
    assert all(scenario["t0_ms"] - 120_000 <= c.timestamp_ms <= as_of_ms for c in h)
    reps = [c for c in h if c.kind == "replicas" and c.topic == "orders" and c.partition == 0]
    assert reps and reps[0].before == [1, 2] and reps[-1].after == [3, 2], reps
    assert all(scenario["t_reassign_ms"] - 1000 <= c.timestamp_ms for c in reps)
    moves = [c for c in h if c.kind == "directories" and c.topic == "events" and c.partition == 1 and c.broker == 2]
    # One move, or the flip-flop Kafka records when a metadata delta lands between the controller
    # accepting the future replica's directory and the broker swapping the logs: the broker
    # re-asserts the log's actual (old) dir, then the new one after the swap
    # (ReplicaManager.maybeUpdateTopicAssignment vs ReplicaAlterLogDirsThread's promotion).
    assert moves and len(moves) % 2 == 1, [c for c in h if c.kind == "directories"]
    src, target = scenario["move_src"], scenario["move_target"]
    for i, c in enumerate(moves):
        assert (log.dir_path(c.before), log.dir_path(c.after)) == (
            (str(src), str(target)) if i % 2 == 0 else (str(target), str(src))), moves
    # the first placements of new replicas are told apart from moves
    assert any(c.kind == "directory-assigned" and c.topic == "events" and c.partition == 1 and c.broker == 2
               and ml.RESERVED_DIRS.get(c.before) == "UNASSIGNED" for c in h)
    # the controller accepted the new dir before the move was reported done; a flip-flop's re-asserts
    # may come after that, but before the fixture saw every copy of the log at rest
    assert scenario["t_move_ms"] - 1000 <= moves[0].timestamp_ms <= scenario["t_moved_ms"] + 1000, moves
    assert all(moves[0].timestamp_ms <= c.timestamp_ms <= scenario["t_settled_ms"] for c in moves), moves
    deleted = [c for c in h if c.kind == "topic-deleted" and c.topic == "gone"]
    created = [c for c in h if c.kind == "topic-created" and c.topic == "gone"]
    assert [c.topic_id for c in deleted] == [scenario["old_gone"]]
    assert len(created) == 2 and created[0].topic_id == scenario["old_gone"] and created[1].offset > deleted[0].offset
    cfg = [c for c in h if c.kind == "config" and c.resource == ("topic", "orders") and c.name == "retention.ms"]
    assert cfg and cfg[-1].after == "3600000"
    assert any(c.kind == "config" and c.resource == ("broker", "2") and c.name == "log.cleaner.backoff.ms" for c in h)
    registered = {c.broker for c in h if c.kind == "broker-registered"}
    assert registered <= {1, 2, 3} and (log_start > 0 or registered == {1, 2, 3})


def test_cli_metadata_history_and_json_on_the_cluster(scenario, capsys):
    """``kafka-audit metadata`` given all of broker 2's log dirs: finds the metadata log itself,
    maps each replica to its log dir, and --history names the move and the reassignment."""
    from auditor.cli import main
    kc = scenario["kc"]
    dirs = [str(d) for d in kc.nodes[2].log_dirs]
    assert main(["metadata", *dirs, "--history"]) == 0
    out = capsys.readouterr().out
    assert f"events-1 moved from log dir {scenario['move_src']} to {scenario['move_target']} on broker 2" in out
    assert "orders-0 reassigned from [1, 2] to " in out
    assert f"topic gone deleted (ID {scenario['old_gone']}" in out
    assert "topic orders: retention.ms = 3600000" in out
    assert main(["metadata", *dirs, "--json"]) == 0
    import json
    doc = json.loads(capsys.readouterr().out)
    ev = doc["topics"]["events"]["partitions"]["1"]["directories"]
    assert {"broker": 2, "log_dir": str(scenario["move_target"])}.items() <= next(d for d in ev if d["broker"] == 2).items()
    assert doc["topics"]["orders"]["configs"] == {"retention.ms": "3600000", "message.timestamp.type": "LogAppendTime"}
    assert main(["metadata", dirs[1]]) == 3          # broker 2's second log dir holds no metadata log


def test_audit_topic_config_precedence_on_the_cluster(scenario):
    """Without a live cluster the audit takes the metadata log's configs (the topic's own, else the
    dynamic cluster default); with --bootstrap-server the live values win and say so."""
    from auditor.audit import AuditRequest, topic_config_layers
    kc = scenario["kc"]
    dirs = [str(d) for d in _all_log_dirs(kc)]
    configs, sources, notes = topic_config_layers(AuditRequest(log_dirs=dirs), lambda m: None)
    assert notes == []
    assert configs["orders"]["retention.ms"] == "3600000"
    assert sources["orders"]["retention.ms"] == "metadata log: topic config"
    assert configs["orders"]["message.timestamp.type"] == "LogAppendTime"
    assert configs["gone"]["retention.ms"] == "604800001"                   # the dynamic cluster default
    assert sources["gone"]["retention.ms"] == "metadata log: cluster default"
    live, live_sources, _ = topic_config_layers(AuditRequest(log_dirs=dirs, bootstrap_server=kc.bootstrap_servers),
                                                lambda m: None)
    assert live["orders"]["retention.ms"] == "3600000" and live_sources["orders"]["retention.ms"] == "live cluster"
    # the broker resolves the same default the metadata log gave
    assert live["gone"]["retention.ms"] == "604800001" and live_sources["gone"]["retention.ms"] == "live cluster"


def _produce_spaced_groups(kc, topic: str, groups: int, gap_s: float) -> None:
    """Record-time rolls with real-time spacing (as test_checks_real_cluster): healthy mtimes."""
    import os
    for g in range(groups):
        kc.produce(topic, [(f"g{g}-{i}", os.urandom(200).hex(), None) for i in range(20)], partition=0)
        wait_past_newest_write(kc.partition_dirs(topic, 0).values(), int(gap_s * 1000), f"{topic}-0 group {g}")


def test_kla020_names_the_recorded_reassignment_and_log_dir_move(scenario):
    """KLA020 with the metadata log: 'reassigned from [1] to [1, 2] between T1 and T2' and 'moved
    from log dir X to Y on broker 1 at T', the metadata offset as evidence, T within the move."""
    from auditor.engines.local.checks import run_local
    from auditor.scan import scan_log_dirs
    from checks.framework.base import AuditContext, Severity
    from checks.framework.config import Config
    kc = scenario["kc"]
    seg = {"segment.ms": "2000", "segment.jitter.ms": "0"}
    kc.create_topic("kla020-moved", replica_assignment=[[1]], config=seg)
    kc.create_topic("kla020-dirmove", replica_assignment=[[1, 2]], config=seg)
    _produce_spaced_groups(kc, "kla020-moved", groups=5, gap_s=2.3)
    _produce_spaced_groups(kc, "kla020-dirmove", groups=5, gap_s=2.3)
    for topic in ("kla020-moved", "kla020-dirmove"):   # the moves' mtimes clearly after the old ones
        wait_replica_quiet(kc, topic, 0, quiet_s=5)
    t1 = int(time.time() * 1000)
    reassign(kc, "kla020-moved", 0, [1, 2])
    t2 = int(time.time() * 1000)
    before = kc.partition_dirs("kla020-dirmove", 0)[1].parent
    target = next(d for d in kc.log_dirs(1) if d != before)
    move_log_dir(kc, "kla020-dirmove", 0, 1, target)
    t3 = int(time.time() * 1000)
    t4 = _wait_at_rest(kc, kc.admin(), [("kla020-dirmove", 0, 1, target)])
    dirs = _all_log_dirs(kc)
    log = ml.read_metadata_log(dirs, history=True)
    from auditor.cluster.metadata_audit import PartitionMoves
    moves = PartitionMoves.from_log(log)
    config = Config({"checks": {"mtime.reset": {"min_record_span_ms": 4_000, "replica_skew_ms": 3_000,
                                                "packed_ratio": 0.2}}}, source="test")
    result = scan_log_dirs(dirs, "headers")
    ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=config, partition_moves=moves)
    findings = [f for f in run_local(result.segments, result.partitions, ctx, names=["mtime.reset"])
                if f.severity != Severity.PASS and f.topic in ("kla020-moved", "kla020-dirmove")]
    by_topic = {}
    for f in findings:
        by_topic.setdefault(f.topic, []).append(f)
    moved = [f for f in by_topic["kla020-moved"] if f.broker_id == 2]
    assert len(moved) == 1, [f.message for f in findings]
    f = moved[0]
    # one PartitionChangeRecord (a superset: replicas [1, 2], adding [2]) or a begin and an end
    assert f.message.startswith(("reassigned from [1] to [1, 2] at ", "reassigned from [1] to [1, 2] between ")), f.message
    ev = f.evidence[0]
    assert ev["event"] == "reassigned" and t1 - 1000 <= ev["at_ms"] <= t2 + 1000 and ev["metadata_offset"] > 0
    dm = [f for f in by_topic["kla020-dirmove"] if f.broker_id == 1]
    assert len(dm) == 1, [f.message for f in findings]
    f = dm[0]
    assert f.log_dir == str(target)
    # one directory change, or Kafka's flip-flop (A->B, B->A, A->B) told as one move over its span
    flips = [c for c in log.history if c.kind == "directories" and c.topic == "kla020-dirmove"]
    when = "at " if len(flips) == 1 else "between "
    assert f.message.startswith(f"moved from log dir {before} to {target} on broker 1 {when}"), (f.message, flips)
    ev = f.evidence[0]
    # the time of the last directory change: the only one (before the move was reported done), or the
    # flip-flop's last re-assert (after it, before every copy of the log was seen at rest)
    assert ev["event"] == "moved" and t2 - 1000 <= ev["at_ms"] <= (t3 + 1000 if len(flips) == 1 else t4), (ev, flips)
    assert flips[0].timestamp_ms <= t3 + 1000, flips
    assert ev["metadata_first_offset"] == flips[0].offset and ev["metadata_offset"] == flips[-1].offset
    # without a metadata log the guess stays (as before)
    ctx0 = AuditContext(as_of_ms=int(time.time() * 1000), config=config)
    guess = [f for f in run_local(result.segments, result.partitions, ctx0, names=["mtime.reset"])
             if f.topic == "kla020-moved" and f.broker_id == 2 and f.severity != Severity.PASS]
    assert guess and guess[0].message.startswith("reassigned to broker 2:")


def test_stray_dir_check_finds_a_planted_leftover_of_the_deleted_topic(scenario):
    """KLA080 on the real cluster: nothing stray after the reassignment, the move and the
    re-creation; then a copy of the deleted 'gone'-0 planted in broker 2's other log dir is found
    (not assigned to broker 2, old topic ID), and nothing else."""
    from auditor.engines.local.checks import run_local
    from auditor.cluster.metadata_audit import PartitionMoves
    from auditor.scan import scan_log_dirs
    from checks.framework.base import AuditContext, Severity
    from checks.framework.config import Config
    kc = scenario["kc"]
    dirs = _all_log_dirs(kc)

    def stray():
        log = ml.read_metadata_log(dirs, history=True)
        ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=Config({}, source="test"),
                           partition_moves=PartitionMoves.from_log(log))
        result = scan_log_dirs(dirs, "index")
        return [f for f in run_local(result.segments, result.partitions, ctx, stats={}, names=["metadata.stray_dir"])
                if f.severity != Severity.PASS]

    assert stray() == []
    planted = kc.nodes[2].log_dirs[1] / "gone-0"
    shutil.copytree(scenario["old_gone_copy"], planted)
    found = stray()
    assert len(found) == 1, [f.message for f in found]
    f = found[0]
    assert (f.topic, f.partition, f.broker_id, f.log_dir) == ("gone", 0, 2, str(planted.parent))
    assert "not assigned to broker 2 by the metadata log (replicas [3])" in f.message
    assert f"its partition.metadata topic ID {scenario['old_gone']} is not the current ID of gone" in f.message


def test_absent_replica_and_wrong_log_dir_checks(scenario, tmp_path):
    """KLA081 / KLA082 on the real cluster: nothing on the live dirs; then on a copy of broker 2's
    two log dirs (and the metadata log), a replica dir moved by hand to the other log dir and one
    deleted are found, and nothing else."""
    from auditor.engines.local.checks import run_local
    from auditor.cluster.metadata_audit import PartitionMoves
    from auditor.scan import scan_log_dirs
    from checks.framework.base import AuditContext, Severity
    from checks.framework.config import Config
    kc = scenario["kc"]
    names = ["metadata.absent_replica", "metadata.wrong_log_dir"]

    def run(dirs):
        log = ml.read_metadata_log(dirs, history=True)
        ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=Config({}, source="test"),
                           partition_moves=PartitionMoves.from_log(log))
        result = scan_log_dirs(dirs, "index")
        return [f for f in run_local(result.segments, result.partitions, ctx, stats={}, names=names)
                if f.severity != Severity.PASS]

    assert run(_all_log_dirs(kc)) == []
    copies = []
    for d in kc.nodes[2].log_dirs:
        c = copy_live_dir(d, tmp_path / "node-2" / d.name)
        shutil.rmtree(c / ml.METADATA_DIR_NAME, ignore_errors=True)
        copies.append(c)
    copy_live_dir(scenario["metadata_dir"], tmp_path / "meta" / ml.METADATA_DIR_NAME)
    src = next(c for c in copies if (c / "events-1").is_dir())
    dst = next(c for c in copies if c != src)
    shutil.move(str(src / "events-1"), str(dst / "events-1"))
    orders0 = next(c / "orders-0" for c in copies if (c / "orders-0").is_dir())
    shutil.rmtree(orders0)
    found = run(copies + [tmp_path / "meta"])
    got = sorted((f.code, f.topic, f.partition, f.broker_id) for f in found)
    assert got == [("KLA081", "orders", 0, 2), ("KLA082", "events", 1, 2)], [f.message for f in found]
    wrong = next(f for f in found if f.code == "KLA082")
    assert wrong.message == (f"on broker 2: in {dst} but the metadata log places it in {src} "
                             f"(directory ID {wrong.evidence[0]['directory_id']})")


METADATA_CODES = ("KLA020", "KLA080", "KLA081", "KLA082", "KLA083")


def _metadata_findings(outcome) -> list[tuple]:
    return sorted((f.code, f.severity.name, f.topic or "", -1 if f.partition is None else f.partition,
                   -1 if f.broker_id is None else f.broker_id, f.log_dir or "", f.message,
                   repr(f.evidence)) for f in outcome.findings if f.code in METADATA_CODES)


def test_audit_from_manifests_knows_what_disk_mode_knows(scenario, tmp_path):
    """Manifests carry the metadata log (issue 11 part 5): `collect` on each broker (on a copy of
    the cluster's six log dirs taken at one moment, so both sides read the same bytes), then the
    audit from the three manifests gives the same topic configs and config sources, the same
    KLA020 wording naming the reassignment and the log-dir move with their metadata offsets, the
    same KLA080-083 findings and notes as the disk-mode audit of the same log dirs, on the driver
    and on Spark. The most advanced of the three metadata copies is used, as in disk mode."""
    from auditor.audit import AuditRequest, run_audit
    from auditor.manifest import CLUSTER_METADATA_FILE, collect_manifest, read_cluster_metadata
    kc = scenario["kc"]
    dirs = []
    for node_id, node in kc.nodes.items():
        for d in node.log_dirs:
            dirs.append(copy_live_dir(d, tmp_path / f"node-{node_id}" / d.name))
    manifests = []
    for node_id in kc.nodes:
        out = tmp_path / "manifests" / f"broker-{node_id}"
        res = collect_manifest(sorted((tmp_path / f"node-{node_id}").iterdir()), out, "headers")
        assert (out / CLUSTER_METADATA_FILE).is_file(), res.cluster_parts
        manifests.append(str(out))
    disk_log = ml.read_metadata_log(dirs, history=True)
    log, notes = read_cluster_metadata(manifests)
    assert notes == [] and log.metadata_dir == disk_log.metadata_dir
    assert set(log.other_metadata_dirs) == set(disk_log.other_metadata_dirs)
    assert log.state == disk_log.state and log.history == disk_log.history
    assert {k: (n, str(p)) for k, (n, p) in log.dir_ids.items()} == {
        k: (n, str(p)) for k, (n, p) in disk_log.dir_ids.items()}
    config = tmp_path / "audit.yaml"
    config.write_text("checks:\n  mtime.reset:\n    min_record_span_ms: 4000\n    replica_skew_ms: 3000\n"
                      "    packed_ratio: 0.2\n")
    as_of_ms = int(time.time() * 1000)
    common = dict(config_path=str(config), as_of_ms=as_of_ms, depth="headers")
    disk = run_audit(AuditRequest(log_dirs=[str(d) for d in dirs], engine="local", **common))
    local = run_audit(AuditRequest(manifests=manifests, engine="local", **common))
    assert disk.topic_config_sources["orders"]["retention.ms"] == "metadata log: topic config"
    assert disk.topic_config_sources["gone"]["retention.ms"] == "metadata log: cluster default"
    found = _metadata_findings(disk)
    codes = {f[0] for f in found}
    assert {"KLA020", "KLA080", "KLA083"} <= codes, found   # KLA080: the planted leftover of 'gone'
    moves = [f for f in found if f[0] == "KLA020" and f[6].startswith(("reassigned from", "moved from log dir"))]
    assert len(moves) >= 2 and all("metadata_offset" in f[7] for f in moves), found
    assert local.topic_config_sources == disk.topic_config_sources
    assert local.metadata_notes == disk.metadata_notes
    assert _metadata_findings(local) == found
    spark = run_audit(AuditRequest(manifests=manifests, engine="spark", master="local[1]", **common))
    assert spark.topic_config_sources == disk.topic_config_sources
    assert _metadata_findings(spark) == found
    print(f"\naudit from 3 manifests = disk mode: {len(found)} metadata findings "
          f"({', '.join(sorted(codes))}), configs of {len(disk.topic_config_sources)} topics with their sources")
    for f in found:
        print(f"  {f[0]} {f[2]}-{f[3]} broker {f[4]}: {f[6]}")


def test_topic_config_check_on_the_cluster(scenario):
    """KLA083 on the real cluster, from disk: the audit's own config step reads the metadata log
    (no --bootstrap-server) and the check names the topic whose message.timestamp.type was altered
    to LogAppendTime (value, Kafka's default, where it came from) and no other topic; then a
    cluster-wide default set with Kafka's ConfigCommand (log.message.timestamp.after.max.ms) is
    found on every topic, named as the metadata log's cluster default."""
    from auditor.audit import AuditRequest, audit_context
    from auditor.engines.local.checks import run_local
    from auditor.scan import scan_log_dirs
    from checks.framework.base import Severity
    kc = scenario["kc"]
    dirs = _all_log_dirs(kc)
    result = scan_log_dirs(dirs, "stat")

    def kla083():
        ctx = audit_context(AuditRequest(log_dirs=[str(d) for d in dirs]), lambda m: None)
        return sorted(((f.topic, f.evidence[0]["config"], f.evidence[0]["value"], f.evidence[0]["kafka_default"],
                        f.evidence[0]["source"]), f.message)
                      for f in run_local(result.segments, result.partitions, ctx, stats={}, names=["metadata.topic_config"])
                      if f.severity != Severity.PASS)

    found = kla083()
    assert [k for k, _ in found] == [
        ("orders", "message.timestamp.type", "LogAppendTime", "CreateTime", "metadata log: topic config")], found
    assert found[0][1].startswith("message.timestamp.type = LogAppendTime (the cluster's topic config; "
                                  "Kafka's default CreateTime)")
    _config_command(kc, "--entity-type", "brokers", "--entity-default", "--alter",
                    "--add-config", "log.message.timestamp.after.max.ms=7200000")
    try:
        _wait(lambda: len(kla083()) > 1, "the cluster default in the metadata log")
        found = kla083()
        in_log = {t.name for t in ml.read_metadata_log(dirs).state.topics.values()}
        topics = sorted({p["topic"] for p in result.partitions if p["topic"] in in_log})
        assert {"orders", "events", "gone"} <= set(topics)
        assert [k for k, _ in found] == sorted(
            [("orders", "message.timestamp.type", "LogAppendTime", "CreateTime", "metadata log: topic config")]
            + [(t, "message.timestamp.after.max.ms", "7200000", "3600000", "metadata log: cluster default")
               for t in topics]), found
        assert all("(the cluster-wide default in the metadata log; Kafka's default 3600000)" in m
                   for k, m in found if k[1] == "message.timestamp.after.max.ms")
    finally:
        _config_command(kc, "--entity-type", "brokers", "--entity-default", "--alter",
                        "--delete-config", "log.message.timestamp.after.max.ms")
