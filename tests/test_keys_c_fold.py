"""The C fold of the key statistics (auditor/keys/_ckeys.c) against the Python path (KeyStats.add).

Both paths must give byte-identical sketches (``KeyStats.to_bytes``) and the same partition result
(offsets, bytes read, notes): on every real record set of fixtures/real (broker partition dirs and
the captured record sets, each laid out as a segment), all records and sampled; on synthetic keyed
segments (every codec, headers, null/empty/large keys, control batches, many heavy-hitter folds);
on damaged copies (cuts at every kind of place, absurd key lengths, random byte flips); and on
record streams that switch between the two paths mid-way. The sketches include ``first_seen``
(each kept key's first offset and timestamp): CreateTime and LogAppendTime batches, timestamps
that wrap as Java's long arithmetic does.
"""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import pytest

from auditor.keys import sketches
from auditor.keys.partition_keys import scan_partition_keys
from auditor.keys.sketches import KeyStats, key_id
from harness.encoding import zigzag_varint as _varint
from harness.realdata import BROKER_DIRS, RECORD_SETS
from harness.records import CODECS, keyed_batch, keyed_segment, numbered_record

# the key fold cut at every byte, random flips: 8 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=8)]

SEGMENT = "00000000000000000000.log"
TS = 1_700_000_000_000
def test_extension_is_built():
    """CI builds the extension (pip install -e . / setup.py build_ext): without it every other
    test here would compare the Python path with itself."""
    assert sketches._ckeys is not None, "auditor.keys._ckeys is not built: run setup.py build_ext --inplace"


def test_key_id_is_blake2b_of_every_length():
    rnd = random.Random(5)
    for n in list(range(0, 300)) + [1000, 4096, 100_000]:
        key = rnd.randbytes(n)
        assert sketches._ckeys.KeyFold.key_id(key) == key_id(key), n


