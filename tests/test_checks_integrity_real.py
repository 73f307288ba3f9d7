"""The "beyond the card" checks (KLA040-045) on files written by a real Kafka broker.

One KRaft broker on 127.0.0.1 writes a multi-segment partition with committed and aborted
transactions (their markers take offsets, at segment ends too) and a partition whose
timestamps step three hours back mid-batch. On those healthy files the integrity checks say
nothing and the backward jump is found at the offset the broker acknowledged. Then private
copies are damaged the way disks and people damage them (a segment deleted, a closed segment
cut, a half-written batch at the end of the active one) and a directory gets a real magic-0
record set (kafka-rust fixture, written by a Kafka 0.8.2 broker): each is reported, and only
it. The broker's own files are never touched: damage happens on copies under tmp_path.
"""

from __future__ import annotations

import shutil
import struct
import time
from pathlib import Path

import pytest

from auditor.scan import scan_log_dirs
from checks.framework.base import AuditContext, Severity
from checks.framework.config import Config
from auditor.engines.local.checks import run_local
from harness.kafka import ROLL_TOPIC_CONFIG
from harness.realdata import RECORD_SETS

pytestmark = pytest.mark.live

MINE = ["retention.overdue", "timestamps.missing", "timestamps.backward", "integrity.index_mismatch",
        "integrity.truncation", "integrity.offset_gap"]
HOUR = 3_600_000
MAGIC0_SET = RECORD_SETS / "kafka-rust" / "fetch1.mytopic.1p.nocompression.kafka.0821.records.bin"


@pytest.fixture(scope="module")
def broker(kafka_cluster_factory):
    # quiet files must be cleanly closed ones: give the controlled shutdown time on a loaded machine
    kc = kafka_cluster_factory(brokers=1, stop_timeout_s=120)
    kc.create_topic("txn", config=ROLL_TOPIC_CONFIG)
    kc.create_topic("jumpy")
    step = 2 * int(ROLL_TOPIC_CONFIG["segment.ms"]) + 1
    firsts = kc.roll_segments("txn", segments=3, records_per_segment=5)
    now = int(time.time() * 1000)
    # Each group below is stamped a roll interval after the previous one, so it opens a segment;
    # the COMMIT/ABORT marker (stamped with the broker's clock) stays at that segment's end.
    kc.transaction("txn", [(f"c{i}", f"v{i}", now) for i in range(4)], commit=True)
    kc.transaction("txn", [(f"a{i}", f"v{i}", now + step) for i in range(4)], commit=False)
    last = kc.produce("txn", [(f"p{i}", f"v{i}", now + 2 * step) for i in range(3)])
    t0 = now - HOUR
    jumpy = kc.produce("jumpy", [("k", "a", t0), ("k", "b", t0 + 1000), ("k", "c", t0 - 3 * HOUR), ("k", "d", t0 + 2000)],
                       linger_ms=200)
    kc.stop(require_clean=True)  # quiet files
    return {"cluster": kc, "log_dir": kc.log_dirs(1)[0], "txn_last_offset": last[-1].offset,
            "rolled_largest_ms": [t + 4 for t in firsts], "txn_stamped_ms": now,
            "jump_offset": jumpy[2].offset, "jump_ms": 3 * HOUR + 1000}


def context() -> AuditContext:
    return AuditContext(as_of_ms=int(time.time() * 1000), config=Config(None))


def findings_of(log_dirs, depth="deep"):
    rows = scan_log_dirs(log_dirs, depth)
    found = run_local(rows.segments, rows.partitions, context(), names=MINE)
    return rows, [f for f in found if f.severity != Severity.PASS]


