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

import auditor.scan.resume as resume_module
import auditor.scan.segment as scan_segment_module
import auditor.scan.state as state_module
from auditor.scan import scan_log_dirs
from auditor.scan.state import LogDirState

pytestmark = pytest.mark.unit

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


@pytest.mark.parametrize("use_c,quiet_row", [(True, True), (False, True), (True, False)],
                         ids=["c", "python", "c-scan-quiet-path"])
def test_appended_bytes_only_are_read_and_rows_equal_a_full_scan(use_c, quiet_row, tmp_path, monkeypatch):
    """... and a run with nothing appended takes the rows of the active segments from quiet_row (or,
    switched off, from the scan's quiet path), equal either way, and writes no state file."""
    monkeypatch.setattr(scan_segment_module, "USE_C_WALK", use_c)
    monkeypatch.setattr(state_module, "USE_QUIET_ROW", quiet_row)
    if not use_c:
        monkeypatch.setattr(resume_module, "c_quiet_facts", None)
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
    assert _counts(second)["rewritten"]
    (path,) = state.iterdir()
    before = (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes())
    third = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(third)["continued"] == len(cut)
    assert _counts(third)["skipped_bytes"] == sum(len(whole) for whole in cut.values())
    _assert_equal_to_full_scan(third, log_dir)
    assert not _counts(third)["rewritten"], "nothing changed: the state file is left as it was"
    assert (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes()) == before
    fourth = scan_log_dirs([log_dir], DEPTH, state_dir=state)  # the file left in place is still trusted
    assert _counts(fourth)["continued"] == len(cut) and not _counts(fourth)["rewritten"], _counts(fourth)
    _assert_equal_to_full_scan(fourth, log_dir)


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
    from harness.realdata import LOG_DIRS

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

    from harness.realdata import LOG_DIRS

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
    path.write_bytes(zlib.compress(body + f"end\t{len(lines)}\t{zlib.crc32(body):08x}\n".encode()))
    for log, whole in cut.items():
        _append_rest(log, whole)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(res)["continued"] == len(cut) - 1 and _counts(res)["read"] == 1, _counts(res)
    _assert_equal_to_full_scan(res, log_dir)


def test_a_partition_gone_or_new_rewrites_the_state(tmp_path):
    """A state with a line too many (a partition dir deleted) or too few (a new one) is written again;
    the runs after it take rows from it equal to a full scan's."""
    log_dir, cut = _cut_copy(tmp_path)
    state = tmp_path / "state"
    scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert not _counts(scan_log_dirs([log_dir], DEPTH, state_dir=state))["rewritten"]
    gone = next(iter(cut)).parent
    moved = tmp_path / gone.name
    shutil.move(gone, moved)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(res)["rewritten"], _counts(res)
    _assert_equal_to_full_scan(res, log_dir)
    shutil.move(moved, gone)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert _counts(res)["rewritten"] and _counts(res)["continued"] == len(cut) - 1, _counts(res)
    _assert_equal_to_full_scan(res, log_dir)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert not _counts(res)["rewritten"] and _counts(res)["continued"] == len(cut), _counts(res)
    _assert_equal_to_full_scan(res, log_dir)


