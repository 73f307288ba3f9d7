"""Key statistics for the check cases (tests/check_cases/*.yaml ``keys:``), built from records.

A case describes what producers wrote; the records are made and fed to real
:class:`auditor.keys.sketches.KeyStats` (offsets and times per partition, in order), then
:func:`auditor.keys.audit_keys.build_key_audit` makes the context's ``keys``, as an audit does::

    keys:
      prefix_bytes: 0                       # optional: what the config allows to show
      topics:
        orders:
          partitions: 4                     # the metadata log's count (omit: highest partition + 1)
          added: [{partition: 3, offset: 212, timestamp_ms: 2024-03-09T12:00:00Z}]  # partitions added
          produce:                          # in order
            - {keys: 200, prefix: cust-, records_each: 2, partitioner: murmur2, count: 3, time: 2024-03-09T00:00:00Z}
            - {key: hot, records: 500, partitioner: crc32, value_bytes: 100}
            - {null_keys: 300, partition: 2}  # records without a key, in one partition
            - {keys: 10, prefix: x-, partition: 1}   # explicit partition

``partitioner`` is a family of :mod:`auditor.keys.partitioners`; ``count`` defaults to the topic's
``partitions``. Every partition up to the count gets a summary (an empty one when nothing landed).
"""

from __future__ import annotations

from auditor.keys.audit_keys import build_key_audit
from auditor.keys.partition_keys import PartitionKeys
from auditor.keys.partitioners import FAMILY_BY_NAME, KeyHashes, partition_for
from auditor.keys.sketches import KeyStats

DEFAULT_TIME_MS = 1_700_000_000_000


def _records(line: dict, count: int):
    """(key or None, partition, value bytes) of one ``produce`` line, in order."""
    value_bytes = int(line.get("value_bytes", 10))
    if "null_keys" in line:
        for _ in range(int(line["null_keys"])):
            yield None, int(line["partition"]), value_bytes
        return
    names = [str(line["key"])] if "key" in line else [f"{line.get('prefix', 'k-')}{i}" for i in range(int(line["keys"]))]
    repeat = int(line.get("records", line.get("records_each", 1)))
    family = line.get("partitioner")
    for name in names:
        key = name.encode()
        if family is not None:
            partition = partition_for(FAMILY_BY_NAME[family], KeyHashes.of(key), int(line.get("count", count)))
        else:
            partition = int(line["partition"])
        for _ in range(repeat):
            yield key, partition, value_bytes


def key_audit_of(case_keys: dict | None, to_ms):
    """The ``KeyAudit`` a case's ``keys:`` section describes (``to_ms``: the case file's time
    reader, ISO-8601 or epoch ms); None without one."""
    if case_keys is None:
        return None
    prefix = int(case_keys.get("prefix_bytes", 0))
    pairs, counts, added = [], {}, {}
    for topic, spec in (case_keys.get("topics") or {}).items():
        count = spec.get("partitions")
        if count is not None:
            counts[topic] = int(count)
        if spec.get("added"):
            added[topic] = [{"partition": a["partition"], "offset": a["offset"], "timestamp_ms": to_ms(a["timestamp_ms"])}
                            for a in spec["added"]]
        stats: dict[int, KeyStats] = {}
        next_offset: dict[int, int] = {}
        for line in spec.get("produce") or []:
            time_ms = to_ms(line.get("time")) or DEFAULT_TIME_MS
            for key, partition, value_bytes in _records(line, int(count or 1)):
                offset = next_offset.get(partition, 0)
                stats.setdefault(partition, KeyStats(prefix_bytes=prefix)).add(key, value_bytes, offset, time_ms)
                next_offset[partition] = offset + 1
        for p in range(max([*stats, (count or 0) - 1], default=-1) + 1):
            found = stats.get(p, KeyStats(prefix_bytes=prefix)).seal()
            last = next_offset.get(p)
            pairs.append(({"broker_id": 1, "log_dir": "/data/kafka", "topic": topic, "partition": p, "dir_kind": "live",
                           "dir_name": f"{topic}-{p}"},
                          PartitionKeys(found, "all", None, 0, 0, 0 if last else None, None if last is None else last - 1)))
    return build_key_audit(pairs, "check case", prefix_bytes=prefix, counts=counts, added=added)

