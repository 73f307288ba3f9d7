"""Model against observation: the bytes Kafka wrote between the previous run and this one, per
filesystem and per topic, beside the growth the model gave (pure: this run's ledger and entries,
the previous run's rows as the history kept them).

The used bytes of a filesystem under retention form a sawtooth: their difference between two runs
is not growth (a run at a trough after one at a peak shows shrinking while the producers write on).
What is compared is like with like, the bytes appended, per partition replica seen in both runs:

* its active segment at the previous run still exists: the log bytes of that segment and every
  later one now, less what that segment held then (exact; "segments");
* retention or the cleaner removed it since (a long gap, a fast turnover, a compacted segment
  shrunk): the offsets written since (end offset now less then) times this run's log bytes per
  offset ("offsets", an estimate, counted as such);
* a partition that did not exist anywhere at the previous run: all its log bytes ("new").

Not growth, left out and said: replicas that moved in or out by a reassignment (their bytes came
by replication, not from producers), log dirs the previous run did not audit, logs truncated or
re-created (end offset lower than before). Index files are counted as the model counts them
(``auditor.capacity.replicas.INDEX_OVERHEAD`` per log byte). The model's growth compared is the
previous run's (what it foresaw for the interval) where it projected these replicas, else this
run's (said). A difference over :data:`SAY_OVER` is stated with its probable causes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from auditor.capacity.ledger import Ledger
from auditor.capacity.replicas import INDEX_OVERHEAD
from auditor.units import human_bytes, human_duration, iso_utc

SAY_OVER = 0.25
"""A relative difference between observed and modelled growth above this is stated."""
LONG_GAP_S = 7 * 86400.0
TOP_TOPICS = 10


@dataclass
class PreviousCapacity:
    """The previous run's capacity rows (``auditor.nightly.capacity_history``)."""

    as_of_ms: int | None = None
    filesystems: list[dict] = field(default_factory=list)
    """log_dirs, broker_id, capacity_known, used_bytes, growth_bytes_per_s, origin_ms, series."""
    replicas: list[dict] = field(default_factory=list)
    """``auditor.capacity.ledger.replica_rows``."""
    notes: list[str] = field(default_factory=list)


def _key(broker, log_dir, topic=None, partition=None):
    b = None if broker is None or (isinstance(broker, float) and math.isnan(broker)) else int(broker)
    return (b, log_dir) if topic is None else (b, log_dir, topic, None if partition is None else int(partition))


@dataclass
class _Tally:
    appended: float = 0.0
    model_then: float = 0.0
    model_then_known: bool = True
    model_now: float = 0.0
    methods: dict = field(default_factory=lambda: {"segments": 0, "offsets": 0, "new": 0})
    left_out: dict = field(default_factory=lambda: {"moved in": [0, 0], "moved out": [0, 0], "truncated or re-created": [0, 0],
                                                    "gone": [0, 0]})
    topics: dict = field(default_factory=dict)
    retention_changes: dict = field(default_factory=dict)

    def out(self, kind: str, nbytes) -> None:
        self.left_out[kind][0] += 1
        self.left_out[kind][1] += int(nbytes or 0)

    def topic(self, name) -> dict:
        return self.topics.setdefault(name, {"appended": 0.0, "then": 0.0, "then_known": True, "now": 0.0})


def _appended(ledger: Ledger, r: int, prev: dict) -> tuple[float | None, str]:
    """(log bytes replica ``r`` appended since ``prev``, method); None: truncated or re-created."""
    end_now, end_then = ledger.end_offset[r], prev.get("end_offset")
    if end_then is not None and math.isfinite(end_now) and end_now < end_then:
        return None, "truncated or re-created"
    base, then_bytes = prev.get("active_base_offset"), prev.get("active_log_bytes")
    if base is not None and then_bytes is not None:
        since = ledger.bytes_from(r, float(base))
        if since is not None and since >= then_bytes:
            return since - then_bytes, "segments"
    span = ledger.end_offset[r] - ledger.log_start[r]
    if end_then is None or not math.isfinite(end_now) or not span > 0:
        return 0.0, "offsets"
    return max(end_now - end_then, 0.0) * ledger.log_bytes[r] / span, "offsets"


