"""The legacy (mtime) lookup predicted from disk equals what a real Kafka 3.9 broker answers to
ListOffsets **v0** (KIP-896 removed v0 from 4.x brokers; 3.9 still serves it, KRaft mode).

One 2-broker 3.9.1 cluster (2 log dirs per broker) for the module. Topics rolled every ~1.1 s
(``segment.ms``; the roll follows record timestamps, which the producer sets to the wall clock) so
that each segment's ``.log`` mtime is distinct. For every target (before, at, between and after
the mtimes, ±1 ms around each) and for ``max_num_offsets`` 1 and 10, the v0 answer a raw request
(tests/harness/list_offsets_v0.py) gets from the leader equals:

* the Python API: ``auditor.replay.predict`` (max 1) and ``auditor.replay.predict_legacy_offsets``
  (the list form), from the leader's partition dir scanned at depth ``headers``;
* ``kafka-audit replay-check --api legacy --json`` in disk mode on the leader's log dir (max 1; the
  empty answer is exit 1).

Cases: a 2-replica topic, compared with broker 1 leading, then with broker 2 leading (reassignment
order [2, 1] and a preferred-leader election), each replica also asked as a debugging client
(replica id -2: any replica answers from its own log, unclamped); a topic reassigned from broker 1
to broker 2 (the new replica's files, and so mtimes, are all new: the seed's failure: targets
between the old mtimes now get the empty answer); a replica moved between the log dirs of broker 1
(alterReplicaLogDirs; mtimes reset the same way).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# tier (tests/harness/tiers.py): its module fixture starts a Kafka 3.9.1 cluster without kafka_cluster_factory
pytestmark = pytest.mark.live
from confluent_kafka import ElectionType, TopicPartition

from auditor import replay
from auditor.cli import main as kafka_audit_main
from auditor.scan import scan_log_dirs
from harness.kafka import KafkaCluster, wait_past_newest_write, wait_until
from harness.list_offsets_v0 import CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID, ListOffsetsV0Client
from harness.moves import move_log_dir, reassign, wait_replica_quiet

LEGACY_KAFKA_VERSION = os.environ.get("LEGACY_KAFKA_VERSION", "3.9.1")
REPO = Path(__file__).resolve().parents[1]
ROLL_CONFIG = {"segment.ms": "1000", "segment.jitter.ms": "0"}
ROUNDS = 9
MAX_OFFSETS = (1, 10)
#: ``replay-check --legacy-max-offsets 10`` is compared on every 4th target (each run scans the dir).
CLI_LIST_EVERY = 4
CLI_LISTS = [0, 0]  # CLI runs with max offsets 10, and how many of them listed more than one offset
HOUR = 3_600_000
#: socket timeout of the raw v0 client: a loaded 2-core machine stalls a broker JVM for many seconds
V0_TIMEOUT_S = 60.0
TOTALS: dict[str, int] = {}
"""case -> targets compared (each with max offsets 1 and 10, the Python API and the CLI)."""
DETAILS: dict[str, str] = {}


@pytest.fixture(scope="module")
def legacy_cluster(tmp_path_factory):
    """A 2-broker Kafka 3.9.1 cluster, 2 log dirs each, with three rolled topics."""
    kc = KafkaCluster(tmp_path_factory.mktemp("kafka-3.9"), brokers=2, log_dirs_per_broker=2,
                      version=LEGACY_KAFKA_VERSION)
    try:
        kc.start()
        kc.create_topic("v0-pair", replica_assignment=[[1, 2]], config=ROLL_CONFIG)
        kc.create_topic("v0-reassigned", replica_assignment=[[1]], config=ROLL_CONFIG)
        kc.create_topic("v0-logdir", replica_assignment=[[1]], config=ROLL_CONFIG)
        for r in range(ROUNDS):
            for topic in ("v0-pair", "v0-reassigned", "v0-logdir"):
                # timestamps left to the producer (now): each round's batch rolls a new segment
                kc.produce(topic, [(f"{topic}-{r}-{i}", "x" * 200, None) for i in range(5)], partition=0)
            wait_past_newest_write([d for t in ("v0-pair", "v0-reassigned", "v0-logdir")
                                    for d in kc.partition_dirs(t, 0).values()],
                                   int(ROLL_CONFIG["segment.ms"]), f"round {r}'s segments to be due to roll")
        yield kc
    finally:
        kc.stop()


# ---------------------------------------------------------------------------------------------
# what the disk says (our side)
# ---------------------------------------------------------------------------------------------

def _replica(cluster: KafkaCluster, topic: str, node_id: int):
    """(log dir, segment views, partition row) of the replica of ``topic``-0 on ``node_id``."""
    pdir = cluster.partition_dirs(topic, 0)[node_id]
    result = scan_log_dirs([pdir.parent], "headers")
    rows = [r for r in result.segments if r["topic"] == topic and r["partition"] == 0]
    prow = next(p for p in result.partitions if p["topic"] == topic and p["partition"] == 0)
    views = replay.segment_views(rows)
    assert views, f"no live segment of {topic}-0 under {pdir}"
    return pdir.parent, views, prow


def _targets(mtimes: list[int], as_of_ms: int) -> list[int]:
    """Before, at, ±1 ms around and between the mtimes, and after them (before the audit time,
    and an hour after it: the log end offset's pair)."""
    ms = sorted(set(mtimes))
    targets = {946_684_800_000, ms[0] - 60_000, ms[0] - 1, as_of_ms + HOUR}
    for m in ms:
        targets.update((m - 1, m, m + 1))
    for a, b in zip(ms, ms[1:]):
        targets.add((a + b) // 2)
    targets.add((ms[-1] + as_of_ms) // 2)
    # from the audit time on, the answer depends on the broker's clock when it answers (the log end
    # offset's pair is (LEO, now)): no target there but the one an hour later
    return sorted(t for t in targets if t > 0 and not as_of_ms <= t <= as_of_ms + 60_000)


def _cli_legacy(log_dir: Path, topic: str, target: int, max_n: int | None = None) -> tuple[int, int | None]:
    """``kafka-audit replay-check --api legacy --json`` in disk mode: (exit code, legacy offset);
    with ``max_n``, (exit code, the v0 list ``--legacy-max-offsets max_n`` printed)."""
    out = io.StringIO()
    extra = ["--legacy-max-offsets", str(max_n)] if max_n is not None else []
    with contextlib.redirect_stdout(out):
        rc = kafka_audit_main(["replay-check", "--topic", topic, "--at", str(target), "--log-dir", str(log_dir),
                               "--api", "legacy", "--json", *extra])
    doc = json.loads(out.getvalue())
    (part,) = doc["partitions"]
    if max_n is not None:
        assert part["evidence"][0]["legacy_max_offsets"] == max_n
        return rc, part["evidence"][0]["legacy_offsets"]
    return rc, part["evidence"][0]["legacy_offset"]


def _compare(cluster: KafkaCluster, topic: str, leader: int, case: str, extra_mtimes: list[int] = (),
             cli: bool = True) -> dict:
    """Every target, max offsets 1 and 10: our prediction for the leader's replica == its v0 answer."""
    assert cluster.leader(topic, 0) == leader
    _wait_serving(cluster, topic, leader)
    log_dir, views, prow = _replica(cluster, topic, leader)
    now = int(time.time() * 1000)
    mtimes = [v.log_mtime_ms for v in views] + list(extra_mtimes)
    targets = _targets(mtimes, now)
    mismatches, empties = [], 0
    with ListOffsetsV0Client(cluster.nodes[leader].port, V0_TIMEOUT_S) as client:
        for target in targets:
            for max_n in MAX_OFFSETS:
                answer = client.ask(topic, 0, target, max_n, CONSUMER_REPLICA_ID)
                assert answer.error_code == 0, (case, target, answer)
                mine = replay.predict_legacy_offsets(
                    views, target, log_start_offset=prow["log_start_offset"], log_end_offset=prow["log_end_offset"],
                    as_of_ms=now, max_num_offsets=max_n, high_watermark=prow["log_end_offset"])
                if mine != answer.offsets:
                    mismatches.append((target, max_n, mine, answer.offsets))
                if cli and max_n > 1 and targets.index(target) % CLI_LIST_EVERY == 0:
                    rc, listed = _cli_legacy(log_dir, topic, target, max_n)
                    CLI_LISTS[0] += 1
                    CLI_LISTS[1] += len(listed) > 1
                    if listed != answer.offsets or rc != (0 if answer.offsets else 1):
                        mismatches.append((target, f"replay-check --legacy-max-offsets {max_n}", rc, listed, answer.offsets))
                if max_n == 1:
                    empties += not answer.offsets
                    pred = replay.predict(views, target, log_start_offset=prow["log_start_offset"],
                                          log_end_offset=prow["log_end_offset"],
                                          high_watermark=prow["high_watermark"], as_of_ms=now)
                    single = [pred.legacy.offset] if pred.legacy.offset is not None else []
                    if single != answer.offsets:
                        mismatches.append((target, "predict()", single, answer.offsets))
                    if cli:
                        rc, offset = _cli_legacy(log_dir, topic, target)
                        if ([offset] if offset is not None else []) != answer.offsets or rc != (0 if offset is not None else 1):
                            mismatches.append((target, "replay-check", rc, offset, answer.offsets))
    assert not mismatches, (f"{case}: {len(mismatches)} of {len(targets)} targets differ from the "
                            f"{LEGACY_KAFKA_VERSION} broker's v0 answers: {mismatches[:8]}")
    TOTALS[case] = len(targets)
    DETAILS[case] = f"{len(views)} segments, {len(set(mtimes))} distinct mtimes, {empties} empty answers"
    return {"targets": len(targets), "empties": empties, "answered": len(targets) - empties, "segments": len(views),
            "mtimes": sorted(v.log_mtime_ms for v in views)}


def _debug_compare(cluster: KafkaCluster, topic: str, node_id: int, case: str) -> int:
    """A debugging client (replica id -2) is answered by any replica from its own log, unclamped."""
    _, views, prow = _replica(cluster, topic, node_id)
    now = int(time.time() * 1000)
    targets = _targets([v.log_mtime_ms for v in views], now)
    with ListOffsetsV0Client(cluster.nodes[node_id].port, V0_TIMEOUT_S) as client:
        for target in targets:
            for max_n in MAX_OFFSETS:
                answer = client.ask(topic, 0, target, max_n, DEBUGGING_REPLICA_ID)
                mine = replay.predict_legacy_offsets(
                    views, target, log_start_offset=prow["log_start_offset"], log_end_offset=prow["log_end_offset"],
                    as_of_ms=now, max_num_offsets=max_n)
                assert answer.error_code == 0 and mine == answer.offsets, (case, node_id, target, max_n, mine, answer)
    TOTALS[case] = len(targets)
    return len(targets)


def _wait_serving(cluster: KafkaCluster, topic: str, node_id: int, timeout_s: float = 90.0) -> None:
    """Until ``node_id`` answers v0 as the leader: the metadata a client sees can name the new
    leader before the broker has taken over (NOT_LEADER_OR_FOLLOWER, error 6, meanwhile)."""
    deadline = time.monotonic() + timeout_s
    with ListOffsetsV0Client(cluster.nodes[node_id].port, V0_TIMEOUT_S) as client:
        while (code := client.ask(topic, 0, -1, 1).error_code) != 0:
            assert time.monotonic() < deadline, f"broker {node_id} does not serve {topic}-0 (error {code})"
            time.sleep(0.2)


def _elect_preferred(cluster: KafkaCluster, topic: str, want: int) -> None:
    tp = TopicPartition(topic, 0)
    cluster.admin().elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=30)
    deadline = time.monotonic() + 90
    while cluster.leader(topic, 0) != want:
        assert time.monotonic() < deadline, f"{topic}-0: broker {want} did not become leader"
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------------
# the cases
# ---------------------------------------------------------------------------------------------

def test_v0_is_served_and_rejected_shapes(legacy_cluster):
    """The raw client reads a real v0 answer; a topic that does not exist is an error code, not a crash."""
    with ListOffsetsV0Client(legacy_cluster.nodes[1].port, V0_TIMEOUT_S) as client:
        latest = client.ask("v0-pair", 0, -1, 1)
        assert latest.error_code == 0 and latest.offsets == [ROUNDS * 5]
        earliest = client.ask("v0-pair", 0, -2, 1)
        assert earliest.error_code == 0 and earliest.offsets == [0]
        missing = client.ask("no-such-topic", 0, 1, 1)
        assert missing.error_code == 3 and missing.offsets == []  # UNKNOWN_TOPIC_OR_PARTITION


def test_two_replicas_each_leading(legacy_cluster):
    kc = legacy_cluster
    first = _compare(kc, "v0-pair", 1, "pair, broker 1 leads")
    assert first["segments"] >= ROUNDS - 1 and first["empties"] >= 2
    assert len(set(first["mtimes"])) >= ROUNDS - 1, "segments should have distinct mtimes"
    _debug_compare(kc, "v0-pair", 2, "pair, broker 2 as debugging replica")
    reassign(kc, "v0-pair", 0, [2, 1])
    _elect_preferred(kc, "v0-pair", 2)
    second = _compare(kc, "v0-pair", 2, "pair, broker 2 leads")
    assert second["segments"] >= ROUNDS - 1
    _debug_compare(kc, "v0-pair", 1, "pair, broker 1 as debugging replica")


def test_after_inter_broker_reassignment(legacy_cluster):
    kc = legacy_cluster
    before = _compare(kc, "v0-reassigned", 1, "reassigned, before (broker 1)")
    wait_replica_quiet(kc, "v0-reassigned", 0, quiet_s=1.0)  # the new replica's mtimes clearly after the old ones
    reassign(kc, "v0-reassigned", 0, [2])
    wait_until(lambda: kc.leader("v0-reassigned", 0) == 2 and 1 not in kc.partition_dirs("v0-reassigned", 0), 90,
               "broker 2 to lead v0-reassigned-0 and the old replica on broker 1 to be removed")
    # the old mtimes are targets too: there the new replica answers nothing (every mtime is newer)
    after = _compare(kc, "v0-reassigned", 2, "reassigned, after (broker 2)", extra_mtimes=before["mtimes"])
    assert min(after["mtimes"]) > max(before["mtimes"]), "the new replica's files should all be new"
    assert after["empties"] > before["empties"]
    assert after["answered"] > after["segments"], "targets at and after the new mtimes get answers"


def test_after_log_dir_move(legacy_cluster):
    kc = legacy_cluster
    before = _compare(kc, "v0-logdir", 1, "log-dir move, before")
    current = kc.partition_dir("v0-logdir", 0, 1).parent
    other = next(d for d in kc.log_dirs(1) if d != current)
    wait_replica_quiet(kc, "v0-logdir", 0, quiet_s=1.0)  # the moved files' mtimes clearly after the old ones
    move_log_dir(kc, "v0-logdir", 0, 1, other)   # returns once the old dir is renamed ...-delete too
    assert kc.partition_dir("v0-logdir", 0, 1).parent == other
    after = _compare(kc, "v0-logdir", 1, "log-dir move, after", extra_mtimes=before["mtimes"])
    assert min(after["mtimes"]) > max(before["mtimes"]), "the moved replica's files should all be new"
    assert after["empties"] > before["empties"]
    assert after["answered"] > after["segments"], "targets at and after the new mtimes get answers"


def test_cli_subprocess_agrees(legacy_cluster):
    """One real ``python -m auditor.cli`` run per answer kind (found, empty), as a script calls it."""
    kc = legacy_cluster
    log_dir, views, _ = _replica(kc, "v0-logdir", 1)
    mtimes = sorted(v.log_mtime_ms for v in views)
    with ListOffsetsV0Client(kc.nodes[1].port, V0_TIMEOUT_S) as client:
        for target, rc_expected in ((mtimes[0] - 60_000, 1), (mtimes[-1] + 1, 0)):
            answer = client.ask("v0-logdir", 0, target, 1)
            proc = subprocess.run([sys.executable, "-m", "auditor.cli", "replay-check", "--topic", "v0-logdir",
                                   "--at", str(target), "--log-dir", str(log_dir), "--api", "legacy", "--json"],
                                  capture_output=True, text=True, cwd=REPO, timeout=300)
            assert proc.returncode == rc_expected, proc.stderr
            (part,) = json.loads(proc.stdout)["partitions"]
            offset = part["evidence"][0]["legacy_offset"]
            assert ([offset] if offset is not None else []) == answer.offsets
    # the table form prints the v0 list too; flags it cannot answer are usage errors (exit 2)
    target = mtimes[-1] + 1
    with ListOffsetsV0Client(kc.nodes[1].port, V0_TIMEOUT_S) as client:
        listed = client.ask("v0-logdir", 0, target, 10).offsets
    assert len(listed) > 1
    base = [sys.executable, "-m", "auditor.cli", "replay-check", "--topic", "v0-logdir", "--at", str(target),
            "--log-dir", str(log_dir)]
    proc = subprocess.run([*base, "--api", "legacy", "--legacy-max-offsets", "10"], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"legacy v0 answer with max offsets 10: {listed}" in proc.stdout, proc.stdout
    for bad in (["--api", "modern", "--legacy-max-offsets", "3"], ["--legacy-max-offsets", "0"]):
        proc = subprocess.run([*base, *bad], capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 2 and "--legacy-max-offsets" in proc.stderr, (bad, proc.returncode, proc.stderr)


def test_totals(capsys):
    total = sum(TOTALS.values())
    with capsys.disabled():
        print(f"\nlegacy v0 predictions vs Kafka {LEGACY_KAFKA_VERSION}: "
              + "; ".join(f"{k}: {v} targets" + (f" ({DETAILS[k]})" if k in DETAILS else "") for k, v in TOTALS.items())
              + f"; {total} targets, each with max offsets 1 and 10")
    assert len(TOTALS) == 8 and total >= 100
    with capsys.disabled():
        print(f"replay-check --legacy-max-offsets 10 = the broker's max-10 answer on {CLI_LISTS[0]} targets "
              f"({CLI_LISTS[1]} with more than one offset)")
    assert CLI_LISTS[0] >= 25 and CLI_LISTS[1] >= 10
