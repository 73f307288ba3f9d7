"""A plan as Kafka's tool takes it and as people read it.

* :func:`reassignment` -- the file ``kafka-reassign-partitions --execute --reassignment-json-file``
  takes: ``{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"}]}``, an
  absolute path in ``log_dirs`` where a replica must land in one log dir, ``"any"`` where not;
* :func:`rollback` -- the same partitions as they are today, every replica pinned to the log dir
  it is in today (where known), so a rollback puts each one back where it was;
* :func:`summary` -- bytes and replicas moved, brokers and log dirs before / after, the lower
  bound, and the throttle: the settings ``kafka-reassign-partitions --throttle`` applies (brokers:
  ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``; topics:
  ``leader.replication.throttled.replicas`` = every current replica of a moving partition,
  ``follower.replication.throttled.replicas`` = every new one, as ``partition:broker`` lists) and
  the time the moves take at that rate (the busiest broker's bytes in or out over the rate).
"""

from __future__ import annotations

from auditor.plan.model import Plan, PlanInput


def reassignment(plan: Plan) -> dict:
    parts = []
    for (topic, partition), (replicas, dirs) in sorted(plan.final.items()):
        parts.append({"topic": topic, "partition": partition, "replicas": replicas,
                      "log_dirs": [dirs.get(b) or "any" for b in replicas]})
    return {"version": 1, "partitions": parts}


def rollback(plan: Plan, inp: PlanInput) -> dict:
    parts = []
    for tp in sorted(plan.final):
        p = inp.partitions[tp]
        parts.append({"topic": tp[0], "partition": tp[1], "replicas": list(p.replicas),
                      "log_dirs": [p.log_dirs.get(b) or "any" for b in p.replicas]})
    return {"version": 1, "partitions": parts}


def throttle(plan: Plan, inp: PlanInput, rate_bytes_s: int | None) -> dict:
    """The throttle settings and the expected duration at ``rate_bytes_s`` (None: unthrottled)."""
    leader_replicas: dict[str, set[str]] = {}
    follower_replicas: dict[str, set[str]] = {}
    brokers: set[int] = set()
    into: dict[int, int] = {}
    out_of: dict[int, int] = {}
    intra: dict[int, int] = {}
    for m in plan.moves:
        p = inp.partitions[(m.topic, m.partition)]
        if m.kind == "log_dir":
            intra[m.to_broker] = intra.get(m.to_broker, 0) + m.size_bytes
            continue
        new, _ = plan.final[(m.topic, m.partition)]
        leader_replicas.setdefault(m.topic, set()).update(f"{m.partition}:{b}" for b in p.replicas)
        follower_replicas.setdefault(m.topic, set()).update(
            f"{m.partition}:{b}" for b in new if b not in p.replicas)
        brokers.update(p.replicas)
        brokers.update(new)
        into[m.to_broker] = into.get(m.to_broker, 0) + m.size_bytes
        src = p.leader if p.leader is not None and p.leader >= 0 else m.from_broker
        out_of[src] = out_of.get(src, 0) + m.size_bytes
    busiest = max([*into.values(), *out_of.values(), 0])
    busiest_intra = max([*intra.values(), 0])
    doc = {
        "rate_bytes_per_s": rate_bytes_s,
        "broker_configs": {str(b): ({"leader.replication.throttled.rate": str(rate_bytes_s),
                                     "follower.replication.throttled.rate": str(rate_bytes_s)}
                                    if rate_bytes_s else {}) for b in sorted(brokers)},
        "topic_configs": {t: {"leader.replication.throttled.replicas": ",".join(sorted(leader_replicas[t])),
                              "follower.replication.throttled.replicas": ",".join(sorted(follower_replicas[t]))}
                          for t in sorted(leader_replicas)},
        "busiest_broker_bytes": busiest,
        "busiest_broker_log_dir_move_bytes": busiest_intra,
        "log_dir_moves_throttle": "replica.alter.log.dirs.io.max.bytes.per.second "
                                  "(kafka-reassign-partitions --replica-alter-log-dirs-throttle)",
    }
    if rate_bytes_s:
        doc["expected_duration_s"] = round(max(busiest, busiest_intra) / rate_bytes_s, 1)
    return doc


def measures(plan: Plan, inp: PlanInput) -> dict[str, tuple[dict, dict]]:
    """Per log dir, before and after the moves: ``{"now": (before, after), "steady": (before, after)}``
    (today's bytes; the retention steady state, only when ``inp.steady`` is known)."""
    def replica(tp, b, size):
        return {"now": float(size), "steady": float((inp.steady or {}).get((tp, b), size))}

    names = ("now", "steady") if inp.steady is not None else ("now",)
    before = {n: {(b, d): float(inp.fixed_bytes.get((b, d), 0)) for b, s in inp.brokers.items() for d in s.log_dirs}
              for n in names}
    for tp, p in inp.partitions.items():
        for b in p.replicas:
            key = (b, p.log_dirs.get(b))
            if key in before["now"]:
                v = replica(tp, b, p.sizes.get(b, 0))
                for n in names:
                    before[n][key] += v[n]
    after = {n: dict(v) for n, v in before.items()}
    for m in plan.moves:
        v = replica((m.topic, m.partition), m.from_broker, m.size_bytes)
        for n in names:
            after[n][(m.from_broker, m.from_dir)] -= v[n]
            after[n][(m.to_broker, m.to_dir)] += v[n]
    return {n: ({k: int(round(x)) for k, x in before[n].items()}, {k: int(round(x)) for k, x in after[n].items()})
            for n in names}


