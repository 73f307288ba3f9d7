"""Runs the registered checks, whatever the engine: the parts both engines share.

Both engines call the same pure checks on the same inputs (anything that needs files, the
replay search, is done here first and handed in): partition-scope checks on batches of many
topic-partitions (``Check.run_batch`` on a ``checks.framework.batch.PartitionBatch``: the whole table here,
one bucket of partitions per ``cogroup().applyInPandas`` call on Spark, so the segment table never
reaches the driver), cluster-scope checks once on the small aggregate tables. The per-partition
semantics (one ``Check.run`` per topic-partition, :func:`run_local_reference`) stay the reference
the batches are tested against.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from auditor import replay
from checks import check_named
from checks.framework.base import AuditContext, Check, CheckInput, Finding, Severity, error_finding

if TYPE_CHECKING:  # checks.framework.batch (numpy, pandas) is imported where a batch is built: replay-check runs one check on rows
    from checks.framework.batch import PartitionBatch
    import pandas as pd  # imported where used: replay-check runs replay.safety on plain rows, without pandas

GROUP = ["topic", "partition"]


def _checks(scope: str, names: Sequence[str] | None = None) -> list[type[Check]]:
    from checks import REGISTRY  # every check module: imported on first use (replay-check runs one)

    return [c for n, c in REGISTRY.items() if c.scope == scope and (names is None or n in names)]


_error_finding = error_finding  # a check that raises: a FAIL finding naming it (checks.framework.base)


def run_partition_checks(segments: pd.DataFrame, partitions: pd.DataFrame, ctx: AuditContext,
                         names: Sequence[str] | None = None) -> list[Finding]:
    """Partition-scope checks on one topic-partition's rows (all replicas)."""
    frame = segments if len(segments) else partitions
    if not len(frame):
        return []
    topic, partition = frame["topic"].iloc[0], int(frame["partition"].iloc[0])
    data = CheckInput(topic=topic, partition=partition, segments=segments.reset_index(drop=True),
                      partitions=partitions.reset_index(drop=True))
    return _search_then_run(_checks("partition", names), data, ctx)


def run_partition_batch(batch: PartitionBatch, ctx: AuditContext, names: Sequence[str] | None = None,
                        release: Callable[[], None] | None = None) -> list[Finding]:
    """Partition-scope checks on a batch of many partitions (``checks.framework.batch.PartitionBatch``): each
    check's ``run_batch`` once (a check whose batch code raises falls back to the per-partition
    reference, so a bug there costs time, never findings); replay.safety partition by partition,
    its replay search first (it reads files: only for the partitions the audit asks about).
    ``release``: called before the first check and after each (the local engine hands its
    ``release_memory``, so one check's freed temporaries are not resident under the next's)."""
    if release is not None:
        release()
    out: list[Finding] = []
    for check in _checks("partition", names):
        if check.name == REPLAY_CHECK:
            out += _replay_batch(check, batch, ctx)
            continue
        instance = check()
        with young_objects_collected():
            try:
                found = instance.run_batch(batch, ctx)
            except Exception:  # noqa: BLE001 - the reference path names any partition that really fails
                found = batch.run_each(instance, ctx)
        batch.forget_columns()  # the next check's copies do not pile on this one's
        if release is not None:
            release()
        out += found
    return out


@contextmanager
def young_objects_collected():
    """Python's cyclic garbage collector paused while a check runs, then one collection of what
    the check made (the youngest generation: nothing was promoted while paused). A check on a
    fleet on fire makes ~150,000 findings, each a few dicts and lists: the collector's automatic
    full collections walked the batch's frame and everything else alive again and again, ~30% of
    the partition checks' CPU (4.39 -> 2.97 s on benchmarks/fleet.py's 100,542-row on-fire fleet).
    ``kafka-audit audit`` pauses it the same way while it makes and writes the findings document."""
    import gc

    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def _replay_batch(check: type[Check], batch: PartitionBatch, ctx: AuditContext) -> list[Finding]:
    """replay.safety on the batch's partitions: nothing unless the audit has a replay target (its
    ``run`` answers [] then), else the search and the check per asked partition, as the reference,
    each partition's rows handed as plain dicts cut from the batch (``PartitionBatch.records``:
    what ``predict_replicas`` reads of a pandas frame, without one per partition)."""
    if ctx.replay_at_ms is None:
        return []
    out: list[Finding] = []
    for i, (topic, partition) in enumerate(batch.keys):
        if ctx.wants_replay(topic):
            data = (CheckInput(topic=topic, partition=partition, segments=batch.records(i, "segments"),
                               partitions=batch.records(i, "partitions"))
                    if topic is not None and partition is not None else batch.input(i))
            out += _search_then_run([check], data, ctx)
    return out


def replay_safety_on_rows(segments: Iterable[dict], partitions: Iterable[dict], ctx: AuditContext,
                          searches: dict | None = None) -> list[Finding]:
    """replay.safety per topic-partition on plain row dicts (replay-check: no pandas), in
    (topic, partition) order: the same search and check as :func:`run_partition_checks` with
    ``names=["replay.safety"]``, the check handed each partition's rows as lists of dicts.
    ``searches``: filled with (topic, partition) -> the replay search the check was handed."""
    seg_by: dict[tuple, list[dict]] = {}
    part_by: dict[tuple, list[dict]] = {}
    for rows, by in ((segments, seg_by), (partitions, part_by)):
        for r in rows:
            if r.get("topic") is not None and r.get("partition") is not None:  # as groupby drops null keys
                by.setdefault((r["topic"], int(r["partition"])), []).append(r)
    safety = check_named(REPLAY_CHECK)  # as _checks("partition", [REPLAY_CHECK]), its module alone imported
    checks = [safety] if safety is not None and safety.scope == "partition" else []
    out: list[Finding] = []
    for topic, partition in sorted(set(seg_by) | set(part_by)):
        data = CheckInput(topic=topic, partition=partition, segments=seg_by.get((topic, partition), []),
                          partitions=part_by.get((topic, partition), []))
        out += _search_then_run(checks, data, ctx)
        if searches is not None:
            searches[(topic, partition)] = data.replay
    return out


