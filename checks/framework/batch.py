"""A batch of many topic-partitions' rows for the partition-scope checks' batch entry point
(:meth:`checks.framework.base.Check.run_batch`): sorted once, options resolved once per topic, and each
partition handed to :meth:`checks.framework.base.Check.run` exactly as the per-partition runner built it."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from checks.framework.base import AuditContext, Check, CheckInput, Finding, error_finding


#: The order a batch's rows are sorted in, once, for every check (a replica's segments in offset order).
BATCH_SORT = ("topic", "partition", "broker_id", "log_dir", "base_offset")


class PartitionBatch:
    """Many topic-partitions' rows at once, for the partition-scope checks' batch entry point.

    ``segments`` and ``partitions`` are pandas DataFrames of the schema's rows, sorted once by
    :data:`BATCH_SORT` (stable: rows that tie keep their order); ``keys`` lists the batch's
    (topic, partition) pairs in the order the per-partition reference visits them (a null key first,
    as its own partition); ``seg_group`` / ``part_group`` give each row's index into ``keys``.
    :meth:`input` is one partition's :class:`CheckInput`, exactly as the per-partition runner
    builds it, so a check's :meth:`Check.run` on it is the reference for the batch.
    """

    def __init__(self, segments, partitions, segments_sorted: bool = False):
        """``segments_sorted``: the segment frame is already in :data:`BATCH_SORT` order with a
        fresh 0..n-1 index (:func:`sort_rows_moving`), so it is used as it is, not copied sorted."""
        import numpy as np

        self.segments = segments if segments_sorted else _sorted_rows(segments)
        self.partitions = _sorted_rows(partitions)
        seg_keys, self._seg_spans = _key_spans(self.segments)
        part_keys, self._part_spans = _key_spans(self.partitions)
        self.keys: list[tuple] = sorted(set(seg_keys) | set(part_keys), key=_null_first_key)
        index = {k: i for i, k in enumerate(self.keys)}
        self.seg_group = _row_groups(self.segments, seg_keys, self._seg_spans, index, np)
        self.part_group = _row_groups(self.partitions, part_keys, self._part_spans, index, np)
        self._seg_span = dict(zip(seg_keys, self._seg_spans))
        self._part_span = dict(zip(part_keys, self._part_spans))
        self._topic_codes: dict[str, tuple] = {}
        self._cache: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def input(self, i: int) -> CheckInput:
        """Partition ``keys[i]`` as the per-partition runner hands it to ``run``."""
        key = self.keys[i]
        seg = self._slice(self.segments, self._seg_span.get(key))
        part = self._slice(self.partitions, self._part_span.get(key))
        frame = seg if len(seg) else part
        return CheckInput(topic=frame["topic"].iloc[0], partition=int(frame["partition"].iloc[0]),
                          segments=seg, partitions=part)

    def records(self, i: int, which: str) -> list[dict]:
        """Partition ``keys[i]``'s ``segments`` or ``partitions`` rows as dicts, every column, the
        values ``to_dict("records")`` of :meth:`input`'s frame gives, cut from the batch's columns
        (no pandas frame per partition: the replay search of ``audit --at`` reads plain rows)."""
        frame = self.segments if which == "segments" else self.partitions
        span = (self._seg_span if which == "segments" else self._part_span).get(self.keys[i])
        if span is None or frame is None:
            return []
        key = f"columns:{which}"
        if key not in self._cache:
            self._cache[key] = [(name, frame[name].to_numpy()) for name in frame.columns]
        names = [name for name, _ in self._cache[key]]
        values = [array[span[0]:span[1]].tolist() for _, array in self._cache[key]]
        return [dict(zip(names, row)) for row in zip(*values)]

    @staticmethod
    def _slice(frame, span):
        """The rows of ``span`` under a fresh 0..n-1 index, as ``reset_index(drop=True)`` gives them,
        but a view (checks never write into their input): no copy of every column per partition,
        which on the driver's unconsolidated frame cost ~0.4 ms a call (benchmarks/fleet.py --anomalies)."""
        rows = frame.iloc[0:0] if span is None else frame.iloc[span[0]:span[1]]
        rows.index = range(len(rows))
        return rows

    def topics(self) -> list:
        """The distinct topics of the batch (None for rows without one)."""
        return sorted({k[0] for k in self.keys}, key=lambda t: (t is not None, t or ""))

    def options(self, check: "type[Check] | Check", ctx: "AuditContext") -> dict:
        """topic -> the check's options for it, resolved once per distinct topic."""
        name = f"options:{check.name}"
        if name not in self._cache:
            self._cache[name] = {t: ctx.options(check, t) for t in self.topics()}
        return self._cache[name]

    def per_topic(self, which: str, values: Mapping) -> Any:
        """A numpy array with, for each row of ``segments`` (``which="segments"``) or ``partitions``,
        ``values[its topic]`` (topics missing from ``values`` get NaN)."""
        import numpy as np
        import pandas as pd

        frame = self.segments if which == "segments" else self.partitions
        if which not in self._topic_codes:
            self._topic_codes[which] = pd.factorize(frame["topic"], use_na_sentinel=True)
        codes, uniques = self._topic_codes[which]
        table = np.array([_as_float(values.get(t)) for t in uniques] + [_as_float(values.get(None))], dtype="float64")
        return table[codes]  # code -1 (no topic) -> the value for None at the end

    def per_key(self, values: Mapping) -> Any:
        """A numpy array with, for each partition of ``keys``, ``values[its topic]`` (NaN: missing)."""
        import numpy as np

        name = "key_topics"
        if name not in self._cache:
            import pandas as pd

            self._cache[name] = pd.factorize(np.array([k[0] for k in self.keys], dtype=object), use_na_sentinel=True)
        codes, uniques = self._cache[name]
        table = np.array([_as_float(values.get(t)) for t in uniques] + [_as_float(values.get(None))], dtype="float64")
        return table[codes]

    def groups_where(self, which: str, mask) -> list[int]:
        """The indices into ``keys`` of the partitions with a row where ``mask`` holds."""
        import numpy as np

        groups = self.seg_group if which == "segments" else self.part_group
        return np.unique(groups[np.asarray(mask, dtype=bool)]).tolist()

    def groups_of(self, keys: Iterable[tuple]) -> list[int]:
        """The indices of these (topic, partition) pairs among the batch's keys (absent ones dropped)."""
        index = self._cache.get("index")
        if index is None:
            index = self._cache["index"] = {k: i for i, k in enumerate(self.keys)}
        return sorted({index[k] for k in keys if k in index})

    def live_segments(self):
        """Boolean mask of the segment rows :func:`live_replicas` keeps (live dir, no file state, a .log)."""
        if "live" not in self._cache:
            seg = self.segments
            if not len(seg):
                self._cache["live"] = seg["topic"].notna().to_numpy() & False
            else:
                self._cache["live"] = ((seg["dir_kind"] == "live") & seg["file_state"].isna()
                                       & seg["log_size_bytes"].notna()).to_numpy()
        return self._cache["live"]

    def replica_ids(self):
        """Per segment row, an id of its replica (topic, partition, broker, log dir; nulls equal, as
        :func:`live_replicas` groups): rows of one replica are contiguous, in base-offset order.
        The ids of ``groupby(those, sort=False, dropna=False).ngroup()`` (numbered in order of first
        appearance), counted as runs of equal keys: the rows are sorted by :data:`BATCH_SORT`, so a
        replica's rows are one run; no group-by (~40 MiB of factorizations at a million rows)."""
        if "replica" not in self._cache:
            import numpy as np
            import pandas as pd

            seg = self.segments
            changed = np.zeros(max(len(seg) - 1, 0), dtype=bool)
            for name in ("topic", "partition", "broker_id", "log_dir"):
                values = seg[name].to_numpy()
                null = pd.isna(values)
                differ = values[1:] != values[:-1]
                changed |= np.asarray(differ, dtype=bool) & ~(null[1:] & null[:-1])  # two nulls are one key
                changed |= null[1:] != null[:-1]
            self._cache["replica"] = np.r_[0, np.cumsum(changed)].astype(np.int64) if len(seg) else seg.index.to_numpy()
        return self._cache["replica"]

    def list_contains(self, name: str, values: tuple):
        """Per segment row: does its list cell ``name`` hold any of ``values``?"""
        import numpy as np

        import pandas as pd

        col = self.segments[name].to_numpy() if len(self.segments) else np.empty(0, dtype=object)
        # each distinct cell object once: the driver's frame shares one array among equal list cells
        # (auditor.engines.local.tables.segment_frame), so a million rows hold a few hundred objects
        codes, firsts = pd.factorize(np.fromiter(map(id, col), dtype=np.int64, count=len(col)))
        first_row = np.zeros(len(firsts), dtype=np.int64)
        first_row[codes[::-1]] = np.arange(len(codes))[::-1]
        hit = np.fromiter((not (c is None or isinstance(c, float)) and len(c) > 0 and any(v in values for v in c)
                           for c in col[first_row]), dtype=bool, count=len(first_row))
        return hit[codes]

    def column(self, name: str):
        """A segment column as float64 numpy (NaN for null): the vector form of :func:`opt_int`. A
        float64 column is the frame's own array (no copy: checks never write into their input)."""
        key = f"col:{name}"
        if key not in self._cache:
            import numpy as np
            import pandas as pd

            series = self.segments[name]
            if series.dtype == np.float64:
                self._cache[key] = series.to_numpy()
            else:
                self._cache[key] = pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=float("nan"))
        return self._cache[key]

    def forget_columns(self) -> None:
        """The float64 copies :meth:`column` made dropped (the runner calls it after each check):
        a million rows' copy is 7.6 MiB a column, and kept for every check they were 130 MiB at the
        peak of the checks' stage (benchmarks/fleet.py, 991,158 rows); made again when asked (~2 ms)."""
        for key in [k for k in self._cache if k.startswith("col:")]:
            del self._cache[key]

    def array(self, name: str):
        """A segment column as numpy, as the frame holds it (object columns: the cells themselves)."""
        key = f"arr:{name}"
        if key not in self._cache:
            self._cache[key] = self.segments[name].to_numpy()
        return self._cache[key]

    def replica_records(self, i: int, columns: tuple[str, ...]) -> "list[tuple] | None":
        """Partition ``keys[i]``'s live replicas as :func:`checks.framework.base.replica_records` gives them
        from its frame ((broker id, log dir, its segment rows as dicts in base-offset order), replicas
        by broker id then log dir), but only ``columns`` and cut from the batch's columns: no pandas
        frame per partition. None where that order is not certain to be the reference's (a null
        broker id, log dir or base offset, two segments of a replica on one base offset: the
        reference's own sort decides there): the caller runs the reference on that partition."""
        import numpy as np

        span = self._seg_span.get(self.keys[i])
        if span is None:
            return []
        rows = np.flatnonzero(self.live_segments()[span[0]:span[1]]) + span[0]
        if not len(rows):
            return []
        broker, log_dir, base = self.array("broker_id")[rows], self.array("log_dir")[rows], self.array("base_offset")[rows]
        if (_has_null(broker) or _has_null(base)
                or any(d is None or isinstance(d, float) for d in log_dir.tolist())):
            return None
        replica = self.replica_ids()[rows]
        same = replica[1:] == replica[:-1]
        if (same & (base[1:] == base[:-1])).any():
            return None
        values = [self.array(c)[rows].tolist() for c in columns]
        records = [dict(zip(columns, v)) for v in zip(*values)]
        starts = np.flatnonzero(np.r_[True, ~same]).tolist()
        stops = starts[1:] + [len(rows)]
        brokers, dirs = broker.tolist(), log_dir.tolist()
        return [(int(brokers[a]), dirs[a], records[a:b]) for a, b in zip(starts, stops)]

    def judge_each(self, check: "Check", ctx: "AuditContext", groups: Iterable[int] | None = None,
                   extra=None, strict: bool = False) -> list[Finding]:
        """The findings of the partitions in ``groups`` (every one: None) from the batch's columns:
        ``check.judge`` on each partition's :meth:`replica_records` (``check.replica_columns``), the
        code ``check.run`` calls on records it builds from the partition's frame, so the findings are
        the reference's. ``extra(i)``: more keyword arguments for ``judge`` (what the check reads
        besides the live replicas). A partition whose replica order is not certain, or whose
        ``judge`` raises, goes to :meth:`run_each` (the reference names the failure); ``strict``:
        a raising ``judge`` raises (tests/test_batch_checks.py: a bug here cannot hide behind the fallback)."""
        opts_by_topic = self.options(check, ctx)
        out: list[Finding] = []
        for i in (range(len(self.keys)) if groups is None else groups):
            topic, partition = self.keys[i]
            opts = opts_by_topic[topic]
            if not opts.get("enabled", True):
                continue
            replicas = None if topic is None or partition is None else self.replica_records(i, check.replica_columns)
            if replicas is None:
                out.extend(self.run_each(check, ctx, [i]))
                continue
            try:
                out.extend(check.judge(CheckInput(topic=topic, partition=partition), replicas, ctx, opts,
                                       **(extra(i) if extra else {})))
            except Exception:  # noqa: BLE001 - the reference names the failure as a FAIL finding
                if strict:
                    raise
                out.extend(self.run_each(check, ctx, [i]))
        return out

    def judged(self, check: "Check", ctx: "AuditContext", strict: bool = False) -> list[Finding]:
        """``check.judge`` on each partition its prefilter names, the rows of all of them cut at once
        (:func:`checks.framework.columns.judged_batch`)."""
        from checks.framework.columns import judged_batch

        return judged_batch(check, self, ctx, strict)

    def run_each(self, check: "Check", ctx: "AuditContext", groups: Iterable[int] | None = None) -> list[Finding]:
        """``check.run`` on each partition in ``groups`` (every one: None) whose topic has the
        check enabled, a raising call turned into a FAIL finding naming it: today's per-partition
        semantics, the reference every batch implementation is held to."""
        opts_by_topic = self.options(check, ctx)
        out: list[Finding] = []
        for i in (range(len(self.keys)) if groups is None else groups):
            topic = self.keys[i][0]
            opts = opts_by_topic[topic]
            if not opts.get("enabled", True):
                continue
            data = self.input(i)
            try:
                out.extend(check.run(data, ctx, opts))
            except Exception as e:  # noqa: BLE001 - turned into a FAIL finding naming the check
                out.append(error_finding(check, e, data.topic, data.partition))
        return out