def test_quiet_facts_in_c_equals_python(tmp_path):
    """The active segment's quiet check in one C call gives the Python check's tuple, or None where
    it is None: real segments at several positions, and damaged files."""
    from harness.realdata import LOG_DIRS

    from auditor.scan.resume import c_quiet_facts
    from auditor.scan.resume import INDEX_COLUMNS, QUIET_FIELDS, quiet_facts_py

    assert c_quiet_facts is not None, "auditor/formats/_cwalk.c was not built (or has no quiet_facts)"
    # quiet_row reads the tuple by position: the index columns, then the header
    assert QUIET_FIELDS[12:18] == INDEX_COLUMNS[:-1] and QUIET_FIELDS[18] == "head"
    assert INDEX_COLUMNS[-1] == "aborted_txns"
    cases = []
    for log in sorted(p for d in [*LOG_DIRS, FIXTURE] for p in Path(d).rglob("*.log")):
        index, timeindex = log.with_suffix(".index"), log.with_suffix(".timeindex")
        if index.exists() and timeindex.exists():
            size = log.stat().st_size
            starts = _batch_starts(log.read_bytes()) or [0]
            for pos in {0, starts[-1], size - 61, size - 10, size, -1}:
                cases.append((str(log), str(index), str(timeindex), int(log.stem), pos))
    assert len(cases) >= 30
    odd = tmp_path / "odd"
    odd.mkdir()
    log, index, timeindex = (Path(c) for c in cases[0][:3])
    for name in ("a.log", "a.index", "a.timeindex"):
        shutil.copy(log.with_suffix(Path(name).suffix), odd / name)
    a_log, a_index, a_timeindex = odd / "a.log", odd / "a.index", odd / "a.timeindex"
    os.mkfifo(odd / "fifo.index")
    os.symlink(a_log, odd / "link.log")
    (odd / "empty.timeindex").write_bytes(b"")
    (odd / "odd-size.index").write_bytes(b"\0" * 6 + b"\1")
    (odd / "unordered.index").write_bytes(bytes.fromhex("00000005 00000010 00000009 00000020 00000002 00000030"))
    (odd / "unordered.timeindex").write_bytes(bytes.fromhex("0000000000000064 00000005 0000000000000032 00000009"))
    for idx, tidx, lg in [(odd / "fifo.index", a_timeindex, a_log), (a_index, a_timeindex, odd / "link.log"),
                          (a_index, a_timeindex, odd / "gone.log"), (a_index, odd / "gone.timeindex", a_log),
                          (a_index, odd / "empty.timeindex", a_log), (odd / "odd-size.index", a_timeindex, a_log),
                          (odd / "unordered.index", a_timeindex, a_log), (a_index, odd / "unordered.timeindex", a_log),
                          (a_index, a_timeindex, a_log)]:
        cases.append((str(lg), str(idx), str(tidx), 0, 0))
    facts = [(c_quiet_facts(*case), quiet_facts_py(*case)) for case in cases]
    assert all(c == py for c, py in facts), [(case, f) for case, f in zip(cases, facts) if f[0] != f[1]][:3]
    assert sum(c is not None for c, _ in facts) >= 5
    assert [c is None for c, _ in facts[-9:]] == [True] * 8 + [False]


def test_a_state_over_the_write_chunk_is_compressed_and_trusted(tmp_path, monkeypatch):
    """A small state is plain text; one of more than WRITE_CHUNK bytes is one zlib stream: both read back
    to rows equal to a full scan's."""
    log_dir, cut = _cut_copy(tmp_path)
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    scan_log_dirs([log_dir], DEPTH, state_dir=plain)
    monkeypatch.setattr(state_module, "WRITE_CHUNK", 64)
    scan_log_dirs([log_dir], DEPTH, state_dir=packed)
    ((p,), (z,)) = (list(plain.iterdir()), list(packed.iterdir()))
    assert p.read_bytes()[:1] == b"{" and z.read_bytes()[:1] != b"{"
    (plain_lines, plain_meta), (packed_lines, packed_meta) = (state_module.read_state_file(f) for f in (p, z))
    assert plain_meta == packed_meta and len(plain_lines) == len(packed_lines) > 0
    for log, whole in cut.items():
        _append_rest(log, whole)
    for state in (plain, packed):
        res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
        assert _counts(res)["continued"] == len(cut) and not res.log_dirs[0]["problems"], res.log_dirs[0]
        _assert_equal_to_full_scan(res, log_dir)


def test_collect_says_what_the_state_saved(tmp_path, capsys):
    """collect's stderr line per log dir: segments continued and the bytes not read again (human
    units), and whether the state file was left as it was."""
    import re

    from auditor.cli import main
    from auditor.units import human_bytes

    log_dir, cut = _cut_copy(tmp_path)
    state = tmp_path / "state"
    args = ["collect", "--depth", DEPTH, "--state", str(state), "--no-progress", str(log_dir)]
    assert main([*args, "--out", str(tmp_path / "m1")]) == 0
    walked = sum(log.stat().st_size for log in cut)
    for log, whole in cut.items():
        _append_rest(log, whole)
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "m2")]) == 0
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("state: "))
    assert f"{len(cut)} continued where the last run stopped ({human_bytes(walked)} not read again)" in line, line
    assert re.search(r"\b0 read whole\b", line) and not line.endswith(", unchanged)"), line
    assert main([*args, "--out", str(tmp_path / "m3")]) == 0
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("state: "))
    total = sum(len(whole) for whole in cut.values())
    assert f"({human_bytes(total)} not read again)" in line and line.endswith(", unchanged)"), line