def _search_then_run(checks: list[type[Check]], data: CheckInput, ctx: AuditContext) -> list[Finding]:
    """The replay search (when replay.safety is to run), then the checks on its result."""
    out: list[Finding] = []
    try:
        data.replay = replay_search(data, ctx, checks)
    except Exception as e:  # noqa: BLE001 - a failed search must not hide the other checks
        safety = check_named(REPLAY_CHECK)
        checks = [c for c in checks if c is not safety]
        out.append(_error_finding(safety, e, data.topic, data.partition))
    return out + _run_checks(checks, data, ctx)


#: The check the replay search is for; it is handed the search's result, never searches itself.
REPLAY_CHECK = "replay.safety"


def replay_search(data: CheckInput, ctx: AuditContext, checks: Sequence[type[Check]]) -> list | None:
    """The replay search of one partition (``auditor.replay.predict_replicas``: it reads the chosen
    segment of each replica) when replay.safety is to run on it; None otherwise."""
    check = check_named(REPLAY_CHECK)
    if check is None or check not in checks or not ctx.wants_replay(data.topic):
        return None
    opts = ctx.options(check, data.topic)
    if not opts.get("enabled", True):
        return None
    return replay.predict_replicas(data.topic, data.partition, data.segments, data.partitions, ctx,
                                   search_files=opts["read_files"])


#: The partition-row columns the cluster-scope checks read (one row per partition dir: the Spark
#: driver collects only these, not the whole partition table; tests/test_cluster_columns.py runs
#: every cluster check's cases on these against the whole rows).
CLUSTER_PARTITION_COLUMNS = ("broker_id", "log_dir", "topic", "partition", "dir_kind", "topic_id", "size_bytes")
#: The ``replica_stats`` columns the cluster-scope checks read.
CLUSTER_STATS_COLUMNS = ("broker_id", "log_dir", "topic", "partition", "dir_kind", "size_bytes", "message_count")


def run_cluster_checks(stats: Mapping[str, pd.DataFrame], partitions: pd.DataFrame, ctx: AuditContext,
                       names: Sequence[str] | None = None) -> list[Finding]:
    """Cluster-scope checks once, on the partition rows and the aggregate tables, each check handed
    only the columns :data:`CLUSTER_PARTITION_COLUMNS` / :data:`CLUSTER_STATS_COLUMNS` (on both
    engines, so a check reading another column fails its cases on the driver too)."""
    data = CheckInput(partitions=only_columns(partitions, CLUSTER_PARTITION_COLUMNS),
                      replica_stats=only_columns(stats.get("replica_stats"), CLUSTER_STATS_COLUMNS),
                      topic_stats=stats.get("topic_stats"), broker_stats=stats.get("broker_stats"),
                      log_dir_stats=stats.get("log_dir_stats"))
    return _run_checks(_checks("cluster", names), data, ctx)


def only_columns(frame, columns: Sequence[str]):
    """The frame's ``columns`` (those it has: a case may give a partial table), or the frame itself
    when it already has no other column (what the Spark engine collects)."""
    if frame is None or list(frame.columns) == list(columns):
        return frame
    return frame[[c for c in columns if c in frame.columns]]


def _run_checks(checks: Sequence[type[Check]], data: CheckInput, ctx: AuditContext) -> list[Finding]:
    """Each enabled check (options for the input's topic) on ``data``; a check that raises becomes
    a FAIL finding naming it (one bad partition must not hide the others)."""
    out: list[Finding] = []
    for check in checks:
        opts = ctx.options(check, data.topic)
        if not opts.get("enabled", True):
            continue
        try:
            out.extend(check().run(data, ctx, opts))
        except Exception as e:  # noqa: BLE001 - turned into a FAIL finding naming the check
            out.append(_error_finding(check, e, data.topic, data.partition))
    return out


def as_frame(rows, schema) -> pd.DataFrame:
    """Rows as pandas the way Spark hands them to applyInPandas (Arrow's default conversion:
    nullable integers become float64 with NaN, lists become numpy arrays), so a check sees the
    same dtypes on both engines."""
    import pandas as pd

    from auditor.schema import to_table

    if isinstance(rows, pd.DataFrame):
        return rows
    return to_table(list(rows), schema).to_pandas()


def partition_groups(frame: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """Rows per (topic, partition), a null key included as its own group (None), as Spark's groupBy
    does: a row without a topic reaches the checks on both engines."""
    import pandas as pd

    if not len(frame):
        return {}
    return {tuple(None if pd.isna(v) else v for v in key): rows
            for key, rows in frame.groupby(GROUP, sort=False, dropna=False)}


def null_first(key: tuple) -> tuple:
    return tuple((v is not None, v if v is not None else 0) for v in key)


def with_pass_summaries(findings: list[Finding], names: Sequence[str] | None = None) -> list[Finding]:
    """One PASS finding for every check that ran and found nothing, so the report lists it."""
    from checks import REGISTRY

    seen = {f.check for f in findings}
    for name, check in REGISTRY.items():
        if (names is None or name in names) and name not in seen:
            findings.append(Finding(code=check.code, check=name, severity=Severity.PASS,
                                    message=f"{check.title}: nothing found"))
    return sorted(findings, key=Finding.sort_key)


def worst(findings: Iterable[Finding]) -> Severity:
    return max((f.severity for f in findings), default=Severity.PASS)
