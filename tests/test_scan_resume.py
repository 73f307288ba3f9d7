"""Continuing an active segment where the last ``--state`` run stopped, on copies of real broker files.

A real broker's log dir (fixtures/real, v2 batches) is copied; each partition's last segment is
cut at a batch boundary (what the last run saw), scanned with a state, then changed the way a
broker changes it: the cut bytes appended (continued: only they are read), or a change that must
not be trusted (cut below the recorded batch and other batches appended, the recorded header
rewritten in place, a smaller file, a new inode, a rebuilt index): then the whole segment is read.
Every time, every column of every row equals a full scan's (but ``scanned_at_ms``), with the C
walker and with the pure-Python one. The live-broker proof is tests/test_scan_state.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import auditor.scan.segment as scan_segment_module
from auditor.scan import scan_log_dirs
from auditor.scan.state import LogDirState

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real" / "broker-dirs" / "kafka-2018-v2" / "kafka-logs"
DEPTH = "headers"


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        starts.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return starts


def _cut_copy(tmp_path: Path) -> tuple[Path, dict[Path, bytes]]:
    """A copy of the fixture with each partition's last .log cut at about half its batches."""
    log_dir = tmp_path / "logs"
    shutil.copytree(FIXTURE, log_dir)
    cut = {}
    for part in sorted(p for p in log_dir.iterdir() if p.is_dir()):
        log = sorted(part.glob("*.log"))[-1]
        data = log.read_bytes()
        starts = _batch_starts(data)
        assert len(starts) >= 3, f"{log}: the fixture needs batches to cut"
        at = starts[len(starts) // 2]
        cut[log] = data
        os.truncate(log, at)
    return log_dir, cut


def _counts(res) -> dict:
    return res.log_dirs[0]["scan_state"]


def _assert_equal_to_full_scan(res, log_dir: Path) -> None:
    full = scan_log_dirs([log_dir], DEPTH)
    a = {(r["dir_name"], r["base_offset"]): r for r in res.segments}
    b = {(r["dir_name"], r["base_offset"]): r for r in full.segments}
    assert a.keys() == b.keys()
    for key in a:
        for column in a[key]:
            if column != "scanned_at_ms":
                assert a[key][column] == b[key][column], f"{key} {column}: {a[key][column]!r} != {b[key][column]!r}"


def _append_rest(log: Path, whole: bytes) -> None:
    with open(log, "ab") as fh:
        fh.write(whole[log.stat().st_size:])


def _other_batches_after_cut(log: Path, whole: bytes) -> None:
    """Cut below the last batch the first run walked, then append batches (real ones, from further on
    in the file) so that another batch sits where that run's last batch was: a truncate + re-append."""
    size = log.stat().st_size
    starts = [s for s in _batch_starts(whole) if s < size]
    os.truncate(log, starts[len(starts) // 2])
    with open(log, "ab") as fh:
        fh.write(whole[size:])
    assert log.stat().st_size > size


def _rewrite_recorded_header(log: Path, whole: bytes) -> None:
    """The last walked batch's CRC field changed in place (same inode, same size), then the rest appended."""
    size = log.stat().st_size
    last = [s for s in _batch_starts(whole) if s < size][-1]
    with open(log, "r+b") as fh:
        fh.seek(last + 17)
        crc = fh.read(4)
        fh.seek(last + 17)
        fh.write(bytes(b ^ 0xFF for b in crc))
    _append_rest(log, whole)


def _rewrite_recorded_header_only(log: Path, whole: bytes) -> None:
    """As above, nothing appended: the file is as long as the last walk's end (the quiet path)."""
    _rewrite_recorded_header(log, whole[:log.stat().st_size])


def _smaller(log: Path, whole: bytes) -> None:
    size = log.stat().st_size
    os.truncate(log, [s for s in _batch_starts(whole) if s < size][-1])


def _new_inode(path: Path) -> None:
    tmp = path.with_name(path.name + ".copy")
    shutil.copy2(path, tmp)
    os.replace(tmp, path)


def _replaced(log: Path, whole: bytes) -> None:
    _append_rest(log, whole)
    _new_inode(log)


def _index_rebuilt(log: Path, whole: bytes) -> None:
    _append_rest(log, whole)
    _new_inode(log.with_suffix(".index"))


@pytest.mark.parametrize("use_c", [True, False], ids=["c", "python"])
def test_appended_bytes_only_are_read_and_rows_equal_a_full_scan(use_c, tmp_path, monkeypatch):
    monkeypatch.setattr(scan_segment_module, "USE_C_WALK", use_c)
    log_dir, cut = _cut_copy(tmp_path)
    state = tmp_path / "state"
    first = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(first)["kept"] == len(cut) and _counts(first)["continued"] == 0
    walked = sum(log.stat().st_size for log in cut)
    for log, whole in cut.items():
        _append_rest(log, whole)
    second = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(second)["continued"] == len(cut) and _counts(second)["read"] == 0, _counts(second)
    assert _counts(second)["skipped_bytes"] == walked
    _assert_equal_to_full_scan(second, log_dir)
    # nothing appended since: continued again, nothing walked, same rows
    third = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(third)["continued"] == len(cut)
    assert _counts(third)["skipped_bytes"] == sum(len(whole) for whole in cut.values())
    _assert_equal_to_full_scan(third, log_dir)


@pytest.mark.parametrize("change", [_other_batches_after_cut, _rewrite_recorded_header, _rewrite_recorded_header_only,
                                    _smaller, _replaced, _index_rebuilt])
def test_a_segment_that_does_not_verify_is_read_whole(change, tmp_path):
    log_dir, cut = _cut_copy(tmp_path)
    state = tmp_path / "state"
    scan_log_dirs([log_dir], DEPTH, state_dir=state)
    log, whole = next(iter(cut.items()))
    change(log, whole)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(res)["continued"] == len(cut) - 1 and _counts(res)["read"] == 1, _counts(res)
    _assert_equal_to_full_scan(res, log_dir)


def test_other_depths_never_continue(tmp_path):
    log_dir, cut = _cut_copy(tmp_path)
    for depth in ("index", "deep"):
        state = tmp_path / f"state-{depth}"
        scan_log_dirs([log_dir], depth, state_dir=state)
        res = scan_log_dirs([log_dir], depth, state_dir=state)
        assert _counts(res)["continued"] == 0
    info = {"log_dir": str(log_dir), "broker_id": None, "cluster_id": None, "directory_id": None}
    assert LogDirState.open(tmp_path / "state-deep", info, "deep").continues is False


def test_segment_proof_in_c_equals_python(tmp_path):
    """The C proof (one call, three lstats) is the Python proof's text, or None where it is None."""
    from realdata import LOG_DIRS

    from auditor.formats.log_reader import c_segment_proof
    from auditor.scan.segment import SegmentFiles
    from auditor.scan.state import segment_proof, segment_proof_py

    assert c_segment_proof is not None, "auditor/formats/_cwalk.c was not built"
    cases = []
    for log in sorted(p for d in [*LOG_DIRS, FIXTURE] for p in Path(d).rglob("*.log")):
        paths = {s: str(log.with_suffix(f".{s}")) for s in ("index", "timeindex", "txnindex")
                 if log.with_suffix(f".{s}").exists()}
        cases.append(SegmentFiles(0, None, {"log": str(log), **paths}))
    odd = tmp_path / "odd"
    odd.mkdir()
    os.mkfifo(odd / "fifo.index")
    (odd / "a.log").write_bytes(b"x")
    os.symlink(odd / "a.log", odd / "link.log")
    cases += [SegmentFiles(0, None, {"log": str(odd / "a.log"), "index": str(odd / "fifo.index")}),
              SegmentFiles(0, None, {"log": str(odd / "gone.log")}),
              SegmentFiles(0, None, {"log": str(odd / "link.log")}),
              SegmentFiles(0, None, {"log": odd / "a.log", "timeindex": str(odd / "gone.timeindex")}),
              SegmentFiles(0, None, {"index": str(odd / "a.log")})]
    proofs = [(segment_proof(files), segment_proof_py(files)) for files in cases]
    assert all(c == py for c, py in proofs), [p for p in proofs if p[0] != p[1]]
    assert sum(c is not None for c, _ in proofs) > 5 and [c for c, _ in proofs[-5:]] == [None] * 5


def test_state_rows_keep_the_scan_rows_column_order(tmp_path):
    """Rows from the state are the scan's rows: same columns, same order, same values."""
    from auditor.schema import SEGMENT_FIELDS

    from realdata import LOG_DIRS

    state = tmp_path / "state"
    first = scan_log_dirs(LOG_DIRS, DEPTH, state_dir=state)
    second = scan_log_dirs(LOG_DIRS, DEPTH, state_dir=state)
    assert sum(info["scan_state"]["reused"] for info in second.log_dirs) > 0
    assert sum(info["scan_state"]["continued"] for info in second.log_dirs) > 0
    for a, b in zip(first.segments, second.segments):
        assert tuple(a) == tuple(b) == SEGMENT_FIELDS
        assert {k: v for k, v in a.items() if k != "scanned_at_ms"} == {k: v for k, v in b.items() if k != "scanned_at_ms"}


def _zero_last_index_entry(log: Path, keep_mtime: bool) -> None:
    index = log.with_suffix(".index")
    st = index.stat()
    data = index.read_bytes()
    assert len(data) >= 16
    with open(index, "r+b") as fh:
        fh.seek(len(data) - 8)
        fh.write(bytes(8))
    if keep_mtime:
        os.utime(index, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["mtime-changed", "mtime-restored"])
def test_an_index_changed_in_place_beside_a_quiet_log_is_read_again(keep_mtime, tmp_path):
    """Nothing appended since the last run: the indexes are read at their ends only when they are as
    they were; an entry changed in place (even with the old mtime put back) is seen, and the row equals
    a full scan's."""
    log_dir, cut = _cut_copy(tmp_path)
    state = tmp_path / "state"
    scan_log_dirs([log_dir], DEPTH, state_dir=state)
    quiet = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    _assert_equal_to_full_scan(quiet, log_dir)
    log = next(log for log in cut if log.with_suffix(".index").stat().st_size >= 16)
    before = {r["dir_name"]: r["index_entries"] for r in quiet.segments}
    _zero_last_index_entry(log, keep_mtime)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(res)["continued"] == len(cut), _counts(res)
    _assert_equal_to_full_scan(res, log_dir)
    assert {r["dir_name"]: r["index_entries"] for r in res.segments}[log.parent.name] == before[log.parent.name] - 1


@pytest.mark.parametrize("resume", ['{"log": 1}', '{"log": [0, 0], "pos": "x", "end": 5}', "[1, 2]", "not json"])
def test_a_malformed_resume_record_reads_the_segment_whole(resume, tmp_path):
    """A resume record that is whole (count and CRC-32 match) but not one this version writes is not
    trusted and does not fail the scan."""
    import json
    import zlib

    import pyarrow as pa

    from auditor.scan.state import read_state_file

    log_dir, cut = _cut_copy(tmp_path)
    state = tmp_path / "state"
    scan_log_dirs([log_dir], DEPTH, state_dir=state)
    (path,) = state.iterdir()
    lines, meta = read_state_file(path)
    fields = lines[0].split("\t", 4)
    assert fields[3], "the first line is an active segment's, with its resume record"
    lines[0] = "\t".join([*fields[:3], resume, fields[4]])
    body = (json.dumps(meta, sort_keys=True) + "\n" + "".join(line + "\n" for line in lines)).encode()
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(body + f"end\t{len(lines)}\t{zlib.crc32(body):08x}\n".encode())
    path.write_bytes(sink.getvalue().to_pybytes())
    for log, whole in cut.items():
        _append_rest(log, whole)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(res)["continued"] == len(cut) - 1 and _counts(res)["read"] == 1, _counts(res)
    _assert_equal_to_full_scan(res, log_dir)
