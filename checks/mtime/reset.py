"""KLA020 mtime.reset: segment files whose mtimes no longer say when their data was written.

What it checks:
    Per partition, for every live replica: (a) mtimes *packed*: the closed segments' ``.log``
    mtimes lie within a short window while their records span much longer (all files re-written
    at once); (b) closed segments whose mtime is far after their largest record timestamp;
    (c) across replicas (brokers, log dirs): for the same offsets, one replica's mtimes are far
    later than another's. It says which happened: *reassigned* (the later replica is on another
    broker), *moved between log dirs* (same broker, another log dir, or a ``-future`` copy in
    progress), or *copied or restored* (packed mtimes with no replica to compare). When the
    audited log dirs hold the KRaft metadata log, the event is named from it (which replicas,
    which log dirs, when, with the metadata offset as evidence); the guess from the files
    remains only where no metadata log is readable.

Why it matters:
    A new replica, a log-dir move, a copy or a restore re-writes every segment, so every mtime
    becomes the time of the move (docs/kafka-format-notes.md, "Mtimes under data movement"). Legacy (v0) time lookups pair base
    offsets with mtimes, so after a move they answer empty (old clients crash) or jump; for
    timestamp-less (magic 0) data the retention clock restarts, so data lives a whole
    ``retention.ms`` longer on that replica; and anyone reasoning from ``ls -l`` is misled.

Example finding:
    WARN orders-3: reassigned from [1, 3] to [1, 4] between 2024-05-02T09:58:10Z and
    2024-05-02T10:04:12Z: the replica on broker 4 (/data/k1) has .log mtimes 9.0 d later
    than broker 1's (/data/k0) for the same offsets; its 12 closed segments were all written
    between 2024-05-02T10:00:00Z and 2024-05-02T10:04:00Z while their records span 9.1 d.
    Legacy (v0) lookups and mtime-based retention of timestamp-less data on broker 4 follow the
    new mtimes.

How to fix:
    Nothing to repair in Kafka itself: use offset-based or timestamp-based (v1+) seeks, never
    v0, on the moved replica; expect mtime-based retention of magic-0 data to restart; record
    moves in the runbook. If the move was unintended, find who ran the reassignment.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

# long module: the reference walk (judge) and its columnar twin (columnar_reset and its helpers)
# side by side, so that a change to one is read against the other; tests/test_batch_checks.py holds them equal.
from __future__ import annotations

import statistics
from dataclasses import dataclass

from checks.framework.base import (EVIDENCE_CAP, Check, CheckInput, Option, Severity, non_negative, opt_int, positive,
                                   replica_records, severity_option)
from checks.framework.columns import columnar_batch
from auditor.units import human_duration, iso_utc



class MtimeReset(Check):
    code = "KLA020"
    name = "mtime.reset"
    title = "Segment mtimes reset (reassigned, moved, copied, restored)"
    scope = "partition"
    options = {
        "packed_ratio": Option(0.1, "mtimes span at most this fraction of the record time span = packed", float, positive, "> 0"),
        "min_record_span_ms": Option(3_600_000, "record spans shorter than this are not judged packed", int, non_negative, ">= 0"),
        "min_segments": Option(3, "fewest closed segments for the packed test", int, positive, ">= 1"),
        "mtime_after_ms": Option(86_400_000, "a closed segment whose mtime is this far after its largest record "
                                             "timestamp", int, positive, "> 0"),
        "replica_skew_ms": Option(3_600_000, "replicas whose mtimes differ by more than this for the same offsets", int, positive, "> 0"),
        "severity": severity_option("WARN", "severity of a reset"),
    }

    def prefilter(self, batch, ctx):
        """Partitions where one of the three findings can come out: a late mtime (vector test), a
        packed replica (its aggregate test, exact), or a replica pair whose mtimes for the same
        offset differ by more than ``replica_skew_ms`` somewhere (the median the check reports can
        only pass the threshold if one difference does)."""
        import numpy as np
        import pandas as pd

        seg = batch.segments
        if not len(seg):
            return []
        opts = batch.options(self, ctx)
        live = batch.live_segments()
        col = batch.column
        mtime, newest, last, base = col("log_mtime_ms"), col("max_timestamp_ms"), col("last_offset"), col("base_offset")
        not_true = ~(seg["is_active"] == True).to_numpy()  # noqa: E712 - what `not r["is_active"]` passes
        with np.errstate(invalid="ignore"):
            late = live & not_true & (mtime - newest > batch.per_topic("segments", {t: o["mtime_after_ms"] for t, o in opts.items()}))
        found = set(batch.groups_where("segments", late))

        # packed: _packed_span's test on each replica's closed segments, as aggregates
        replica = batch.replica_ids()
        found.update(_packed_candidates(batch, opts, live, mtime, newest, replica))

        # replica pairs: each closed point of one replica against the segment of every other replica
        # whose base offset is the largest at or below the point's last offset (the only one that can
        # hold it when that replica's segments do not overlap; a replica whose segments overlap or tie
        # sends its partition to the check as it is)
        point = np.flatnonzero(live & not_true & ~np.isnan(last) & ~np.isnan(mtime))
        if len(point):
            # a chunk of whole partitions at a time: the pairs (each point against every other
            # replica) cost ~0.5 KiB a point, 450 MiB at a million rows in one go; each chunk's
            # frame made from the batch's columns (all points' frame at once: ~35 MiB at a million)
            for chunk in _partition_chunks(batch.seg_group[point], PAIR_CHUNK_POINTS):
                rows = point[chunk]
                pts = pd.DataFrame({"g": batch.seg_group[rows], "r": replica[rows], "base": base[rows],
                                    "last": last[rows], "m": mtime[rows]})
                found.update(self._skewed_pairs(pts, batch, opts))
        return sorted(found)

    @staticmethod
    def _skewed_pairs(pts, batch, opts) -> list:
        """The prefilter's replica-pair test on the points of whole partitions (see prefilter)."""
        import numpy as np
        import pandas as pd

        found: list = []
        if len(pts):
            same = pts["r"].to_numpy()[1:] == pts["r"].to_numpy()[:-1]
            overlap = same & (pts["base"].to_numpy()[1:] <= pts["last"].to_numpy()[:-1])
            found += pts["g"].to_numpy()[1:][overlap].tolist()
            reps = pts[["g", "r"]].drop_duplicates()
            multi = reps.groupby("g")["r"].transform("size") > 1
            reps = reps[multi.to_numpy()]
            if len(reps):
                left = pts[pts["g"].isin(reps["g"])].merge(reps.rename(columns={"r": "other"}), on="g")
                left = left[left["r"] != left["other"]].sort_values("last", kind="stable")
                right = pts.rename(columns={"r": "other", "base": "o_base", "last": "o_last", "m": "o_m"})
                right = right[right["g"].isin(reps["g"])].drop(columns="g").sort_values("o_base", kind="stable")
                pairs = pd.merge_asof(left, right, left_on="last", right_on="o_base", by="other", direction="backward")
                skew = batch.per_key({t: o["replica_skew_ms"] for t, o in opts.items()})[pairs["g"].to_numpy()]
                with np.errstate(invalid="ignore"):
                    holds = (pairs["o_last"].to_numpy() >= pairs["last"].to_numpy()) & \
                            (np.abs(pairs["o_m"].to_numpy() - pairs["m"].to_numpy()) > skew)
                found += pairs["g"].to_numpy()[holds].tolist()
        return found

    replica_columns = ("base_offset", "last_offset", "is_active", "log_mtime_ms", "max_timestamp_ms")

    def run(self, data: CheckInput, ctx, opts):
        return self.judge(data, replica_records(data.segments), ctx, opts, moves=self._local_moves(data))

    def run_batch(self, batch, ctx):
        """The findings of every flagged partition at once (:func:`columnar_reset`); :meth:`run` is the reference."""
        return columnar_batch(self, batch, ctx, lambda rows: columnar_reset(self, rows, ctx))

    def judge_extra(self, batch, ctx):
        """Each partition's -future / -delete copies (:meth:`_local_moves`), found once for the batch."""
        moves = _batch_local_moves(batch)
        return lambda i: {"moves": moves.get(i, [])}

    def judge(self, data, replicas, ctx, opts, moves=()):
        """``moves``: the partition's -future / -delete copies (:meth:`_local_moves`)."""
        out: list = []
        packed = {}
        for broker, log_dir, recs in replicas:
            span = _packed_span(recs, opts)
            if span is not None:
                packed[Replica(broker, log_dir)] = span
            else:
                out += self._late_mtimes(data, broker, log_dir, recs, opts)
        reported = set()
        for skew in self._compare_replicas(replicas, opts):
            out.append(self._moved(data, ctx, skew, moves, packed.get(skew.later), opts))
            reported.add(skew.later)
        for key, span in sorted(packed.items(), key=lambda kv: kv[0].order):
            if key not in reported:
                out.append(self._packed(data, ctx, key, span, moves, opts))
        return out

    def _late_mtimes(self, data, broker, log_dir, recs, opts) -> list:
        """INFO: closed segments whose mtime is far after their largest record timestamp."""
        late = [r for r in recs if not r["is_active"] and opt_int(r["log_mtime_ms"]) is not None
                and opt_int(r["max_timestamp_ms"]) is not None
                and r["log_mtime_ms"] - r["max_timestamp_ms"] > opts["mtime_after_ms"]]
        if not late:
            return []
        return [self._late_finding(data.topic, data.partition, broker, log_dir, len(late), [
            {"segment": int(r["base_offset"]), "log_mtime_ms": int(r["log_mtime_ms"]),
             "max_timestamp_ms": int(r["max_timestamp_ms"]),
             "mtime_after_ms": int(r["log_mtime_ms"] - r["max_timestamp_ms"])} for r in late[:EVIDENCE_CAP]], opts)]

    def _late_finding(self, topic, partition, broker, log_dir, count, evidence, opts):
        """The INFO finding of one replica's ``count`` late segments (``evidence``: the first EVIDENCE_CAP)."""
        found = self.finding(
            Severity.INFO,
            f"{count} closed segment(s) on broker {broker} ({log_dir}) have .log mtimes more than "
            f"{human_duration(opts['mtime_after_ms'])} after their largest record timestamp (late data with old "
            f"CreateTime timestamps, or files touched after the fact)",
            "If producers send old timestamps this is expected; otherwise see whether the files were copied.",
            thresholds={k: opts[k] for k in ("mtime_after_ms",)},
            evidence=evidence, topic=topic, partition=partition, broker_id=broker, log_dir=log_dir)
        found.evidence_count = count
        return found

    def _moved(self, data, ctx, skew: "ReplicaSkew", moves, info: "PackedSpan | None", opts):
        """A replica whose mtimes are later than another's for the same offsets: reassigned or moved."""
        later, earlier = skew.later, skew.earlier
        other_dirs = [d for b, d, _ in moves if b == later.broker_id and d != later.log_dir]
        if other_dirs or later.broker_id == earlier.broker_id:
            kind = f"moved between log dirs of broker {later.broker_id}" + (f" (from {other_dirs[0]})" if other_dirs else "")
        else:
            kind = f"reassigned to broker {later.broker_id}"
        kind, recorded = _recorded_event(ctx, data, later.broker_id, later.log_dir, kind)
        matched = recorded + list(skew.matched)
        when = f"; its closed segments were all written between {iso_utc(info.mtime_first_ms)} and " \
               f"{iso_utc(info.mtime_last_ms)} while their records span {human_duration(info.record_span_ms)}" if info else ""
        return self.finding(
            opts["severity"],
            f"{kind}: the replica on broker {later.broker_id} ({later.log_dir}) has .log mtimes "
            f"{human_duration(skew.skew_ms)} later than broker {earlier.broker_id}'s ({earlier.log_dir}) for the same "
            f"offsets{when}. Legacy (v0) time lookups and mtime-based retention of timestamp-less data on broker "
            f"{later.broker_id} follow the new mtimes",
            "Seek by offset or by record timestamp (v1+), never v0, on the moved replica; expect mtime-based "
            "retention of magic-0 data to restart there; check who ran the move if it was not planned.",
            thresholds={"replica_skew_ms": opts["replica_skew_ms"]},
            evidence=matched, topic=data.topic, partition=data.partition, broker_id=later.broker_id,
            log_dir=later.log_dir)

    def _packed(self, data, ctx, key: "Replica", span: "PackedSpan", moves, opts):
        """A replica whose closed segments were all written in a short window: copied, restored or moved."""
        lo, hi, record_span, n = span.mtime_first_ms, span.mtime_last_ms, span.record_span_ms, span.closed_segments
        moving = [(b, d) for b, d, _ in moves if b == key.broker_id]
        kind = "moved between log dirs" if moving else "copied or restored"
        kind, recorded = _recorded_event(ctx, data, key.broker_id, key.log_dir, kind)
        return self.finding(
            opts["severity"],
            f"{kind}: the {n} closed segments on broker {key.broker_id} ({key.log_dir}) were all written between {iso_utc(lo)} "
            f"and {iso_utc(hi)} while their records span {human_duration(record_span)}. Legacy (v0) time lookups and "
            f"mtime-based retention of timestamp-less data follow the new mtimes",
            "Seek by offset or by record timestamp (v1+), never v0; expect mtime-based retention of magic-0 data to "
            "restart; find out who copied or restored the files.",
            thresholds={k: opts[k] for k in ("packed_ratio", "min_record_span_ms", "min_segments")},
            evidence=recorded + [{"mtime_first_ms": lo, "mtime_last_ms": hi, "record_span_ms": record_span,
                                  "closed_segments": n, "future_dirs": [d for _, d in moving]}],
            topic=data.topic, partition=data.partition, broker_id=key.broker_id, log_dir=key.log_dir)

    @staticmethod
    def _local_moves(data) -> list[tuple]:
        """(broker, log dir, kind) of -future / -delete copies of this partition: a log-dir move
        in progress or just finished (the old copy waits file.delete.delay.ms before deletion)."""
        found = set()
        for frame in (data.segments, data.partitions):
            if frame is None or not len(frame):
                continue
            moving = frame[frame["dir_kind"].isin(["future", "delete"])]
            for b, d, k in zip(moving["broker_id"], moving["log_dir"], moving["dir_kind"]):
                found.add((opt_int(b), d, k))
        return sorted(found, key=str)

    @staticmethod
    def _compare_replicas(replicas, opts):
        """Pairs whose mtimes for the same offsets differ by more than the threshold."""
        ends = {}
        for broker, log_dir, recs in replicas:
            pts = []
            for r in recs:
                last, mtime = opt_int(r["last_offset"]), opt_int(r["log_mtime_ms"])
                if last is not None and mtime is not None and not r["is_active"]:
                    pts.append((opt_int(r["base_offset"]), last, mtime))
            ends[Replica(broker, log_dir)] = pts
        out = []
        keys = sorted(ends, key=Replica.order.fget)
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                diffs, matched = [], []
                for base, last, mtime in ends[a]:
                    # the segment of b that holds a's last offset (segment boundaries differ per replica)
                    hold = [(bb, bl, bm) for bb, bl, bm in ends[b] if bb <= last <= bl]
                    if hold:
                        diffs.append(hold[0][2] - mtime)
                        matched.append({"offset": last, f"mtime_ms_broker_{a.broker_id}": mtime,
                                        f"mtime_ms_broker_{b.broker_id}": hold[0][2], "segment_a": base,
                                        "segment_b": hold[0][0], "replica_a": f"broker {a.broker_id} {a.log_dir}",
                                        "replica_b": f"broker {b.broker_id} {b.log_dir}"})
                if not diffs:
                    continue
                skew = statistics.median(diffs)
                if abs(skew) > opts["replica_skew_ms"]:
                    later, earlier = (b, a) if skew > 0 else (a, b)
                    out.append(ReplicaSkew(later, earlier, int(abs(skew)), matched))
        return out


