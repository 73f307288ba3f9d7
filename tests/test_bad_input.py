"""Bad input never crashes the scan: each case becomes a note naming file, position, field and value."""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor.formats.log_reader import LogReader
from auditor.scan import SegmentFiles, scan_log_dirs, scan_segment
from harness.realdata import copy_log_dir

# hypothesis over every depth: 2.3 s at load 2 (tests/conftest.py: long files first)
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=2)]

DEPTHS_READING_LOG = ("index", "headers", "deep")
SEG = "00000000000000000000"
LENGTH_FIELD = 8  # int32 batchLength / messageSize at entry byte 8, after the int64 offset


def _segment(result, dir_name, base=0):
    return next(s for s in result.segments if s["dir_name"] == dir_name and s["base_offset"] == base)


def _batch_starts(log: Path) -> list[int]:
    reader = LogReader(log)
    try:
        return [b.position for b in reader.batches(0)]
    finally:
        reader.close()


@pytest.fixture
def v2_dir(tmp_path):
    """A copy of a real 2018 broker log dir: debug_topic-0 has 3 v2 batches, __consumer_offsets-28 8,202."""
    return copy_log_dir("kafka-2018-v2", tmp_path)


def test_truncated_tail_of_active_segment_is_a_note_not_corruption(v2_dir):
    log = v2_dir / "debug_topic-0" / f"{SEG}.log"
    size = log.stat().st_size
    last_start = _batch_starts(log)[-1]
    os.truncate(log, last_start + 30)  # cut inside the last batch, as a reader racing an append sees it
    for depth in DEPTHS_READING_LOG:
        seg = _segment(scan_log_dirs([v2_dir], depth), "debug_topic-0")
        assert seg["is_active"] is True
        assert seg["stop_reason"] == "partial-tail"
        assert seg["trailing_bytes"] == 30
        assert any(str(log) in n and str(last_start) in n and "expected, not corruption" in n for n in seg["notes"]), seg["notes"]
        assert seg.get("crc_failures") in (None, 0)
    assert size > last_start + 30


def test_corrupt_crc_is_a_finding_at_deep(v2_dir):
    log = v2_dir / "debug_topic-0" / f"{SEG}.log"
    second = _batch_starts(log)[1]
    data = bytearray(log.read_bytes())
    data[second + 70] ^= 0xFF  # a byte inside the records: covered by the CRC, not a header length
    log.write_bytes(bytes(data))
    headers = _segment(scan_log_dirs([v2_dir], "headers"), "debug_topic-0")
    assert headers["crc_failures"] is None  # CRCs are only checked at deep
    deep = _segment(scan_log_dirs([v2_dir], "deep"), "debug_topic-0")
    assert deep["crc_failures"] == 1
    assert any(f"byte {second}" in n and "crc" in n for n in deep["notes"]), deep["notes"]


@pytest.mark.parametrize("length", [0x7FFFFFFF, -5, 3])
def test_absurd_or_negative_batch_length(v2_dir, length):
    log = v2_dir / "__consumer_offsets-28" / f"{SEG}.log"
    starts = _batch_starts(log)
    target = starts[100]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, target + LENGTH_FIELD, length)
    log.write_bytes(bytes(data))
    tracemalloc.start()
    try:
        result = scan_log_dirs([v2_dir], "deep")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    seg = _segment(result, "__consumer_offsets-28")
    assert seg["batch_count"] == 100 and seg["stop_reason"] in ("corrupt", "partial-tail")
    assert seg["trailing_bytes"] == log.stat().st_size - target
    assert any(str(target) in n for n in seg["notes"]), seg["notes"]
    assert peak < 64 * 1024 * 1024, f"peak Python memory {peak} B for a length field of {length}"


def test_zero_filled_tail(v2_dir):
    log = v2_dir / "debug_topic-0" / f"{SEG}.log"
    size = log.stat().st_size
    with open(log, "ab") as fh:
        fh.write(b"\0" * 4096)  # what a preallocated (log.preallocate=true) segment looks like
    seg = _segment(scan_log_dirs([v2_dir], "headers"), "debug_topic-0")
    assert seg["stop_reason"] == "zero-tail"
    assert seg["trailing_bytes"] == 4096 and seg["batch_count"] == 3
    assert any(str(size) in n for n in seg["notes"])


def test_missing_and_empty_index_files(v2_dir):
    part = v2_dir / "__consumer_offsets-28"
    (part / f"{SEG}.index").unlink()
    (part / f"{SEG}.timeindex").write_bytes(b"")
    for depth in ("stat", "index", "headers"):
        seg = _segment(scan_log_dirs([v2_dir], depth), "__consumer_offsets-28")
        assert seg["index_size_bytes"] is None
        assert any("no .index beside it" in n for n in seg["notes"])
        assert any("empty .timeindex" in n for n in seg["notes"])
        if depth != "stat":
            assert seg["last_offset"] == 8201  # the walk still finds the end without an index


