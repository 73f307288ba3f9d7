"""The batch paths of the partition checks against their per-partition reference: the
assertions the batch, columnar and judged equality tests share (tests/test_batch_checks.py,
tests/test_batch_checks_synthetic.py, tests/test_local_engine.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from auditor.engines.local.checks import run_local, run_local_reference
from checks import REGISTRY
from checks.framework.base import Check, frame_records


PARTITION_CHECKS = sorted(n for n, c in REGISTRY.items() if c.scope == "partition")


def assert_batch_equals_reference(segments, partitions, ctx, names=None):
    """Both semantics on the same rows, compared per check; returns the findings."""
    names = names or PARTITION_CHECKS
    ref = [f.to_dict() for f in run_local_reference(segments, partitions, ctx, names=names)]
    got = [f.to_dict() for f in run_local(segments, partitions, ctx, names=names)]
    for name in names:
        assert [f for f in got if f["check"] == name] == [f for f in ref if f["check"] == name], name
    assert got == ref
    return got


COLUMNAR_CHECKS = sorted(n for n in PARTITION_CHECKS if REGISTRY[n].run_batch is not Check.run_batch)


#: checks whose judge runs per flagged partition on rows cut for all of them at once (checks.framework.columns.judged_batch)
BULK_JUDGED_CHECKS = sorted(n for n in PARTITION_CHECKS
                            if REGISTRY[n].replica_columns is not None and n not in COLUMNAR_CHECKS)


class Reference:
    """The per-partition reference (``PartitionBatch.run_each``) of one batch, each check run once
    on each partition and kept: a test comparing several paths (columnar, judged) and both frame
    kinds on the same rows pays the reference once instead of once per comparison. Findings as
    dicts, in ``run_each``'s order."""

    def __init__(self, batch, ctx):
        self.batch, self.ctx = batch, ctx
        self._found: dict[tuple[str, int], list[dict]] = {}

    def findings(self, name: str, groups=None) -> list[dict]:
        check = REGISTRY[name]()
        out: list[dict] = []
        for i in (range(len(self.batch)) if groups is None else groups):
            if (name, i) not in self._found:
                self._found[(name, i)] = [f.to_dict() for f in self.batch.run_each(check, self.ctx, [i])]
            out.extend(self._found[(name, i)])
        return out


def _reference_for(batch, ctx, reference: Reference | None) -> Reference:
    if reference is None:
        return Reference(batch, ctx)
    # the same rows in either frame kind: the partitions must line up for the kept findings to apply
    assert reference.batch.keys == batch.keys and reference.ctx is ctx
    return reference


def assert_columnar_equals_reference(batch, ctx, min_findings=0, reference: Reference | None = None):
    """Each check whose findings are built columnar (its own ``run_batch``) or judged on rows cut
    at once (``judged_batch``, strict), called directly (the runner's fallback to the reference
    cannot hide a raising batch path): its findings equal
    ``run`` on every partition of the batch (``run_each``), finding for finding, in order and as
    JSON text; returns how many findings they made. ``reference``: the reference findings kept
    from an earlier comparison on the same rows."""
    import json

    from checks.framework.columns import judged_batch

    reference = _reference_for(batch, ctx, reference)
    made = 0
    for name in COLUMNAR_CHECKS + BULK_JUDGED_CHECKS:
        check = REGISTRY[name]()
        found = check.run_batch(batch, ctx) if name in COLUMNAR_CHECKS else judged_batch(check, batch, ctx, strict=True)
        got = [f.to_dict() for f in found]
        ref = reference.findings(name)
        assert got == ref, name
        assert json.dumps(got, sort_keys=True, default=str) == json.dumps(ref, sort_keys=True, default=str), name
        made += len(got)
    assert made >= min_findings
    return made


JUDGED_CHECKS = sorted(n for n in PARTITION_CHECKS if REGISTRY[n].replica_columns is not None)


def assert_judged_equals_reference(batch, ctx, min_judged=0, reference: Reference | None = None):
    """Each check with ``replica_columns``: its flagged partitions judged from the batch's columns
    (``judge_each``, strict: a raising ``judge`` is not hidden by the fallback to the reference)
    equal ``run`` on each partition's frame; returns how many partitions were judged from the batch."""
    reference = _reference_for(batch, ctx, reference)
    judged = 0
    for name in JUDGED_CHECKS:
        check = REGISTRY[name]()
        groups = list(check.prefilter(batch, ctx))
        got = [f.to_dict() for f in batch.judge_each(check, ctx, groups, check.judge_extra(batch, ctx), strict=True)]
        assert got == reference.findings(name, groups), name
        judged += sum(batch.replica_records(i, check.replica_columns) is not None for i in groups)
    assert judged >= min_judged
    return judged


def _same(a, b) -> bool:
    """Equal and of the same type, numpy arrays cell by cell with their dtype, NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if a is pd.NA or a is pd.NaT or a is None:
        return a is b
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


def assert_records_equal(frame) -> int:
    """``frame_records(frame)`` is ``frame.to_dict("records")``, value for value and type for type; returns the rows."""
    expected, got = frame.to_dict("records"), frame_records(frame)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert _same(g, e), (i, {k: (g[k], e[k]) for k in e if not _same(g.get(k), e[k])})
    return len(got)
