"""Incremental scans (``--state``) on a live broker: rows taken from the state equal a full scan.

One real broker with two log dirs, run after run, while a producer keeps appending to one topic:
segments roll, retention deletes the oldest ones, the cleaner rewrites a compacted topic, and a
replica moves to the other log dir. After each change a scan with the state runs, then a full
scan without it; every row of a segment that did not change between the two must be equal in
every column but ``scanned_at_ms`` (the time it was really read), and the state must have been
used (closed segments taken from it, not read). State files for another log dir, version or
depth, and corrupt ones, are ignored with a note; a state dir inside a log dir is refused.

Active segments are continued where the last run's walk stopped (auditor.scan.resume): a topic
appended to between runs (plain, compressed and transactional batches, an aborted transaction
for its .txnindex), then rolled, must give rows equal to a full scan column by column, with the
bytes the last run walked not read again (``skipped_bytes``). tests/test_scan_resume.py covers
the changes that must not be trusted (truncation, rewrite, new inode, rebuilt index) on copies.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
import time
from pathlib import Path

import pytest

from auditor.atomic import OutputError
from auditor.scan import scan_log_dirs
from auditor.scan.state import STATE_FORMAT, StateDirError, check_state_dir, read_state_file, state_file_name
from harness.kafka import wait_topic_config_applied, wait_until
from harness.moves import move_log_dir
from harness.scenarios import read_cleaner_checkpoint

pytestmark = pytest.mark.live

DEPTH = "headers"
ROLL = {"segment.ms": "60000", "segment.jitter.ms": "0"}
BROKER_CONFIG = {"log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "200",
                 "log.cleaner.backoff.ms": "200"}
IGNORED = {"scanned_at_ms"}
CHECKPOINT_COLUMNS = {"high_watermark", "recovery_point", "log_start_offset", "log_start_offset_source", "cleaner_offset"}


def _key(row: dict) -> tuple:
    return (row["log_dir"], row["dir_name"], row["base_offset"], row["file_state"])


def _strip(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in IGNORED}


def _log_dirs(cluster) -> list[Path]:
    return cluster.log_dirs(1)


def _assert_state_rows_equal_full_scan(cluster, state_dir: Path, busy_topic: str) -> dict:
    """A scan with the state, then a full one: rows equal except the busy topic's moving tail."""
    with_state = scan_log_dirs(_log_dirs(cluster), DEPTH, state_dir=state_dir)
    full = scan_log_dirs(_log_dirs(cluster), DEPTH)
    a = {_key(r): r for r in with_state.segments}
    b = {_key(r): r for r in full.segments}
    moving = {busy_topic, "__cluster_metadata"}  # the broker appends to its metadata log all the time
    busy = {k for k in set(a) | set(b) if a.get(k, b.get(k))["topic"] in moving}
    quiet = (set(a) | set(b)) - busy
    assert {k for k in quiet if k in a} == {k for k in quiet if k in b}, "segments differ outside the busy topic"
    for k in quiet:
        assert _strip(a[k]) == _strip(b[k]), f"{k}: state scan {_strip(a[k])} != full scan {_strip(b[k])}"
    compared_busy = 0
    for k in busy:
        if k in a and k in b and not a[k]["is_active"] and not b[k]["is_active"] and k[3] is None:
            assert _strip(a[k]) == _strip(b[k]), f"{k}: closed segment of the busy topic differs"
            compared_busy += 1
    assert compared_busy > 0, "the busy topic has closed segments to compare"
    pa_ = {(p["log_dir"], p["dir_name"]): p for p in with_state.partitions if p["topic"] not in moving}
    pb = {(p["log_dir"], p["dir_name"]): p for p in full.partitions if p["topic"] not in moving}
    assert set(pa_) == set(pb)
    for k in pa_:  # the broker rewrites its offset checkpoints every few seconds: those columns move
        diff = {c for c in pa_[k] if pa_[k][c] != pb[k][c]} - CHECKPOINT_COLUMNS
        assert not diff, f"{k}: partition rows differ in {diff}"
    counts = {"reused": 0, "read": 0, "continued": 0, "kept": 0}
    for info in with_state.log_dirs:
        for name in counts:
            counts[name] += info["scan_state"][name]
    return counts


class Producer(threading.Thread):
    """Keeps appending to one topic (one group of records per ~0.3 s, record-time rolls)."""

    def __init__(self, cluster, topic: str):
        super().__init__(daemon=True)
        self.cluster, self.topic = cluster, topic
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        t0 = int(time.time() * 1000) - 3_600_000
        step = 0
        try:
            while not self.stop_event.is_set():
                self.cluster.roll_segments(self.topic, 0, segments=1, records_per_segment=20, segment_ms=60_000,
                                           base_timestamp_ms=t0 + step * 121_000)
                step += 1
                time.sleep(0.3)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.fixture(scope="module")
