"""The lower bound on the bytes any plan reaching the target must move.

With ``M`` the mean of the brokers that stay and ``t`` the tolerance, a plan that reaches the
target leaves every broker ``b`` within ``[(1-t)M, (1+t)M]`` (a drained one: only its
unmovable bytes), so at least ``load_b - (1+t)M`` bytes leave it; and every log dir of a
broker with ``k`` log dirs within ``(1 +/- t)`` of its broker's final mean, hence within
``[(1-t)^2 M/k, (1+t)^2 M/k]``, so at least ``load_d - (1+t)^2 M/k`` bytes leave that dir.
A byte moved leaves exactly one log dir (of one broker) and lands in exactly one, so

    bytes moved >= max(sum_b max(out_b, sum_{d of b} out_d), sum_b max(in_b, sum_{d of b} in_d))

with ``out``/``in`` the excess over the upper / the shortfall under the lower bound.

A second, tighter bound where log dirs are skewed inside balanced brokers: every move either
crosses brokers (it leaves one broker and enters another: half of its bytes charged to each) or
stays inside one (all its bytes charged there). For one broker ending at ``L'`` after ``out``
bytes leave and ``in`` arrive, ``intra`` bytes moving between its dirs: the bytes leaving its
over-full dirs, ``sum_d max(0, s_d - (1+t)L'/k)``, are at most ``out + intra``; the bytes its
under-full dirs need, ``sum_d max(0, (1-t)L'/k - s_d)``, at most ``in + intra``. Its charge
``(out + in)/2 + intra`` is piecewise linear in ``L'``, so its least value over ``L'`` in
``[(1-t)M, (1+t)M]`` is at a breakpoint; the sum of those least charges bounds the bytes moved.
The plan's figure is the larger of the two bounds. Replicas that cannot move (excluded topics,
unmovable bytes) count as load like the others.

When the planner balances weights other than today's bytes (the retention steady state), a byte
of excess weight is not a byte moved: a replica weighing ``w`` copies its ``s`` bytes of today.
Then the bound is the first one with each excess converted to the least bytes that carry that
much weight (a fractional knapsack: replicas by ``s / w``, cheapest first), over the replicas of
that broker or log dir for what leaves it, over every replica for what arrives. Counting every
replica as movable only lowers it, so it stays a bound.
"""

from __future__ import annotations

import bisect

from auditor.plan.model import PlanInput, PlanOptions


def broker_bounds(mean: float, tolerance: float) -> tuple[float, float]:
    return (1 - tolerance) * mean, (1 + tolerance) * mean


def lower_bound_bytes(inp: PlanInput, opts: PlanOptions) -> int:
    load_d: dict[tuple[int, str], float] = {}
    for b, spec in inp.brokers.items():
        for d in spec.log_dirs:
            load_d[(b, d)] = float(inp.fixed_bytes.get((b, d), 0))
    for tp, p in inp.partitions.items():
        for b in p.replicas:
            key = (b, p.log_dirs.get(b))
            if key in load_d:
                w = inp.weights.get((tp, b)) if inp.weights is not None else None
                load_d[key] += float(p.sizes.get(b, 0) if w is None else w)
    active = [b for b in inp.brokers if b not in opts.drain]
    if not active:
        return 0
    mean = sum(load_d.values()) / len(active)
    t = opts.tolerance
    if inp.weights is not None:
        return _weighted_bound(inp, opts, load_d, mean)
    out_total = in_total = 0.0
    for b, spec in inp.brokers.items():
        dirs = spec.log_dirs
        load = sum(load_d[(b, d)] for d in dirs)
        if b in opts.drain:
            fixed = sum(inp.fixed_bytes.get((b, d), 0) for d in dirs)
            out_total += max(0.0, load - fixed)
            continue
        k = max(len(dirs), 1)
        d_hi, d_lo = (1 + t) ** 2 * mean / k, (1 - t) ** 2 * mean / k
        out_d = sum(max(0.0, load_d[(b, d)] - d_hi) for d in dirs)
        in_d = sum(max(0.0, d_lo - load_d[(b, d)]) for d in dirs)
        out_total += max(max(0.0, load - (1 + t) * mean), out_d)
        in_total += max(max(0.0, (1 - t) * mean - load), in_d)
    charged = sum(_least_charge([load_d[(b, d)] for d in spec.log_dirs], mean, t)
                  for b, spec in inp.brokers.items() if b not in opts.drain and spec.log_dirs)
    return int(max(out_total, in_total, charged))


