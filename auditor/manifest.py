"""Manifests: collect (scan a broker's log dirs into Parquet), read and find them. Pure Python.

Runs on the broker itself: no Spark, no JVM (this module must never import pyspark), read-only
on the log dirs (the scanner's guarantees), bounded memory (rows are streamed to Parquet every
``FLUSH_ROWS`` rows, whatever the broker holds), optionally at idle CPU and I/O priority.

A manifest is a directory::

    OUT/segments.parquet     SEGMENT_SCHEMA rows (auditor.schema), broker_id is a column
    OUT/partitions.parquet   PARTITION_SCHEMA rows
    OUT/log_dirs.parquet     LOG_DIRS_SCHEMA: one row per log dir (broker id, problems, host, times)

When the broker's log dirs hold them, a manifest also carries what the cluster records about
itself, decoded (:mod:`auditor.cluster.portable`; docs/manifests.md)::

    OUT/cluster_metadata.jsonl.gz     the KRaft metadata log: state, history, notes
    OUT/remote_log_metadata.jsonl.gz  __remote_log_metadata: remote segments per partition, notes
    OUT/consumer_groups.jsonl.gz      __consumer_offsets: groups and their committed offsets, notes

:func:`read_cluster_metadata`, :func:`read_remote_log_metadata` and :func:`read_consumer_groups`
give the audit and ``replay-check --manifest`` what disk mode reads from those files (None for
manifests without them: older manifests, or brokers without them).

Every file also carries key-value metadata (``kafka_audit.*``: table, tool version, depth,
host, collection start time, log dirs). How the files are written so that a reader never trusts
half a manifest (each file whole, a completion marker written last, ``--state`` renamed after
it): :mod:`auditor.manifest_write`. :func:`find_manifests` is the one rule
for naming manifests (dirs, parent dirs, globs), used by the engine
(``auditor.engines.spark.parquet.read_manifests``), ``replay-check`` and the Airflow DAG's input check.
"""

from __future__ import annotations

import ctypes
import glob
import io
import os
import platform
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from auditor import __version__, object_store
from auditor.atomic import OutputError, atomic_write
from auditor.cluster import portable
from auditor.cluster.consumer_groups import OFFSETS_TOPIC, GroupsResult, offsets_partition_dirs
from auditor.cluster.consumer_groups import read_groups as read_offsets_groups
from auditor.cluster.metadata_log import MetadataLog, find_metadata_dirs, read_metadata_log
from auditor.cluster.metadata_state import Note
from auditor.cluster.remote_storage import METADATA_TOPIC as REMOTE_METADATA_TOPIC
from auditor.cluster.remote_storage import RemoteLogMetadata
from auditor.cluster.remote_storage import read_log_dirs as read_remote_log_dirs
from auditor.manifest_remote import ChangedManifest, find_remote_manifests, read_checked, read_marker, read_remote_table
from auditor.manifest_write import (CLUSTER_METADATA_FILE, COMPLETE_FILE, CONSUMER_GROUPS_FILE,  # noqa: F401
                                    FLUSH_ROWS, LOG_DIRS_FILE, MANIFEST_FILES, MANIFEST_FORMAT, PARTITIONS_FILE,
                                    REMOTE_LOG_METADATA_FILE, SEGMENTS_FILE, IncompleteManifest, ParquetSink,
                                    check_manifest_complete, finish_manifest, manifest_completeness,
                                    start_manifest, write_part)
from auditor.object_store import is_s3
from auditor.scan import Progress, iter_log_dir
from auditor.scan.pagecache import NICE_READ_RATE_MIB_S, PageCacheCare, ReadRate  # noqa: F401 (re-exported)
from auditor.scan.filesystem import FS_FIELDS
from auditor.scan.state import check_state_dir
from auditor.schema import PARTITION_COLUMNS, SEGMENT_COLUMNS, arrow_schema, arrow_type, read_parquet

if TYPE_CHECKING:  # pyarrow (numpy with it: ~0.4 s) is imported where a table is written or read
    import pyarrow as pa


LOG_DIRS_FIELDS = (("log_dir", "string"), ("broker_id", "int32"), ("cluster_id", "string"), ("directory_id", "string"),
                   ("partition_dirs", "int64"), ("problems", "list<string>"), ("host", "string"),
                   ("collected_at_ms", "int64"), ("finished_at_ms", "int64")) + FS_FIELDS
