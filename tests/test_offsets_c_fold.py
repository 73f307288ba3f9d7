"""The C replay of plain ``__consumer_offsets`` batches (auditor/formats/_coffsets.c) gives exactly
what the pure-Python replay gives: the same store (key -> offset, timestamp, value, transactional,
file and byte), the same open transactions, the same notes, the same record count and the same
groups, on every real ``__consumer_offsets`` partition of ../shared/fixtures/real and on damaged
copies of the real 2018 partition (a batch cut short, an unknown key version, a value cut short, a
group name that is not UTF-8, transactional batches committed, aborted and left open, headers,
LogAppendTime, a gzip batch, null and short keys, a legacy message, a corrupt size, a zero tail,
random byte flips). The C path hands every batch it does not fold exactly back to the Python
path; these tests prove the hand-over loses nothing and that it really folds the plain runs.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import cramjam
import crc32c
import pytest

from auditor.cluster import offsets_segments
from auditor.cluster.consumer_groups import OFFSETS_TOPIC, fold_partition_dir, read_groups
from auditor.formats import offsets_records as orec
from harness.realdata import LOG_DIRS
from harness.offsets_commits import commit_key, commit_value
from harness.offsets_replay import assert_same_both_ways
from harness.records import lz4_frame, numbered_record

# 5.9 CPU s with the compressed-batch cases, DumpLogSegments and the bomb at the cap (tests/conftest.py:
# long files first)
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=6)]

TS = 1_700_000_000_000
REAL_2018 = next(d for d in LOG_DIRS if (d / f"{OFFSETS_TOPIC}-28").is_dir()) / f"{OFFSETS_TOPIC}-28" / f"{0:020d}.log"


def test_extension_is_built():
    # CI builds it with the machine's gcc (setup.py); a silent fallback would hide a 5-10x slowdown.
    assert orec.HAVE_C_FOLD, "auditor/formats/_coffsets.c was not built: `pip install -e .` with gcc"


# --------------------------------------------------------------------------------- the comparison


def test_real_fixture_partitions(monkeypatch):
    (folds, groups, notes, records), c_records = assert_same_both_ways(LOG_DIRS, monkeypatch)
    assert len(folds) >= 2 and records >= 8202 and notes == []
    assert c_records == 2 * records     # every real record is in a plain batch: all folded in C (twice: _replay)
    assert "console-consumer-65070" in groups and groups["console-consumer-65070"]["deleted"]


def test_c_call_stores_a_batch_whole_or_not_at_all(tmp_path):
    good = _batch(0, [(commit_key(b"g", b"t", 0), commit_value(1))])
    bad = _batch(1, [(commit_key(b"g", b"t", 1), commit_value(2)), (b"\x00", b"x")])   # a short key: a note
    log = tmp_path / "x.log"
    log.write_bytes(good + bad + good)
    store: dict = {}
    with open(log, "rb") as f:
        stop, n = orec.fold_plain_batches(f.fileno(), 0, len(good + bad + good), store, str(log))
    assert (stop, n) == (len(good), 1)
    assert list(store) == [commit_key(b"g", b"t", 0)]
    assert store[commit_key(b"g", b"t", 0)] == (0, TS, commit_value(1), False, (str(log), 0))


# ------------------------------------------------------------------------------- damaged copies


COMPRESS = {1: lambda d: bytes(cramjam.gzip.compress(d)), 2: lambda d: bytes(cramjam.snappy.compress_raw(d)),
            4: lambda d: bytes(cramjam.zstd.compress(d))}


def _batch(base: int, records: list[tuple], *, attrs: int = 0, pid: int = -1, count: int | None = None,
           tail: bytes = b"", base_ts: int = TS, raw: bytes | None = None) -> bytes:
    """One v2 batch (``raw``: these record bytes instead of ``records``', with ``count``)."""
    recs = b"".join(numbered_record(i, *r) for i, r in enumerate(records)) + tail if raw is None else raw
    if attrs & 0x07:
        recs = COMPRESS[attrs & 0x07](recs) if attrs & 0x07 != 3 else lz4_frame(recs)
    n = len(records)
    max_ts = min(base_ts + 10 * n, 2**63 - 1)
    after_crc = struct.pack(">hiqqqhii", attrs, max(n - 1, 0), base_ts, max_ts, pid, 0 if pid >= 0 else -1, -1,
                            n if count is None else count) + recs
    return struct.pack(">qiibI", base, 4 + 1 + 4 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def _control(base: int, pid: int, commit: bool) -> bytes:
    return _batch(base, [(struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 3))], attrs=0x30, pid=pid)


def _legacy_v1(offset: int, key: bytes, value: bytes) -> bytes:
    body = struct.pack(">bbq", 1, 0, TS) + struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, 4 + len(body), 0) + body