@dataclass(frozen=True)
class Replica:
    """One replica of the partition: where its files are."""

    broker_id: int | None
    log_dir: str

    @property
    def order(self) -> str:
        """The order replicas are compared and reported in (the text of (broker id, log dir))."""
        return str((self.broker_id, self.log_dir))


@dataclass
class ReplicaSkew:
    """Two replicas whose .log mtimes for the same offsets differ by more than replica_skew_ms."""

    later: Replica
    earlier: Replica
    skew_ms: int
    """the median difference of their mtimes (absolute)."""
    matched: list[dict]
    """per offset compared: both mtimes, both segments (the evidence)."""


@dataclass
class PackedSpan:
    """A replica whose closed segments were all written within packed_ratio of their records' span."""

    mtime_first_ms: int
    mtime_last_ms: int
    record_span_ms: int
    closed_segments: int


def _recorded_event(ctx, data, broker, log_dir, guess: str) -> tuple[str, list[dict]]:
    """(what happened, evidence): the KRaft metadata log's event that put this replica there when
    a metadata log was read ("reassigned from [1, 3] to [3, 2] at T", "moved from log dir X to Y
    on broker b at T", its metadata offset as evidence); else the guess from the files alone."""
    moves = ctx.partition_moves
    if moves is None:
        return guess, []
    ev = moves.event_for(data.topic, data.partition, broker, log_dir)
    if ev is None:
        return f"{guess} (no such move in the metadata log {moves.metadata_dir})", []
    when = iso_utc(ev["timestamp_ms"])
    if ev["first_offset"] != ev["offset"]:
        when = f"between {iso_utc(ev['first_timestamp_ms'])} and {iso_utc(ev['timestamp_ms'])}"
    else:
        when = f"at {when}"
    return f"{ev['text']} {when}", [{"metadata_offset": ev["offset"], "metadata_first_offset": ev["first_offset"],
                                     "at_ms": ev["timestamp_ms"], "metadata_log": moves.metadata_dir,
                                     "event": ev["kind"]}]