def _tally(ledger: Ledger, rows: np.ndarray, prev_in: dict, prev_tp: set, now_tp: set, prev_dirs: set) -> _Tally:
    t = _Tally()
    for r in rows:
        key = _key(ledger.broker[r], ledger.log_dir[r], ledger.topic[r], ledger.partition[r])
        tp = (ledger.topic[r], int(ledger.partition[r]))
        now_rate = float(ledger.model_rate[r]) if math.isfinite(ledger.model_rate[r]) else 0.0
        prev = prev_in.pop(key, None)
        if prev is None:
            if key[:2] not in prev_dirs:
                continue  # a log dir the previous run did not audit (said per filesystem)
            if tp in prev_tp:
                t.out("moved in", ledger.log_bytes[r])
                continue
            appended, method, then_rate = float(ledger.log_bytes[r]), "new", 0.0
        else:
            appended, method = _appended(ledger, r, prev)
            if appended is None:
                t.out(method, ledger.log_bytes[r])
                continue
            then_rate = prev.get("model_bytes_per_s")
            for k, now_v in (("retention_ms", ledger.retention_ms[r]), ("retention_bytes", ledger.retention_bytes[r])):
                if prev.get(k) is not None and int(prev[k]) != int(now_v):
                    t.retention_changes[(ledger.topic[r], k.replace("_", "."))] = (int(prev[k]), int(now_v))
        t.methods[method] += 1
        t.appended += appended
        t.model_now += now_rate
        top = t.topic(ledger.topic[r])
        top["appended"] += appended
        top["now"] += now_rate
        if then_rate is None:
            t.model_then_known = top["then_known"] = False
        else:
            t.model_then += then_rate
            top["then"] += then_rate
    for key, prev in prev_in.items():
        t.out("moved out" if (key[2], key[3]) in now_tp else "gone", prev.get("log_bytes"))
    return t


def _pct(observed: float, model: float) -> float | None:
    return None if not model > 0 else round((observed - model) / model * 100.0, 1)


def _by_topic(t: _Tally, interval_s: float) -> list[dict]:
    out = []
    for name, v in t.topics.items():
        obs = v["appended"] * (1 + INDEX_OVERHEAD) / interval_s
        then = v["then"] if v["then_known"] else None
        out.append({"topic": name, "appended_bytes": int(round(v["appended"])), "observed_bytes_per_s": round(obs, 3),
                    "model_then_bytes_per_s": None if then is None else round(then, 3),
                    "model_now_bytes_per_s": round(v["now"], 3),
                    "difference_percent": _pct(obs, then if then is not None else v["now"])})
    out.sort(key=lambda d: -abs(d["observed_bytes_per_s"] - (d["model_then_bytes_per_s"] if d["model_then_bytes_per_s"]
                                                              is not None else d["model_now_bytes_per_s"])))
    return out[:TOP_TOPICS]


def _predicted_used(prev_fs: dict | None, as_of_ms: int) -> float | None:
    """The previous run's projection of used bytes at this run's time (its series), None past its horizon."""
    if not prev_fs or not prev_fs.get("series") or prev_fs.get("origin_ms") is None:
        return None
    series = np.array(prev_fs["series"], dtype=float)
    t = (as_of_ms - prev_fs["origin_ms"]) / 1000.0
    if series.ndim != 2 or not len(series) or t > series[-1, 0] or t < 0:
        return None
    return float(np.interp(t, series[:, 0], series[:, 1]))


