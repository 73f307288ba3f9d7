"""The planner's second step: between the log dirs of one broker (``log_dirs`` in the
reassignment file, Kafka's alterReplicaLogDirs). A replica that the first step brings to the
broker is re-pointed to another of its log dirs for free (its copy has not been made yet);
one that was there is copied from one log dir to the other (its bytes count as moved)."""

from __future__ import annotations

import bisect

from auditor.plan.choose import EPS, SCAN_STEPS, pick
from auditor.plan.model import Move



def dir_bounds(st, b: int) -> tuple[float, float]:
    k = len(st.dirs[b])
    mean = st.load_b[b] / k if k else 0.0
    return (1 - st.opts.tolerance) * mean, (1 + st.opts.tolerance) * mean


def balance_log_dirs(st, b: int) -> None:
    if len(st.dirs[b]) < 2:
        return
    lo, hi = dir_bounds(st, b)
    for _ in range(10 * sum(len(st.entries[(b, d)]) for d in st.dirs[b]) + 10):
        dirs = sorted(st.dirs[b], key=lambda d: st.load_d[(b, d)])
        if st.load_d[(b, dirs[-1])] <= hi + EPS and st.load_d[(b, dirs[0])] >= lo - EPS:
            return
        # the heaviest dir first; when nothing it holds can go (one replica above the dir's share), the next
        if not any(_pair(st, b, dirs[h], light, lo, hi, free) for free in (True, False)
                   for h in range(len(dirs) - 1, 0, -1) for light in dirs[:h]):
            return


def _pair(st, b: int, heavy: str, light: str, lo: float, hi: float, free: bool) -> bool:
    """One move (or swap) from ``heavy`` to ``light`` that lowers their distance outside the bounds."""
    ls, ll = st.load_d[(b, heavy)], st.load_d[(b, light)]
    want = max(ls - hi, lo - ll, 0.0)
    cap = min(ls - lo, hi - ll)
    base = _out(ls, lo, hi) + _out(ll, lo, hi)

    def gain(w):
        return _out(ls - w, lo, hi) + _out(ll + w, lo, hi) < base - EPS

    return (_step(st, b, heavy, light, want, cap, gain, free)
            or _swap(st, b, heavy, light, want, cap, gain, free))


def _out(load: float, lo: float, hi: float) -> float:
    return max(0.0, load - hi) + max(0.0, lo - load)


def _step(st, b: int, src_dir: str, dst_dir: str, want: float, cap: float, gain, free: bool) -> bool:
    lst = st.entries[(b, src_dir)]

    def valid(tp) -> bool:
        arrived = (tp, b) in st.arrival
        if free != arrived or (not arrived and (tp, b) in st.moved):
            return False
        if not st.headroom_ok((b, dst_dir), st.size[(tp, b)], st.weight[(tp, b)]):
            st.rejected["headroom"] += 1
            return False
        return True

    e = pick(st, [lst], want, cap, gain, valid, None if free else st.cost_of(b))
    if e is None:
        return False
    if not free and not st.limit_allows(st.size[(e[2], b)]):
        return False
    apply_dir_move(st, b, e, src_dir, dst_dir)
    return True


def _swap(st, b: int, heavy: str, light: str, want: float, cap: float, gain, free: bool) -> bool:
    """One replica from the heavy dir to the light one and a smaller one back, when no single
    move helps (two large replicas in one dir): the net ``w_a - w_b`` within ``[want, cap]``.
    ``free``: both are replicas step 1 brings (re-pointed, no copy); else any not moved yet."""
    hl, ll = st.entries[(b, heavy)], st.entries[(b, light)]

    def ok(e, dst_dir) -> bool:
        key = (e[2], b)
        arrived = key in st.arrival
        if (free and not arrived) or (not arrived and key in st.moved):
            return False
        return st.headroom_ok((b, dst_dir), st.size[key], st.weight[key])

    for ea in reversed(hl[-SCAN_STEPS:]):
        if not ok(ea, light):
            continue
        i = bisect.bisect_left(ll, (ea[0] - cap,))
        for eb in ll[i:i + SCAN_STEPS]:
            net = ea[0] - eb[0]
            if net < want - EPS:
                break
            if gain(net) and ok(eb, heavy):
                cost = sum(st.size[(e[2], b)] for e in (ea, eb) if (e[2], b) not in st.arrival)
                if cost and not st.limit_allows(cost):
                    return False
                apply_dir_move(st, b, ea, heavy, light)
                apply_dir_move(st, b, eb, light, heavy)
                return True
    return False


def apply_dir_move(st, b: int, e: tuple, src_dir: str, dst_dir: str) -> None:
    tp = e[2]
    size, w = st.size[(tp, b)], st.weight[(tp, b)]
    free = (tp, b) in st.arrival
    lst = st.entries[(b, src_dir)]
    lst.pop(bisect.bisect_left(lst, e))
    bisect.insort(st.entries[(b, dst_dir)], e)
    st.shift((b, src_dir), -w, -size)
    st.shift((b, dst_dir), w, size)
    st.add_peak((b, dst_dir), size)
    st.place[tp][b] = dst_dir
    if free:
        st.add_peak((b, src_dir), -size)         # the copy never lands there
        st.moves[st.arrival[(tp, b)]].to_dir = dst_dir
    else:
        st.moved.add((tp, b))
        st.moves.append(Move(tp[0], tp[1], b, src_dir, b, dst_dir, size, b == st.inp.partitions[tp].leader))
        st.bytes_moved += size


def dir_reasons(st) -> list[str]:
    out = []
    missed = []
    for b in st.receivers:
        lo, hi = dir_bounds(st, b)
        for d in st.dirs[b]:
            load = st.load_d[(b, d)]
            if _out(load, lo, hi) > EPS and len(st.dirs[b]) > 1:
                out.append(f"log dir {d} of broker {b} ends at {load:.0f} bytes, outside {lo:.0f}..{hi:.0f} "
                           f"(its broker's mean log dir +/- {st.opts.tolerance:.0%})")
                if not missed or missed[-1] != b:
                    missed.append(b)
    return out + _too_large_for_a_log_dir(st, missed)


def _too_large_for_a_log_dir(st, brokers: list[int]) -> list[str]:
    """Why a broker's log dirs cannot all be inside their bound: one of its replicas alone weighs
    more than ``(1 + t) / k`` of the broker, the most a log dir inside the bound holds; only a
    broker holding ``k w / (1 + t)`` could, above the brokers' bound when the replica is that large."""
    if not brokers:
        return []
    wanted = set(brokers)
    heaviest: dict[int, tuple[float, tuple]] = {}
    for tp, place in st.place.items():
        for b in wanted.intersection(place):
            w = st.weight[(tp, b)]
            if b not in heaviest or w > heaviest[b][0]:
                heaviest[b] = (w, tp)
    out = []
    f = 1 + st.opts.tolerance
    for b in brokers:
        if b not in heaviest:
            continue
        w, (topic, partition) = heaviest[b]
        k, load = len(st.dirs[b]), st.load_b[b]
        if w <= f * load / k + EPS:
            continue
        needed = k * w / f
        reach = ("above the brokers' upper bound of " f"{st.hi:.0f} bytes: no placement balances its log dir"
                 if needed > st.hi + EPS else f"within the brokers' bound ({st.hi:.0f} bytes) only at its top")
        out.append(f"broker {b} holds {topic}-{partition}, {w:.0f} bytes alone: more than a log dir holds inside "
                   f"the bound ({f:.2f}/{k} of the broker's {load:.0f} bytes); its log dirs balance only if the "
                   f"broker holds {needed:.0f} bytes, {reach}")
    return out
