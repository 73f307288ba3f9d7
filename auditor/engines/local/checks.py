"""The local engine's check runner: the whole segment table as one batch of partitions, on pandas.

The per-partition reference (:func:`run_local_reference`, one ``Check.run`` per topic-partition) is
what the batch path is tested against (tests/test_batch_checks.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from auditor.check_runner import as_frame, null_first, partition_groups, run_cluster_checks, run_partition_batch, run_partition_checks, with_pass_summaries
from checks.framework.base import AuditContext, Finding

if TYPE_CHECKING:
    import pandas as pd


def run_local(segments, partitions, ctx: AuditContext, stats: Mapping[str, pd.DataFrame] | None = None,
              names: Sequence[str] | None = None, segments_sorted: bool = False,
              release: Callable[[], None] | None = None) -> list[Finding]:
    """In-process engine: segment/partition rows (dicts or DataFrames) -> findings, sorted.
    ``segments_sorted``: a segment frame from ``checks.framework.batch.sort_rows_moving`` (used as it is).
    ``release``: frees memory between the partition checks (:func:`run_partition_batch`)."""
    from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA  # Arrow: imported by the engines, not replay-check

    seg = as_frame(segments, SEGMENT_SCHEMA)
    part = as_frame(partitions, PARTITION_SCHEMA)
    from checks.framework.batch import PartitionBatch

    findings = run_partition_batch(PartitionBatch(seg, part, segments_sorted), ctx, names, release)
    if stats is not None:
        findings.extend(run_cluster_checks(stats, part, ctx, names))
    return with_pass_summaries(findings, names)


def run_local_reference(segments, partitions, ctx: AuditContext, stats: Mapping[str, pd.DataFrame] | None = None,
                        names: Sequence[str] | None = None) -> list[Finding]:
    """:func:`run_local` with today's per-partition semantics (one ``run`` per check per
    topic-partition, pandas groupby): the reference the batch path is tested against."""
    from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA

    seg = as_frame(segments, SEGMENT_SCHEMA)
    part = as_frame(partitions, PARTITION_SCHEMA)
    findings: list[Finding] = []
    seg_groups, part_groups = partition_groups(seg), partition_groups(part)
    for key in sorted(set(seg_groups) | set(part_groups), key=null_first):
        findings.extend(run_partition_checks(seg_groups.get(key, seg.iloc[0:0]), part_groups.get(key, part.iloc[0:0]), ctx, names))
    if stats is not None:
        findings.extend(run_cluster_checks(stats, part, ctx, names))
    return with_pass_summaries(findings, names)