def cluster(kafka_cluster_factory):
    kc = kafka_cluster_factory(brokers=1, log_dirs_per_broker=2, broker_config=BROKER_CONFIG)
    kc.create_topic("busy", config=ROLL)
    kc.create_topic("aged", config={**ROLL, "retention.ms": "-1"})
    kc.create_topic("compacted", config={**ROLL, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                         "min.compaction.lag.ms": str(86_400_000), "delete.retention.ms": "0"})
    kc.create_topic("mover", config=ROLL)
    kc.create_topic("growing", config={"segment.bytes": str(64 << 20)})
    return kc


def _wait(predicate, what: str, timeout_s: float = 180) -> None:
    wait_until(predicate, timeout_s, what, interval_s=0.25)


def _produce_compacted(cluster, base_ms: int, groups: int) -> None:
    """Groups of 50 records over 20 keys, each group 121 s of record time after the last (a new segment)."""
    for g in range(groups):
        cluster.produce("compacted", [(f"key-{i % 20}", f"{g}-{i}-" + "v" * 200, base_ms + g * 121_000 + i)
                                      for i in range(50)], linger_ms=100)


def _inodes(cluster, topic: str) -> dict[str, int]:
    d = cluster.partition_dir(topic, 0)
    return {p.name: p.stat().st_ino for p in d.glob("*.log")}


def test_state_rows_equal_full_scans_while_the_broker_works(cluster, tmp_path):
    state = tmp_path / "state"
    producer = Producer(cluster, "busy")
    producer.start()
    try:
        now = int(time.time() * 1000)
        cluster.roll_segments("aged", 0, segments=8, records_per_segment=30, base_timestamp_ms=now - 8 * 3_600_000,
                              segment_ms=60_000)
        cluster.roll_segments("mover", 0, segments=4, records_per_segment=30)
        # keys overwritten many times; the cleaner waits (min.compaction.lag.ms) until the compaction step
        # (produce() returns once the broker acknowledged every record: nothing to settle)
        _produce_compacted(cluster, now - 3 * 3_600_000, groups=6)
        # the comparison needs a closed segment of the busy topic: wait for its producer's first roll
        _wait(lambda: len(list(cluster.partition_dir("busy", 0).glob("*.log"))) >= 2,
              "the busy topic to roll a segment (a closed one to compare)")

        first = _assert_state_rows_equal_full_scan(cluster, state, "busy")
        assert first["reused"] == 0 and first["kept"] > 10, first
        second = _assert_state_rows_equal_full_scan(cluster, state, "busy")
        # all closed ones from their proof, the active ones continued, but what rolled/changed
        assert second["reused"] + second["continued"] >= first["kept"] - 2, (first, second)
        assert second["continued"] > 0, second

        # more data: new segments are read, old ones come from the state
        cluster.roll_segments("aged", 0, segments=3, records_per_segment=30, base_timestamp_ms=now - 3_000_000,
                              segment_ms=60_000)
        third = _assert_state_rows_equal_full_scan(cluster, state, "busy")
        assert third["reused"] > 0 and third["read"] > 0

        # retention deletes the oldest segments of 'aged' (their records are 5-8 h old)
        before = set(_inodes(cluster, "aged"))
        cluster.alter_topic_config("aged", {"retention.ms": str(5 * 3_600_000)})
        _wait(lambda: len(set(_inodes(cluster, "aged")) & before) < len(before) - 2, "retention to delete segments")
        _wait(lambda: not list(cluster.partition_dir("aged", 0).glob("*.deleted")), "deleted files to go")
        _assert_state_rows_equal_full_scan(cluster, state, "busy")

        # the cleaner rewrites the compacted topic's segments (new inodes behind the same names)
        old = _inodes(cluster, "compacted")
        checkpoint_before = read_cleaner_checkpoint(cluster, "compacted")
        _produce_compacted(cluster, now - 2 * 3_600_000, groups=3)
        cluster.alter_topic_config("compacted", {"min.compaction.lag.ms": "0"})
        _wait(lambda: any(_inodes(cluster, "compacted").get(n) not in (None, ino) for n, ino in old.items()),
              "the cleaner to rewrite a segment")
        _wait(lambda: not [p for p in cluster.partition_dir("compacted", 0).iterdir()
                           if p.suffix in (".cleaned", ".swap", ".deleted")], "the cleaner to finish")
        # the cleaner writes cleaner-offset-checkpoint after the swap: a scan before that and one
        # after it would read different cleaner offsets
        _wait(lambda: read_cleaner_checkpoint(cluster, "compacted") not in (None, checkpoint_before),
              "the cleaner's checkpoint for compacted-0")
        _assert_state_rows_equal_full_scan(cluster, state, "busy")

        # a replica moves to the other log dir: its files are new there
        source = cluster.partition_dir("mover", 0).parent
        target = next(d for d in cluster.log_dirs(1) if d != source)
        move_log_dir(cluster, "mover", 0, 1, target)
        _wait(lambda: not any(p.name.startswith("mover-0.") for p in source.iterdir()), "the old replica to go")
        moved = _assert_state_rows_equal_full_scan(cluster, state, "busy")
        assert moved["reused"] > 0
        last = _assert_state_rows_equal_full_scan(cluster, state, "busy")
        assert last["reused"] > last["read"], last  # read: active segments and what the producer just rolled
    finally:
        producer.stop_event.set()
        producer.join(30)
    assert producer.error is None, producer.error


