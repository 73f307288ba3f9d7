"""Write-side faults on real file systems: a full disk, a read-only output dir, an output path that
is a file, an unwritable state dir (issue 24 item 4; docs/write-faults.md).

The full and read-only cases run on a real tmpfs each test mounts (``mount -t tmpfs -o size=...``;
read-only: ``mount -o remount,ro``) and unmounts at its end. A machine that cannot mount (not root,
no CAP_SYS_ADMIN) fails these tests under CI=true, saying why, and skips them elsewhere with the
reason. Each case checks what the user sees (exit code 3, one line on stderr naming the path) and
what is left: no manifest that reads as complete (``find_manifests`` refuses it), the state file
byte for byte as it was, no temporary file left in the output dir, nothing changed under the log dir.
The log dir is a private copy of a real broker's (tests/harness/realdata.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from auditor.atomic import TEMP_MARK, OutputError, atomic_write, remove_stale_temps, temp_path
from auditor.cli import main
from auditor.manifest import (COMPLETE_FILE, SEGMENTS_FILE, IncompleteManifest, check_manifest_complete,
                              collect_manifest, find_manifests, manifest_completeness)
from harness.realdata import copy_log_dir

# CLI runs on full and read-only outputs: 3 s at load 2 (tests/conftest.py: long files first)
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=3)]

DEPTH = "headers"
EXIT_INPUT_PROBLEM = 3


def _tree(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: (kind, size, mtime ns, sha256 of a file's bytes): what a read-only tool must leave."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            out[str(p.relative_to(root))] = (p.is_dir(), st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture
def log_dir(tmp_path) -> Path:
    return copy_log_dir("kafka-2018-v2", tmp_path / "logs")


class Tmpfs:
    """A real tmpfs mounted at ``path`` for one test (unmounted by the fixture)."""

    def __init__(self, path: Path):
        self.path = path
        self.mounted = False

    def mount(self, size: str) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(self.path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            why = (f"cannot mount a tmpfs at {self.path} (uid {os.getuid()}): {proc.stderr.strip() or proc.returncode}; "
                   "these tests need root or CAP_SYS_ADMIN to mount a real small file system")
            if os.environ.get("CI") == "true":
                pytest.fail(why, pytrace=False)
            pytest.skip(why)
        self.mounted = True
        return self.path

    def read_only(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True, capture_output=True)

    def fill(self, leave_bytes: int) -> None:
        """Fills the file system, then frees ``leave_bytes`` (rounded to pages by tmpfs)."""
        filler = self.path / "filler"
        with open(filler, "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        size = filler.stat().st_size
        os.truncate(filler, max(size - leave_bytes, 0))

    def umount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=True, capture_output=True)
            self.mounted = False


@pytest.fixture
def tmpfs(tmp_path):
    fs = Tmpfs(tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}")
    yield fs
    fs.umount()


def _collect(capsys, log_dir: Path, out: Path, state: Path | None = None) -> tuple[int, list[str]]:
    args = ["collect", "--depth", DEPTH, "--no-progress", "--out", str(out), str(log_dir)]
    if state is not None:
        args[1:1] = ["--state", str(state)]
    code = main(args)
    return code, capsys.readouterr().err.splitlines()


def _state_files(state: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(state.iterdir())} if state.is_dir() else {}


def _grow(log_dir: Path, n: int) -> None:
    """Another partition dir, so that the next run's state differs from the last (it is rewritten)."""
    src = log_dir / "debug_topic-0"
    shutil.copytree(src, log_dir / f"debug_topic-{n}")


def _assert_failed_cleanly(code: int, err: list[str], named: Path) -> None:
    assert code == EXIT_INPUT_PROBLEM, (code, err)
    assert len(err) == 1 and err[0].startswith("kafka-audit: error: cannot write "), err
    assert str(named) in err[0], (named, err)


def _assert_not_complete(out: Path) -> None:
    if not (out / SEGMENTS_FILE).exists():
        return  # (nothing that could be read as a manifest)
    with pytest.raises(IncompleteManifest, match="incomplete"):
        find_manifests([out])
    assert not list(out.glob(f".*{TEMP_MARK}*")), "temporary files left in the output dir"


PAGE = 4096
NAMED_FILE = re.compile(r"cannot write (\S+?):")


def _allocated(directory: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in directory.iterdir())


