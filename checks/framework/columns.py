"""Columnar findings: the live replicas of many flagged partitions as numpy columns, so a check
builds its findings with vector operations over every row it flags instead of one pandas frame
(``live_replicas``, ``to_dict``, ``itertuples``) per flagged partition (docs/batch-checks.md,
"Findings built columnar").

:class:`ReplicaRows` holds the live segment rows of the partitions a check's prefilter names, in
the order the per-partition reference walks them (partitions in ``batch.keys`` order, a
partition's replicas by broker id then log dir, a replica's segments by base offset): the batch's
own sort. Where that order is not certain to be the reference's (a null topic or partition, a null
broker id, log dir or base offset among a partition's live rows, two segments of a replica on one
base offset: the reference's own sort decides there) the partition is left out and named in
``uncertain``; the check runs the reference ``run`` on those (:func:`columnar_batch`).

The walks a check makes along a replica's segments (the first row where something holds, the rows
before it, the rows after it) are cumulative sums inside each replica's run of rows.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from checks.framework.base import CheckInput, Finding, opt_int


class ReplicaRows:
    """The live segment rows of some partitions of a batch, replica by replica (see the module)."""

    def __init__(self, batch, check, ctx, groups: "Iterable[int] | None"):
        import numpy as np

        self.batch = batch
        keys = batch.keys
        opts = batch.options(check, ctx)
        # only the partitions asked for are looked at one by one (a clean fleet's prefilter names few)
        asked = range(len(keys)) if groups is None else groups
        enabled = [g for g in asked if opts[keys[g][0]].get("enabled", True)]
        null_key = [g for g in enabled if keys[g][0] is None or keys[g][1] is None]
        #: the partitions asked for that a check judges (a key, the check enabled for its topic)
        self.judged = np.array([g for g in enabled if keys[g][0] is not None and keys[g][1] is not None], dtype=np.int64)
        judged = np.zeros(len(keys), dtype=bool)
        judged[self.judged] = True
        live = batch.live_segments()
        rows = np.flatnonzero(live & judged[batch.seg_group]) if len(batch.segments) else np.zeros(0, np.int64)
        group = batch.seg_group[rows]
        replica = batch.replica_ids()[rows]
        base = batch.column("base_offset")[rows]
        broker = batch.column("broker_id")[rows]
        log_dir = batch.array("log_dir")[rows]
        bad = np.isnan(base) | np.isnan(broker) | np.fromiter(
            (d is None or isinstance(d, float) for d in log_dir.tolist()), dtype=bool, count=len(rows))
        same = replica[1:] == replica[:-1]
        bad[1:] |= same & (base[1:] == base[:-1])
        uncertain = np.unique(group[bad])
        keep = ~np.isin(group, uncertain)
        #: partitions (indices into batch.keys) the reference runs on: order not certain, or a null key
        self.uncertain: list[int] = sorted(set(uncertain.tolist()) | set(null_key))
        self.rows = rows[keep]
        self.group = group[keep]
        replica = replica[keep]
        starts = np.flatnonzero(np.r_[True, replica[1:] != replica[:-1]]) if len(replica) else np.zeros(0, np.int64)
        #: per replica: its first row (index into ``rows``) and its number of rows
        self.starts = starts
        self.sizes = np.diff(np.r_[starts, len(replica)])
        #: per row: its replica (0..replicas-1)
        self.rep = np.repeat(np.arange(len(starts)), self.sizes)
        self.rep_group = self.group[starts]
        self.opts = opts

    def __len__(self) -> int:
        return len(self.starts)

    def col(self, name: str):
        """A segment column at the rows, float64 (NaN: null): for decisions."""
        return self.batch.column(name)[self.rows]

    def ints(self, name: str, at=None) -> list:
        """A segment column at the rows (or at ``at``, indices into the rows) as Python ints or None,
        exact (from the frame's own values, as ``opt_int`` reads a cell): for what a finding shows."""
        values = self.batch.array(name)[self.rows if at is None else self.rows[at]]
        return [opt_int(v) for v in values.tolist()]

    def truthy(self, name: str):
        """``bool(cell)`` of a segment column at the rows (what ``if r[name]`` tests: NaN is true, None false)."""
        import numpy as np

        values = self.batch.array(name)[self.rows]
        if values.dtype == bool:
            return values.copy()
        return np.fromiter(map(bool, values.tolist()), dtype=bool, count=len(values))

    def per_topic(self, values: Mapping) -> Any:
        """Per row, ``values[its topic]`` (NaN where missing)."""
        return self.batch.per_key(values)[self.group]

    def topic_option(self, key: str) -> Any:
        """Per row, the check's option ``key`` for its topic."""
        return self.per_topic({t: o[key] for t, o in self.opts.items() if key in o})

    def running(self, flag):
        """Per row, how many rows of its replica up to and including it have ``flag``."""
        import numpy as np

        total = np.cumsum(flag, dtype=np.int64)
        before = np.r_[0, total][self.starts]  # the count before each replica's first row
        return total - before[self.rep]

    def prefix(self, flag):
        """Rows whose replica has ``flag`` on every row up to and including it (a walk that stops
        at the first row without it)."""
        return self.running(~flag) == 0

    def first(self, flag):
        """Per replica: the index (into the rows) of its first row with ``flag``, -1 when none."""
        import numpy as np

        out = np.full(len(self.starts), -1, dtype=np.int64)
        hits = np.flatnonzero(flag & (self.running(flag) == 1))
        out[self.rep[hits]] = hits
        return out

    def lists(self, mask, items: Callable[[Any], list], cap: int | None = None) -> tuple[list[list], Any]:
        """Per replica: the ``items`` of its rows where ``mask`` holds, in row order (at most ``cap``
        of them), and the full count per replica. ``items(at)`` builds one item per index in ``at``."""
        import numpy as np

        at = np.flatnonzero(mask)
        count = np.bincount(self.rep[at], minlength=len(self.starts))
        if cap is not None:
            at = at[self.running(mask)[at] <= cap]
        built = items(at)
        cuts = np.cumsum(np.bincount(self.rep[at], minlength=len(self.starts)))[:-1].tolist()
        bounds = [0] + cuts + [len(built)]
        return [built[a:b] for a, b in zip(bounds, bounds[1:])], count

    def sums(self, values):
        """Per replica, the sum of ``values`` (per row)."""
        import numpy as np

        return np.bincount(self.rep, weights=values, minlength=len(self.starts)) if len(values) else np.zeros(len(self.starts))

    def where(self, replicas) -> list[tuple]:
        """(topic, partition, broker id, log dir) of each replica in ``replicas``."""
        at = self.rows[self.starts[replicas]]
        brokers = self.batch.array("broker_id")[at].tolist()
        dirs = self.batch.array("log_dir")[at].tolist()
        keys = self.batch.keys
        return [(*keys[g], opt_int(b), d) for g, b, d in zip(self.rep_group[replicas].tolist(), brokers, dirs)]


def columnar_batch(check, batch, ctx, findings: Callable[[ReplicaRows], list[tuple[int, Finding]]]) -> list[Finding]:
    """A check's batch findings built columnar: ``findings(rows)`` on the live replicas of the
    partitions its prefilter names (:class:`ReplicaRows`), each finding with its partition's index
    into ``batch.keys``; the reference ``run`` on the partitions whose order is not certain; all in
    the reference's order (by partition, then as each was made)."""
    rows = ReplicaRows(batch, check, ctx, check.prefilter(batch, ctx))
    made = findings(rows)
    made += [(i, f) for i in rows.uncertain for f in batch.run_each(check, ctx, [i])]
    order = sorted(range(len(made)), key=lambda k: made[k][0])  # stable: a partition's findings keep their order
    return [made[k][1] for k in order]


def judged_batch(check, batch, ctx, strict: bool = False) -> list[Finding]:
    """The findings of a check with ``replica_columns``: its ``judge`` on each partition its
    prefilter names, the replicas' rows as dicts cut for all those partitions at once from the
    batch's columns (one pass over the rows, no pandas frame and no numpy call per partition),
    ``judge_extra`` as before; the reference ``run`` on the partitions whose order is not certain
    and on any whose ``judge`` raises (``strict``: it raises, for the tests)."""
    rows = ReplicaRows(batch, check, ctx, check.prefilter(batch, ctx))
    extra = check.judge_extra(batch, ctx)
    columns = check.replica_columns
    values = [batch.array(c)[rows.rows].tolist() for c in columns]
    records = [dict(zip(columns, v)) for v in zip(*values)]
    starts, stops = rows.starts.tolist(), (rows.starts + rows.sizes).tolist()
    by_group: dict[int, list] = {}
    for r, (_, _, broker, log_dir) in enumerate(rows.where(range(len(rows)))):
        by_group.setdefault(int(rows.rep_group[r]), []).append((broker, log_dir, records[starts[r]:stops[r]]))
    uncertain = set(rows.uncertain)
    made: list[tuple[int, Finding]] = []
    for g in rows.judged.tolist():
        if g in uncertain:
            continue
        topic, partition = batch.keys[g]
        try:
            found = check.judge(CheckInput(topic=topic, partition=partition), by_group.get(g, []), ctx,
                                rows.opts[topic], **(extra(g) if extra else {}))
        except Exception:  # noqa: BLE001 - the reference names the failure as a FAIL finding
            if strict:
                raise
            found = batch.run_each(check, ctx, [g])
        made += [(g, f) for f in found]
    made += [(i, f) for i in rows.uncertain for f in batch.run_each(check, ctx, [i])]
    order = sorted(range(len(made)), key=lambda k: made[k][0])
    return [made[k][1] for k in order]
