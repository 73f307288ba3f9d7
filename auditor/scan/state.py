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
``collect --out``): a Parquet file with one row per kept segment (directory name, base offset,
proof, the segment row as JSON: decoded by the C decoder on a hit and written back unchanged, and
for an active segment where its walk ended),
written whole under a temporary name, fsynced and renamed into place. Its metadata names the state
format, the tool version, the log dir, its ``directory.id``/cluster/broker and the depth: a state
written by another version, for another log dir or depth, or one that cannot be read is ignored
with a note (in the log dir's problems), never trusted. Memory: the old state's rows as JSON text
(about 1.5 KB per closed segment), handed out one partition directory at a time.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from itertools import accumulate
import os
import re
import stat as stat_mod
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from auditor import __version__
from auditor.formats.log_reader import c_segment_proof
from auditor.scan.resume import can_seed
from auditor.scan.segment import SegmentFiles
from auditor.schema import SEGMENT_FIELDS

STATE_FORMAT = "kafka-audit-scan-state/3"
STATE_SCHEMA = pa.schema([("dir_name", pa.string()), ("base_offset", pa.int64()), ("proof", pa.string()),
                          ("row", pa.string()), ("resume", pa.string())])
"""One row per kept segment: where, its proof (closed segments), its row (a JSON array of
STORED_FIELDS: decoded by the C decoder on a hit and written back unchanged; Arrow's row conversion
both ways was most of a second run, and a JSON object with its keys four times as long to decode),
and for an active segment where its walk ended (:mod:`auditor.scan.resume`, JSON)."""
LOCATION_FIELDS = ("broker_id", "cluster_id", "log_dir", "topic", "partition", "dir_kind", "dir_name")
"""The row's first columns: where the segment is. The scan knows them from the partition directory
(the state is per log dir and keyed by directory name), so the state does not keep them."""
STORED_FIELDS = SEGMENT_FIELDS[len(LOCATION_FIELDS):]
COLUMNS_DIGEST = hashlib.sha256(",".join(SEGMENT_FIELDS).encode()).hexdigest()[:16]
"""In the state's identity: a state written with other row columns is not trusted."""
FLUSH_ROWS = 8192
INDEX_SUFFIXES = ("index", "timeindex", "txnindex")
_META = "kafka_audit.state."


class StateDirError(ValueError):
    """A usage problem with ``--state`` (inside a log dir, not a directory): one line, exit 2."""


def check_state_dir(state_dir: str | os.PathLike, log_dirs) -> Path:
    """The resolved state dir; StateDirError when it is (or would land) inside a scanned log dir."""
    real = Path(os.path.realpath(state_dir))
    for log_dir in log_dirs:
        root = Path(os.path.realpath(log_dir))
        if real == root or root in real.parents:
            raise StateDirError(
                f"--state {state_dir} resolves to {real}, inside the scanned log dir {root}: "
                "the auditor never writes under a log dir; choose a path outside it")
    if real.exists() and not real.is_dir():
        raise StateDirError(f"--state {state_dir} exists and is not a directory")
    return real


def state_file_name(log_dir: str, depth: str) -> str:
    """``<readable log dir>-<hash>.<depth>.state.parquet``: one file per log dir and depth."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", log_dir).strip("_")[-80:] or "root"
    digest = hashlib.sha256(log_dir.encode()).hexdigest()[:12]
    return f"{readable}-{digest}.{depth}.state.parquet"


def _strings(values) -> pa.Array:
    """A string column built from its buffers ("" for None: a proof or resume never is empty).
    Not ``pa.array``: its first call imports pandas (0.8 s, more than a whole second run)."""
    if sys.byteorder != "little":  # Arrow's buffers are little-endian
        return pa.array([v or "" for v in values], type=pa.string())
    data = [(v or "").encode() for v in values]
    offsets = array("i", [0, *accumulate(map(len, data))])
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets), pa.py_buffer(b"".join(data)))


def encode_row(row: dict) -> str:
    """A row as the state keeps it: the values of STORED_FIELDS, a JSON array."""
    return json.dumps([row[name] for name in STORED_FIELDS])


def decode_row(text: str, location: dict) -> dict | None:
    """The row of :func:`encode_row` with the scan's ``location`` (LOCATION_FIELDS, in that order):
    the same columns in the same order as a scan's row; None when the values do not fit."""
    try:
        values = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(values, list) or len(values) != len(STORED_FIELDS):
        return None
    row = dict(location)
    row.update(zip(STORED_FIELDS, values))
    return row


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
            location: dict) -> dict:
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
                    lds.keep(self.dir_name, files.base_offset, proof, hit[1])
                    return row
        out: dict | None = {} if lds.continues else None
        row = scan(_resume(hit, location) if out is not None else None, out)
        if out and "continued_from" in out:
            lds.continued += 1
            lds.skipped_bytes += out["continued_from"]
        else:
            lds.scanned += 1
        if not is_active:
            if proof is not None and _reusable(row) and segment_proof(files) == proof:
                lds.keep(self.dir_name, files.base_offset, proof, encode_row(row))
        elif out and "resume" in out and can_seed(row):
            lds.keep(self.dir_name, files.base_offset, None, encode_row(row), json.dumps(out["resume"]))
        return row