# ------------------------------------------------------------------------------- record streams
def _stream(seed: int, n: int) -> list[tuple[bytes | None, int]]:
    """Skewed keys (a few hot), a long tail of distinct ones, null and empty keys, odd value sizes."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.05:
            key = None
        elif r < 0.07:
            key = b""
        elif r < 0.6:
            key = b"hot-%d" % int(rnd.paretovariate(1.2))
        else:
            key = rnd.randbytes(rnd.randrange(1, 60))
        out.append((key, rnd.choice((-1, -7, 0, 1, rnd.randrange(2, 5000)))))
    return out


def _where(i: int) -> tuple[int | None, int | None]:
    """Record i's offset and timestamp as a caller may give them: some without a timestamp, some
    with neither (no first_seen then), offsets not in order."""
    if i % 11 == 3:
        return None, None
    return (i * 7919) % 100_003, None if i % 7 == 2 else TS + i


@pytest.mark.parametrize("with_offsets", [False, True])
@pytest.mark.parametrize("capacity,sample_size,prefix", [(1024, 512, 0), (16, 8, 4), (1, 1, 0), (3, 700, 2)])
def test_stream_switching_paths_mid_way(capacity, sample_size, prefix, with_offsets):
    # 30,000 records: the small summaries still evict (asserted below), at half the CPU of 60,000
    records = [(key, value_size, *(_where(i) if with_offsets else ()))
               for i, (key, value_size) in enumerate(_stream(capacity, 30_000))]
    python = KeyStats(capacity=capacity, sample_size=sample_size, prefix_bytes=prefix)
    for record in records:
        python.add(*record)
    mixed = KeyStats(capacity=capacity, sample_size=sample_size, prefix_bytes=prefix)
    for part, chunk in enumerate((records[:3_500], records[3_500:15_500], records[15_500:22_222], records[22_222:])):
        if part % 2:
            for record in chunk:
                mixed.add(*record)
        else:
            fold = mixed.c_fold()
            for record in chunk:
                fold.add(*record)
            mixed.absorb(fold)
            assert mixed._first_pending.keys() <= mixed._buffer.keys()
    assert python.heavy.decrement > 0 or capacity == 1024  # the small summaries really folded
    assert mixed.to_bytes() == python.to_bytes()
    assert mixed.summary(20) == python.summary(20)
    python.seal()
    assert bool(python.first_seen) == with_offsets
    if with_offsets:
        assert None in {ts for _, ts in python.first_seen.values()} or len(python.first_seen) < 10


def test_first_seen_state_round_trips_through_the_fold():
    """c_fold() then absorb() with nothing added in between changes nothing (first_seen and the
    pending first records included), at every point of a stream."""
    stats = KeyStats(capacity=4, sample_size=3)
    for i, (key, value_size) in enumerate(_stream(2, 3_000)):
        stats.add(key, value_size, *_where(i))
        if i % 97 == 0:
            state = lambda: (dict(stats.first_seen), dict(stats._first_pending),  # noqa: E731
                             {k: list(v) for k, v in stats._buffer.items()}, dict(stats._pending), dict(stats.info))
            before = state()
            stats.absorb(stats.c_fold())
            assert state() == before
    assert stats.seal().first_seen


def test_large_keys_fold_on_the_pending_bytes_bound():
    """Keys of 160 KiB: the buffer folds on its 8 MiB of pending key bytes, not on its key count."""
    rnd = random.Random(9)
    keys = [rnd.randbytes(160 * 1024) for _ in range(120)]
    records = [(keys[i % 120] if i % 3 else keys[0], 10) for i in range(300)]
    python, c = KeyStats(capacity=4, sample_size=2), KeyStats(capacity=4, sample_size=2)
    fold = c.c_fold()
    for key, value_size in records:
        python.add(key, value_size)
        fold.add(key, value_size)
    c.absorb(fold)
    assert c._pending_bytes == python._pending_bytes and c._pending_bytes <= sketches.BUFFER_MAX_KEY_BYTES
    assert c.to_bytes() == python.to_bytes()


# ------------------------------------------------------------------------------- segments
def _partition(tmp_path: Path, name: str, data: bytes) -> Path:
    part = tmp_path / name
    part.mkdir()
    (part / SEGMENT).write_bytes(data)
    return part


def _both(part: Path, **kwargs) -> dict:
    """The partition read by both paths; asserts they agree and returns the JSON."""
    kwargs = {"capacity": 64, "sample_size": 32, "prefix_bytes": 2, **kwargs}
    python = scan_partition_keys(part, use_c=False, **kwargs)
    c = scan_partition_keys(part, use_c=True, **kwargs)
    assert c.stats.to_bytes() == python.stats.to_bytes(), part  # first_seen included
    assert c.stats.first_seen == python.stats.first_seen, part
    if python.stats.keyed:  # a keyed record is always first seen for some kept key
        assert python.stats.first_seen, part
    assert c.to_json(50) == python.to_json(50), part
    return python.to_json(50)


def _real_partitions() -> list[Path]:
    parts = sorted(p.parent for p in BROKER_DIRS.glob("*/*/*/*.log"))
    return sorted(set(parts))


def test_every_real_broker_partition_both_paths():
    parts = _real_partitions()
    assert len(parts) >= 6, parts
    records = 0
    for part in parts:
        for sample in (None, 1, 4096, 100_000):
            doc = _both(part, sample_bytes=sample)
            records += doc["records"] if sample is None else 0
    assert records > 8_000


def test_every_real_record_set_both_paths(tmp_path):
    files = sorted(RECORD_SETS.glob("*/*.bin"))
    assert len(files) >= 40, files
    keyed = 0
    for i, path in enumerate(files):
        part = _partition(tmp_path, f"set{i}-0", path.read_bytes())
        doc = _both(part)
        _both(part, sample_bytes=200)
        keyed += doc["records"] - doc["null_key_records"]
    assert keyed > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_synthetic_keyed_segments_of_every_codec(tmp_path, seed):
    data = keyed_segment(seed)
    part = _partition(tmp_path, "keyed-0", data)
    doc = _both(part)
    assert doc["records"] > 1000 and doc["null_key_records"] > 0 and doc["empty_key_records"] > 0
    assert doc["notes"] == [] and doc["scanned_bytes"] == len(data)
    assert doc["heavy_hitters_error_records"] > 0  # capacity 64: the summary folded
    assert doc["notes"] == []
    for sample in (1, 5000, 50_000):
        _both(part, sample_bytes=sample)


def test_first_seen_of_log_append_time_and_wrapping_timestamps(tmp_path):
    """first_seen through both paths: CreateTime batches (baseTimestamp + timestampDelta, wrapping
    past Java's long maximum), LogAppendTime batches (every record at the batch's maxTimestamp),
    every codec; a key first seen in a LogAppendTime batch shows that batch's maxTimestamp."""
    near_max = (1 << 63) - 25  # record i of a CreateTime batch: near_max + 10 i, wrapping from i = 3
    batches, offset = [], 0
    for b in range(20):
        codec = list(CODECS)[b % len(CODECS)]
        records = [(b"k%d" % ((b * 5 + i) % 37), b"v" * i, []) for i in range(6)]
        log_append = b % 2 == 1
        batches.append(keyed_batch(offset, records, codec=codec, log_append=log_append, base_ts=near_max,
                              max_ts=TS + b if log_append else None))
        offset += len(records)
    part = _partition(tmp_path, "times-0", b"".join(batches))
    c = scan_partition_keys(part, use_c=True, capacity=64, sample_size=64)
    python = scan_partition_keys(part, use_c=False, capacity=64, sample_size=64)
    assert c.stats.to_bytes() == python.stats.to_bytes()
    seen = python.stats.first_seen
    assert len(seen) == 37 and c.stats.first_seen == seen
    stamps = {ts for _, ts in seen.values()}
    assert any(ts < 0 for ts in stamps)  # wrapped as Java's long arithmetic (iter_records) gives it
    assert stamps & {TS + b for b in range(1, 20, 2)}  # LogAppendTime: the batch's maxTimestamp
    for sample in (1, 300, 1000):
        _both(part, sample_bytes=sample)


