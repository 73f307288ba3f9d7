"""Segment columns -> partition replicas: their bytes, ingress rates and retention times (numpy).

A replica is one live partition dir (log dir, topic, partition). Its rate is the bytes of its
recent segments (those whose largest timestamp lies within ``rate_window_s`` of its newest record,
the active one included) over the record-time span they cover; a replica whose newest record is
older than ``idle_after_s`` grows by 0; one record, no timestamps, or a span that is negative,
under a second or absurd (before 2000, over 10 years) gives no rate ("unknown", said, counted as 0).

Each closed segment's deletion time follows the time rule on its largest timestamp, blocked by any
earlier segment's (a running maximum: a future timestamp stops retention there), at the latest
check after it is due, its files gone ``file.delete.delay.ms`` later. Files already renamed
``*.deleted`` (and ``-delete`` dirs) go within the delay; ``-future``, stray, cleaned and swap
files and the metadata log are held constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from auditor.capacity.columns import SegmentColumns
from auditor.capacity.rules import TopicRules

INDEX_ENTRY_BYTES = {"index_entries": 8, "timeindex_entries": 12}
INDEX_OVERHEAD = 20 / 4096
"""Index bytes written per log byte (an .index and a .timeindex entry every ``index.interval.bytes``, 4096 by default)."""
MIN_SANE_MS = 946_684_800_000  # 2000-01-01
MAX_SPAN_S = 10 * 365 * 86400.0
MIN_SPAN_S = 1.0
FUTURE_TOLERANCE_MS = 60_000
RATE_OK, RATE_IDLE, RATE_ONE_RECORD, RATE_ABSURD, RATE_NO_TIMESTAMPS = range(5)
RATE_STATES = ("measured", "idle", "one record or one timestamp", "absurd record-time span", "no timestamps")


@dataclass
class Replicas:
    """Per replica arrays (index r), and per live segment row arrays in replica order (index i)."""

    fs: np.ndarray
    log_dir: np.ndarray
    topic: np.ndarray
    partition: np.ndarray
    broker: np.ndarray
    bytes_now: np.ndarray
    rate: np.ndarray
    rate_state: np.ndarray
    active_bytes: np.ndarray
    t_roll: np.ndarray
    tau: np.ndarray
    retention_s: np.ndarray
    block_s: np.ndarray
    check_s: np.ndarray
    delay_s: np.ndarray
    cap: np.ndarray
    deletes: np.ndarray
    blocked_until_ms: np.ndarray
    seg_replica: np.ndarray
    seg_bytes: np.ndarray
    seg_delete_s: np.ndarray
    """When each existing segment's files are gone (s after the origin; inf: never). The active
    segment of a growing replica is not among them (it is the projection's first segment)."""
    ahead_ms: np.ndarray | None = None
    """Per replica: its newest record timestamp minus when its filesystem was statted (ms; NaN: no
    timestamp): positive on most replicas of a filesystem means clocks disagree (producers' or the
    broker's), which the notes say."""
    key_bound: np.ndarray | None = None
    """Per replica: a growing compact-only replica's bound from its distinct keys (bytes; NaN: none
    known; ``auditor.capacity.compaction``)."""
    distinct_keys: np.ndarray | None = None


def row_bytes(cols: SegmentColumns) -> np.ndarray:
    """Bytes each segment row holds on disk: its files, the active segment's preallocated index
    files counted by their entries (sparse beyond them)."""
    num = cols.num
    total = np.nan_to_num(num["log_size_bytes"]) + np.nan_to_num(num["txnindex_size_bytes"])
    for size, entries in (("index_size_bytes", "index_entries"), ("timeindex_size_bytes", "timeindex_entries")):
        used = np.nan_to_num(num[entries]) * INDEX_ENTRY_BYTES[entries]
        total += np.where(cols.active, np.minimum(used, np.nan_to_num(num[size], nan=np.inf)), np.nan_to_num(num[size]))
    return total


def _code(cols: SegmentColumns, column: str, value: str) -> int:
    try:
        return cols.labels[column].index(value)
    except ValueError:
        return -2


def classify(cols: SegmentColumns, fs_of_dir: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(fs of each row (-1: unknown), live rows, rows that go within the delete delay, constant rows)."""
    d = cols.codes["log_dir"]
    fs = np.where(d >= 0, fs_of_dir[np.clip(d, 0, max(len(fs_of_dir) - 1, 0))] if len(fs_of_dir) else -1, -1)
    kind, state = cols.codes["dir_kind"], cols.codes["file_state"]
    known = fs >= 0
    live = known & (kind == _code(cols, "dir_kind", "live")) & (state < 0) & ~np.isnan(cols.num["log_size_bytes"])
    going = known & ~live & ((state == _code(cols, "file_state", "deleted")) | (kind == _code(cols, "dir_kind", "delete")))
    return fs, live, going, known & ~live & ~going


def group_starts(keys: list[np.ndarray]) -> np.ndarray:
    change = np.zeros(len(keys[0]), dtype=bool)
    if len(change):
        change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def _rates(num: dict, active: np.ndarray, starts: np.ndarray, origin: np.ndarray, window_s: float,
           idle_after_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(bytes/s of log data, state) per replica; ``origin`` per row (ms)."""
    ts_max = num["max_timestamp_ms"]
    clipped = np.minimum(ts_max, origin)  # NaN stays NaN: no timestamp is not "now"
    with np.errstate(invalid="ignore"):
        newest = np.fmax.reduceat(clipped, starts) if len(starts) else np.zeros(0)
        counts = np.diff(np.append(starts, len(ts_max)))
        newest_row = np.repeat(newest, counts)
        window = clipped >= newest_row - window_s * 1000.0
        ts_min = num["min_timestamp_ms"]
        for other in ("min_batch_timestamp_ms", "first_batch_max_timestamp_ms", "max_timestamp_ms"):
            ts_min = np.where(np.isnan(ts_min), num[other], ts_min)
        start = np.fmin.reduceat(np.where(window, ts_min, np.nan), starts) if len(starts) else np.zeros(0)
        wbytes = np.add.reduceat(np.where(window, np.nan_to_num(num["log_size_bytes"]), 0.0), starts) if len(starts) else np.zeros(0)
        records = num["record_count"]
        records = np.where(np.isnan(records), num["last_offset"] - num["first_offset"] + 1, records)
        nrec = np.add.reduceat(np.where(window, np.nan_to_num(records, nan=2.0), 0.0), starts) if len(starts) else np.zeros(0)
    span = (newest - start) / 1000.0
    origin_r = origin[starts] if len(starts) else np.zeros(0)
    state = np.full(len(starts), RATE_OK, dtype=np.int64)
    state[(nrec <= 1) | ~(span >= MIN_SPAN_S)] = RATE_ONE_RECORD
    state[(start < MIN_SANE_MS) | (span > MAX_SPAN_S) | (span < 0)] = RATE_ABSURD
    state[np.isnan(newest)] = RATE_NO_TIMESTAMPS
    state[(state == RATE_OK) & ((origin_r - newest) / 1000.0 > idle_after_s)] = RATE_IDLE
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(state == RATE_OK, wbytes / span, 0.0)
    return rate * (1 + INDEX_OVERHEAD), state


def _group_cummax(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` (seconds; finite or +-inf) within consecutive groups (``group``
    non-decreasing, < 2**17 * 2 groups): exact to the millisecond, on int64."""
    if not len(values):
        return values
    bound = 2 ** 44  # ms: +-557 years, a group's band 2**45 wide
    ms = np.clip(np.where(np.isnan(values), -np.inf, values) * 1000.0, -bound, bound)
    keyed = group.astype(np.int64) * (2 * bound + 1) + np.round(ms).astype(np.int64)
    out = (np.maximum.accumulate(keyed) - group.astype(np.int64) * (2 * bound + 1)).astype(np.float64)
    return np.where(out >= bound, np.inf, np.where(out <= -bound, -np.inf, out / 1000.0))


def _rules_columns(rules: list[TopicRules], topic: np.ndarray) -> dict[str, np.ndarray]:
    """Each rule as an array over ``topic`` codes (-1: Kafka's defaults)."""
    table = rules + [TopicRules()]
    pick = np.where(topic >= 0, topic, len(rules))
    out = {}
    for name in ("retention_s", "retention_bytes", "segment_bytes", "segment_s", "delete_delay_s", "check_interval_s"):
        out[name] = np.array([getattr(r, name) for r in table], dtype=np.float64)[pick]
    out["deletes"] = np.array([r.deletes for r in table], dtype=bool)[pick]
    return out


def build_replicas(cols: SegmentColumns, fs_of_dir: np.ndarray, origin_ms: np.ndarray, rules: list[TopicRules],
                   window_s: float, idle_after_s: float) -> tuple[Replicas, np.ndarray, np.ndarray]:
    """(the replicas, files going within the delete delay as (fs, bytes, seconds), constant bytes per fs).
    ``fs_of_dir``: the filesystem index of each ``log_dir`` code (-1: unknown: rows left out);
    ``origin_ms``: per filesystem, when it was statted (the projection's time 0)."""
    fs, live, going, constant = classify(cols, fs_of_dir)
    sizes = row_bytes(cols)
    n_fs = len(origin_ms)
    constant_bytes = np.bincount(fs[constant], weights=sizes[constant], minlength=n_fs) if n_fs else np.zeros(0)
    delay_rows = _rules_columns(rules, cols.codes["topic"])["delete_delay_s"]
    going_events = np.stack([fs[going], sizes[going], delay_rows[going]]) if going.any() else np.zeros((3, 0))
    idx = np.flatnonzero(live)
    order = idx[np.lexsort((cols.num["base_offset"][idx], cols.num["partition"][idx], cols.codes["topic"][idx],
                            cols.codes["log_dir"][idx]))]
    keys = [cols.codes["log_dir"][order], cols.codes["topic"][order], cols.num["partition"][order]]
    starts = group_starts(keys) if len(order) else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.append(starts, len(order)))
    replica = np.repeat(np.arange(len(starts)), counts)
    num = {k: v[order] for k, v in cols.num.items()}
    active = cols.active[order]
    row_origin = origin_ms[fs[order]] if len(order) else np.zeros(0)
    rate, state = _rates(num, active, starts, row_origin, window_s, idle_after_s)
    reps = _replica_rules(cols, order, starts, replica, num, active, sizes[order], row_origin, rate, state, rules)
    reps.fs = fs[order][starts] if len(starts) else np.zeros(0, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        reps.ahead_ms = ((np.fmax.reduceat(num["max_timestamp_ms"], starts) - row_origin[starts]) if len(starts)
                         else np.zeros(0))
    return reps, going_events, constant_bytes


def _replica_rules(cols, order, starts, replica, num, active, sizes, row_origin, rate, state, rules) -> Replicas:
    """The per replica rules and each existing segment's deletion time (see the module docstring)."""
    topic = cols.codes["topic"][order]
    r = _rules_columns(rules, topic[starts] if len(starts) else topic[:0])
    growing = rate > 0
    last = np.append(starts[1:], len(order)) - 1 if len(starts) else np.zeros(0, dtype=np.int64)
    has_active = active[last] if len(starts) else np.zeros(0, dtype=bool)
    active_bytes = np.where(has_active, sizes[last] if len(starts) else 0.0, 0.0)
    active_log = np.where(has_active, np.nan_to_num(num["log_size_bytes"][last]) if len(starts) else 0.0, 0.0)
    roll_base = num["first_batch_max_timestamp_ms"][last] if len(starts) else np.zeros(0)
    roll_base = np.where(np.isnan(roll_base), num["max_timestamp_ms"][last] if len(starts) else 0.0, roll_base)
    age_s = np.nan_to_num((row_origin[starts] - roll_base) / 1000.0) if len(starts) else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_rate = rate / (1 + INDEX_OVERHEAD)
        tau = np.where(growing, np.minimum(r["segment_bytes"] / log_rate, r["segment_s"]), np.inf)
        t_roll = np.where(growing, np.clip(np.minimum((r["segment_bytes"] - active_log) / log_rate,
                                                      r["segment_s"] - age_s), 0.0, None), np.inf)
    # existing segments: the active one of a growing replica is the projection's own
    exists = ~(active & growing[replica]) if len(replica) else np.zeros(0, dtype=bool)
    largest = np.where(np.isnan(num["max_timestamp_ms"]) | (num["max_timestamp_ms"] <= 0), num["log_mtime_ms"],
                       num["max_timestamp_ms"])
    due = (largest - row_origin) / 1000.0 + r["retention_s"][replica]
    due = np.where(np.isnan(due), np.inf, due)  # no time at all: the time rule never deletes it
    due = np.where(exists, due, -np.inf)
    blocked = _group_cummax(due, replica)
    time_rule = r["deletes"][replica] & np.isfinite(r["retention_s"][replica])
    checks = r["check_interval_s"][replica] + r["delete_delay_s"][replica]
    seg_delete = np.where(time_rule, np.maximum(blocked, 0.0) + checks, np.inf)
    block_s = np.maximum.reduceat(np.where(exists, blocked, -np.inf), starts) if len(starts) else np.zeros(0)
    future_ms = np.fmax.reduceat(np.where(exists, num["max_timestamp_ms"] - row_origin, np.nan), starts) if len(starts) else np.zeros(0)
    blocked_until = np.where(np.nan_to_num(future_ms, nan=-np.inf) > FUTURE_TOLERANCE_MS,
                             row_origin[starts] + future_ms + r["retention_s"] * 1000.0 if len(starts) else 0.0, np.nan)
    biggest = np.maximum.reduceat(np.where(exists, sizes, 0.0), starts) if len(starts) else np.zeros(0)
    with np.errstate(invalid="ignore"):
        sigma = np.maximum(np.where(growing, np.minimum(rate * tau, r["segment_bytes"]), 0.0), biggest)
    size_rule = r["deletes"] & np.isfinite(r["retention_bytes"])
    cap = np.where(size_rule, r["retention_bytes"] + sigma + rate * (r["check_interval_s"] + r["delete_delay_s"]), np.inf)
    return Replicas(
        fs=np.zeros(0), log_dir=cols.codes["log_dir"][order][starts] if len(starts) else np.zeros(0, dtype=np.int64),
        topic=topic[starts] if len(starts) else topic[:0], partition=num["partition"][starts] if len(starts) else np.zeros(0),
        broker=num["broker_id"][starts] if len(starts) else np.zeros(0),
        bytes_now=np.bincount(replica, weights=sizes, minlength=len(starts)), rate=rate, rate_state=state,
        active_bytes=np.where(growing, active_bytes, 0.0), t_roll=t_roll, tau=tau, retention_s=r["retention_s"],
        block_s=block_s, check_s=r["check_interval_s"], delay_s=r["delete_delay_s"], cap=cap, deletes=r["deletes"],
        blocked_until_ms=np.where(r["deletes"] & np.isfinite(r["retention_s"]), blocked_until, np.nan),
        seg_replica=replica[exists], seg_bytes=sizes[exists], seg_delete_s=seg_delete[exists])


def steady_state(reps: Replicas, horizon_s: float) -> np.ndarray:
    """Each replica's bytes at the top of its sawtooth once the rules hold it (inf: nothing bounds it):
    growing under the time rule ``rate * (retention + a segment's time + the check interval + the
    delete delay)``, under the size rule ``retention.bytes + a segment + rate * (interval + delay)``;
    a replica that does not grow keeps what the rules leave at the horizon. A growing compact-only
    replica: its bound from its distinct keys when key statistics give one
    (``auditor.capacity.compaction``), else NaN (unbounded by what is known)."""
    time_rule = reps.deletes & np.isfinite(reps.retention_s)
    with np.errstate(invalid="ignore"):
        by_time = np.where(time_rule, reps.rate * (reps.retention_s + reps.tau + reps.check_s + reps.delay_s), np.inf)
    growing = np.minimum(np.where(np.isfinite(reps.tau), by_time, np.inf), reps.cap)
    left = np.bincount(reps.seg_replica, weights=np.where(reps.seg_delete_s > horizon_s, reps.seg_bytes, 0.0),
                       minlength=len(reps.rate))
    steady = np.where(reps.rate > 0, growing, np.minimum(left, reps.cap))
    bound = reps.key_bound if reps.key_bound is not None else np.full(len(reps.rate), np.nan)
    bounded = (reps.rate > 0) & ~reps.deletes & np.isfinite(bound)
    steady = np.where(bounded, bound, steady)
    return np.where((reps.rate > 0) & ~reps.deletes & ~bounded, np.nan, steady)
