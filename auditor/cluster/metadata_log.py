"""The cluster's own record, read offline: the KRaft metadata log (``__cluster_metadata-0``).

Every KRaft node keeps the cluster metadata on disk in ``<log dir>/__cluster_metadata-0/``:
log segments (``<base offset>.log``) of metadata records, and snapshots
(``<end offset>-<epoch>.checkpoint``: a SnapshotHeader control batch, the records that rebuild the
state as of ``end offset - 1``, a SnapshotFooter). This module reads them, read-only, and rebuilds
what a broker would: the **state** (brokers and their log-dir IDs, topics with name and ID,
partitions with replicas, ISR, leader, leader epoch and each replica's directory ID, configs at
cluster / broker / topic level, feature levels) and the **history** (each topic creation and
deletion, replica-set change, directory change, config change, broker registration, with its
record's offset and append time).

How it replays (as Kafka's ``MetadataLoader`` / ``MetadataDelta``):

* the state starts from a snapshot (the newest complete one; with ``history=True`` the oldest one
  the log still continues from, or the empty state when the log starts at offset 0, so that the
  history covers every record on disk), then the log records from the snapshot's end offset on;
* ``PartitionChangeRecord`` merges as ``PartitionRegistration.merge``: null / -2 / -1 fields mean
  "unchanged", a new leader bumps the leader epoch, every change bumps the partition epoch;
  directories given replace them; replicas without directories become MIGRATING (Kafka 4.2.1);
* records between ``BeginTransactionRecord`` and ``EndTransactionRecord`` are applied at the end;
  ``AbortTransactionRecord`` drops them (KIP-868); a transaction still open at the end of the log
  is not applied (note);
* ``RemoveTopicRecord`` removes the topic and its configs; a ``ConfigRecord`` with a null value
  deletes the config.

Bad input never stops the reading: a snapshot that is truncated or lacks its header/footer is
skipped for an older one (note), a record whose body is cut short, an unknown api key or a
version newer than the specs becomes a note naming file, byte position, offset, type and version,
and the rest is still read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator

from auditor.cluster.metadata_state import (BROKER_RESOURCE, CONFIG_RESOURCE_TYPES, LOST_DIR,  # noqa: F401 (API)
                                            MIGRATING_DIR, RESERVED_DIRS, TOPIC_RESOURCE, UNASSIGNED_DIR,
                                            Broker, Change, ClusterState, MetadataEntry, Note, Partition,
                                            Replayer, Topic, describe_change)
from auditor.formats import kafka_message as km
from auditor.formats import metadata_records as mr
from auditor.formats.checkpoints import read_meta_properties
from auditor.formats.errors import FormatError
from auditor.formats.filenames import parse_metadata_snapshot_file, parse_segment_file
from auditor.formats.log_reader import LogReader

METADATA_DIR_NAME = "__cluster_metadata-0"
META_PROPERTIES = "meta.properties"


class MetadataLogNotFound(Exception):
    """None of the given directories holds a ``__cluster_metadata-0`` directory."""


@dataclass
class MetadataLog:
    """What :func:`read_metadata_log` found."""
    metadata_dir: Path
    state: ClusterState
    history: list[Change]
    notes: list[Note]
    base_snapshot: Path | None           # the snapshot the state starts from (None: offset 0)
    base_offset: int                     # first log offset replayed
    snapshots: list[Path]                # complete snapshots present
    segments: list[Path]
    records_read: int = 0
    dir_ids: dict[str, tuple[int | None, Path]] = field(default_factory=dict)   # directory.id -> (node, log dir)
    node_id: int | None = None
    other_metadata_dirs: list[Path] = field(default_factory=list)   # other nodes' copies, not read

    def dir_path(self, dir_id: str | None) -> str | None:
        """The log dir path of a directory ID (from the given log dirs' meta.properties), or a
        reserved name (MIGRATING, UNASSIGNED, LOST), or None when unknown."""
        if dir_id is None:
            return None
        if dir_id in RESERVED_DIRS:
            return RESERVED_DIRS[dir_id]
        hit = self.dir_ids.get(dir_id)
        return None if hit is None else str(hit[1])


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------

def find_metadata_dirs(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The ``__cluster_metadata-0`` dirs among ``paths`` (log dirs, or the metadata dir itself)."""
    found = []
    for p in map(Path, paths):
        if p.name == METADATA_DIR_NAME and p.is_dir():
            found.append(p)
        elif (p / METADATA_DIR_NAME).is_dir():
            found.append(p / METADATA_DIR_NAME)
    return found


def log_dir_ids(paths: Iterable[str | os.PathLike], notes: list[Note] | None = None
                ) -> dict[str, tuple[int | None, Path]]:
    """``directory.id`` -> (node id, log dir) from each log dir's ``meta.properties``."""
    out = {}
    for p in map(Path, paths):
        if p.name == METADATA_DIR_NAME:
            p = p.parent
        mp = p / META_PROPERTIES
        if not mp.is_file():
            continue
        try:
            props = read_meta_properties(mp)
        except (FormatError, OSError, UnicodeDecodeError) as e:
            if notes is not None:
                notes.append(Note(str(mp), None, None, f"meta.properties unreadable: {e}"))
            continue
        dir_id = props.get("directory.id")
        if dir_id:
            node = props.get("node.id", props.get("broker.id"))
            out[dir_id] = (int(node) if node is not None else None, p)
    return out


def metadata_files(metadata_dir: Path) -> tuple[list[tuple[int, Path]], list[tuple[int, Path]]]:
    """(complete snapshots as (end offset, path), log segments as (base offset, path)), sorted."""
    snaps, segs = [], []
    for entry in os.scandir(metadata_dir):
        if not entry.is_file(follow_symlinks=False):
            continue
        s = parse_metadata_snapshot_file(entry.name)
        if s is not None:
            if s.state is None:
                snaps.append((s.offset, Path(entry.path)))
            continue
        seg = parse_segment_file(entry.name)
        if seg is not None and seg.suffix == "log" and seg.state is None:
            segs.append((seg.base_offset, Path(entry.path)))
    return sorted(snaps), sorted(segs)


def read_entries(path: str | os.PathLike, notes: list[Note], *, start_offset: int = 0
                 ) -> Iterator[MetadataEntry]:
    """Every record of one metadata log segment or snapshot, decoded (records below
    ``start_offset`` are skipped undecoded). Problems go to ``notes``; reading goes on."""
    label = str(path)
    try:
        reader = LogReader(path)
    except OSError as e:
        notes.append(Note(label, None, None, f"cannot open: {e}"))
        return
    try:
        for batch in reader.batches():
            if batch.last_offset < start_offset:
                continue
            yield from _batch_entries(reader, batch, label, notes, start_offset)
        if reader.stop_reason is not None:
            notes.append(Note(label, reader.stop_position, None,
                              f"reading stopped ({reader.stop_reason}): {reader.stop_detail}"))
    finally:
        reader.close()


def _batch_entries(reader, batch, label, notes, start_offset) -> Iterable[MetadataEntry]:
    """The entries of one batch: a data batch framed and decoded in C when the extension is built
    (mr.c_metadata_batch, iterated directly: one generator level less per record; the records it
    cannot take, and whole batches it cannot frame, through the Python path, which names every
    problem), else record by record in Python."""
    pos = batch.position
    try:
        data = reader.read_batch_bytes(batch)
        if not batch.is_control:
            fast = mr.c_metadata_batch(batch, data, MetadataEntry, partial(_data_entry, label, pos, notes),
                                       label=label, position=pos, start_offset=start_offset)
            if fast is not None:
                return fast
        kvs = list(mr.iter_records(batch, data, label=label))
    except (FormatError, OSError) as e:
        notes.append(Note(label, batch.position, batch.base_offset,
                          f"batch unreadable, its records skipped: {e}"))
        return ()
    return _python_entries(kvs, batch.is_control, label, pos, notes, start_offset, batch.base_offset)


def _python_entries(kvs, control, label, pos, notes, start_offset, base_offset) -> Iterator[MetadataEntry]:
    """The records of one batch at or above ``start_offset`` as entries. A record below its
    batch's baseOffset (a negative offsetDelta: Kafka never writes one, the batch is corrupt) is
    noted whether it is applied or left out: below ``start_offset`` it would vanish silently."""
    for offset, ts, key, value in kvs:
        if offset < base_offset:
            fate = "applied" if offset >= start_offset else (
                f"skipped (below {start_offset}, the first offset replayed after the base state)")
            notes.append(Note(label, pos, offset,
                              f"record offset {offset} is below its batch's baseOffset {base_offset} "
                              f"(offsetDelta = {offset - base_offset}, expected >= 0): corrupt record, {fate}"))
        if offset >= start_offset:
            if control:
                entry = _control_entry(label, pos, offset, ts, key, value, notes)
            else:
                entry = _data_entry(label, pos, notes, offset, ts, key, value)
            if entry is not None:
                yield entry


def _data_entry(label, pos, notes, offset, ts, key, value) -> MetadataEntry | None:
    """One metadata record in Python: a frame met before through its cached decoder, else the
    general frame reader (which fills the caches). None (and a note) when it cannot be read."""
    # the usual frame (one byte each: frame version 1, api key, version) of a known type
    hit = None
    if value is not None and len(value) > 2 and value[0] == 1 and value[1] < 0x80 and value[2] < 0x80:
        hit = _FRAMES[km.use_c].get(value[1] << 7 | value[2])
    if hit is None:
        return _metadata_entry(label, pos, offset, ts, key, value, notes)
    try:
        return MetadataEntry(label, pos, offset, ts, False, hit[0], value[2], hit[1](value, 3, None, label, pos))
    except FormatError as e:
        notes.append(Note(label, pos, offset, f"metadata record undecodable, skipped: {e}"))
        return None


def _control_entry(label, pos, offset, ts, key, value, notes) -> MetadataEntry | None:
    try:
        version, ctype = mr.control_key(key, file=label, base=pos)
        spec, fields = mr.decode_control_value(ctype, version, value, file=label, base=pos)
    except FormatError as e:
        notes.append(Note(label, pos, offset, f"control record undecodable: {e}"))
        return None
    name = spec.name if spec is not None else mr.CONTROL_TYPE_NAMES.get(ctype, f"control({ctype})")
    return MetadataEntry(label, pos, offset, ts, True, name, version, fields)


#: km.use_c -> {(apiKey << 7 | version) of the usual 3-byte frame: (record type, its decoder)}
_FRAMES: dict[bool, dict[int, tuple[str, object]]] = {False: {}, True: {}}


def _metadata_entry(label, pos, offset, ts, key, value, notes) -> MetadataEntry | None:
    """A metadata record through the general frame reader (and the frame cache filled)."""
    try:
        frame = mr.read_frame(value, file=label, base=pos)
        spec = frame.spec
        if spec is None:
            notes.append(Note(label, pos, offset,
                              f"unknown metadata record type: api key {frame.api_key} (version {frame.version}) "
                              f"not in the Kafka {km.kafka_metadata.KAFKA_VERSION} specs; skipped"))
            return None
        if not spec.has_version(frame.version):
            notes.append(Note(label, pos, offset,
                              f"{spec.name} version {frame.version} is newer than the Kafka {spec.kafka_version} "
                              f"specs ({km.versions_text(spec.valid_versions)}); skipped"))
            return None
        reader = spec.reader(frame.version)
        if frame.body_position == 3:
            _FRAMES[km.use_c][frame.api_key << 7 | frame.version] = (spec.name, reader)
            mr.remember_frame(frame.api_key, frame.version, spec.name, reader)
        fields = reader(value, frame.body_position, len(value), label, pos)
    except FormatError as e:
        notes.append(Note(label, pos, offset, f"metadata record undecodable, skipped: {e}"))
        return None
    return MetadataEntry(label, pos, offset, ts, False, spec.name, frame.version, fields)


# ----------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------

def _read_snapshot(path: Path, notes: list[Note]) -> list[MetadataEntry] | None:
    """A snapshot's entries, or None (with notes) when it is not complete: it must start with a
    SnapshotHeader, end with a SnapshotFooter, and read to its end. Undecodable records inside a
    complete snapshot are noted and the snapshot is still used."""
    local: list[Note] = []
    entries = list(read_entries(path, local))
    notes.extend(local)
    reasons = []
    if not entries or entries[0].type != "SnapshotHeaderRecord":
        reasons.append("it does not start with a SnapshotHeader control record")
    if not entries or entries[-1].type != "SnapshotFooterRecord":
        reasons.append("it does not end with a SnapshotFooter control record")
    if any(n.message.startswith("reading stopped") for n in local):
        reasons.append("it does not read to its end")
    if reasons:
        notes.append(Note(str(path), None, None, "snapshot incomplete (" + "; ".join(reasons)
                          + "): not used, an older snapshot or the log is used instead"))
        return None
    return entries


def read_metadata_log(paths: Iterable[str | os.PathLike], *, history: bool = False) -> MetadataLog:
    """Rebuild the cluster from the metadata log found among ``paths`` (a broker's log dirs, or
    ``__cluster_metadata-0`` itself). Several metadata dirs (log dirs of several nodes): the most
    advanced one (highest snapshot / segment offset) is read, the others listed in
    ``other_metadata_dirs``; every given log dir's ``meta.properties`` maps directory IDs.
    Raises :class:`MetadataLogNotFound` when there is none."""
    paths = [Path(p) for p in paths]
    dirs = find_metadata_dirs(paths)
    if not dirs:
        raise MetadataLogNotFound(
            "no __cluster_metadata-0 directory in " + ", ".join(map(str, paths))
            + " (a ZooKeeper-mode broker, or a log dir other than the one holding the KRaft metadata log: "
              "pass all of the broker's log dirs, or its metadata.log.dir)")
    notes: list[Note] = []
    listing = {d: metadata_files(d) for d in dirs}

    def advance(d):
        snaps, segs = listing[d]
        return max([o for o, _ in snaps] + [o for o, _ in segs] + [-1])
    mdir = max(dirs, key=advance)
    snaps, segs = listing[mdir]
    dir_ids = log_dir_ids(paths, notes)
    node_id = next((node for node, p in dir_ids.values() if p == mdir.parent), None)
    log_start = segs[0][0] if segs else None
    hist: list[Change] | None = [] if history else None
    replayer, base_path, base_offset = _load_base(_base_candidates(snaps, log_start, history), hist, notes)
    if base_path is None and snaps and not (history and log_start == 0):
        notes.append(Note(str(mdir), None, None, "no usable snapshot: the state is rebuilt from the log alone"))
    if log_start is not None and log_start > base_offset:
        notes.append(Note(str(segs[0][1]), None, None,
                          f"the log starts at offset {log_start}, after the state's base offset {base_offset}: "
                          f"records {base_offset}..{log_start - 1} are missing (state may be incomplete)"))
    count = 0
    for _seg_base, seg in segs:
        for e in read_entries(seg, notes, start_offset=base_offset):
            replayer.apply(e)
            count += 1
    replayer.finish()
    return MetadataLog(metadata_dir=mdir, state=replayer.state, history=hist or [], notes=notes,
                       base_snapshot=base_path, base_offset=base_offset, snapshots=[p for _, p in snaps],
                       segments=[p for _, p in segs], records_read=count, dir_ids=dir_ids, node_id=node_id,
                       other_metadata_dirs=[d for d in dirs if d != mdir])


def _base_candidates(snaps, log_start, history) -> list:
    """Snapshots ((end offset, path)) to start from, best first; None = the empty state at offset 0.
    The newest snapshot is what a broker loads; for a history, the oldest base the log continues
    from, so that every log record on disk is replayed."""
    newest_first = list(reversed(snaps))
    if history and log_start == 0:
        candidates = [None] + newest_first
    elif history and log_start is not None:
        contiguous = [sn for sn in snaps if sn[0] >= log_start]
        candidates = contiguous + [sn for sn in newest_first if sn not in contiguous]
    else:
        candidates = newest_first
    if None not in candidates:
        candidates.append(None)       # last resort: the log alone (noted when it has a gap)
    return candidates


def _load_base(candidates, hist, notes) -> tuple[Replayer, Path | None, int]:
    """(replayer holding the base state, base snapshot or None, first log offset to replay)."""
    for cand in candidates:
        if cand is None:
            return Replayer(ClusterState(), hist, notes), None, 0
        entries = _read_snapshot(cand[1], notes)
        if entries is None:
            continue
        replayer = Replayer(ClusterState(), None, notes, from_snapshot=True)
        for e in entries:
            replayer.apply(e)
        replayer.finish()
        replayer.history = hist
        replayer.from_snapshot = False
        replayer.state.last_offset = cand[0] - 1      # the snapshot holds the state as of end offset - 1
        header = entries[0].data or {}
        replayer.state.last_timestamp_ms = header.get("lastContainedLogTimestamp")   # the last record's append time
        return replayer, cand[1], cand[0]
    return Replayer(ClusterState(), hist, notes), None, 0