def _packed_span(recs, opts) -> PackedSpan | None:
    """The :class:`PackedSpan` of a replica (its segment rows as dicts) whose closed segments were
    all written within ``packed_ratio`` of the time their records span, else None. Closed as
    pandas' ``~is_active.astype(bool)`` says (a null is not active, a NaN is)."""
    closed = [(int(r["log_mtime_ms"]), int(r["max_timestamp_ms"])) for r in recs
              if not bool(r["is_active"]) and opt_int(r["log_mtime_ms"]) is not None
              and opt_int(r["max_timestamp_ms"]) is not None]
    if len(closed) < opts["min_segments"]:
        return None
    mt = [m for m, _ in closed]
    ts = [t for _, t in closed]
    mtime_span = max(mt) - min(mt)
    record_span = max(ts) - min(ts)
    if record_span >= opts["min_record_span_ms"] and mtime_span <= opts["packed_ratio"] * record_span:
        return PackedSpan(min(mt), max(mt), record_span, len(closed))
    return None


def _batch_local_moves(batch) -> dict[int, list[tuple]]:
    """:meth:`MtimeReset._local_moves` of every partition of the batch at once: index into
    ``batch.keys`` -> the sorted (broker, log dir, kind) of its -future / -delete rows."""
    import numpy as np

    found: dict[int, set] = {}
    for frame, groups in ((batch.segments, batch.seg_group), (batch.partitions, batch.part_group)):
        if frame is None or not len(frame):
            continue
        moving = np.flatnonzero(frame["dir_kind"].isin(["future", "delete"]).to_numpy())
        if not len(moving):
            continue
        for g, b, d, k in zip(groups[moving].tolist(), frame["broker_id"].to_numpy()[moving].tolist(),
                              frame["log_dir"].to_numpy()[moving].tolist(), frame["dir_kind"].to_numpy()[moving].tolist()):
            found.setdefault(g, set()).add((opt_int(b), d, k))
    return {g: sorted(v, key=str) for g, v in found.items()}


