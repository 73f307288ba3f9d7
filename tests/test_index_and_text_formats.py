"""Index, snapshot, checkpoint and file-name parsers: real broker data + crafted bytes."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest

from auditor.formats import checkpoints, filenames
from auditor.formats.errors import FormatError
from auditor.formats.offset_index import ENTRY_SIZE as OFFSET_ENTRY, read_offset_index
from auditor.formats.producer_snapshot import read_producer_snapshot_header
from auditor.formats.time_index import ENTRY_SIZE as TIME_ENTRY, read_time_index
from auditor.formats.txn_index import ENTRY_SIZE as TXN_ENTRY, read_txn_index
from harness.expected_txt import read_expected
from harness.realdata import BROKER_DIRS, REAL, at_least  # raises when ../shared is absent: no silent empty parametrization

pytestmark = pytest.mark.recorded

REAL_FILES = at_least(sorted(p for p in BROKER_DIRS.rglob("*") if p.is_file()), 54, "files of the broker dirs")
PREALLOC_INDEX = 10485760
PREALLOC_TIMEINDEX = 10485756


EXPECTED = {path: facts["indexes"] for path, facts in read_expected(REAL / "EXPECTED.txt").items()
            if path.startswith("broker-dirs/")}
assert EXPECTED, f"no index counts parsed from {REAL / 'EXPECTED.txt'}"


# ---------------------------------------------------------------------------- real broker data
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: str(p.relative_to(BROKER_DIRS)))
def test_every_real_file_parses(path: Path):
    name = path.name
    seg = filenames.parse_segment_file(name)
    parent = filenames.parse_partition_dir(path.parent.name)
    if seg is not None:
        assert parent is not None and parent.kind == "live"
        if seg.suffix in ("index", "timeindex"):
            read = read_offset_index if seg.suffix == "index" else read_time_index
            full = read(path, seg.base_offset)
            tail = read(path, seg.base_offset, tail_only=True)
            assert full.problems == [] and tail.problems == []
            assert full.entry_count == tail.entry_count == len(full.entries)
            assert tail.entries == full.entries[-1:]
            assert full.zero_tail_bytes == 0
            log = str((path.parent / filenames.segment_file_name(seg.base_offset, "log")).relative_to(REAL))
            if log in EXPECTED and seg.suffix in EXPECTED[log]:
                assert full.entry_count == EXPECTED[log][seg.suffix][0]
        elif seg.suffix == "snapshot":
            header = read_producer_snapshot_header(path)
            assert header.version == 1 and header.crc_ok and header.ok, header
        elif seg.suffix == "txnindex":
            assert read_txn_index(path).problems == []
    elif name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                  "log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        assert name in filenames.LOG_DIR_FILES
        result = checkpoints.read_offset_checkpoint(path)
        assert all(isinstance(t, str) and p >= 0 and o >= 0 for (t, p), o in result.items())
    elif name == "leader-epoch-checkpoint":
        assert parent is not None
        epochs = checkpoints.read_leader_epoch_checkpoint(path)
        assert epochs and epochs == sorted(epochs)
    elif name == "meta.properties":
        props = checkpoints.read_meta_properties(path)
        assert ("node.id" if props["version"] == "1" else "broker.id") in props
    elif name == "partition.metadata":
        meta = checkpoints.read_partition_metadata(path)
        assert meta["version"] == 0 and len(meta["topic_id"]) == 22
    elif name == "MISSING.txt":
        pass
    else:
        assert name in filenames.LOG_DIR_FILES, name


def test_real_known_values():
    d = BROKER_DIRS / "kafka-2018-v2/kafka-logs"
    idx = read_offset_index(d / "__consumer_offsets-28/00000000000000000000.index", 0)
    assert (idx.entry_count, idx.entries[-1]) == (254, (8179, 1063461))
    assert checkpoints.read_meta_properties(d / "meta.properties") == {"version": "0", "broker.id": "0"}
    assert len(checkpoints.read_offset_checkpoint(d / "replication-offset-checkpoint")) == 52
    assert checkpoints.read_offset_checkpoint(d / "cleaner-offset-checkpoint") == {}   # empty file, as Kafka
    k = BROKER_DIRS / "kraft-transactional/kafka-data"
    snap = read_producer_snapshot_header(k / "_confluent-ksql-default__command_topic-0/00000000000000000002.snapshot")
    assert (snap.entry_count, snap.size_bytes, snap.crc_ok) == (1, 56, True)
    assert checkpoints.read_leader_epoch_checkpoint(k / "__transaction_state-44/leader-epoch-checkpoint") == [(0, 0), (38, 4)]
    assert checkpoints.read_partition_metadata(k / "_schemas-0/partition.metadata")["topic_id"] == "Fa1tHmowQS2lSyUrEd4jSA"
    c = BROKER_DIRS / "kafka-2.7.1-compacted/kafka-logs"
    assert checkpoints.read_offset_checkpoint(c / "cleaner-offset-checkpoint")[("__consumer_offsets", 39)] == 18


# ---------------------------------------------------------------------------- crafted indexes
def _write(tmp_path: Path, name: str, data: bytes, size: int | None = None) -> Path:
    p = tmp_path / name
    with open(p, "wb") as f:
        f.write(data)
        if size is not None:
            f.truncate(size)          # sparse zero tail, like RandomAccessFile.setLength
    return p


def _offset_entries(base, pairs):
    return b"".join(struct.pack(">ii", off - base, pos) for off, pos in pairs)


def _time_entries(base, pairs):
    return b"".join(struct.pack(">qi", ts, off - base) for ts, off in pairs)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 100])
def test_offset_index_preallocated_zero_tail(tmp_path, n):
    base = 1000
    pairs = [(base + 10 * (i + 1), 5000 * (i + 1)) for i in range(n)]
    p = _write(tmp_path, "00000000000000001000.index", _offset_entries(base, pairs), PREALLOC_INDEX)
    for tail_only in (False, True):
        r = read_offset_index(p, base, tail_only=tail_only)
        assert r.entry_count == n
        assert r.size_bytes == PREALLOC_INDEX
        assert r.zero_tail_bytes == PREALLOC_INDEX - n * OFFSET_ENTRY
        assert r.entries == (pairs if not tail_only else pairs[-1:])
        assert r.problems == []


def test_tail_only_uses_few_preads(tmp_path, monkeypatch):
    pairs = [(10 * (i + 1), 5000 * (i + 1)) for i in range(5)]
    p = _write(tmp_path, "00000000000000000000.index", _offset_entries(0, pairs), PREALLOC_INDEX)
    calls = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, off: calls.append(n) or real(fd, n, off))
    r = read_offset_index(p, 0, tail_only=True)
    assert r.entries == [(50, 25000)] and r.entry_count == 5
    assert len(calls) <= 30 and max(calls) <= 2 * OFFSET_ENTRY  # never the 10 MiB preallocated file


def test_tail_only_of_a_trimmed_index_is_two_preads(tmp_path, monkeypatch):
    pairs = [(10 * (i + 1), 5000 * (i + 1)) for i in range(1000)]
    p = _write(tmp_path, "00000000000000000000.index", _offset_entries(0, pairs), 1000 * OFFSET_ENTRY)
    calls = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, off: calls.append((n, off)) or real(fd, n, off))
    r = read_offset_index(p, 0, tail_only=True)
    assert r.entries == [pairs[-1]] and r.entry_count == 1000 and r.problems == []
    assert calls == [(2 * OFFSET_ENTRY, 998 * OFFSET_ENTRY), (OFFSET_ENTRY, 0)]


@pytest.mark.parametrize("n", [0, 1, 4])
def test_time_index_preallocated_zero_tail(tmp_path, n):
    pairs = [(1_700_000_000_000 + i, 5 + i) for i in range(n)]
    p = _write(tmp_path, "00000000000000000005.timeindex", _time_entries(5, pairs), PREALLOC_TIMEINDEX)
    for tail_only in (False, True):
        r = read_time_index(p, 5, tail_only=tail_only)
        assert r.entry_count == n
        assert r.zero_tail_bytes == PREALLOC_TIMEINDEX - n * TIME_ENTRY
        assert r.entries == (pairs if not tail_only else pairs[-1:])


def test_time_index_first_entry_at_base_offset_is_kept(tmp_path):
    # entry 0 with relative offset 0 but a real timestamp is a real entry (DumpLogSegments' i > 0)
    pairs = [(1_700_000_000_000, 0), (1_700_000_000_500, 0), (1_700_000_001_000, 3)]
    p = _write(tmp_path, "00000000000000000000.timeindex", _time_entries(0, pairs[:1]), PREALLOC_TIMEINDEX)
    assert read_time_index(p, 0).entries == pairs[:1]
    assert read_time_index(p, 0, tail_only=True).entry_count == 1


def test_odd_size_is_a_problem(tmp_path):
    p = _write(tmp_path, "00000000000000000000.index", _offset_entries(0, [(5, 4100)]) + b"\x01\x02\x03")
    for tail_only in (False, True):
        r = read_offset_index(p, 0, tail_only=tail_only)
        assert r.entry_count == 1
        assert any("11 bytes is not a multiple" in s and "entry size 8" in s for s in r.problems), r.problems
    p = _write(tmp_path, "00000000000000000000.timeindex", _time_entries(0, [(7, 1)]) + b"\x00" * 5)
    assert any("not a multiple of the time index entry size 12" in s for s in read_time_index(p, 0).problems)


def test_non_monotonic_offset_index(tmp_path):
    pairs = [(10, 4100), (20, 8200), (15, 12300), (30, 12000)]
    p = _write(tmp_path, "00000000000000000000.index", _offset_entries(0, pairs))
    r = read_offset_index(p, 0)
    assert r.entries == pairs
    joined = "\n".join(r.problems)
    assert "byte 16: entry 2: offset = 15, previous entry's offset = 20" in joined
    assert "byte 24: entry 3: position = 12000, previous entry's position = 12300" in joined
    assert all(str(p) in s for s in r.problems)
    tail = read_offset_index(p, 0, tail_only=True)
    assert any("entry 3" in s for s in tail.problems)


def test_non_monotonic_time_index(tmp_path):
    pairs = [(100, 1), (200, 5), (200, 6), (150, 4)]
    p = _write(tmp_path, "00000000000000000000.timeindex", _time_entries(0, pairs))
    joined = "\n".join(read_time_index(p, 0).problems)
    assert "entry 2: timestamp_ms = 200, previous entry's timestamp_ms = 200" in joined
    assert "entry 3: timestamp_ms = 150" in joined and "offset = 4, previous entry's offset = 6" in joined


def test_problem_list_is_capped(tmp_path):
    pairs = [(1000 - i, 5000 + i) for i in range(200)]
    p = _write(tmp_path, "00000000000000000000.index", _offset_entries(0, pairs))
    r = read_offset_index(p, 0)
    assert r.entry_count == 200 and len(r.problems) <= 21 and "more problems" in r.problems[-1]


def test_empty_and_missing_index(tmp_path):
    p = _write(tmp_path, "00000000000000000000.index", b"")
    r = read_offset_index(p, 0, tail_only=True)
    assert (r.entry_count, r.entries, r.problems) == (0, [], [])
    with pytest.raises(FileNotFoundError):
        read_offset_index(tmp_path / "nope.index", 0)


# ---------------------------------------------------------------------------- txnindex, snapshot
def test_txn_index(tmp_path):
    e = [(0, 7, 10, 20, 5), (0, 8, 30, 31, 25)]
    data = b"".join(struct.pack(">hqqqq", *t) for t in e)
    p = _write(tmp_path, "00000000000000000000.txnindex", data)
    r = read_txn_index(p)
    assert len(r) == 2 and r[1].producer_id == 8 and r[0].last_stable_offset == 5 and r.problems == []
    p = _write(tmp_path, "00000000000000000000.txnindex", data + struct.pack(">hqqqq", 1, 9, 50, 40, 0)
               + b"\x00" * 10)
    r = read_txn_index(p)
    assert len(r) == 3
    joined = "\n".join(r.problems)
    assert "byte 102: trailing partial entry of 10 bytes" in joined
    assert "entry 2: version = 1, expected 0" in joined and "last_offset = 40" in joined
    assert TXN_ENTRY == 34


def _snapshot(entries: int, version: int = 1, corrupt: bool = False) -> bytes:
    body = struct.pack(">i", entries) + b"".join(
        struct.pack(">qhiqiqiq", 1000 + i, 0, 5, 42, 0, 1_700_000_000_000, -1, -1) for i in range(entries))
    crc = crc32c.crc32c(body) ^ (1 if corrupt else 0)
    return struct.pack(">hI", version, crc) + body


def test_producer_snapshot(tmp_path):
    h = read_producer_snapshot_header(_write(tmp_path, "00000000000000000010.snapshot", _snapshot(3)))
    assert (h.version, h.entry_count, h.size_bytes, h.crc_ok, h.ok) == (1, 3, 10 + 3 * 46, True, True)
    h = read_producer_snapshot_header(_write(tmp_path, "a.snapshot", _snapshot(2, corrupt=True)))
    assert not h.crc_ok and not h.ok and h.crc_stored != h.crc_computed
    h = read_producer_snapshot_header(_write(tmp_path, "b.snapshot", _snapshot(0, version=2)))
    assert h.crc_ok and not h.ok and "version = 2" in h.problems[0]
    h = read_producer_snapshot_header(_write(tmp_path, "c.snapshot", _snapshot(2)[:-5]))
    assert not h.ok and any("entry_count = 2" in s for s in h.problems)
    h = read_producer_snapshot_header(_write(tmp_path, "d.snapshot", b"\x00\x01\x00"))
    assert (h.version, h.crc_stored, h.ok) == (1, None, False)


# ---------------------------------------------------------------------------- checkpoints
def _text(tmp_path, name, text: str) -> Path:
    return _write(tmp_path, name, text.encode())


def test_offset_checkpoint_ok(tmp_path):
    p = _text(tmp_path, "replication-offset-checkpoint", "0\n3\nfoo 0 10\nmy.topic-x 12 7\r\nfoo  1\t20  \n")
    assert checkpoints.read_offset_checkpoint(p) == {("foo", 0): 10, ("my.topic-x", 12): 7, ("foo", 1): 20}
    assert checkpoints.read_offset_checkpoint(_text(tmp_path, "a", "")) == {}
    assert checkpoints.read_offset_checkpoint(_text(tmp_path, "b", "0\n")) == {}


@pytest.mark.parametrize("text, field, found", [
    ("1\n0\n", "line 1: version", 1),
    ("x\n0\n", "line 1: version", "x"),
    ("0\n2\nfoo 0 1\n", "line 2: entry count", 2),
    ("0\n1\nfoo 0 1\nbar 0 2\n", "line 2: entry count", 1),
    ("0\n1\nfoo 0\n", "line 3: entry", "foo 0"),
    ("0\n1\n foo 0 1\n", "line 3: entry", " foo 0 1"),
    ("0\n1\nfoo zero 1\n", "line 3: partition", "zero"),
    ("0\n1\nfoo 0 1_000\n", "line 3: offset", "1_000"),
    ("0\n2\nfoo 0 1\n\n", "line 4: entry", ""),
])
def test_offset_checkpoint_bad(tmp_path, text, field, found):
    p = _text(tmp_path, "recovery-point-offset-checkpoint", text)
    with pytest.raises(FormatError) as exc:
        checkpoints.read_offset_checkpoint(p)
    assert exc.value.field == field and exc.value.found == found and exc.value.file == str(p)
    assert str(p) in str(exc.value)


def test_leader_epoch_checkpoint(tmp_path):
    p = _text(tmp_path, "leader-epoch-checkpoint", "0\n2\n0 0\n5 100\n")
    assert checkpoints.read_leader_epoch_checkpoint(p) == [(0, 0), (5, 100)]
    with pytest.raises(FormatError) as exc:
        checkpoints.read_leader_epoch_checkpoint(_text(tmp_path, "x", "0\n1\n0 0 0\n"))
    assert exc.value.field == "line 3: entry" and exc.value.position == 4
    with pytest.raises(FormatError):
        checkpoints.read_leader_epoch_checkpoint(_text(tmp_path, "y", "0\n1\n3000000000 0\n"))


def test_meta_properties(tmp_path):
    p = _text(tmp_path, "meta.properties",
              "#\n#Thu Oct 10\n! bang comment\nnode.id=1\ndirectory.id = ROP8qUaSlk7r55i85yz4Cg\n"
              "version:1\ncluster.id MkU3OEVB\\\n   NTcwNTJ\n")
    assert checkpoints.read_meta_properties(p) == {
        "node.id": "1", "directory.id": "ROP8qUaSlk7r55i85yz4Cg", "version": "1", "cluster.id": "MkU3OEVBNTcwNTJ"}
    assert checkpoints.read_meta_properties(_text(tmp_path, "v0", "broker.id=3\n")) == {"broker.id": "3"}
    for bad, field in [("version=1\nnode.id=1\n", "cluster.id"), ("version=2\n", "version"),
                       ("version=0\nbroker.id=x\n", "broker.id"), ("version=1\ncluster.id=a\n", "node.id"),
                       ("broker.id=1\ndirectory.id=abc\n", "directory.id")]:
        with pytest.raises(FormatError) as exc:
            checkpoints.read_meta_properties(_text(tmp_path, "bad", bad))
        assert exc.value.field == field


def test_partition_metadata(tmp_path):
    p = _text(tmp_path, "partition.metadata", "version: 0\ntopic_id: Fa1tHmowQS2lSyUrEd4jSA==")
    assert checkpoints.read_partition_metadata(p)["topic_id"] == "Fa1tHmowQS2lSyUrEd4jSA"
    for bad in ["", "version 0\ntopic_id: Fa1tHmowQS2lSyUrEd4jSA", "version: 0\n",
                "version: 0\ntopic_id: not+base64/uuid!!!!!!", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
                "version: -1\ntopic_id: Fa1tHmowQS2lSyUrEd4jSA"]:
        with pytest.raises(FormatError):
            checkpoints.read_partition_metadata(_text(tmp_path, "pm", bad))


# ---------------------------------------------------------------------------- names
UUID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("name, expected", [
    ("foo-0", ("foo", 0, "live", None, False)),
    ("my-topic.with.dots-12", ("my-topic.with.dots", 12, "live", None, False)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49, "live", None, False)),
    ("a--1", ("a-", 1, "live", None, False)),
    ("__cluster_metadata-0", ("__cluster_metadata", 0, "metadata", None, False)),
    (f"my-topic-3.{UUID}-future", ("my-topic", 3, "future", UUID, False)),
    (f"my.topic-3.{UUID}-delete", ("my.topic", 3, "delete", UUID, False)),
    (f"t-7.{UUID}-stray", ("t", 7, "stray", UUID, False)),
    ("foo", None), ("foo-", None), ("-0", None), ("foo-x", None), ("foo-+1", None), ("foo-0-delete", None),
    (f"foo-0.{UUID}-deleted", None), ("lost+found", None), ("foo-99999999999", None),
    (f"foo-x.{UUID}-delete", None), ("remote-log-index-cache", None),
])
def test_parse_partition_dir(name, expected):
    parsed = filenames.parse_partition_dir(name)
    assert (tuple(parsed) if parsed else None) == expected


def test_truncated_long_topic_dirs():
    topic = "t" * 249
    suffix = f"-5.{UUID}-delete"
    name = topic[: 255 - len(suffix)] + suffix           # LocalLog.logDirNameWithSuffixCappedLength
    parsed = filenames.parse_partition_dir(name)
    assert len(name) == 255 and parsed.kind == "delete" and parsed.partition == 5 and parsed.topic_maybe_truncated
    assert topic.startswith(parsed.topic)
    stray = filenames.parse_partition_dir(topic[: 255 - len(suffix) + 1] + f"-5.{UUID}-stray")
    assert stray.kind == "stray" and stray.topic_maybe_truncated
    future = filenames.parse_partition_dir(f"{topic}-5.{UUID}-future")   # -future is not capped
    assert future.topic == topic and not future.topic_maybe_truncated


@pytest.mark.parametrize("name, expected", [
    ("00000000000000000000.log", (0, "log", None)),
    ("00000000000000001234.index", (1234, "index", None)),
    ("00000000000000001234.timeindex", (1234, "timeindex", None)),
    ("00000000000000001234.txnindex", (1234, "txnindex", None)),
    ("00000000000000008202.snapshot", (8202, "snapshot", None)),
    ("00000000000000000042.log.deleted", (42, "log", "deleted")),
    ("00000000000000000042.index.cleaned", (42, "index", "cleaned")),
    ("00000000000000000042.timeindex.swap", (42, "timeindex", "swap")),
    ("00000000000000000042.snapshot.deleted", (42, "snapshot", "deleted")),
    ("09223372036854775807.log", (9223372036854775807, "log", None)),
    ("99999999999999999999.log", None), ("0000000000000000000.log", None), ("00000000000000000000.logx", None),
    ("00000000000000000000.log.tmp", None), ("00000000000000000000.index.swap.deleted", None),
    ("00000000000000000000-0000000001.checkpoint", None), ("leader-epoch-checkpoint", None),
])
def test_parse_segment_file(name, expected):
    parsed = filenames.parse_segment_file(name)
    assert (tuple(parsed) if parsed else None) == expected
    if parsed:
        assert filenames.segment_file_name(*parsed) == name


@pytest.mark.parametrize("name, expected, state", [
    ("00000000000000012345-0000000007.checkpoint", (12345, 7), None),
    ("00000000000000012345-0000000007.checkpoint.deleted", (12345, 7), "deleted"),
    ("00000000000000012345-0000000007-8837261.checkpoint.part", (12345, 7), "partial"),
    ("00000000000000012345-0000000007.checkpoint.part", None, None),
    ("00000000000000012345-0000000007-1.checkpoint", None, None),
    ("12345-7.checkpoint", None, None), ("bootstrap.checkpoint", None, None),
])
def test_parse_metadata_snapshot(name, expected, state):
    assert filenames.parse_metadata_snapshot(name) == expected
    full = filenames.parse_metadata_snapshot_file(name)
    assert (full.state if full else None) == state


def test_known_file_sets():
    for n in ("meta.properties", ".lock", ".kafka_cleanshutdown", "bootstrap.checkpoint",
              "replication-offset-checkpoint", "recovery-point-offset-checkpoint",
              "log-start-offset-checkpoint", "cleaner-offset-checkpoint", "replication-offset-checkpoint.tmp"):
        assert n in filenames.LOG_DIR_FILES
    for n in ("leader-epoch-checkpoint", "partition.metadata", "quorum-state", "leader-epoch-checkpoint.tmp"):
        assert n in filenames.PARTITION_DIR_FILES
    assert "foo.txt" not in filenames.LOG_DIR_FILES | filenames.PARTITION_DIR_FILES


def _both_paths(monkeypatch, path, base, reader):
    """One whole read through numpy (_read_all) and one through the small-file loop (_read_all_small),
    each proven taken."""
    from auditor.formats import _fixed_index as fi

    taken = []
    for small, name in ((-1, "_read_all"), (1 << 30, "_read_all_small")):
        real = getattr(fi, name)
        monkeypatch.setattr(fi, "SMALL_ENTRIES", small)
        monkeypatch.setattr(fi, name, lambda *a, _real=real, _name=name: (taken.append(_name), _real(*a))[1])
        taken.append(reader(path, base))
        monkeypatch.setattr(fi, name, real)
    numpy_path, numpy_read, small_path, small_read = taken
    assert (numpy_path, small_path) == ("_read_all", "_read_all_small")
    return numpy_read, small_read


def test_small_index_files_read_without_numpy_equal_the_numpy_path(tmp_path, monkeypatch):
    """Whole reads of small files skip numpy (its per-call cost, its import); entries, counts, zero
    tails and problems must be exactly numpy's: every real index file, then damaged ones (entries out
    of order, negative relative offsets, zero entries inside, trailing bytes, over MAX_PROBLEMS)."""
    import random

    real = [p for p in REAL_FILES if p.suffix in (".index", ".timeindex")]
    assert real
    for path in real:
        reader = read_time_index if path.suffix == ".timeindex" else read_offset_index
        numpy_read, small_read = _both_paths(monkeypatch, path, int(path.name.split(".")[0]), reader)
        assert small_read == numpy_read, path
    rnd = random.Random(12)
    with_problems = with_tail = 0
    for case in range(400):
        time_index = rnd.random() < 0.5
        slots = rnd.randint(0, 40)
        parts = []
        for i in range(slots):
            rel = rnd.choice([i * 3 + 1, i * 3 + 1, rnd.randint(-5, 200), 0])
            if time_index:
                parts.append(struct.pack(">qi", rnd.choice([1000 + i * 10, rnd.randint(-5, 5000), 0]), rel))
            else:
                parts.append(struct.pack(">ii", rel, rnd.choice([i * 100 + 50, rnd.randint(-5, 5000), 0])))
        data = b"".join(parts) + bytes(rnd.choice([0, 0, 0, 3])) + bytes((12 if time_index else 8) * rnd.randint(0, 3))
        path = _write(tmp_path, f"{case}.{'timeindex' if time_index else 'index'}", data)
        base = rnd.choice([0, 100, 1 << 40])
        numpy_read, small_read = _both_paths(monkeypatch, path, base, read_time_index if time_index else read_offset_index)
        assert small_read == numpy_read, (case, data)
        with_problems += bool(numpy_read.problems)
        with_tail += bool(numpy_read.zero_tail_bytes)
    assert with_problems > 100 and with_tail > 100  # the damaged cases did reach the rules


@pytest.mark.parametrize("data,encoding", [
    (b"0\n2\nt\xc3\xa9st 0 5\r\nbad line\r\n", "utf-8"),   # multi-byte UTF-8: byte positions past it differ
    (b"0\r\n1\rorders 3 7\n", "utf-8"),                  # ASCII, every line break kind
    (b"a=\xe9\nb=1\n\nc\\\n  d", "latin-1"),              # meta.properties' ISO-8859-1
])
def test_text_lines_carry_byte_positions(tmp_path, data, encoding):
    """_lines gives each line's byte position (errors name it): the character position when every
    character is one byte, else the encoded length of what precedes it."""
    path = _write(tmp_path, "f", data)
    lines = checkpoints._lines(path, encoding)
    for number, pos, line in lines:
        assert data[pos:pos + len(line.encode(encoding))] == line.encode(encoding), (number, pos, line)
    assert [n for n, _, _ in lines] == list(range(1, len(lines) + 1)) and len(lines) >= 3
    with pytest.raises(FormatError) as err:  # a bad entry after a multi-byte character: its byte position
        checkpoints.read_offset_checkpoint(_write(tmp_path, "cp", "0\n2\nté 0 5\nx 1\n".encode()))
    assert err.value.position == len("0\n2\nté 0 5\n".encode())
