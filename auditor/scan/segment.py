"""One segment's files to its row: the per-segment part of the scanner (pure Python, no Spark).

Work grows with the depth asked for (see :mod:`auditor.scan`): ``stat`` one ``lstat`` per file,
``index`` constant work per segment (the C walker when built), ``headers`` every batch header,
``deep`` every record. Never raises for bad input: problems become notes.
"""
# long module: one segment at every depth (stat, index, headers, deep and its C hand-off) shares the row and
# deep-state dicts; split, each part would take both and the module boundary would cut one fold in two

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from auditor.formats.compression import CODEC_NAMES
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader, c_index_ends
from auditor.formats.offset_index import read_offset_index
from auditor.formats.record_batch import (CONTROL_ABORT, CONTROL_COMMIT, CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP,
                                          refused_record_error)
from auditor.formats.time_index import read_time_index
from auditor.formats.txn_index import read_txn_index
from auditor.scan.files import lstat_or_note
from auditor.scan.resume import (INDEX_COLUMNS, indexes_unchanged, record_end, same_index_files, took_quiet_walk,
                                 verified_end)
from auditor.schema import SEGMENT_COLUMNS, empty_row


def _ms(st: os.stat_result) -> int:
    return st.st_mtime_ns // 1_000_000


def _ts(value: int) -> int | None:
    """Kafka's NO_TIMESTAMP (-1) is absence; keep every other value, even negative, as found."""
    return None if value == NO_TIMESTAMP else value


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
        if USE_C_RECORDS and _deep_records_in_c(row, reader, batch, deep_state):
            return
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


#: The 'deep' record fold in C when built (tests and the fuzz harness turn it off to compare).
USE_C_RECORDS = True
#: The fold state _deep_batch keeps across batches: (dict, key) of each field of _cwalk.fold_records'.
_FOLD_STATE = (("row", "min_timestamp_ms"), ("row", "min_timestamp_offset"), ("deep", "running_max_ms"),
               ("deep", "running_max_offset"), ("row", "max_backward_jump_ms"), ("row", "max_backward_jump_offset"))


def _deep_records_in_c(row: dict, reader: LogReader, batch, deep_state: dict) -> bool:
    """One batch's records folded in C (LogReader.fold_record_times); False when the Python loop must
    read them (nothing changed then). Decompression errors and the cap raise FormatError, as the
    Python loop's would, before any record (a batch at the 256 MiB cap: 38 million 7-byte records,
    minutes through Python Record objects, a fraction of a second here). At a record the Python loop
    raises for, the fold stops: its state is the loop's at that record, and the loop's FormatError
    is raised, found by reading that record alone (its last record broken, such a batch took the
    Python loop 263 s to read again: issue 24)."""
    where = {"row": row, "deep": deep_state}
    done = reader.fold_record_times(batch, tuple(where[d][k] for d, k in _FOLD_STATE))
    if done is None:
        return False
    fold, refused = done
    error = None
    if refused is not None:
        error = refused_record_error(batch, refused, label=reader.label)
        if error is None:
            return False   # the C fold refused a record Python reads (never seen): Python reads the batch
    for (d, k), value in zip(_FOLD_STATE, fold):
        where[d][k] = value
    records, aborts, commits = fold[len(_FOLD_STATE):]
    if batch.is_control:
        row["abort_markers"] += aborts
        row["commit_markers"] += commits
    if error is not None:
        try:
            raise error   # the records before it folded, not counted: as the Python loop leaves them
        finally:
            del error   # (else error -> its traceback -> this frame -> error: a cycle holding the batch)
    deep_state["records"] += records
    return True


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
    resume: tuple[dict, dict] | None = None,
    resume_out: dict | None = None, indexes: bool = True,
) -> dict:
    """One segment's row. Never raises for bad input: problems become notes.

    ``resume`` (headers depth, :mod:`auditor.scan.resume`): where the last run's walk of this
    segment stopped and its row then; the walk continues there when the segment verifies (else
    it reads the whole segment); ``resume_out`` gets where this walk stopped, for the next run.
    ``indexes=False`` (headers, deep): no index file read nor stat-ed (their columns None, no note of theirs)."""
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

    inodes = _stat_files(row, files, notes, ("log", "index", "timeindex", "txnindex") if indexes else ("log",))

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
        _scan_contents(row, files, log_path, depth, notes, resume, resume_out, inodes, indexes)
    row["notes"] = notes
    return row