def _packed_candidates(batch, opts, live, mtime, newest, replica) -> list:
    """The prefilter's packed test: partitions with a replica whose closed segments' mtimes are
    packed into a fraction of their records' time span (``_packed_span`` as aggregates, exact)."""
    import numpy as np

    seg = batch.segments
    closed = np.flatnonzero(live & ~seg["is_active"].astype(bool).to_numpy() & ~np.isnan(mtime) & ~np.isnan(newest))
    if not len(closed):
        return []
    # per replica (its rows are one run of ``replica``: the batch is sorted), with reduceat on the
    # closed rows rather than a frame and a group-by of them (~70 MiB at a million rows)
    r = replica[closed]
    starts = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
    mtimes, newests = mtime[closed], newest[closed]
    n = np.diff(np.r_[starts, len(r)])
    m0, m1 = np.minimum.reduceat(mtimes, starts), np.maximum.reduceat(mtimes, starts)
    t0, t1 = np.minimum.reduceat(newests, starts), np.maximum.reduceat(newests, starts)
    group = batch.seg_group[closed[starts]]
    pick = {k: batch.per_key({t: o[k] for t, o in opts.items()})[group]
            for k in ("min_segments", "min_record_span_ms", "packed_ratio")}
    record_span = t1 - t0
    packed = ((n >= pick["min_segments"]) & (record_span >= pick["min_record_span_ms"])
              & (m1 - m0 <= pick["packed_ratio"] * record_span * (1 + 1e-9) + 1))
    return group[packed].tolist()


