"""Capacity foresight against a real broker filling a real filesystem (issue 35).

One KRaft broker whose only log dir is a small tmpfs this test mounts (``mount -t tmpfs -o
size=...``; root is needed, and the test is skipped without it), a producer at a constant rate
(an absolute schedule: bytes due by time t are sent by then, so a stall is caught up, not lost),
an audit at t0 (``kafka-audit audit --json``, the CLI as an operator runs it) that predicts
``seconds_to_full`` for the tmpfs, then a wait on the broker itself, never a sleep: its
server.log line of the log dir failure (``Error while appending ... in dir``, ``Stopping serving
logs in dir``, ``Shutdown broker because all log dirs ... have failed``) or its process exiting.
The prediction must be within 10% of the observed time to full (or one retention check
interval, whichever is larger; the broker's is set to 5 s so 10% decides).

Also: a topic with retention.ms / segment.ms of seconds at a constant rate, whose predicted steady
state is compared with the used bytes observed over three retention periods; and one record a day
in the future that stops time retention, after which the disk fills when predicted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer

from harness.cli import kafka_audit_in_process
from harness.kafka import wait_until

# serial: the predicted time to full is held to the broker's own failure at a producer's constant rate,
# which a second live module on the same two cores would bend
pytestmark = [pytest.mark.live, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[1]
TMPFS_BYTES = 32 * 1024 * 1024
RATE_BYTES_S = 300_000
RECORD_BYTES = 1000
CHECK_INTERVAL_MS = 5000
WARMUP_S = 20.0
FAILURE_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \w+ .*(Error while appending records to .* in dir|"
                          r"Stopping serving logs in dir|Shutdown broker because all log dirs|"
                          r"No space left on device|has failed)")


class PacedProducer(threading.Thread):
    """Records of RECORD_BYTES at ``rate`` bytes/s on one absolute schedule from its start."""

    def __init__(self, bootstrap: str, topic: str, rate: float, keys: int | None = None, linger_ms: int = 20):
        super().__init__(daemon=True)
        self.topic, self.rate, self.keys = topic, rate, keys
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": "1",
                                  "compression.type": "none", "message.timeout.ms": 300000,
                                  "queue.buffering.max.kbytes": 1048576})
        self.stop_event = threading.Event()
        self.sent = 0
        self.delivered = 0  # acknowledged by the broker (delivery reports): in the log
        self.started_at = None

    def start(self) -> None:
        self.started_at = time.monotonic()
        super().start()

    def run(self) -> None:
        payload = os.urandom(RECORD_BYTES)  # incompressible, and no compression anyway
        while not self.stop_event.is_set():
            due = int((time.monotonic() - self.started_at) * self.rate / RECORD_BYTES)
            while self.sent < due and not self.stop_event.is_set():
                try:
                    key = b"key-%06d" % (self.sent % self.keys) if self.keys else None  # the keys in turn
                    self.producer.produce(self.topic, payload, key=key, on_delivery=self._delivered)
                    self.sent += 1
                except BufferError:
                    break
            self.producer.poll(0)
            time.sleep(0.02)

    def _delivered(self, err, _msg) -> None:
        if err is None:
            self.delivered += 1

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)
        try:
            self.producer.purge()
        except Exception:  # noqa: BLE001 - a producer of a dead broker: nothing to keep
            pass
        self.producer = None  # librdkafka's threads end with the object (no reconnecting to a stopped broker)


def _used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class UsedSampler(threading.Thread):
    """The filesystem's used bytes every 0.5 s (statvfs), for benchmarks/capacity.py's recorded series."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.samples, self.stop_event = path, [], threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.samples.append((time.time(), _used(self.path)))
            except OSError:
                pass
            self.stop_event.wait(0.5)

    def stop(self) -> list:
        self.stop_event.set()
        self.join(timeout=5)
        return self.samples


