"""Which replica one step of the planner moves (:mod:`auditor.plan.planner`)."""

from __future__ import annotations

import bisect

EPS = 1e-6                       # bytes: below any byte, above float rounding of byte sums
#: candidates looked at on each side of the ideal size, per log dir and step (bounds the cost)
SCAN_STEPS = 48


def pick(st, lists: list[list[tuple]], want: float, cap: float, gain, valid) -> tuple | None:
    """The entry to move from ``lists`` (one sorted list per log dir, heaviest dir first): the
    smallest with ``want <= w <= cap`` (any dir), else the largest with ``w <= cap`` of the
    heaviest dir that has one, else the smallest
    that still gains; each must pass ``valid``; a follower before the leader at equal weight."""
    for lst in lists:
        i = bisect.bisect_left(lst, (want,))
        for e in lst[i:i + SCAN_STEPS]:
            if e[0] > cap + EPS:
                break
            if gain(e[0]) and valid(e[2]):
                return e
    for lst in lists:       # the heaviest dir that has one: its bytes then fix a log dir too
        j = bisect.bisect_right(lst, (min(want, cap), True, ("\uffff", 1 << 62)))
        for e in reversed(lst[max(0, j - SCAN_STEPS):j]):
            if gain(e[0]) and valid(e[2]):
                return e
    for lst in lists:
        i = bisect.bisect_left(lst, (cap,))
        for e in lst[i:i + SCAN_STEPS]:
            if not gain(e[0]):
                break
            if valid(e[2]):
                return e
    return None