PAIR_CHUNK_POINTS = 100_000
"""Points (closed live segments) per chunk of mtime.reset's replica-pair prefilter."""


def _partition_chunks(groups, size: int) -> list:
    """Row ranges of ``groups`` (a partition index per row) of about ``size`` rows each, never
    splitting a partition; one range of every row when the rows are not in partition order."""
    import numpy as np

    n = len(groups)
    if n <= size or np.any(groups[1:] < groups[:-1]):
        return [slice(0, n)]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])  # where each partition's rows begin
    cuts = [0]
    for target in range(size, n, size):
        at = starts[np.searchsorted(starts, target)] if target <= starts[-1] else n
        if at > cuts[-1]:
            cuts.append(int(at))
    if cuts[-1] != n:
        cuts.append(n)
    return [slice(a, b) for a, b in zip(cuts, cuts[1:])]


def columnar_reset(check: MtimeReset, rows, ctx) -> list:
    """:meth:`MtimeReset.judge` on every replica of the flagged partitions at once (a
    ``ReplicaRows``): packed replicas by per-replica minima and maxima, late segments by a vector
    test, replica pairs by an as-of join of each closed point of one replica with the segment of
    the other that holds its last offset, and each pair's median difference by a sort. Partitions
    where a replica's closed segments overlap (the reference's first holding segment is not the
    join's) go to the reference ``run``. Findings in the reference's order: each partition's late
    ones (replica order), moved (pair order), packed (replica order as text)."""
    import numpy as np

    n = len(rows.rows)
    if not n:
        return []
    base, last = rows.ints("base_offset"), rows.ints("last_offset")
    mtime, newest = rows.ints("log_mtime_ms"), rows.ints("max_timestamp_ms")
    has_m = np.array([v is not None for v in mtime])
    has_t = np.array([v is not None for v in newest])
    has_last = np.array([v is not None for v in last])
    m = np.array([v or 0 for v in mtime], dtype=np.int64)
    t = np.array([v or 0 for v in newest], dtype=np.int64)
    closed = ~rows.truthy("is_active")
    packed = _packed_replicas(rows, closed & has_m & has_t, m, t)
    with np.errstate(invalid="ignore"):
        late = closed & has_m & has_t & ((m - t) > rows.topic_option("mtime_after_ms"))
    late &= ~packed[rows.rep]  # a packed replica's late segments are its packed finding's, not INFO
    points = np.flatnonzero(closed & has_last & has_m)
    skews, overlap = _replica_skews(rows, points, base, last, m)
    made: dict[int, list] = {}
    late_items, late_counts = rows.lists(late, lambda ix: [
        {"segment": base[i], "log_mtime_ms": mtime[i], "max_timestamp_ms": newest[i], "mtime_after_ms": mtime[i] - newest[i]}
        for i in ix.tolist()], cap=EVIDENCE_CAP)
    where = rows.where(np.arange(len(rows)))
    for r in np.flatnonzero(late_counts).tolist():
        topic, partition, broker, log_dir = where[r]
        made.setdefault(int(rows.rep_group[r]), []).append(check._late_finding(
            topic, partition, broker, log_dir, int(late_counts[r]), late_items[r], rows.opts[topic]))
    spans = {r: _span(rows, r, closed & has_m & has_t, m, t) for r in np.flatnonzero(packed).tolist()}
    moves = _batch_local_moves(rows.batch)
    reported: set = set()
    for g, later, earlier, skew_ms, matched in skews:
        topic, partition = rows.batch.keys[g]
        data = CheckInput(topic=topic, partition=partition)
        skew = ReplicaSkew(Replica(*where[later][2:]), Replica(*where[earlier][2:]), skew_ms, matched)
        made.setdefault(g, []).append(check._moved(data, ctx, skew, moves.get(g, []), spans.get(later), rows.opts[topic]))
        reported.add(later)
    for r in sorted(spans, key=lambda r: (int(rows.rep_group[r]), Replica(*where[r][2:]).order)):
        if r not in reported:
            topic, partition = rows.batch.keys[int(rows.rep_group[r])]
            made.setdefault(int(rows.rep_group[r]), []).append(check._packed(
                CheckInput(topic=topic, partition=partition), ctx, Replica(*where[r][2:]), spans[r],
                moves.get(int(rows.rep_group[r]), []), rows.opts[topic]))
    out = [(g, f) for g in sorted(made) if g not in overlap for f in made[g]]
    out += [(g, f) for g in sorted(overlap) for f in rows.batch.run_each(check, ctx, [g])]
    return out