def _record(name: str, sampler: UsedSampler, log_dir: Path, entry: dict, as_of_s: float, observed_full_s=None,
            rules: str = "") -> None:
    """With KLA_CAPACITY_RECORD=DIR: the run's used-bytes series, the model's prediction at the audit
    and what was observed, as DIR/NAME.json (benchmarks/capacity.py replays them)."""
    where = os.environ.get("KLA_CAPACITY_RECORD")
    if not where:
        return
    samples = sampler.stop()
    st = os.statvfs(log_dir)
    doc = {"name": name, "rules": rules, "usable_bytes": entry["usable_bytes"], "total_bytes": st.f_blocks * st.f_frsize,
           "samples": [[round(t - as_of_s, 2), u] for t, u in samples],
           "model": {"at_s": 0.0, "seconds_to_full": entry["seconds_to_full"], "steady_state_bytes": entry["steady_state_bytes"],
                     "growth_bytes_per_s": entry["growth_bytes_per_s"]},
           "observed_full_s": observed_full_s}
    Path(where).mkdir(parents=True, exist_ok=True)
    (Path(where) / f"{name}.json").write_text(json.dumps(doc, indent=None) + "\n")


def _mount_tmpfs(path: Path, size: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "kla-capacity-test", str(path)], check=True)


def _unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _failure(node) -> tuple[float | None, str | None]:
    """(epoch seconds, line) of the broker's first log-dir failure line, or its exit (now), else (None, None)."""
    try:
        text = node.server_log.read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        m = FAILURE_LINE.match(line)
        if m:
            return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp(), line[:300]
    if node.proc is not None and node.proc.poll() is not None:
        return time.time(), f"broker exited with {node.proc.returncode}"
    return None, None


