"""The planner's input from what the auditor reads (pure: rows and the metadata state in, a
:class:`PlanInput` out): each live replica's bytes and log dir from the partition rows of a scan
or a manifest; replica sets, leaders, racks and fenced brokers from the KRaft metadata state."""

from __future__ import annotations

import os

from auditor.plan.model import BrokerSpec, PartitionSpec, PlanInput

METADATA_TOPIC = "__cluster_metadata"


class MissingBrokers(ValueError):
    """A serving broker none of whose log dirs is among the inputs: its replicas' bytes are unknown."""


def from_metadata_state(st) -> tuple[dict, dict, list[str]]:
    """(brokers {id: (rack, fenced)}, partitions {(topic, p): (replicas, leader, why it must stay or
    None)}, notes) from a :class:`auditor.cluster.metadata_state.ClusterState`."""
    # every broker fenced: a stopped cluster, or a copy of its disks; the plan is for when it runs
    all_fenced = bool(st.brokers) and all(b.fenced for b in st.brokers.values())
    brokers = {b.broker_id: (b.rack, b.fenced and not all_fenced) for b in st.brokers.values()}
    parts = {(t.name, i): (list(p.replicas), p.leader, _moving(p.adding_replicas, p.removing_replicas))
             for t in st.topics.values() for i, p in t.partitions.items()}
    notes = ["every broker is fenced in the metadata log (a stopped cluster, or a copy of its disks): planned as "
             "if all were serving"] if all_fenced else []
    return brokers, parts, notes


def _moving(adding, removing) -> str | None:
    if not adding and not removing:
        return None
    return f"a reassignment is under way (adding {list(adding or [])}, removing {list(removing or [])})"


def build_input(rows: list[dict], dir_brokers: dict[str, int | None], brokers: dict[int, tuple[str | None, bool]],
                parts: dict, capacities: dict, notes: list[str]) -> PlanInput:
    """The planner's input: live replicas placed and sized; every other byte of a log dir (the
    metadata log, ``-delete`` / ``-future`` dirs, partitions the metadata does not know) fixed."""
    dirs_of: dict[int, list[str]] = {}
    for d, b in sorted(dir_brokers.items()):
        if b is not None:
            dirs_of.setdefault(b, []).append(d)
    for b in sorted(b for b in brokers if b not in dirs_of and brokers[b][1]):
        notes.append(f"broker {b} is fenced and none of its log dirs is among the inputs: its replicas stay where they are")
    missing = sorted(b for b in brokers if b not in dirs_of and not brokers[b][1])
    if missing:
        raise MissingBrokers(f"no log dir of broker(s) {', '.join(map(str, missing))} among the inputs: give every "
                           f"broker's log dirs (or manifests), the plan needs each replica's bytes")
    specs = {}
    for b, dirs in dirs_of.items():
        rack, fenced = brokers.get(b, (None, False))
        specs[b] = BrokerSpec(b, rack, dirs, fenced=fenced)
    fixed: dict[tuple[int, str], int] = {}
    where: dict[tuple[str, int, int], tuple[str, int]] = {}
    for r in rows:
        b, d = r["broker_id"], os.path.abspath(r["log_dir"])
        if b is None:
            continue
        key = (r["topic"], r["partition"])
        if r.get("dir_kind", "live") == "live" and r["topic"] != METADATA_TOPIC and key in parts:
            where[(r["topic"], r["partition"], b)] = (d, int(r["size_bytes"] or 0))
        else:
            fixed[(b, d)] = fixed.get((b, d), 0) + int(r["size_bytes"] or 0)
    partitions = {}
    for (t, i), (replicas, leader, moving) in parts.items():
        if moving:
            notes.append(f"{t}-{i}: {moving}: not planned")
        found = {b: where[(t, i, b)] for b in replicas if (t, i, b) in where}
        biggest = max((s for _, s in found.values()), default=0)
        for b in replicas:
            if b not in found and b in specs:
                notes.append(f"{t}-{i}: no replica on broker {b}'s log dirs; counted at {biggest} bytes")
        partitions[(t, i)] = PartitionSpec(t, i, list(replicas), leader,
                                           {b: found[b][0] if b in found else None for b in replicas},
                                           {b: found[b][1] if b in found else biggest for b in replicas},
                                           movable=not moving)
    unknown = sorted({b for p in partitions.values() for b in p.replicas if b not in specs})
    if unknown:
        notes.append(f"replicas on broker(s) {unknown} that are not registered: those replicas are not balanced")
    caps = {}
    for (b, d) in fixed.keys() | {(b, d) for b, s in specs.items() for d in s.log_dirs}:
        cap = capacities.get(d, capacities.get("*"))
        if cap is not None:
            caps[(b, d)] = cap
    return PlanInput(specs, partitions, fixed, caps, None, notes)


def add_steady_state(inp: PlanInput, steady_of, explain: dict[str, str], balance: str = "steady") -> None:
    """Each replica's bytes at retention steady state into ``inp.steady`` (``steady_of(log_dir, topic,
    partition) -> (bytes or None, why)``); where unknown, today's bytes, counted per reason in
    ``inp.fallbacks`` (keyed ``why: explain[why]``). With ``balance="steady"`` they are the weights
    the planner balances."""
    steady: dict[tuple[tuple[str, int], int], float] = {}
    fallbacks: dict[str, list[int]] = {}
    for tp, p in inp.partitions.items():
        for b in p.replicas:
            if b not in inp.brokers:
                continue
            value, why = steady_of(p.log_dirs.get(b), tp[0], tp[1])
            size = int(p.sizes.get(b, 0))
            if value is None:
                n = fallbacks.setdefault(f"{why}: {explain.get(why, why)}", [0, 0])
                n[0] += 1
                n[1] += size
                value = size
            steady[(tp, b)] = float(value)
    inp.steady = steady
    inp.fallbacks = {k: (v[0], v[1]) for k, v in sorted(fallbacks.items())}
    inp.balance = balance
    inp.weights = steady if balance == "steady" else None
