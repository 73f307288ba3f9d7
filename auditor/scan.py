"""Log dirs to rows: one row per segment, one per partition directory. Pure Python, no Spark.

The scanner is strictly read-only: files are opened ``O_RDONLY`` (with ``O_NOATIME`` when
allowed), read with ``pread`` in bounded chunks (never mmap'd: a broker trimming an index
we had mapped would kill us with SIGBUS), symlinks are never followed, and nothing under a
log dir is ever created, locked, truncated or renamed.

Work grows with the depth asked for:

* ``stat``    names, sizes, mtimes: one ``lstat`` per file;
* ``index``   plus the first batch header, the index/timeindex tails (binary search over the
  preallocated zero tail) and the batches after the last offset-index entry: constant work
  per segment (about ``index.interval.bytes`` of reading);
* ``headers`` every batch header;
* ``deep``    every record: decompression, per-record timestamps, CRC.

Every oddity becomes a note naming the file, byte position, field and value; a file that
vanishes or cannot be read between listing and reading is a note, not a crash.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from auditor.formats import checkpoints, filenames
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader, _cwalk
from auditor.formats.compression import CODEC_NAMES
from auditor.formats.record_batch import CREATE_TIME, LOG_APPEND_TIME
from auditor.formats.offset_index import read_offset_index
from auditor.formats.time_index import read_time_index
from auditor.formats.txn_index import read_txn_index
from auditor.schema import DEPTHS, PARTITION_COLUMNS, SEGMENT_COLUMNS, empty_row

NO_TIMESTAMP = -1
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

OFFSET_CHECKPOINTS = {
    "high_watermark": "replication-offset-checkpoint",
    "recovery_point": "recovery-point-offset-checkpoint",
    "log_start_offset": "log-start-offset-checkpoint",
    "cleaner_offset": "cleaner-offset-checkpoint",
}


@dataclass
class Progress:
    """What a long scan has done so far; handed to the progress callback."""

    log_dirs_total: int = 0
    log_dirs_done: int = 0
    partitions_done: int = 0
    segments_done: int = 0
    bytes_done: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


@dataclass
class ScanResult:
    segments: list[dict]
    partitions: list[dict]
    log_dirs: list[dict]
    """One entry per log dir: path, broker and cluster ids, and problems met at that level."""


ProgressCallback = Callable[[Progress], None]


def _ms(st: os.stat_result) -> int:
    return st.st_mtime_ns // 1_000_000


def _ts(value: int) -> int | None:
    """Kafka's NO_TIMESTAMP (-1) is absence; keep every other value, even negative, as found."""
    return None if value == NO_TIMESTAMP else value