def _has_null(values) -> bool:
    import pandas as pd

    return bool(pd.isna(values).any())


def _as_float(value) -> float:
    return float("nan") if value is None else float(value)


def _null_first_key(key: tuple) -> tuple:
    return tuple((v is not None, v if v is not None else 0) for v in key)


def sort_rows_moving(frame):
    """(``frame``'s rows in :data:`BATCH_SORT` order as a new frame with a 0..n-1 index, the
    original position of each of its rows). Built column by column while ``frame``'s columns are
    dropped, so the memory peak is one column above the frame, not two frames; ``frame`` is left
    without columns. The order is :func:`_sorted_rows`' (a stable sort, nulls first)."""
    import numpy as np
    import pandas as pd

    by = [c for c in BATCH_SORT if c in frame.columns]
    positions = (frame[by].sort_values(by, kind="stable", na_position="first").index.to_numpy()
                 if len(frame) else np.arange(0))
    moved = pd.DataFrame(index=pd.RangeIndex(len(frame)))
    for name in list(frame.columns):
        moved[name] = frame[name].to_numpy()[positions]
        del frame[name]
    return moved, positions


def _sorted_rows(frame):
    if frame is None or not len(frame):
        return frame
    by = [c for c in BATCH_SORT if c in frame.columns]
    return frame.sort_values(by, kind="stable", na_position="first").reset_index(drop=True)


def _key_spans(frame) -> tuple[list[tuple], list[tuple[int, int]]]:
    """The (topic, partition) keys of a sorted frame and each one's row span [start, stop)."""
    import numpy as np

    if frame is None or not len(frame):
        return [], []
    ids = frame.groupby(["topic", "partition"], sort=False, dropna=False).ngroup().to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    stops = np.r_[starts[1:], len(ids)]
    topics, parts = frame["topic"].to_numpy(), frame["partition"].to_numpy()
    keys = [(None if _is_null(t) else t, None if _is_null(p) else _plain(p))
            for t, p in zip(topics[starts].tolist(), parts[starts].tolist())]
    return keys, list(zip(starts.tolist(), stops.tolist()))


def _is_null(value) -> bool:
    """None, NaN or pandas' NA (what ``pd.isna`` says of one cell), without a call into pandas per key."""
    import pandas as pd

    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _plain(value):
    """A numpy scalar as the Python value (a key equal and hashed like the reference's)."""
    return value.item() if hasattr(value, "item") else value


def _row_groups(frame, keys, spans, index, np):
    out = np.empty(0 if frame is None else len(frame), dtype="int64")
    for key, (start, stop) in zip(keys, spans):
        out[start:stop] = index[key]
    return out
