"""The reassignment planner (auditor.plan) on synthetic clusters, and ``kafka-audit plan``'s bad input."""

from __future__ import annotations

import json
import random

import pytest

from auditor.plan import BrokerSpec, PartitionSpec, PlanInput, PlanOptions, plan, reassignment, rollback, summary
from harness.cli import kafka_audit_in_process

pytestmark = pytest.mark.unit

MB = 1_000_000


def cluster(brokers=6, dirs=2, parts=80, rf=3, racks=3, seed=1, heavy=1, cap=None):
    """Pareto-sized partitions, broker ``heavy`` in about half of them, every replica in log dir 0."""
    rnd = random.Random(seed)
    specs = {b: BrokerSpec(b, None if racks == 0 else f"r{b % racks}", [f"/d/{b}/{k}" for k in range(dirs)])
             for b in range(1, brokers + 1)}
    partitions = {}
    for i in range(parts):
        size = int(rnd.paretovariate(1.5) * MB)
        reps = rnd.sample(range(1, brokers + 1), rf)
        if heavy and heavy not in reps and rnd.random() < 0.6:
            reps[-1] = heavy
        partitions[("t", i)] = PartitionSpec("t", i, reps, reps[0], {b: specs[b].log_dirs[0] for b in reps},
                                             {b: size for b in reps})
    caps = {} if cap is None else {(b, d): cap for b, s in specs.items() for d in s.log_dirs}
    return PlanInput(specs, partitions, capacities=caps)


def final_sets(p, inp):
    out = {tp: (list(s.replicas), dict(s.log_dirs)) for tp, s in inp.partitions.items()}
    for tp, (reps, dirs) in p.final.items():
        out[tp] = (reps, {b: dirs[b] or inp.partitions[tp].log_dirs.get(b) for b in reps})
    return out


def assert_within(p, tol):
    mean = p.mean_broker_bytes
    for b, v in p.after_brokers.items():
        if b in p.options.drain:
            assert v == 0
            continue
        assert abs(v - mean) <= tol * mean + 1, (b, v, mean)
    per_broker = {}
    for (b, d), v in p.after_dirs.items():
        per_broker.setdefault(b, []).append(v)
    for b, vs in per_broker.items():
        m = sum(vs) / len(vs)
        assert all(abs(v - m) <= tol * m + 1 for v in vs), (b, vs)


def test_balances_brokers_and_log_dirs_keeping_rf_brokers_and_racks():
    inp = cluster()
    p = plan(inp)
    assert p.target_reached, p.reasons
    assert_within(p, 0.10)
    racks = {b: s.rack for b, s in inp.brokers.items()}
    for tp, (reps, _dirs) in final_sets(p, inp).items():
        before = inp.partitions[tp].replicas
        assert len(reps) == len(before) == len(set(reps))
        assert len({racks[b] for b in reps}) >= len({racks[b] for b in before})
    assert p.lower_bound_bytes <= p.bytes_moved <= 1.5 * p.lower_bound_bytes
    # bytes and loads add up: the plan's after = before with every move applied
    assert sum(p.after_brokers.values()) == sum(p.before_brokers.values())


def test_reassignment_file_and_rollback_shape():
    inp = cluster(parts=30)
    p = plan(inp)
    doc = reassignment(p)
    assert doc["version"] == 1 and doc["partitions"]
    for e in doc["partitions"]:
        assert set(e) == {"topic", "partition", "replicas", "log_dirs"}
        assert len(e["log_dirs"]) == len(e["replicas"])
        assert all(d == "any" or d.startswith("/") for d in e["log_dirs"])
    back = rollback(p, inp)
    assert [(e["topic"], e["partition"]) for e in back["partitions"]] == [(e["topic"], e["partition"]) for e in doc["partitions"]]
    for e in back["partitions"]:
        assert e["replicas"] == inp.partitions[(e["topic"], e["partition"])].replicas
    s = summary(p, inp, 10 * MB)
    assert s["bytes_moved"] == sum(m["size_bytes"] for m in s["moves"])
    assert s["throttle"]["expected_duration_s"] > 0
    assert set(s["throttle"]["topic_configs"]["t"]) == {"leader.replication.throttled.replicas",
                                                        "follower.replication.throttled.replicas"}
    json.dumps(s)


