"""One partition directory's records to its key summary (:class:`~auditor.keys.sketches.KeyStats`).

Two modes:

* **all** (``sample_bytes=None``): every record of every segment, oldest first;
* **sampled** (``sample_bytes=N``): only the newest N bytes of the partition's .log files,
  newest segment first, from the batch that holds the N-th newest byte (found through the
  segment's .index, else by walking batch headers from byte 0): at least N bytes (or the whole
  partition), at most N plus one batch. The result says how many .log bytes the sample covered
  and of how many.

Read-only like every scan (:class:`~auditor.formats.log_reader.LogReader`: ``O_RDONLY``,
``pread``, bounded memory). This is a separate walk from the segment scan, so the segment
scan's C fold (``_cwalk``) keeps its speed for scans that do not ask for keys. Bad input never
stops it: a batch whose records cannot be read is counted and noted (the rest still counted), a
walk that stops early (cut or corrupt tail) is noted with the file and byte position.

Control batches are skipped (their keys are Kafka's, not the producers'); magic 0/1 entries are
counted as records whose key was not read (``legacy_records``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from auditor.formats import filenames
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.formats.offset_index import read_offset_index
from auditor.keys.sketches import KeyStats

MIB = 1 << 20
#: At most this many notes per partition (the count of further problems is kept).
MAX_NOTES = 20


@dataclass
class PartitionKeys:
    """The key summary of one partition dir and what it covered."""

    stats: KeyStats
    mode: str                        # "all" or "sampled"
    sample_bytes: int | None         # the budget asked for (sampled mode)
    log_bytes: int = 0               # .log bytes of the partition's plain segments
    scanned_bytes: int = 0           # .log bytes whose batches were read
    first_offset: int | None = None  # first record offset read
    last_offset: int | None = None   # last record offset read
    unreadable_batches: int = 0
    legacy_records: int = 0
    notes: list[str] = field(default_factory=list)
    more_notes: int = 0

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)
        else:
            self.more_notes += 1

    def to_json(self, top: int = 10) -> dict:
        """The ``keys`` object of ``scan --json``: fingerprints and counts, never key bytes."""
        out = {"mode": self.mode, "sample_bytes_asked": self.sample_bytes, "log_bytes": self.log_bytes,
               "scanned_bytes": self.scanned_bytes, "first_offset": self.first_offset,
               "last_offset": self.last_offset, "unreadable_batches": self.unreadable_batches,
               "legacy_records_keys_not_read": self.legacy_records}
        out.update(self.stats.summary(top))
        out["notes"] = self.notes + ([f"... and {self.more_notes} more"] if self.more_notes else [])
        return out


def _plain_logs(path: Path) -> list[tuple[int, Path]]:
    """The partition's plain segment .log files (no .deleted/.cleaned/.swap), by base offset."""
    logs = []
    with os.scandir(path) as entries:
        for entry in entries:
            parsed = filenames.parse_segment_file(entry.name)
            if parsed is not None and parsed.suffix == "log" and parsed.state is None and not entry.is_symlink():
                logs.append((parsed.base_offset, Path(entry.path)))
    return sorted(logs)


def _start_position(log: Path, base_offset: int, cut: int) -> int:
    """A batch boundary at or before ``cut`` from the segment's .index (0 without a usable one);
    the walk skips the batches that end at or before ``cut``."""
    index = log.with_suffix(".index")
    try:
        entries = read_offset_index(index, base_offset).entries
    except (FormatError, OSError):
        return 0
    best = 0
    for _offset, position in entries:
        if position <= cut:
            best = max(best, position)
    return best


def scan_partition_keys(path: Path, *, sample_bytes: int | None = None, capacity: int | None = None,
                        sample_size: int | None = None, prefix_bytes: int = 0) -> PartitionKeys:
    """The key summary of the partition dir ``path``; see the module docstring."""
    kwargs = {k: v for k, v in (("capacity", capacity), ("sample_size", sample_size)) if v is not None}
    result = PartitionKeys(KeyStats(prefix_bytes=prefix_bytes, **kwargs), "all" if sample_bytes is None else "sampled",
                           sample_bytes)
    try:
        logs = _plain_logs(path)
    except OSError as exc:
        result.note(f"{path}: cannot list: {exc}")
        return result
    sizes = {}
    for base, log in logs:
        try:
            sizes[base] = log.stat().st_size
        except OSError as exc:
            result.note(f"{log}: cannot stat: {exc}")
    result.log_bytes = sum(sizes.values())
    plan: list[tuple[int, Path, int]] = []  # (base offset, file, skip batches before this byte)
    if sample_bytes is None:
        plan = [(base, log, 0) for base, log in logs if base in sizes]
    else:
        left = sample_bytes
        for base, log in reversed(logs):
            if base not in sizes or left <= 0:
                continue
            cut = max(0, sizes[base] - left)
            left -= sizes[base] - cut
            plan.append((base, log, cut))
        plan.reverse()  # oldest first, as the records were written
    for base, log, cut in plan:
        _read_segment(result, log, base, cut)
    result.stats.seal()
    return result


def _read_segment(result: PartitionKeys, log: Path, base_offset: int, cut: int) -> None:
    try:
        reader = LogReader(log)
    except OSError as exc:
        result.note(f"{log}: cannot open: {exc}")
        return
    add = result.stats.add
    try:
        start = _start_position(log, base_offset, cut) if cut else 0
        for batch in reader.batches(start):
            if batch.position + batch.size_bytes <= cut:
                continue  # wholly older than the sample
            result.scanned_bytes += batch.size_bytes
            if batch.is_control:
                continue
            if batch.magic < 2:
                result.legacy_records += 1 if batch.record_count is None else batch.record_count
                continue
            try:
                for record in reader.records(batch, keys=True):
                    add(record.key, record.value_size, record.offset, record.timestamp_ms)
                    if result.first_offset is None:
                        result.first_offset = record.offset
                    result.last_offset = record.offset
            except (FormatError, OSError) as exc:
                result.unreadable_batches += 1
                result.note(f"{log}: byte {batch.position}: batch {batch.base_offset}..{batch.last_offset}: "
                            f"records unreadable, keys of the records before the error counted: {exc}")
        if reader.stop_reason is not None:
            result.note(reader.stop_detail or f"{log}: walk stopped at byte {reader.stop_position}: {reader.stop_reason}")
    finally:
        reader.close()