def _real_batches(limit: int = 400) -> list[bytes]:
    data = REAL_2018.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data) and len(out) < limit:
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos:pos + 12 + length])
        pos += 12 + length
    return out


def _renumber(entries: list[bytes]) -> bytes:
    """Consecutive base offsets for the v2 batches (the CRC does not cover them)."""
    out, offset = [], 0
    for e in entries:
        if len(e) > 61 and e[16] == 2:
            (lod,) = struct.unpack_from(">i", e, 23)
            e = struct.pack(">q", offset) + e[8:]
            offset += lod + 1
        else:
            offset += 1
        out.append(e)
    return b"".join(out)


def _with_key_version(batch: bytes, version: int) -> bytes:
    """A real one-commit batch whose key's record type is replaced (CRC left stale: the fold does not check it)."""
    at = 61
    for skip in (True, False, True, True, True):   # length, attributes, timestampDelta, offsetDelta, keyLength
        if not skip:
            at += 1
            continue
        while batch[at] & 0x80:
            at += 1
        at += 1
    return batch[:at] + struct.pack(">h", version) + batch[at + 2:]


def _damaged(name: str) -> list[bytes]:
    real = _real_batches()
    k = len(real) // 2
    ck, cv = commit_key, commit_value
    mid = {
        "cut-batch": lambda: [real[k][: len(real[k]) // 2]],
        "unknown-key-version": lambda: [_with_key_version(real[k], 999)],
        "truncated-value": lambda: [_batch(0, [(ck(b"cut", b"t", 0), cv(7)[:-3]), (ck(b"ok", b"t", 0), cv(8))])],
        "non-utf8-group": lambda: [_batch(0, [(ck(b"caf\xe9-\xff", b"t", 1), cv(9)), (ck(b"good", b"t", 1), cv(42))])],
        "transactional": lambda: [
            _batch(0, [(ck(b"txn", b"t", 0), cv(100)), (ck(b"txn", b"t", 1), cv(101))], attrs=0x10, pid=7),
            _batch(0, [(ck(b"txn", b"t", 1), None), (ck(b"plain", b"t", 0), cv(5))]),   # a tombstone while pending
            real[k], _control(0, 7, True),
            _batch(0, [(ck(b"txn", b"t", 2), cv(200))], attrs=0x10, pid=8), real[k + 1], _control(0, 8, False),
            real[k + 2], _batch(0, [(ck(b"open", b"t", 0), cv(300))], attrs=0x10, pid=9)],
        "headers": lambda: [_batch(0, [(ck(b"h", b"t", 0), cv(1), [(b"hk", b"hv")])])],
        "log-append-time": lambda: [_batch(0, [(ck(b"lat", b"t", 0), cv(1))], attrs=0x08)],
        "gzip": lambda: [_batch(0, [(ck(b"gz", b"t", 0), cv(1)), (ck(b"gz", b"t", 1), cv(2))], attrs=0x01)],
        "null-and-short-keys": lambda: [_batch(0, [(None, cv(1)), (b"\x00", cv(2)), (ck(b"after", b"t", 0), cv(3))])],
        "v0-key": lambda: [_batch(0, [(ck(b"old", b"t", 0, version=0), cv(5)), (ck(b"old", b"t", 0), cv(6))])],
        "delete-horizon": lambda: [_batch(0, [(ck(b"dh", b"t", 0), None)], attrs=0x40)],
        "bytes-after-last-record": lambda: [_batch(0, [(ck(b"x", b"t", 0), cv(1))], tail=b"\x00\x00")],
        "count-too-high": lambda: [_batch(0, [(ck(b"x", b"t", 0), cv(1))], count=2)],
        "count-too-low": lambda: [_batch(0, [(ck(b"x", b"t", 0), cv(1)), (ck(b"y", b"t", 0), cv(1))], count=1)],
        "empty-batch": lambda: [_batch(0, [], count=0)],
        "legacy-magic-1": lambda: [_legacy_v1(0, ck(b"leg", b"t", 0), cv(4))],
        "timestamp-overflow": lambda: [_batch(0, [(ck(b"ts", b"t", 0), cv(1)), (ck(b"ts", b"t", 1), cv(2))],
                                              base_ts=2**63 - 5)],
        "corrupt-size": lambda: [real[k][:8] + struct.pack(">i", 3) + real[k][12:]],
    }
    if name == "zero-tail":
        return real + [bytes(4096)]
    if name == "offset-overflow":
        return real[:3] + [b"\x7f" + b"\xff" * 7 + _batch(0, [(ck(b"o", b"t", 0), cv(1))] * 3)[8:]]
    return real[:k] + mid[name]() + real[k:]


DAMAGES = ["cut-batch", "unknown-key-version", "truncated-value", "non-utf8-group", "transactional", "headers",
           "log-append-time", "gzip", "null-and-short-keys", "v0-key", "delete-horizon", "bytes-after-last-record",
           "count-too-high", "count-too-low", "empty-batch", "legacy-magic-1", "timestamp-overflow", "corrupt-size",
           "zero-tail", "offset-overflow"]


def _write(tmp_path: Path, data: bytes) -> Path:
    pdir = tmp_path / "logs" / f"{OFFSETS_TOPIC}-28"
    pdir.mkdir(parents=True)
    (pdir / f"{0:020d}.log").write_bytes(data)
    return tmp_path / "logs"


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_copies(damage, tmp_path, monkeypatch):
    entries = _damaged(damage)
    data = _renumber(entries) if damage != "offset-overflow" else b"".join(entries)
    (folds, groups, notes, records), c_records = assert_same_both_ways([_write(tmp_path, data)], monkeypatch)
    assert c_records > 0      # the plain runs around the damage were folded in C
    expect_notes = damage not in ("headers", "log-append-time", "gzip", "v0-key", "delete-horizon",
                                  "empty-batch", "legacy-magic-1", "zero-tail", "timestamp-overflow", "offset-overflow")
    assert bool(notes) == expect_notes, notes
    if damage == "transactional":
        assert {k: v["committed_offset"] for k, v in groups["txn"]["topics"]["t"].items()} == {"0": 100}
        assert "txn" in groups and groups["plain"]["topics"]["t"]["0"]["committed_offset"] == 5
        assert "open" not in groups and list(folds.values())[0][1]      # the open transaction stays pending
        assert notes == [f"{OFFSETS_TOPIC}-28: producer 9 has 1 transactional offset commit(s) with no COMMIT/ABORT "
                         f"marker yet (an open transaction): not counted as committed"]
    if damage == "non-utf8-group":
        assert "caf\ufffd-\ufffd" in groups
    if damage == "v0-key":
        assert groups["old"]["topics"]["t"]["0"]["committed_offset"] == 6


def test_random_byte_flips(tmp_path, monkeypatch):
    """200 copies of the real partition's first 400 batches, 1..4 random bytes changed in each."""
    base = bytearray(_renumber(_real_batches()))
    rng = random.Random(12)
    noted = 0
    for i in range(200):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        root = _write(tmp_path / str(i), bytes(data))
        (_, _, notes, _), _ = assert_same_both_ways([root], monkeypatch)
        noted += bool(notes)
    assert noted > 20      # the flips really hit what the fold checks


# ------------------------------------------------------------------------- --max-read-rate pacing


def test_paced_replay_is_the_same_replay(monkeypatch):
    """With a pace callback the replay stops every PACE_BYTES (C: at a batch boundary past the
    budget, told apart from a hand-over) and per segment; the groups, notes and records are unchanged."""
    monkeypatch.setattr(offsets_segments, "PACE_BYTES", 64 * 1024)
    size = REAL_2018.stat().st_size
    plain = read_groups(LOG_DIRS)
    for use_c in (True, False):
        monkeypatch.setattr(offsets_segments, "USE_C_FOLD", use_c)
        calls = []
        paced = read_groups(LOG_DIRS, pace=lambda: calls.append(1))
        assert ({g: v.to_dict() for g, v in paced.groups.items()}, paced.notes, paced.records) == \
               ({g: v.to_dict() for g, v in plain.groups.items()}, plain.notes, plain.records)
        assert len(calls) >= size // (64 * 1024), (use_c, len(calls))


def test_collect_paces_the_consumer_offsets_read(tmp_path):
    """collect's --max-read-rate covers the __consumer_offsets read of the cluster parts: 1 MiB of the
    real partition at 1 MiB/s takes at least about a second, however loaded the machine (a lower
    bound the pacing guarantees; the unpaced time, and so the comparison, is in
    benchmarks/pacing_and_walk.py)."""
    from auditor.manifest import CONSUMER_GROUPS_FILE, collect_cluster_parts
    import time
    log_dir = tmp_path / "logs"
    (log_dir / REAL_2018.parent.name).mkdir(parents=True)
    (log_dir / REAL_2018.parent.name / REAL_2018.name).write_bytes(REAL_2018.read_bytes())
    took = {}
    for rate in (None, 1.0):
        out = tmp_path / f"out-{rate}"
        out.mkdir()
        t = time.monotonic()
        said = collect_cluster_parts([log_dir], out, max_read_rate_mib_s=rate)
        took[rate] = time.monotonic() - t
        assert (out / CONSUMER_GROUPS_FILE).is_file() and any("1 live groups" in s for s in said), said
    assert took[1.0] >= 0.8, took


# --------------------------------------------- compressed batches folded in C (_coffsets.StreamFold)

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
#: length 6: attributes, timestampDelta 0, offsetDelta 0, null key, null value, no headers
TINY_RECORD = bytes([0x0C, 0, 0, 0, 1, 1, 0])


def _mixed(n: int, seed: int, bad_every: int = 3) -> list[tuple]:
    """n records: commits of a few keys (v0 and v1), tombstones, and every bad_every-th a null or
    1-byte key."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        if i % bad_every == 1:
            out.append((rnd.choice((None, b"", b"\x00")), commit_value(i)))
        else:
            out.append((commit_key(b"g%d" % rnd.randrange(4), b"t", rnd.randrange(5), version=rnd.choice((0, 1))),
                        None if rnd.random() < 0.1 else commit_value(i)))
    return out


def _compressed(name: str) -> list[bytes]:
    ck, cv = commit_key, commit_value
    real = _real_batches(60)
    nulls = [(None, cv(i)) for i in range(1000)]
    shapes = {
        "gzip, 3 null keys": lambda: [_batch(0, [(None, cv(1))] * 3 + [(ck(b"a", b"t", 0), cv(2))], attrs=GZIP)],
        "gzip, 4 short keys": lambda: [_batch(0, [(b"\x00", cv(1))] * 4 + [(ck(b"a", b"t", 0), cv(2))], attrs=GZIP)],
        "gzip, 1000 null keys": lambda: [_batch(0, nulls, attrs=GZIP)],
        "plain, 1000 null keys": lambda: [_batch(0, nulls)],
        "gzip, mixed keys": lambda: [_batch(0, _mixed(500, 1), attrs=GZIP)],
        "lz4, mixed keys": lambda: [_batch(0, _mixed(3000, 2), attrs=LZ4)],
        "zstd, mixed keys": lambda: [_batch(0, _mixed(500, 3), attrs=ZSTD)],
        "snappy, mixed keys": lambda: [_batch(0, _mixed(500, 4), attrs=SNAPPY)],
        "gzip, LogAppendTime": lambda: [_batch(0, _mixed(50, 5), attrs=GZIP | 0x08)],
        "gzip, headers": lambda: [_batch(0, [(ck(b"h", b"t", 0), cv(1), [(b"hk", b"hv")] * 2)] * 3, attrs=GZIP)],
        "gzip, offset overflow": lambda: [b"\x7f" + b"\xff" * 7 + _batch(0, _mixed(9, 6), attrs=GZIP)[8:]],
        "gzip, timestamp overflow": lambda: [_batch(0, _mixed(9, 7), attrs=GZIP, base_ts=2**63 - 5)],
        "gzip, record cut short": lambda: [_batch(0, _mixed(30, 8), attrs=GZIP, count=31,
                                                  tail=numbered_record(30, ck(b"c", b"t", 0), cv(1))[:-3])],
        "gzip, bytes after the last record": lambda: [_batch(0, _mixed(30, 9), attrs=GZIP, tail=b"\x00\x00")],
        "gzip, count too high": lambda: [_batch(0, _mixed(30, 10), attrs=GZIP, count=31)],
        "gzip, count too low": lambda: [_batch(0, _mixed(30, 11), attrs=GZIP, count=29)],
        "gzip, negative headers count": lambda: [_batch(0, [], attrs=GZIP, count=2,
                                                        raw=numbered_record(0, ck(b"n", b"t", 0), cv(1))
                                                        + bytes([0x0C, 0, 0, 2, 1, 1, 1]))],
        "gzip, corrupt stream": lambda: [_batch(0, [], attrs=GZIP, count=3, raw=b"\x1f\x8b\x08\x00" + bytes(20))],
        "gzip, transactional, committed": lambda: [_batch(0, _mixed(40, 12), attrs=GZIP | 0x10, pid=7),
                                                   _control(0, 7, True)],
        "gzip while a transaction is open": lambda: [
            _batch(0, [(ck(b"txn", b"t", 1), cv(1))], attrs=0x10, pid=7),
            _batch(0, [(ck(b"txn", b"t", 1), None)] + _mixed(40, 13), attrs=GZIP), _control(0, 7, True)],
    }
    return real[:30] + shapes[name]() + real[30:]


@pytest.mark.parametrize("shape", ["gzip, 3 null keys", "gzip, 4 short keys", "gzip, 1000 null keys",
                                   "plain, 1000 null keys", "gzip, mixed keys", "lz4, mixed keys", "zstd, mixed keys",
                                   "snappy, mixed keys", "gzip, LogAppendTime", "gzip, headers",
                                   "gzip, offset overflow", "gzip, timestamp overflow", "gzip, record cut short",
                                   "gzip, bytes after the last record", "gzip, count too high",
                                   "gzip, count too low", "gzip, negative headers count", "gzip, corrupt stream",
                                   "gzip, transactional, committed", "gzip while a transaction is open"])
def test_compressed_batches_folded_in_c(shape, tmp_path, monkeypatch):
    """A compressed batch among real ones, folded by _coffsets.StreamFold (pieces of 4 KiB: records
    carried across them): the store, pending transactions, notes, records and groups of the pure-
    Python fold; the Python loop reads records only from one StreamFold does not take."""
    monkeypatch.setattr(orec.compression, "CHUNK_BYTES", 4096)
    entries = _compressed(shape)
    data = _renumber(entries) if shape != "gzip, offset overflow" else b"".join(entries)
    root = _write(tmp_path, data)
    read = []
    original = orec.iter_key_values

    def counted(header, *args, **kwargs):
        if header.codec != "none":   # (a control batch's marker is read here, plain or not)
            read.append(kwargs.get("resume"))
        return original(header, *args, **kwargs)
    monkeypatch.setattr(orec, "iter_key_values", counted)
    (folds, groups, notes, records), _ = assert_same_both_ways([root], monkeypatch)
    bad = [n for n in notes if "expected a coordinator key" in n]
    if shape in ("gzip, 3 null keys", "gzip, 4 short keys", "gzip, 1000 null keys", "plain, 1000 null keys"):
        many = {"gzip, 3 null keys": 3, "gzip, 4 short keys": 4}.get(shape, 1000)
        assert len(bad) == min(many, 4), notes    # the first 3 one by one, then one for the rest of the batch
        if many > 3:
            assert f": {many - 3} more record(s) of this batch, offsets " in bad[3], bad
    monkeypatch.setattr(orec, "USE_C_STREAM", True)
    monkeypatch.setattr(offsets_segments, "USE_C_FOLD", True)
    read.clear()
    fold_partition_dir(root / f"{OFFSETS_TOPIC}-28", 28)
    assert [r for r in read if r is None] == [], read
    resumed = [r for r in read if r is not None]
    takes_all = not any(w in shape for w in ("overflow", "cut short", "after the last", "count too", "negative",
                                             "corrupt"))
    assert (resumed == []) == takes_all, (shape, [r[1:] for r in resumed])


def test_offsets_c_stream_summary_note_names_the_rest(tmp_path, monkeypatch):
    """The summary note of a batch's many bad keys: its file and byte, how many, the first and last offset."""
    nulls = [(None, commit_value(i)) for i in range(10)]
    data = _batch(100, nulls, attrs=GZIP)
    root = _write(tmp_path, data)
    fold = fold_partition_dir(root / f"{OFFSETS_TOPIC}-28", 28)
    log = root / f"{OFFSETS_TOPIC}-28" / f"{0:020d}.log"
    assert fold.notes == [f"{log}: byte 0: record {100 + i}: key = None, expected a coordinator key (int16 version "
                          f"+ fields); record ignored" for i in range(3)] + [
        f"{log}: byte 0: 7 more record(s) of this batch, offsets 103 (first) to 109 (last): key null or shorter "
        f"than 2 bytes, expected a coordinator key (int16 version + fields); records ignored"]
    assert fold.records == 10 and fold.store == {}


@pytest.mark.parametrize("damage", ["gzip damaged mid-stream", "lz4 block size past the maximum"])
def test_a_compressed_stream_failing_after_records_were_stored_stores_none(damage, tmp_path, monkeypatch):
    """Past KEEP_DECOMPRESSED_BYTES (8 KiB here) the pieces are folded as they come, after a copy of
    the store: a stream that then fails (a damaged deflate block, an lz4 block size past the
    maximum) puts the store back, so none of its records count, as with the Python loop (which
    decompresses before reading any record)."""
    monkeypatch.setattr(orec.compression, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(orec, "KEEP_DECOMPRESSED_BYTES", 8192)
    records = b"".join(numbered_record(i, *r) for i, r in enumerate(_mixed(3000, 14)))
    if damage.startswith("gzip"):
        stream = bytearray(cramjam.gzip.compress(records))
        for i in range(len(stream) * 2 // 3, len(stream) * 2 // 3 + 64):
            stream[i] ^= 0x55
        batch = _batch(0, [], attrs=0, count=3000, raw=bytes(stream))
        batch = batch[:21] + struct.pack(">h", GZIP) + batch[23:]
    else:
        frame = lz4_frame(records)
        pos = 7   # after the frame's first 64 KiB block (records ~120 KB: two blocks)
        pos += 4 + (int.from_bytes(frame[pos:pos + 4], "little") & 0x7FFFFFFF)
        frame = frame[:pos] + (0x7FFF0000).to_bytes(4, "little") + frame[pos + 4:]
        batch = _batch(0, [], attrs=0, count=3000, raw=frame)
        batch = batch[:21] + struct.pack(">h", LZ4) + batch[23:]
    real = _real_batches(40)
    root = _write(tmp_path, _renumber(real[:20] + [batch] + real[20:]))
    (folds, groups, notes, records), _ = assert_same_both_ways([root], monkeypatch)
    assert any("not folded" in n for n in notes), notes
    assert not any(k.startswith(b"\x00\x01\x00\x02g") for f in folds.values() for k in f[0])   # none of _mixed's keys


def _tiny_gzip(records: int) -> bytes:
    import zlib
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    unit = TINY_RECORD * (1 << 17)
    full, rest = divmod(records, 1 << 17)
    return b"".join([c.compress(unit) for _ in range(full)] + [c.compress(TINY_RECORD * rest), c.flush()])


def test_a_bomb_of_null_keys_at_the_cap_is_four_notes(tmp_path, monkeypatch):
    """The hang of issue 24: one gzip batch of 38,347,922 null-key records (268,435,454 bytes from
    ~390 KB) in a __consumer_offsets segment. Before: one Python tuple and one note per record
    (~38 CPU s, ~38 million notes). Now: folded in C from 1 MiB pieces, no Python loop, 4 notes."""
    count = orec.compression.DEFAULT_MAX_DECOMPRESSED_BYTES // len(TINY_RECORD)
    root = _write(tmp_path, _bomb_batch(count))
    loops, pieces = [], []
    monkeypatch.setattr(orec, "iter_key_values", lambda *a, **k: loops.append(1) or iter(()))
    chunks = orec.compression.decompress_chunks

    def counted(*args, **kwargs):
        for piece in chunks(*args, **kwargs):
            pieces.append(len(piece))
            yield piece
    monkeypatch.setattr(orec.compression, "decompress_chunks", counted)
    fold = fold_partition_dir(root / f"{OFFSETS_TOPIC}-28", 28)
    assert fold.records == count and fold.store == {} and loops == []
    assert len(fold.notes) == 4 and f"{count - 3} more record(s)" in fold.notes[3], fold.notes
    assert sum(pieces) == count * len(TINY_RECORD) and max(pieces) <= orec.compression.CHUNK_BYTES


def _bomb_batch(count: int) -> bytes:
    after_crc = struct.pack(">hiqqqhii", GZIP, count - 1, TS, TS, -1, -1, -1, count) + _tiny_gzip(count)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def test_compressed_batches_equal_dumplogsegments(dump_log_segments, tmp_path, monkeypatch):
    """Kafka's own decoder is the oracle: a __consumer_offsets segment of gzip, lz4, zstd and snappy
    batches (commits, tombstones, a LogAppendTime batch, a transaction committed)
    folded by _coffsets.StreamFold (pieces of 4 KiB) gives the committed offsets, metadata and
    commit times of ``DumpLogSegments --offsets-decoder`` folded as the coordinator replays."""
    from harness.offsets_dump import dump_offsets, latest_offsets
    monkeypatch.setattr(orec.compression, "CHUNK_BYTES", 4096)
    rnd = random.Random(15)

    def commits(n: int) -> list[tuple]:
        # (version 1 keys: Kafka's decoder refuses a version 0 key with a version 3 value)
        return [(commit_key(b"grp-%d" % rnd.randrange(3), b"topic", rnd.randrange(6)),
                 None if rnd.random() < 0.1 else commit_value(rnd.randrange(10**6), TS + i)) for i in range(n)]
    entries = [_batch(0, commits(400), attrs=GZIP), _batch(0, commits(3000), attrs=LZ4),
               _batch(0, commits(300), attrs=ZSTD), _batch(0, commits(300), attrs=SNAPPY),
               _batch(0, commits(50), attrs=GZIP | 0x08),
               _batch(0, commits(20), attrs=GZIP | 0x10, pid=5), _control(0, 5, True), _batch(0, commits(30))]
    root = _write(tmp_path, _renumber(entries))
    pdir = root / f"{OFFSETS_TOPIC}-28"
    theirs = latest_offsets(dump_offsets(dump_log_segments, pdir))
    result = read_groups([root])
    assert result.notes == []
    mine = {g: {k: (c.offset, c.metadata, c.commit_timestamp_ms) for k, c in grp.offsets.items()}
            for g, grp in result.groups.items() if grp.offsets}
    assert mine == {g: {k: (v["offset"], v["metadata"], v["commitTimestamp"]) for k, v in offs.items()}
                    for g, offs in theirs.items()}
    assert sum(len(v) for v in mine.values()) >= 15


def test_stream_fold_equals_the_python_fold_in_any_pieces(monkeypatch):
    """200 gzip batches of random records (commits, tombstones, null / short keys, headers, v0 keys)
    ending in a broken record of random shape, or intact, decompressed in pieces of 1..4096 bytes:
    fold_records_into through StreamFold stores, counts and raises (the FormatError's text) exactly
    what the Python loop does; a refused record cut across pieces is read from the bytes the fold
    kept of it alone."""
    from auditor.formats import record_batch as v2
    rnd = random.Random(16)
    tails = [b"", numbered_record(0, commit_key(b"z", b"t", 0), commit_value(1))[:-2], b"\x80\x80\x80\x80\x80\x00", b"\x01",
             bytes([0x0C, 0, 0, 0, 40, 1, 0]), bytes([0x0C, 0, 0, 0, 1, 1, 1]), bytes([0x10, 0, 0, 0, 4, 0, 1, 1, 2])]
    for case in range(200):
        records = _mixed(rnd.randint(0, 40), case, bad_every=rnd.choice((2, 3, 7)))
        if rnd.random() < 0.3:
            records.append((commit_key(b"h", b"t", 0), commit_value(2), [(b"k", b"v" * rnd.randint(0, 300))]))
        tail = rnd.choice(tails)
        count = len(records) + (tail != b"") + rnd.choice((0, 0, 0, 1, -1))
        raw = b"".join(numbered_record(i, *r) for i, r in enumerate(records)) + tail
        batch = _batch(rnd.randrange(1000), [], attrs=GZIP | rnd.choice((0, 0x08)), count=max(count, 0), raw=raw)
        header = v2.parse_v2_header(batch, 0, 0)
        monkeypatch.setattr(orec.compression, "CHUNK_BYTES", rnd.choice((1, 2, 7, 64, 4096)))
        got = []
        for use_c in (True, False):
            monkeypatch.setattr(orec, "USE_C_STREAM", use_c)
            store, bad = {}, orec.BadKeys()
            try:
                out = orec.fold_records_into(store, header, batch, False, ("x", 0), bad, label="x")
            except orec.FormatError as exc:
                out = str(exc)
            got.append((store, bad.first, bad.more, bad.more_first, bad.more_last, out))
        assert got[0] == got[1], (case, got[0][1:], got[1][1:])
