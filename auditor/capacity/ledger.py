"""What a run records of each partition replica so the next run can tell the bytes written in
between (model against observation, with ``--history``).

Per live replica (broker, log dir, topic, partition): its end offset, its active segment's base
offset and log bytes, its log start (oldest segment's base offset), its log bytes, the model's
ingress rate (bytes/s, NaN where its filesystem was not projected) and the retention rules the
projection applied. The segments themselves (base offset, log bytes, in replica order) stay in
memory for this run's side of the comparison (:mod:`auditor.capacity.observed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from auditor.capacity.columns import SegmentColumns
from auditor.capacity.replicas import Replicas, group_starts
from auditor.capacity.rules import TopicRules


@dataclass
class Ledger:
    """Per replica arrays (index r) and per segment arrays in (replica, base offset) order."""

    broker: np.ndarray
    log_dir: list
    topic: list
    partition: np.ndarray
    end_offset: np.ndarray
    """The last offset + 1 (NaN: no offsets recorded)."""
    active_base: np.ndarray
    active_log_bytes: np.ndarray
    log_start: np.ndarray
    log_bytes: np.ndarray
    model_rate: np.ndarray
    """The projection's ingress rate of the replica (bytes/s, index files included; NaN: not projected)."""
    retention_ms: np.ndarray
    retention_bytes: np.ndarray
    """-1: none (Kafka's spelling)."""
    cleanup: list
    seg_start: np.ndarray
    """Index of each replica's first segment in ``seg_base`` / ``seg_bytes`` (len n + 1)."""
    seg_base: np.ndarray
    seg_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.partition)

    def bytes_from(self, r: int, base: float) -> float | None:
        """Log bytes of replica ``r``'s segments from the one at ``base`` on (None: no segment starts there)."""
        lo, hi = int(self.seg_start[r]), int(self.seg_start[r + 1])
        bases = self.seg_base[lo:hi]
        k = int(np.searchsorted(bases, base))
        if k >= len(bases) or bases[k] != base:
            return None
        return float(self.seg_bytes[lo + k:hi].sum())


def _replica_key(log_dir: np.ndarray, topic: np.ndarray, partition: np.ndarray) -> np.ndarray:
    """One int64 per (log dir code, topic code, partition): 20 + 20 + 23 bits (the caller checks the
    codes fit; a partition number that does not fit, or none, maps to one sentinel)."""
    p = np.where(np.isfinite(partition) & (partition >= 0) & (partition < 2 ** 23), partition, 2 ** 23 - 1).astype(np.int64)
    return ((np.asarray(log_dir, dtype=np.int64) + 1) << 43) | ((np.asarray(topic, dtype=np.int64) + 1) << 23) | p


def _policy(rule: TopicRules) -> str:
    return ",".join(p for p, on in (("compact", rule.compacts), ("delete", rule.deletes)) if on) or "delete"


def build_ledger(cols: SegmentColumns, reps: Replicas | None, rule_list: list[TopicRules]) -> Ledger:
    """The ledger of the live rows of ``cols`` (every log dir, statted or not); ``reps``: the
    projected replicas (their rates), None when none were projected."""
    kind = cols.codes["dir_kind"]
    live_code = cols.labels["dir_kind"].index("live") if "live" in cols.labels["dir_kind"] else -2
    live = (kind == live_code) & (cols.codes["file_state"] < 0) & ~np.isnan(cols.num["log_size_bytes"])
    idx = np.flatnonzero(live)
    order = idx[np.lexsort((cols.num["base_offset"][idx], cols.num["partition"][idx], cols.codes["topic"][idx],
                            cols.codes["log_dir"][idx]))]
    keys = [cols.codes["log_dir"][order], cols.codes["topic"][order], cols.num["partition"][order]]
    starts = group_starts(keys) if len(order) else np.zeros(0, dtype=np.int64)
    last = np.append(starts[1:], len(order)) - 1 if len(starts) else np.zeros(0, dtype=np.int64)
    num = {k: v[order] for k, v in cols.num.items()}
    base, size = num["base_offset"], np.nan_to_num(num["log_size_bytes"])
    with np.errstate(invalid="ignore"):
        end = np.fmax.reduceat(num["last_offset"], starts) + 1 if len(starts) else np.zeros(0)
    ld_code = keys[0][starts] if len(starts) else np.zeros(0, dtype=np.int64)
    t_code = keys[1][starts] if len(starts) else np.zeros(0, dtype=np.int64)
    part = num["partition"][starts] if len(starts) else np.zeros(0)
    model_rate = np.full(len(starts), np.nan)
    fits = max(len(cols.labels["log_dir"]), len(cols.labels["topic"])) < 2 ** 20 - 1
    if reps is not None and len(reps.rate) and len(starts) and fits:
        mine, theirs = _replica_key(ld_code, t_code, part), _replica_key(reps.log_dir, reps.topic, reps.partition)
        by_key = np.argsort(theirs, kind="stable")
        at = np.clip(np.searchsorted(theirs[by_key], mine), 0, len(by_key) - 1)
        found = theirs[by_key][at] == mine
        model_rate[found] = reps.rate[by_key][at][found]
    rules = [rule_list[t] if t >= 0 else TopicRules() for t in t_code]
    return Ledger(
        broker=num["broker_id"][starts] if len(starts) else np.zeros(0),
        log_dir=[cols.label("log_dir", int(c)) for c in ld_code], topic=[cols.label("topic", int(c)) for c in t_code],
        partition=part, end_offset=end, active_base=base[last] if len(starts) else np.zeros(0),
        active_log_bytes=size[last] if len(starts) else np.zeros(0),
        log_start=base[starts] if len(starts) else np.zeros(0),
        log_bytes=np.add.reduceat(size, starts) if len(starts) else np.zeros(0),
        model_rate=model_rate,
        retention_ms=np.array([r.retention_s * 1000.0 if math.isfinite(r.retention_s) else -1.0 for r in rules]),
        retention_bytes=np.array([r.retention_bytes if math.isfinite(r.retention_bytes) else -1.0 for r in rules]),
        cleanup=[_policy(r) for r in rules],
        seg_start=np.append(starts, len(order)).astype(np.int64), seg_base=base, seg_bytes=size)


def _int(x) -> int | None:
    return None if x is None or not math.isfinite(float(x)) else int(round(float(x)))


def replica_rows(ledger: Ledger) -> list[dict]:
    """The ledger as the history's replica rows (``auditor.nightly.capacity_history``)."""
    return [{"broker_id": _int(ledger.broker[r]), "log_dir": ledger.log_dir[r], "topic": ledger.topic[r],
             "partition": _int(ledger.partition[r]), "end_offset": _int(ledger.end_offset[r]),
             "active_base_offset": _int(ledger.active_base[r]), "active_log_bytes": _int(ledger.active_log_bytes[r]),
             "log_start_offset": _int(ledger.log_start[r]), "log_bytes": _int(ledger.log_bytes[r]),
             "model_bytes_per_s": (float(ledger.model_rate[r]) if math.isfinite(ledger.model_rate[r]) else None),
             "retention_ms": _int(ledger.retention_ms[r]), "retention_bytes": _int(ledger.retention_bytes[r]),
             "cleanup_policy": ledger.cleanup[r]} for r in range(len(ledger))]