def _causes(t: _Tally, topics: list[dict], observed: float, model: float) -> list[str]:
    """The probable causes of a difference, the likeliest first."""
    causes = []
    for d in topics[:3]:
        ref = d["model_then_bytes_per_s"] if d["model_then_bytes_per_s"] is not None else d["model_now_bytes_per_s"]
        pct = _pct(d["observed_bytes_per_s"], ref)
        if ref and pct is not None and abs(pct) > SAY_OVER * 100:
            moved = (d["model_then_bytes_per_s"] is not None and d["model_then_bytes_per_s"] > 0
                     and abs(d["model_now_bytes_per_s"] / d["model_then_bytes_per_s"] - 1) > SAY_OVER)
            causes.append(f"{d['topic']}: {human_bytes(int(d['observed_bytes_per_s']))}/s written against "
                          f"{human_bytes(int(ref))}/s modelled ({pct:+.0f}%): its producers changed rate"
                          + (f" (the model now measures {human_bytes(int(d['model_now_bytes_per_s']))}/s)" if moved else ""))
        elif not ref and d["observed_bytes_per_s"] > 0:
            causes.append(f"{d['topic']}: {human_bytes(int(d['observed_bytes_per_s']))}/s written where the model saw "
                          "no growth (new producers, or a partition the model could not rate)")
    for (topic, key), (a, b) in sorted(t.retention_changes.items()):
        causes.append(f"{topic}: {key} changed from {a} to {b} between the runs (a retention change: the bytes kept "
                      "differ from what the previous run projected)")
    moved_in, moved_out = t.left_out["moved in"], t.left_out["moved out"]
    if moved_in[0] or moved_out[0]:
        causes.append(f"a reassignment: {moved_in[0]} replica(s) moved in ({human_bytes(moved_in[1])}) and "
                      f"{moved_out[0]} out ({human_bytes(moved_out[1])}), left out of the bytes written")
    if not causes:
        causes.append("a producer that changed rate within the interval (the model's rate window sees its recent "
                      "segments only)")
    return causes


def _fields(t: _Tally, prev: PreviousCapacity, entry: dict, prev_fs: dict | None, as_of_ms: int) -> dict:
    interval_s = (as_of_ms - prev.as_of_ms) / 1000.0
    observed = t.appended * (1 + INDEX_OVERHEAD) / interval_s
    then_known = t.model_then_known and bool(prev_fs and prev_fs.get("capacity_known"))
    if then_known:
        model = t.model_then
    elif entry.get("capacity_known", True):
        model = float(entry.get("growth_bytes_per_s") or t.model_now)
    else:  # neither run projected these log dirs: the bytes written, and no model to hold them against
        model = None
    pct = _pct(observed, model) if model is not None else None
    topics = _by_topic(t, interval_s)
    notes = []
    if model is None:
        notes.append("neither this run nor the previous one projected these log dirs (capacity unknown): the bytes "
                     "written are shown with no model to compare")
    elif not then_known:
        notes.append("the previous run did not project these log dirs (capacity unknown then, or a failure): the "
                     "observed growth is compared with this run's model")
    if interval_s > LONG_GAP_S:
        notes.append(f"the previous run is {human_duration(interval_s * 1000)} ago: the observed growth is an average "
                     "over that span, a change within it diluted")
    if t.methods["offsets"]:
        notes.append(f"{t.methods['offsets']} replica(s) had their previous active segment removed since (retention, "
                     "cleaning): their bytes written are estimated from offsets x this run's bytes per offset")
    used_then = prev_fs.get("used_bytes") if prev_fs else None
    predicted = _predicted_used(prev_fs, as_of_ms)
    statement = None
    if pct is not None and abs(pct) > SAY_OVER * 100:
        statement = (f"observed growth {human_bytes(int(observed))}/s since {iso_utc(prev.as_of_ms)} differs from the "
                     f"{'previous' if then_known else 'current'} run's model ({human_bytes(int(model))}/s) by {pct:+.0f}%; "
                     "probable causes: " + "; ".join(_causes(t, topics, observed, model)))
    elif model is not None and pct is None and observed > 0 and not model > 0:
        statement = (f"observed growth {human_bytes(int(observed))}/s since {iso_utc(prev.as_of_ms)} where the model saw "
                     "none; probable causes: " + "; ".join(_causes(t, topics, observed, model)))
    return {
        "observed_since_utc": iso_utc(prev.as_of_ms), "observed_interval_s": round(interval_s, 3),
        "observed_growth_bytes_per_s": round(observed, 3),
        "model_growth_compared_bytes_per_s": None if model is None else round(model, 3),
        "model_compared": None if model is None else ("previous run" if then_known else "this run"),
        "model_difference_percent": pct,
        "observed_statement": statement,
        "observed": {"appended_bytes": int(round(t.appended)), "replicas_by_method": dict(t.methods),
                     "left_out": {k: {"replicas": v[0], "bytes": v[1]} for k, v in t.left_out.items() if v[0]},
                     "used_delta_bytes": (int(entry["used_bytes"] - used_then) if used_then is not None
                                          and entry.get("used_bytes") is not None else None),
                     "predicted_used_bytes": None if predicted is None else int(round(predicted)),
                     "used_bytes": entry.get("used_bytes"), "by_topic": topics, "notes": notes},
    }


