"""Kafka's ``DumpLogSegments --cluster-metadata-decoder`` on ``__cluster_metadata`` files, parsed.

With ``--cluster-metadata-decoder`` (Kafka 4.2.1 ``DumpLogSegments.ClusterMetadataLogMessageParser``)
every data record line of a metadata log segment or snapshot (``*.checkpoint``) ends with::

    | offset: 6 CreateTime: ... headerKeys: [] payload: {"type":"PARTITION_RECORD","version":1,
      "data":{"partitionId":0,"topicId":"TvQoTq0KRHWWLKQ64d1gfw","replicas":[1],...}}

and control records with their label and JSON (``SnapshotHeader {"version":0,...}``,
``SnapshotFooter {...}``, ``LeaderChange: {...}``, ``KRaftVersion {...}``, ``KRaftVoters {...}``),
as parsed by ``harness.dumplog``. A record the decoder cannot read prints something else after
``payload:``; it is kept raw in ``MetadataDumpRecord.raw`` with ``type`` None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from auditor.cluster import metadata_log as ml
from auditor.formats import kafka_message as km
from auditor.formats import metadata_records as mr

from .dumplog import DumpLogSegments, DumpedFile

_DECODER = json.JSONDecoder()
CONTROL_LABELS = ("LeaderChange:", "SnapshotHeader", "SnapshotFooter", "KRaftVersion", "KRaftVoters")


@dataclass
class MetadataDumpRecord:
    offset: int
    timestamp: int
    control: bool
    type: str | None        # "PARTITION_RECORD", ... or the control label ("SnapshotHeader", ...)
    version: int | None     # metadata records only (control records print no version)
    data: dict | None
    raw: str


def parse_extra(extra: str, control: bool) -> tuple[str | None, int | None, dict | None]:
    """(type, version, data) from the text DumpLogSegments prints after the record fields."""
    if control:
        for label in CONTROL_LABELS:
            if extra.startswith(label):
                rest = extra[len(label):].strip()
                try:
                    data, _ = _DECODER.raw_decode(rest)
                except ValueError:
                    return label.rstrip(":"), None, None
                return label.rstrip(":"), None, data
        return None, None, None
    i = extra.find("payload: ")
    if i < 0:
        return None, None, None
    try:
        obj, _ = _DECODER.raw_decode(extra, i + len("payload: "))
    except ValueError:
        return None, None, None
    if not isinstance(obj, dict) or "type" not in obj:
        return None, None, None
    return obj["type"], obj.get("version"), obj.get("data")


def records_of(dumped: DumpedFile) -> list[MetadataDumpRecord]:
    out = []
    for batch in dumped.batches:
        for r in batch.records:
            control = bool(batch.is_control)
            if r.control_type in ("COMMIT", "ABORT"):
                out.append(MetadataDumpRecord(r.offset, r.timestamp, True, r.control_type, None, None, r.extra))
                continue
            t, v, d = parse_extra(r.extra, control)
            out.append(MetadataDumpRecord(r.offset, r.timestamp, control, t, v, d, r.extra))
    return out


def dump_metadata(dls: DumpLogSegments, files: Iterable[str | Path]) -> dict[Path, tuple[DumpedFile, list[MetadataDumpRecord]]]:
    """{file: (DumpedFile, its records)} for metadata log segments (.log) and snapshots (.checkpoint)."""
    files = [Path(f).absolute() for f in files]
    res = dls.dump(files, deep_iteration=True, extra_args=["--cluster-metadata-decoder"])
    return {p: (res[p], records_of(res[p])) for p in files}


def ours_as_dumped(entry: ml.MetadataEntry) -> tuple:
    """(offset, type, version, data) of one of our entries, the way DumpLogSegments prints it."""
    if entry.control:
        spec = km.spec(entry.type, "kafka_clients")
        ctype = {v: k for k, v in mr.CONTROL_SPECS.items()}[entry.type]
        return entry.offset, mr.CONTROL_DUMP_LABELS[ctype], None, spec.to_json(entry.version, entry.data)
    spec = km.spec(entry.type, "kafka_metadata")
    return entry.offset, mr.record_type_name(entry.type), entry.version, spec.to_json(entry.version, entry.data)


def assert_equal_to_dump(files, dump_log_segments):
    """Every record of every file equals DumpLogSegments' decoding: offset, type, version, every field."""
    dumped = dump_metadata(dump_log_segments, files)
    total = 0
    for path in files:
        dfile, drecs = dumped[Path(path).absolute()]
        assert dfile.error is None and not dfile.unparsed, (path, dfile.error, dfile.unparsed[:3])
        notes: list[ml.Note] = []
        ours = [ours_as_dumped(e) for e in ml.read_entries(path, notes)]
        assert notes == [], [str(n) for n in notes]
        theirs = [(r.offset, r.type, r.version, r.data) for r in drecs]
        assert len(ours) == len(theirs), path
        for a, b in zip(ours, theirs):
            assert a == b, f"{path}: offset {a[0]}:\n ours   {a}\n kafka's {b}"
        total += len(ours)
    return total
