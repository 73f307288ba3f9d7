"""The reassignment planner (auditor.plan) on a SYNTHETIC fleet: time, peak RSS, bytes moved
against the plan's lower bound, beside two baselines on the same fleet:

* first-fit decreasing: every partition placed afresh, largest first, each replica on the least
  loaded broker (distinct brokers and racks) and its least loaded log dir;
* ``kafka-reassign-partitions --generate``'s kind of assignment: round-robin by partition count
  over a rack-alternating broker list from a random start with a growing shift, sizes ignored,
  log dirs left to the broker ("any": a new replica lands in the dir with fewest partitions).

The fleet (SYNTHETIC: made up, no broker ever held it): ``--brokers`` x ``--log-dirs`` log dirs,
``--replicas`` replicas at RF 3 over 200 topics, sizes log-normal with a few hot partitions; the
last 10% of brokers were just added (empty), and log dir 0 of each broker holds twice its share.

    .venv/bin/python benchmarks/plan.py                       # 500 x 4 x 200,000
    .venv/bin/python benchmarks/plan.py --brokers 50 --replicas 20000

Targets (issue 36): the plan in < 60 s and < 2 GiB, bytes moved <= 1.2 x the lower bound.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from auditor.plan import BrokerSpec, PartitionSpec, PlanInput, PlanOptions, plan  # noqa: E402

RF = 3
TOPICS = 200


def fleet(brokers: int, dirs: int, replicas: int, racks: int, seed: int = 7) -> PlanInput:
    rnd = random.Random(seed)
    specs = {b: BrokerSpec(b, f"rack-{b % racks}", [f"/synthetic/b{b}/d{k}" for k in range(dirs)])
             for b in range(brokers)}
    old = [b for b in range(brokers) if b < int(brokers * 0.9)]
    by_rack: dict[str, list[int]] = {}
    for b in old:
        by_rack.setdefault(specs[b].rack, []).append(b)
    rack_names = sorted(by_rack)
    parts = {}
    n_parts = replicas // RF
    for i in range(n_parts):
        topic, p = f"synthetic-{i % TOPICS}", i // TOPICS
        size = int(rnd.lognormvariate(18.5, 1.0))             # median ~100 MB
        if rnd.random() < 0.002:
            size *= 20                                          # a hot partition
        chosen_racks = rnd.sample(rack_names, RF)
        reps = [rnd.choice(by_rack[r]) for r in chosen_racks]
        dirs_of = {b: specs[b].log_dirs[0 if rnd.random() < 2 / (dirs + 1) else rnd.randrange(1, dirs)]
                   for b in reps}
        parts[(topic, p)] = PartitionSpec(topic, p, reps, reps[0], dirs_of, {b: size for b in reps})
    return PlanInput(specs, parts)


def loads(inp: PlanInput, assign: dict) -> tuple[dict, dict]:
    """Broker and (broker, dir) bytes of an assignment {tp: {broker: dir or None}} (None: the
    dir a Kafka broker would pick, the one with fewest partitions, tracked here)."""
    lb = {b: 0 for b in inp.brokers}
    ld = {(b, d): 0 for b, s in inp.brokers.items() for d in s.log_dirs}
    count = dict.fromkeys(ld, 0)
    for tp, where in assign.items():
        size = max(inp.partitions[tp].sizes.values())
        for b, d in where.items():
            if d is None:
                d = min(inp.brokers[b].log_dirs, key=lambda x: count[(b, x)])
            lb[b] += size
            ld[(b, d)] += size
            count[(b, d)] += 1
    return lb, ld


def moved_bytes(inp: PlanInput, assign: dict) -> int:
    total = 0
    for tp, where in assign.items():
        p = inp.partitions[tp]
        for b, d in where.items():
            if b not in p.replicas or (d is not None and d != p.log_dirs[b]):
                total += p.sizes.get(b, max(p.sizes.values()))
    return total


def ratio(values) -> float:
    values = list(values)
    return max(values) / (sum(values) / len(values))


def first_fit_decreasing(inp: PlanInput) -> dict:
    lb = {b: 0 for b in inp.brokers}
    ld = {(b, d): 0 for b, s in inp.brokers.items() for d in s.log_dirs}
    out = {}
    for tp, p in sorted(inp.partitions.items(), key=lambda kv: -max(kv[1].sizes.values())):
        size = max(p.sizes.values())
        chosen, racks = {}, set()
        for b in sorted(lb, key=lb.get):
            if inp.brokers[b].rack in racks:
                continue
            d = min(inp.brokers[b].log_dirs, key=lambda x: ld[(b, x)])
            chosen[b] = d
            racks.add(inp.brokers[b].rack)
            lb[b] += size
            ld[(b, d)] += size
            if len(chosen) == len(p.replicas):
                break
        out[tp] = chosen
    return out


def generate_like(inp: PlanInput, seed: int = 11) -> dict:
    """Round-robin by partition count (sizes ignored), per topic, over a rack-alternating list."""
    rnd = random.Random(seed)
    by_rack: dict[str, list[int]] = {}
    for b in sorted(inp.brokers):
        by_rack.setdefault(inp.brokers[b].rack, []).append(b)
    alternating = [lst[i] for i in range(max(map(len, by_rack.values()))) for lst in by_rack.values() if i < len(lst)]
    n = len(alternating)
    by_topic: dict[str, list] = {}
    for tp in inp.partitions:
        by_topic.setdefault(tp[0], []).append(tp)
    out = {}
    for topic, tps in by_topic.items():
        start, shift = rnd.randrange(n), rnd.randrange(n)
        for tp in sorted(tps, key=lambda x: x[1]):
            i = tp[1]
            if i > 0 and i % n == 0:
                shift += 1
            first = (start + i) % n
            reps = [alternating[first]]
            for j in range(len(inp.partitions[tp].replicas) - 1):
                reps.append(alternating[(first + 1 + (shift + j) % (n - 1)) % n])
            out[tp] = {b: None for b in reps}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=500)
    ap.add_argument("--log-dirs", type=int, default=4)
    ap.add_argument("--replicas", type=int, default=200_000)
    ap.add_argument("--racks", type=int, default=10)
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--steady", action="store_true",
                    help="balance SYNTHETIC steady states: each topic's replicas weigh their bytes x a factor "
                         "(0.25, 0.5, 1, 1, 1.5 or 2, seeded), as retention would make them; no baselines")
    a = ap.parse_args()
    t0 = time.perf_counter()
    inp = fleet(a.brokers, a.log_dirs, a.replicas, a.racks)
    if a.steady:
        rnd = random.Random(3)
        factor = {f"synthetic-{t}": rnd.choice([0.25, 0.5, 1.0, 1.0, 1.5, 2.0]) for t in range(TOPICS)}
        inp.weights = {(tp, b): p.sizes[b] * factor[tp[0]] for tp, p in inp.partitions.items() for b in p.replicas}
    built = time.perf_counter() - t0
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    c0, t1 = time.process_time(), time.perf_counter()
    p = plan(inp, PlanOptions(tolerance=a.tolerance))
    wall, cpu = time.perf_counter() - t1, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"SYNTHETIC fleet: {a.brokers} brokers x {a.log_dirs} log dirs, {len(inp.partitions):,} partitions, "
          f"{sum(len(x.replicas) for x in inp.partitions.values()):,} replicas (built in {built:.1f} s); "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"plan: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} MiB (fleet alone {rss0:.0f} MiB): "
          f"{'PASS' if wall < 60 and rss < 2048 else 'MISS'} (< 60 s, < 2 GiB); target reached: {p.target_reached}")
    if not p.target_reached:
        outside = {r.split(" of broker ")[1].split()[0] for r in p.reasons if r.startswith("log dir ")}
        heavy = {r.split()[1] for r in p.reasons if " alone: more than a log dir holds" in r}
        brokers_out = [r for r in p.reasons if r.startswith("broker ") and " ends at " in r]
        print(f"  {len(brokers_out)} brokers outside their bound; log dirs outside on {len(outside)} brokers, "
              f"{len(outside & heavy)} of them holding a replica heavier than a log dir's share (named below)")
        for r in [r for r in p.reasons if not r.startswith("log dir ")][:6]:
            print(f"  - {r}")
    lb = p.lower_bound_bytes
    ours = {tp: {b: dirs.get(b) for b in reps} for tp, (reps, dirs) in p.final.items()}
    recount = moved_bytes(inp, ours)
    print(f"plan: {len(p.moves):,} moves ({recount} bytes recounted from its final assignment: "
          f"{'same' if recount == p.bytes_moved else 'DIFFERENT'}); between brokers {p.bytes_moved_between_brokers / 1e12:.2f} TB, between log dirs "
          f"{(p.bytes_moved - p.bytes_moved_between_brokers) / 1e12:.2f} TB")
    rows = [("kafka-audit plan", p.bytes_moved, ratio(p.after_brokers.values()), ratio(p.after_dirs.values()))]
    baselines = () if a.steady else (("first-fit decreasing", first_fit_decreasing(inp)),
                                      ("--generate (round-robin)", generate_like(inp)))
    for name, assign in baselines:
        lbk, ldk = loads(inp, assign)
        rows.append((name, moved_bytes(inp, assign), ratio(lbk.values()), ratio(ldk.values())))
    print(f"\nbefore: brokers max/mean {ratio(p.before_brokers.values()):.3f}, log dirs max/mean "
          f"{ratio(p.before_dirs.values()):.3f}; lower bound on bytes moved {lb / 1e12:.2f} TB")
    print(f"{'':<26} {'bytes moved':>12} {'x lower bound':>14} {'brokers max/mean':>17} {'dirs max/mean':>14}")
    for name, moved, rb, rd in rows:
        print(f"{name:<26} {moved / 1e12:>10.2f}TB {moved / lb if lb else float('nan'):>14.2f} {rb:>17.3f} {rd:>14.3f}")
    print(f"\nbytes moved <= 1.2 x lower bound: {'PASS' if p.bytes_moved <= 1.2 * lb else 'MISS'} "
          f"({p.bytes_moved} vs {lb})")


if __name__ == "__main__":
    main()