"""LOG_DIRS_SCHEMA's columns (built by ``__getattr__``: pyarrow imported on first use): one row per log dir;
since format 4 the filesystem under it (``auditor.scan.filesystem.FS_FIELDS``: capacity foresight)."""


def __getattr__(name: str):
    if name != "LOG_DIRS_SCHEMA":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import pyarrow as pa

    return pa.schema([pa.field(column, arrow_type(type_name)) for column, type_name in LOG_DIRS_FIELDS])


class CollectError(Exception):
    """A usage problem (e.g. --out inside a log dir): one line, exit 2."""


@dataclass
class CollectResult:
    out: Path
    segments: int = 0
    partitions: int = 0
    log_dirs: list[dict] = field(default_factory=list)
    priority: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    cluster_parts: list[str] = field(default_factory=list)
    """One line per cluster part written or not (metadata log, remote log metadata), for the CLI."""


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_out_path(out: str | os.PathLike, log_dirs: Iterable[str | os.PathLike]) -> Path:
    """The resolved output dir; CollectError when it is (or would land) inside a scanned log dir."""
    if "://" in str(out):
        raise CollectError(f"--out {out}: collect_manifest writes a local directory; the CLI publishes it to "
                           "object storage (auditor.manifest_remote.publish_manifest)")
    out_real = Path(os.path.realpath(out))
    for log_dir in log_dirs:
        root = Path(os.path.realpath(log_dir))
        if _inside(out_real, root):
            raise CollectError(
                f"--out {out} resolves to {out_real}, inside the scanned log dir {root}: "
                "the auditor never writes under a log dir; choose a path outside it"
            )
    if out_real.exists() and not out_real.is_dir():
        raise OutputError(out, "exists and is not a directory")
    return out_real


# Linux ioprio_set(2): no libc wrapper, so the raw syscall. Numbers from the kernel's syscall tables.
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "i686": 289, "armv7l": 314, "ppc64le": 273, "s390x": 282}
_IOPRIO_WHO_PROCESS = 1
_IOPRIO_CLASS_IDLE = 3
_IOPRIO_CLASS_SHIFT = 13


def lower_priority() -> list[str]:
    """Lowest CPU priority (nice 19) and idle I/O class where the platform allows; says what it did."""
    done = []
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 19)
        done.append("cpu: nice 19")
    except (AttributeError, OSError) as exc:
        try:
            os.nice(19)
            done.append("cpu: nice +19")
        except (AttributeError, OSError):
            done.append(f"cpu: unchanged ({exc})")
    number = _IOPRIO_SET.get(platform.machine()) if platform.system() == "Linux" else None
    if number is None:
        done.append(f"io: unchanged (no ioprio_set on {platform.system()} {platform.machine()})")
        return done
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall(number, _IOPRIO_WHO_PROCESS, 0, _IOPRIO_CLASS_IDLE << _IOPRIO_CLASS_SHIFT)
        if rc == 0:
            done.append("io: class idle")
        else:
            done.append(f"io: unchanged (ioprio_set: {os.strerror(ctypes.get_errno())})")
    except OSError as exc:
        done.append(f"io: unchanged ({exc})")
    return done


def _metadata(table: str, depth: str, started_ms: int, log_dirs: list[str]) -> dict[bytes, bytes]:
    return {
        b"kafka_audit.table": table.encode(),
        b"kafka_audit.version": __version__.encode(),
        b"kafka_audit.depth": depth.encode(),
        b"kafka_audit.host": socket.gethostname().encode(),
        b"kafka_audit.collected_at_ms": str(started_ms).encode(),
        b"kafka_audit.log_dirs": "\n".join(log_dirs).encode(),
        b"kafka_audit.manifest_format": str(MANIFEST_FORMAT).encode(),
    }


