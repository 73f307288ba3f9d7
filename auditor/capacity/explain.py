"""One filesystem's projection as the capacity section's entry: the numbers, what grows, and why.

Causes named (each with its figures): a future timestamp blocking time retention, compact-only
topics (never shrink by retention; bounded only by their distinct keys, which the projection does
not know), topics without retention, retention that holds more than the disk (steady state over
the filesystem), and skew (one partition growing far above its topic's median).
"""

from __future__ import annotations

import math

import numpy as np

from auditor.capacity.replicas import RATE_IDLE, RATE_OK, RATE_STATES
from auditor.units import human_bytes, human_duration, iso_utc

TOP = 10
SKEW_RATIO = 3.0


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 3)


def _int(x: float) -> int | None:
    return None if x is None or not math.isfinite(x) else int(round(float(x)))


def _config_sources(topic_codes, rule_list) -> dict[str, list[str]]:
    out: dict[str, set] = {}
    for t in topic_codes:
        for key, source in rule_list[t].sources.items():
            out.setdefault(key, set()).add(source)
    return {k: sorted(v) for k, v in sorted(out.items())}


def topic_medians(reps) -> dict[int, float]:
    """Each topic's median ingress rate over its growing replicas (every filesystem), by topic code."""
    import pandas as pd

    growing = reps.rate > 0
    if not growing.any():
        return {}
    return {int(t): float(v) for t, v in pd.Series(reps.rate[growing]).groupby(reps.topic[growing]).median().items()}


def _partitions(reps, idx, steady, topics, cols, total_rate) -> list[dict]:
    order = idx[np.argsort(-reps.rate[idx], kind="stable")][:TOP]
    return [{"topic": topics[reps.topic[r]] if reps.topic[r] >= 0 else None, "partition": _int(reps.partition[r]),
             "broker_id": _int(reps.broker[r]), "log_dir": cols.label("log_dir", int(reps.log_dir[r])),
             "growth_bytes_per_s": _num(reps.rate[r]), "share_of_growth": _num(reps.rate[r] / total_rate) if total_rate else None,
             "bytes_now": _int(reps.bytes_now[r]), "steady_state_bytes": _int(steady[r]),
             "rate": RATE_STATES[int(reps.rate_state[r])]} for r in order if reps.rate[r] > 0]


def _by_topic(reps, idx, steady, topics) -> list[dict]:
    codes, inverse = np.unique(reps.topic[idx], return_inverse=True)
    sums = {name: np.bincount(inverse, weights=values[idx], minlength=len(codes))
            for name, values in (("growth", reps.rate), ("now", reps.bytes_now), ("steady", steady))}
    count = np.bincount(inverse, minlength=len(codes))
    order = np.lexsort((-sums["growth"], -sums["steady"]))[:TOP * 2]
    return [{"topic": topics[codes[k]] if codes[k] >= 0 else None, "partitions": int(count[k]),
             "growth_bytes_per_s": _num(sums["growth"][k]), "bytes_now": _int(sums["now"][k]),
             "steady_state_bytes": _int(sums["steady"][k])} for k in order]


def _causes(m, f, idx, steady, topics, rule_list, steady_total) -> list[dict]:
    reps = m.reps
    def name(r: int) -> str:
        return f"{topics[reps.topic[r]] if reps.topic[r] >= 0 else '?'}-{_int(reps.partition[r])}"

    out = []
    blocked = idx[~np.isnan(reps.blocked_until_ms[idx])]
    for r in blocked[np.argsort(-reps.bytes_now[blocked])][:TOP]:
        out.append({"cause": "retention blocked by a future timestamp", "topic_partition": name(r),
                    "detail": f"{name(r)}: a record timestamp in the future stops time retention there and after it "
                              f"until {iso_utc(int(reps.blocked_until_ms[r]))}"})
    growing = idx[reps.rate[idx] > 0]
    for r in growing[~reps.deletes[growing]][:TOP]:
        bound = reps.key_bound[r] if reps.key_bound is not None else math.nan
        limit = (f"bounded by its ~{int(reps.distinct_keys[r]):,} distinct keys (key statistics): at most about "
                 f"{human_bytes(int(bound))} at the top of the cleaner's cycle" if math.isfinite(bound) else
                 "bounded only by its distinct keys, not known here (unbounded by what is known: audit with --keys "
                 "reading every record to bound it)")
        keys = reps.distinct_keys[r] if reps.distinct_keys is not None else math.nan
        out.append({"cause": "compaction", "topic_partition": name(r), "key_bound_bytes": _int(bound),
                    "distinct_keys": _int(keys),
                    "detail": f"{name(r)}: cleanup.policy=compact never deletes by retention; it grows at "
                              f"{human_bytes(int(reps.rate[r]))}/s, {limit}"})
    unbounded = growing[reps.deletes[growing] & ~np.isfinite(reps.retention_s[growing]) & ~np.isfinite(reps.cap[growing])]
    for r in unbounded[:TOP]:
        out.append({"cause": "no retention", "topic_partition": name(r),
                    "detail": f"{name(r)}: retention.ms=-1 and retention.bytes=-1: it grows at "
                              f"{human_bytes(int(reps.rate[r]))}/s for ever"})
    if steady_total is not None and steady_total > m.fs.capacity[f]:
        out.append({"cause": "retention longer than the disk holds",
                    "detail": f"the retention rules keep {human_bytes(int(steady_total))} at steady state, more than "
                              f"the {human_bytes(int(m.fs.capacity[f]))} the filesystem holds"})
    medians = m.medians
    for r in growing[np.argsort(-reps.rate[growing])][:3]:
        med = medians.get(int(reps.topic[r]), 0.0)
        peers = int(((reps.topic == reps.topic[r]) & (reps.rate > 0)).sum())
        if peers >= 2 and med > 0 and reps.rate[r] >= SKEW_RATIO * med:
            out.append({"cause": "skew", "topic_partition": name(r),
                        "detail": f"{name(r)} grows at {human_bytes(int(reps.rate[r]))}/s, "
                                  f"{reps.rate[r] / med:.1f}x its topic's median partition"})
    return out


