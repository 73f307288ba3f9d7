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
from auditor.cluster.consumer_groups import OFFSETS_TOPIC, fold_partition_dir, offsets_partition_dirs, read_groups
from auditor.formats import offsets_records as orec
from realdata import LOG_DIRS
from harness.encoding import zigzag_varint as _varint
from test_consumer_groups_real import _commit_key, _commit_value

# 2.3 s at load 2 (tests/conftest.py: long files first)
pytestmark = pytest.mark.schedule_first(cpu_s=2)

TS = 1_700_000_000_000
REAL_2018 = next(d for d in LOG_DIRS if (d / f"{OFFSETS_TOPIC}-28").is_dir()) / f"{OFFSETS_TOPIC}-28" / f"{0:020d}.log"


def test_extension_is_built():
    # CI builds it with the machine's gcc (setup.py); a silent fallback would hide a 5-10x slowdown.
    assert orec.HAVE_C_FOLD, "auditor/formats/_coffsets.c was not built: `pip install -e .` with gcc"


# --------------------------------------------------------------------------------- the comparison


def _replay(log_dirs, monkeypatch, use_c: bool) -> tuple:
    """Per replica dir: (store, pending, notes, records); then the groups and notes of read_groups."""
    monkeypatch.setattr(offsets_segments, "USE_C_FOLD", use_c)
    folds = {}
    for part, dirs in sorted(offsets_partition_dirs(log_dirs).items()):
        for d in dirs:
            f = fold_partition_dir(d, part)
            folds[str(d)] = (f.store, f.pending, f.notes, f.records)
    result = read_groups(log_dirs)
    return folds, {g: grp.to_dict() for g, grp in result.groups.items()}, result.notes, result.records


def assert_same_both_ways(log_dirs, monkeypatch) -> tuple[tuple, int]:
    """Both replays equal; returns the result and how many records the C calls folded."""
    folded = []
    real = orec.fold_plain_batches

    def counting(*args):
        out = real(*args)
        folded.append(out[1])
        return out

    monkeypatch.setattr(orec, "fold_plain_batches", counting)
    with_c = _replay(log_dirs, monkeypatch, True)
    calls = len(folded)
    pure = _replay(log_dirs, monkeypatch, False)
    assert len(folded) == calls     # the pure-Python run made no C call
    assert with_c[0] == pure[0]
    assert with_c[1:] == pure[1:]
    return with_c, sum(folded)


def test_real_fixture_partitions(monkeypatch):
    (folds, groups, notes, records), c_records = assert_same_both_ways(LOG_DIRS, monkeypatch)
    assert len(folds) >= 2 and records >= 8202 and notes == []
    assert c_records == 2 * records     # every real record is in a plain batch: all folded in C (twice: _replay)
    assert "console-consumer-65070" in groups and groups["console-consumer-65070"]["deleted"]


def test_c_call_stores_a_batch_whole_or_not_at_all(tmp_path):
    good = _batch(0, [(_commit_key(b"g", b"t", 0), _commit_value(1))])
    bad = _batch(1, [(_commit_key(b"g", b"t", 1), _commit_value(2)), (b"\x00", b"x")])   # a short key: a note
    log = tmp_path / "x.log"
    log.write_bytes(good + bad + good)
    store: dict = {}
    with open(log, "rb") as f:
        stop, n = orec.fold_plain_batches(f.fileno(), 0, len(good + bad + good), store, str(log))
    assert (stop, n) == (len(good), 1)
    assert list(store) == [_commit_key(b"g", b"t", 0)]
    assert store[_commit_key(b"g", b"t", 0)] == (0, TS, _commit_value(1), False, (str(log), 0))


# ------------------------------------------------------------------------------- damaged copies


def _record(offset_delta: int, key: bytes | None, value: bytes | None, headers=()) -> bytes:
    body = b"\x00" + _varint(offset_delta * 10) + _varint(offset_delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(-1) if value is None else _varint(len(value)) + value
    body += _varint(len(headers)) + b"".join(_varint(len(k)) + k + _varint(len(v)) + v for k, v in headers)
    return _varint(len(body)) + body


def _batch(base: int, records: list[tuple], *, attrs: int = 0, pid: int = -1, count: int | None = None,
           tail: bytes = b"", base_ts: int = TS) -> bytes:
    recs = b"".join(_record(i, *r) for i, r in enumerate(records)) + tail
    if attrs & 0x07 == 1:
        recs = bytes(cramjam.gzip.compress(recs))
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
    ck, cv = _commit_key, _commit_value
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