def collect_manifest(log_dirs: list[str | os.PathLike], out: str | os.PathLike, depth: str = "index", *,
                     nice: bool = False, on_progress=None, state_dir: str | os.PathLike | None = None,
                     page_cache_care: bool | None = None, max_read_rate_mib_s: float | None = None) -> CollectResult:
    """Scans ``log_dirs`` into a manifest directory ``out`` (created if needed).

    ``state_dir``: incremental scan (auditor.scan.state). ``page_cache_care`` (default: ``nice``)
    leaves the page cache as it was; ``max_read_rate_mib_s`` (default with ``nice``:
    ``NICE_READ_RATE_MIB_S``; 0 = unlimited) paces the reads (auditor.scan.pagecache).
    """
    out_dir = check_out_path(out, log_dirs)
    if state_dir is not None:
        check_state_dir(state_dir, log_dirs)
    care = nice if page_cache_care is None else page_cache_care
    rate = (NICE_READ_RATE_MIB_S if nice else None) if max_read_rate_mib_s is None else (max_read_rate_mib_s or None)
    result = CollectResult(out_dir)
    if nice:
        result.priority = lower_priority()
    result.priority.append(f"page cache: {'left as found (pages the scan brought in are dropped)' if care else 'not managed'}")
    result.priority.append(f"read rate: {f'at most {rate:g} MiB/s' if rate else 'unlimited'}")
    started = time.monotonic()
    started_ms = time.time_ns() // 1_000_000
    abs_dirs = [os.path.abspath(d) for d in log_dirs]
    start_manifest(out_dir)
    sinks: dict[str, ParquetSink] = {}
    infos = []
    states = []  # each log dir's new scan state, written but renamed into place only once the manifest is complete
    try:
        sinks["segments"] = ParquetSink(out_dir / SEGMENTS_FILE, arrow_schema(SEGMENT_COLUMNS).with_metadata(
            _metadata("segments", depth, started_ms, abs_dirs)))
        sinks["partitions"] = ParquetSink(out_dir / PARTITIONS_FILE, arrow_schema(PARTITION_COLUMNS).with_metadata(
            _metadata("partitions", depth, started_ms, abs_dirs)))
        progress = Progress(log_dirs_total=len(log_dirs))
        for log_dir in log_dirs:
            for rows, prow, info in iter_log_dir(log_dir, depth, progress=progress, on_progress=on_progress,
                                                 state_dir=state_dir, page_cache_care=care,
                                                 max_read_rate_mib_s=rate, hold_state=states):
                if rows:
                    sinks["segments"].add(rows)
                if prow is not None:
                    sinks["partitions"].add([prow])
                if info is not None:
                    infos.append(info)
        finished_ms = time.time_ns() // 1_000_000
        for sink in sinks.values():
            sink.close()
        _write_log_dirs(out_dir / LOG_DIRS_FILE, infos, (started_ms, finished_ms), depth, abs_dirs)
        result.cluster_parts = collect_cluster_parts(log_dirs, out_dir, page_cache_care=care, max_read_rate_mib_s=rate)
        finish_manifest(out_dir, started_ms, depth)
        for state in states:   # after the marker: a collect that failed before it leaves every state as it was
            state.publish()
    except BaseException:
        for sink in sinks.values():
            sink.abort()
        for state in states:
            state.abort()
        raise
    result.segments, result.partitions = sinks["segments"].count, sinks["partitions"].count
    result.log_dirs = infos
    result.elapsed_s = time.monotonic() - started
    return result


def _write_log_dirs(path: Path, infos: list[dict], times: tuple[int, int], depth: str, abs_dirs: list[str]) -> None:
    """LOG_DIRS_FILE: one row per log dir (the scan's info, this host, the collection's start and end)."""
    host = socket.gethostname()
    import pyarrow as pa
    import pyarrow.parquet as pq

    log_dirs_schema = __getattr__("LOG_DIRS_SCHEMA")
    rows = [{**{k: info.get(k) for k in log_dirs_schema.names}, "host": host,
             "collected_at_ms": times[0], "finished_at_ms": times[1]} for info in infos]
    schema = log_dirs_schema.with_metadata(_metadata("log_dirs", depth, times[0], abs_dirs))
    table = pa.Table.from_pylist(rows, schema=schema)
    atomic_write(path, lambda fh: pq.write_table(table, fh, compression="zstd"))