def _scan_contents(row: dict, files: SegmentFiles, log_path, depth: str, notes: list[str],
                   resume: tuple[dict, dict] | None, resume_out: dict | None, stats: dict, indexes: bool) -> None:
    """The indexes and the .log (depth 'index' and on). With ``resume`` (auditor.scan.resume) the
    .log is walked from where the last run's walk ended, and indexes unchanged since that run, beside
    a .log that did not grow, are read at their ends only (equal to the last run's: else read whole)."""
    if resume is not None and not same_index_files(resume[0], stats):
        resume = None  # an index rebuilt (recovery): the whole segment is read again
    if (indexes or depth == "index") and (resume is None or not _indexes_as_before(row, files, resume, stats, notes)):
        _scan_indexes(row, files, depth, notes)
    if log_path is not None:
        _scan_log(row, files, log_path, depth, notes, resume, resume_out, stats)


def _indexes_as_before(row: dict, files: SegmentFiles, resume: tuple[dict, dict], stats: dict,
                       notes: list[str]) -> bool:
    """True with the index columns set when the .log has not grown since the last run, the index
    files have the inode, size and mtime they had then, and their last entries and entry counts
    (O(log n) reads, as the 'index' depth) are the last run's; False having set nothing otherwise."""
    info, old = resume
    if row["log_size_bytes"] != info.get("end") or not indexes_unchanged(info, stats):
        return False
    paths = files.paths
    if USE_C_WALK and paths.keys() == {"log", "index", "timeindex"}:  # the index depth's one C call
        facts = c_index_ends(paths["log"], paths["index"], paths["timeindex"], files.base_offset)
        if facts is not None:
            found = dict(zip(INDEX_ENDS_FIELDS, facts))
            values = {column: found.get(column) for column in INDEX_COLUMNS}  # no .txnindex: aborted_txns None
            if values != {column: old[column] for column in INDEX_COLUMNS}:
                return False
            row.update(values)
            return True
    mark = len(notes)
    _scan_indexes(row, files, "index", notes)
    if len(notes) == mark and all(row[c] == old[c] for c in INDEX_COLUMNS):
        return True
    del notes[mark:]
    for column in INDEX_COLUMNS:
        row[column] = None
    return False


def _stat_files(row: dict, files: SegmentFiles, notes: list[str], suffixes: tuple) -> dict[str, tuple[int, int]]:
    """Sizes and mtimes of the segment's files into the row (a file that cannot be read is dropped
    from ``files.paths`` with a note); returns each file's (device, inode, size, mtime ns)."""
    inodes: dict[str, tuple[int, int, int, int]] = {}
    for suffix in suffixes:
        path = files.paths.get(suffix)
        if path is None:
            continue
        st = lstat_or_note(path, notes, f".{suffix} file")
        if st is None:
            files.paths.pop(suffix)
            continue
        if not stat.S_ISREG(st.st_mode):
            # a FIFO or device would block or misbehave on open; Kafka never writes one
            notes.append(f"{path}: not a regular file (mode {stat.filemode(st.st_mode)}): not read")
            files.paths.pop(suffix)
            continue
        row[f"{suffix}_size_bytes"] = st.st_size
        inodes[suffix] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if suffix != "txnindex":
            row[f"{suffix}_mtime_ms"] = _ms(st)
    return inodes


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
    if files.state is not None or files.paths.keys() != {"log", "index", "timeindex"}:
        return False
    paths = files.paths
    facts = c_index_ends(paths["log"], paths["index"], paths["timeindex"], files.base_offset)
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


