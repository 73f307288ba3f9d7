"""The planner's fallback between brokers: when no single replica move brings two brokers closer
to their bounds (the replicas are too coarse for the gap), a swap: replica ``a`` from the heavy
broker to the light one and a smaller ``b`` back, the net ``w_a - w_b`` inside the window a single
move would need. Both copies count as bytes moved; each replica still moves at most once."""

from __future__ import annotations

import bisect
import heapq

from auditor.plan.choose import EPS, SCAN_STEPS

#: broker pairs tried per step (heaviest x lightest): the fallback stays cheap on large fleets
PAIRS = 8


def broker_swap_step(st, over: list[int], light: list[int]) -> bool:
    for src in [b for b in over if b in st.receivers][:PAIRS]:
        for dst in [b for b in light if b != src][:PAIRS]:
            if _swap(st, src, dst):
                return True
    return False


def _movable(st, tp, frm: int, to: int) -> bool:
    return (to not in st.place[tp] and to not in st.original[tp] and (tp, frm) not in st.arrival
            and st.racks_ok(tp, frm, to))


def _swap(st, src: int, dst: int) -> bool:
    ls, ld = st.load_b[src], st.load_b[dst]
    want = max(ls - st.upper(src), st.lower(dst) - ld, 0.0)
    cap = min(ls - st.lower(src), st.upper(dst) - ld)
    base = st.outside(src, ls) + st.outside(dst, ld)
    back = list(heapq.merge(*(st.entries[(dst, d)] for d in st.dirs[dst])))
    heavy_first = sorted((e for d in st.dirs[src] for e in st.entries[(src, d)]), reverse=True)
    for ea in heavy_first[:SCAN_STEPS]:
        if not _movable(st, ea[2], src, dst):
            continue
        i = bisect.bisect_left(back, (ea[0] - cap,))
        for eb in back[i:i + SCAN_STEPS]:
            net = ea[0] - eb[0]
            if net < want - EPS:
                break
            if eb[2] == ea[2] or st.outside(src, ls - net) + st.outside(dst, ld + net) >= base - EPS:
                continue
            if _movable(st, eb[2], dst, src) and _apply(st, ea[2], eb[2], src, dst):
                return True
    return False


def _apply(st, tp_a, tp_b, src: int, dst: int) -> bool:
    size_a, size_b = st.size[(tp_a, src)], st.size[(tp_b, dst)]
    if not st.limit_allows(size_a + size_b):
        return False
    dir_a = st.landing_dir(dst, size_a, st.weight[(tp_a, src)])
    dir_b = st.landing_dir(src, size_b, st.weight[(tp_b, dst)]) if dir_a is not None else None
    if dir_a is None or dir_b is None:
        return False
    st.apply_broker_move(tp_a, src, dst, dir_a)
    st.apply_broker_move(tp_b, dst, src, dir_b)
    return True
