"""One partition directory to its segment rows and its partition row (pure Python, no Spark).

Shared by the in-process scan, ``collect`` on brokers, the Spark job's executors and
``replay-check``: each hands in the log dir's identity and checkpoints it read once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.formats import checkpoints, filenames
from auditor.formats.errors import FormatError
from auditor.scan.files import list_dir, symlink_note
from auditor.scan.partition_files import PARTITION_FILES, read_with_state
from auditor.scan.progress import Progress, ProgressCallback
from auditor.scan.segment import SegmentFiles, scan_segment
from auditor.scan.state import PartitionState
from auditor.schema import PARTITION_COLUMNS, empty_row

if TYPE_CHECKING:  # the scanner imports pagecache (ctypes, libc) only when a scan asks for page-cache care
    from auditor.scan.pagecache import PageCacheCare, ReadRate

OFFSET_CHECKPOINTS = {
    "high_watermark": "replication-offset-checkpoint",
    "recovery_point": "recovery-point-offset-checkpoint",
    "log_start_offset": "log-start-offset-checkpoint",
    "cleaner_offset": "cleaner-offset-checkpoint",
}
"""Partition-row column to the log-dir checkpoint file holding it."""



def _group_segments(entries: Iterable[os.DirEntry], root: Path, notes: list[str]) -> tuple[dict, int]:
    segments: dict[tuple[int, str | None], SegmentFiles] = {}
    snapshots = 0
    for entry in entries:
        if entry.is_symlink():
            notes.append(symlink_note(entry, root))
            continue
        parsed = filenames.parse_segment_file(entry.name)
        if parsed is None:
            if entry.name not in filenames.PARTITION_DIR_FILES and filenames.parse_metadata_snapshot(entry.name) is None:
                notes.append(f"{entry.path}: unknown file in a partition directory (left alone)")
            continue
        if parsed.suffix == "snapshot":
            snapshots += 1
            continue
        key = (parsed.base_offset, parsed.state)
        segments.setdefault(key, SegmentFiles(parsed.base_offset, parsed.state)).paths[parsed.suffix] = entry.path
    return segments, snapshots


def scan_partition_dir(
    path: Path,
    depth: str,
    *,
    log_dir_info: dict,
    checkpoints_by_tp: dict,
    root: Path,
    progress: Progress | None = None,
    on_progress: ProgressCallback | None = None,
    state: PartitionState | None = None,
    care: PageCacheCare | None = None,
    rate: ReadRate | None = None,
    indexes: bool = True,
) -> tuple[list[dict], dict]:
    """The partition dir's segment rows and its partition row. With ``state`` (incremental scans) an
    unchanged closed segment's row comes from it; with ``care`` the pages the scan brings into the page
    cache are dropped after each segment; with ``rate`` reads are paced (see auditor.scan.state and
    auditor.scan.pagecache). ``indexes=False`` (without ``state``): the segments' index files are not
    read (:func:`auditor.scan.segment.scan_segment`)."""
    parsed = filenames.parse_partition_dir(path.name)
    location = {
        "broker_id": log_dir_info["broker_id"],
        "cluster_id": log_dir_info["cluster_id"],
        "log_dir": log_dir_info["log_dir"],
        "topic": parsed.topic,
        "partition": parsed.partition,
        "dir_kind": parsed.kind,
        "dir_name": path.name,
    }
    pnotes: list[str] = []
    entries = list_dir(path, pnotes)
    segment_files, snapshots = _group_segments(entries, root, pnotes)

    live_offsets = [base for (base, state) in segment_files if state is None and "log" in segment_files[(base, state)].paths]
    active_base = max(live_offsets) if live_offsets else None
    rows = []
    for key in sorted(segment_files, key=lambda k: (k[0], k[1] or "")):
        files = segment_files[key]
        row = _segment_row(files, depth, key[1] is None and key[0] == active_base, location, state, care, indexes)
        if rate is not None:
            rate.pace()
        rows.append(row)
        if progress is not None:
            progress.segments_done += 1
            progress.bytes_done += row["log_size_bytes"] or 0
            if on_progress is not None:
                on_progress(progress)

    prow = _partition_row(rows, location, depth, snapshots, checkpoints_by_tp)
    def read() -> None:
        if care is None:
            _read_partition_files(path, prow, pnotes)
        else:
            care.around([path / name for name in PARTITION_FILES], lambda: _read_partition_files(path, prow, pnotes))
    if state is None:
        read()
    else:  # taken from the state when unchanged (auditor.scan.partition_files)
        read_with_state(state, path, prow, pnotes, read)
    prow["notes"] = pnotes
    return rows, prow


def _partition_row(rows: list[dict], location: dict, depth: str, snapshots: int, checkpoints_by_tp: dict) -> dict:
    """The partition row from its segment rows and the log dir's checkpoints."""
    prow = empty_row(PARTITION_COLUMNS)
    prow.update(location)
    prow["depth"] = depth
    prow["producer_snapshots"] = snapshots
    live_rows = [r for r in rows if r["file_state"] is None and r["log_size_bytes"] is not None]
    prow["segment_count"] = len(live_rows)
    prow["size_bytes"] = sum(r["log_size_bytes"] for r in live_rows)
    mtimes = [r["log_mtime_ms"] for r in live_rows if r["log_mtime_ms"] is not None]
    if mtimes:
        prow["oldest_log_mtime_ms"], prow["newest_log_mtime_ms"] = min(mtimes), max(mtimes)
    if live_rows and live_rows[-1]["last_offset"] is not None:
        prow["log_end_offset"] = live_rows[-1]["last_offset"] + 1

    # Checkpoints name the live directory's partition only; a -future/-delete/-stray copy has its own state.
    tp = (location["topic"], location["partition"])
    if location["dir_kind"] == "live":
        for column, file_name in OFFSET_CHECKPOINTS.items():
            value = checkpoints_by_tp.get(file_name, {}).get(tp)
            if value is not None:
                prow[column] = value
    if prow["log_start_offset"] is not None:
        prow["log_start_offset_source"] = "checkpoint"
    elif live_rows:
        prow["log_start_offset"] = live_rows[0]["base_offset"]
        prow["log_start_offset_source"] = "first-segment"
    return prow


def _segment_row(files: SegmentFiles, depth: str, is_active: bool, location: dict, state: PartitionState | None,
                 care: PageCacheCare | None, indexes: bool = True) -> dict:
    paths = list(files.paths.values())

    def scan(resume: tuple | None = None, out: dict | None = None) -> dict:
        def one() -> dict:
            return scan_segment(files, depth, is_active=is_active, location=location, resume=resume, resume_out=out,
                                indexes=indexes)
        return one() if care is None else care.around(paths, one)

    return scan() if state is None else state.row(files, is_active, scan, location, care)


def _read_partition_files(path: Path, prow: dict, notes: list[str]) -> None:
    epoch_path = path / "leader-epoch-checkpoint"
    if os.path.lexists(epoch_path):
        try:
            epochs = checkpoints.read_leader_epoch_checkpoint(epoch_path)
            prow["leader_epochs"] = [{"epoch": e, "start_offset": o} for e, o in epochs]
            if epochs:
                prow["latest_leader_epoch"] = epochs[-1][0]
        except (FormatError, OSError) as exc:
            notes.append(f"{epoch_path}: unreadable: {exc}")
    meta_path = path / "partition.metadata"
    if os.path.lexists(meta_path):
        try:
            prow["topic_id"] = checkpoints.read_partition_metadata(meta_path).get("topic_id")
        except (FormatError, OSError) as exc:
            notes.append(f"{meta_path}: unreadable: {exc}")