# ------------------------------------------------------------------------------- bad input
def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        starts.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return starts


def test_cuts_at_every_byte_of_a_batch(tmp_path):
    """The segment cut inside its fourth batch (every byte of the header and first records: inside
    a key, a varint, the header; then every 31st byte): the same notes and sketches both ways, and
    the batches before still counted."""
    data = keyed_segment(4, batches=8)
    starts = _batch_starts(data)
    begin, end = starts[3], starts[4]
    assert end - begin > 300
    before = None
    for i, cut in enumerate(sorted(set(range(begin, begin + 90)) | set(range(begin, end, 31)))):
        doc = _both(_partition(tmp_path, f"cut{i}-0", data[:cut]))
        if before is None:
            before = doc["records"]
        assert doc["records"] == before  # the cut batch is never half counted: the walk ends before it
        assert any("partial-tail" in note for note in doc["notes"]) or cut == begin


def test_absurd_key_lengths_are_notes_and_the_rest_is_counted(tmp_path):
    records = [(b"k%d" % i, b"v" * 10, []) for i in range(5)]
    good = keyed_batch(0, records)
    bad = bytearray(keyed_batch(5, records))
    # record 2's keyLength varint: 2**31 - 1 (a 5-byte varint), then -5 (negative: Kafka reads a null key)
    rec2 = 61 + len(numbered_record(0, *records[0])) + len(numbered_record(1, *records[1]))
    key_len_at = rec2 + 1 + 1 + 1 + 1
    absurd = bytes(bad[:key_len_at]) + _varint(2**31 - 1) + bytes(bad[key_len_at + 1:])
    absurd = absurd[:8] + struct.pack(">i", len(absurd) - 12) + absurd[12:]
    negative = bytes(bad[:key_len_at]) + _varint(-5) + bytes(bad[key_len_at + 1:])
    for name, middle in (("absurd", absurd), ("negative", negative)):
        part = _partition(tmp_path, f"{name}-0", good + middle + keyed_batch(10, records))
        doc = _both(part)
        if name == "absurd":
            assert doc["unreadable_batches"] == 1 and doc["records"] == 5 + 2 + 5
            note = " ".join(doc["notes"])
            assert f"{part / SEGMENT}: byte {len(good)}: batch 5..9: records unreadable" in note
            assert "record 2 keyLength" in note or "record 2 valueLength" in note
        else:  # keyLength -5: no key bytes; the key's bytes then misread as the rest: a note too
            assert doc["unreadable_batches"] == 1 and doc["records"] >= 5 + 2 + 5


