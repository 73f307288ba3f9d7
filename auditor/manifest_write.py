"""Writing a manifest directory so that no reader trusts half of one (docs/write-faults.md).

A manifest is several files (auditor.manifest); each is renamed into place whole
(:mod:`auditor.atomic`), but a collect killed between two of them leaves some new files beside
old ones, or some missing. So since format 3 a collect removes :data:`COMPLETE_FILE` before it
touches any file (:func:`start_manifest`) and writes it after the last (:func:`finish_manifest`):
its presence, naming exactly the files the directory holds, says one collect wrote them all and
finished. It also lists each file's size and CRC-32, for checking copies
(``manifest_completeness(..., verify_bytes=True)``). docs/write-faults.md.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

from typing import TYPE_CHECKING

from auditor import __version__
from auditor.atomic import OutputError, atomic_open, atomic_write, fsync_dir, publish, remove_stale_temps, temp_path

if TYPE_CHECKING:  # pyarrow is imported where a table is written or read (broker commands' --help stay light)
    import pyarrow as pa

SEGMENTS_FILE = "segments.parquet"
PARTITIONS_FILE = "partitions.parquet"
LOG_DIRS_FILE = "log_dirs.parquet"
CLUSTER_METADATA_FILE = "cluster_metadata.jsonl.gz"
REMOTE_LOG_METADATA_FILE = "remote_log_metadata.jsonl.gz"
CONSUMER_GROUPS_FILE = "consumer_groups.jsonl.gz"
COMPLETE_FILE = "_complete.json"
"""Written last (format 3 on): ``{"format": COMPLETE_FORMAT, "manifest_format": 3, "files": {name:
{"bytes": n, "crc32": "8 hex digits"}}, ...}``. Its absence or a file that does not match it means
the collect that wrote the directory did not finish."""
COMPLETE_FORMAT = "kafka-audit.manifest-complete"
MANIFEST_FORMAT = 4
"""4: LOG_DIRS_FILE carries the filesystem under each log dir (``auditor.scan.filesystem.FS_FIELDS``;
an older manifest reads as "capacity unknown"); 3: ends with COMPLETE_FILE; 2: may carry CLUSTER_METADATA_FILE / REMOTE_LOG_METADATA_FILE /
CONSUMER_GROUPS_FILE (1: the three Parquet files only)."""
MANIFEST_FILES = (SEGMENTS_FILE, PARTITIONS_FILE, LOG_DIRS_FILE, CLUSTER_METADATA_FILE, REMOTE_LOG_METADATA_FILE,
                  CONSUMER_GROUPS_FILE, COMPLETE_FILE)
"""Every file collect writes (and so the only temporary names it cleans up after a killed run)."""
FLUSH_ROWS = 8192
"""A ParquetSink writes its rows every this many (bounded memory, whatever the broker holds)."""


class IncompleteManifest(FileNotFoundError):
    """A manifest directory a collect did not finish (killed, full disk...): never read as complete."""


def start_manifest(out_dir: Path) -> None:
    """Creates ``out_dir`` if needed; removes its completion marker first (from here until the new one
    is written the directory reads as incomplete) and the temporary files of collects killed before."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / COMPLETE_FILE).unlink(missing_ok=True)
    except OSError as exc:
        raise OutputError(out_dir / COMPLETE_FILE if out_dir.is_dir() else out_dir, exc) from exc
    fsync_dir(out_dir)
    remove_stale_temps(out_dir, set(MANIFEST_FILES))


def file_crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def finish_manifest(out_dir: Path, started_ms: int, depth: str) -> None:
    """Writes COMPLETE_FILE: the size and CRC-32 of every file of the manifest, last."""
    files = {}
    for name in MANIFEST_FILES[:-1]:
        path = out_dir / name
        if path.is_file():
            files[name] = {"bytes": path.stat().st_size, "crc32": f"{file_crc32(path):08x}"}
    marker = {"format": COMPLETE_FORMAT, "manifest_format": MANIFEST_FORMAT, "tool_version": __version__,
              "collected_at_ms": started_ms, "depth": depth, "files": files}
    atomic_write(out_dir / COMPLETE_FILE, json.dumps(marker, sort_keys=True) + "\n")


