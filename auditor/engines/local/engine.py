"""The table stages on the driver, for inputs it holds: no Spark, no JVM.

The in-process scan (:mod:`auditor.scan`, or the manifests read with pyarrow), the aggregates
(:mod:`auditor.engines.local.tables`, on Arrow columns), the checks (``run_local``: batches of partitions
on pandas) and the Great Expectations suite on GX's pandas datasource. Memory goes by the row,
not by the object (benchmarks/fleet.py: peak RSS per segment row; benchmarks/README.md):

- the segment table is Arrow (on the C library's allocator) until the checks' pandas frame is
  made from it, once, in the checks' batch order, column by column, each Arrow column freed once
  converted (equal list cells share one array); its repeated strings are sorted dictionaries and
  its all-null columns share one zero page mapping (:mod:`auditor.arrow_compact`);
- the GX suite reads the Arrow table a few columns at a time, before that frame exists;
- the partition dirs' statistics stay Arrow (``ArrowRows``: dicts made as they are read);
- no stage builds a Python object per segment row, and freed memory goes back to the OS between
  stages, every few columns of the frame and between checks (:func:`release_memory`), so the peaks
  do not pile up.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.arrow_compact import compact_columns, sort_key
from auditor.engines.capacity_stage import run_capacity
from auditor.engines.local.checks import run_local
from auditor.keys.audit_keys import scan_keys_local
from auditor.engines.local.tables import aggregate_rows, frames, segment_frame
from auditor.manifest import find_manifests, read_manifest
from auditor.scan import scan_log_dirs
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA, to_table
from auditor.engines.base import Progress, TableEngine, TableOutcome, TimelineKeys, read_keys, versions
from checks.framework.base import AuditContext, Finding
from checks.framework.batch import BATCH_SORT
from auditor.engines.local.expectations import run_expectations


class LocalEngine(TableEngine):
    """The table stages in this process (pyarrow, pandas, GX's pandas datasource)."""

    name = "local"

    def run_tables(self, req, ctx: AuditContext, progress: Progress, timeline_keys: TimelineKeys,
                   timeline_columns: Sequence[str]) -> TableOutcome:
        read_keys(req, ctx, progress, scan_keys_local)
        use_system_allocator()
        tables: dict[str, pa.Table] = {}
        tables["segments"], tables["partitions"], infos = _read_inputs(req, progress)
        segment_rows = tables["segments"].num_rows
        progress(f"aggregating {segment_rows:,} segment rows and {tables['partitions'].num_rows:,} partition dirs (pyarrow)")
        rows = aggregate_rows(tables["segments"], tables["partitions"])
        release_memory()  # the group-by's and the rollups' temporaries, before the frame is made
        # the suite first, on the table in its order (its samples follow it), a few columns at a time
        progress("validating the segment table (Great Expectations, pandas)")
        part_release = release_memory if segment_rows >= RELEASE_EACH_GX_PART_ROWS else None
        gx = run_expectations(tables["segments"], ctx, release=part_release)  # GX's frames freed part by part
        release_memory()  # what the suite left
        run_capacity(tables["segments"], infos, ctx, progress)  # ctx.capacity, for the capacity.* checks
        progress(f"running the checks ({segment_rows:,} segment rows, on the driver)")
        # the checks' frame, made once in the batch's order (popped: the only reference to the
        # table, whose columns are freed as they are converted)
        positions = batch_order(tables["segments"])
        frame = segment_frame(tables.pop("segments"), positions, release=release_memory)
        # the partitions' frame after the suite: its Python objects (82 MiB at 99,999 partition
        # dirs, 24 MiB as Arrow) are not held through GX's peak
        partition_frame = tables.pop("partitions").to_pandas()
        release_memory()
        findings = run_local(frame, partition_frame, ctx, frames(rows), segments_sorted=True, release=release_memory)
        progress("collecting what the report shows")
        findings = sorted(findings + gx.findings, key=Finding.sort_key)
        timelines = _timelines(frame, positions, timeline_keys(findings), timeline_columns)
        return TableOutcome(findings=findings, gx=gx, stats=rows["replica_stats"], timelines=timelines,
                            versions=versions("local (pandas on the driver; no Spark)", gx.gx_version), log_dirs=infos)


def batch_order(segments: pa.Table) -> np.ndarray:
    """The table's row indices in the checks' batch order (``checks.framework.batch.BATCH_SORT``), as
    ``checks.framework.batch.sort_rows_moving`` sorts the frame: stable, nulls first (strings compare by
    their UTF-8 bytes, which is Python's code point order)."""
    by = [c for c in BATCH_SORT if c in segments.column_names]
    if not segments.num_rows or not by:
        return np.arange(segments.num_rows, dtype=np.int64)
    # a sorted dictionary by its indices (Arrow sorts no dictionary column; their order is the strings')
    keys = pa.table({c: sort_key(segments.column(c)) for c in by})
    order = pc.sort_indices(keys, sort_keys=[(c, "ascending", "at_start") for c in by])
    return order.to_numpy().astype(np.int64)


RELEASE_EACH_GX_PART_ROWS = 500_000
"""From this many segment rows, freed memory goes back to the OS after each part of the GX suite
(each expectation's frame and GX's working copies: tens of MiB a part at 991,158 rows); below it,
once after the suite: at 100,542 rows a part's frames are a few MiB, and the 25 releases (each
trims the heap twice and Arrow's pools) cost ~45 ms of the suite's ~0.45 s CPU (benchmarks/README.md)."""


def use_system_allocator() -> None:
    """Arrow's buffers from the C library's allocator (``pa.system_memory_pool``), not Arrow's
    default mimalloc: reading the 1,000,000-row fleet's manifests left ~190 MiB resident above the
    437 MiB of Arrow data with mimalloc, ~10 MiB with glibc after a ``malloc_trim``
    (benchmarks/fleet.py; docs in benchmarks/README.md). A pool set by ``ARROW_DEFAULT_MEMORY_POOL``
    is left as it is."""
    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())