def test_followers_before_leaders_at_equal_size():
    specs = {b: BrokerSpec(b, None, [f"/d/{b}"]) for b in (1, 2)}
    parts = {("t", i): PartitionSpec("t", i, [1], 1 if i == 0 else 9, {1: "/d/1"}, {1: MB}) for i in range(2)}
    parts[("u", 0)] = PartitionSpec("u", 0, [2], 2, {2: "/d/2"}, {2: 0})
    p = plan(PlanInput(specs, parts), PlanOptions(tolerance=0.0))
    assert [(m.topic, m.partition, m.leader) for m in p.moves] == [("t", 1, False)]


def test_drain_empties_the_broker():
    inp = cluster(racks=0)
    p = plan(inp, PlanOptions(drain=frozenset({1})))
    assert p.target_reached, p.reasons
    assert p.after_brokers[1] == 0
    assert all(1 not in reps for reps, _ in final_sets(p, inp).values())
    assert p.bytes_moved >= p.before_brokers[1] == p.lower_bound_bytes or p.lower_bound_bytes >= p.before_brokers[1]


def test_drain_impossible_with_rf_equal_to_brokers_says_why():
    inp = cluster(brokers=3, rf=3, racks=3, parts=10)
    p = plan(inp, PlanOptions(drain=frozenset({2})))
    assert not p.target_reached
    assert any("replication factor 3 > 2 broker(s)" in n for n in p.notes)


def test_rack_spread_reduced_only_when_the_racks_left_force_it():
    # 4 brokers on 3 racks; draining broker 3 (the only one of rack r0) leaves 2 racks for RF 3
    specs = {1: BrokerSpec(1, "r1", ["/d/1"]), 2: BrokerSpec(2, "r2", ["/d/2"]), 3: BrokerSpec(3, "r0", ["/d/3"]),
             4: BrokerSpec(4, "r1", ["/d/4"])}
    parts = {("t", i): PartitionSpec("t", i, [1, 2, 3], 1, {1: "/d/1", 2: "/d/2", 3: "/d/3"}, {1: MB, 2: MB, 3: MB})
             for i in range(2)}
    p = plan(PlanInput(specs, parts), PlanOptions(drain=frozenset({3}), tolerance=0.5))
    assert p.after_brokers[3] == 0
    assert any("on 2 racks instead of 3" in n for n in p.notes)


def test_headroom_forbids_the_obvious_move():
    # broker 2 has two log dirs; the emptier one is nearly full on its disk: the copy goes to the other
    specs = {1: BrokerSpec(1, None, ["/d/1/a"]), 2: BrokerSpec(2, None, ["/d/2/a", "/d/2/b"])}
    parts = {("t", i): PartitionSpec("t", i, [1], 1, {1: "/d/1/a"}, {1: 10 * MB}) for i in range(4)}
    parts[("f", 0)] = PartitionSpec("f", 0, [2], 2, {2: "/d/2/b"}, {2: 2 * MB})
    caps = {(1, "/d/1/a"): 100 * MB, (2, "/d/2/a"): 11 * MB, (2, "/d/2/b"): 100 * MB}
    p = plan(PlanInput(specs, parts, capacities=caps), PlanOptions(tolerance=0.5))
    assert p.moves and all(m.to_dir == "/d/2/b" for m in p.moves if m.size_bytes == 10 * MB)
    assert all(p.peak_dirs[k] <= 0.85 * caps[k] for k in caps)
    assert any("/d/2/a" in n and "headroom" in n for n in p.notes)