def _audit(log_dir: Path, out: Path, check_interval_ms: int = CHECK_INTERVAL_MS) -> dict:
    config = out / "audit.yaml"
    config.write_text(f"kafka:\n  log.retention.check.interval.ms: {check_interval_ms}\n")
    cmd = [sys.executable, "-m", "auditor.cli", "audit", "--log-dir", str(log_dir), "--json", str(out / "findings.json"),
           "--config", str(config), "--engine", "local", "--fail-on", "FAIL"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads((out / "findings.json").read_text())


@pytest.fixture
def tmpfs_broker_factory(kafka_cluster_factory):
    """``factory(size_bytes, check_interval_ms)`` -> (a started broker whose only log dir is a fresh
    tmpfs of that size, the log dir); the broker is stopped and the tmpfs unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    made = []

    def factory(size: int, check_interval_ms: int):
        kc = kafka_cluster_factory(start=False, broker_config={
            "log.retention.check.interval.ms": check_interval_ms, "log.segment.bytes": 4 * 1024 * 1024,
            "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"})
        log_dir = kc.nodes[1].log_dirs[0]
        _mount_tmpfs(log_dir, size)
        made.append((kc, log_dir))
        kc.start()
        return kc, log_dir

    yield factory
    for kc, log_dir in made:
        try:
            kc.stop()
        finally:
            _unmount(log_dir)


@pytest.fixture
def tmpfs_broker(tmpfs_broker_factory):
    return tmpfs_broker_factory(TMPFS_BYTES, CHECK_INTERVAL_MS)


def test_predicted_time_to_full_matches_the_broker(tmpfs_broker, tmp_path):
    kc, log_dir = tmpfs_broker
    node = kc.nodes[1]
    kc.create_topic("fill", partitions=1)
    producer = PacedProducer(kc.bootstrap_servers, "fill", RATE_BYTES_S)
    sampler = UsedSampler(log_dir)
    sampler.start()
    producer.start()
    try:
        part = log_dir / "fill-0"
        deadline = time.monotonic() + WARMUP_S * 3
        while time.monotonic() < deadline and (time.monotonic() - producer.started_at) < WARMUP_S:
            time.sleep(0.2)
        doc = _audit(log_dir, tmp_path)
        entry = next(e for e in doc["capacity"] if str(log_dir) in e["log_dirs"])
        predicted_s, as_of_s = entry["seconds_to_full"], doc["as_of_ms"] / 1000.0
        assert predicted_s is not None, entry
        timeout = time.monotonic() + max(3 * predicted_s, 120)
        failed_at, line = None, None
        while time.monotonic() < timeout and failed_at is None:
            failed_at, line = _failure(node)
            if failed_at is None:
                time.sleep(0.2)
        assert failed_at is not None, f"the broker never reported its log dir failed; predicted {predicted_s:.1f} s"
        observed_s = failed_at - as_of_s
        tolerance = max(0.10 * observed_s, CHECK_INTERVAL_MS / 1000.0)
        report = (f"predicted {predicted_s:.1f} s, observed {observed_s:.1f} s ({line}); growth "
                  f"{entry['growth_bytes_per_s']:.0f} B/s (producer {RATE_BYTES_S} B/s of values), "
                  f"used {entry['used_bytes']} of {entry['usable_bytes']}, kafka {entry['kafka_bytes']}, part {part}")
        print(report)
        _record("steady-climb", sampler, log_dir, entry, as_of_s, observed_s, "retention.ms 7 d (default), 300,000 B/s")
        assert abs(predicted_s - observed_s) <= tolerance, report
        assert entry["total_bytes"] == TMPFS_BYTES and entry["mount"] == str(log_dir)
    finally:
        producer.stop()
        sampler.stop()


STEADY_TMPFS_BYTES = 64 * 1024 * 1024
STEADY_RATE_BYTES_S = 100_000
RETENTION_MS, SEGMENT_MS, DELETE_DELAY_MS, STEADY_CHECK_MS = 30_000, 5_000, 5_000, 1_000


def test_predicted_steady_state_matches_the_bytes_retention_keeps(tmpfs_broker_factory, tmp_path):
    """A topic with retention.ms 30 s, segment.ms 5 s and file.delete.delay.ms 5 s (from the
    metadata log) at a constant rate, the broker's retention check every second: the audit, once
    deletions have begun, predicts the filesystem's steady state (the top of the sawtooth: rate x
    (retention + a segment's time + the check interval + the delete delay) + the rest held
    constant); the used bytes observed over three retention periods peak within 10% of it."""
    kc, log_dir = tmpfs_broker_factory(STEADY_TMPFS_BYTES, STEADY_CHECK_MS)
    kc.create_topic("window", partitions=1, config={"retention.ms": RETENTION_MS, "segment.ms": SEGMENT_MS,
                                                    "file.delete.delay.ms": DELETE_DELAY_MS})
    producer = PacedProducer(kc.bootstrap_servers, "window", STEADY_RATE_BYTES_S)
    sampler = UsedSampler(log_dir)
    sampler.start()
    producer.start()
    try:
        warmup_s = (RETENTION_MS + 3 * SEGMENT_MS + DELETE_DELAY_MS) / 1000.0
        wait_deleted = time.monotonic() + 3 * warmup_s
        while time.monotonic() < wait_deleted and not (
                time.monotonic() - producer.started_at >= warmup_s and list((log_dir / "window-0").glob("*.log")) and
                min(int(p.stem) for p in (log_dir / "window-0").glob("*.log")) > 0):
            time.sleep(0.2)  # until retention has deleted the first segment, and the warm-up is over
        doc = _audit(log_dir, tmp_path, STEADY_CHECK_MS)
        entry = next(e for e in doc["capacity"] if str(log_dir) in e["log_dirs"])
        predicted = entry["steady_state_bytes"]
        assert predicted is not None and entry["seconds_to_full"] is None, entry
        assert entry["config_sources"]["retention.ms"] == ["metadata log: topic config"], entry["config_sources"]
        observed = []
        until = time.monotonic() + 3 * RETENTION_MS / 1000.0
        while time.monotonic() < until:
            assert kc.nodes[1].proc.poll() is None, "the broker died"
            observed.append(_used(log_dir))
            time.sleep(0.1)
        peak, trough = max(observed), min(observed)
        report = (f"predicted steady state {predicted} B, observed peak {peak} B, trough {trough} B over "
                  f"{3 * RETENTION_MS / 1000:.0f} s ({len(observed)} samples); growth {entry['growth_bytes_per_s']:.0f} B/s, "
                  f"other {entry['other_bytes']} B")
        print(report)
        _record("sawtooth", sampler, log_dir, entry, doc["as_of_ms"] / 1000.0, None,
                "retention.ms 30 s, segment.ms 5 s, file.delete.delay.ms 5 s, check every 1 s, 100,000 B/s")
        assert abs(peak - predicted) <= 0.10 * predicted, report
        assert trough < peak, report  # the sawtooth: retention deleted while we watched
    finally:
        producer.stop()
        sampler.stop()


def test_a_future_timestamp_blocks_retention_and_the_disk_fills_when_predicted(tmpfs_broker, tmp_path):
    """retention.ms 15 s, segment.ms 3 s: at 300,000 B/s retention would hold ~7 MB on the 32 MiB
    tmpfs for ever; one record a day in the future, written first, stops time retention at its
    segment and every later one. The audit names that cause and predicts the fill; the broker's
    log dir failure comes when predicted (within 10%)."""
    kc, log_dir = tmpfs_broker
    node = kc.nodes[1]
    kc.create_topic("blocked", partitions=1, config={"retention.ms": 15_000, "segment.ms": 3_000,
                                                     "file.delete.delay.ms": 1_000})
    first = Producer({"bootstrap.servers": kc.bootstrap_servers})
    first.produce("blocked", b"from the future", timestamp=int(time.time() * 1000) + 86_400_000)
    assert first.flush(30) == 0
    producer = PacedProducer(kc.bootstrap_servers, "blocked", RATE_BYTES_S)
    sampler = UsedSampler(log_dir)
    sampler.start()
    producer.start()
    try:
        while time.monotonic() - producer.started_at < WARMUP_S:
            time.sleep(0.2)
        doc = _audit(log_dir, tmp_path)
        entry = next(e for e in doc["capacity"] if str(log_dir) in e["log_dirs"])
        predicted_s, as_of_s = entry["seconds_to_full"], doc["as_of_ms"] / 1000.0
        assert predicted_s is not None, entry
        assert entry["causes"] and entry["causes"][0]["cause"] == "retention blocked by a future timestamp", entry["causes"]
        fill = next(f for f in doc["findings"] if f["check"] == "capacity.time_to_full")
        assert fill["severity"] == "FAIL" and "retention blocked by a future timestamp" in fill["message"], fill
        timeout = time.monotonic() + max(3 * predicted_s, 120)
        failed_at, line = None, None
        while time.monotonic() < timeout and failed_at is None:
            failed_at, line = _failure(node)
            if failed_at is None:
                time.sleep(0.2)
        assert failed_at is not None, f"the broker never reported its log dir failed; predicted {predicted_s:.1f} s"
        observed_s = failed_at - as_of_s
        report = f"blocked: predicted {predicted_s:.1f} s, observed {observed_s:.1f} s ({line})"
        print(report)
        _record("blocked-retention", sampler, log_dir, entry, as_of_s, observed_s,
                "retention.ms 15 s, segment.ms 3 s, one record a day ahead first, 300,000 B/s")
        assert abs(predicted_s - observed_s) <= max(0.10 * observed_s, CHECK_INTERVAL_MS / 1000.0), report
    finally:
        producer.stop()
        sampler.stop()


# --- one broker shared by the tests below (history, compaction, the size rule): a tmpfs large enough
# that none of them fills it, the retention check and the cleaner looking every second ---------------
SHARED_TMPFS_BYTES = 96 * 1024 * 1024
SHARED_CHECK_MS, CLEANER_BACKOFF_MS = 1000, 1000


@pytest.fixture(scope="module")
def shared_broker(kafka_cluster_factory):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    kc = kafka_cluster_factory(start=False, broker_config={
        "log.retention.check.interval.ms": SHARED_CHECK_MS, "log.cleaner.backoff.ms": CLEANER_BACKOFF_MS,
        "log.segment.bytes": 4 * 1024 * 1024, "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1"})
    log_dir = kc.nodes[1].log_dirs[0]
    _mount_tmpfs(log_dir, SHARED_TMPFS_BYTES)
    try:
        kc.start()
        yield kc, log_dir
    finally:
        try:
            kc.stop()
        finally:
            _unmount(log_dir)


def _audit_here(log_dir: Path, out: Path, *extra) -> tuple[dict, str]:
    """``kafka-audit audit`` in this process (auditor.cli.main; seconds instead of a subprocess's
    imports), the broker's check interval and cleaner backoff in its config; (document, stdout)."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / "audit.yaml"
    config.write_text(f"kafka:\n  log.retention.check.interval.ms: {SHARED_CHECK_MS}\n"
                      f"  log.cleaner.backoff.ms: {CLEANER_BACKOFF_MS}\n")
    proc = kafka_audit_in_process("audit", "--log-dir", log_dir, "--json", out / "findings.json", "--config", config,
                                  "--engine", "local", "--fail-on", "FAIL", "--no-progress", *extra)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return json.loads((out / "findings.json").read_text()), proc.stdout


def _until(predicate, timeout_s: float, what: str):
    """The broker's state on disk polled until ``predicate`` holds (harness.kafka.wait_until, every 0.1 s)."""
    return wait_until(predicate, timeout_s, what, interval_s=0.1)


def _dir_bytes(part: Path) -> int:
    """Bytes the partition dir's files hold on the tmpfs (allocated: a preallocated index counts
    its written pages), *.deleted and cleaner files included."""
    total = 0
    for p in part.iterdir():
        try:
            total += p.stat().st_blocks * 512
        except FileNotFoundError:  # deleted between the listing and the stat
            pass
    return total


def _log_start(part: Path) -> int:
    bases = [int(p.name.split(".")[0]) for p in part.iterdir() if p.name.endswith(".log")]
    return min(bases) if bases else 0


def test_history_says_a_planted_rate_change_beside_the_model(shared_broker, tmp_path):
    """Two audits into one history dir: 100 kB/s before the first; after it the producer triples its
    rate. The second run's bytes written since the first are beside the model's growth of the first
    run; the difference is over 25% and the section, the terminal and the topic say so."""
    kc, log_dir = shared_broker
    kc.create_topic("shift", partitions=1)
    history = tmp_path / "history"
    slow = PacedProducer(kc.bootstrap_servers, "shift", 100_000)
    slow.start()
    try:
        _until(lambda: time.monotonic() - slow.started_at >= 10, 30, "10 s at 100 kB/s")
        first, _ = _audit_here(log_dir, tmp_path / "r1", "--history", history)
    finally:
        slow.stop()
    fast = PacedProducer(kc.bootstrap_servers, "shift", 300_000)
    fast.start()
    try:
        _until(lambda: time.monotonic() - fast.started_at >= 10, 30, "10 s at 300 kB/s")
        second, stdout = _audit_here(log_dir, tmp_path / "r2", "--history", history)
    finally:
        fast.stop()
    entry1 = next(e for e in first["capacity"] if str(log_dir) in e["log_dirs"])
    entry = next(e for e in second["capacity"] if str(log_dir) in e["log_dirs"])
    assert entry1["observed_growth_bytes_per_s"] is None
    shift = next(t for t in entry["observed"]["by_topic"] if t["topic"] == "shift")
    report = f"shift: {shift}; statement: {entry['observed_statement']}"
    print(report)
    assert shift["model_then_bytes_per_s"] == pytest.approx(100_000 * 1.05, rel=0.15), report  # values + record overhead
    assert entry["observed"]["replicas_by_method"]["segments"] >= 1, report
    assert shift["difference_percent"] > 25 and abs(entry["model_difference_percent"]) > 25, report
    assert "shift: " in entry["observed_statement"] and "changed rate" in entry["observed_statement"], report
    assert "written " in stdout and entry["observed_statement"][:40] in stdout


COMPACT_KEYS, COMPACT_RATE = 1000, 200_000


def test_compact_topic_stays_under_its_key_bound(shared_broker, tmp_path):
    """A compact-only topic of 1,000 keys written in turn at 200 kB/s (a record per batch, so the
    cleaned log's bytes per record are those read), segment.ms 1 s: the audit with --keys bounds it
    by its distinct keys; once the cleaner has run, the bytes the partition dir holds over three of
    its cycles peak within 10% under that bound (or below it), and above half of it."""
    kc, log_dir = shared_broker
    kc.create_topic("keyed", partitions=1, config={"cleanup.policy": "compact", "segment.ms": 1000,
                                                   "min.cleanable.dirty.ratio": 0.5, "min.compaction.lag.ms": 0,
                                                   "file.delete.delay.ms": 1000, "delete.retention.ms": 1000})
    part = log_dir / "keyed-0"
    producer = PacedProducer(kc.bootstrap_servers, "keyed", COMPACT_RATE, keys=COMPACT_KEYS, linger_ms=0)
    producer.start()
    try:
        cycle_s = COMPACT_KEYS * RECORD_BYTES / COMPACT_RATE  # every key written once
        # in the log, not only sent: a producer held back at its start (leader election on a loaded
        # machine) sends its backlog in a burst, and an audit before it would count part of the keys
        _until(lambda: time.monotonic() - producer.started_at >= 1.5 * cycle_s
               and producer.delivered >= 1.5 * COMPACT_KEYS, 60, "every key written and acknowledged")
        for attempt in range(3):  # a cleaner pass that swaps segments under the key read leaves it
            doc, _ = _audit_here(log_dir, tmp_path / f"audit-{attempt}", "--keys")  # incomplete: no bound
            entry = next(e for e in doc["capacity"] if str(log_dir) in e["log_dirs"])
            cause = next(c for c in entry["causes"] if c["cause"] == "compaction" and c["topic_partition"] == "keyed-0")
            if cause["key_bound_bytes"] is not None:
                break
        bound = cause["key_bound_bytes"]
        assert bound is not None, cause
        assert abs(cause["distinct_keys"] - COMPACT_KEYS) <= 0.05 * COMPACT_KEYS, cause  # HLL's error is ~1.6%
        # the plan's steady state: keyed-0 falls back to its bytes of today as unbounded, unless --keys bounds it
        fallbacks = {}
        for extra in ((), ("--keys",)):
            summary = tmp_path / f"plan{'-'.join(extra)}.json"
            proc = kafka_audit_in_process("plan", "--log-dir", log_dir, "--json", summary, *extra)
            assert proc.returncode in (0, 1), proc.stderr[-2000:]
            doc_plan = json.loads(summary.read_text())
            fallbacks[extra] = {f["why"].split(":")[0]: f["replicas"] for f in doc_plan["steady_state"]["fallbacks"]}
        assert fallbacks[()].get("unbounded", 0) >= 1, fallbacks
        assert fallbacks[("--keys",)].get("unbounded", 0) == fallbacks[()]["unbounded"] - 1, fallbacks
        # no config file: --bootstrap-server gives the broker's own cleaner backoff and check interval
        live = tmp_path / "live.json"
        proc = kafka_audit_in_process("audit", "--log-dir", log_dir, "--bootstrap-server", kc.bootstrap_servers, "--keys",
                                      "--json", live, "--engine", "local", "--fail-on", "FAIL", "--no-progress")
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        live_entry = next(e for e in json.loads(live.read_text())["capacity"] if str(log_dir) in e["log_dirs"])
        assert live_entry["config_sources"]["log.cleaner.backoff.ms"] == ["live cluster: broker config"], live_entry
        assert entry["config_sources"]["log.cleaner.backoff.ms"] == ["config file"], entry["config_sources"]
        live_cause = next(c for c in live_entry["causes"] if c["cause"] == "compaction" and c["topic_partition"] == "keyed-0")
        assert live_cause["key_bound_bytes"] == pytest.approx(bound, rel=0.05), (live_cause, cause)
        cleaned = (log_dir / "cleaner-offset-checkpoint")
        _until(lambda: cleaned.exists() and "keyed 0 " in cleaned.read_text(), 60, "the cleaner's first pass over keyed-0")
        observed = []
        until = time.monotonic() + 3 * cycle_s + 5  # a pass each time the dirty part matches the clean one
        while time.monotonic() < until:
            assert kc.nodes[1].proc.poll() is None, "the broker died"
            observed.append(_dir_bytes(part))
            time.sleep(0.05)
        peak = max(observed)
        report = (f"keyed-0: bound {bound} B ({cause['detail']}); observed peak {peak} B, trough {min(observed)} B "
                  f"over {len(observed)} samples")
        print(report)
        assert 0.5 * bound <= peak <= 1.10 * bound, report
        assert min(observed) < peak, report  # the cleaner shrank it while we watched
    finally:
        producer.stop()


SIZE_RETENTION_BYTES, SIZE_RATE = 1_000_000, 300_000


def test_size_rule_steady_state_on_the_broker(shared_broker, tmp_path):
    """retention.bytes 1,000,000 with segment.ms 1 s at 300 kB/s (segments of ~300 kB) and the check
    every second: once retention has deleted, the predicted steady state of the partition lies within
    retention.bytes and retention.bytes + a segment + the growth between checks and before the delete,
    and the bytes the partition dir holds over three retention cycles peak within one segment of it."""
    kc, log_dir = shared_broker
    kc.create_topic("capped", partitions=1, config={"retention.bytes": SIZE_RETENTION_BYTES, "segment.ms": 1000,
                                                    "file.delete.delay.ms": 1000})
    part = log_dir / "capped-0"
    producer = PacedProducer(kc.bootstrap_servers, "capped", SIZE_RATE)
    producer.start()
    try:
        _until(lambda: part.exists() and _log_start(part) > 0 and time.monotonic() - producer.started_at >= 8, 60,
               "retention deleting capped-0's first segment")
        doc, _ = _audit_here(log_dir, tmp_path / "audit")
        entry = next(e for e in doc["capacity"] if str(log_dir) in e["log_dirs"])
        predicted = next(t for t in entry["steady_state_by_topic"] if t["topic"] == "capped")["steady_state_bytes"]
        segment = SIZE_RATE * 1.0  # segment.ms 1 s at the rate
        lag_bytes = SIZE_RATE * (SHARED_CHECK_MS + 1000) / 1000.0
        assert SIZE_RETENTION_BYTES <= predicted <= SIZE_RETENTION_BYTES + 1.2 * segment + 1.2 * lag_bytes, predicted
        start = _log_start(part)
        observed = []
        _until(lambda: observed.append(_dir_bytes(part)) or _log_start(part) > start + 3 * (SIZE_RATE / RECORD_BYTES),
               60, "three retention cycles")  # the log start moved past three segments' worth of records
        peak = max(observed)
        report = f"capped-0: predicted {predicted} B, observed peak {peak} B, trough {min(observed)} B ({len(observed)} samples)"
        print(report)
        assert abs(peak - predicted) <= segment, report
        assert peak >= SIZE_RETENTION_BYTES, report
    finally:
        producer.stop()
