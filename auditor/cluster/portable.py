"""What the cluster records about itself, as portable files: the parts a manifest carries.

``kafka-audit collect`` (:mod:`auditor.manifest`) runs on a broker; the audit and ``replay-check``
may run elsewhere. So that they know what disk mode knows, a manifest carries, next to its
segment rows, the records the broker keeps about the cluster, already decoded:

* the KRaft metadata log (:mod:`auditor.cluster.metadata_log`): the state as of the newest
  snapshot + log, the history the checks use and the notes from decoding;
* the tiered-storage metadata (:mod:`auditor.cluster.remote_storage`): the remote segments per
  partition, what cannot be known, and the notes;
* the consumer groups (:mod:`auditor.cluster.consumer_groups`): every group with its committed
  offsets, and the notes.

Each is one gzip-compressed JSON Lines file (one JSON object per line, its type in ``line``): a
``header`` line (``format``, ``version``, what was read), the content, and an ``end`` line with
the count of lines before it, so a cut-off file is told from a complete one. Written and read one
line at a time: memory beyond the decoded state itself stays small. The layout is documented in
docs/manifests.md; :data:`VERSION` is raised when a reader of an older version could misread a
newer file (new optional keys do not raise it: readers ignore keys they do not know).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import zlib
from pathlib import Path
from typing import IO, Iterable, Iterator

from auditor import __version__
from auditor.cluster.consumer_groups import OFFSETS_TOPIC, CommittedOffset, Group, GroupsResult
from auditor.cluster.metadata_log import MetadataLog
from auditor.cluster.metadata_state import Broker, Change, ClusterState, Note, Partition, Topic
from auditor.cluster.remote_storage import (MAX_METADATA_PARTITIONS, METADATA_TOPIC, RemoteLogMetadata,
                                            RemotePartition, RemoteSegment, infer_partition_counts)
from auditor.formats.filenames import parse_metadata_snapshot_file, parse_segment_file

METADATA_FORMAT = "kafka-audit.cluster-metadata"
REMOTE_FORMAT = "kafka-audit.remote-log-metadata"
GROUPS_FORMAT = "kafka-audit.consumer-groups"
VERSION = 1
"""The layout version both files are written in; a reader refuses (with a note) a higher one."""


class PortableError(Exception):
    """A file that cannot be read as a whole (not this format, a newer version, cut off): one line."""


# ---------------------------------------------------------------------------------------------
# Lines
# ---------------------------------------------------------------------------------------------

def _dump_lines(out: IO[bytes], lines: Iterable[dict]) -> int:
    """Writes ``lines`` and the closing ``end`` line as gzip JSON Lines; returns the lines written."""
    count = 0
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) as gz:
        text = io.TextIOWrapper(gz, encoding="utf-8", newline="\n")
        encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
        for line in lines:
            text.write(encode(line))
            text.write("\n")
            count += 1
        text.write(json.dumps({"line": "end", "lines": count}) + "\n")
        text.flush()
        text.detach()
    return count


def _load_lines(source: IO[bytes], label: str, fmt: str) -> Iterator[dict]:
    """The content lines (header first) of one file; PortableError when it is not ``fmt`` of a
    version this reader knows, or ends before its ``end`` line."""
    count = 0
    ended = False
    try:
        with gzip.GzipFile(fileobj=source, mode="rb") as gz:
            decode = json.JSONDecoder().decode
            for number, raw in enumerate(io.TextIOWrapper(gz, encoding="utf-8"), start=1):
                try:
                    line = decode(raw)
                except (ValueError, RecursionError) as exc:   # RecursionError: arrays nested too deep
                    raise PortableError(f"{label}: line {number} is not JSON ({exc})") from None
                if not isinstance(line, dict):
                    raise PortableError(f"{label}: line {number} is not a JSON object")
                if number == 1:
                    _check_header(line, label, fmt)
                if line.get("line") == "end":
                    if line.get("lines") != count:
                        raise PortableError(f"{label}: the end line counts {line.get('lines')} lines, "
                                            f"{count} were read")
                    ended = True
                    break
                count += 1
                yield line
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:   # zlib.error: a damaged deflate stream
        raise PortableError(f"{label}: unreadable after {count} lines ({exc})") from None
    if not ended:
        raise PortableError(f"{label}: cut off after {count} lines (no end line)")


def _check_header(line: dict, label: str, fmt: str) -> None:
    if line.get("line") != "header" or line.get("format") != fmt:
        raise PortableError(f"{label}: not a {fmt} file (its first line is line={line.get('line')!r}, "
                            f"format={line.get('format')!r})")
    version = line.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise PortableError(f"{label}: {fmt} version {version!r} is newer than this tool reads "
                            f"(kafka-audit {__version__} reads version {VERSION} and older)")


_FIELDS: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _make(cls, line: dict):
    """A dataclass from a line (its ``line`` key dropped), ignoring keys it does not know (later
    additions)."""
    line.pop("line", None)
    try:
        return cls(**line)
    except TypeError:
        names = _names(cls)
        return cls(**{k: v for k, v in line.items() if k in names})


def _plain(obj) -> dict:
    return {name: getattr(obj, name) for name in _names(type(obj))}


# ---------------------------------------------------------------------------------------------
# The KRaft metadata log
# ---------------------------------------------------------------------------------------------

def metadata_advance(log: MetadataLog) -> int:
    """How far a metadata copy reaches: its highest snapshot end offset or segment base offset,
    the rule :func:`auditor.cluster.metadata_log.read_metadata_log` picks the most advanced copy by."""
    offsets = [-1]
    for p in log.snapshots:
        parsed = parse_metadata_snapshot_file(p.name)
        if parsed is not None:
            offsets.append(parsed.offset)
    for p in log.segments:
        parsed = parse_segment_file(p.name)
        if parsed is not None:
            offsets.append(parsed.base_offset)
    return max(offsets)


def _metadata_lines(log: MetadataLog) -> Iterator[dict]:
    st = log.state
    yield {"line": "header", "format": METADATA_FORMAT, "version": VERSION, "tool_version": __version__,
           "metadata_dir": str(log.metadata_dir), "node_id": log.node_id, "advance": metadata_advance(log),
           "base_snapshot": None if log.base_snapshot is None else str(log.base_snapshot),
           "base_offset": log.base_offset, "snapshots": [str(p) for p in log.snapshots],
           "segments": [str(p) for p in log.segments], "records_read": log.records_read,
           "other_metadata_dirs": [str(p) for p in log.other_metadata_dirs],
           "dir_ids": {d: [node, str(p)] for d, (node, p) in log.dir_ids.items()},
           "last_offset": st.last_offset, "last_timestamp_ms": st.last_timestamp_ms, "features": st.features}
    for b in st.brokers.values():
        yield {"line": "broker", **_plain(b)}
    for t in st.topics.values():
        yield {"line": "topic", "name": t.name, "topic_id": t.topic_id, "created_offset": t.created_offset,
               "created_ms": t.created_ms}
        for p in t.partitions.values():
            yield {"line": "partition", **_plain(p)}
    for (rtype, name), cfg in st.configs.items():
        yield {"line": "config", "resource_type": rtype, "resource_name": name, "configs": cfg}
    for c in log.history:
        yield {"line": "change", **_plain(c)}
    for n in log.notes:
        yield {"line": "note", **_plain(n)}


def write_metadata(log: MetadataLog, out: IO[bytes]) -> int:
    """One metadata log (read with ``history=True``) as a :data:`METADATA_FORMAT` file; lines written."""
    return _dump_lines(out, _metadata_lines(log))


def read_metadata_header(source: IO[bytes], label: str) -> dict:
    """Only the header line (which copy, how advanced), without reading the rest."""
    return next(_load_lines(source, label, METADATA_FORMAT))


def read_metadata(source: IO[bytes], label: str) -> MetadataLog:
    """A :class:`MetadataLog` as it was read on the broker (state, history, notes); paths are the
    broker's. PortableError when the file is not whole."""
    lines = _load_lines(source, label, METADATA_FORMAT)
    h = next(lines)
    st = ClusterState(features=dict(h.get("features") or {}), last_offset=h.get("last_offset"),
                      last_timestamp_ms=h.get("last_timestamp_ms"))
    history: list[Change] = []
    notes: list[Note] = []
    for line in lines:
        kind = line.get("line")
        if kind == "broker":
            b = _make(Broker, line)
            st.brokers[b.broker_id] = b
        elif kind == "topic":
            st.topics[line["topic_id"]] = _make(Topic, line)
        elif kind == "partition":
            p = _make(Partition, line)
            st.topics[p.topic_id].partitions[p.partition] = p
        elif kind == "config":
            st.configs[(line["resource_type"], line["resource_name"])] = dict(line["configs"])
        elif kind == "change":
            c = _make(Change, line)
            if c.resource is not None:
                c.resource = tuple(c.resource)
            history.append(c)
        elif kind == "note":
            notes.append(_make(Note, line))
    none_or_path = lambda v: None if v is None else Path(v)  # noqa: E731
    return MetadataLog(
        metadata_dir=Path(h["metadata_dir"]), state=st, history=history, notes=notes,
        base_snapshot=none_or_path(h.get("base_snapshot")), base_offset=h.get("base_offset", 0),
        snapshots=[Path(p) for p in h.get("snapshots", [])], segments=[Path(p) for p in h.get("segments", [])],
        records_read=h.get("records_read", 0),
        dir_ids={d: (node, Path(p)) for d, (node, p) in (h.get("dir_ids") or {}).items()},
        node_id=h.get("node_id"), other_metadata_dirs=[Path(p) for p in h.get("other_metadata_dirs", [])])