def steady_state_doc(inp: PlanInput) -> dict | None:
    """What the summary says of the steady state: how many replicas (and bytes) fell back to today's bytes, and why."""
    if inp.steady is None:
        return None
    return {"replicas": len(inp.steady),
            "replicas_at_bytes_today": sum(n for n, _ in inp.fallbacks.values()),
            "bytes_at_bytes_today": sum(b for _, b in inp.fallbacks.values()),
            "fallbacks": [{"why": why, "replicas": n, "bytes": b} for why, (n, b) in inp.fallbacks.items()]}


def _per_broker(per_dir: dict, inp: PlanInput) -> dict[int, int]:
    return {b: sum(per_dir.get((b, d), 0) for d in s.log_dirs) for b, s in inp.brokers.items()}


def summary(plan: Plan, inp: PlanInput, rate_bytes_s: int | None, balance: str | None = None) -> dict:
    """The plan's summary (``kafka-audit plan --json``). Per broker and log dir: today's bytes
    (``bytes_before`` / ``bytes_after``) and, when known, the retention steady state
    (``steady_bytes_before`` / ``_after``); ``ratio_to_mean_*`` and ``mean_broker_bytes`` in what
    was balanced (``balance``)."""
    mean_b = plan.mean_broker_bytes or 1.0
    m = measures(plan, inp)
    now_b = {k: _per_broker(v, inp) for k, v in zip(("before", "after"), m["now"])}
    steady_d = m.get("steady")
    steady_b = {k: _per_broker(v, inp) for k, v in zip(("before", "after"), steady_d)} if steady_d else None
    brokers = []
    for b in sorted(plan.before_brokers):
        fixed = sum(inp.fixed_bytes.get((b, d), 0) for d in inp.brokers[b].log_dirs)
        brokers.append({"broker_id": b, "rack": inp.brokers[b].rack, "drained": b in plan.options.drain,
                        "unmovable_bytes": fixed,
                        "bytes_before": now_b["before"][b], "bytes_after": now_b["after"][b],
                        "steady_bytes_before": steady_b["before"][b] if steady_b else None,
                        "steady_bytes_after": steady_b["after"][b] if steady_b else None,
                        "ratio_to_mean_before": round(plan.before_brokers[b] / mean_b, 3),
                        "ratio_to_mean_after": round(plan.after_brokers[b] / mean_b, 3)})
    dirs = []
    for (b, d) in sorted(plan.before_dirs):
        cap = inp.capacities.get((b, d))
        st_after = steady_d[1][(b, d)] if steady_d else None
        dirs.append({"broker_id": b, "log_dir": d, "bytes_before": m["now"][0][(b, d)],
                     "bytes_after": m["now"][1][(b, d)],
                     "steady_bytes_before": steady_d[0][(b, d)] if steady_d else None, "steady_bytes_after": st_after,
                     "bytes_peak": plan.peak_dirs[(b, d)], "capacity_bytes": cap,
                     "peak_fraction": None if not cap else round(plan.peak_dirs[(b, d)] / cap, 4),
                     "steady_fraction_after": None if not cap or st_after is None else round(st_after / cap, 4)})
    disks = [{"file_system": k, "log_dirs": sorted(d for (_b, d), dk in inp.disks.items() if dk == k),
              "capacity_bytes": inp.disk_capacity.get(k), "used_bytes_before": inp.disk_used.get(k),
              "bytes_peak": plan.peak_disks.get(k),
              "peak_fraction": round(plan.peak_disks.get(k, 0) / inp.disk_capacity[k], 4) if inp.disk_capacity.get(k) else None}
             for k in sorted(set(inp.disks.values()))]
    o = plan.options
    moved = plan.bytes_moved
    return {
        "balance": balance or inp.balance, "steady_state": steady_state_doc(inp),
        "tolerance": o.tolerance, "headroom": o.headroom, "capacities_known": plan.capacities_known,
        "drain_brokers": sorted(o.drain), "exclude_topics": list(o.exclude_topics),
        "max_moves": o.max_moves, "max_move_bytes": o.max_move_bytes,
        "target_reached": plan.target_reached, "reasons": plan.reasons, "notes": plan.notes,
        "bytes_moved": moved, "bytes_moved_between_brokers": plan.bytes_moved_between_brokers,
        "bytes_moved_between_log_dirs": moved - plan.bytes_moved_between_brokers,
        "replicas_moved": len(plan.moves), "partitions_changed": len(plan.final),
        "lower_bound_bytes": plan.lower_bound_bytes,
        "moved_over_lower_bound": None if not plan.lower_bound_bytes else round(moved / plan.lower_bound_bytes, 3),
        "mean_broker_bytes": int(plan.mean_broker_bytes),
        "brokers": brokers, "log_dirs": dirs, "file_systems": disks,
        "throttle": throttle(plan, inp, rate_bytes_s),
        "moves": [m.as_dict() for m in plan.moves],
    }
