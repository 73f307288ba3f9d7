"""Read-only, proven on a live broker, twice:

1. scans at every depth while a producer writes at full speed: the closed segments' files keep
   their bytes and mtimes, and Kafka's own index sanity check passes on them;
2. the whole tree of both log dirs (every file and directory: active segments, checkpoints,
   producer snapshots, partition.metadata, the KRaft metadata log, meta.properties) fingerprinted
   with the broker frozen (SIGSTOP, every JVM thread stopped), scans at every depth, fingerprinted
   again: identical. The broker cannot write while frozen, so any difference is the tool's: a
   file written, created (even if deleted again: its directory's mtime), renamed, truncated or
   chmodded. Access times are left out (reading is allowed).
"""

from __future__ import annotations

import pytest
import hashlib
import os
import threading
from pathlib import Path

from confluent_kafka import Producer

from auditor.formats import filenames
from auditor.scan import scan_log_dirs
from auditor.schema import DEPTHS
from harness.kafka import freeze_broker, thaw_broker, wait_until

pytestmark = pytest.mark.live

TOPIC = "live-writes"
PARTITIONS = 4


def _fingerprint(path: Path) -> tuple[int, int, str]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(log_dirs: list[Path]) -> dict[Path, tuple]:
    """Every entry under the log dirs (the dirs included): a directory's listing and mtime; a
    file's inode, size, mtime, ctime and sha256."""
    out = {}
    for log_dir in log_dirs:
        for path in [log_dir, *log_dir.rglob("*")]:
            st = os.lstat(path)
            if path.is_dir():
                out[path] = ("dir", st.st_ino, st.st_mtime_ns, st.st_ctime_ns, tuple(sorted(os.listdir(path))))
            else:
                out[path] = ("file", st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                             hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def _closed_segment_files(log_dirs: list[Path]) -> dict[Path, tuple]:
    """Every file of every closed segment of the topic (all but the highest base offset)."""
    out = {}
    for log_dir in log_dirs:
        for part in log_dir.glob(f"{TOPIC}-*"):
            parsed = [(filenames.parse_segment_file(p.name), p) for p in part.iterdir()]
            segs = [(f, p) for f, p in parsed if f is not None and f.suffix in ("log", "index", "timeindex") and f.state is None]
            if not segs:
                continue   # no segment yet: nothing closed
            active = max(f.base_offset for f, _ in segs)
            for f, p in segs:
                if f.base_offset != active:
                    out[p] = _fingerprint(p)
    return out


def _rolled(log_dirs: list[Path]) -> set[str]:
    """The partition dirs of the topic that hold a closed segment."""
    return {p.parent.name for p in _closed_segment_files(log_dirs)}


class FullSpeedProducer(threading.Thread):
    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.sent = 0
        self.errors: list[str] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "compression.type": "lz4",
                                  "batch.num.messages": 500, "queue.buffering.max.messages": 200000})

    def run(self) -> None:
        value = os.urandom(300)
        def on_delivery(err, _msg):
            if err is not None:
                self.errors.append(str(err))
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, value=value, key=str(self.sent % 97), on_delivery=on_delivery)
                self.sent += 1
            except BufferError:
                self.producer.poll(0.01)
            if self.sent % 1000 == 0:
                self.producer.poll(0)
        self.producer.flush(30)


def test_scan_never_changes_a_live_broker(kafka_cluster_factory, dump_log_segments):
    cluster = kafka_cluster_factory(brokers=1, log_dirs_per_broker=2)
    cluster.create_topic(TOPIC, partitions=PARTITIONS, config={
        "segment.bytes": str(1024 * 1024), "retention.ms": "-1", "retention.bytes": "-1"})
    log_dirs = cluster.log_dirs(1)
    for p in range(PARTITIONS):
        cluster.partition_dir(TOPIC, p)   # the broker creates each dir a moment before its first segment

    writer = FullSpeedProducer(cluster.bootstrap_servers)
    writer.start()
    # let segments roll for real in every partition before taking the "before" picture (the keys do
    # not spread evenly: the last partition rolls well after the first, later still on a loaded machine)
    try:
        wait_until(lambda: len(_rolled(log_dirs)) >= PARTITIONS, 180, "a rolled segment in every partition")
    except Exception:
        writer.stop.set()
        raise
    before = _closed_segment_files(log_dirs)
    assert len({p.parent for p in before}) == PARTITIONS, f"the producer did not roll a segment in every partition: {sorted(_rolled(log_dirs))}"
    sent_before_scan = writer.sent

    rows_by_depth = {}
    try:
        for depth in DEPTHS:
            for _ in range(2):
                rows_by_depth[depth] = scan_log_dirs(log_dirs, depth).segments
    finally:
        writer.stop.set()
        writer.join(60)
    assert writer.sent > sent_before_scan, "the producer was not writing during the scans"
    assert not writer.errors[:5]

    after = {p: _fingerprint(p) for p in before}
    changed = [str(p) for p in before if before[p] != after[p]]
    assert not changed, f"closed segment files changed during the scan: {changed}"

    for depth, rows in rows_by_depth.items():
        ours = [r for r in rows if r["topic"] == TOPIC]
        assert ours, depth
        for r in ours:
            assert r["stop_reason"] in (None, "partial-tail"), (depth, r["stop_reason"], r["notes"])
            if r["stop_reason"] == "partial-tail":
                assert r["is_active"], f"{depth}: a closed segment reported a partial tail: {r['notes']}"
                assert any("expected, not corruption" in n for n in r["notes"])
            assert r.get("crc_failures") in (None, 0), (depth, r["notes"])

    index_files = [p for p in before if p.suffix in (".index", ".timeindex")]
    sanity = dump_log_segments.dump(index_files, deep_iteration=False, extra_args=["--index-sanity-check"])
    for p in index_files:
        assert sanity[p].sanity_check_passed, f"Kafka's index sanity check failed on {p}: {sanity[p]}"

    # 2. the whole tree, with the broker frozen
    pid = freeze_broker(cluster)
    try:
        tree_before = _tree(log_dirs)
        frozen_rows = {depth: scan_log_dirs(log_dirs, depth).segments for depth in DEPTHS}
        tree_after = _tree(log_dirs)
    finally:
        thaw_broker(pid)
    kinds = {p.suffix if filenames.parse_segment_file(p.name) else p.name for p, v in tree_before.items()
             if v[0] == "file"}
    assert {".log", ".index", ".timeindex", ".snapshot", "partition.metadata", "meta.properties", "quorum-state",
            "recovery-point-offset-checkpoint", "leader-epoch-checkpoint"} <= kinds, sorted(kinds)
    assert any(r["is_active"] for r in frozen_rows["deep"] if r["topic"] == TOPIC), "no active segment was scanned"
    added = sorted(map(str, tree_after.keys() - tree_before.keys()))
    removed = sorted(map(str, tree_before.keys() - tree_after.keys()))
    changed = sorted(str(p) for p in tree_before.keys() & tree_after.keys() if tree_before[p] != tree_after[p])
    assert not (added or removed or changed), f"the scans changed the tree: added {added}, removed {removed}, changed {changed}"
    cluster.stop()   # not at the session's end: a broker idling under every later module loads the machine