# ---------------------------------------------------------------------------------------------
# Tiered storage: __remote_log_metadata
# ---------------------------------------------------------------------------------------------

def _remote_lines(meta: RemoteLogMetadata) -> Iterator[dict]:
    yield {"line": "header", "format": REMOTE_FORMAT, "version": VERSION, "tool_version": __version__,
           "records": meta.records, "metadata_dirs": list(meta.metadata_dirs),
           "metadata_partitions": sorted(meta.metadata_partitions), "partition_counts": list(meta.partition_counts)}
    for k, whys in sorted(meta.incomplete.items()):
        yield {"line": "incomplete", "metadata_partition": k, "why": list(whys)}
    for rp in meta.partitions.values():
        yield {"line": "partition", "topic": rp.topic, "partition": rp.partition, "topic_id": rp.topic_id,
               "delete_state": rp.delete_state, "notes": list(rp.notes),
               "metadata_partitions": sorted(rp.metadata_partitions)}
        for seg in rp.segments.values():
            yield {"line": "segment", **_plain(seg)}
    for text in meta.notes:
        yield {"line": "note", "text": text}


def write_remote(meta: RemoteLogMetadata, out: IO[bytes]) -> int:
    """What ``__remote_log_metadata`` said, folded, as a :data:`REMOTE_FORMAT` file; lines written."""
    return _dump_lines(out, _remote_lines(meta))