def _lstat(path: Path, notes: list[str], what: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        notes.append(f"{path}: {what} vanished between listing and reading (deleted or renamed by the broker)")
    except OSError as exc:
        notes.append(f"{path}: cannot stat {what}: {exc.strerror} (errno {exc.errno})")
    return None


def _list_dir(path: Path, notes: list[str]) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except FileNotFoundError:
        notes.append(f"{path}: directory vanished between listing and reading")
    except OSError as exc:
        notes.append(f"{path}: cannot list directory: {exc.strerror} (errno {exc.errno})")
    return []


def _symlink_note(entry: os.DirEntry, root: Path) -> str:
    try:
        target = os.path.realpath(entry.path)
    except OSError:
        target = "?"
    where = "inside" if target.startswith(str(root) + os.sep) else "OUTSIDE"
    return f"{entry.path}: symbolic link to {target} ({where} the log dir): not followed"


# ---------------------------------------------------------------------------------------
# One segment
# ---------------------------------------------------------------------------------------


@dataclass
class SegmentFiles:
    base_offset: int
    state: str | None
    paths: dict[str, str | Path] = field(default_factory=dict)
    """suffix (log, index, timeindex, txnindex) to path (plain strings from the listing: building
    a Path per file was a sixth of the 'index' depth's time)."""


def _count_markers(row: dict, reader: LogReader, batch, notes: list[str]) -> None:
    """Control batches hold one tiny record; reading it tells ABORT from COMMIT."""
    try:
        for record in reader.records(batch):
            if record.control_type == CONTROL_ABORT:
                row["abort_markers"] += 1
            elif record.control_type == CONTROL_COMMIT:
                row["commit_markers"] += 1
    except (FormatError, OSError) as exc:
        notes.append(f"control batch at byte {batch.position}: cannot read its record: {exc}")


def _deep_batch(row: dict, reader: LogReader, batch, notes: list[str], deep_state: dict) -> None:
    try:
        ok, stored, computed = reader.crc_ok(batch)
    except (FormatError, OSError) as exc:
        deep_state["unreadable"] += 1
        notes.append(f"{reader.label}: byte {batch.position}: crc not checked, batch unreadable: {exc}")
        return
    if not ok:
        row["crc_failures"] += 1
        if row["crc_failures"] <= 10:
            notes.append(
                f"{reader.label}: byte {batch.position}: crc = {stored:#010x}, expected {computed:#010x} "
                f"(batch {batch.base_offset}..{batch.last_offset}): corrupt batch"
            )
    try:
        count = 0
        for record in reader.records(batch):
            count += 1
            ts = _ts(record.timestamp_ms)
            if ts is not None:
                _fold_record_timestamp(row, deep_state, ts, record.offset)
            if batch.is_control:
                if record.control_type == CONTROL_ABORT:
                    row["abort_markers"] += 1
                elif record.control_type == CONTROL_COMMIT:
                    row["commit_markers"] += 1
        deep_state["records"] += count
    except (FormatError, OSError) as exc:
        deep_state["unreadable"] += 1
        notes.append(f"{reader.label}: byte {batch.position}: records unreadable: {exc}")


def _fold_record_timestamp(row: dict, deep_state: dict, ts: int, offset: int) -> None:
    """Min/max record timestamps with their offsets, and the largest step back in time."""
    if row["min_timestamp_ms"] is None or ts < row["min_timestamp_ms"]:
        row["min_timestamp_ms"] = ts
        row["min_timestamp_offset"] = offset
    running_max = deep_state["running_max_ms"]
    if running_max is None or ts > running_max:
        deep_state["running_max_ms"] = ts
        deep_state["running_max_offset"] = offset
    elif ts < running_max and running_max - ts > (row["max_backward_jump_ms"] or 0):
        row["max_backward_jump_ms"] = running_max - ts
        row["max_backward_jump_offset"] = offset


def scan_segment(
    files: SegmentFiles,
    depth: str,
    *,
    is_active: bool,
    location: dict,
    notes: list[str] | None = None,
) -> dict:
    """One segment's row. Never raises for bad input: problems become notes."""
    row = empty_row(SEGMENT_COLUMNS)
    row.update(location)
    row["base_offset"] = files.base_offset
    row["file_state"] = files.state
    row["is_active"] = is_active
    row["depth"] = depth
    row["scanned_at_ms"] = time.time_ns() // 1_000_000
    notes = [] if notes is None else notes

    if depth == "index" and USE_C_WALK and _index_ends_in_c(row, files, notes):
        row["notes"] = notes
        return row

    for suffix in ("log", "index", "timeindex", "txnindex"):
        path = files.paths.get(suffix)
        if path is None:
            continue
        st = _lstat(path, notes, f".{suffix} file")
        if st is None:
            files.paths.pop(suffix)
            continue
        if not stat.S_ISREG(st.st_mode):
            # a FIFO or device would block or misbehave on open; Kafka never writes one
            notes.append(f"{path}: not a regular file (mode {stat.filemode(st.st_mode)}): not read")
            files.paths.pop(suffix)
            continue
        row[f"{suffix}_size_bytes"] = st.st_size
        if suffix != "txnindex":
            row[f"{suffix}_mtime_ms"] = _ms(st)

    log_path = files.paths.get("log")
    if log_path is None:
        notes.append(f"segment {files.base_offset}: no .log file (only {sorted(files.paths) or 'nothing'})")
    if files.state is None and log_path is not None:
        for suffix in ("index", "timeindex"):
            if suffix not in files.paths:
                notes.append(f"{log_path}: no .{suffix} beside it (the broker rebuilds missing indexes on recovery)")
            elif suffix == "timeindex" and row["timeindex_size_bytes"] == 0 and row["log_size_bytes"]:
                # an empty .index is normal (no entry before index.interval.bytes of batches); the
                # broker writes the largest timestamp into .timeindex when a segment rolls
                notes.append(f"{files.paths[suffix]}: empty .{suffix} for a non-empty segment")

    if depth != "stat":
        _scan_indexes(row, files, depth, notes)
        if log_path is not None:
            _scan_log(row, files, log_path, depth, notes)
    row["notes"] = notes
    return row


#: What ``_cwalk.index_ends`` returns, in order (sizes and mtimes as lstat saw them).
INDEX_ENDS_FIELDS = (
    "log_size_bytes", "log_mtime_ns", "index_size_bytes", "index_mtime_ns", "timeindex_size_bytes",
    "timeindex_mtime_ns", "index_entries", "last_index_offset", "last_index_position", "timeindex_entries",
    "last_timeindex_timestamp_ms", "last_timeindex_offset", "first_offset", "first_batch_max_timestamp_ms",
    "last_offset", "last_batch_max_timestamp_ms", "max_timestamp_ms",
)


def _index_ends_in_c(row: dict, files: SegmentFiles, notes: list[str]) -> bool:
    """The 'index' depth of a plain segment (.log, .index and .timeindex, no .txnindex) in one C
    call; False, having set nothing, when the extension is missing or the segment needs a note
    (the C code hands every such case back, and the Python path writes the note)."""
    if _cwalk is None or files.state is not None or files.paths.keys() != {"log", "index", "timeindex"}:
        return False
    paths = files.paths
    facts = _cwalk.index_ends(paths["log"], paths["index"], paths["timeindex"], files.base_offset)
    if facts is None:
        return False
    found = dict(zip(INDEX_ENDS_FIELDS, facts))
    for suffix in ("log", "index", "timeindex"):
        found[f"{suffix}_mtime_ms"] = found.pop(f"{suffix}_mtime_ns") // 1_000_000
    row.update(found)
    row["trailing_bytes"] = 0
    _note_below_base_offset(row, files, paths["log"], notes)
    return True


def _note_below_base_offset(row: dict, files: SegmentFiles, log_path: Path, notes: list[str]) -> None:
    first, last = row["first_offset"], row["last_offset"]
    if first is not None and first < files.base_offset and last is not None and last < files.base_offset:
        notes.append(f"{log_path}: byte 0: last_offset = {last}, expected >= {files.base_offset} "
                     f"(the file name's base offset)")


def _scan_indexes(row: dict, files: SegmentFiles, depth: str, notes: list[str]) -> None:
    tail_only = depth == "index"
    readers = (("index", read_offset_index, "last_index_offset", "last_index_position"),
               ("timeindex", read_time_index, "last_timeindex_timestamp_ms", "last_timeindex_offset"))
    for suffix, read, first_col, second_col in readers:
        path = files.paths.get(suffix)
        if path is None:
            continue
        try:
            result = read(path, files.base_offset, tail_only=tail_only)
        except FileNotFoundError:
            notes.append(f"{path}: vanished between listing and reading")
            continue
        except (FormatError, OSError) as exc:
            notes.append(f"{path}: unreadable: {exc}")
            continue
        row[f"{suffix}_entries"] = result.entry_count
        notes.extend(result.problems)
        if result.entries:
            row[first_col], row[second_col] = result.entries[-1]
    txn_path = files.paths.get("txnindex")
    if txn_path is not None:
        try:
            txns = read_txn_index(txn_path)
            row["aborted_txns"] = len(txns)
            notes.extend(txns.problems)
        except (FormatError, OSError) as exc:
            notes.append(f"{txn_path}: unreadable: {exc}")


def _scan_log(row: dict, files: SegmentFiles, log_path: Path, depth: str, notes: list[str]) -> None:
    try:
        reader = LogReader(log_path)
    except FileNotFoundError:
        notes.append(f"{log_path}: vanished between listing and reading (deleted or renamed by the broker)")
        return
    except OSError as exc:
        notes.append(f"{log_path}: cannot open: {exc.strerror} (errno {exc.errno})")
        return
    try:
        if depth == "index":
            _scan_log_ends(row, reader, notes)
        else:
            _scan_log_all(row, reader, depth, notes)
    finally:
        reader.close()
    if reader.stop_reason is not None:
        row["stop_reason"] = reader.stop_reason
        note = reader.stop_detail or f"{log_path}: walk stopped at byte {reader.stop_position}: {reader.stop_reason}"
        if reader.stop_reason == "partial-tail":
            if row["is_active"]:
                note += " (the active segment is being appended to: expected, not corruption)"
            else:
                note += " (a closed segment must end on a batch boundary: truncation or corruption)"
        notes.append(note)
    _note_below_base_offset(row, files, log_path, notes)


def _scan_log_ends(row: dict, reader: LogReader, notes: list[str]) -> None:
    """'index' depth: the first batch, then only the batches after the last offset-index entry."""
    start = 0
    first = reader.batch_at(0)
    if first is None:
        for _ in reader.batches(0):  # yields nothing; sets why the walk cannot start (stop_*)
            pass
        row["trailing_bytes"] = reader.size_bytes - reader.stop_position
        return
    row["first_offset"] = first.base_offset
    row["first_batch_max_timestamp_ms"] = _ts(first.max_timestamp_ms)
    if row["last_index_position"] is not None:
        if row["last_index_position"] < reader.size_bytes:
            start = row["last_index_position"]
        else:
            notes.append(
                f"{reader.label}.index: last entry position = {row['last_index_position']}, "
                f"expected < {reader.size_bytes} (the .log size): index points past the log"
            )
    last = None
    max_ts = row["last_timeindex_timestamp_ms"]
    for batch in reader.batches(start):
        last = batch
        ts = _ts(batch.max_timestamp_ms)
        if ts is not None and (max_ts is None or ts > max_ts):
            max_ts = ts
    if last is not None:
        row["last_offset"] = last.last_offset
        row["last_batch_max_timestamp_ms"] = _ts(last.max_timestamp_ms)
    ts = _ts(first.max_timestamp_ms)
    if ts is not None and (max_ts is None or ts > max_ts):
        max_ts = ts
    row["max_timestamp_ms"] = max_ts
    row["trailing_bytes"] = reader.size_bytes - reader.stop_position


#: The C extension takes the common case of two depths when it is built: 'headers' folds
#: well-formed v2 batches, 'index' reads a plain segment's ends in one call. Tests turn this off
#: to prove both paths give the same rows (tests/test_c_walk.py).
USE_C_WALK = True


def _scan_log_all(row: dict, reader: LogReader, depth: str, notes: list[str]) -> None:
    """Every batch header folded into the row ('headers'), and every record at 'deep'.

    The per-batch fold keeps its totals in locals, not in the row dict: it runs once per batch
    (hundreds of thousands per segment) and dominated the headers depth's profile. At 'headers'
    the C fold (``LogReader.fold_v2_headers``) takes the well-formed v2 batches first; the
    Python loop continues from wherever it stopped (legacy entries, the tail, anything odd), so
    stop reasons and notes always come from the one Python walker.
    """
    for name in ("abort_markers", "commit_markers"):
        row[name] = 0
    deep = depth == "deep"
    deep_state = {"records": 0, "unreadable": 0, "running_max_ms": None, "running_max_offset": None}
    if deep:
        row["crc_failures"] = 0
    first_offset = first_max = last_offset = last_max = None
    batch_count = record_count = transactional = control = 0
    count_unknown = False
    max_ts = min_first_ts = None
    timestamp_types: set = set()
    magics: set = set()
    codecs: set = set()
    start = 0
    folded = reader.fold_v2_headers(0) if (USE_C_WALK and not deep) else None
    if folded is not None and folded["batch_count"]:
        start = folded["stop_position"]
        first_offset, first_max = folded["first_base_offset"], folded["first_max_timestamp_ms"]
        last_offset, last_max = folded["last_offset"], folded["last_max_timestamp_ms"]
        batch_count, record_count = folded["batch_count"], folded["record_count"]
        transactional = folded["transactional_batches"]
        max_ts, min_first_ts = folded["max_timestamp_ms"], folded["min_first_timestamp_ms"]
        magics.add(2)
        codecs.update(name for bit, name in enumerate(CODEC_NAMES) if folded["codec_mask"] >> bit & 1)
        timestamp_types.update(name for bit, name in enumerate((CREATE_TIME, LOG_APPEND_TIME))
                               if folded["timestamp_type_mask"] >> bit & 1)
        for position in folded["control_positions"]:
            control += 1
            batch = reader.batch_at(position)
            if batch is not None:
                _count_markers(row, reader, batch, notes)
    for batch in reader.batches(start):
        if first_offset is None:
            first_offset, first_max = batch.base_offset, batch.max_timestamp_ms
        last_offset, last_max = batch.last_offset, batch.max_timestamp_ms
        batch_count += 1
        count = batch.record_count
        if count is None:
            count_unknown = True
        else:
            record_count += count
        ts = batch.max_timestamp_ms
        if ts != NO_TIMESTAMP and (max_ts is None or ts > max_ts):
            max_ts = ts
        # the batch's first-record timestamp: an upper bound on its oldest record
        if batch.magic < 2:
            first_ts = batch.base_timestamp_ms
        elif batch.timestamp_type == LOG_APPEND_TIME:
            first_ts = ts
        elif batch.has_delete_horizon or count == 0:
            # baseTimestamp holds the delete horizon (KIP-534) or -1 (empty batch kept by compaction)
            first_ts = NO_TIMESTAMP
        else:
            first_ts = batch.base_timestamp_ms
        if first_ts != NO_TIMESTAMP and (min_first_ts is None or first_ts < min_first_ts):
            min_first_ts = first_ts
        timestamp_types.add(batch.timestamp_type)
        magics.add(batch.magic)
        codecs.add(batch.codec)
        if batch.is_transactional:
            transactional += 1
        if deep:
            _deep_batch(row, reader, batch, notes, deep_state)
        if batch.is_control:
            control += 1
            if not deep:
                _count_markers(row, reader, batch, notes)
    if first_offset is not None:
        row["first_offset"] = first_offset
        row["first_batch_max_timestamp_ms"] = _ts(first_max)
        row["last_offset"] = last_offset
        row["last_batch_max_timestamp_ms"] = _ts(last_max)
    row["max_timestamp_ms"] = max_ts
    row["min_batch_timestamp_ms"] = min_first_ts
    row["batch_count"] = batch_count
    row["transactional_batches"] = transactional
    row["control_batches"] = control
    if deep:
        row["max_timestamp_offset"] = deep_state["running_max_offset"]
        if deep_state["running_max_ms"] is not None and row["max_backward_jump_ms"] is None:
            row["max_backward_jump_ms"] = 0
    if deep and deep_state["unreadable"] == 0:
        row["record_count"] = deep_state["records"]
    else:
        row["record_count"] = None if count_unknown else record_count
    row["timestamp_types"] = sorted(t or "NoTimestampType" for t in timestamp_types)
    row["magics"] = sorted(magics)
    row["codecs"] = sorted(codecs)
    row["trailing_bytes"] = reader.size_bytes - reader.stop_position


# ---------------------------------------------------------------------------------------
# One partition directory
# ---------------------------------------------------------------------------------------


def _group_segments(entries: Iterable[os.DirEntry], root: Path, notes: list[str]) -> tuple[dict, int]:
    segments: dict[tuple[int, str | None], SegmentFiles] = {}
    snapshots = 0
    for entry in entries:
        if entry.is_symlink():
            notes.append(_symlink_note(entry, root))
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
) -> tuple[list[dict], dict]:
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
    entries = _list_dir(path, pnotes)
    segment_files, snapshots = _group_segments(entries, root, pnotes)

    live_offsets = [base for (base, state) in segment_files if state is None and "log" in segment_files[(base, state)].paths]
    active_base = max(live_offsets) if live_offsets else None
    rows = []
    for key in sorted(segment_files, key=lambda k: (k[0], k[1] or "")):
        files = segment_files[key]
        row = scan_segment(files, depth, is_active=(key[1] is None and key[0] == active_base), location=location)
        rows.append(row)
        if progress is not None:
            progress.segments_done += 1
            progress.bytes_done += row["log_size_bytes"] or 0
            if on_progress is not None:
                on_progress(progress)

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
    tp = (parsed.topic, parsed.partition)
    if parsed.kind == "live":
        for column, file_name in OFFSET_CHECKPOINTS.items():
            value = checkpoints_by_tp.get(file_name, {}).get(tp)
            if value is not None:
                prow[column] = value
    if prow["log_start_offset"] is not None:
        prow["log_start_offset_source"] = "checkpoint"
    elif live_rows:
        prow["log_start_offset"] = live_rows[0]["base_offset"]
        prow["log_start_offset_source"] = "first-segment"

    _read_partition_files(path, prow, pnotes)
    prow["notes"] = pnotes
    return rows, prow


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