def _packed_replicas(rows, closed, m, t):
    """Per replica: are its closed segments' mtimes packed (``_packed_span`` on vectors, on integers)?"""
    import numpy as np

    at = np.flatnonzero(closed)
    count = np.bincount(rows.rep[at], minlength=len(rows))
    out = np.zeros(len(rows), dtype=bool)
    if not len(at):
        return out
    rep = rows.rep[at]
    starts = np.flatnonzero(np.r_[True, rep[1:] != rep[:-1]])
    which = rep[starts]
    m0, m1 = np.minimum.reduceat(m[at], starts), np.maximum.reduceat(m[at], starts)
    t0, t1 = np.minimum.reduceat(t[at], starts), np.maximum.reduceat(t[at], starts)
    group = rows.rep_group[which]
    pick = {k: rows.batch.per_key({tp: o[k] for tp, o in rows.opts.items()})[group]
            for k in ("min_segments", "min_record_span_ms", "packed_ratio")}
    span = t1 - t0
    out[which] = ((count[which] >= pick["min_segments"]) & (span >= pick["min_record_span_ms"])
                  & (m1 - m0 <= pick["packed_ratio"] * span))
    return out


def _span(rows, r, closed, m, t) -> PackedSpan:
    """The :class:`PackedSpan` of a packed replica ``r``, from its closed rows' integers."""
    lo, hi = int(rows.starts[r]), int(rows.starts[r] + rows.sizes[r])
    mine = closed[lo:hi]
    mt, ts = m[lo:hi][mine].tolist(), t[lo:hi][mine].tolist()
    return PackedSpan(min(mt), max(mt), max(ts) - min(ts), len(mt))