def _least_charge(dirs: list[float], mean: float, t: float) -> float:
    """The least ``(out + in)/2 + intra`` of one broker whose log dirs hold ``dirs`` bytes."""
    k, s = len(dirs), sum(dirs)
    lo, hi = (1 - t) * mean, (1 + t) * mean
    points = {lo, hi, min(max(s, lo), hi)}
    for x in dirs:
        for f in (1 + t, 1 - t):
            if f > 0:
                points.add(min(max(k * x / f, lo), hi))

    def charge(final: float) -> float:
        out, into = max(0.0, s - final), max(0.0, final - s)
        leaving = sum(max(0.0, x - (1 + t) * final / k) for x in dirs)
        arriving = sum(max(0.0, (1 - t) * final / k - x) for x in dirs)
        return (out + into) / 2 + max(0.0, leaving - out, arriving - into)
    return min(charge(p) for p in points)


class _Cheapest:
    """The least bytes that carry a given weight, from (bytes, weight) pairs (fractional knapsack)."""

    def __init__(self, items: list[tuple[float, float]]):
        ordered = sorted((x for x in items if x[1] > 0), key=lambda x: x[0] / x[1])
        self.cum_w, self.cum_s = [0.0], [0.0]
        for size, w in ordered:
            self.cum_w.append(self.cum_w[-1] + w)
            self.cum_s.append(self.cum_s[-1] + size)

    def bytes_for(self, weight: float) -> float:
        if weight <= 0:
            return 0.0
        i = bisect.bisect_left(self.cum_w, weight)
        if i >= len(self.cum_w):
            return self.cum_s[-1]
        w0, s0 = self.cum_w[i - 1], self.cum_s[i - 1]
        return s0 + (self.cum_s[i] - s0) * (weight - w0) / (self.cum_w[i] - w0)


def _weighted_bound(inp: PlanInput, opts: PlanOptions, load_d: dict, mean: float) -> int:
    t = opts.tolerance
    items_d: dict[tuple[int, str], list[tuple[float, float]]] = {k: [] for k in load_d}
    for tp, p in inp.partitions.items():
        for b in p.replicas:
            key = (b, p.log_dirs.get(b))
            if key in items_d:
                size = float(p.sizes.get(b, 0))
                items_d[key].append((size, float(inp.weights.get((tp, b), size))))
    every = _Cheapest([x for v in items_d.values() for x in v])
    out_total = in_total = 0.0
    for b, spec in inp.brokers.items():
        dirs = spec.log_dirs
        load = sum(load_d[(b, d)] for d in dirs)
        own = _Cheapest([x for d in dirs for x in items_d[(b, d)]])
        if b in opts.drain:
            out_total += own.cum_s[-1] + sum(s for d in dirs for s, w in items_d[(b, d)] if w <= 0)
            continue
        k = max(len(dirs), 1)
        d_hi, d_lo = (1 + t) ** 2 * mean / k, (1 - t) ** 2 * mean / k
        out_d = sum(_Cheapest(items_d[(b, d)]).bytes_for(load_d[(b, d)] - d_hi) for d in dirs)
        in_d = sum(every.bytes_for(d_lo - load_d[(b, d)]) for d in dirs)
        out_total += max(own.bytes_for(load - (1 + t) * mean), out_d)
        in_total += max(every.bytes_for((1 - t) * mean - load), in_d)
    return int(max(out_total, in_total))