SKEW_NOTE_MS = 60_000


def _rate_notes(reps, idx) -> tuple[dict, list[str]]:
    states = reps.rate_state[idx]
    counts = {RATE_STATES[s]: int((states == s).sum()) for s in range(len(RATE_STATES)) if (states == s).any()}
    unknown = idx[(states != RATE_OK) & (states != RATE_IDLE)]
    notes = []
    ahead = reps.ahead_ms[idx] if reps.ahead_ms is not None else np.zeros(0)
    ahead = ahead[~np.isnan(ahead)]
    if len(ahead) and np.median(ahead) > SKEW_NOTE_MS:
        notes.append(f"clock skew: the newest records of most partitions here are {np.median(ahead) / 1000:.0f} s "
                     "after the filesystem was statted (the producers' clocks, with CreateTime, or this host's "
                     "disagree): rates are measured on the records' own times; deletions due by time may come "
                     "that much later")
    if len(unknown):
        notes.append(f"{len(unknown)} partition replica(s), {human_bytes(int(reps.bytes_now[unknown].sum()))}, have no "
                     f"ingress rate that can be told ({', '.join(k for k in counts if k not in ('measured', 'idle'))}): "
                     "counted as not growing")
    return counts, notes


def describe(m, f, full, head, grid, used, steady, topics, rule_list, cols, as_of_ms, settings) -> dict:
    """The capacity entry of filesystem ``f`` (fields: ``auditor.capacity.filesystems.FIXED_FIELDS`` and more)."""
    fs, reps = m.fs, m.reps
    idx = np.flatnonzero(reps.fs == f)
    origin = float(fs.origin_ms[f])
    growth = float(reps.rate[idx].sum())
    unbounded = bool(np.isinf(steady[idx]).any())
    compacted = bool(np.isnan(steady[idx]).any())
    steady_total = float(m.fixed[f] + steady[idx].sum()) if not (unbounded or compacted) else None
    counts, notes = _rate_notes(reps, idx)
    if growth == 0 and full is None and any(k not in ("measured", "idle") for k in counts):
        notes.append("no growth can be told: the time to full is unknown, not 'never'")
    def at(t: float | None) -> float | None:
        return None if t is None else origin + t * 1000.0

    member = fs.members[f]
    step = max(1, len(grid) // settings.series_points)
    entry = {
        "broker_id": member["brokers"][0] if member["brokers"] else None, "log_dirs": member["log_dirs"],
        "mount": member["mount"], "total_bytes": _int(fs.total[f]), "free_bytes": _int(fs.free[f]),
        "kafka_bytes": _int(fs.kafka_bytes[f]), "other_bytes": _int(fs.used[f] - fs.kafka_bytes[f]),
        "growth_bytes_per_s": _num(growth), "steady_state_bytes": _int(steady_total) if steady_total is not None else None,
        "seconds_to_full": _num((at(full) - as_of_ms) / 1000.0) if full is not None else None,
        "full_at_utc": iso_utc(int(at(full))) if full is not None else None,
        "headroom_at_utc": iso_utc(int(at(head))) if head is not None else None,
        "config_sources": _config_sources({int(t) for t in reps.topic[idx] if t >= 0}, rule_list),
        "brokers": member["brokers"], "device": member["device"], "fs_type": member["fs_type"], "host": member["host"],
        "capacity_known": True, "available_bytes": _int(fs.available[f]), "used_bytes": _int(fs.used[f]),
        "usable_bytes": _int(fs.capacity[f]), "headroom": settings.headroom,
        "headroom_bytes": _int(fs.capacity[f] * settings.headroom), "origin_utc": iso_utc(int(origin)),
        "seconds_to_headroom": _num((at(head) - as_of_ms) / 1000.0) if head is not None else None,
        "horizon_s": settings.horizon_s, "steady_state_unbounded": unbounded,
        "steady_state_unknown": compacted and not unbounded,
        "replicas": len(idx), "rates": counts, "notes": notes,
        "causes": _causes(m, f, idx, steady, topics, rule_list, steady_total),
        "top_partitions": _partitions(reps, idx, steady, topics, cols, growth),
        "steady_state_by_topic": _by_topic(reps, idx, steady, topics),
        "series": [[round(float(grid[i]), 3), _int(used[i])] for i in range(0, len(grid), step)],
        "summary": _summary(fs, f, growth, full, steady_total, settings),
    }
    return entry


def _summary(fs, f, growth, full, steady_total, settings) -> str:
    where = fs.members[f]["mount"] or fs.members[f]["log_dirs"][0]
    text = (f"{where}: {human_bytes(int(fs.used[f]))} of {human_bytes(int(fs.capacity[f]))} used, "
            f"growing {human_bytes(int(growth))}/s")
    if full is not None:
        text += f"; full in {human_duration(full * 1000.0)}"
    else:
        text += f"; does not fill within {human_duration(settings.horizon_s * 1000.0)}"
    text += ("; no steady state known" if steady_total is None else f"; steady state {human_bytes(int(steady_total))}")
    return text
