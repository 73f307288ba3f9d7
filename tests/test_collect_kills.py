"""``collect --state`` killed with SIGKILL at 50 random moments on a live broker's log dir, while a
producer keeps writing (issue 24 item 4; docs/write-faults.md).

One real broker (KRaft, one log dir, started once for the module). A producer thread keeps
appending to a topic that rolls a segment per append (record-time rolls) and loses its oldest
segments to retention, beside a topic of many closed segments and the broker's own metadata log
and ``__consumer_offsets``. Each round:

1. ``kafka-audit collect --state S --depth headers --out O LOGDIR`` runs as a real process (forked
   from a Python that imported the CLI once: tests/harness/forked.py) and is killed with SIGKILL: either after a random delay within an uninterrupted run's duration
   (start-up, scan, writes), or as soon as it holds a chosen temporary file open (the Parquet
   parts during the scan, the state file, ``log_dirs.parquet``, a cluster part, the completion
   marker) plus a random 0-2 ms. The random generator is seeded; the seed is printed (set
   ``COLLECT_KILLS_SEED`` to replay a run).
2. Right after the kill: nothing of the tool's is under the log dir; the output dir is either a
   manifest whose marker matches every file byte for byte, or one ``find_manifests`` refuses; every
   state file there reads whole (end line, count, CRC-32).
3. "The same moment": the broker JVM is stopped (SIGSTOP; the producer's request in flight waits),
   so no file under the log dir changes; the next run (``collect_manifest`` with the same state and output
   dir, what the CLI calls) and a full scan without state read the same files; the broker is
   continued (SIGCONT). Their segment and partition rows must be equal in every column but
   ``scanned_at_ms``, their log-dir rows equal but for the collection times, and the next run's
   manifest complete with no temporary file left of the killed run.
"""

from __future__ import annotations

import collections
import gzip
import os
import random
import signal
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from auditor.atomic import TEMP_MARK
from auditor.manifest import (COMPLETE_FILE, LOG_DIRS_FILE, PARTITIONS_FILE, SEGMENTS_FILE, IncompleteManifest,
                              check_manifest_complete, collect_manifest, find_manifests)
from auditor.scan.state import read_state_file
from auditor.scan.filesystem import FS_FIELDS_OF_THE_MOMENT
from harness.forked import Zygote, kill_at_random_moment
from harness.kafka import KafkaCluster, freeze_broker, thaw_broker, wait_until

pytestmark = pytest.mark.live

KILLS = 50
DEPTH = "headers"
SEGMENT_MS = 10_000
STEP_MS = 2 * SEGMENT_MS + 1
"""Between two appends' record times: each append starts a new segment (record-time roll)."""
BROKER_CONFIG = {"log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "200",
                 "broker.session.timeout.ms": "60000"}
"""Retention runs often (segments vanish while collect runs); a broker stopped for a comparison
under a loaded machine is not fenced by its own controller when it continues."""
TARGETS = {"segments": f".{SEGMENTS_FILE}{TEMP_MARK}", "partitions": f".{PARTITIONS_FILE}{TEMP_MARK}",
           "log_dirs": f".{LOG_DIRS_FILE}{TEMP_MARK}", "cluster part": f".jsonl.gz{TEMP_MARK}",
           "state": f".state{TEMP_MARK}", "marker": f".{COMPLETE_FILE}{TEMP_MARK}"}
"""Kill as soon as the process holds a temporary file open whose name contains this."""
TIME_COLUMNS = {"scanned_at_ms"}
LOG_DIR_TIME_COLUMNS = {"collected_at_ms", "finished_at_ms", *FS_FIELDS_OF_THE_MOMENT}