def _scan_log(row: dict, files: SegmentFiles, log_path: Path, depth: str, notes: list[str],
              resume: tuple[dict, dict] | None = None, resume_out: dict | None = None,
              inodes: dict | None = None) -> None:
    if resume is not None and depth == "headers" and took_quiet_walk(row, log_path, resume, resume_out, inodes or {}):
        _note_below_base_offset(row, files, log_path, notes)
        return
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
            start = verified_end(reader, resume[0]) if resume is not None and depth == "headers" else None
            last = _scan_log_all(row, reader, depth, notes, resume[1] if start is not None else None, start or 0)
            if last is None and start is not None:
                last = resume[0]["pos"]  # nothing appended: the last batch is the one verified
            if resume_out is not None:
                if start is not None:
                    resume_out["continued_from"] = start
                if depth == "headers":
                    known = resume[0] if start is not None and last == resume[0]["pos"] else None
                    record_end(row, reader, last, inodes or {}, resume_out, known)
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


# long function: the Python walker's per-batch fold (the C walker's fallback and the 'deep' path); its
# totals stay in locals because it runs once per batch, and a call per batch cost a measurable share
# of the 'headers' depth (benchmarks/README.md)
def _scan_log_all(row: dict, reader: LogReader, depth: str, notes: list[str], seed: dict | None = None,
                  start: int = 0) -> int | None:
    """Every batch header folded into the row ('headers'), and every record at 'deep'; returns the
    last batch's position (None when there is none).

    With ``seed`` (the row of the last run, whose walk ended at byte ``start``: see
    :mod:`auditor.scan.resume`) the totals start from that row's and only the batches from
    ``start`` on are walked: a row equal to a walk from byte 0.

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
    first_offset = first_max = last_offset = last_max = last_pos = None
    batch_count = record_count = transactional = control = 0
    count_unknown = False
    max_ts = min_first_ts = None
    timestamp_types: set = set()
    magics: set = set()
    codecs: set = set()
    if seed is not None:  # the last run's totals (a clean v2-only walk: see auditor.scan.resume)
        first_offset, last_offset = seed["first_offset"], seed["last_offset"]
        first_max, last_max = _raw_ts(seed["first_batch_max_timestamp_ms"]), _raw_ts(seed["last_batch_max_timestamp_ms"])
        batch_count, record_count, transactional = seed["batch_count"], seed["record_count"], seed["transactional_batches"]
        control, max_ts, min_first_ts = seed["control_batches"], seed["max_timestamp_ms"], seed["min_batch_timestamp_ms"]
        row["abort_markers"], row["commit_markers"] = seed["abort_markers"], seed["commit_markers"]
        timestamp_types, magics, codecs = set(seed["timestamp_types"]), set(seed["magics"]), set(seed["codecs"])
    folded = reader.fold_v2_headers(start) if (USE_C_WALK and not deep) else None
    if folded is not None and folded["batch_count"]:
        start = folded["stop_position"]
        if first_offset is None:
            first_offset, first_max = folded["first_base_offset"], folded["first_max_timestamp_ms"]
        last_offset, last_max = folded["last_offset"], folded["last_max_timestamp_ms"]
        last_pos = folded["last_position"]
        batch_count += folded["batch_count"]
        record_count += folded["record_count"]
        transactional += folded["transactional_batches"]
        ts = folded["max_timestamp_ms"]
        if ts is not None and (max_ts is None or ts > max_ts):
            max_ts = ts
        ts = folded["min_first_timestamp_ms"]
        if ts is not None and (min_first_ts is None or ts < min_first_ts):
            min_first_ts = ts
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
        last_offset, last_max, last_pos = batch.last_offset, batch.max_timestamp_ms, batch.position
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
    return last_pos


def _raw_ts(value: int | None) -> int:
    """The inverse of :func:`_ts`: a row's absent timestamp is Kafka's NO_TIMESTAMP in the fold."""
    return NO_TIMESTAMP if value is None else value

