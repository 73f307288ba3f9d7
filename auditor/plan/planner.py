"""The reassignment planner: moves replicas between brokers, then between the log dirs of each
broker, until every broker is within the tolerance of the brokers' mean and every log dir within
the tolerance of the mean of its broker's log dirs; as few bytes as it can.

How (greedy, each step pairs the worst broker with a light one):
1. Between brokers: the broker furthest above ``(1 + tolerance) x mean`` (a drained broker: any
   movable byte) sheds one replica to one of the lightest brokers; when no broker is above, the
   lightest one below ``(1 - tolerance) x mean`` takes one from the heaviest. The replica is the
   smallest that brings the pair inside the bounds in one move, else the largest that does not
   overshoot, else the smallest that still narrows the gap; its heaviest log dir's replicas are
   tried first (the same bytes then fix a log dir too); among equal sizes a follower before the
   leader. Each move must lower the total distance outside the bounds, so the loop ends.
2. Between log dirs of each broker: the same between its heaviest and lightest log dir;
   replicas that step 1 brought to the broker are re-pointed first (free: no extra copy).
3. On a small cluster (at most :data:`SEARCH_REPLICAS` movable replicas), every placement
   (:mod:`auditor.plan.search`): it replaces the greedy plan when that misses a target some
   placement reaches, or when it moves fewer bytes.

What is balanced: each replica's weight (:attr:`PlanInput.weights`: its retention steady state,
or today's bytes), at least :data:`MIN_WEIGHT`; what a move costs and the headroom while both
copies exist: today's bytes; the headroom once the moves are done: the weights.

What every move keeps: the replication factor; one replica per broker; distinct racks (a
move never lowers the number of racks of a partition, unless the brokers left have fewer racks:
a note says so); no log dir above ``headroom x capacity`` counting every new copy as landed
and no old copy as gone (all moves of one plan run at once); topics matching
``exclude_topics`` stay; no replica moves twice; ``max_moves`` / ``max_move_bytes``.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter

from auditor.plan.bounds import broker_bounds, lower_bound_bytes
from auditor.plan.choose import pick
from auditor.plan.log_dirs import balance_log_dirs, dir_reasons
from auditor.plan.model import DirKey, Move, Plan, PlanInput, PlanOptions, TP
from auditor.plan.search import search
from auditor.plan.swaps import broker_swap_step

EPS = 1e-6                       # bytes: below any byte, above float rounding of byte sums
#: the least a replica weighs: an empty one (or one retention will empty) still leaves a drained broker
MIN_WEIGHT = 1.0
#: movable replicas at most for the exact search (:mod:`auditor.plan.search`, which bounds it further)
SEARCH_REPLICAS = 40
#: lightest brokers tried as destinations of one heavy broker per step
DESTINATIONS = 24


class _State:
    """Loads and placement while planning (weights balance; sizes count bytes and headroom)."""

    def __init__(self, inp: PlanInput, opts: PlanOptions):
        self.inp, self.opts = inp, opts
        excl = [re.compile(p) for p in opts.exclude_topics]
        self.active = [b for b in sorted(inp.brokers) if b not in opts.drain]
        self.rack = {b: s.rack for b, s in inp.brokers.items()}
        self.use_racks = any(r is not None for r in self.rack.values())
        self.receivers = [b for b in self.active if not inp.brokers[b].fenced]
        self.active_racks = len({self.rack[b] for b in self.receivers})
        self.dirs = {b: list(s.log_dirs) for b, s in inp.brokers.items()}
        self.load_d: dict[DirKey, float] = {(b, d): float(inp.fixed_bytes.get((b, d), 0))
                                            for b, ds in self.dirs.items() for d in ds}
        self.size_d: dict[DirKey, int] = {k: int(v) for k, v in self.load_d.items()}
        self.fixed_b = {b: sum(inp.fixed_bytes.get((b, d), 0) for d in ds) for b, ds in self.dirs.items()}
        self.entries: dict[DirKey, list[tuple]] = {k: [] for k in self.load_d}
        self.place: dict[TP, dict[int, str | None]] = {}
        self.weight: dict[tuple[TP, int], float] = {}
        self.size: dict[tuple[TP, int], int] = {}
        self.original = {tp: set(p.replicas) for tp, p in inp.partitions.items()}
        self.arrival: dict[tuple[TP, int], int] = {}      # (tp, broker) -> index in moves
        self.moved: set[tuple[TP, int]] = set()            # original replicas moved away or between dirs
        self.moves: list[Move] = []
        self.bytes_moved = 0
        self.rejected: Counter = Counter()
        self.too_few_brokers = 0                            # partitions whose RF exceeds the brokers left
        self.notes: list[str] = []
        self.headroom_examples: list[str] = []
        for tp, p in inp.partitions.items():
            movable = p.movable and not any(rx.fullmatch(tp[0]) for rx in excl)
            self.place[tp] = dict(p.log_dirs)
            for b in p.replicas:
                size = int(p.sizes.get(b, max(p.sizes.values(), default=0)))
                w = float(inp.weights.get((tp, b), size)) if inp.weights is not None else float(size)
                w = max(w, MIN_WEIGHT)
                self.weight[(tp, b)], self.size[(tp, b)] = w, size
                d = p.log_dirs.get(b)
                if (b, d) not in self.load_d:
                    continue                                # a broker or dir not given: not balanced
                self.load_d[(b, d)] += w
                self.size_d[(b, d)] += size
                if movable and len(p.replicas) <= len(self.receivers):
                    self.entries[(b, d)].append((w, b == p.leader, tp))
        for lst in self.entries.values():
            lst.sort()
        self.peak_d = dict(self.size_d)
        self.peak_disk = {k: int(v) for k, v in inp.disk_used.items()}
        # each file system's bytes once the moves are done, weighed as balanced (steady: the steady state)
        self.after_disk = {k: float(v) for k, v in inp.disk_used.items()}
        for key, disk in inp.disks.items():
            if key in self.load_d and disk in self.after_disk:
                self.after_disk[disk] += self.load_d[key] - self.size_d[key]
        self.load_b = {b: sum(self.load_d[(b, d)] for d in ds) for b, ds in self.dirs.items()}
        total = sum(self.load_b.values())
        self.mean = total / max(len(self.active), 1)
        self.lo, self.hi = broker_bounds(self.mean, opts.tolerance)

    # ------------------------------------------------------------------ bounds and limits
    def upper(self, b: int) -> float:
        return self.fixed_b[b] if b in self.opts.drain else self.hi

    def lower(self, b: int) -> float:
        return 0.0 if b in self.opts.drain else self.lo

    def outside(self, b: int, load: float) -> float:
        return max(0.0, load - self.upper(b)) + max(0.0, self.lower(b) - load)

    def limit_allows(self, size: int) -> bool:
        o = self.opts
        if o.max_moves is not None and len(self.moves) >= o.max_moves:
            self.rejected["--max-moves reached"] += 1
            return False
        if o.max_move_bytes is not None and self.bytes_moved + size > o.max_move_bytes:
            self.rejected["--max-move-bytes reached"] += 1
            return False
        return True

    def headroom_ok(self, key: DirKey, size: int, w: float) -> bool:
        """A copy of ``size`` bytes today (weighing ``w``) may land in ``key``: while both copies exist
        (today's bytes) and once done (the balanced weights: the steady state) the log dir and its
        file system stay under the headroom, where their capacity is known."""
        cap = self.inp.capacities.get(key)
        limit = None if cap is None else self.opts.headroom * cap
        if limit is not None and self.peak_d[key] + size > limit:
            return False
        if limit is not None and self.load_d[key] + w > limit + EPS:
            self.rejected["headroom at steady state"] += 1
            return False
        disk = self.inp.disks.get(key)
        dcap = self.inp.disk_capacity.get(disk)
        if dcap is None:
            return True
        if self.peak_disk.get(disk, 0) + size > self.opts.headroom * dcap:
            return False
        if self.after_disk.get(disk, 0.0) + w > self.opts.headroom * dcap + EPS:
            self.rejected["headroom at steady state"] += 1
            return False
        return True

    def shift(self, key: DirKey, w: float, size: int) -> None:
        """A replica weighing ``w`` (``size`` bytes today) ends in (> 0) or leaves (< 0) log dir ``key``."""
        self.load_d[key] += w
        self.size_d[key] += size
        disk = self.inp.disks.get(key)
        if disk in self.after_disk:
            self.after_disk[disk] += w - size

    def add_peak(self, key: DirKey, size: int) -> None:
        """A copy lands in (``size`` > 0) or no longer lands in (< 0) the log dir ``key``."""
        self.peak_d[key] += size
        disk = self.inp.disks.get(key)
        if disk is not None:
            self.peak_disk[disk] = self.peak_disk.get(disk, 0) + size

    def landing_dir(self, dst: int, size: int, w: float) -> str | None:
        """The lightest log dir of ``dst`` that stays under the headroom with the new copy."""
        for d in sorted(self.dirs[dst], key=lambda d: self.load_d[(dst, d)]):
            if self.headroom_ok((dst, d), size, w):
                return d
            if len(self.headroom_examples) < 5:
                self.headroom_examples.append(self._headroom_text(dst, d, size, w))
        self.rejected["headroom"] += 1
        return None

    def _headroom_text(self, b: int, d: str, size: int, w: float) -> str:
        h, key = self.opts.headroom, (b, d)
        cap = self.inp.capacities.get(key)
        disk = self.inp.disks.get(key)
        if cap is not None and (self.peak_d[key] + size > h * cap or self.load_d[key] + w > h * cap):
            during = self.peak_d[key] + size > h * cap
            used, what = (self.peak_d[key] + size) if during else (self.load_d[key] + w), f"its {cap} bytes"
        else:
            cap = self.inp.disk_capacity[disk]
            during = self.peak_disk.get(disk, 0) + size > h * cap
            used = (self.peak_disk.get(disk, 0) + size) if during else (self.after_disk.get(disk, 0.0) + w)
            what = f"the {cap} bytes of its file system {disk}"
        when = "while both copies exist" if during else "once the moves are done (as balanced: steady state)"
        return (f"log dir {d} of broker {b} not used for a {size}-byte copy: it would reach {used / cap:.0%} of "
                f"{what} {when} (headroom {h:.0%})")

    def cost_of(self, b: int):
        """``tp -> bytes`` a move of ``tp``'s replica on ``b`` copies, when the weights are not those
        bytes (steady state); None when they are (:func:`auditor.plan.choose.pick`)."""
        return None if self.inp.weights is None else (lambda tp: self.size[(tp, b)])

    def dir_share(self, b: int):
        """Whether a replica weighing ``w`` fits one log dir of ``b`` within the log dirs' bound at the
        least load ``b`` can end with (the dir step moves the smaller replicas around it): one above
        that share leaves its log dir outside the target however the rest is balanced."""
        k = len(self.dirs[b])
        if k < 2:
            return lambda w: True
        least, load, f = self.lower(b), self.load_b[b], 1 + self.opts.tolerance
        return lambda w: w <= f * max(least, load + w) / k + EPS

    def racks_ok(self, tp: TP, src: int, dst: int) -> bool:
        if not self.use_racks:
            return True
        others = [self.rack[b] for b in self.place[tp] if b != src]
        before = len(set(others + [self.rack[src]]))
        after = len(set(others + [self.rack[dst]]))
        if after >= min(before, self.active_racks):
            return True
        self.rejected["rack spread"] += 1
        return False

    # ------------------------------------------------------------------ applying
    def apply_broker_move(self, tp: TP, src: int, dst: int, dst_dir: str) -> None:
        w, size = self.weight[(tp, src)], self.size[(tp, src)]
        if self.use_racks:
            others = [self.rack[b] for b in self.place[tp] if b != src]
            before, after = len(set(others + [self.rack[src]])), len(set(others + [self.rack[dst]]))
            if after < before:
                self.notes.append(f"{tp[0]}-{tp[1]}: on {after} racks instead of {before}: the brokers that "
                                  f"stay have {self.active_racks} rack(s)")
        src_dir = self.place[tp].pop(src)
        lst = self.entries[(src, src_dir)]
        lst.pop(bisect.bisect_left(lst, (w, src == self.inp.partitions[tp].leader, tp)))
        self.load_b[src] -= w
        self.load_b[dst] += w
        self.shift((src, src_dir), -w, -size)
        self.shift((dst, dst_dir), w, size)
        self.add_peak((dst, dst_dir), size)
        self.place[tp][dst] = dst_dir
        self.weight[(tp, dst)], self.size[(tp, dst)] = w, size
        self.arrival[(tp, dst)] = len(self.moves)
        self.moved.add((tp, src))
        bisect.insort(self.entries[(dst, dst_dir)], (w, False, tp))
        self.moves.append(Move(tp[0], tp[1], src, src_dir, dst, dst_dir, size,
                               src == self.inp.partitions[tp].leader))
        self.bytes_moved += size


def plan(inp: PlanInput, opts: PlanOptions | None = None) -> Plan:
    """The plan for ``inp`` (pure: nothing read, nothing written)."""
    opts = opts or PlanOptions()

    def fresh() -> _State:
        st = _State(inp, opts)
        _check_inputs(st)
        return st

    st = fresh()
    small = sum(len(v) for v in st.entries.values()) <= SEARCH_REPLICAS
    before_b = {b: int(v) for b, v in st.load_b.items()}
    before_d = {k: int(v) for k, v in st.load_d.items()}
    while _broker_step(st):
        pass
    for b in st.receivers:
        balance_log_dirs(st, b)
    reasons = _reasons(st)
    # on a small cluster, every placement: one that reaches a target the greedy missed, or moves fewer bytes
    found = search(fresh, float("inf") if reasons else st.bytes_moved) if small else None
    if found is not None:
        st, reasons = found, _reasons(found)
    return Plan(moves=st.moves, before_brokers=before_b, after_brokers={b: int(v) for b, v in st.load_b.items()},
                before_dirs=before_d, after_dirs={k: int(v) for k, v in st.load_d.items()},
                peak_dirs=dict(st.peak_d), peak_disks=dict(st.peak_disk), lower_bound_bytes=lower_bound_bytes(inp, opts),
                target_reached=not reasons, reasons=reasons, notes=_notes(st), final=_final(st),
                options=opts, mean_broker_bytes=st.mean, capacities_known=_capacities_known(st))


def _capacities_known(st: _State) -> bool:
    inp = st.inp
    return all(k in inp.capacities or inp.disks.get(k) in inp.disk_capacity for k in st.load_d if k[0] in st.active)


def _check_inputs(st: _State) -> None:
    for b in sorted(set(st.active) - set(st.receivers)):
        st.notes.append(f"broker {b} is fenced (not serving): no replica is planned onto it")
    n = len(st.receivers)
    for tp, p in st.inp.partitions.items():
        if len(p.replicas) > n:
            st.too_few_brokers += 1
            st.notes.append(f"{tp[0]}-{tp[1]}: replication factor {len(p.replicas)} > {n} broker(s) "
                            f"{'left after the drain' if st.opts.drain else 'in the cluster'}: it cannot move")


def _broker_step(st: _State) -> bool:
    """One move between brokers, or False when none helps."""
    over = sorted((b for b in st.load_b if st.load_b[b] - st.upper(b) > EPS),
                  key=lambda b: st.load_b[b] - st.upper(b), reverse=True)
    light = sorted(st.receivers, key=lambda b: st.load_b[b])
    for src in over:
        for dst in [b for b in light if b != src][:DESTINATIONS]:
            if _try_move(st, src, dst):
                return True
    under = [b for b in light if st.lower(b) - st.load_b[b] > EPS]
    heavy = sorted(st.load_b, key=lambda b: st.load_b[b], reverse=True)
    for dst in under:
        for src in [b for b in heavy if b != dst][:DESTINATIONS]:
            if _try_move(st, src, dst):
                return True
    return broker_swap_step(st, over, light) or any(broker_swap_step(st, heavy, [dst]) for dst in under[:8])


def _try_move(st: _State, src: int, dst: int) -> bool:
    ls, ld = st.load_b[src], st.load_b[dst]
    want = max(ls - st.upper(src), st.lower(dst) - ld, 0.0)
    cap = min(ls - st.lower(src), st.upper(dst) - ld)
    base = st.outside(src, ls) + st.outside(dst, ld)

    def gain(w: float) -> bool:
        return st.outside(src, ls - w) + st.outside(dst, ld + w) < base - EPS

    def valid(tp: TP) -> bool:
        if dst in st.place[tp] or dst in st.original[tp] or (tp, src) in st.arrival:
            return False
        return st.racks_ok(tp, src, dst)

    share = st.dir_share(dst)

    def fits(tp: TP) -> bool:
        return share(st.weight[(tp, src)]) and valid(tp)

    # a replica within a log dir's share of dst first; a larger one only when nothing else narrows the gap
    dirs = sorted(st.dirs[src], key=lambda d: st.load_d[(src, d)], reverse=True)
    lists, cost = [st.entries[(src, d)] for d in dirs], st.cost_of(src)
    hit = pick(st, lists, want, cap, gain, fits, cost) or pick(st, lists, want, cap, gain, valid, cost)
    if hit is None:
        return False
    tp = hit[2]
    size = st.size[(tp, src)]
    if not st.limit_allows(size):
        return False
    dst_dir = st.landing_dir(dst, size, st.weight[(tp, src)])
    if dst_dir is None:
        return False
    st.apply_broker_move(tp, src, dst, dst_dir)
    return True


def _reasons(st: _State) -> list[str]:
    out = []
    for b in sorted(st.load_b):
        load = st.load_b[b]
        if st.outside(b, load) > EPS and b in st.opts.drain:
            left = sum(1 for place in st.place.values() if b in place)
            out.append(f"broker {b} (drained) still holds {left} replica(s), "
                       f"{sum(st.size_d[(b, d)] for d in st.dirs[b]) - st.fixed_b[b]} bytes today")
        elif st.outside(b, load) > EPS:
            out.append(f"broker {b} ends at {load:.0f} bytes, outside {st.lo:.0f}..{st.hi:.0f} bytes "
                       f"(mean {st.mean:.0f} +/- {st.opts.tolerance:.0%})")
    explained = bool(st.rejected)
    out += dir_reasons(st)
    if out and st.rejected:
        why = ", ".join(f"{k} ({n} candidate moves)" for k, n in st.rejected.most_common())
        out.append(f"moves refused by: {why}")
    if out and st.too_few_brokers:
        explained = True
        out.append(f"{st.too_few_brokers} partition(s) have a replication factor above the {len(st.active)} "
                   f"broker(s) {'left after the drain' if st.opts.drain else 'of the cluster'}: they cannot move")
    if out and not explained:
        out.append("no further single replica move narrows the gap: the replicas that could move are too large for "
                   "it (a partition moves whole, it is never split) or none is movable")
    return out


def _notes(st: _State) -> list[str]:
    notes = list(st.inp.notes) + list(dict.fromkeys(st.notes))
    notes += st.headroom_examples
    by_topic: dict[str, list[int]] = {}
    for (tp, b), size in st.size.items():
        if b in st.original[tp]:
            by_topic.setdefault(tp[0], []).append(size)
    medians = {t: sorted(v)[len(v) // 2] for t, v in by_topic.items() if len(v) >= 2}
    hot = sorted({(m.topic, m.partition) for m in st.moves
                  if medians.get(m.topic) and m.size_bytes >= st.opts.hot_ratio * medians[m.topic]})
    for t, p in hot:
        notes.append(f"{t}-{p} is {max(st.size[((t, p), b)] for b in st.original[(t, p)]) / medians[t]:.1f}x its "
                     f"topic's median replica: moving it relocates its load, it does not split it; if one key makes "
                     f"it large (KLA001), that key stays on one partition until the key or the partitioner changes")
    if not _capacities_known(st):
        notes.append("log dir capacities unknown (--capacity, --capacity-from-disk): the headroom was not checked")
    return notes


def _final(st: _State) -> dict[TP, tuple[list[int], dict[int, str | None]]]:
    """Changed partitions: the new replica list (a new broker takes the place of the one it
    replaces, so the preferred leader stays where it was unless it moved) and each replica's
    log dir where it must land (None: anywhere, i.e. where it is)."""
    out = {}
    for tp, p in st.inp.partitions.items():
        place = st.place[tp]
        pinned = {b: place[b] for b in place if (tp, b) in st.arrival or (tp, b) in st.moved}
        if set(place) == set(p.replicas) and not pinned:
            continue
        new = [b for b in place if b not in p.replicas]
        replicas = [b if b in place else new.pop(0) for b in p.replicas]
        out[tp] = (replicas, {b: pinned.get(b) for b in replicas})
    return out