# ---------------------------------------------------------------------------------------
# One log dir, many log dirs
# ---------------------------------------------------------------------------------------


def _read_log_dir_header(root: Path, problems: list[str]) -> tuple[dict, dict]:
    info = {"log_dir": str(root), "broker_id": None, "cluster_id": None, "directory_id": None}
    meta = root / "meta.properties"
    if os.path.lexists(meta):
        try:
            props = checkpoints.read_meta_properties(meta)
            broker = props.get("node.id", props.get("broker.id"))
            info["broker_id"] = int(broker) if broker is not None else None
            info["cluster_id"] = props.get("cluster.id")
            info["directory_id"] = props.get("directory.id")
        except (FormatError, OSError, ValueError) as exc:
            problems.append(f"{meta}: unreadable: {exc}")
    else:
        problems.append(f"{meta}: missing: broker id unknown (a log dir that never started a broker, or not a log dir)")
    by_tp: dict[str, dict] = {}
    for file_name in OFFSET_CHECKPOINTS.values():
        cp = root / file_name
        if not os.path.lexists(cp):
            continue
        try:
            by_tp[file_name] = checkpoints.read_offset_checkpoint(cp)
        except (FormatError, OSError) as exc:
            problems.append(f"{cp}: unreadable: {exc}")
    return info, by_tp