def test_exclude_topic_and_limits():
    inp = cluster()
    p = plan(inp, PlanOptions(exclude_topics=("t",)))
    assert p.moves == [] and not p.target_reached
    p = plan(inp, PlanOptions(max_moves=2))
    assert len(p.moves) <= 2 and not p.target_reached
    assert any("--max-moves" in r for r in p.reasons)
    full = plan(inp)
    p = plan(inp, PlanOptions(max_move_bytes=full.bytes_moved // 3))
    assert p.bytes_moved <= full.bytes_moved // 3


def test_hot_partition_is_relocated_not_split():
    specs = {b: BrokerSpec(b, None, [f"/d/{b}"]) for b in (1, 2)}

    def one(t, i, b, size):
        return PartitionSpec(t, i, [b], b, {b: f"/d/{b}"}, {b: size})
    parts = {("hot", 0): one("hot", 0, 1, 3 * MB), ("hot", 1): one("hot", 1, 2, MB // 2),
             ("hot", 2): one("hot", 2, 2, MB // 2), ("x", 0): one("x", 0, 1, 2 * MB)}
    p = plan(PlanInput(specs, parts), PlanOptions(tolerance=0.5, exclude_topics=("x",)))
    assert [(m.topic, m.partition, m.to_broker) for m in p.moves] == [("hot", 0, 2)]
    assert any(n.startswith("hot-0 is 6.0x") and "relocates its load, it does not split it" in n for n in p.notes)


def test_lower_bound_is_zero_when_balanced():
    specs = {b: BrokerSpec(b, None, [f"/d/{b}"]) for b in (1, 2)}
    parts = {("t", b): PartitionSpec("t", b, [b], b, {b: f"/d/{b}"}, {b: MB}) for b in (1, 2)}
    p = plan(PlanInput(specs, parts))
    assert p.moves == [] and p.lower_bound_bytes == 0 and p.target_reached


def test_cli_without_metadata_log_or_bootstrap_server_exits_2(tmp_path):
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000000.log").write_bytes(b"")
    r = kafka_audit_in_process("plan", "--log-dir", tmp_path)
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "--bootstrap-server" in err[0] and "__cluster_metadata-0" in err[0]


def test_manifests_from_different_moments_are_said():
    from auditor.cli.plan_input import moments_note
    assert moments_note([1_000, 2_000, None]) == []
    assert "collected 60 min apart" in moments_note([0, 3_600_000])[0]


def test_fenced_broker_gets_nothing_and_moving_partitions_stay():
    inp = cluster(racks=0)
    inp.brokers[6].fenced = True
    first = next(iter(inp.partitions.values()))
    first.movable = False
    p = plan(inp)
    assert all(m.to_broker != 6 for m in p.moves)
    assert all((m.topic, m.partition) != first.tp for m in p.moves)
    assert any("broker 6 is fenced" in n for n in p.notes)


def test_log_dirs_on_one_file_system_share_its_headroom():
    # broker 2's two log dirs sit on one file system that is 80% used: no copy fits under 85%
    specs = {1: BrokerSpec(1, None, ["/d/1/a"]), 2: BrokerSpec(2, None, ["/d/2/a", "/d/2/b"])}
    parts = {("t", i): PartitionSpec("t", i, [1], 1, {1: "/d/1/a"}, {1: 10 * MB}) for i in range(6)}
    inp = PlanInput(specs, parts, disks={(2, "/d/2/a"): "8:1", (2, "/d/2/b"): "8:1", (1, "/d/1/a"): "8:2"},
                    disk_capacity={"8:1": 100 * MB, "8:2": 1000 * MB}, disk_used={"8:1": 80 * MB, "8:2": 50 * MB})
    p = plan(inp)
    assert p.moves == [] and not p.target_reached
    assert any("file system 8:1" in n for n in p.notes)
    inp.disk_used["8:1"] = 60 * MB          # balance wants three 10 MB copies there; two fit under 85 MB
    p = plan(inp)
    assert p.peak_disks["8:1"] == 80 * MB and len(p.moves) == 2 and not p.target_reached
    assert summary(p, inp, None)["file_systems"][0]["peak_fraction"] <= 0.85


def _optimum(sizes, start, brokers, dirs, tol, weights=None):
    """Brute force: the fewest bytes any placement (RF 1) reaching the target (on ``weights``,
    default the sizes) moves, or None."""
    import itertools
    places = [(b, d) for b in brokers for d in dirs]
    weights = weights or sizes
    mean = sum(weights) / len(brokers)
    best = None
    for choice in itertools.product(places, repeat=len(sizes)):
        load_b = {b: 0 for b in brokers}
        load_d = {p: 0 for p in places}
        for s, p in zip(weights, choice):
            load_b[p[0]] += s
            load_d[p] += s
        if any(abs(v - mean) > tol * mean + 1e-6 for v in load_b.values()):
            continue
        if any(abs(load_d[(b, d)] - load_b[b] / len(dirs)) > tol * load_b[b] / len(dirs) + 1e-6
               for b in brokers for d in dirs):
            continue
        moved = sum(s for s, p, q in zip(sizes, choice, start) if p != q)
        best = moved if best is None else min(best, moved)
    return best


BRUTE_LAYOUTS = [(3, 1, 7, 0.2), (2, 2, 6, 0.3)]   # brokers, log dirs each, partitions (RF 1), tolerance


@pytest.mark.parametrize("layout", BRUTE_LAYOUTS)
def test_lower_bound_never_above_the_brute_force_optimum(layout):
    """On small clusters where every placement can be tried: the lower bound <= the fewest bytes any
    placement reaching the target moves == what the plan moves (it reaches every reachable target)."""
    nb, nd, n, tol = layout
    feasible = 0
    for seed in range(25):
        rnd = random.Random(seed)
        brokers, dirs = list(range(1, nb + 1)), ["a", "b"][:nd]
        sizes = [rnd.randint(1, 20) * MB for _ in range(n)]
        start = [(rnd.choice([1, 1, 2]), rnd.choice(dirs)) for _ in sizes]
        specs = {b: BrokerSpec(b, None, [f"/{b}/{d}" for d in dirs]) for b in brokers}
        parts = {("t", i): PartitionSpec("t", i, [b], b, {b: f"/{b}/{d}"}, {b: s}) for i, (s, (b, d)) in
                 enumerate(zip(sizes, start))}
        p = plan(PlanInput(specs, parts), PlanOptions(tolerance=tol))
        best = _optimum(sizes, start, brokers, dirs, tol)
        if best is None:
            assert not p.target_reached
            continue
        feasible += 1
        assert p.lower_bound_bytes <= best, (seed, sizes, start, p.lower_bound_bytes, best)
        # small enough for the planner's exact search: it reaches every reachable target, moving the fewest bytes
        assert p.target_reached and p.bytes_moved == best, (seed, sizes, start, p.reasons, p.bytes_moved, best)
    assert feasible >= 15          # the cases mostly have a solution: the bound was really compared


@pytest.mark.parametrize("layout", BRUTE_LAYOUTS)
def test_weighted_lower_bound_never_above_the_brute_force_optimum(layout):
    """Balancing weights other than today's bytes (the steady state): the bound, in bytes moved,
    stays <= the brute-force optimum and the plan, when it reaches the target, moves no less."""
    nb, nd, n, tol = layout
    feasible = 0
    for seed in range(25):
        rnd = random.Random(100 + seed)
        brokers, dirs = list(range(1, nb + 1)), ["a", "b"][:nd]
        sizes = [rnd.randint(1, 20) * MB for _ in range(n)]
        weights = [rnd.randint(1, 20) * MB for _ in sizes]      # unrelated to the sizes
        start = [(rnd.choice([1, 1, 2]), rnd.choice(dirs)) for _ in sizes]
        specs = {b: BrokerSpec(b, None, [f"/{b}/{d}" for d in dirs]) for b in brokers}
        parts = {("t", i): PartitionSpec("t", i, [b], b, {b: f"/{b}/{d}"}, {b: s}) for i, (s, (b, d)) in
                 enumerate(zip(sizes, start))}
        inp = PlanInput(specs, parts, weights={(("t", i), b): w for i, (w, (b, _d)) in enumerate(zip(weights, start))})
        p = plan(inp, PlanOptions(tolerance=tol))
        best = _optimum(sizes, start, brokers, dirs, tol, weights)
        if best is None:
            assert not p.target_reached
            continue
        feasible += 1
        assert p.lower_bound_bytes <= best, (seed, sizes, weights, start, p.lower_bound_bytes, best)
        assert p.target_reached and p.bytes_moved == best, (seed, sizes, weights, start, p.reasons, p.bytes_moved, best)
    assert feasible >= 20          # most cases have a solution: the bound was really compared


def _optimum_rf(parts, brokers, dirs, tol, rf):
    """Brute force at any replication factor: the fewest bytes any placement reaching the target
    moves, or None. ``parts``: [(size, {broker: dir})]; a replica that changes broker copies its
    bytes, one that stays on its broker in another log dir copies them too."""
    import itertools
    layouts = [tuple(zip(bs, ds)) for bs in itertools.combinations(brokers, rf)
               for ds in itertools.product(dirs, repeat=rf)]
    mean = sum(s * rf for s, _ in parts) / len(brokers)
    best = None
    for choice in itertools.product(layouts, repeat=len(parts)):
        load_b = dict.fromkeys(brokers, 0)
        load_d = {(b, d): 0 for b in brokers for d in dirs}
        moved = 0
        for (size, start), layout in zip(parts, choice):
            for b, d in layout:
                load_b[b] += size
                load_d[(b, d)] += size
                moved += size if start.get(b) != d else 0
        if any(abs(v - mean) > tol * mean + 1e-6 for v in load_b.values()):
            continue
        if any(abs(load_d[(b, d)] - load_b[b] / len(dirs)) > tol * load_b[b] / len(dirs) + 1e-6
               for b in brokers for d in dirs):
            continue
        best = moved if best is None else min(best, moved)
    return best


@pytest.mark.parametrize("layout", [(3, 1, 5, 0.15, 20), (4, 1, 4, 0.2, 20), (3, 2, 4, 0.3, 8)])
def test_plan_against_the_brute_force_optimum_at_rf_2(layout):
    """RF 2 (the RF 1 tests above cannot catch a move that breaks one-replica-per-broker or counts
    a partition's two copies wrong): the lower bound <= the brute-force optimum == the plan's bytes
    whenever a placement reaches the target, and the plan keeps two replicas on two brokers."""
    nb, nd, n, tol, seeds = layout      # brokers, log dirs each, partitions, tolerance, clusters tried
    feasible = 0
    for seed in range(seeds):
        rnd = random.Random(300 + seed)
        brokers, dirs = list(range(1, nb + 1)), ["a", "b"][:nd]
        parts = []
        for _ in range(n):
            reps = rnd.sample(brokers[:2] if rnd.random() < 0.5 else brokers, 2)   # skewed to brokers 1 and 2
            parts.append((rnd.randint(1, 20) * MB, {b: rnd.choice(dirs) for b in reps}))
        specs = {b: BrokerSpec(b, None, [f"/{b}/{d}" for d in dirs]) for b in brokers}
        inp = PlanInput(specs, {("t", i): PartitionSpec("t", i, list(start), next(iter(start)),
                                                        {b: f"/{b}/{d}" for b, d in start.items()},
                                                        {b: size for b in start})
                                for i, (size, start) in enumerate(parts)})
        p = plan(inp, PlanOptions(tolerance=tol))
        for tp, (reps, _dirs) in p.final.items():
            assert len(reps) == len(set(reps)) == 2, (seed, tp, reps)
        best = _optimum_rf(parts, brokers, dirs, tol, 2)
        if best is None:
            assert not p.target_reached, (seed, p.reasons)
            continue
        feasible += 1
        assert p.lower_bound_bytes <= best, (seed, parts, p.lower_bound_bytes, best)
        assert p.target_reached and p.bytes_moved == best, (seed, parts, p.reasons, p.bytes_moved, best)
    assert feasible >= seeds // 4, feasible          # the bound and the plan were really compared