def read_remote(source: IO[bytes], label: str) -> RemoteLogMetadata:
    """A :class:`RemoteLogMetadata` as it was read on the broker. PortableError when not whole."""
    lines = _load_lines(source, label, REMOTE_FORMAT)
    h = next(lines)
    meta = RemoteLogMetadata(metadata_dirs=list(h.get("metadata_dirs", [])),
                             metadata_partitions=set(h.get("metadata_partitions", [])),
                             records=h.get("records", 0), partition_counts=list(h.get("partition_counts", [])))
    for line in lines:
        kind = line.get("line")
        if kind == "incomplete":
            meta.incomplete[line["metadata_partition"]] = list(line["why"])
        elif kind == "partition":
            rp = RemotePartition(line["topic"], line["partition"], line.get("topic_id"),
                                 delete_state=line.get("delete_state"), notes=list(line.get("notes", [])),
                                 metadata_partitions=set(line.get("metadata_partitions", [])))
            meta.partitions[(rp.topic, rp.partition)] = rp
        elif kind == "segment":
            seg = _make(RemoteSegment, line)
            seg.leader_epochs = [tuple(e) for e in seg.leader_epochs]
            seg.history = [tuple(e) for e in seg.history]
            meta.partitions[(seg.topic, seg.partition)].segments[seg.segment_id] = seg
        elif kind == "note":
            meta.notes.append(line["text"])
    return meta