def release_memory() -> None:
    """Memory freed by the last stage back to the OS, so that stages' peaks do not pile up in the
    resident set: Arrow's pool (``release_unused``) and glibc's heap (``malloc_trim``: numpy's
    freed arrays stay in the heap otherwise, glibc raising its mmap threshold as they are freed).
    Also Arrow's mimalloc pool where there is one: Acero (the aggregates' group-by and join) allocates
    from it whatever the default pool, and it kept ~50 MiB more resident at 100,542 rows after the
    aggregates on dictionary keys (benchmarks/fleet.py). glibc's part is a no-op where there is no glibc."""
    pa.default_memory_pool().release_unused()
    try:
        pa.mimalloc_memory_pool().release_unused()
    except (NotImplementedError, pa.ArrowNotImplementedError, AttributeError):
        pass
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _read_inputs(req, progress: Progress) -> tuple[pa.Table, pa.Table, list[dict]]:
    """The segment and partition tables as Arrow (of the schema; no Python object per cell; the
    segments' repeated strings as sorted dictionaries, ``auditor.arrow_compact``) and the log-dir
    rows (a few per broker)."""
    if req.manifests:
        progress(f"reading {len(req.manifests)} manifest location(s) (pyarrow)")
        segments, partitions, infos = [], [], []
        for d in find_manifests(req.manifests):
            seg, part, info = read_manifest(d)
            segments.append(seg)
            partitions.append(part)
            infos += info.to_pylist()
        if not segments:
            return to_table([], SEGMENT_SCHEMA), to_table([], PARTITION_SCHEMA), infos
        # read_manifest gives the schema's tables: concatenated without a copy
        segments = compact_columns(pa.concat_tables(segments))
        release_memory()  # the plain string columns the dictionaries replaced
        return segments, pa.concat_tables(partitions), infos
    progress(f"scanning {len(req.log_dirs)} log dir(s) at depth {req.depth} (in-process)")
    result = scan_log_dirs(req.log_dirs, req.depth, **({"state_dir": req.state_dir} if req.state_dir else {}))
    return (compact_columns(to_table(result.segments, SEGMENT_SCHEMA)), to_table(result.partitions, PARTITION_SCHEMA),
            result.log_dirs)


def _timelines(segments, positions, keys: Sequence[tuple[str, int]], columns: Sequence[str]) -> dict[str, list[dict]]:
    """The live segments of the partitions the report draws a timeline for (few), in the table's
    order (``positions``: each row's place in it), as plain Python values of the schema's types
    (pandas made nullable integers floats)."""
    if not keys or not len(segments):
        return {}
    wanted = segments["topic"].isin({t for t, _ in keys}) & segments["file_state"].isna()
    picked = segments.loc[wanted, list(dict.fromkeys([*columns, "topic", "partition"]))]
    asked = set(keys)
    picked = picked[[(t, p) in asked for t, p in zip(picked["topic"], picked["partition"])]]
    picked = picked.iloc[np.argsort(positions[picked.index.to_numpy()], kind="stable")]
    schema = pa.schema([SEGMENT_SCHEMA.field(c) for c in columns])
    timelines: dict[str, list[dict]] = {}
    for row in pa.Table.from_pandas(picked[list(columns)], schema=schema, preserve_index=False).to_pylist():
        timelines.setdefault(f"{row['topic']}-{row['partition']}", []).append(row)
    return timelines
