"""Kafka's ``DumpLogSegments --offsets-decoder`` on ``__consumer_offsets`` segments, parsed.

With ``--offsets-decoder`` (Kafka 4.2.1 ``DumpLogSegments.OffsetsMessageParser``) every record
line of a ``__consumer_offsets`` segment ends with the decoded key and value as JSON::

    | offset: 16 CreateTime: ... headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t",
      "partition":0}} payload: {"version":"3","data":{"offset":9,"leaderEpoch":-1,"metadata":"",
      "commitTimestamp":1685814551579}}
    ... key: {"type":"2","data":{"group":"g"}} payload: <DELETE>          (a tombstone)

``type`` is the key's record type (0/1 offset commit, 2 group metadata, 3.. the new protocol's
records); ``version`` the value's version.  Control records (transaction markers) print
``endTxnMarker: COMMIT|ABORT``, parsed by ``harness.dumplog``.  This module reads the lines the
generic parser left in ``DumpRecord.extra`` and folds them the way the coordinator does when it
loads a partition (see ``latest_offsets``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .dumplog import DumpLogSegments

_DECODER = json.JSONDecoder()


@dataclass
class OffsetsRecord:
    offset: int
    key_type: int | None
    key: dict | None
    value_version: int | None
    value: dict | None            # None = tombstone
    producer_id: int
    is_transactional: bool
    control_type: str | None      # COMMIT / ABORT for transaction markers
    raw: str


def parse_extra(extra: str) -> tuple[dict | None, dict | None, bool]:
    """(key JSON, payload JSON, tombstone) from the text after the record fields."""
    i = extra.find("key: ")
    if i < 0:
        return None, None, False
    key, end = _DECODER.raw_decode(extra, i + len("key: "))
    rest = extra[end:]
    j = rest.find("payload: ")
    if j < 0:
        return key, None, False
    body = rest[j + len("payload: "):].strip()
    if body.startswith("<DELETE>"):
        return key, None, True
    payload, _ = _DECODER.raw_decode(body)
    return key, payload, False


def dump_offsets(dls: DumpLogSegments, partition_dir: str | Path) -> list[OffsetsRecord]:
    """Every record of the partition's .log files, in offset order, decoded by Kafka."""
    logs = sorted(Path(partition_dir).glob("*.log"))
    if not logs:
        return []
    res = dls.dump(logs, deep_iteration=True, extra_args=["--offsets-decoder"])
    out = []
    for log in logs:
        f = res[log]
        for b in f.batches:
            for r in b.records:
                key = payload = None
                tomb = False
                if r.control_type is None:
                    key, payload, tomb = parse_extra(r.extra)
                out.append(OffsetsRecord(
                    r.offset, int(key["type"]) if key and "type" in key else None,
                    key.get("data") if key else None,
                    int(payload["version"]) if payload and "version" in payload else None,
                    payload.get("data") if payload else None,
                    b.producer_id if b.producer_id is not None else -1, bool(b.is_transactional),
                    r.control_type if r.control_type in ("COMMIT", "ABORT") else None, r.extra))
    return out


def latest_offsets(records: Iterable[OffsetsRecord]) -> dict[str, dict[tuple[str, int], dict]]:
    """group -> (topic, partition) -> the offset-commit value's data, folded as the coordinator
    replays the log (``OffsetMetadataManager.replay``): a plain commit replaces, a tombstone
    deletes (also from open transactions), a transactional commit waits for its producer's
    marker and, on COMMIT, wins only over a plain commit written before it (record offset)."""
    committed: dict[tuple[str, str, int], tuple[int, dict]] = {}
    pending: dict[int, dict[tuple[str, str, int], tuple[int, dict]]] = {}
    for r in records:
        if r.control_type is not None:
            batch = pending.pop(r.producer_id, {})
            if r.control_type == "COMMIT":
                for k, (rec_off, v) in batch.items():
                    old = committed.get(k)
                    if old is None or rec_off > old[0]:
                        committed[k] = (rec_off, v)
            continue
        if r.key_type not in (0, 1) or r.key is None:
            continue
        k = (r.key["group"], r.key["topic"], int(r.key["partition"]))
        if r.value is None:
            committed.pop(k, None)
            for p in pending.values():
                p.pop(k, None)
        elif r.is_transactional:
            pending.setdefault(r.producer_id, {})[k] = (r.offset, r.value)
        else:
            committed[k] = (r.offset, r.value)
    out: dict[str, dict[tuple[str, int], dict]] = {}
    for (g, t, p), (_, v) in committed.items():
        out.setdefault(g, {})[(t, p)] = v
    return out