class Producer(threading.Thread):
    """Appends one segment's worth of records to ``topic`` per step until stopped."""

    def __init__(self, cluster: KafkaCluster, topic: str, base_ms: int):
        super().__init__(daemon=True)
        self.cluster, self.topic, self.base_ms = cluster, topic, base_ms
        self.stop_event = threading.Event()
        self.steps = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                # record times catch up with the present, then follow it (never ahead of the broker's clock)
                at = min(self.base_ms + self.steps * STEP_MS, int(time.time() * 1000) - 60_000)
                self.cluster.roll_segments(self.topic, 0, segments=1, records_per_segment=30, segment_ms=SEGMENT_MS,
                                           base_timestamp_ms=at)
                self.steps += 1
                time.sleep(0.2)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.fixture(scope="module")
def cluster(kafka_classpath_str, tmp_path_factory):
    kc = KafkaCluster(tmp_path_factory.mktemp("kills"), brokers=1, broker_config=BROKER_CONFIG,
                      classpath=kafka_classpath_str)
    kc.start()
    try:
        roll = {"segment.ms": str(SEGMENT_MS), "segment.jitter.ms": "0"}
        # records from two hours ago on: the oldest segments pass retention (100 min) as the test runs
        kc.create_topic("busy", config={**roll, "retention.ms": str(100 * 60_000)})
        kc.create_topic("bulk", partitions=4, config={**roll, "retention.ms": "-1"})
        for p in range(4):
            kc.roll_segments("bulk", p, segments=25, records_per_segment=40, segment_ms=SEGMENT_MS)
        yield kc
    finally:
        kc.stop()


def _phase(names: list[str]) -> str:
    """What the process was writing: the file written last of those open (the Parquet parts are open
    for the whole scan)."""
    for what in ("marker", "cluster part", "log_dirs", "state", "segments", "partitions"):
        if any(TARGETS[what] in n for n in names):
            return what if what not in ("segments", "partitions") else "scan (Parquet parts open)"
    return "no temporary file open"


def _collect_args(log_dir: Path, out: Path, state: Path) -> list[str]:
    return ["collect", "--state", str(state), "--depth", DEPTH, "--no-progress", "--out", str(out), str(log_dir)]


def _run_and_kill(zygote: Zygote, args: list[str], rng: random.Random, full_run_s: float) -> tuple[str, str, int]:
    """Starts ``collect ARGS``, kills it (SIGKILL) at a random moment; (how the moment was chosen,
    what it held open then, its pid)."""
    how, held, status, pid = kill_at_random_moment(zygote, args, rng, full_run_s, TARGETS, TEMP_MARK, 120)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL, status
        return how, _phase(held), pid
    assert os.WEXITSTATUS(status) == 0, f"collect {args} exited {os.WEXITSTATUS(status)}: {zygote.stderr()[-2000:]}"
    return how, "finished before the kill", pid


def _assert_nothing_of_ours_under(log_dir: Path, pid: int) -> None:
    ours = {SEGMENTS_FILE, PARTITIONS_FILE, LOG_DIRS_FILE, COMPLETE_FILE}
    for dirpath, _dirs, files in os.walk(log_dir):
        for name in files:
            assert name not in ours and not name.endswith(".state") and f"{TEMP_MARK}{pid}" not in name, \
                f"{Path(dirpath, name)}: written by collect under the log dir"


def _assert_whole_or_refused(out: Path, state: Path) -> str:
    """What the killed run left reads as a complete manifest only when it is one; state files read whole."""
    for path in state.glob("*.state"):
        read_state_file(path)  # ValueError on a torn or altered file
    if not (out / SEGMENTS_FILE).exists():
        return "no manifest"
    try:
        find_manifests([out])
    except IncompleteManifest:
        return "incomplete (refused)"
    check_manifest_complete(out, verify_bytes=True)  # the marker matches every byte
    return "complete"


def _rows(manifest: Path, name: str, drop: set[str]) -> list[tuple]:
    rows = [{k: v for k, v in r.items() if k not in drop} for r in pq.read_table(manifest / name).to_pylist()]
    return sorted((tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows))


def _cluster_part(manifest: Path, name: str) -> bytes | None:
    path = manifest / name
    return gzip.decompress(path.read_bytes()) if path.exists() else None


