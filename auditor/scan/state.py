"""Incremental scans: the rows of a log dir's closed segments kept between runs (``--state DIR``).

A closed segment never changes until the broker deletes it (retention), rewrites it (the
cleaner writes a new file: new inode), truncates it or rebuilds its indexes. So a nightly scan
need not read it again: the state file keeps its row beside what proves it unchanged, and
the next run takes the row from the state when the proof still holds.

The proof (:func:`segment_proof`), from ``lstat`` alone (nothing is opened):

* the ``.log``: device, inode, size, mtime (ns);
* the base offset and directory name (in the state's key);
* size and mtime of each of ``.index``, ``.timeindex``, ``.txnindex`` (or their absence).

What is never taken from the state as it is: the active segment (the largest base offset without
a file-state suffix: it is being appended to), files with a suffix (``.deleted``, ``.cleaned``,
``.swap``: transient), segments whose proof changed or whose files are new, and rows whose
scan met an operating-system error (``errno`` in a note: perhaps transient). Those are
scanned as usual, but at ``headers`` depth a segment that was active in the last run (still
active, or rolled since) is continued where that run's walk ended when its bytes up to there
verify (:mod:`auditor.scan.resume`: same inode and indexes, not smaller, the last batch's header
unchanged), so a nightly run reads only what the broker appended. A row is stored only if its proof was the same before and after its scan
(a file changing under the scan is read again next time). ``scanned_at_ms`` keeps when the
row was really read; every other column equals what a full scan gives
(``tests/test_scan_state.py`` proves it on a live broker producing, rolling, deleting,
compacting and moving replicas between log dirs).

One state file per log dir and depth, in the state dir (never inside a log dir: refused like
``collect --out``): lines of text (see END_MARK) with one line per kept segment (directory name,
base offset, proof, for an active segment where its walk ended, the segment row as a JSON array),
streamed to a temporary name, ended by a count and a CRC-32, fsynced and renamed into place
(``collect``: after its manifest is complete, so a failed collect leaves the old one as it was);
not written at all when every line would be the old file's (nothing new, nothing gone, nothing
changed: the nightly run of a quiet log dir; an active segment with nothing appended keeps its
line, whose row is its seed: the walk's columns are what a continuation takes from it). Its
first line names the state format, the tool version, the row columns, the log dir, its
``directory.id``/cluster/broker and the depth: a state written by another version, for another log
dir or depth, a torn or altered one or one that cannot be read is ignored with a note (in the log
dir's problems), never trusted. Memory: the old state's lines (about 0.5 KB per segment), handed
out one partition directory at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import json.scanner
import os
import re
import stat as stat_mod
from collections.abc import Callable
from dataclasses import dataclass, field
import zlib
from pathlib import Path
from typing import BinaryIO

from auditor import __version__
from auditor.atomic import OutputError, as_output_error, publish, remove_stale_temps, temp_path
from auditor.formats.log_reader import c_segment_proof
from auditor.scan.resume import WALK_COLUMNS, can_seed, quiet_row
from auditor.scan.segment import SegmentFiles
from auditor.schema import SEGMENT_FIELDS

STATE_FORMAT = "kafka-audit-scan-state/6"
END_MARK = "end"
"""The file: a JSON identity line; one line per kept segment, tab-separated: directory name, base
offset, proof (closed segments, else empty), where its walk ended (an active segment at headers
depth, :mod:`auditor.scan.resume`, JSON, else empty), its row (a JSON array of STORED_FIELDS:
decoded by the C decoder on a hit and written back unchanged); then ``end``, the count of segment
lines and the CRC-32 of everything before, hex. A partition directory's own files have a line of
base offset -1 (:mod:`auditor.scan.partition_files`: their proof, the partition row's columns).
Plain lines, not Parquet: a second run reads and writes this file and little else, and Parquet's
reader and writer cost more than the index depth's whole scan of a small log dir (big: 47 segments, 8 ms). The whole file is one zlib stream (level 1:
the state of 102,400 segments is 45 MB of text, 2 % of what a first headers run reads), but for a
state of less than a MiB of text, which stays plain text (its first line's ``{`` tells). Not
pyarrow's zstd: on a small log dir a second run's whole budget is a few ms, and pyarrow's stream
cost 0.7 ms on its first use in a process; zlib's first decompression 0.1-0.6 ms."""
CODEC = "zlib"
LEVEL = 1
WRITE_CHUNK = 1 << 20
LOCATION_FIELDS = ("broker_id", "cluster_id", "log_dir", "topic", "partition", "dir_kind", "dir_name")
"""The row's first columns: where the segment is. The scan knows them from the partition directory
(the state is per log dir and keyed by directory name), so the state does not keep them."""
STORED_FIELDS = SEGMENT_FIELDS[len(LOCATION_FIELDS):]
COLUMNS_DIGEST = hashlib.sha256(",".join(SEGMENT_FIELDS).encode()).hexdigest()[:16]
"""In the state's identity: a state written with other row columns is not trusted."""
INDEX_SUFFIXES = ("index", "timeindex", "txnindex")
USE_QUIET_ROW = True
"""An active segment with nothing appended since the last run takes its row from :func:`quiet_row`
(one C call) instead of the scan's quiet path; tests turn this off to prove both give the same rows."""


class StateDirError(ValueError):
    """A usage problem with ``--state`` (inside a log dir, not a directory): one line, exit 2."""


def check_state_dir(state_dir: str | os.PathLike, log_dirs) -> None:
    """StateDirError when the state dir is (or would land) inside a scanned log dir, or is not a
    directory. An existing state dir is compared by device and inode with each log dir and each of
    its own parents (``..`` from the resolved directory: symlinks and bind mounts included): a few
    ``stat`` calls where ``os.path.realpath`` takes one per path component (a second run's whole
    budget is a few ms); one that does not exist yet by its resolved path."""
    path = os.fspath(state_dir)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is None or not stat_mod.S_ISDIR(st.st_mode):
        _check_state_path(state_dir, log_dirs)
        return
    roots = {}
    for log_dir in log_dirs:
        try:
            root = os.stat(log_dir)
        except OSError:
            continue  # (nothing is inside a log dir that does not exist)
        roots[(root.st_dev, root.st_ino)] = log_dir
    here = (st.st_dev, st.st_ino)
    while True:
        if here in roots:
            _refuse(state_dir, os.path.realpath(path), os.path.realpath(roots[here]))
        path = os.path.join(path, os.pardir)
        up = os.stat(path)
        if (up.st_dev, up.st_ino) == here:  # the root directory is its own parent
            return
        here = (up.st_dev, up.st_ino)


def _check_state_path(state_dir, log_dirs) -> None:
    real = os.path.realpath(state_dir)
    for log_dir in log_dirs:
        root = os.path.realpath(log_dir)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            _refuse(state_dir, real, root)
    if os.path.exists(real) and not os.path.isdir(real):
        raise OutputError(state_dir, "--state exists and is not a directory")


def _refuse(state_dir, real: str, root: str) -> None:
    raise StateDirError(f"--state {state_dir} resolves to {real}, inside the scanned log dir {root}: "
                        "the auditor never writes under a log dir; choose a path outside it")


_UNREADABLE = re.compile(r"[^A-Za-z0-9._-]+")


def state_file_name(log_dir: str, depth: str) -> str:
    """``<readable log dir>-<hash>.<depth>.state``: one file per log dir and depth."""
    readable = _UNREADABLE.sub("_", log_dir).strip("_")[-80:] or "root"
    digest = hashlib.sha256(log_dir.encode()).hexdigest()[:12]
    return f"{readable}-{digest}.{depth}.state"


def read_state_file(path: Path) -> tuple[list[str], dict]:
    """A state file's segment lines and its identity; ValueError when it is not a whole state file
    (not a zlib stream, no identity line, no end line, a count or CRC-32 that does not match: a torn
    or altered file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        packed = _read_all(fd)
    finally:
        os.close(fd)
    try:
        data = packed if packed[:1] == b"{" else zlib.decompress(packed)  # (a small state is plain text)
    except zlib.error as exc:
        raise ValueError(f"not a {CODEC} stream: {exc}") from exc
    head_end = data.find(b"\n")
    tail_start = data.rfind(b"\n", 0, len(data) - 1) + 1
    if head_end < 0 or not data.endswith(b"\n") or tail_start <= head_end:
        raise ValueError("not a scan state file (no identity line or no end line)")
    meta = json.loads(data[:head_end])
    if not isinstance(meta, dict):
        raise ValueError("not a scan state file (identity line is not an object)")
    mark, count, crc = data[tail_start:-1].decode().split("\t")
    body = data[head_end + 1:tail_start]
    if mark != END_MARK or int(crc, 16) != zlib.crc32(body, zlib.crc32(data[:head_end + 1])):
        raise ValueError("end line or CRC-32 does not match: a torn or altered file")
    lines = body.decode().split("\n")[:-1]
    if len(lines) != int(count):
        raise ValueError(f"{len(lines)} segment lines, the end line says {count}")
    return lines, {str(k): str(v) for k, v in meta.items()}


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    parts, got = [], 0
    while True:
        chunk = os.read(fd, max(size - got, 0) + 1)  # (one read for a file that did not grow)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        got += len(chunk)


def encode_row(row: dict) -> str:
    """A row as the state keeps it: the values of STORED_FIELDS, a JSON array."""
    return json.dumps([row[name] for name in STORED_FIELDS])


_SCAN_JSON = json.scanner.make_scanner(json.JSONDecoder())


def json_value(text: str):
    """The JSON value ``text`` holds, exactly (nothing after it; no surrounding whitespace), else
    None: json's C scanner called directly, as json.loads' Python layers (and its whitespace regexes)
    were a third of decoding a row."""
    try:
        value, end = _SCAN_JSON(text, 0)
    except (StopIteration, TypeError, ValueError):
        return None
    return value if end == len(text) else None


def decode_row(text: str, location: dict) -> dict | None:
    """The row of :func:`encode_row` with the scan's ``location`` (LOCATION_FIELDS): the same
    columns in the same order as a scan's row; None when the values do not fit."""
    values = json_value(text)
    if not isinstance(values, list) or len(values) != len(STORED_FIELDS):
        return None
    return dict(zip(SEGMENT_FIELDS, (*[location[name] for name in LOCATION_FIELDS], *values)))


def segment_proof(files: SegmentFiles) -> str | None:
    """What proves a segment unchanged, from lstat alone; None when a file cannot be stat-ed or
    is not a regular file (the scan then writes its note). One C call when the extension is
    built (tests/test_scan_resume.py proves it gives :func:`segment_proof_py`'s text)."""
    if c_segment_proof is None:
        return segment_proof_py(files)
    paths = files.paths
    try:
        return c_segment_proof(paths.get("log"), paths.get("index"), paths.get("timeindex"), paths.get("txnindex"))
    except (OSError, ValueError):
        return None


def segment_proof_py(files: SegmentFiles) -> str | None:
    """:func:`segment_proof` in Python (the extension's fallback)."""
    log = files.paths.get("log")
    if log is None:
        return None
    try:
        st = os.lstat(log)
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        parts = [f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"]
        for suffix in INDEX_SUFFIXES:
            path = files.paths.get(suffix)
            if path is None:
                parts.append("-")
                continue
            ist = os.lstat(path)
            if not stat_mod.S_ISREG(ist.st_mode):
                return None
            parts.append(f"{ist.st_size}:{ist.st_mtime_ns}")
    except OSError:
        return None
    return "|".join(parts)


def _reusable(row: dict) -> bool:
    return not any("errno" in note for note in row["notes"] or ())


@dataclass
class PartitionState:
    """One partition directory's rows from the state (base offset -> proof, row JSON), and the rows to keep."""

    log_dir_state: "LogDirState"
    dir_name: str
    old: dict[int, tuple[str | None, str, str | None]]

    def row(self, files: SegmentFiles, is_active: bool, scan: Callable[[tuple | None, dict | None], dict],
            location: dict, care=None) -> dict:
        """The segment's row: from the state when its proof holds, else ``scan(resume, out)``
        (remembered for the next run when the segment is closed and did not change during the
        scan; an active one with where its walk ended, to be continued from there)."""
        lds = self.log_dir_state
        if files.state is not None:
            lds.scanned += 1
            return scan(None, None)
        hit = self.old.get(files.base_offset)
        proof = None
        if not is_active:
            proof = segment_proof(files)
            if hit is not None and proof is not None and hit[0] == proof:
                row = decode_row(hit[1], location)
                if row is not None:
                    lds.reused += 1
                    lds.keep(self.dir_name, files.base_offset, proof, hit[1], same=hit[2] is None)
                    return row
        out: dict | None = {} if lds.continues else None
        resume = _resume(hit, location) if out is not None else None
        if resume is not None and is_active and USE_QUIET_ROW:
            quiet = _quiet_row(files, resume, care)
            if quiet is not None:  # nothing appended since the last run: its line is this run's
                lds.continued += 1
                lds.skipped_bytes += resume[0]["end"]
                lds.keep(self.dir_name, files.base_offset, None, hit[1], hit[2], same=True)
                return quiet
        row = scan(resume, out)
        if out and "continued_from" in out:
            lds.continued += 1
            lds.skipped_bytes += out["continued_from"]
        else:
            lds.scanned += 1
        if not is_active:
            if proof is not None and _reusable(row) and segment_proof(files) == proof:
                lds.keep(self.dir_name, files.base_offset, proof, encode_row(row))
        elif out and "resume" in out and can_seed(row):
            if resume is not None and out["resume"] == resume[0] and _same_walk(row, resume[1]):
                # nothing appended, same files: the last run's line is this run's seed as it is
                lds.keep(self.dir_name, files.base_offset, None, hit[1], hit[2], same=True)
            else:
                lds.keep(self.dir_name, files.base_offset, None, encode_row(row), json.dumps(out["resume"]))
        return row


def _quiet_row(files: SegmentFiles, resume: tuple[dict, dict], care) -> dict | None:
    if care is None:
        return quiet_row(files.paths, files.base_offset, resume)
    return care.around(list(files.paths.values()), lambda: quiet_row(files.paths, files.base_offset, resume))


def _same_walk(row: dict, old: dict) -> bool:
    return all(row[column] == old[column] for column in WALK_COLUMNS)


def _resume(hit: tuple | None, location: dict) -> tuple[dict, dict] | None:
    """(where the last walk ended, the row then) of a segment that was active in the last run."""
    if hit is None or hit[2] is None:
        return None
    row = decode_row(hit[1], location)
    info = json_value(hit[2])
    if row is None or not can_seed(row) or not isinstance(info, dict):
        return None
    return info, row


@dataclass
class LogDirState:
    """A log dir's state: the old one (if trusted) read per partition dir, the new one being built."""

    path: Path
    identity: dict[str, str]
    by_dir: dict[str, dict[int, tuple[str | None, str, str | None]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reused: int = 0
    scanned: int = 0
    stored: int = 0
    continued: int = 0
    skipped_bytes: int = 0
    _out: BinaryIO | None = None
    _zout: "zlib._Compress | None" = None
    _pending: list = field(default_factory=list)
    _pending_bytes: int = 0
    _crc: int = 0
    _tmp: Path | None = None
    _lines: int = 0
    """Lines kept so far: segments (``stored``) and partition directories' own files."""
    _old_lines: int = -1
    """Segment lines of the trusted old state (-1: none was read or it was not trusted)."""
    _held: list | None = field(default_factory=list)
    """Lines kept so far that are the old state's own, not yet written: while every line is,
    nothing is written (None once one differs and the new state is being streamed)."""
    rewritten: bool = False

    @classmethod
    def open(cls, state_dir: str | os.PathLike, info: dict, depth: str) -> "LogDirState":
        """The state for the log dir ``info`` describes (the scanner's log-dir info row)."""
        log_dir = str(info["log_dir"])
        identity = {"format": STATE_FORMAT, "version": __version__, "columns": COLUMNS_DIGEST, "log_dir": log_dir,
                    "depth": depth,
                    "directory_id": str(info.get("directory_id")), "cluster_id": str(info.get("cluster_id")),
                    "broker_id": str(info.get("broker_id"))}
        state = cls(Path(state_dir) / state_file_name(log_dir, depth), identity)
        remove_stale_temps(state_dir, {state.path.name})  # what runs killed before their rename left
        state._load()
        return state

    def _load(self) -> None:
        try:
            lines, meta = read_state_file(self.path)
        except FileNotFoundError:  # the first run: nothing to say
            return
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            self.notes.append(f"{self.path}: scan state unreadable ({type(exc).__name__}: {exc}): ignored, "
                              "every segment is read")
            return
        for key, want in self.identity.items():
            if meta.get(key) != want:
                self.notes.append(f"{self.path}: scan state {key} = {meta.get(key)!r}, expected {want!r}: "
                                  "ignored, every segment is read")
                return
        by_dir = self.by_dir
        for line in lines:
            dir_name, base_offset, proof, resume, row = line.split("\t", 4)
            by_dir.setdefault(dir_name, {})[int(base_offset)] = (proof or None, row, resume or None)
        self._old_lines = len(lines)

    @property
    def continues(self) -> bool:
        """Active segments are continued where the last walk ended: headers depth only (see
        :mod:`auditor.scan.resume`; 'deep' columns need every record, 'index' reads little)."""
        return self.identity["depth"] == "headers"

    def partition(self, dir_name: str) -> PartitionState:
        return PartitionState(self, dir_name, self.by_dir.pop(dir_name, {}))

    def keep(self, dir_name: str, base_offset: int, proof: str | None, row_json: str,
             resume_json: str | None = None, same: bool = False, segment: bool = True) -> None:
        """One segment's line for the next run (``segment=False``: a partition directory's own files);
        ``same``: the old state's line for it, unchanged."""
        if "\t" in dir_name or "\n" in dir_name:  # (never a Kafka partition dir): not kept, read next time
            return
        self._lines += 1
        self.stored += segment
        if same and self._held is not None:
            self._held.append((dir_name, base_offset, proof, resume_json, row_json))
            return
        try:
            if self._out is None:
                self._start()
            self._line(dir_name, base_offset, proof, resume_json, row_json)
        except OSError as exc:  # (a full or read-only state dir: named here; the scan aborts the state)
            raise as_output_error(self.path, exc) from exc

    def _line(self, dir_name: str, base_offset: int, proof: str | None, resume_json: str | None,
              row_json: str) -> None:
        line = f"{dir_name}\t{base_offset}\t{proof or ''}\t{resume_json or ''}\t{row_json}\n".encode()
        self._crc = zlib.crc32(line, self._crc)
        self._write(line)

    def _write(self, data: bytes, flush: bool = False) -> None:
        """Into the zlib stream a MiB at a time (one compressor call per line cost a tenth of a second run)."""
        self._pending.append(data)
        self._pending_bytes += len(data)
        if flush or self._pending_bytes >= WRITE_CHUNK:
            if flush and self._out.tell() == 0 and self._pending_bytes < WRITE_CHUNK:
                self._zout = None  # a state under a MiB stays plain text: zlib's first use in a process costs more
            else:
                data = self._zout.compress(b"".join(self._pending))
                self._pending = [data]
            self._out.write(b"".join(self._pending))
            self._pending, self._pending_bytes = [], 0

    def _start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = temp_path(self.path)
        self._out = open(self._tmp, "wb")  # noqa: SIM115 - closed by commit/abort
        self._zout = zlib.compressobj(LEVEL)
        head = (json.dumps(self.identity, sort_keys=True) + "\n").encode()
        self._crc = zlib.crc32(head)
        self._write(head)
        held, self._held = self._held or [], None
        for line in held:
            self._line(*line)

    def commit(self) -> None:
        """Writes the new state (every closed segment seen this run) and renames it into place; nothing
        when it would be the old one (a trusted state whose every line was kept as it was, none
        added: the nightly run of a quiet log dir writes and fsyncs nothing)."""
        self.prepare()
        self.publish()

    def prepare(self) -> None:
        """:meth:`commit` but the rename (``collect`` calls :meth:`publish` once its manifest is complete)."""
        if self._out is None and self._old_lines == self._lines:
            self._held, self.by_dir = [], {}
            return
        try:
            if self._out is None:
                self._start()
            self._write(f"{END_MARK}\t{self._lines}\t{self._crc:08x}\n".encode(), flush=True)
            if self._zout is not None:
                self._out.write(self._zout.flush())
            self._zout = None
            self._out.flush()
            os.fsync(self._out.fileno())
            self._out.close()
        except OSError as exc:
            self.abort()
            raise as_output_error(self.path, exc) from exc
        self._out = None
        self.rewritten = True
        self.by_dir = {}

    def publish(self) -> None:
        """Renames the state :meth:`prepare` wrote into place (readers see the old file or the new one)."""
        if self._tmp is not None and self.rewritten:
            publish(self._tmp, self.path)

    def abort(self) -> None:
        """Drops the new state (the old file stays as it was)."""
        self._zout = None
        if self._out is not None:
            with contextlib.suppress(OSError):  # (a full disk fails the close's flush too: the file goes anyway)
                self._out.close()
            self._out = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
