"""Each partition replica's bytes at retention steady state, one by one (what the reassignment
planner balances by default: ``kafka-audit plan --balance steady``).

The same projection as the capacity section (:func:`auditor.capacity.replicas.steady_state`):
the top of a replica's sawtooth once Kafka's retention rules hold it. Expressed in ``.log`` bytes,
like the sizes the planner moves: the projection counts index files too, so its figure is scaled
by the replica's share of ``.log`` bytes today (a replica with no bytes today: by the index
overhead the projection adds to a rate).

Where it is not known the answer says why instead (:data:`UNKNOWN`): the replica's log dir has no
filesystem recorded (the projection's time origin is when the filesystem was statted), its rate
is not measurable (one record, no timestamps, an absurd record-time span), or nothing bounds it
(a growing topic with neither time nor size retention, or a growing compact-only topic).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from auditor.capacity.columns import SegmentColumns
from auditor.capacity.compaction import key_bounds
from auditor.capacity.filesystems import group_filesystems
from auditor.capacity.replicas import (INDEX_OVERHEAD, RATE_ABSURD, RATE_NO_TIMESTAMPS, RATE_ONE_RECORD,
                                       build_replicas, classify, steady_state)
from auditor.capacity.rules import TopicRules

CAPACITY_UNKNOWN, NO_RATE, UNBOUNDED, NOT_PROJECTED = "capacity unknown", "no rate", "unbounded", "not projected"
UNKNOWN = {
    CAPACITY_UNKNOWN: "its log dir's filesystem is not recorded (capacity unknown): the projection has no time origin",
    NO_RATE: "no ingress rate can be measured (one record, no record timestamps, or an absurd record-time span)",
    UNBOUNDED: "nothing bounds it at steady state (growing with neither time nor size retention, or compact-only "
               "without key statistics)",
    NOT_PROJECTED: "no segment of it was read (no replica on disk, or an empty partition dir)",
}
"""Why a replica's steady state is unknown: short key -> the sentence the plan's summary gives."""


@dataclass
class SteadyStates:
    """``by_replica``: (absolute log dir, topic, partition) -> (steady ``.log`` bytes, None) or (None, why:
    a key of :data:`UNKNOWN`)."""

    by_replica: dict[tuple[str, str, int], tuple[float | None, str | None]] = field(default_factory=dict)
    unknown_dirs: set[str] = field(default_factory=set)
    """Log dirs whose filesystem is not recorded: every replica in them is ``capacity unknown``."""

    def get(self, log_dir: str | None, topic: str, partition: int) -> tuple[float | None, str]:
        if log_dir is None:
            return None, NOT_PROJECTED
        d = os.path.abspath(log_dir)
        if d in self.unknown_dirs:
            return None, CAPACITY_UNKNOWN
        value, why = self.by_replica.get((d, topic, int(partition)), (None, NOT_PROJECTED))
        return value, why


def replica_steady_states(cols: SegmentColumns, log_dirs: list[dict], rules: dict[str, TopicRules],
                          horizon_s: float = 30 * 86400.0, rate_window_s: float = 86400.0,
                          idle_after_s: float = 3600.0, keys: dict | None = None) -> SteadyStates:
    """Every live replica's steady state from the segment columns and the log-dir rows (with
    ``auditor.scan.filesystem.FS_FIELDS``), ``rules`` per topic (absent: Kafka's defaults);
    ``keys``: the key statistics that bound compact-only topics (``auditor.capacity.compaction``)."""
    fs = group_filesystems(log_dirs)
    out = SteadyStates(unknown_dirs={os.path.abspath(e["log_dirs"][0]) for e in fs.unknown if e["log_dirs"][0]})
    if not len(fs.total):
        return out
    labels = cols.labels["log_dir"]
    fs_of_dir = np.array([fs.index_of.get(d, -1) for d in labels], dtype=np.int64)
    out.unknown_dirs |= {os.path.abspath(d) for d, f in zip(labels, fs_of_dir) if f < 0 and d is not None}
    topics = cols.labels["topic"]
    rule_list = [rules.get(t) or TopicRules() for t in topics]
    reps, _going, _constant = build_replicas(cols, fs_of_dir, fs.origin_ms, rule_list, rate_window_s, idle_after_s)
    key_bounds(reps, topics, rule_list, keys)
    steady = steady_state(reps, horizon_s)
    log_now = _log_bytes(cols, fs_of_dir, reps)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(reps.bytes_now > 0, log_now / reps.bytes_now, 1.0 / (1 + INDEX_OVERHEAD))
    no_rate = np.isin(reps.rate_state, (RATE_ONE_RECORD, RATE_ABSURD, RATE_NO_TIMESTAMPS))
    for r in range(len(reps.rate)):
        key = (os.path.abspath(labels[reps.log_dir[r]]), topics[reps.topic[r]], int(reps.partition[r]))
        s = steady[r]
        if no_rate[r]:
            out.by_replica[key] = (None, NO_RATE)
        elif not np.isfinite(s):
            out.by_replica[key] = (None, UNBOUNDED)
        else:
            out.by_replica[key] = (float(s * share[r]), None)
    return out


def _log_bytes(cols: SegmentColumns, fs_of_dir: np.ndarray, reps) -> np.ndarray:
    """Each projected replica's ``.log`` bytes today (the live rows the projection read)."""
    _fs, live, _going, _constant = classify(cols, fs_of_dir)
    idx = np.flatnonzero(live)
    n_t = max(len(cols.labels["topic"]), 1) + 1
    n_p = int(np.nanmax(cols.num["partition"][idx], initial=0)) + 2 if len(idx) else 2

    def key(d, t, p):
        return (np.asarray(d, dtype=np.int64) * n_t + (np.asarray(t, dtype=np.int64) + 1)) * n_p + (
            np.nan_to_num(np.asarray(p, dtype=np.float64), nan=-1).astype(np.int64) + 1)

    rep_keys = key(reps.log_dir, reps.topic, reps.partition)
    order = np.argsort(rep_keys, kind="stable")
    row_keys = key(cols.codes["log_dir"][idx], cols.codes["topic"][idx], cols.num["partition"][idx])
    pos = np.clip(np.searchsorted(rep_keys[order], row_keys), 0, max(len(order) - 1, 0))
    hit = (rep_keys[order][pos] == row_keys) if len(order) else np.zeros(len(idx), dtype=bool)
    return np.bincount(order[pos[hit]], weights=np.nan_to_num(cols.num["log_size_bytes"][idx][hit]),
                       minlength=len(reps.rate))