@dataclass
class LogDirPlan:
    """A log dir's listing: its identity, its checkpoints and its partition directories.

    ``info`` is the log-dir row (log_dir, broker_id, cluster_id, directory_id, partition_dirs,
    problems); nothing under a partition directory has been read yet.
    """

    root: Path
    info: dict
    checkpoints_by_tp: dict
    partition_dirs: list[Path]


def plan_log_dir(log_dir: str | os.PathLike) -> LogDirPlan:
    """Lists one log dir (meta.properties, offset checkpoints, partition directory names).

    Shared by the in-process scan and the Spark job's driver, so both see the same problems.
    """
    root = Path(os.path.abspath(log_dir))
    problems: list[str] = []
    if not root.is_dir():
        problems.append(f"{root}: not a directory")
        info = {"log_dir": str(root), "broker_id": None, "cluster_id": None, "directory_id": None,
                "partition_dirs": 0, "problems": problems}
        return LogDirPlan(root, info, {}, [])
    info, by_tp = _read_log_dir_header(root, problems)
    partition_dirs: list[Path] = []
    for entry in _list_dir(root, problems):
        if entry.is_symlink():
            problems.append(_symlink_note(entry, root))
            continue
        if entry.is_dir(follow_symlinks=False):
            if filenames.parse_partition_dir(entry.name) is None:
                problems.append(f"{entry.path}: directory is not a Kafka partition directory (left alone)")
                continue
            partition_dirs.append(Path(entry.path))
        elif entry.name not in filenames.LOG_DIR_FILES:
            problems.append(f"{entry.path}: unknown file in the log dir (left alone)")
    if not partition_dirs and info["broker_id"] is None:
        problems.append(f"{root}: not a Kafka log dir (no meta.properties and no partition directories)")
    info["partition_dirs"] = len(partition_dirs)
    info["problems"] = problems
    return LogDirPlan(root, info, by_tp, partition_dirs)


