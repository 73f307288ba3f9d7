"""The planner's last resort on small clusters: an exact, bounded search.

The two greedy steps (:mod:`auditor.plan.planner`) can miss a target that some placement reaches
when the replicas are few and coarse (one move overshoots, two would land it), or reach it moving
more than needed. When the cluster is small -- the product of every movable replica's candidate places (its own log dir,
the other log dirs of its broker, each log dir of every broker that may take it) at most
:data:`LEAVES` -- every placement is tried, depth first, the heaviest replicas first, a branch
dropped as soon as it moves as many bytes as the best placement found (at first: the greedy's
plan, when it reaches the target). A placement counts when
every broker and every log dir ends within its bounds (as the greedy's target says), and it is
then replayed through the planner's own moves, which check what the search does not: racks, the
headroom while both copies exist and at steady state, ``--max-moves`` / ``--max-move-bytes``.
"""

from __future__ import annotations

import bisect

from auditor.plan.choose import EPS
from auditor.plan.log_dirs import apply_dir_move
from auditor.plan.log_dirs import dir_reasons

#: the most placements the search looks at (bounds its cost: a few seconds at worst)
LEAVES = 200_000


def _replicas(st) -> list[tuple]:
    """Movable replicas as (tp, broker, log dir, weight, bytes), heaviest first."""
    out = [(e[2], b, d, e[0], st.size[(e[2], b)]) for (b, d), lst in st.entries.items() for e in lst]
    return sorted(out, key=lambda r: (-r[3], r[0], r[1]))


def _candidates(st, reps: list[tuple]) -> list[list[tuple[int, str]]] | None:
    """Each replica's places, its own first; None when the product passes :data:`LEAVES`."""
    out, product = [], 1
    for tp, b, d, _w, _s in reps:
        here = [(b, d)] + [(b, x) for x in st.dirs[b] if x != d] if b in st.receivers else [(b, d)]
        away = [(x, y) for x in st.receivers if x != b and x not in st.original[tp] for y in st.dirs[x]]
        places = here + away
        product *= len(places)
        if product > LEAVES:
            return None
        out.append(places)
    return out


def search(fresh, below: float = float("inf")) -> object | None:
    """A state (from ``fresh()``, the planner's initial state) with the moves of the placement
    that reaches the target moving the fewest bytes, fewer than ``below``; None when the cluster
    is too large for the search or no placement does."""
    base = fresh()
    reps = _replicas(base)
    cands = _candidates(base, reps) if reps else None
    if cands is None:
        return None
    load_b, load_d = dict(base.load_b), dict(base.load_d)
    taken = {tp: set(place) for tp, place in base.place.items()}
    choice: list[tuple[int, str]] = [(r[1], r[2]) for r in reps]
    best: list = [None, below]

    def done() -> bool:
        if any(base.outside(b, load_b[b]) > EPS for b in load_b):
            return False
        for b in base.receivers:
            k = len(base.dirs[b])
            if k < 2:
                continue
            lo, hi = (1 - base.opts.tolerance) * load_b[b] / k, (1 + base.opts.tolerance) * load_b[b] / k
            if any(load_d[(b, d)] < lo - EPS or load_d[(b, d)] > hi + EPS for d in base.dirs[b]):
                return False
        return True

    def walk(i: int, moved: float) -> None:
        if moved >= best[1]:
            return
        if i == len(reps):
            if done():
                replayed = _replay(fresh, reps, choice)
                if replayed is not None:
                    best[0], best[1] = replayed, moved
            return
        tp, b, d, w, size = reps[i]
        for (x, y) in cands[i]:
            if x != b and x in taken[tp]:
                continue
            cost = 0 if (x, y) == (b, d) else size
            _shift(load_b, load_d, (b, d), (x, y), w)
            if x != b:
                taken[tp].discard(b)
                taken[tp].add(x)
            choice[i] = (x, y)
            walk(i + 1, moved + cost)
            if x != b:
                taken[tp].discard(x)
                taken[tp].add(b)
            _shift(load_b, load_d, (x, y), (b, d), w)
        choice[i] = (b, d)

    walk(0, 0.0)
    return best[0]


def _shift(load_b: dict, load_d: dict, src: tuple[int, str], dst: tuple[int, str], w: float) -> None:
    load_b[src[0]] -= w
    load_d[src] -= w
    load_b[dst[0]] += w
    load_d[dst] += w


def _replay(fresh, reps: list[tuple], choice: list[tuple[int, str]]):
    """The placement as the planner's own moves on a fresh state (None when one is refused)."""
    st = fresh()
    for (tp, b, d, w, size), (x, y) in zip(reps, choice):
        if (x, y) == (b, d):
            continue
        if not st.limit_allows(size) or not st.headroom_ok((x, y), size, w):
            return None
        if x == b:
            lst = st.entries[(b, d)]
            i = bisect.bisect_left(lst, (w, b == st.inp.partitions[tp].leader, tp))
            apply_dir_move(st, b, lst[i], d, y)
        else:
            if not st.racks_ok(tp, b, x):
                return None
            st.apply_broker_move(tp, b, x, y)
    if dir_reasons(st):
        return None
    return st
