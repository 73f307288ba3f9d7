"""The key scan of a compressed batch, in pieces (issue 24's hang rule: more than 1 s, or an
unbounded allocation, for a 1 MiB input). ``auditor/keys/partition_keys.py`` decompressed a batch
whole and ``KeyFold.add_records`` parsed all its records into an array of five int64 each before
adding any: an intact gzip batch at the 256 MiB cap (38,347,922 records) took 1.97 CPU s and
1.79 GB. Now the stream is decompressed piece by piece into the scan's C record fold (RecordFold,
the check) and each piece's records are added to the key fold up to the count the check has read
cleanly (``KeyFold.records_feed``); a stream past ``KEEP_DECOMPRESSED_BYTES`` is added as it comes
after a copy of the fold is taken, put back when the stream then fails (the Python loop adds nothing
of an unreadable stream). Sketches, offsets and notes are the pure-Python scan's, byte for byte;
the bomb itself is counted here (pieces, Python loops, peak RSS of a child), never timed: the
figures are benchmarks/decompression_bombs.py --scan keys."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from auditor.formats import compression
from auditor.keys import partition_keys
from auditor.keys.partition_keys import scan_partition_keys
from harness.record_fold import PythonRecords
from harness.records import BROKEN, COMPRESS, TINY_RECORD, v2_batch, v2_record

# 7 CPU s (two bombs at the cap built and scanned, one in a child): tests/conftest.py runs long files first
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=7)]

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CAP = compression.DEFAULT_MAX_DECOMPRESSED_BYTES
ROOT = Path(__file__).resolve().parents[1]


def _keyed(n: int, seed: int) -> bytes:
    """n records of varied keys (null, empty, repeated, long), values and headers."""
    rnd = random.Random(seed)
    keys = [None, b"", b"a", b"bb"] + [rnd.randbytes(rnd.choice((3, 40, 200))) for _ in range(60)]
    return b"".join(v2_record(rnd.randint(-3000, 3000), i, key=rnd.choice(keys), value=rnd.randbytes(rnd.randint(0, 90)),
                              headers=[(b"h", b"x")] * rnd.randint(0, 2)) for i in range(n))


def _log(tmp_path, name: str, records: bytes, count: int, codec: int) -> Path:
    path = tmp_path / name / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(v2_batch(50, v2_record(5, 0, key=b"first"), 1)
                     + v2_batch(100, COMPRESS[codec](records), count, attributes=codec, base_ts=7, max_ts=9))
    return path.parent


def _keys(directory: Path, use_c: bool):
    found = scan_partition_keys(directory, use_c=use_c, prefix_bytes=2, capacity=4, sample_size=5)
    return found.stats.to_bytes(), found.to_json(20)


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 4 KiB (gzip; lz4's are its 64 KiB blocks) and a key fold fed piece by piece past 8 KiB:
    the streaming path, its carries and its copy, on inputs the pure-Python scan reads in a blink."""
    monkeypatch.setattr(compression, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(partition_keys, "KEEP_DECOMPRESSED_BYTES", 8192)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD, SNAPPY], ids=["gzip", "lz4", "zstd", "snappy"])
@pytest.mark.parametrize("broken", ["intact"] + list(BROKEN))
def test_key_scan_in_pieces_equals_the_python_scan(tmp_path, monkeypatch, small_pieces, broken, codec):
    """3,000 keyed records (~250 KB decompressed: ~60 pieces of gzip, 4 lz4 blocks, one of zstd and
    snappy), intact or with a broken last record: the sketches, offsets and notes of the pure-Python
    scan; the Python loop reads no record."""
    tail, extra = BROKEN.get(broken, (b"", 0))
    directory = _log(tmp_path, "b", _keyed(3000, 1) + tail, 3000 + extra, codec)
    pure = _keys(directory, False)
    counted = PythonRecords(monkeypatch)
    assert _keys(directory, True) == pure
    assert (counted.loops, counted.records) == (0, 0)
    unreadable = [n for n in pure[1]["notes"] if "unreadable" in n]
    assert len(unreadable) == (broken != "intact"), pure[1]["notes"]


def _gzip_cut_at(records: bytes, keep: int) -> bytes:
    """A gzip stream of ``records`` whose deflate data is damaged after ``keep`` compressed bytes."""
    stream = bytearray(COMPRESS[GZIP](records))
    for i in range(keep, keep + 64):
        stream[i] ^= 0x55
    return bytes(stream)


def _lz4_bad_block_at(records: bytes, good_blocks: int) -> bytes:
    """Kafka's lz4 frame of ``records`` (harness.records.lz4_frame: 64 KiB blocks) whose block
    after ``good_blocks`` declares a size past the frame's block maximum."""
    frame = COMPRESS[LZ4](records)
    pos = 7   # magic, FLG, BD, HC
    for _ in range(good_blocks):
        pos += 4 + (int.from_bytes(frame[pos:pos + 4], "little") & ~compression.LZ4_BLOCK_UNCOMPRESSED_MASK)
    return frame[:pos] + (0x7FFF0000).to_bytes(4, "little") + frame[pos + 4:]


@pytest.mark.parametrize("damage", ["gzip damaged mid-stream", "lz4 block size past the maximum",
                                    "lz4 frame cut mid-stream"])