def collect_cluster_parts(log_dirs: list[str | os.PathLike], out_dir: Path, *, page_cache_care: bool = False,
                          max_read_rate_mib_s: float | None = None) -> list[str]:
    """Writes the cluster's own record the log dirs hold (read-only, as disk mode reads it): the KRaft metadata
    log with its history, ``__remote_log_metadata``, the consumer groups; says what it did. ``page_cache_care``:
    the pages these reads bring in are dropped after; ``max_read_rate_mib_s`` paces ``__consumer_offsets``."""
    said = []
    log_dirs = [os.path.abspath(d) for d in log_dirs]     # the paths the scan's rows carry
    care = PageCacheCare() if page_cache_care else None
    metadata_dirs = [str(d) for d in find_metadata_dirs(log_dirs)]
    if not metadata_dirs:
        (out_dir / CLUSTER_METADATA_FILE).unlink(missing_ok=True)   # a re-collect must not keep an old one
        said.append("metadata log: none in these log dirs (not written)")
    else:
        log = _read_with_care(care, metadata_dirs, lambda: read_metadata_log(log_dirs, history=True))
        write_part(out_dir / CLUSTER_METADATA_FILE, portable.write_metadata, log)
        said.append(f"metadata log: {log.metadata_dir} up to offset {log.state.last_offset}, "
                    f"{len(log.state.topics)} topics, {len(log.history)} changes, {len(log.notes)} notes "
                    f"-> {CLUSTER_METADATA_FILE}")
    said.append(_collect_remote(log_dirs, out_dir, care))
    said.append(_collect_groups(log_dirs, out_dir, care, max_read_rate_mib_s and ReadRate(max_read_rate_mib_s)))
    return said


def _collect_remote(log_dirs: list[str], out_dir: Path, care) -> str:
    remote_dirs = [os.path.join(d, name) for d in log_dirs for name in _listing(d)
                   if name.startswith(REMOTE_METADATA_TOPIC + "-") and os.path.isdir(os.path.join(d, name))]
    if not remote_dirs:
        (out_dir / REMOTE_LOG_METADATA_FILE).unlink(missing_ok=True)
        return f"remote log metadata: no {REMOTE_METADATA_TOPIC} in these log dirs (not written)"
    meta = _read_with_care(care, remote_dirs, lambda: read_remote_log_dirs(log_dirs))
    write_part(out_dir / REMOTE_LOG_METADATA_FILE, portable.write_remote, meta)
    segments = sum(len(rp.segments) for rp in meta.partitions.values())
    return (f"remote log metadata: {len(meta.metadata_partitions)} {REMOTE_METADATA_TOPIC} partitions, "
            f"{len(meta.partitions)} partitions, {segments} remote segments, {len(meta.notes)} notes "
            f"-> {REMOTE_LOG_METADATA_FILE}")


def _collect_groups(log_dirs: list[str], out_dir: Path, care, rate: ReadRate | None) -> str:
    dirs = [str(d) for ds in offsets_partition_dirs(log_dirs).values() for d in ds]
    if not dirs:
        (out_dir / CONSUMER_GROUPS_FILE).unlink(missing_ok=True)
        return f"consumer groups: no {OFFSETS_TOPIC} in these log dirs (not written)"
    result = _read_with_care(care, dirs, lambda: read_offsets_groups(log_dirs, pace=rate.pace if rate else None))
    write_part(out_dir / CONSUMER_GROUPS_FILE, portable.write_groups, result)
    return (f"consumer groups: {len(result.partitions)} {OFFSETS_TOPIC} partitions, {len(result.live)} live groups, "
            f"{sum(len(g.offsets) for g in result.live.values())} committed offsets, {len(result.notes)} notes "
            f"-> {CONSUMER_GROUPS_FILE}")


def _read_with_care(care, dirs: list[str], read):
    """``read()``, with the pages it brings in of the files in ``dirs`` dropped after (``care``)."""
    files = [os.path.join(d, name) for d in dirs for name in _listing(d) if os.path.isfile(os.path.join(d, name))]
    return read() if care is None else care.around(files, read)


def _listing(log_dir) -> list[str]:
    try:
        return os.listdir(log_dir)
    except OSError:
        return []


def read_manifest(path: str | os.PathLike) -> "tuple[pa.Table, pa.Table, pa.Table]":
    """One manifest's three tables with pyarrow (no Spark): segments, partitions, log dirs."""
    if is_s3(str(path)):  # each object's size and CRC-32 checked against _complete.json
        url = str(path).rstrip("/")
        marker = read_marker(url)
        return (read_remote_table(url, SEGMENTS_FILE, marker, schema=arrow_schema(SEGMENT_COLUMNS)),
                read_remote_table(url, PARTITIONS_FILE, marker, schema=arrow_schema(PARTITION_COLUMNS)),
                read_remote_table(url, LOG_DIRS_FILE, marker))
    p = Path(path)
    return (read_parquet(p / SEGMENTS_FILE, schema=arrow_schema(SEGMENT_COLUMNS)),
            read_parquet(p / PARTITIONS_FILE, schema=arrow_schema(PARTITION_COLUMNS)),
            read_parquet(p / LOG_DIRS_FILE))