def test_collect_killed_at_random_moments_then_the_next_run_equals_a_full_scan(cluster, tmp_path):
    seed = int(os.environ.get("COLLECT_KILLS_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"\ncollect kills: seed {seed} (COLLECT_KILLS_SEED={seed} replays the moments)")
    rng = random.Random(seed)
    log_dir = cluster.log_dirs(1)[0]
    out, state = tmp_path / "manifest", tmp_path / "state"
    producer = Producer(cluster, "busy", int(time.time() * 1000) - 2 * 3_600_000)
    producer.start()
    wait_until(lambda: producer.steps >= 3 or producer.error is not None, 180, "the producer's first appends")
    zygote = Zygote(tmp_path, "collect")
    started = time.monotonic()
    for _ in range(2):  # the first run (the state), then how long a run with the state takes
        run_started = time.monotonic()
        zygote.start(_collect_args(log_dir, out, state))
        status = zygote.wait()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, zygote.stderr()[-2000:])
    full_run_s = time.monotonic() - run_started
    phases: collections.Counter = collections.Counter()
    left: collections.Counter = collections.Counter()
    used = {"reused": 0, "continued": 0}
    frozen_s = 0.0
    try:
        for kill in range(KILLS):
            how, phase, pid = _run_and_kill(zygote, _collect_args(log_dir, out, state), rng, full_run_s)
            phases[phase] += 1
            _assert_nothing_of_ours_under(log_dir, pid)
            left[_assert_whole_or_refused(out, state)] += 1
            broker = freeze_broker(cluster)  # (the producer's request in flight waits: its timeouts are minutes)
            frozen_at = time.monotonic()
            try:
                resumed = collect_manifest([log_dir], out, DEPTH, state_dir=state)
                full = collect_manifest([log_dir], tmp_path / "full", DEPTH)
            finally:
                thaw_broker(broker)
                frozen_s += time.monotonic() - frozen_at
            context = f"kill {kill} (seed {seed}, {how}, {phase})"
            check_manifest_complete(out, verify_bytes=True)
            assert not [p for d in (out, state) for p in d.iterdir() if f"{TEMP_MARK}{pid}" in p.name], \
                f"{context}: the killed run's temporary files are still there after the next run"
            for name, drop in ((SEGMENTS_FILE, TIME_COLUMNS), (PARTITIONS_FILE, set()),
                               (LOG_DIRS_FILE, LOG_DIR_TIME_COLUMNS)):
                a, b = _rows(out, name, drop), _rows(tmp_path / "full", name, drop)
                assert a == b, f"{context}: {name} of the next run != the full scan's ({len(a)} vs {len(b)} rows; " \
                               f"first difference {next((x, y) for x, y in zip(a + [None], b + [None]) if x != y)})"
            for part in ("cluster_metadata.jsonl.gz", "consumer_groups.jsonl.gz"):
                assert _cluster_part(out, part) == _cluster_part(tmp_path / "full", part), f"{context}: {part}"
            info = resumed.log_dirs[0]["scan_state"]
            used["reused"] += info["reused"]
            used["continued"] += info["continued"]
            assert full.segments == resumed.segments > 0
            assert producer.error is None, f"the producer failed: {producer.error!r}"
    finally:
        zygote.close()
        producer.stop_event.set()
        producer.join(timeout=120)
    print(f"collect kills: {KILLS} kills in {time.monotonic() - started:.0f} s (one uninterrupted run with the state: "
          f"{full_run_s:.2f} s; broker stopped {frozen_s:.0f} s in all for the comparisons); open at the kill: {dict(phases)}; left: {dict(left)}; the next runs took "
          f"{used['reused']} closed segments from the state and continued {used['continued']} active ones; "
          f"producer appended {producer.steps} segments")
    assert used["reused"] > 0 and used["continued"] > 0, "the next runs never used the state: nothing was proved"
    assert sum(n for p, n in phases.items() if p not in ("finished before the kill", "no temporary file open")) >= 10, \
        f"fewer than 10 kills landed while a temporary file was open: {dict(phases)}"
    assert left["incomplete (refused)"] >= 5, f"too few kills left an incomplete manifest to refuse: {dict(left)}"