def _resume(hit: tuple | None, location: dict) -> tuple[dict, dict] | None:
    """(where the last walk ended, the row then) of a segment that was active in the last run."""
    if hit is None or hit[2] is None:
        return None
    row = decode_row(hit[1], location)
    try:
        info = json.loads(hit[2])
    except (TypeError, ValueError):
        return None
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
    _rows: list[tuple] = field(default_factory=list)
    _writer: pq.ParquetWriter | None = None
    _tmp: Path | None = None

    @classmethod
    def open(cls, state_dir: str | os.PathLike, info: dict, depth: str) -> "LogDirState":
        """The state for the log dir ``info`` describes (the scanner's log-dir info row)."""
        log_dir = str(info["log_dir"])
        identity = {"format": STATE_FORMAT, "version": __version__, "columns": COLUMNS_DIGEST, "log_dir": log_dir,
                    "depth": depth,
                    "directory_id": str(info.get("directory_id")), "cluster_id": str(info.get("cluster_id")),
                    "broker_id": str(info.get("broker_id"))}
        state = cls(Path(state_dir) / state_file_name(log_dir, depth), identity)
        state._load()
        return state

    def _load(self) -> None:
        if not self.path.exists():  # the first run: nothing to say
            return
        try:
            # ParquetFile, not read_table: read_table imports pyarrow.dataset (9 MB of reads, a third
            # of a second), which a second run that reads almost nothing else would pay
            table = pq.ParquetFile(self.path).read()
            meta = {k.decode()[len(_META):]: v.decode() for k, v in (table.schema.metadata or {}).items()
                    if k.decode().startswith(_META)}
        except (OSError, pa.ArrowException, UnicodeDecodeError, ValueError) as exc:
            self.notes.append(f"{self.path}: scan state unreadable ({type(exc).__name__}: {exc}): ignored, "
                              "every segment is read")
            return
        for key, want in self.identity.items():
            if meta.get(key) != want:
                self.notes.append(f"{self.path}: scan state {key} = {meta.get(key)!r}, expected {want!r}: "
                                  "ignored, every segment is read")
                return
        if table.schema.remove_metadata() != STATE_SCHEMA:  # (the format in the metadata says the same)
            self.notes.append(f"{self.path}: scan state columns differ from this version's: ignored, "
                              "every segment is read")
            return
        columns = [table.column(name).to_pylist() for name in STATE_SCHEMA.names]
        for dir_name, base_offset, proof, row, resume in zip(*columns):
            self.by_dir.setdefault(dir_name, {})[base_offset] = (proof or None, row, resume or None)

    @property
    def continues(self) -> bool:
        """Active segments are continued where the last walk ended: headers depth only (see
        :mod:`auditor.scan.resume`; 'deep' columns need every record, 'index' reads little)."""
        return self.identity["depth"] == "headers"

    def partition(self, dir_name: str) -> PartitionState:
        return PartitionState(self, dir_name, self.by_dir.pop(dir_name, {}))

    def keep(self, dir_name: str, base_offset: int, proof: str | None, row_json: str,
             resume_json: str | None = None) -> None:
        self._rows.append((dir_name, base_offset, proof, row_json, resume_json))
        self.stored += 1
        if len(self._rows) >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
            schema = STATE_SCHEMA.with_metadata({f"{_META}{k}": v for k, v in self.identity.items()})
            self._writer = pq.ParquetWriter(self._tmp, schema, compression="zstd")
        if self._rows:
            dir_names, base_offsets, proofs, rows, resumes = zip(*self._rows)
            columns = [_strings(dir_names), pa.Array.from_buffers(pa.int64(), len(base_offsets),
                                                                  [None, pa.py_buffer(array("q", base_offsets))]),
                       _strings(proofs), _strings(rows), _strings(resumes)]
            self._writer.write_table(pa.Table.from_arrays(columns, schema=self._writer.schema))
            self._rows = []

    def commit(self) -> None:
        """Writes the new state (every closed segment seen this run) and renames it into place."""
        self._flush()
        self._writer.close()
        with open(self._tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(self._tmp, self.path)
        self._writer = None
        self.by_dir = {}

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)

    def summary(self) -> str:
        return (f"scan state {self.path.name}: {self.reused:,} closed segments taken from the state, "
                f"{self.continued:,} continued where the last run stopped ({self.skipped_bytes:,} bytes not "
                f"read again), {self.scanned:,} read whole, {self.stored:,} kept for the next run")
