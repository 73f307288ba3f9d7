"""The projection: per filesystem, bytes over the next ``horizon`` as retention really steps them,
the steady state, and when it reaches 100% and the headroom (pure: numpy columns and dicts in,
plain values out).

Used bytes at time t after the filesystem was statted (its origin):
``fixed + existing(t) + going(t) + sum over growing replicas of active + future(t)``, where
``fixed`` is what is not Kafka's segments (other files, held constant) plus the Kafka files held
constant, ``existing`` the closed segments not yet deleted, ``going`` the ``*.deleted`` files not
yet gone, and each growing replica's segments written from now on: ``rate * t`` less the whole
segments the time rule has deleted by t (``auditor.capacity.replicas``), capped by the size rule
(``retention.bytes`` + a segment + the growth between checks and before the delete). "Full" is
the bytes the broker can use: used now + available to unprivileged users (``f_bavail``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from auditor.capacity.columns import SegmentColumns
from auditor.capacity.filesystems import Filesystems, group_filesystems
from auditor.capacity.compaction import key_bounds
from auditor.capacity.ledger import build_ledger
from auditor.capacity.replicas import RATE_OK, RATE_STATES, Replicas, build_replicas, steady_state
from auditor.capacity.rules import TopicRules
from auditor.capacity.explain import describe, topic_medians


@dataclass
class CapacitySettings:
    horizon_s: float = 30 * 86400.0
    headroom: float = 0.85
    rate_window_s: float = 86400.0
    idle_after_s: float = 3600.0
    grid_points: int = 240
    """Geometric grid from 1 s to the horizon (6% steps at 30 days); a crossing is refined between two points."""
    series_points: int = 120


@dataclass
class CapacityResult:
    """One entry per filesystem (the findings JSON's ``capacity`` section: the fixed fields and
    more), and notes said once (e.g. manifests without capacity)."""

    filesystems: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    settings: CapacitySettings = field(default_factory=CapacitySettings)
    ledger: object | None = None
    """What the history keeps of each replica (``auditor.capacity.ledger.Ledger``), None when not built."""
    replica_steady: object | None = None
    """Each replica's steady state (``auditor.capacity.steady.SteadyStates``) when asked for: what
    the reassignment plan balances."""


@dataclass
class _Model:
    fs: Filesystems
    reps: Replicas
    going: np.ndarray
    fixed: np.ndarray
    events_key: np.ndarray
    events_cum: np.ndarray
    existing0: np.ndarray
    capped: np.ndarray
    medians: dict = field(default_factory=dict)
    """Each topic's median replica ingress rate (the skew cause)."""


def _build(fs: Filesystems, reps: Replicas, going: np.ndarray, constant: np.ndarray) -> _Model:
    n = len(fs.total)
    capped = np.isfinite(reps.cap)
    seg_capped = capped[reps.seg_replica] if len(reps.seg_replica) else np.zeros(0, dtype=bool)
    seg_fs = reps.fs[reps.seg_replica] if len(reps.seg_replica) else np.zeros(0, dtype=np.int64)
    keep = ~seg_capped
    ev_fs, ev_t, ev_b = seg_fs[keep], reps.seg_delete_s[keep], reps.seg_bytes[keep]
    order = np.lexsort((ev_t, ev_fs))
    key = ev_fs[order] * 1e13 + np.minimum(ev_t[order], 1e12)
    cum = np.concatenate([[0.0], np.cumsum(ev_b[order])])
    existing0 = np.bincount(ev_fs, weights=ev_b, minlength=n)
    kafka_projected = (np.bincount(reps.fs, weights=reps.bytes_now, minlength=n)
                       + np.bincount(going[0].astype(np.int64), weights=going[1], minlength=n))
    fixed = fs.used - kafka_projected
    fs.kafka_bytes = kafka_projected + constant
    return _Model(fs, reps, going, fixed, key, cum, existing0, capped)