def _replica_skews(rows, points, base, last, m) -> tuple[list, set]:
    """(the replica pairs whose mtimes differ: (partition, later replica, earlier replica, skew,
    matched evidence), in each partition's pair order; the partitions whose closed segments
    overlap within a replica, for the reference)."""
    import numpy as np
    import pandas as pd

    if not len(points):
        return [], set()
    rep = rows.rep[points]
    b = np.array([base[i] for i in points.tolist()], dtype=np.int64)
    e = np.array([last[i] for i in points.tolist()], dtype=np.int64)
    same = rep[1:] == rep[:-1]
    overlap = set(rows.rep_group[rep[1:][same & (b[1:] <= e[:-1])]].tolist())
    pairs = _pairs(rows, np.unique(rep))
    if not pairs:
        return [], overlap
    pa, pb = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    pts = pd.DataFrame({"a": rep, "k": np.arange(len(points)), "last": e})
    left = pts.merge(pd.DataFrame({"a": pa, "b": pb, "pair": np.arange(len(pairs))}), on="a")
    left = left.sort_values("last", kind="stable")
    right = pd.DataFrame({"b": rep, "base_b": b, "k_b": np.arange(len(points))})
    right = right.sort_values("base_b", kind="stable")
    joined = pd.merge_asof(left, right, left_on="last", right_on="base_b", by="b", direction="backward")
    # the segment found holds the point (its last offset reaches it); the values from the integer
    # arrays, not the joined frame's (a point without a segment made its columns float)
    k_b = joined["k_b"].to_numpy()
    found = ~np.isnan(k_b)
    k_a, k_b = joined["k"].to_numpy()[found], k_b[found].astype(np.int64)
    holds = e[k_b] >= e[k_a]
    joined = pd.DataFrame({"pair": joined["pair"].to_numpy()[found][holds], "k": k_a[holds], "k_b": k_b[holds]})
    joined = joined.sort_values(["pair", "k"], kind="stable")
    pair = joined["pair"].to_numpy()
    diff = m[points[joined["k_b"].to_numpy()]] - m[points[joined["k"].to_numpy()]]
    return _skewed(rows, pairs, pair, diff, joined, points, base, last, m), overlap