def test_random_byte_flips(tmp_path):
    data = keyed_segment(6, batches=12)
    rnd = random.Random(11)
    for i in range(150):
        damaged = bytearray(data)
        for _ in range(rnd.choice((1, 1, 3))):
            damaged[rnd.randrange(len(damaged))] = rnd.randrange(256)
        _both(_partition(tmp_path, f"flip{i}-0", bytes(damaged)))


def test_real_partition_copied_with_a_cut_inside_a_key(tmp_path):
    src = BROKER_DIRS / "kafka-2018-v2" / "kafka-logs" / "debug_topic-0"
    part = tmp_path / "debug_topic-0"
    shutil.copytree(src, part)
    data = (part / SEGMENT).read_bytes()
    starts = _batch_starts(data)
    (part / SEGMENT).chmod(0o644)
    (part / SEGMENT).write_bytes(data[:starts[-1] + 70])  # the last batch's first record's key is cut
    doc = _both(part)
    assert any(f"byte {starts[-1]}" in note and "partial-tail" in note for note in doc["notes"])


def test_a_key_larger_than_the_c_window_and_the_pending_bound(tmp_path):
    """A 1.5 MiB key (past the C walk's 1 MiB window: its buffer grows to the batch) among small
    ones, and enough 90 KiB keys to pass the 8 MiB pending-bytes bound: same sketches both ways."""
    rnd = random.Random(12)
    big = rnd.randbytes(1536 * 1024)
    batches = [keyed_batch(0, [(b"small", b"v", [])] * 3), keyed_batch(3, [(big, b"v", []), (b"small", None, [])])]
    offset = 5
    for i in range(100):
        batches.append(keyed_batch(offset, [(rnd.randbytes(90 * 1024), b"v", [])]))
        offset += 1
    # few keys kept (their KeyInfo hashes are Python's work: 90 KiB each)
    doc = _both(_partition(tmp_path, "bigkeys-0", b"".join(batches)), capacity=4, sample_size=2)
    assert doc["records"] == offset and doc["key_bytes"]["max"] == len(big) and doc["notes"] == []


def test_an_empty_first_key_handed_back_pending():
    """Fuzz finding (key_fold harness, UBSan): an empty key as the first pending key sat at a null
    arena; its bytes came back as None instead of b"" (Py_BuildValue's y# of NULL)."""
    python, c = KeyStats(), KeyStats()
    fold = c.c_fold()
    for stats_add in (python.add, fold.add):
        stats_add(b"", 5)
    c.absorb(fold)
    assert c._pending == python._pending == {key_id(b""): b""}
    for stats in (python, c):
        stats.add(b"k", 1)
    assert c.to_bytes() == python.to_bytes()


def test_a_compressed_batch_larger_than_the_c_walk_reads(tmp_path):
    """A snappy batch of 17 MiB (incompressible values): the C walk hands it back unread, Python
    reads and decompresses it, the C fold takes its records: the same as the pure-Python path."""
    rnd = random.Random(13)
    records = [(b"big-%d" % (i % 3), rnd.randbytes(1 << 20), []) for i in range(17)]
    data = keyed_batch(0, [(b"a", b"v", [])]) + keyed_batch(1, records, codec="snappy") + keyed_batch(18, [(b"a", b"v", [])])
    assert len(data) > 17 << 20
    doc = _both(_partition(tmp_path, "huge-0", data))
    assert doc["records"] == 19 and doc["notes"] == [] and doc["scanned_bytes"] == len(data)