def test_a_stream_failing_after_records_were_added_adds_none(tmp_path, monkeypatch, small_pieces, damage):
    """The stream fails (a damaged deflate block, a bad or missing lz4 block) after pieces whose
    records the key fold had already added: the fold is put back as it was (KeyFold.copy / swap), so
    none of the batch's keys count, as with the Python loop (record_bytes raises before any record),
    and the note is the Python scan's."""
    records = _keyed(3000, 2)
    lz4 = COMPRESS[LZ4](records)
    payload = {"gzip damaged mid-stream": _gzip_cut_at(records, len(COMPRESS[GZIP](records)) * 2 // 3),
               "lz4 block size past the maximum": _lz4_bad_block_at(records, 3),
               "lz4 frame cut mid-stream": lz4[:len(lz4) * 3 // 4]}[damage]
    path = tmp_path / "d" / "00000000000000000000.log"
    path.parent.mkdir()
    codec = GZIP if damage.startswith("gzip") else LZ4
    path.write_bytes(v2_batch(50, v2_record(5, 0, key=b"first"), 1)
                     + v2_batch(100, payload, 3000, attributes=codec, base_ts=7, max_ts=9))
    calls = []
    original = partition_keys._fold_stream

    class Counted:
        """The key fold, its stream calls counted (a C type's methods cannot be patched)."""

        def __init__(self, fold):
            self.fold = fold

        def __getattr__(self, name):
            method = getattr(self.fold, name)
            return lambda *args: calls.append((name, self.fold.state()[0])) or method(*args)

    monkeypatch.setattr(partition_keys, "_fold_stream", lambda result, fold, stream: original(result, Counted(fold),
                                                                                                 stream))
    pure = _keys(path.parent, False)
    assert _keys(path.parent, True) == pure
    assert [n for n in pure[1]["notes"] if "unreadable" in n], pure[1]["notes"]
    assert pure[1]["records"] == 1                       # the first batch's record only
    # records were added before the stream failed (the fold held more than the first batch's one),
    # then the copy taken before the batch was swapped back in (by the walk's hand-over, then again
    # by the reading of the batch that names the error)
    names = [name for name, _ in calls]
    assert names.count("copy") == names.count("swap") >= 1, names
    assert max(records for _, records in calls) > 1, calls


def _tiny_gzip(records: int) -> bytes:
    """gzip (level 9) of ``records`` TINY_RECORDs, compressed piece by piece (no 256 MiB bytes object)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    unit = TINY_RECORD * (1 << 17)
    full, rest = divmod(records, 1 << 17)
    return b"".join([c.compress(unit) for _ in range(full)] + [c.compress(TINY_RECORD * rest), c.flush()])


def _bomb(tmp_path) -> Path:
    """One gzip batch of 38,347,922 null-key records: 268,435,454 bytes (2 below the cap) from ~390 KB."""
    count = CAP // len(TINY_RECORD)
    path = tmp_path / "bomb" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(v2_batch(0, _tiny_gzip(count), count, attributes=GZIP, base_ts=7, max_ts=7))
    return path.parent


def test_the_bomb_at_the_cap_is_added_in_pieces(tmp_path, monkeypatch):
    """The intact gzip bomb at the cap: every record counted, the stream decompressed once and only
    in pieces of at most compression.CHUNK_BYTES (never compression.decompress, which makes the
    256 MiB buffer), no Python loop, nothing kept past KEEP_DECOMPRESSED_BYTES."""
    directory = _bomb(tmp_path)
    pieces, whole = [], []
    chunks, decompress = compression.decompress_chunks, compression.decompress

    def counted_chunks(*args, **kwargs):
        for piece in chunks(*args, **kwargs):
            pieces.append(len(piece))
            yield piece
    monkeypatch.setattr(compression, "decompress_chunks", counted_chunks)
    monkeypatch.setattr(compression, "decompress", lambda *a, **k: whole.append(1) or decompress(*a, **k))
    counted = PythonRecords(monkeypatch)
    found = scan_partition_keys(directory, prefix_bytes=2)
    count = CAP // len(TINY_RECORD)
    assert (found.stats.records, found.stats.null_keys, found.first_offset, found.last_offset) == \
           (count, count, 0, 0)   # (every TINY_RECORD has offsetDelta 0)
    assert found.notes == [] and found.unreadable_batches == 0
    assert sum(pieces) == count * len(TINY_RECORD) and max(pieces) <= compression.CHUNK_BYTES
    assert whole == [] and (counted.loops, counted.records) == (0, 0)


CHILD = r"""
import json, resource, sys
from pathlib import Path
from auditor.keys.partition_keys import scan_partition_keys
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
found = scan_partition_keys(Path(sys.argv[1]), prefix_bytes=2)
print(json.dumps({"records": found.stats.records, "rss_before_kib": before,
                  "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def test_the_bomb_at_the_cap_takes_no_more_memory_than_a_piece(tmp_path):
    """Peak RSS of a fresh interpreter that key-scans the bomb: it grows by less than 64 MiB (the
    pieces, a copy of the fold, the allocator's slack; the records' array made it 1.79 GB)."""
    directory = _bomb(tmp_path)
    done = subprocess.run([sys.executable, "-c", CHILD, str(directory)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["records"] == CAP // len(TINY_RECORD)
    assert got["rss_kib"] - got["rss_before_kib"] < 64 * 1024, got