def _pairs(rows, reps) -> list[tuple[int, int, int]]:
    """(replica a, replica b, partition) for each pair of replicas with closed points in a
    partition, in :meth:`MtimeReset._compare_replicas`' order (replicas by ``Replica.order``)."""
    by_group: dict[int, list] = {}
    for r, w in zip(reps.tolist(), rows.where(reps)):
        by_group.setdefault(int(rows.rep_group[r]), []).append((Replica(w[2], w[3]).order, r))
    pairs = []
    for g, mine in by_group.items():
        mine.sort()
        pairs += [(mine[i][1], mine[j][1], g) for i in range(len(mine)) for j in range(i + 1, len(mine))]
    return pairs


def _skewed(rows, pairs, pair, diff, joined, points, base, last, m) -> list:
    """The pairs whose median mtime difference passes ``replica_skew_ms``, with the evidence of
    every offset compared, as :meth:`MtimeReset._compare_replicas` makes them. The median on
    integers: twice it is the middle difference doubled, or the sum of the two middle ones."""
    import numpy as np

    order = np.lexsort((diff, pair))
    d, counts = diff[order], np.bincount(pair, minlength=len(pairs))
    starts = np.cumsum(counts) - counts
    has = np.flatnonzero(counts)
    mid = starts[has] + counts[has] // 2
    even = counts[has] % 2 == 0
    twice = np.where(even, d[np.maximum(mid - 1, 0)] + d[mid], 2 * d[mid])
    threshold = rows.batch.per_key({t: o["replica_skew_ms"] for t, o in rows.opts.items()})[
        np.array([pairs[p][2] for p in has.tolist()], dtype=np.int64)]
    skewed = has[np.abs(twice) > 2 * threshold]
    if not len(skewed):
        return []
    twice_of = dict(zip(has.tolist(), twice.tolist()))
    where = rows.where(np.array(sorted({r for p in skewed.tolist() for r in pairs[p][:2]}), dtype=np.int64))
    where = dict(zip(sorted({r for p in skewed.tolist() for r in pairs[p][:2]}), where))
    k_a, k_b = joined["k"].to_numpy(), joined["k_b"].to_numpy()
    offs = np.r_[0, np.cumsum(counts)]  # joined is sorted by (pair, k): pair p's rows are offs[p]:offs[p + 1]
    out = []
    for p in skewed.tolist():
        a, b, g = pairs[p]
        ra, rb = Replica(*where[a][2:]), Replica(*where[b][2:])
        matched = []
        for ka, kb in zip(k_a[offs[p]:offs[p + 1]].tolist(), k_b[offs[p]:offs[p + 1]].tolist()):
            i, j = int(points[ka]), int(points[kb])
            matched.append({"offset": last[i], f"mtime_ms_broker_{ra.broker_id}": int(m[i]),
                            f"mtime_ms_broker_{rb.broker_id}": int(m[j]), "segment_a": base[i], "segment_b": base[j],
                            "replica_a": f"broker {ra.broker_id} {ra.log_dir}",
                            "replica_b": f"broker {rb.broker_id} {rb.log_dir}"})
        later, earlier = (b, a) if twice_of[p] > 0 else (a, b)
        out.append((g, later, earlier, abs(twice_of[p]) // 2, matched))
    return out
