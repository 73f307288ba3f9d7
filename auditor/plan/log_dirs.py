"""The planner's second step: between the log dirs of one broker (``log_dirs`` in the
reassignment file, Kafka's alterReplicaLogDirs). A replica that the first step brings to the
broker is re-pointed to another of its log dirs for free (its copy has not been made yet);
one that was there is copied from one log dir to the other (its bytes count as moved)."""

from __future__ import annotations

import bisect

from auditor.plan.choose import pick
from auditor.plan.model import Move

EPS = 1e-9


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
        light, heavy = dirs[0], dirs[-1]
        ls, ll = st.load_d[(b, heavy)], st.load_d[(b, light)]
        if ls <= hi + EPS and ll >= lo - EPS:
            return
        want = max(ls - hi, lo - ll, 0.0)
        cap = min(ls - lo, hi - ll)
        base = _out(ls, lo, hi) + _out(ll, lo, hi)

        def gain(w, ls=ls, ll=ll, base=base):
            return _out(ls - w, lo, hi) + _out(ll + w, lo, hi) < base - EPS

        if not (_step(st, b, heavy, light, want, cap, gain, free=True)
                or _step(st, b, heavy, light, want, cap, gain, free=False)):
            return


def _out(load: float, lo: float, hi: float) -> float:
    return max(0.0, load - hi) + max(0.0, lo - load)


def _step(st, b: int, src_dir: str, dst_dir: str, want: float, cap: float, gain, free: bool) -> bool:
    lst = st.entries[(b, src_dir)]

    def valid(tp) -> bool:
        arrived = (tp, b) in st.arrival
        if free != arrived or (not arrived and (tp, b) in st.moved):
            return False
        size = st.size[(tp, b)]
        if not st.headroom_ok((b, dst_dir), size):
            st.rejected["headroom"] += 1
            return False
        return True

    e = pick(st, [lst], want, cap, gain, valid)
    if e is None:
        return False
    tp = e[2]
    size, w = st.size[(tp, b)], st.weight[(tp, b)]
    if not free and not st.limit_allows(size):
        return False
    lst.pop(bisect.bisect_left(lst, e))
    bisect.insort(st.entries[(b, dst_dir)], e)
    st.load_d[(b, src_dir)] -= w
    st.load_d[(b, dst_dir)] += w
    st.size_d[(b, src_dir)] -= size
    st.size_d[(b, dst_dir)] += size
    st.peak_d[(b, dst_dir)] += size
    st.place[tp][b] = dst_dir
    if free:
        st.peak_d[(b, src_dir)] -= size          # the copy never lands there
        st.moves[st.arrival[(tp, b)]].to_dir = dst_dir
    else:
        st.moved.add((tp, b))
        st.moves.append(Move(tp[0], tp[1], b, src_dir, b, dst_dir, size, b == st.inp.partitions[tp].leader))
        st.bytes_moved += size
    return True


def dir_reasons(st) -> list[str]:
    out = []
    for b in st.active:
        lo, hi = dir_bounds(st, b)
        for d in st.dirs[b]:
            load = st.load_d[(b, d)]
            if _out(load, lo, hi) > EPS and len(st.dirs[b]) > 1:
                out.append(f"log dir {d} of broker {b} ends at {load:.0f} bytes, outside {lo:.0f}..{hi:.0f} "
                           f"(its broker's mean log dir +/- {st.opts.tolerance:.0%})")
    return out
