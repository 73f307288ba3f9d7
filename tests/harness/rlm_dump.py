"""Kafka's own decoder of ``__remote_log_metadata`` records, as a test oracle.

``kafka.tools.DumpLogSegments --remote-log-metadata-decoder`` prints every record's value through
``RemoteLogMetadataSerde`` and the ``toString()`` of Kafka's metadata classes (4.2.1)::

    | offset: 0 CreateTime: ... payload: RemoteLogSegmentMetadata{remoteLogSegmentId=
        RemoteLogSegmentId{topicIdPartition=<topic id>:<topic>-<partition>, id=<segment id>},
        startOffset=0, endOffset=39, brokerId=1, maxTimestampMs=..., eventTimestampMs=...,
        segmentLeaderEpochs={0=0}, segmentSizeInBytes=12880, customMetadata=Optional.empty,
        state=COPY_SEGMENT_STARTED, txnIdxEmpty=true}
    | offset: 1 ... payload: RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=..., customMetadata=...,
        state=COPY_SEGMENT_FINISHED, eventTimestampMs=..., brokerId=1}
    | offset: n ... payload: RemotePartitionDeleteMetadata{topicPartition=<id>:<topic>-<p>,
        state=..., eventTimestampMs=..., brokerId=...}

:func:`dump_remote_log_metadata` runs it on the ``.log`` files of a metadata partition dir (one
JVM) and returns one dict per record, in log order.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.harness.jvm import run_tool
from tests.harness.kafka import kafka_classpath

MAIN_CLASS = "kafka.tools.DumpLogSegments"

_OFFSET = re.compile(r"^\| offset: (\d+) ")
_TIP = re.compile(r"topicIdPartition=([A-Za-z0-9_-]{22}):(.+)-(\d+), id=([A-Za-z0-9_-]{22})\}")
_FIELD = re.compile(r"\b(startOffset|endOffset|brokerId|maxTimestampMs|eventTimestampMs|segmentSizeInBytes)=(-?\d+)")
_STATE = re.compile(r"\bstate=([A-Z_]+)")
_EPOCHS = re.compile(r"segmentLeaderEpochs=\{([^}]*)\}")
_TXN = re.compile(r"txnIdxEmpty=(true|false)")
_DELETE_TP = re.compile(r"topicPartition=([A-Za-z0-9_-]{22}):(.+)-(\d+), state=")


def parse_payload(line: str) -> dict | None:
    if "payload: " not in line:
        return None
    m = _OFFSET.match(line.strip())
    offset = int(m.group(1)) if m else None
    payload = line.split("payload: ", 1)[1].strip()
    out: dict = {"offset": offset, "raw": payload}
    if payload.startswith("RemoteLogSegmentMetadataUpdate{"):
        out["kind"] = "segment-update"
    elif payload.startswith("RemoteLogSegmentMetadata{"):
        out["kind"] = "segment-metadata"
    elif payload.startswith("RemotePartitionDeleteMetadata{"):
        out["kind"] = "partition-delete"
    else:
        out["kind"] = "other"
        return out
    tip = _TIP.search(payload)
    if tip:
        out.update(topic_id=tip.group(1), topic=tip.group(2), partition=int(tip.group(3)), segment_id=tip.group(4))
    dtp = _DELETE_TP.search(payload)
    if dtp:
        out.update(topic_id=dtp.group(1), topic=dtp.group(2), partition=int(dtp.group(3)))
    for k, v in _FIELD.findall(payload):
        out[k] = int(v)
    st = _STATE.search(payload)
    out["state"] = st.group(1) if st else None
    ep = _EPOCHS.search(payload)
    if ep:
        out["segmentLeaderEpochs"] = [tuple(int(x) for x in kv.split("=")) for kv in ep.group(1).split(", ") if kv]
    txn = _TXN.search(payload)
    if txn:
        out["txnIdxEmpty"] = txn.group(1) == "true"
    return out


def dump_remote_log_metadata(partition_dir: str | Path, classpath: str | None = None) -> list[dict]:
    """Every record of one ``__remote_log_metadata-N`` dir as Kafka decodes it."""
    classpath = classpath or kafka_classpath()
    logs = sorted(str(p) for p in Path(partition_dir).glob("*.log"))
    if not logs:
        return []
    proc = run_tool(classpath, MAIN_CLASS, ["--remote-log-metadata-decoder", "--files", ",".join(logs)],
                    timeout_s=300, text=True, errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"DumpLogSegments --remote-log-metadata-decoder failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    return [p for p in (parse_payload(line) for line in proc.stdout.splitlines()) if p is not None]