def manifest_completeness(path: str | os.PathLike, verify_bytes: bool = False) -> str | None:
    """None when the local manifest directory ``path`` is complete, else why not (one line).

    Complete: COMPLETE_FILE is there and lists exactly the manifest files the directory holds
    (collect removes it before touching any file and writes it after the last: its presence says
    that collect finished, and nothing was written since). ``verify_bytes``: each file also has
    the size and CRC-32 the marker lists (reads every byte: for checking copies; a reader need
    not, and a cluster part damaged later is a note where it is read, docs/manifests.md). A
    manifest of format 1 or 2 (no marker: older collects) is taken as before when its
    segments.parquet says so; one of format 3 without the marker is what a killed or failed
    collect leaves."""
    p = Path(path)
    try:
        marker = json.loads((p / COMPLETE_FILE).read_bytes())
    except FileNotFoundError:
        try:
            import pyarrow.parquet as pq

            meta = pq.read_schema(p / SEGMENTS_FILE).metadata or {}
            fmt = int(meta.get(b"kafka_audit.manifest_format", b"1"))
        except (OSError, ValueError) as exc:
            return f"{SEGMENTS_FILE} unreadable ({exc})"
        if fmt < 3:
            return None
        return f"no {COMPLETE_FILE}: the collect that wrote it did not finish (killed, or it failed)"
    except (OSError, ValueError) as exc:
        return f"{COMPLETE_FILE} unreadable ({type(exc).__name__}: {exc})"
    files = marker.get("files") if isinstance(marker, dict) and marker.get("format") == COMPLETE_FORMAT else None
    if not isinstance(files, dict):
        return f"{COMPLETE_FILE} is not a manifest completion marker"
    for name in MANIFEST_FILES[:-1]:
        present = (p / name).is_file()
        if name not in files:
            if present:
                return f"{name} is not in {COMPLETE_FILE}: written by a collect that did not finish"
            continue
        if not present:
            return f"{name} is listed in {COMPLETE_FILE} but missing"
        if not verify_bytes:
            continue
        want = files[name]
        size = (p / name).stat().st_size
        if size != want.get("bytes") or f"{file_crc32(p / name):08x}" != want.get("crc32"):
            return (f"{name} is not the file {COMPLETE_FILE} describes ({size} bytes, expected "
                    f"{want.get('bytes')}, or another CRC-32)")
    return None


def check_manifest_complete(path: str | os.PathLike, verify_bytes: bool = False) -> None:
    """IncompleteManifest naming ``path`` and why, unless it is complete (:func:`manifest_completeness`)."""
    why = manifest_completeness(path, verify_bytes)
    if why is not None:
        raise IncompleteManifest(f"manifest {path} is incomplete: {why}; run collect again")


class ParquetSink:
    """A Parquet file written batch by batch under a temporary name, renamed on close."""

    def __init__(self, path: Path, schema: "pa.Schema"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.from_rows = pa.Table.from_pylist
        self.path = path
        self.tmp = temp_path(path)
        self.schema = schema
        try:
            self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        except OSError as exc:
            self.tmp.unlink(missing_ok=True)
            raise OutputError(path, exc) from exc
        self.rows: list[dict] = []
        self.count = 0

    def add(self, rows: list[dict]) -> None:
        self.rows.extend(rows)
        self.count += len(rows)
        if len(self.rows) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            try:
                self.writer.write_table(self.from_rows(self.rows, schema=self.schema))
            except OSError as exc:
                raise OutputError(self.path, exc) from exc
            self.rows = []

    def close(self) -> None:
        self.flush()
        try:
            self.writer.close()
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise OutputError(self.path, exc) from exc
        publish(self.tmp, self.path)

    def abort(self) -> None:
        """Drops the temporary file, whatever state the writer is in (a full disk fails its close too)."""
        try:
            self.writer.close()
        except OSError:
            self.writer.is_open = False  # (else pyarrow's __del__ closes it again and reports the same error)
        finally:
            self.tmp.unlink(missing_ok=True)


def write_part(path: Path, write, what) -> int:
    """One cluster part, whole or not at all (:func:`auditor.atomic.atomic_open`); lines written."""
    with atomic_open(path) as out:
        lines = write(what, out)
    return lines