def _scan_as_unprivileged(log_dir: Path, depth: str) -> dict:
    """scan_log_dirs in a forked child that dropped root (root reads anything, even mode 000).

    A fork, not a new interpreter: the unprivileged user may not be allowed to execute the
    virtualenv's python (CI checks it out under root's home), but the forked child already has
    everything loaded.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            os.close(read_fd)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            result = scan_log_dirs([log_dir], depth)
            payload = {"euid": os.geteuid(), "segments": result.segments, "partitions": result.partitions}
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the test
            payload = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            with os.fdopen(write_fd, "w") as out:
                out.write(json.dumps(payload, default=str))
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as inp:
        data = json.loads(inp.read() or "{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data
    return data


NOBODY = 65534


def test_unreadable_file_is_noted(v2_dir):
    """A 000-mode .log read by an unprivileged scanner: a note naming the file, the rest scanned."""
    base = Path(tempfile.mkdtemp(prefix="kla-unreadable-"))
    try:
        logdir = base / "kafka-logs"
        shutil.copytree(v2_dir, logdir)
        for p in [base, *logdir.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        os.chmod(logdir / "debug_topic-0" / f"{SEG}.log", 0)
        data = _scan_as_unprivileged(logdir, "headers")
        assert data["euid"] != 0
        seg = next(s for s in data["segments"] if s["dir_name"] == "debug_topic-0" and s["base_offset"] == 0)
        assert any(f"{logdir}/debug_topic-0/{SEG}.log: cannot open: Permission denied" in n for n in seg["notes"]), seg["notes"]
        assert seg["batch_count"] is None and seg["log_size_bytes"] is not None  # stat works, reading does not
        other = next(s for s in data["segments"] if s["dir_name"] == "__consumer_offsets-28")
        assert other["batch_count"] and not any("Permission denied" in n for n in other["notes"])
    finally:
        shutil.rmtree(base)


def test_file_deleted_or_renamed_between_listing_and_reading(v2_dir):
    part = v2_dir / "debug_topic-0"
    files = SegmentFiles(0, None, {s: part / f"{SEG}.{s}" for s in ("log", "index", "timeindex")})
    location = {"broker_id": 0, "log_dir": str(v2_dir), "topic": "debug_topic", "partition": 0,
                "dir_kind": "live", "dir_name": part.name, "cluster_id": None}
    # the broker's retention renames a segment to .deleted, then removes it: both after our listing
    os.rename(part / f"{SEG}.log", part / f"{SEG}.log.deleted")
    (part / f"{SEG}.timeindex").unlink()
    row = scan_segment(files, "deep", is_active=False, location=location)
    assert row["log_size_bytes"] is None
    assert any("vanished between listing and reading" in n and f"{SEG}.log" in n for n in row["notes"])
    assert any("vanished" in n and f"{SEG}.timeindex" in n for n in row["notes"])


def test_directory_that_is_not_a_kafka_log_dir(tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "readme.txt").write_text("not kafka")
    result = scan_log_dirs([tmp_path], "headers")
    assert result.segments == [] and result.partitions == []
    problems = result.log_dirs[0]["problems"]
    assert any("not a Kafka log dir" in p for p in problems)
    assert any("photos" in p and "not a Kafka partition directory" in p for p in problems)


def test_symlink_pointing_out_of_the_log_dir_is_not_followed(v2_dir, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.copytree(v2_dir / "debug_topic-0", outside / "secret-0")
    os.symlink(outside / "secret-0", v2_dir / "secret-0")
    os.symlink(outside / "secret-0" / f"{SEG}.log", v2_dir / "debug_topic-0" / f"{SEG}.log.swap")
    result = scan_log_dirs([v2_dir], "headers")
    assert not any(p["dir_name"] == "secret-0" for p in result.partitions)
    assert any("secret-0" in p and "OUTSIDE" in p and "not followed" in p for p in result.log_dirs[0]["problems"])
    part = next(p for p in result.partitions if p["dir_name"] == "debug_topic-0")
    assert any(".log.swap" in n and "not followed" in n for n in part["notes"])


def test_fifo_is_not_opened(v2_dir):
    os.mkfifo(v2_dir / "debug_topic-0" / "00000000000000000040.log")
    result = scan_log_dirs([v2_dir], "headers")  # would block forever if the FIFO were opened
    seg = _segment(result, "debug_topic-0", 40)
    assert any("not a regular file" in n for n in seg["notes"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(min_size=0, max_size=4096), prefix_real=st.booleans())
def test_random_bytes_never_crash_any_depth(tmp_path_factory, blob, prefix_real):
    logdir = tmp_path_factory.mktemp("fuzz") / "kafka-logs"
    part = logdir / "fuzz-0"
    part.mkdir(parents=True)
    (logdir / "meta.properties").write_text("version=0\nbroker.id=7\n")
    real = (Path(__file__).resolve().parents[2] / "shared/fixtures/real/broker-dirs/kafka-2018-v2/kafka-logs/debug_topic-0" / f"{SEG}.log").read_bytes()
    (part / f"{SEG}.log").write_bytes((real if prefix_real else b"") + blob)
    (part / f"{SEG}.index").write_bytes(blob[: len(blob) // 8 * 8])
    (part / f"{SEG}.timeindex").write_bytes(blob[:36] + b"\0" * 12)
    for depth in ("index", "headers", "deep"):
        result = scan_log_dirs([logdir], depth)
        seg = result.segments[0]
        assert seg["log_size_bytes"] == len(real) * prefix_real + len(blob)
        if seg["trailing_bytes"]:
            assert seg["stop_reason"] is not None and seg["notes"]
