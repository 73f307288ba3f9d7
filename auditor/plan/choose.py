"""Which replica one step of the planner moves (:mod:`auditor.plan.planner`)."""

from __future__ import annotations

import bisect

EPS = 1e-6                       # bytes: below any byte, above float rounding of byte sums
#: candidates looked at on each side of the ideal size, per log dir and step (bounds the cost)
SCAN_STEPS = 48


def pick(st, lists: list[list[tuple]], want: float, cap: float, gain, valid, size=None) -> tuple | None:
    """The entry to move from ``lists`` (one sorted list per log dir, heaviest dir first): the
    smallest with ``want <= w <= cap`` (any dir), else the largest with ``w <= cap`` of the
    heaviest dir that has one, else the smallest that still gains; each must pass ``valid``; a
    follower before the leader at equal weight.

    ``size(tp)``: the bytes a move of ``tp`` copies, when the weights balanced are not those bytes
    (the retention steady state). Then each log dir in turn, heaviest first: among its entries
    with ``want <= w <= cap`` the one that copies the fewest bytes, else among all with
    ``w <= min(want, cap)`` the one that copies the fewest bytes per unit of weight (a weight moved
    at half the bytes per unit is half the copy); else the smallest that still gains."""
    if size is None:
        return _first(lists, want, cap, gain, valid)
    for lst in lists:        # per log dir, heaviest first: its bytes then fix a log dir too
        e = (_least(_fitting(lst, want, cap), lambda e: size(e[2]), gain, valid)
             or _least(_below(lst, want, cap, None), lambda e: size(e[2]) / max(e[0], EPS), gain, valid))
        if e is not None:
            return e
    return _last_resort(lists, cap, gain, valid)


def _first(lists, want, cap, gain, valid):
    for lst in lists:
        for e in _fitting(lst, want, cap):
            if gain(e[0]) and valid(e[2]):
                return e
    for lst in lists:    # the heaviest dir that has one: its bytes then fix a log dir too
        for e in _below(lst, want, cap):
            if gain(e[0]) and valid(e[2]):
                return e
    return _last_resort(lists, cap, gain, valid)


def _least(entries, key, gain, valid):
    """The first entry with the least ``key(entry)`` among those that gain and pass ``valid``, or None."""
    best = None
    for e in entries:
        k = key(e)
        if (best is None or k < best[0]) and gain(e[0]) and valid(e[2]):
            best = (k, e)
    return None if best is None else best[1]


def _fitting(lst, want, cap):
    """Up to SCAN_STEPS entries of ``lst`` with ``want <= w <= cap``, smallest first."""
    i = bisect.bisect_left(lst, (want,))
    for e in lst[i:i + SCAN_STEPS]:
        if e[0] > cap + EPS:
            return
        yield e


def _below(lst, want, cap, steps=SCAN_STEPS):
    """The ``steps`` largest entries of ``lst`` (None: all) with ``w <= min(want, cap)``, largest first."""
    j = bisect.bisect_right(lst, (min(want, cap), True, ("\uffff", 1 << 62)))
    return reversed(lst[0 if steps is None else max(0, j - steps):j])


def _last_resort(lists, cap, gain, valid):
    for lst in lists:
        i = bisect.bisect_left(lst, (cap,))
        for e in lst[i:i + SCAN_STEPS]:
            if not gain(e[0]):
                break
            if valid(e[2]):
                return e
    return None
