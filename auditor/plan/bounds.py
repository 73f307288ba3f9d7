"""The lower bound on the bytes any plan reaching the target must move.

With ``M`` the mean of the brokers that stay and ``t`` the tolerance, a plan that reaches the
target leaves every broker ``b`` within ``[(1-t)M, (1+t)M]`` (a drained one: only its
unmovable bytes), so at least ``load_b - (1+t)M`` bytes leave it; and every log dir of a
broker with ``k`` log dirs within ``(1 +/- t)`` of its broker's final mean, hence within
``[(1-t)^2 M/k, (1+t)^2 M/k]``, so at least ``load_d - (1+t)^2 M/k`` bytes leave that dir.
A byte moved leaves exactly one log dir (of one broker) and lands in exactly one, so

    bytes moved >= max(sum_b max(out_b, sum_{d of b} out_d), sum_b max(in_b, sum_{d of b} in_d))

with ``out``/``in`` the excess over the upper / the shortfall under the lower bound. Replicas
that cannot move (excluded topics, unmovable bytes) count as load like the others.
"""

from __future__ import annotations

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
                w = inp.weights.get(tp) if inp.weights is not None else None
                load_d[key] += float(p.sizes.get(b, 0) if w is None else w)
    active = [b for b in inp.brokers if b not in opts.drain]
    if not active:
        return 0
    mean = sum(load_d.values()) / len(active)
    t = opts.tolerance
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
    return int(max(out_total, in_total))