def segment_files(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def test_healthy_broker_files_only_the_real_backward_jump(broker):
    rows, found = findings_of([broker["log_dir"]])
    txn = [s for s in rows.segments if s["topic"] == "txn"]
    assert len(txn) >= 5, "record-time rolls should have made several segments"
    assert sum(s["control_batches"] for s in txn) == 2 and sum(s["abort_markers"] for s in txn) == 1
    assert max(s["last_offset"] for s in txn) == broker["txn_last_offset"], "markers took offsets"
    assert [(f.code, f.topic, f.partition, f.base_offset) for f in found] == [("KLA042", "jumpy", 0, 0)], \
        [f.message for f in found]
    jump = found[0]
    assert jump.evidence == [{"segment": 0, "jump_ms": broker["jump_ms"], "offset": broker["jump_offset"]}]
    assert f"at offset {broker['jump_offset']}" in jump.message
    # Below depth deep the jump is unknown, and unknown is not a finding.
    _, shallow = findings_of([broker["log_dir"]], depth="headers")
    assert shallow == []


@pytest.fixture
def copy(broker, tmp_path):
    target = tmp_path / "copy" / broker["log_dir"].name
    shutil.copytree(broker["log_dir"], target)  # copy2: mtimes kept
    return target


def test_a_deleted_middle_segment_is_an_offset_gap_naming_its_range(copy):
    logs = segment_files(copy / "txn-0")
    victim, after = logs[2], logs[3]
    for f in copy.joinpath("txn-0").glob(victim.stem + ".*"):
        f.unlink()
    first_missing, next_base = int(victim.stem), int(after.stem)
    _, found = findings_of([copy])
    assert [(f.code, f.severity, f.topic, f.base_offset) for f in found if f.topic != "jumpy"] == [
        ("KLA045", Severity.FAIL, "txn", next_base)], [f.message for f in found]
    gap = next(f for f in found if f.code == "KLA045")
    assert f"offsets {first_missing}..{next_base - 1} ({next_base - first_missing})" in gap.message
    assert gap.evidence[0]["missing_offsets"] == next_base - first_missing


def test_cut_closed_segment_reported_partial_active_tail_not_and_magic0_found(copy):
    logs = segment_files(copy / "txn-0")
    closed, active = logs[0], logs[-1]
    closed_size = closed.stat().st_size
    with open(closed, "r+b") as fh:  # a copy, never the broker's file
        fh.truncate(closed_size - 7)
    head = active.read_bytes()[:30]  # the start of a batch header whose body never arrives
    with open(active, "ab") as fh:
        fh.write(head)
    legacy = copy / "legacy-0"
    legacy.mkdir()
    shutil.copyfile(MAGIC0_SET, legacy / "00000000000000000000.log")

    rows, found = findings_of([copy])
    active_row = next(s for s in rows.segments if s["topic"] == "txn" and s["is_active"])
    assert active_row["stop_reason"] == "partial-tail" and active_row["trailing_bytes"] == 30, \
        "the scanner saw the half-written batch; the check must still say nothing about it"
    view = sorted((f.code, f.severity.name, f.topic, f.base_offset) for f in found if f.topic != "jumpy")
    assert view == [("KLA041", "WARN", "legacy", 0), ("KLA044", "WARN", "txn", int(closed.stem))], \
        [f.message for f in found]
    cut = next(f for f in found if f.code == "KLA044")
    assert cut.evidence[0]["stop_reason"] == "partial-tail"
    assert cut.evidence[0]["trailing_bytes"] == closed_size - 7, "one batch: every remaining byte is unreadable"
    missing = next(f for f in found if f.code == "KLA041")
    assert missing.evidence[0]["magics"] == [0] and missing.evidence[0]["size_bytes"] == MAGIC0_SET.stat().st_size


def test_retention_overdue_when_the_topic_retention_is_shorter_than_the_data(broker):
    """The broker ran with 7 days; the topic's retention.ms (as read from the cluster) is now
    a minute less than the age of the third rolled group (100 s or more: the groups are two minutes
    apart, the transactional segments younger than a minute less) and the broker is down, so nothing
    deleted the first three segments."""
    as_of_ms = int(time.time() * 1000)
    # the fixture's broker stop and the tests before this one take a while on a loaded machine:
    # the retention is measured from the transactional records' age, not assumed from the clock
    retention = max(100_000, as_of_ms - broker["txn_stamped_ms"] + 60_000)
    assert as_of_ms - broker["txn_stamped_ms"] < retention, "the transactional segments must not be due yet"
    ctx = AuditContext(as_of_ms=as_of_ms, config=Config(
        {"checks": {"retention.overdue": {"grace_ms": 0, "check_interval_ms": 0}}}),
        topic_configs={"txn": {"retention.ms": str(retention), "file.delete.delay.ms": "0"}})
    rows = scan_log_dirs([broker["log_dir"]], "headers")
    found = [f for f in run_local(rows.segments, rows.partitions, ctx, names=["retention.overdue"])
             if f.severity != Severity.PASS]
    bases = [int(p.stem) for p in segment_files(broker["log_dir"] / "txn-0")]
    # Truth from the producer's own timestamps: the first three segments hold one group each.
    due = [b for b, largest in zip(bases, broker["rolled_largest_ms"]) if as_of_ms - largest > retention]
    assert len(due) == 3, f"the rolled groups are two minutes apart, all older than {retention} ms"
    assert [(f.code, f.topic, f.base_offset) for f in found] == [("KLA040", "txn", 0)], [f.message for f in found]
    assert [e["segment"] for e in found[0].evidence] == due
    assert [e["largest_timestamp_ms"] for e in found[0].evidence] == broker["rolled_largest_ms"]
    assert found[0].message.startswith("3 segment(s)")


def dumplogsegments_index_reports(dump_log_segments, partition_dir: Path) -> dict[int, list[str]]:
    """Segment base offset -> what Kafka's DumpLogSegments reported against its .index and
    .timeindex (index mismatches, timestamp mismatches, out-of-order timestamps, indexed offsets
    not found in the log). Each .timeindex is dumped by its own JVM: DumpLogSegments prints no
    file name above "The following indexed offsets are not found in the log"."""
    reports: dict[int, list[str]] = {}
    indexes = sorted(partition_dir.glob("*.index"))
    dumped = dump_log_segments.dump(indexes, deep_iteration=False)
    assert not [line for line in dumped.stderr_other if "ismatch" in line], dumped.stderr_other
    for path in indexes:
        f = dumped[path]
        assert f.error is None and not f.unparsed, (path, f.error, f.unparsed)
        for index_offset, log_offset in f.index_mismatches:
            reports.setdefault(int(path.stem), []).append(f"index offset {index_offset}, log offset {log_offset}")
    for path in sorted(partition_dir.glob("*.timeindex")):
        result = dump_log_segments.dump([path], deep_iteration=False)
        f = result[path]
        # a report the parser did not attribute to this file would be lost: none may be left over
        stray = [line for line in result.stderr_other if any(w in line for w in ("ndex", "ffset", "imestamp", "ismatch"))]
        assert f.error is None and not f.unparsed and not stray, (path, f.error, f.unparsed, stray)
        for kind, pairs in (("timestamp mismatch", f.time_index_mismatches),
                            ("out of order", f.time_index_out_of_order),
                            ("offset not found", f.time_index_offsets_not_found)):
            reports.setdefault(int(path.stem), []).extend(f"{kind} {a}, {b}" for a, b in pairs)
    return {base: r for base, r in reports.items() if r}


def kla043_segments(log_dir: Path, topic: str) -> dict[int, list[str]]:
    _, found = findings_of([log_dir])
    return {e["segment"]: e["problem"] for f in found if f.code == "KLA043" and f.topic == topic
            for e in f.evidence}


def _last_batch(dump_log_segments, log: Path):
    return dump_log_segments.dump([log], deep_iteration=False)[log].batches[-1]


def _append_index_entry(closed: Path, relative_offset: int, position: int) -> None:
    with open(closed.with_suffix(".index"), "ab") as fh:   # a copy, never the broker's file
        fh.write(struct.pack(">ii", relative_offset, position))


def _shift_timeindex_entry(closed: Path, timestamp_delta: int = 0, offset_delta: int = 0) -> None:
    timeindex = closed.with_suffix(".timeindex")
    data = bytearray(timeindex.read_bytes())
    assert len(data) == 12, "a closed segment's time index holds the entry written at roll"
    timestamp_ms, relative = struct.unpack(">qi", data)
    struct.pack_into(">qi", data, 0, timestamp_ms + timestamp_delta, relative + offset_delta)
    timeindex.write_bytes(bytes(data))


# Damages of the entries KLA043 reads (each segment's last .index and .timeindex entry), and one
# correct entry added: KLA043 must name exactly the segments Kafka's own tool reports.
INDEX_DAMAGES = {
    "timeindex offset past the log": lambda dls, closed: _shift_timeindex_entry(closed, offset_delta=100),
    "timeindex timestamp above the records": lambda dls, closed: _shift_timeindex_entry(closed, timestamp_delta=HOUR),
    "index offset past the log": lambda dls, closed: _append_index_entry(
        closed, (b := _last_batch(dls, closed)).last_offset + 100 - int(closed.stem), b.position),
    "a correct index entry added": lambda dls, closed: _append_index_entry(
        closed, (b := _last_batch(dls, closed)).last_offset - int(closed.stem), b.position),
}


def test_healthy_index_files_no_report_from_kafka_nor_kla043(broker, dump_log_segments):
    partition_dir = broker["log_dir"] / "txn-0"
    assert dumplogsegments_index_reports(dump_log_segments, partition_dir) == {}
    assert kla043_segments(broker["log_dir"], "txn") == {}


@pytest.mark.parametrize("damage", list(INDEX_DAMAGES))
def test_kla043_names_the_segments_dumplogsegments_reports(copy, dump_log_segments, damage):
    closed = segment_files(copy / "txn-0")[0]
    INDEX_DAMAGES[damage](dump_log_segments, closed)
    kafka = dumplogsegments_index_reports(dump_log_segments, copy / "txn-0")
    ours = kla043_segments(copy, "txn")
    assert set(ours) == set(kafka), f"{damage}: KLA043 {ours}, DumpLogSegments {kafka}"
    assert set(kafka) == (set() if damage == "a correct index entry added" else {int(closed.stem)}), kafka


def test_a_time_index_entry_past_the_log_is_reported(copy):
    closed = segment_files(copy / "txn-0")[0]
    timeindex = closed.with_suffix(".timeindex")
    data = bytearray(timeindex.read_bytes())
    assert len(data) == 12, "a closed segment's time index holds the entry written at roll"
    timestamp_ms, relative = struct.unpack(">qi", data)
    struct.pack_into(">qi", data, 0, timestamp_ms, relative + 100)  # 100 offsets past the .log
    timeindex.write_bytes(bytes(data))
    _, found = findings_of([copy])
    mismatch = [f for f in found if f.code == "KLA043"]
    assert [(f.topic, f.base_offset) for f in mismatch] == [("txn", int(closed.stem))], [f.message for f in found]
    last = int(closed.stem) + relative
    assert f"offset {last + 100}) is after the .log's last offset {last}" in mismatch[0].message
    assert [f.code for f in found if f.topic != "jumpy"] == ["KLA043"]
