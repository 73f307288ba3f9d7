"""The plan's default balance, the retention steady state: each replica's steady bytes from the
capacity projection (auditor.capacity.steady), the planner balancing them (auditor.plan), the
headroom at steady state, and the summary's now / steady figures and fallbacks."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from auditor.capacity.columns import from_pandas
from auditor.capacity.rules import TopicRules
from auditor.capacity.steady import CAPACITY_UNKNOWN, NO_RATE, NOT_PROJECTED, UNBOUNDED, UNKNOWN, replica_steady_states
from auditor.plan import BrokerSpec, PartitionSpec, PlanInput, PlanOptions, plan, summary
from auditor.plan.inputs import add_steady_state

pytestmark = pytest.mark.unit

MB = 1_000_000
NOW = 1_800_000_000_000
RATE = 10_000.0          # bytes/s of log data
SEG = 1_000_000          # 100 s of data a segment


def fs_row(log_dir: str, broker: int = 1) -> dict:
    return {"log_dir": log_dir, "broker_id": broker, "fs_total_bytes": 10**12, "fs_free_bytes": 9 * 10**11,
            "fs_available_bytes": 9 * 10**11, "fs_device": "8:1", "fs_mount": "/", "fs_statted_at_ms": NOW}


def segments(topic: str, log_dir: str = "/d", closed: int = 10, timestamps: bool = True) -> list[dict]:
    """``closed`` segments of SEG bytes written at RATE, then the active one half full, ending now."""
    rows, start = [], NOW - int((closed * SEG + SEG // 2) / RATE * 1000)
    for i in range(closed + 1):
        active = i == closed
        first = start + int(i * SEG / RATE * 1000)
        size = SEG // 2 if active else SEG
        last = first + int(size / RATE * 1000)
        rows.append({"log_dir": log_dir, "topic": topic, "partition": 0, "dir_kind": "live", "base_offset": i * 1000,
                     "log_size_bytes": size, "index_size_bytes": 0, "timeindex_size_bytes": 0, "index_entries": 0,
                     "timeindex_entries": 0, "min_timestamp_ms": first if timestamps else None,
                     "first_batch_max_timestamp_ms": first if timestamps else None,
                     "max_timestamp_ms": last if timestamps else None, "is_active": active, "record_count": 1000})
    return rows


def test_each_replica_gets_its_steady_state_or_why_not():
    rows = (segments("short") + segments("long") + segments("quiet", timestamps=False) + segments("compact")
            + segments("elsewhere", log_dir="/u"))
    rules = {"short": TopicRules(retention_s=60, segment_bytes=SEG, check_interval_s=300, delete_delay_s=60),
             "long": TopicRules(retention_s=7 * 86400, segment_bytes=SEG),
             "compact": TopicRules(deletes=False, compacts=True)}
    got = replica_steady_states(from_pandas(pd.DataFrame(rows)), [fs_row("/d"), {"log_dir": "/u", "broker_id": 2}],
                                rules)
    now = 10 * SEG + SEG // 2
    short, why = got.get("/d", "short", 0)
    # growing under the time rule: rate x (retention + a segment's time + check interval + delete delay), in .log bytes
    # (the projection's rate counts the index files written with the log: 20 bytes per 4096)
    rate = RATE * (1 + 20 / 4096)
    assert why is None and short == pytest.approx(rate * (60 + SEG / RATE + 300 + 60), rel=1e-3) and short < now
    long, _ = got.get("/d", "long", 0)
    assert long == pytest.approx(rate * (7 * 86400 + SEG / RATE + 300 + 60), rel=1e-3) and long > 50 * now
    assert got.get("/d", "quiet", 0) == (None, NO_RATE)
    assert got.get("/d", "compact", 0) == (None, UNBOUNDED)
    assert got.get("/u", "elsewhere", 0) == (None, CAPACITY_UNKNOWN)
    assert got.get(None, "short", 0) == (None, NOT_PROJECTED) and got.get("/d", "nothing", 3)[1] == NOT_PROJECTED
    assert set(UNKNOWN) == {CAPACITY_UNKNOWN, NO_RATE, UNBOUNDED, NOT_PROJECTED}
    assert math.isfinite(long)


def two_brokers(cap: int | None = None) -> tuple[PlanInput, dict]:
    """Broker 1 holds a short-retention topic, large today (100 MB a replica) and small at steady
    state (10 MB); broker 2 a growing long-retention topic, small today (20 MB) and large at steady
    state (100 MB); both hold ten 10 MB replicas of a steady topic (one of them of unknown steady
    state), spread over their two log dirs. RF 1."""
    specs = {b: BrokerSpec(b, None, [f"/d/{b}/a", f"/d/{b}/b"]) for b in (1, 2)}
    parts, steady = {}, {}

    def add(topic, i, b, now, at_steady):
        d = f"/d/{b}/{'ab'[(i // 2) % 2]}"
        parts[(topic, i)] = PartitionSpec(topic, i, [b], b, {b: d}, {b: now})
        steady[(d, topic, i)] = (at_steady, None if at_steady is not None else NO_RATE)

    for i in range(4):
        add("short", i, 1, 100 * MB, 10 * MB)
        add("long", i, 2, 20 * MB, 100 * MB)
    for i in range(20):
        add("steady", i, 1 + i % 2, 10 * MB, None if i == 0 else 10 * MB)
    caps = {} if cap is None else {(b, d): cap for b, s in specs.items() for d in s.log_dirs}
    return PlanInput(specs, parts, capacities=caps), steady


def steady_of(table):
    return lambda d, t, p: table.get((d, t, p), (None, NOT_PROJECTED))


def within(per_broker: dict[int, float], tol: float) -> bool:
    mean = sum(per_broker.values()) / len(per_broker)
    return all(abs(v - mean) <= tol * mean + 1 for v in per_broker.values())


def test_steady_plan_differs_from_the_current_plan_and_each_reaches_its_own_target():
    results = {}
    for balance in ("current", "steady"):
        inp, table = two_brokers()
        add_steady_state(inp, steady_of(table), UNKNOWN, balance)
        p = plan(inp)
        assert p.target_reached, (balance, p.reasons)
        results[balance] = (p, summary(p, inp, None))
    (cur, cur_doc), (st, st_doc) = results["current"], results["steady"]
    # today's bytes: broker 1 holds 500 MB, broker 2 180 MB; at steady state 140 MB and 500 MB
    assert {m.from_broker for m in cur.moves if m.kind == "broker"} == {1}
    assert {m.from_broker for m in st.moves if m.kind == "broker"} == {2}
    for doc, key in ((cur_doc, "bytes_after"), (st_doc, "steady_bytes_after")):
        assert within({b["broker_id"]: b[key] for b in doc["brokers"]}, 0.10), doc["brokers"]
        for b in (1, 2):
            dirs = [d[key] for d in doc["log_dirs"] if d["broker_id"] == b]
            assert within(dict(enumerate(dirs)), 0.10), (key, dirs)
    # each plan misses the other's target: the steady plan leaves today's bytes skewed, and the reverse
    assert not within({b["broker_id"]: b["bytes_after"] for b in st_doc["brokers"]}, 0.10)
    assert not within({b["broker_id"]: b["steady_bytes_after"] for b in cur_doc["brokers"]}, 0.10)
    # the summary: both measures before and after, the fallback counted, bytes moved in today's bytes
    for doc in (cur_doc, st_doc):
        assert sum(b["bytes_before"] for b in doc["brokers"]) == sum(b["bytes_after"] for b in doc["brokers"]) == 680 * MB
        assert sum(b["steady_bytes_before"] for b in doc["brokers"]) == sum(b["steady_bytes_after"] for b in doc["brokers"])
        assert doc["steady_state"]["replicas"] == 28 and doc["steady_state"]["replicas_at_bytes_today"] == 1
        assert doc["steady_state"]["bytes_at_bytes_today"] == 10 * MB
        assert doc["steady_state"]["fallbacks"][0]["why"].startswith("no rate: ")
        assert doc["bytes_moved"] == sum(m["size_bytes"] for m in doc["moves"])
    assert (cur_doc["balance"], st_doc["balance"]) == ("current", "steady")
    assert st_doc["lower_bound_bytes"] <= st_doc["bytes_moved"]
    assert cur_doc["lower_bound_bytes"] <= cur_doc["bytes_moved"]


def test_headroom_holds_at_steady_state_not_only_while_both_copies_exist():
    # a 10 MB replica today that retention lets grow to 90 MB: its copy fits a 100 MB log dir under 85%
    # while it is made, its steady state does not
    specs = {1: BrokerSpec(1, None, ["/d/1/a"]), 2: BrokerSpec(2, None, ["/d/2/a"])}
    parts = {("t", i): PartitionSpec("t", i, [1], 1, {1: "/d/1/a"}, {1: 10 * MB}) for i in range(2)}
    caps = {(1, "/d/1/a"): 1000 * MB, (2, "/d/2/a"): 100 * MB}
    table = {("/d/1/a", "t", i): (90 * MB, None) for i in range(2)}
    for balance, moves in (("current", 1), ("steady", 0)):
        inp = PlanInput(specs, {k: PartitionSpec(v.topic, v.partition, list(v.replicas), v.leader, dict(v.log_dirs),
                                                 dict(v.sizes)) for k, v in parts.items()}, capacities=caps)
        add_steady_state(inp, steady_of(table), UNKNOWN, balance)
        p = plan(inp, PlanOptions(headroom=0.85))
        assert len(p.moves) == moves, (balance, p.moves, p.reasons)
    assert not p.target_reached and any("headroom at steady state" in r for r in p.reasons)
    assert any("once the moves are done" in n for n in p.notes)


def test_empty_replicas_still_leave_a_drained_broker():
    specs = {b: BrokerSpec(b, None, [f"/d/{b}"]) for b in (1, 2, 3)}
    parts = {("t", i): PartitionSpec("t", i, [3], 3, {3: "/d/3"}, {3: 0 if i < 2 else MB}) for i in range(4)}
    inp = PlanInput(specs, parts)
    add_steady_state(inp, lambda d, t, p: (0.0, None), UNKNOWN, "steady")   # retention empties them all
    p = plan(inp, PlanOptions(drain=frozenset({3})))
    assert p.target_reached and len(p.moves) == 4 and {m.to_broker for m in p.moves} <= {1, 2}


def test_pick_copies_the_fewest_bytes_for_the_weight_it_moves():
    """Balancing steady states, two replicas weigh the same and copy different bytes today: the step
    takes the one that copies fewer (rule 1); carrying weight it cannot land in one move, the one
    with the fewest bytes per unit of weight (rule 2); without sizes, the first in weight order."""
    from auditor.plan.choose import pick

    sizes = {("a", 0): 90 * MB, ("b", 0): 10 * MB, ("c", 0): 40 * MB, ("d", 0): 5 * MB}
    entries = sorted([(30 * MB, False, ("a", 0)), (30 * MB, False, ("b", 0)),
                      (20 * MB, False, ("c", 0)), (10 * MB, False, ("d", 0))])
    anything = lambda *_: True  # noqa: E731
    assert pick(None, [entries], 25 * MB, 35 * MB, anything, anything, sizes.get)[2] == ("b", 0)
    assert pick(None, [entries], 25 * MB, 35 * MB, anything, anything)[2] == ("a", 0)
    # no entry lands 45..50 MB in one move: of those below, c copies 2 bytes per unit, a 3, b 1/3, d 1/2
    assert pick(None, [entries], 45 * MB, 50 * MB, anything, anything, sizes.get)[2] == ("b", 0)
    assert pick(None, [entries], 45 * MB, 50 * MB, anything, anything)[2] == ("b", 0)   # the largest, by name
    cheap_and_light = [(10 * MB, False, ("d", 0)), (30 * MB, False, ("a", 0))]
    assert pick(None, [cheap_and_light], 45 * MB, 50 * MB, anything, anything, sizes.get)[2] == ("d", 0)
    assert pick(None, [cheap_and_light], 45 * MB, 50 * MB, anything, anything)[2] == ("a", 0)


def steady_fleet(brokers: int, replicas: int, seed: int = 5) -> PlanInput:
    """SYNTHETIC: RF 3 over 10 racks, log-normal sizes with a few hot partitions (x20), four log dirs
    a broker with log dir 0 holding twice its share, the last 10% of brokers empty (just added);
    each topic's replicas weigh their bytes x 0.25..2 at steady state."""
    rnd = random.Random(seed)
    specs = {b: BrokerSpec(b, f"rack-{b % 10}", [f"/f/{b}/d{k}" for k in range(4)]) for b in range(brokers)}
    old = list(range(int(brokers * 0.9)))
    parts, weights = {}, {}
    factor = {t: rnd.choice([0.25, 0.5, 1.0, 1.0, 1.5, 2.0]) for t in range(40)}
    for i in range(replicas // 3):
        tp = (f"t{i % 40}", i // 40)
        size = int(rnd.lognormvariate(18.5, 1.0)) * (20 if rnd.random() < 0.004 else 1)
        reps = []
        while len(reps) < 3:
            b = rnd.choice(old)
            if b not in reps and specs[b].rack not in {specs[x].rack for x in reps}:
                reps.append(b)
        dirs = {b: specs[b].log_dirs[0 if rnd.random() < 0.4 else rnd.randrange(1, 4)] for b in reps}
        parts[tp] = PartitionSpec(tp[0], tp[1], reps, reps[0], dirs, {b: size for b in reps})
        weights.update({(tp, b): size * factor[i % 40] for b in reps})
    return PlanInput(specs, parts, weights=weights)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_steady_fleet_misses_only_log_dirs_a_replica_outweighs(seed):
    """On a SYNTHETIC fleet balanced at steady state (empty new brokers, log dir 0 doubled): every
    broker ends inside its bound, and a log dir ends outside only on a broker that holds a replica
    heavier than a log dir's share, which the reasons name with the load its broker would need."""
    inp = steady_fleet(40, 9000, seed)
    p = plan(inp, PlanOptions(tolerance=0.10))
    assert not any(r.startswith("broker ") and " ends at " in r for r in p.reasons), p.reasons[:5]
    outside = {int(r.split(" of broker ")[1].split()[0]) for r in p.reasons if r.startswith("log dir ")}
    named = {int(r.split()[1]) for r in p.reasons if " alone: more than a log dir holds" in r}
    assert outside <= named, (sorted(outside - named), p.reasons[:8])
    final = {tp: p.final[tp][0] if tp in p.final else part.replicas for tp, part in inp.partitions.items()}
    for b in named:   # a replica weighs what it weighed where it was
        heaviest = max(max(inp.weights[(tp, x)] for x in inp.partitions[tp].replicas)
                       for tp, reps in final.items() if b in reps)
        assert heaviest > 1.10 * p.after_brokers[b] / 4, (b, heaviest, p.after_brokers[b])
    assert p.lower_bound_bytes <= p.bytes_moved