def _epoch_appended(part: Path) -> None:  # in place (same inode): a leader change the broker wrote
    (part / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n7 123\n")


def _metadata_same_size_new_mtime(part: Path) -> None:  # another topic id, same length, same inode
    meta = part / "partition.metadata"
    st = meta.stat()
    meta.write_text(meta.read_text().replace("topic_id: A", "topic_id: B"))
    os.utime(meta, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert meta.stat().st_size == st.st_size and meta.stat().st_ino == st.st_ino


def _epoch_deleted(part: Path) -> None:
    (part / "leader-epoch-checkpoint").unlink()


def _metadata_added(part: Path) -> None:
    (part / "partition.metadata").write_text("version: 0\ntopic_id: C" + "w" * 21 + "\n")


def _epoch_corrupt(part: Path) -> None:
    (part / "leader-epoch-checkpoint").write_text("0\n2\n0 0\nnot an epoch\n")


@pytest.mark.parametrize("change", [None, _epoch_appended, _metadata_same_size_new_mtime, _epoch_deleted,
                                    _metadata_added, _epoch_corrupt])
def test_partition_files_from_the_state_equal_a_full_scan(change, tmp_path, monkeypatch):
    """leader-epoch-checkpoint and partition.metadata: not opened on a run with them unchanged (lstat
    proof), read again when one changed (the changed partition only), the partition rows equal to a
    full scan's on every run; a corrupt one is read (and noted) every run."""
    from auditor.formats import checkpoints

    log_dir, _ = _cut_copy(tmp_path)
    parts = sorted(p for p in log_dir.iterdir() if p.is_dir())
    for part in parts[1:]:  # the first has none: _metadata_added adds it
        (part / "partition.metadata").write_text("version: 0\ntopic_id: A" + "Q" * 21 + "\n")
    reads: list[str] = []
    for name in ("read_leader_epoch_checkpoint", "read_partition_metadata"):
        real = getattr(checkpoints, name)
        monkeypatch.setattr(checkpoints, name, lambda path, real=real: reads.append(Path(path).parent.name) or real(path))
    state = tmp_path / "state"
    changed = parts[0] if change in (_metadata_added, None) else parts[1]
    if change is _epoch_corrupt:
        change(changed)
    for run in range(3):
        if run == 1 and change not in (None, _epoch_corrupt):
            change(changed)
        reads.clear()
        res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
        if run == 0:
            assert len(reads) == 2 * len(parts) - 1
            topic_id = {p["dir_name"]: p["topic_id"] for p in res.partitions}[changed.name]
        elif run == 1 and change not in (None, _epoch_corrupt):
            assert set(reads) == {changed.name}, reads
        else:
            assert set(reads) == ({changed.name} if change is _epoch_corrupt else set()), reads
        by_dir = {p["dir_name"]: p for p in res.partitions}
        full = {p["dir_name"]: p for p in scan_log_dirs([log_dir], DEPTH).partitions}
        assert by_dir == full
        if change is _epoch_corrupt:
            assert any("unreadable" in n for n in by_dir[changed.name]["notes"]), by_dir[changed.name]
    assert (full[changed.name]["topic_id"] != topic_id) == (change in (_metadata_same_size_new_mtime, _metadata_added))


def test_a_state_of_the_former_format_is_ignored_with_a_note(tmp_path, monkeypatch):
    log_dir, cut = _cut_copy(tmp_path)
    state = tmp_path / "state"
    with monkeypatch.context() as m:
        m.setattr(state_module, "STATE_FORMAT", "kafka-audit-scan-state/5")
        scan_log_dirs([log_dir], DEPTH, state_dir=state)
    res = scan_log_dirs([log_dir], DEPTH, state_dir=state)
    assert any("scan state format = 'kafka-audit-scan-state/5'" in p and "ignored" in p
               for p in res.log_dirs[0]["problems"]), res.log_dirs[0]
    assert _counts(res)["continued"] == 0 and _counts(res)["rewritten"]
    assert _counts(scan_log_dirs([log_dir], DEPTH, state_dir=state))["continued"] == len(cut)