def _blank(entry: dict, why: str) -> None:
    entry.update(observed_since_utc=None, observed_interval_s=None, observed_growth_bytes_per_s=None,
                 model_growth_compared_bytes_per_s=None, model_compared=None, model_difference_percent=None,
                 observed_statement=None, observed={"notes": [why]})


def compare_with_previous(entries: list[dict], ledger: Ledger | None, prev: PreviousCapacity, as_of_ms: int) -> list[str]:
    """Adds the observed-growth fields to each entry (in place); returns the notes said once."""
    notes = list(prev.notes)
    if ledger is None:
        for e in entries:
            _blank(e, "no ledger of this run's replicas (the projection failed): nothing to compare")
        return notes
    if prev.as_of_ms is None or not prev.as_of_ms < as_of_ms:
        for e in entries:
            _blank(e, "no previous run in the history: the growth observed between runs starts with the next run")
        return notes
    prev_dirs = {_key(p.get("broker_id"), p.get("log_dir")) for p in prev.replicas}
    prev_dirs |= {_key(f.get("broker_id"), d) for f in prev.filesystems for d in f.get("log_dirs") or []}
    prev_tp = {(p.get("topic"), p.get("partition")) for p in prev.replicas}
    now_tp = {(ledger.topic[r], int(ledger.partition[r])) for r in range(len(ledger))}
    by_dir: dict = {}
    for r in range(len(ledger)):
        by_dir.setdefault(_key(ledger.broker[r], ledger.log_dir[r]), []).append(r)
    for e in entries:
        dirs = [_key(e.get("broker_id"), d) for d in e.get("log_dirs") or []]
        if len(e.get("brokers") or []) > 1:  # brokers sharing one filesystem: match on the log dir alone
            dirs = [k for k in by_dir if k[1] in set(e.get("log_dirs") or [])]
        seen = [d for d in dirs if d in prev_dirs]
        if not seen:
            _blank(e, "none of these log dirs was audited by the previous run: nothing to compare")
            continue
        prev_in = {_key(p.get("broker_id"), p.get("log_dir"), p.get("topic"), p.get("partition")): p
                   for p in prev.replicas if _key(p.get("broker_id"), p.get("log_dir")) in set(seen)}
        rows = np.array([r for d in seen for r in by_dir.get(d, [])], dtype=np.int64)
        t = _tally(ledger, rows, prev_in, prev_tp, now_tp, prev_dirs)
        names = {d[1] for d in seen}
        prev_fs = max(prev.filesystems, key=lambda f: len(set(f.get("log_dirs") or []) & names), default=None)
        prev_fs = prev_fs if prev_fs is not None and set(prev_fs.get("log_dirs") or []) & names else None
        e.update(_fields(t, prev, e, prev_fs, as_of_ms))
        unseen = [d[1] for d in dirs if d not in prev_dirs]
        if unseen:
            e["observed"]["notes"].append(f"{len(unseen)} log dir(s) not audited by the previous run (first: {unseen[0]}): "
                                          "left out of the comparison")
    return notes