def _growing_rows(res) -> dict:
    return {r["base_offset"]: r for r in res.segments if r["topic"] == "growing"}


def _assert_growing_equal(cluster, state: Path) -> tuple[dict, dict]:
    """A scan with the state then a full one: every column of every 'growing' row equal."""
    with_state = scan_log_dirs(_log_dirs(cluster), DEPTH, state_dir=state)
    full = scan_log_dirs(_log_dirs(cluster), DEPTH)
    a, b = _growing_rows(with_state), _growing_rows(full)
    assert a.keys() == b.keys() and a
    for base in a:
        for column in a[base]:
            if column not in IGNORED:
                assert a[base][column] == b[base][column], f"growing {base} {column}: {a[base][column]!r} != {b[base][column]!r}"
    counts = {"continued": 0, "skipped_bytes": 0, "read": 0}
    for info in with_state.log_dirs:
        for name in counts:
            counts[name] += info["scan_state"][name]
    return counts, a


def _grow(cluster, n: int, tag: str) -> None:
    cluster.produce("growing", [(f"k{i % 7}", f"{tag}-{i}-" + "x" * 300) for i in range(n)], linger_ms=20)
    cluster.produce("growing", [(f"z{i}", f"{tag}-{i}-" + "y" * 300) for i in range(n // 2)], compression="gzip")
    cluster.transaction("growing", [(f"t{i}", f"{tag}-{i}") for i in range(5)], commit=True)
    cluster.transaction("growing", [(f"a{i}", f"{tag}-{i}") for i in range(5)], commit=False)


def test_active_segments_continue_where_the_last_run_stopped(cluster, tmp_path):
    state = tmp_path / "state"
    _grow(cluster, 4000, "one")
    first, rows = _assert_growing_equal(cluster, state)
    (active,) = [r for r in rows.values() if r["is_active"]]
    assert active["batch_count"] > 3 and active["abort_markers"] == 1 and active["aborted_txns"] == 1, active
    walked = active["log_size_bytes"]
    assert walked > 500_000, walked

    # appended between runs: plain, gzip and transactional batches, another aborted transaction
    _grow(cluster, 2000, "two")
    second, rows = _assert_growing_equal(cluster, state)
    assert second["continued"] >= 1 and second["skipped_bytes"] >= walked, second
    (active,) = [r for r in rows.values() if r["is_active"]]
    assert active["log_size_bytes"] > walked and active["abort_markers"] == 2 and active["aborted_txns"] == 2
    assert active["codecs"] == ["gzip", "none"] and active["commit_markers"] == 2, active

    # the active segment rolls (record time past segment.ms): the closed one continues, then is kept closed
    grown = active["log_size_bytes"]
    cluster.alter_topic_config("growing", {"segment.ms": "1000"})
    # the broker must have applied it to the log before the appends below, or nothing rolls: its own
    # log line (DescribeConfigs answers from the metadata image, before the log has the change)
    wait_topic_config_applied(cluster, "growing", "segment.ms", 1000)
    # a record-time roll: the next records must be stamped more than segment.ms after the active
    # segment's first batch (whose timestamp is at most the newest one the scan saw)
    _wait(lambda: time.time() * 1000 - active["max_timestamp_ms"] > 1_100,
          "the clock to pass segment.ms after the active segment's newest record", timeout_s=30)
    _grow(cluster, 100, "three")
    _wait(lambda: len(list(cluster.partition_dir("growing", 0).glob("*.log"))) >= 2, "'growing' to roll")
    third, rows = _assert_growing_equal(cluster, state)
    closed = [r for r in rows.values() if not r["is_active"]]
    assert closed and third["skipped_bytes"] >= grown, (third, closed)
    _assert_growing_equal(cluster, state)  # the closed one now comes from its proof


def test_untrusted_states_are_ignored_with_a_note(cluster, tmp_path):
    log_dir = cluster.log_dirs(1)[0]
    state = tmp_path / "state"
    scan_log_dirs([log_dir], DEPTH, state_dir=state)
    path = state / state_file_name(str(log_dir), DEPTH)
    assert path.exists()
    # another log dir's state under this log dir's name
    other = cluster.log_dirs(1)[1]
    scan_log_dirs([other], DEPTH, state_dir=tmp_path / "other")
    os.replace(tmp_path / "other" / state_file_name(str(other), DEPTH), path)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert res.log_dirs[0]["scan_state"]["reused"] == res.log_dirs[0]["scan_state"]["continued"] == 0
    assert any("scan state log_dir" in p and "ignored" in p for p in res.log_dirs[0]["problems"]), res.log_dirs[0]
    # another version (a whole, well-formed file)
    scan_log_dirs([log_dir], DEPTH, state_dir=state)
    _rewrite_state(path, version="0.0.1")
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert any("scan state version = '0.0.1'" in p for p in res.log_dirs[0]["problems"]), res.log_dirs[0]
    assert res.log_dirs[0]["scan_state"]["reused"] == 0
    # other row columns
    _rewrite_state(path, columns="0123456789abcdef")
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert any("scan state columns = " in p for p in res.log_dirs[0]["problems"]), res.log_dirs[0]
    # corrupt, torn (cut short), altered (one byte of a row changed, recompressed: the CRC-32 differs)
    whole = path.read_bytes()
    lines, meta = read_state_file(path)
    plain = _state_text(meta, lines)
    at = plain.index(b"[") + 1
    for bad in (b"PAR1 not really", whole[: len(whole) // 2], _packed(plain[:at] + b"7" + plain[at + 1:])):
        assert bad != whole
        path.write_bytes(bad)
        res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
        assert any("scan state unreadable" in p for p in res.log_dirs[0]["problems"]), res.log_dirs[0]
        assert res.log_dirs[0]["scan_state"]["reused"] == 0 and res.log_dirs[0]["scan_state"]["continued"] == 0
    # after the ignored one, a good state is written again and trusted
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert res.log_dirs[0]["scan_state"]["reused"] + res.log_dirs[0]["scan_state"]["continued"] > 0
    assert read_state_file(path)[1]["format"] == STATE_FORMAT
    # another depth has its own state file
    res = scan_log_dirs([log_dir], "index", state_dir=state)
    assert res.log_dirs[0]["scan_state"]["reused"] == 0


def _state_text(meta: dict, lines: list[str]) -> bytes:
    """A state file's text (before compression): identity, lines, end line with count and CRC-32."""
    body = (json.dumps(meta, sort_keys=True) + "\n" + "".join(line + "\n" for line in lines)).encode()
    return body + f"end\t{len(lines)}\t{zlib.crc32(body):08x}\n".encode()


def _packed(data: bytes) -> bytes:
    """A state file's bytes from its text (one zlib stream)."""
    return zlib.compress(data)


def _rewrite_state(path: Path, **identity) -> None:
    """The state file with its identity changed, whole and with a matching count and CRC-32."""
    lines, meta = read_state_file(path)
    path.write_bytes(_packed(_state_text({**meta, **identity}, lines)))


def test_state_dir_inside_a_log_dir_is_refused(cluster, tmp_path):
    log_dir = cluster.log_dirs(1)[0]
    with pytest.raises(StateDirError, match="inside the scanned log dir"):
        check_state_dir(log_dir / "kafka-audit-state", [log_dir])
    with pytest.raises(StateDirError):
        scan_log_dirs([log_dir], DEPTH, state_dir=log_dir / "x")
    assert not (log_dir / "x").exists()
    check_state_dir(tmp_path / "s", [log_dir])  # not there yet, outside: fine
    (tmp_path / "s").mkdir()
    check_state_dir(tmp_path / "s", [log_dir])  # there, outside: fine
    # an existing dir inside a log dir (a stand-in beside the broker's), also reached through a
    # symlink from outside: refused
    logs = tmp_path / "logs"
    inside = logs / "a" / "state"
    inside.mkdir(parents=True)
    (tmp_path / "link").symlink_to(inside)
    for state in (inside, logs / "a", tmp_path / "link", tmp_path / "link" / "..", logs):
        with pytest.raises(StateDirError, match="inside the scanned log dir"):
            check_state_dir(state, [tmp_path / "elsewhere", logs])
    check_state_dir(tmp_path / "link", [log_dir, tmp_path / "elsewhere"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        check_state_dir(tmp_path / "file", [log_dir])