def _future(reps: Replicas, idx: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Bytes of the segments a growing replica writes from time 0 (its active one included),
    rows ``idx``, at times ``t`` (len(idx) x len(t))."""
    g, a, roll, tau = (x[idx, None] for x in (reps.rate, reps.active_bytes, reps.t_roll, reps.tau))
    ret, block, lag = reps.retention_s[idx, None], reps.block_s[idx, None], (reps.check_s + reps.delay_s)[idx, None]
    time_rule = (reps.deletes & np.isfinite(reps.retention_s))[idx, None]
    tt = t[None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        free_from = tt - lag  # a segment due before this is gone at tt
        unblocked = free_from >= block
        first_gone = time_rule & unblocked & (free_from >= roll + ret)
        n_gone = np.where(time_rule & unblocked, np.floor((free_from - ret - roll) / tau), 0.0)
        n_gone = np.clip(np.nan_to_num(n_gone, nan=0.0, posinf=0.0), 0.0, None)
        out = a + g * tt - np.where(first_gone, a + g * roll, 0.0) - g * tau * n_gone
    return out


def _existing_capped(m: _Model, idx: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Existing closed segments still there at ``t``, per capped replica ``idx`` (len(idx) x len(t))."""
    reps = m.reps
    sel = np.isin(reps.seg_replica, idx)
    rep, tt, bb = reps.seg_replica[sel], reps.seg_delete_s[sel], reps.seg_bytes[sel]
    order = np.argsort(idx, kind="stable")
    pos = order[np.searchsorted(idx[order], rep)]
    out = np.zeros((len(idx), len(t)))
    for j, when in enumerate(t):
        out[:, j] = np.bincount(pos, weights=np.where(tt > when, bb, 0.0), minlength=len(idx))
    return out


def used_at(m: _Model, fs_ids: np.ndarray, t: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Projected used bytes of filesystems ``fs_ids`` at times ``t`` (s after each one's origin)."""
    out = np.repeat(m.fixed[fs_ids, None], len(t), axis=1)
    for k, f in enumerate(fs_ids):
        lo, hi = np.searchsorted(m.events_key, [f * 1e13 - 1e12, f * 1e13 + 1e12 + 1])
        gone = np.searchsorted(m.events_key[lo:hi], f * 1e13 + np.minimum(t, 1e12), side="right")
        out[k] += m.existing0[f] - (m.events_cum[lo + gone] - m.events_cum[lo])
        sel = m.going[0] == f
        out[k] += np.where(t[:, None] < m.going[2][sel][None, :], m.going[1][sel][None, :], 0.0).sum(axis=1)
    reps = m.reps
    where = np.full(int(max(fs_ids.max(initial=0), reps.fs.max(initial=0))) + 1, -1, dtype=np.int64)
    where[fs_ids] = np.arange(len(fs_ids))
    pick = np.flatnonzero(np.isin(reps.fs, fs_ids) & ((reps.rate > 0) | m.capped))
    pick = pick[np.argsort(reps.fs[pick], kind="stable")]
    for lo in range(0, len(pick), chunk):
        idx = pick[lo:lo + chunk]
        part = np.where((reps.rate[idx] > 0)[:, None], _future(reps, idx, t), 0.0)
        capped = m.capped[idx]
        if capped.any():
            ci = idx[capped]
            total = part[capped] + _existing_capped(m, ci, t)
            lag = (reps.check_s + reps.delay_s)[ci, None]
            part[capped] = np.where(t[None, :] >= lag, np.minimum(total, reps.cap[ci, None]), total)
        rows = where[reps.fs[idx]]
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        out[rows[starts]] += np.add.reduceat(part, starts, axis=0)
    return out


def _crossing(m: _Model, f: int, grid: np.ndarray, used: np.ndarray, limit: float) -> float | None:
    """The first time (s) filesystem ``f`` reaches ``limit``: on the grid, then refined between the two grid points."""
    over = np.flatnonzero(used >= limit)
    if not len(over):
        return None
    i = int(over[0])
    if i == 0:
        return 0.0
    fine = np.linspace(grid[i - 1], grid[i], 65)  # the grid's 6% step in 64: 0.1%
    fine_used = used_at(m, np.array([f]), fine)[0]
    j = int(np.flatnonzero(fine_used >= limit)[0]) if (fine_used >= limit).any() else 64
    return float(fine[j])


def project_capacity(cols: SegmentColumns, log_dirs: list[dict], rules: dict[str, TopicRules], as_of_ms: int,
                     settings: CapacitySettings | None = None, keys: dict | None = None) -> CapacityResult:
    """The capacity section: one entry per filesystem under the audited log dirs. ``keys``: per
    (topic, partition) the key statistics that bound compact-only topics
    (``auditor.capacity.compaction.keys_from_audit``), None or empty: none."""
    settings = settings or CapacitySettings()
    fs = group_filesystems(log_dirs)
    result = CapacityResult(notes=list(fs.notes), settings=settings)
    topics = cols.labels["topic"]
    rule_list = [rules.get(t) or TopicRules() for t in topics]
    if not len(fs.total):
        result.filesystems = fs.unknown
        result.ledger = build_ledger(cols, None, rule_list)
        return result
    fs_of_dir = np.array([fs.index_of.get(d, -1) for d in cols.labels["log_dir"]], dtype=np.int64)
    reps, going, constant = build_replicas(cols, fs_of_dir, fs.origin_ms, rule_list, settings.rate_window_s,
                                           settings.idle_after_s)
    key_bounds(reps, topics, rule_list, keys)
    m = _build(fs, reps, going, constant)
    m.medians = topic_medians(reps)
    grid = np.concatenate([[0.0], np.geomspace(1.0, settings.horizon_s, settings.grid_points)])
    used = used_at(m, np.arange(len(fs.total)), grid)
    steady = steady_state(reps, settings.horizon_s)
    for f in range(len(fs.total)):
        full = _crossing(m, f, grid, used[f], fs.capacity[f])
        head = _crossing(m, f, grid, used[f], fs.capacity[f] * settings.headroom)
        result.filesystems.append(describe(m, f, full, head, grid, used[f], steady, topics, rule_list, cols, as_of_ms,
                                           settings))
    result.filesystems.sort(key=lambda e: (e["seconds_to_full"] is None, e["seconds_to_full"] or 0))
    result.filesystems += fs.unknown
    result.ledger = build_ledger(cols, reps, rule_list)
    return result


__all__ = ["CapacityResult", "CapacitySettings", "TopicRules", "project_capacity", "used_at", "RATE_OK",
           "RATE_STATES", "math"]