def merge_remote(parts: list[RemoteLogMetadata]) -> RemoteLogMetadata:
    """Several brokers' views as one, by the rule ``remote_storage.read_log_dirs`` reads log dirs
    with: each ``__remote_log_metadata`` partition from the first view (in the given order) that
    read it; a user partition from the view that read its metadata partition; the partition count
    inferred again over the result."""
    if len(parts) == 1:
        return parts[0]
    out = RemoteLogMetadata()
    owner: dict[int, int] = {}
    for i, part in enumerate(parts):
        for k in sorted(part.metadata_partitions):
            owner.setdefault(k, i)
    for i, part in enumerate(parts):
        owned = {k for k, o in owner.items() if o == i}
        problems = {why for whys in part.incomplete.values() for why in whys}
        out.notes += [n for n in part.notes if n not in problems and n not in out.notes
                      and not n.startswith(f"no {METADATA_TOPIC} partition count")]
        if not owned:
            continue
        out.metadata_partitions |= owned
        out.metadata_dirs += [d for d in part.metadata_dirs if _dir_partition(d) in owned]
        out.records += part.records if owned == part.metadata_partitions else 0
        for k in sorted(owned & set(part.incomplete)):
            out.incomplete[k] = list(part.incomplete[k])
            out.notes += part.incomplete[k]
        for key, rp in part.partitions.items():
            if rp.metadata_partitions & owned and key not in out.partitions:
                out.partitions[key] = rp
    found = [(rp.topic_id, p, k) for (_t, p), rp in out.partitions.items() if rp.topic_id
             for k in rp.metadata_partitions]
    if out.metadata_partitions:
        out.partition_counts = infer_partition_counts(found, max(out.metadata_partitions))
        if found and not out.partition_counts:
            out.notes.append(f"no {METADATA_TOPIC} partition count up to {MAX_METADATA_PARTITIONS} puts every "
                             f"partition's events where they were found: what an undecodable record concerns is "
                             f"taken to be every partition")
    return out


def _dir_partition(path: str) -> int | None:
    tail = Path(path).name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


# ---------------------------------------------------------------------------------------------
# Consumer groups: __consumer_offsets
# ---------------------------------------------------------------------------------------------

def _groups_lines(result: GroupsResult) -> Iterator[dict]:
    yield {"line": "header", "format": GROUPS_FORMAT, "version": VERSION, "tool_version": __version__,
           "records": result.records, "partitions": {str(k): d for k, d in sorted(result.partitions.items())}}
    for grp in result.groups.values():
        line = {"line": "group", **_plain(grp)}
        line["offsets"] = [_plain(c) for c in grp.offsets.values()]
        yield line
    for text in result.notes:
        yield {"line": "note", "text": text}


def write_groups(result: GroupsResult, out: IO[bytes]) -> int:
    """Every group ``consumer_groups.read_groups`` found (live and deleted, with their committed
    offsets) as a :data:`GROUPS_FORMAT` file; lines written."""
    return _dump_lines(out, _groups_lines(result))


def read_groups(source: IO[bytes], label: str) -> GroupsResult:
    """A :class:`GroupsResult` as it was read on the broker. PortableError when not whole."""
    lines = _load_lines(source, label, GROUPS_FORMAT)
    h = next(lines)
    out = GroupsResult({}, [], {int(k): d for k, d in (h.get("partitions") or {}).items()}, h.get("records", 0))
    for line in lines:
        kind = line.get("line")
        if kind == "group":
            offsets = [_make(CommittedOffset, c) for c in line.pop("offsets", [])]
            grp = _make(Group, line)
            grp.offsets = {(c.topic, c.partition): c for c in offsets}
            out.groups[grp.group] = grp
        elif kind == "note":
            out.notes.append(line["text"])
    return out


def merge_groups(parts: list[tuple[GroupsResult, dict[int, int]]]) -> GroupsResult:
    """Several brokers' groups as one: each ``__consumer_offsets`` partition from the broker whose
    replica reaches furthest (the given log end offsets per partition; ties: the first), its
    groups from that broker, as ``read_groups`` picks the furthest replica among log dirs."""
    if len(parts) == 1:
        return parts[0][0]
    owner: dict[int, int] = {}
    for i, (res, ends) in enumerate(parts):
        for k in res.partitions:
            if k not in owner or ends.get(k, -1) > parts[owner[k]][1].get(k, -1):
                owner[k] = i
    out = GroupsResult({}, [], {}, 0)
    for k, i in sorted(owner.items()):
        out.partitions[k] = parts[i][0].partitions[k]
        held = [res.partitions[k] for res, _ in parts if k in res.partitions]
        if len(held) > 1:
            out.notes.append(f"{OFFSETS_TOPIC}-{k}: {len(held)} replicas ({', '.join(held)}); "
                             f"read {out.partitions[k]} (the furthest)")
    for i, (res, _ends) in enumerate(parts):
        if i in owner.values():
            out.records += res.records
            out.notes += [n for n in res.notes if n not in out.notes]
        for name, grp in res.groups.items():
            if owner.get(grp.offsets_partition, i) == i and name not in out.groups:
                out.groups[name] = grp
    return out