@pytest.mark.parametrize("room", [0.0, 0.3, 0.6, 0.9])
def test_full_disk_under_out(capsys, tmp_path, tmpfs, log_dir, room):
    """--out on a small tmpfs that fills up at different points of the write (``room``: the share
    of what the manifest needs that is free; 0 fails the first Parquet file, more fail later files or
    the marker): exit 3 naming the file, no manifest that reads as complete, the state as it was,
    nothing changed under the log dir; a collect into the last complete manifest's dir with no room
    leaves it incomplete (its marker is removed first). With room again, the next run's rows equal a
    full collect's."""
    state = tmp_path / "state"
    mnt = tmpfs.mount("1m")
    old = mnt / "manifest"
    code, err = _collect(capsys, log_dir, old, state)
    assert code == 0, err
    check_manifest_complete(old, verify_bytes=True)
    before_state = _state_files(state)
    assert before_state
    _grow(log_dir, 1)
    collect_manifest([log_dir], mnt / "probe", DEPTH)   # what a manifest of this log dir takes here
    needed = _allocated(mnt / "probe")
    shutil.rmtree(mnt / "probe")
    logs_before = _tree(log_dir)
    tmpfs.fill(int(needed * room) // PAGE * PAGE)
    new = mnt / "new"
    code, err = _collect(capsys, log_dir, new, state)
    _assert_failed_cleanly(code, err, new)
    assert "No space left on device" in err[0]
    with capsys.disabled():
        print(f"\nroom {room:.0%} of {needed} bytes: failed at {NAMED_FILE.search(err[0]).group(1)}")
    _assert_not_complete(new)
    assert _state_files(state) == before_state, "the state moved on although the collect failed"
    tmpfs.fill(0)
    code, err = _collect(capsys, log_dir, old, state)
    _assert_failed_cleanly(code, err, old)
    _assert_not_complete(old)
    assert _state_files(state) == before_state
    assert _tree(log_dir) == logs_before
    # room again: the next run completes, and its rows equal a full collect's
    (mnt / "filler").unlink()
    for out in (new, old):
        code, err = _collect(capsys, log_dir, out, state)
        assert code == 0, err
        check_manifest_complete(out, verify_bytes=True)
    full = collect_manifest([log_dir], tmp_path / "full", DEPTH)
    assert full.segments == len(pq.read_table(old / SEGMENTS_FILE))
    _assert_same_rows(old, tmp_path / "full")
    _assert_same_rows(new, tmp_path / "full")


def _rows(manifest: Path, name: str) -> list[dict]:
    rows = pq.read_table(manifest / name).to_pylist()
    for r in rows:
        r.pop("scanned_at_ms", None)
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _assert_same_rows(a: Path, b: Path) -> None:
    for name in (SEGMENTS_FILE, "partitions.parquet"):
        assert _rows(a, name) == _rows(b, name), name


def test_full_disk_under_the_state_dir(capsys, tmp_path, tmpfs, log_dir):
    """The state dir on a full tmpfs: exit 3 naming the state file; the old state as it was; the
    manifest (elsewhere, complete before) is not complete now, as its collect failed."""
    state = tmpfs.mount("256k") / "state"
    out = tmp_path / "manifest"
    code, err = _collect(capsys, log_dir, out, state)
    assert code == 0, err
    before_state = _state_files(state)
    _grow(log_dir, 1)
    logs_before = _tree(log_dir)
    tmpfs.fill(0)
    code, err = _collect(capsys, log_dir, out, state)
    _assert_failed_cleanly(code, err, state)
    _assert_not_complete(out)
    assert _state_files(state) == before_state
    assert not list(state.glob(f".*{TEMP_MARK}*"))
    assert _tree(log_dir) == logs_before


def test_read_only_out(capsys, tmp_path, tmpfs, log_dir):
    """--out on a read-only mount: an empty one (nothing can be created) and one holding the last
    complete manifest (left exactly as it was: it is still that run's whole manifest)."""
    state = tmp_path / "state"
    mnt = tmpfs.mount("1m")
    code, err = _collect(capsys, log_dir, mnt / "old", state)
    assert code == 0, err
    old = _tree(mnt / "old")
    before_state = _state_files(state)
    _grow(log_dir, 1)
    tmpfs.read_only()
    for out in (mnt / "new", mnt / "old"):
        code, err = _collect(capsys, log_dir, out, state)
        _assert_failed_cleanly(code, err, out)
        assert "Read-only file system" in err[0]
        assert _state_files(state) == before_state
    assert not (mnt / "new").exists()
    assert _tree(mnt / "old") == old
    check_manifest_complete(mnt / "old", verify_bytes=True)


def test_unwritable_state_dir(capsys, tmp_path, tmpfs, log_dir):
    """--state on a read-only mount, or a path that is a file: exit 3 naming it, no manifest that reads as complete."""
    mnt = tmpfs.mount("256k")
    tmpfs.read_only()
    out = tmp_path / "manifest"
    code, err = _collect(capsys, log_dir, out, mnt / "state")
    _assert_failed_cleanly(code, err, mnt / "state")
    _assert_not_complete(out)
    (tmp_path / "a-file").write_text("x")
    code, err = _collect(capsys, log_dir, out, tmp_path / "a-file")
    _assert_failed_cleanly(code, err, tmp_path / "a-file")
    assert "not a directory" in err[0]


def test_out_path_that_is_a_file(capsys, tmp_path, log_dir):
    (tmp_path / "a-file").write_text("x")
    code, err = _collect(capsys, log_dir, tmp_path / "a-file", tmp_path / "state")
    _assert_failed_cleanly(code, err, tmp_path / "a-file")
    assert "not a directory" in err[0] and (tmp_path / "a-file").read_text() == "x"
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").iterdir())
    code, err = _collect(capsys, log_dir, tmp_path / "a-file" / "below", None)
    _assert_failed_cleanly(code, err, tmp_path / "a-file" / "below")


def test_audit_outputs_that_cannot_be_written_fail_before_the_scan(capsys, tmp_path, tmpfs, log_dir):
    """audit --out/--json/--history on a read-only mount, a --json path that is a directory: exit 3
    naming the path, before anything is scanned (a --state does not move on)."""
    mnt = tmpfs.mount("256k")
    tmpfs.read_only()
    state = tmp_path / "state"
    (tmp_path / "a-dir").mkdir()
    for option, path in (("--out", mnt / "r.html"), ("--json", mnt / "f.json"), ("--history", mnt / "hist"),
                         ("--json", tmp_path / "a-dir")):
        code = main(["audit", "--log-dir", str(log_dir), "--state", str(state), "--no-progress", option, str(path)])
        err = capsys.readouterr().err.splitlines()
        _assert_failed_cleanly(code, err, path)
        assert not state.exists() or not list(state.iterdir())


def test_audit_refuses_an_incomplete_manifest(capsys, tmp_path, log_dir):
    """A manifest without its marker (what a killed collect leaves) is an input problem: exit 3
    naming it; the same manifest, completed by the next collect, is read."""
    out = tmp_path / "manifest"
    collect_manifest([log_dir], out, "index")
    (out / COMPLETE_FILE).unlink()
    code = main(["audit", "--manifest", str(out), "--no-progress", "--json", str(tmp_path / "f.json")])
    err = capsys.readouterr().err.splitlines()
    assert code == EXIT_INPUT_PROBLEM and len(err) == 1, err
    assert str(out) in err[0] and "incomplete" in err[0] and f"no {COMPLETE_FILE}" in err[0]
    assert not (tmp_path / "f.json").exists()


def test_manifest_markers(tmp_path, log_dir):
    """What reads as complete: the marker listing exactly the files there; a file the marker does
    not list, or one it lists that is missing, or (verify_bytes) other bytes, does not; a manifest
    of format 2 or older (no marker) reads as before; a format-3 one without the marker does not."""
    out = tmp_path / "m"
    collect_manifest([log_dir], out, "index")
    assert manifest_completeness(out, verify_bytes=True) is None
    marker = json.loads((out / COMPLETE_FILE).read_text())
    assert set(marker["files"]) == {p.name for p in out.iterdir()} - {COMPLETE_FILE}
    seg = (out / SEGMENTS_FILE).read_bytes()
    (out / SEGMENTS_FILE).write_bytes(seg[:-1] + bytes([seg[-1] ^ 1]))
    assert manifest_completeness(out) is None  # (names only: what every reader checks)
    assert "segments.parquet is not the file" in manifest_completeness(out, verify_bytes=True)
    (out / SEGMENTS_FILE).write_bytes(seg)
    (out / "remote_log_metadata.jsonl.gz").write_bytes(b"x")
    assert "remote_log_metadata.jsonl.gz is not in" in manifest_completeness(out)
    (out / "remote_log_metadata.jsonl.gz").unlink()
    (out / "log_dirs.parquet").unlink()
    assert "log_dirs.parquet is listed" in manifest_completeness(out)
    (out / COMPLETE_FILE).write_text('{"format": "kafka-audit.manifest-complete", "fi')
    assert "unreadable" in manifest_completeness(out)
    (out / COMPLETE_FILE).unlink()
    assert "did not finish" in manifest_completeness(out)
    # an older manifest (format 2, before the marker) is read as before
    table = pq.read_table(out / SEGMENTS_FILE)
    meta = dict(table.schema.metadata)
    meta[b"kafka_audit.manifest_format"] = b"2"
    pq.write_table(table.replace_schema_metadata(meta), out / SEGMENTS_FILE)
    assert manifest_completeness(out) is None and find_manifests([out]) == [str(out)]


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "f"
    atomic_write(path, b"old")

    def fails(fh):
        fh.write(b"half of the new")
        raise RuntimeError("killed here")

    with pytest.raises(RuntimeError):
        atomic_write(path, fails)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f"]
    with pytest.raises(OutputError, match=f"cannot write {tmp_path / 'nope' / 'f'}: No such file"):
        atomic_write(tmp_path / "nope" / "f", b"x")
    # a writer killed before its rename leaves its temporary file: the next writer removes it
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = path.with_name(f".f{TEMP_MARK}{dead.pid}")
    stale.write_bytes(b"half")
    mine = temp_path(path)
    mine.write_bytes(b"a live writer's")
    assert remove_stale_temps(tmp_path, {"f"}) == [stale]
    assert mine.exists()


def test_the_dags_input_check_names_an_incomplete_manifest(tmp_path, log_dir):
    """The Airflow DAG's input check fails on a manifest a killed collect left, naming it (not "no manifest")."""
    from airflow.exceptions import AirflowFailException

    from airflow_dags.kafka_audit_operators import check_inputs

    out = tmp_path / "manifest"
    collect_manifest([log_dir], out, "index")
    assert check_inputs(manifests=[str(out)])
    (out / COMPLETE_FILE).unlink()
    with pytest.raises(AirflowFailException, match=f"manifest {out} is incomplete: no {COMPLETE_FILE}"):
        check_inputs(manifests=[str(out)])