def iter_log_dir(
    log_dir: str | os.PathLike,
    depth: str = "index",
    *,
    progress: Progress | None = None,
    on_progress: ProgressCallback | None = None,
) -> Iterator[tuple[list[dict], dict | None, dict | None]]:
    """Yields (segment rows, partition row) per partition directory, then (\u2205, None, log-dir info).

    Streaming keeps memory proportional to one partition, whatever the log dir holds.
    """
    if depth not in DEPTHS:
        raise ValueError(f"depth = {depth!r}, expected one of {', '.join(DEPTHS)}")
    plan = plan_log_dir(log_dir)
    for path in plan.partition_dirs:
        rows, prow = scan_partition_dir(
            path, depth, log_dir_info=plan.info, checkpoints_by_tp=plan.checkpoints_by_tp, root=plan.root,
            progress=progress, on_progress=on_progress,
        )
        if progress is not None:
            progress.partitions_done += 1
        yield rows, prow, None
    if progress is not None:
        progress.log_dirs_done += 1
        if on_progress is not None:
            on_progress(progress)
    yield [], None, plan.info


def scan_log_dirs(
    log_dirs: Iterable[str | os.PathLike],
    depth: str = "index",
    *,
    on_progress: ProgressCallback | None = None,
) -> ScanResult:
    log_dirs = list(log_dirs)
    progress = Progress(log_dirs_total=len(log_dirs))
    segments: list[dict] = []
    partitions: list[dict] = []
    infos: list[dict] = []
    for log_dir in log_dirs:
        for rows, prow, info in iter_log_dir(log_dir, depth, progress=progress, on_progress=on_progress):
            segments.extend(rows)
            if prow is not None:
                partitions.append(prow)
            if info is not None:
                infos.append(info)
    return ScanResult(segments, partitions, infos)


