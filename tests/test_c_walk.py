"""The C paths (auditor/formats/_cwalk.c) give exactly the pure-Python rows: the fold of v2
headers at 'headers' depth, and the one-call segment ends at 'index' depth.

The C path only takes well-formed v2 batches and hands everything else (legacy entries, cut or
corrupt or zero-filled tails) back to the Python walker, which the conformance tests compare with
DumpLogSegments; these tests prove the hand-over loses nothing, on every real file and on
damaged copies of them.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

import auditor.scan.segment as scan_segment_module
from auditor.formats import log_reader
from auditor.scan import SegmentFiles, scan_log_dirs, scan_segment
from harness.realdata import LOG_DIRS, RECORD_SET_FILES, RECORD_SETS

pytestmark = pytest.mark.recorded

IGNORED = {"scanned_at_ms"}


def _rows(files_or_dirs, monkeypatch, use_c: bool):
    monkeypatch.setattr(scan_segment_module, "USE_C_WALK", use_c)
    if isinstance(files_or_dirs, SegmentFiles):
        rows = [scan_segment(SegmentFiles(files_or_dirs.base_offset, None, dict(files_or_dirs.paths)), "headers",
                             is_active=False, location={})]
    else:
        rows = scan_log_dirs(files_or_dirs, "headers").segments
    return [{k: v for k, v in r.items() if k not in IGNORED} for r in rows]


def assert_same_both_ways(target, monkeypatch):
    with_c = _rows(target, monkeypatch, True)
    pure = _rows(target, monkeypatch, False)
    assert with_c == pure
    return with_c


def test_extension_is_built():
    # CI builds it with the machine's gcc (setup.py); a silent fallback would hide a 3x slowdown.
    assert log_reader._cwalk is not None, "auditor/formats/_cwalk.c was not built: `pip install -e .` with gcc"


def test_real_broker_dirs(monkeypatch):
    rows = assert_same_both_ways(LOG_DIRS, monkeypatch)
    assert sum(r["batch_count"] or 0 for r in rows) > 8000


# every record set: *.records.bin missed v0_recordbatch.bin and v0_recordbatch_zstd.bin
@pytest.mark.parametrize("path", RECORD_SET_FILES, ids=lambda p: p.name)
def test_real_record_sets(path, monkeypatch):
    assert_same_both_ways(SegmentFiles(0, None, {"log": path}), monkeypatch)


def _v2_segment() -> Path:
    """The largest real v2 .log among the broker dirs."""
    logs = [p for d in LOG_DIRS for p in d.rglob("*.log") if p.stat().st_size > 0]
    return max(logs, key=lambda p: p.stat().st_size)


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length <= 0:
            break
        starts.append(pos)
        pos += 12 + length
    return starts


@pytest.mark.parametrize("damage", ["cut-mid-batch", "zero-tail", "bad-length-mid", "bad-magic-mid", "legacy-after-v2",
                                    "few-bytes-left", "huge-length"])
def test_damaged_copies(damage, tmp_path, monkeypatch):
    src = _v2_segment()
    data = src.read_bytes()
    starts = _batch_starts(data)
    assert len(starts) > 10
    mid = starts[len(starts) // 2]
    if damage == "cut-mid-batch":
        data = data[: mid + 30]
    elif damage == "zero-tail":
        data = data + bytes(64 * 1024)
    elif damage == "bad-length-mid":
        data = data[: mid + 8] + struct.pack(">i", 20) + data[mid + 12:]
    elif damage == "bad-magic-mid":
        data = data[: mid + 16] + b"\x07" + data[mid + 17:]
    elif damage == "legacy-after-v2":
        legacy = next(p for p in sorted(RECORD_SETS.rglob("*v1-v1.records.bin")))
        data = data + legacy.read_bytes()
    elif damage == "few-bytes-left":
        data = data + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00"
    elif damage == "huge-length":
        data = data[: mid + 8] + struct.pack(">i", 0x7FFFFFF0) + data[mid + 12:]
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(data)
    (row,) = assert_same_both_ways(SegmentFiles(0, None, {"log": log}), monkeypatch)
    if damage != "legacy-after-v2":
        assert row["stop_reason"] is not None or damage == "zero-tail"


def test_unreadable_mid_walk_falls_back(tmp_path, monkeypatch):
    """A file that shrinks between open and read: the C walk stops, Python reports io-error."""
    src = _v2_segment()
    log = tmp_path / "00000000000000000000.log"
    shutil.copy(src, log)
    reader = log_reader.LogReader(log)
    try:
        os.truncate(log, src.stat().st_size // 2)  # the copy, never a real log dir
        folded = reader.fold_v2_headers(0)
        assert folded["stop_position"] <= src.stat().st_size // 2
        rest = list(reader.batches(folded["stop_position"]))
        assert reader.stop_reason in ("io-error", "partial-tail"), (reader.stop_reason, len(rest))
    finally:
        reader.close()


# ---------------------------------------------------------------------------------------
# The 'index' depth in one C call per segment (_cwalk.index_ends)
# ---------------------------------------------------------------------------------------

def _indexed_partition(tmp_path) -> SegmentFiles:
    """A copy of the real segment with the most offset-index entries (mtimes kept)."""
    best = None
    for d in LOG_DIRS:
        for idx in d.rglob("*.index"):
            log = idx.with_suffix(".log")
            if log.exists() and idx.with_suffix(".timeindex").exists() and not idx.with_suffix(".txnindex").exists():
                if best is None or idx.stat().st_size > best.stat().st_size:
                    best = idx
    target = tmp_path / best.parent.name
    target.mkdir()
    paths = {}
    for suffix in ("log", "index", "timeindex"):
        paths[suffix] = target / best.with_suffix(f".{suffix}").name
        shutil.copy2(best.with_suffix(f".{suffix}"), paths[suffix])
    return SegmentFiles(int(best.stem), None, paths)


def _index_rows(files: SegmentFiles, monkeypatch, use_c: bool) -> dict:
    monkeypatch.setattr(scan_segment_module, "USE_C_WALK", use_c)
    row = scan_segment(SegmentFiles(files.base_offset, None, dict(files.paths)), "index", is_active=True, location={})
    return {k: v for k, v in row.items() if k not in IGNORED}


def _rewrite(path: Path, fn) -> None:
    path.write_bytes(fn(path.read_bytes()))


# damage -> "c": the C call takes the segment; "note": it hands it to the Python path, which
# notes the problem; "python": handed over without a problem (entries C does not walk)
INDEX_DAMAGE = {
    "none": "c",
    "preallocated-indexes": "c",           # an active segment's zero tails: binary search for the last entry
    "empty-offset-index": "c",             # below index.interval.bytes: walk the whole log
    "offset-index-odd-size": "note",
    "offset-index-out-of-order": "note",
    "offset-index-negative-relative": "note",
    "offset-index-past-log": "note",
    "time-index-out-of-order": "note",
    "time-index-empty": "note",
    "log-cut-mid-batch": "note",
    "log-zero-tail": "note",
    "offset-index-symlink": "note",
    "log-legacy-entries": "python",
    "log-empty": "python",
}


@pytest.mark.parametrize("damage", sorted(INDEX_DAMAGE))
def test_index_depth_in_c_equals_python(damage, tmp_path, monkeypatch):
    files = _indexed_partition(tmp_path)
    log, idx, tidx = files.paths["log"], files.paths["index"], files.paths["timeindex"]
    assert idx.stat().st_size >= 3 * 8 and tidx.stat().st_size >= 3 * 12
    if damage == "preallocated-indexes":
        os.truncate(idx, 10 * 1024 * 1024)
        os.truncate(tidx, 10 * 1024 * 1024 - 4)
    elif damage == "empty-offset-index":
        os.truncate(idx, 0)
    elif damage == "offset-index-odd-size":
        _rewrite(idx, lambda b: b + b"\x00\x00\x01")
    elif damage == "offset-index-out-of-order":
        _rewrite(idx, lambda b: b[:-16] + b[-8:] + b[-16:-8])
    elif damage == "offset-index-negative-relative":
        _rewrite(idx, lambda b: b[:-8] + struct.pack(">ii", -5, struct.unpack(">ii", b[-8:])[1]))
    elif damage == "offset-index-past-log":
        _rewrite(idx, lambda b: b[:-8] + struct.pack(">ii", struct.unpack(">ii", b[-8:])[0], log.stat().st_size + 100))
    elif damage == "time-index-out-of-order":
        _rewrite(tidx, lambda b: b[:-12] + struct.pack(">qi", 0, struct.unpack(">qi", b[-12:])[1]))
    elif damage == "time-index-empty":
        os.truncate(tidx, 0)
    elif damage == "log-cut-mid-batch":
        os.truncate(log, log.stat().st_size - 7)
    elif damage == "log-zero-tail":
        _rewrite(log, lambda b: b + bytes(8192))
    elif damage == "log-legacy-entries":
        log.write_bytes(next(p for p in sorted(RECORD_SETS.rglob("*v1-v1.records.bin"))).read_bytes())
        os.truncate(idx, 0)
    elif damage == "log-empty":
        for p in (log, idx, tidx):
            os.truncate(p, 0)
    elif damage == "offset-index-symlink":
        real = tmp_path / "elsewhere.index"
        idx.rename(real)
        idx.symlink_to(real)
    took = log_reader._cwalk.index_ends(log, idx, tidx, files.base_offset) is not None
    assert took == (INDEX_DAMAGE[damage] == "c")
    with_c, pure = _index_rows(files, monkeypatch, True), _index_rows(files, monkeypatch, False)
    assert with_c == pure
    assert bool(pure["notes"]) == (INDEX_DAMAGE[damage] == "note"), pure["notes"]
    if took:
        assert with_c["last_offset"] is not None and with_c["max_timestamp_ms"] is not None


def test_index_depth_in_c_on_real_dirs(monkeypatch):
    with_c = [{k: v for k, v in r.items() if k not in IGNORED}
              for r in (monkeypatch.setattr(scan_segment_module, "USE_C_WALK", True) or scan_log_dirs(LOG_DIRS, "index")).segments]
    pure = [{k: v for k, v in r.items() if k not in IGNORED}
            for r in (monkeypatch.setattr(scan_segment_module, "USE_C_WALK", False) or scan_log_dirs(LOG_DIRS, "index")).segments]
    assert with_c == pure and len(with_c) >= 7


def test_walk_v2_last_position_is_the_python_walkers_last_batch():
    """``last_position`` (where an incremental scan verifies the last batch next run: auditor.scan.resume)
    is the position of the last batch the C fold took, as the Python walker finds it."""
    checked = 0
    for log in sorted(p for d in LOG_DIRS for p in Path(d).rglob("*.log")):
        with log_reader.LogReader(log) as reader:
            folded = reader.fold_v2_headers(0)
            positions = [b.position for b in reader.batches(0) if b.position < folded["stop_position"]]
        assert folded["last_position"] == (positions[-1] if positions else None), log
        checked += bool(positions)
    assert checked > 5