def find_manifests(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Manifest directories (holding segments.parquet) named by paths, globs or parent dirs.

    ``s3://`` / ``s3a://`` URLs are listed the same way (auditor.manifest_remote); another URL
    (``hdfs://``) cannot be listed here: it is taken as one manifest dir.
    FileNotFoundError when nothing is found at all; IncompleteManifest (a FileNotFoundError) when a
    local one is not complete (:func:`manifest_completeness`: a collect killed or failed while writing it).
    """
    paths = [str(p) for p in paths]
    found: list[str] = []
    for spec in paths:
        if is_s3(spec):  # listed, each checked against its _complete.json (auditor.manifest_remote)
            found.extend(find_remote_manifests(spec))
            continue
        if "://" in spec:
            found.append(spec.rstrip("/"))
            continue
        for match in sorted(glob.glob(spec)) or [spec]:
            p = Path(match)
            if (p / SEGMENTS_FILE).exists():
                found.append(str(p))
            elif p.name == SEGMENTS_FILE and p.exists():
                found.append(str(p.parent))
            elif p.is_dir():
                found.extend(str(s.parent) for s in sorted(p.rglob(SEGMENTS_FILE)))
    if not found:
        raise FileNotFoundError(f"no manifest ({SEGMENTS_FILE}) found under {', '.join(paths)}")
    found = sorted(dict.fromkeys(found))
    for manifest in found:
        if "://" not in manifest:
            check_manifest_complete(manifest)
    return found


def _open_part(manifest: str, name: str):
    """A manifest file opened for reading (a local path or a URL), or None when it is absent."""
    if is_s3(manifest):   # read whole, its size and CRC-32 checked against _complete.json (ChangedManifest)
        m = manifest.rstrip("/")
        return io.BytesIO(read_checked(m, name, read_marker(m))) if object_store.exists(f"{m}/{name}") else None
    if "://" in manifest:   # (hdfs:// ...: pyarrow's file systems)
        from pyarrow import fs as pafs

        filesystem, root = pafs.FileSystem.from_uri(manifest.rstrip("/"))
        path = f"{root}/{name}"
        if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        return filesystem.open_input_stream(path, compression=None)
    path = Path(manifest, name)
    return open(path, "rb") if path.is_file() else None


def _part_of(manifest: str, name: str, read) -> tuple[object | None, Note | None]:
    """(what ``read`` made of one manifest's part, or None; a note when it was there but unreadable)."""
    label = f"{manifest.rstrip('/')}/{name}"
    try:
        source = _open_part(manifest, name)
        if source is None:
            return None, None
        with source:
            return read(source, label), None
    except portable.PortableError as exc:
        return None, Note(label, None, None, f"not used: {str(exc).removeprefix(label + ': ')}")
    except (ChangedManifest, object_store.ObjectStoreError):
        raise   # a manifest changed since collect, a store that cannot be read: refused, as its tables are
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]   # (pyarrow's libjvm errors run to pages)
        return None, Note(label, None, None, f"not used: {type(exc).__name__}: {first}")


def manifest_dir_ids(manifests: Iterable[str]) -> dict[str, tuple[int | None, Path]]:
    """``directory.id`` -> (broker id, log dir) of every log dir the manifests cover (their
    log_dirs tables: the same map disk mode makes from each log dir's meta.properties)."""
    out: dict[str, tuple[int | None, Path]] = {}
    for m in manifests:
        try:
            rows = read_parquet(f"{m.rstrip('/')}/{LOG_DIRS_FILE}",
                                columns=["log_dir", "broker_id", "directory_id"]).to_pylist()
        except (OSError, ValueError, KeyError):
            continue
        for r in rows:
            if r["directory_id"] and r["directory_id"] not in out:
                out[r["directory_id"]] = (r["broker_id"], Path(r["log_dir"]))
    return out


def read_cluster_metadata(paths: Iterable[str | os.PathLike]) -> tuple[MetadataLog | None, list[Note]]:
    """The KRaft metadata log the manifests carry, as disk mode reads it from all their log dirs,
    and the notes on copies that were there but unreadable (also added to the log's notes).

    Of several copies (one per broker) the most advanced is used (highest snapshot or segment
    offset, the rule ``read_metadata_log`` picks by; ties: the first manifest), the others are
    listed in ``other_metadata_dirs``; directory IDs are mapped through every manifest's log dirs.
    None when no manifest carries a readable one (manifests older than format 2, brokers without a
    metadata log): the audit then goes on as before.
    """
    manifests = find_manifests(paths)
    headers, notes = [], []
    for m in manifests:
        header, note = _part_of(m, CLUSTER_METADATA_FILE, portable.read_metadata_header)
        if header is not None:
            headers.append((header.get("advance", -1), -len(headers), m, header))
        if note is not None:
            notes.append(note)
    chosen = None
    for _advance, _order, m, _header in sorted(headers, key=lambda h: h[:2], reverse=True):
        chosen, note = _part_of(m, CLUSTER_METADATA_FILE, portable.read_metadata)
        if chosen is not None:
            chosen.other_metadata_dirs += [Path(h[3]["metadata_dir"]) for h in headers if h[2] != m]
            break
        notes.append(note)
    if chosen is None:
        return None, notes
    chosen.dir_ids = {**chosen.dir_ids, **manifest_dir_ids(manifests)}
    chosen.notes += notes
    return chosen, notes


def _parts_of(paths, file_name: str, reader, with_manifest: bool = False) -> tuple[list, list[str]]:
    """A cluster part from every manifest carrying it (with its manifest if asked); unreadable copies' notes."""
    parts, notes = [], []
    for m in find_manifests(paths):
        part, note = _part_of(m, file_name, reader)
        if part is not None:
            parts.append((m, part) if with_manifest else part)
        if note is not None:
            notes.append(str(note))
    return parts, notes


def read_remote_log_metadata(paths: Iterable[str | os.PathLike]) -> tuple[RemoteLogMetadata | None, list[str]]:
    """What ``__remote_log_metadata`` said, from every manifest carrying it, merged by the rule
    disk mode reads several log dirs with (each metadata partition from the first manifest that
    read it), and the notes on copies there but unreadable (also in its notes). None when no
    manifest carries it: replay predictions are then as before (no remote knowledge)."""
    parts, notes = _parts_of(paths, REMOTE_LOG_METADATA_FILE, portable.read_remote)
    if not parts:
        return None, notes
    merged = portable.merge_remote(parts)
    merged.notes += notes
    return merged, notes


def read_remote_logs(log_dirs: Iterable[str], manifests: Iterable[str]) -> tuple[RemoteLogMetadata | None, list[str]]:
    """Tiered storage, for the replay search: what ``__remote_log_metadata`` says is in remote
    storage, from the manifests' copy when manifests are given (None: they carry none, and the
    answers are as without tiered storage), else from the log dirs; with the notes on it."""
    manifests = list(manifests)
    if manifests:
        logs, notes = read_remote_log_metadata(manifests)
    else:
        logs, notes = read_remote_log_dirs(list(log_dirs)), []
    return logs, (list(logs.notes) if logs is not None else notes)


def _offsets_log_ends(manifest: str) -> dict[int, int]:
    """__consumer_offsets partition -> its live replica's log end offset in one manifest's rows."""
    try:
        rows = read_parquet(f"{manifest.rstrip('/')}/{PARTITIONS_FILE}",
                            columns=["topic", "partition", "log_end_offset", "dir_kind"]).to_pylist()
    except (OSError, ValueError, KeyError):
        return {}
    return {r["partition"]: r["log_end_offset"] or -1 for r in rows if r["topic"] == OFFSETS_TOPIC and r["dir_kind"] == "live"}


def read_consumer_groups(paths: Iterable[str | os.PathLike]) -> tuple[GroupsResult | None, list[str]]:
    """The consumer groups the manifests carry (``__consumer_offsets`` as ``read_groups`` read it on
    each broker): of several brokers' replicas of an offsets partition, the one whose log end
    offset (in the manifests' rows) is highest, as disk mode reads the furthest replica; the notes
    on copies there but unreadable (also in its notes). None when no manifest carries them."""
    parts, notes = _parts_of(paths, CONSUMER_GROUPS_FILE, portable.read_groups, with_manifest=True)
    if not parts:
        return None, notes
    merged = portable.merge_groups([(result, _offsets_log_ends(m)) for m, result in parts])
    merged.notes += notes
    return merged, notes
