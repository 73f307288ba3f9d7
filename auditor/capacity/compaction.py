"""Compact-only topics: retention never shrinks them, the log cleaner does, down to one record per
key. With key statistics (``--keys``, or manifests collected with ``--keys``: a HyperLogLog of the
distinct keys per partition and the log bytes per record read) a growing compact-only replica is
bounded; without them it is said to be unbounded by what is known.

The bound is the top of the cleaner's cycle, as the projection follows the upper edge elsewhere:
the cleaned part holds ``K`` records of ``b`` bytes (``K`` distinct keys, ``b`` the log bytes per
record read); the cleaner takes the log once its dirty closed segments are
``min.cleanable.dirty.ratio`` ``r`` of the whole, so the log reaches ``K b / (1 - r)`` before a
pass, plus a segment (the dirty part grows in whole segments) and what is written while the
cleaner waits to look again (``rate x log.cleaner.backoff.ms``); a pass writes the cleaned copy
while the old files stay (then linger ``file.delete.delay.ms`` as ``*.deleted``): ``+ K b``; the
active segment is never cleaned (``+`` a segment: ``min(rate x segment time, segment.bytes)``);
records younger than ``min.compaction.lag.ms`` are not cleaned (``+ rate x lag``). Tombstones kept
for ``delete.retention.ms`` and a cleaner that falls behind are not modelled (said in the docs).
The key statistics must cover the whole log (all records read): a sample's distinct keys are a
lower bound, not a bound.
"""

from __future__ import annotations

import math

import numpy as np

from auditor.capacity.replicas import Replicas
from auditor.capacity.rules import TopicRules


def key_bounds(reps: Replicas, topics: list, rule_list: list[TopicRules], keys: dict | None) -> None:
    """Sets ``reps.key_bound`` (bytes; NaN: none) and ``reps.keys_known`` for growing compact-only
    replicas, and caps their projection at ``max(bound, bytes now)`` (the cleaner brings a log
    above its bound down only when it runs: until then it is held, never dropped)."""
    n = len(reps.rate)
    reps.key_bound = np.full(n, np.nan)
    reps.distinct_keys = np.full(n, np.nan)
    if not keys:
        return
    for r in np.flatnonzero((reps.rate > 0) & ~reps.deletes):
        t = int(reps.topic[r])
        if t < 0 or not math.isfinite(reps.partition[r]):
            continue
        info = keys.get((topics[t], int(reps.partition[r])))
        if not info or not info.get("complete") or not info.get("bytes_per_record") or info.get("distinct_keys") is None:
            continue
        rule = rule_list[t]
        clean = float(info["distinct_keys"]) * float(info["bytes_per_record"])
        ratio = min(rule.dirty_ratio, 0.99)
        segment = min(reps.rate[r] * reps.tau[r], rule.segment_bytes) if math.isfinite(reps.tau[r]) else rule.segment_bytes
        bound = (clean / (1.0 - ratio) + segment + reps.rate[r] * rule.cleaner_backoff_s + clean + segment
                 + reps.rate[r] * rule.compaction_lag_s)
        reps.key_bound[r] = bound
        reps.distinct_keys[r] = float(info["distinct_keys"])
        reps.cap[r] = max(bound, reps.bytes_now[r])


def keys_from_audit(key_audit) -> dict:
    """``{(topic, partition): {distinct_keys, relative_error, bytes_per_record, complete}}`` from an
    ``auditor.keys.audit_keys.KeyAudit`` (None or not run: empty)."""
    if key_audit is None or not getattr(key_audit, "ran", False):
        return {}
    out = {}
    for (topic, partition), read in key_audit.partitions.items():
        records = read.stats.records
        out[(topic, partition)] = {
            "distinct_keys": read.stats.hll.estimate() if records else None,
            "relative_error": read.stats.hll.relative_error,
            "bytes_per_record": (read.scanned_bytes / records) if records else None,
            "complete": read.mode == "all" or (read.log_bytes is not None and read.scanned_bytes >= read.log_bytes)}
    return out
