"""``__consumer_offsets`` from real brokers' files (../shared/fixtures/real) and from damaged copies.

* Every ``__consumer_offsets`` partition in the real fixtures: the committed offsets (offset,
  metadata, commit time) of :func:`read_groups` equal Kafka's own ``DumpLogSegments
  --offsets-decoder`` output folded as the coordinator replays (last commit per key, tombstones
  applied); the fixtures hold a 2018 partition of 8,202 commits and a 2.7.1 partition the
  cleaner compacted (tombstones of a deleted group).
* Bad input: a record whose key has an unknown version, a value cut short, a group name that is
  not UTF-8, a batch cut in the middle: each becomes a note naming file, position, record and
  field; the good records around them are still read; nothing crashes.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import crc32c
import pytest

from auditor.cluster.consumer_groups import OFFSETS_TOPIC, offsets_partition_dirs, read_groups
from harness.encoding import zigzag_varint
from harness.offsets_commits import commit_key, commit_value
from harness.offsets_dump import dump_offsets, latest_offsets
from harness.realdata import LOG_DIRS

# DumpLogSegments on __consumer_offsets: 4 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=4)]


def test_real_partitions_equal_dumplogsegments(dump_log_segments):
    dirs = offsets_partition_dirs(LOG_DIRS)
    assert len(dirs) >= 2, dirs
    result = read_groups(LOG_DIRS)
    assert result.notes == []
    compared = 0
    for part, (d,) in sorted(dirs.items()):
        theirs = latest_offsets(dump_offsets(dump_log_segments, d))
        mine = {g: grp for g, grp in result.groups.items() if grp.offsets_partition == part}
        assert {g: set(grp.offsets) for g, grp in mine.items() if grp.offsets} == {g: set(v) for g, v in theirs.items()}
        for g, offs in theirs.items():
            for k, v in offs.items():
                c = mine[g].offsets[k]
                assert (c.offset, c.metadata, c.commit_timestamp_ms) == (v["offset"], v["metadata"], v["commitTimestamp"])
                compared += 1
    assert compared >= 1   # the 2018 partition's live commit; the 2.7.1 one holds only tombstones now
    # the 2.7.1 partition: the console consumer group that was deleted is not live
    deleted = [g for g, grp in result.groups.items() if grp.deleted]
    assert "console-consumer-65070" in deleted and "console-consumer-65070" not in result.live


# ------------------------------------------------------------------------------- bad input


def _record(offset_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = b"\x00" + zigzag_varint(0) + zigzag_varint(offset_delta)
    body += zigzag_varint(-1) if key is None else zigzag_varint(len(key)) + key
    body += zigzag_varint(-1) if value is None else zigzag_varint(len(value)) + value
    body += zigzag_varint(0)
    return zigzag_varint(len(body)) + body


def _batch(base_offset: int, records: list[tuple[bytes | None, bytes | None]], ts: int = 1_700_000_000_000) -> bytes:
    recs = b"".join(_record(i, k, v) for i, (k, v) in enumerate(records))
    after_crc = struct.pack(">hiqqqhii", 0, len(records) - 1, ts, ts, -1, -1, -1, len(records)) + recs
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, length, 0, 2, crc) + after_crc


def test_bad_records_become_notes(tmp_path):
    pdir = tmp_path / "logs" / f"{OFFSETS_TOPIC}-0"
    pdir.mkdir(parents=True)
    good1 = (commit_key(b"good", b"t", 0), commit_value(41))
    unknown = (struct.pack(">h", 999) + b"whatever", b"\x00\x00value")
    truncated = (commit_key(b"cut", b"t", 0), commit_value(7)[:-3])
    not_utf8 = (commit_key(b"caf\xe9-\xff", b"t", 1), commit_value(9))
    good2 = (commit_key(b"good", b"t", 1), commit_value(42))
    v0_key = (commit_key(b"old", b"t", 0, version=0), commit_value(5))
    data = _batch(0, [good1, unknown]) + _batch(2, [truncated]) + _batch(3, [not_utf8, good2, v0_key])
    cut_batch = _batch(6, [(commit_key(b"late", b"t", 0), commit_value(1))])
    log = pdir / f"{0:020d}.log"
    log.write_bytes(data + cut_batch[: len(cut_batch) // 2])
    result = read_groups([tmp_path / "logs"])
    notes = "\n".join(result.notes)
    assert {k: c.offset for k, c in result.groups["good"].offsets.items()} == {("t", 0): 41, ("t", 1): 42}
    assert result.groups["old"].offsets[("t", 0)].offset == 5      # a v0 key is read like v1
    assert "cut" not in result.live
    # every problem named: file, byte position, record offset, field, value
    assert f"{log}: byte 0: record 1: key version = 999" in notes
    assert "record 2: OffsetCommitKey of group 'cut': value not decoded" in notes and "commitTimestamp" in notes
    assert "record 3: OffsetCommitKey.group = b'caf\\xe9-\\xff', expected UTF-8" in notes
    assert "partial-tail" in notes and f"byte {len(data)}" in notes
    assert "caf\ufffd-\ufffd" in result.live    # kept, under the name Kafka's decoder gives it
    assert len(result.notes) == 4, result.notes


def test_unreadable_and_odd_files_do_not_crash(tmp_path):
    src = next(d for d in LOG_DIRS if (d / f"{OFFSETS_TOPIC}-39").is_dir())
    copy = tmp_path / "logs"
    shutil.copytree(src / f"{OFFSETS_TOPIC}-39", copy / f"{OFFSETS_TOPIC}-39")
    seg = copy / f"{OFFSETS_TOPIC}-39" / f"{0:020d}.log"
    raw = bytearray(seg.read_bytes())
    raw[8:12] = struct.pack(">i", 3)      # an impossible batch length in the first batch
    seg.write_bytes(bytes(raw))
    (copy / f"{OFFSETS_TOPIC}-7").mkdir()  # an empty partition dir
    (copy / f"{OFFSETS_TOPIC}-7" / f"{0:020d}.log").write_bytes(b"")
    result = read_groups([copy])
    assert any("corrupt" in n and "size = 3" in n for n in result.notes), result.notes
    # the second segment (offsets 18-19: the tombstones) is still read
    assert "console-consumer-65070" not in result.live
    assert Path(seg).read_bytes() == bytes(raw)   # read-only


def test_groups_come_in_the_same_order_whatever_the_hash_seed(tmp_path):
    """The demo sample's three groups in one __consumer_offsets partition: the order read_groups
    lists them in (and so collect's manifest part) is the same in processes with different string
    hash seeds (it once followed a set's order: the wheel test saw two installs disagree)."""
    import json
    import os
    import subprocess
    import sys

    from auditor.cli.demo import unpack_demo_sample

    log_dirs, _ = unpack_demo_sample(tmp_path / "demo")
    code = ("import json, sys; from auditor.cluster.consumer_groups import read_groups; "
            "print(json.dumps(list(read_groups(sys.argv[1:]).groups)))")
    orders = set()
    for seed in ("1", "2", "3", "4"):
        proc = subprocess.run([sys.executable, "-c", code, *map(str, log_dirs)], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ, PYTHONHASHSEED=seed), check=True)
        orders.add(proc.stdout.strip())
    assert len(orders) == 1, orders
    groups = json.loads(orders.pop())
    assert len(groups) >= 3 and groups == sorted(groups), groups
