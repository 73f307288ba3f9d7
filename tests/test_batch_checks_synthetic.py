"""Batch semantics equal the per-partition reference on SYNTHETIC tables, for every partition-scope check.

benchmarks/synthetic_rows.py's rows (drawn from the real fixtures' segment rows), with anomalies
planted at random under per-topic configs, so every prefilter has partitions to find and to drop;
compared as in tests/test_batch_checks.py (``assert_batch_equals_reference``: the findings of
``run_local`` and ``run_local_reference``, PASS summaries included, equal check by check). A file of
its own so that pytest-xdist runs these seconds-long fleets beside test_batch_checks' YAML cases
instead of after them in one worker.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from auditor.check_runner import as_frame
from auditor.engines.local.checks import run_local
from auditor.engines.local.tables import segment_frame
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA
from checks import REGISTRY
from checks.framework.base import Check, live_replicas
from checks.framework.batch import PartitionBatch
from harness.batch_equality import (PARTITION_CHECKS, Reference, assert_batch_equals_reference,
                                    assert_columnar_equals_reference, assert_judged_equals_reference,
                                    assert_records_equal)
from harness.synthetic_tables import on_fire_tables, synthetic_tables


# recorded: the SYNTHETIC rows are drawn from the real fixtures' rows (synthetic_rows.base_rows scans them)
# the reference per partition is the cost (each check's run kept once per table: harness.batch_equality.Reference);
# ~9 s of CPU in the fast lane at load 1-4 (10-11 s before frame_records and the kept seed-1 reference; 20 at
# load 12-15, where the other files' figures were taken): still the longest file, xdist starts the longest first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=12)]


@pytest.fixture(scope="module")
def kept():
    """``kept(seed)``: ``synthetic_tables(seed)`` and the per-partition reference on its rows
    (``Reference``: each check's findings kept as they are first asked for), once per module: the
    tests below that compare on the same seed's rows (1: the batch, columnar and judged comparisons,
    and frame_records) pay it once; dropped at the module's end. No test changes these rows or this
    context."""
    made: dict = {}

    def get(seed: int):
        if seed not in made:
            seg, part, ctx = synthetic_tables(seed)
            batch = PartitionBatch(as_frame(seg, SEGMENT_SCHEMA), as_frame(part, PARTITION_SCHEMA))
            made[seed] = (seg, part, ctx, Reference(batch, ctx))
        return made[seed]
    return get


def test_synthetic_tables_batch_equals_reference(kept):
    # one seed: seed 2's tables are held to the reference by the on-fire and judged tests below
    seg, part, ctx, reference = kept(1)
    found = assert_batch_equals_reference(seg, part, ctx)
    assert_columnar_equals_reference(PartitionBatch(as_frame(seg, SEGMENT_SCHEMA), as_frame(part, PARTITION_SCHEMA)), ctx,
                                     reference=reference)
    flagged = {f["check"] for f in found if f["severity"] != "PASS"}
    # the planted anomalies reach most checks (replay.safety runs only with a replay target)
    assert len(flagged) >= 10, sorted(flagged)
    # the runner falls back to the reference when a batch implementation raises: make sure none does
    batch = PartitionBatch(as_frame(seg, SEGMENT_SCHEMA), as_frame(part, PARTITION_SCHEMA))
    for name in PARTITION_CHECKS:
        check = REGISTRY[name]()
        if type(check).prefilter is not Check.prefilter:
            picked = list(check.prefilter(batch, ctx))
            assert set(picked) <= set(range(len(batch))), name


@pytest.mark.parametrize("seed", [1, 2])
def test_on_fire_every_partition_flagged_batch_equals_reference(seed):
    """Every partition dir flagged: the columnar findings, the judged ones and the runner's equal the reference."""
    seg, part, ctx = on_fire_tables(seed)
    found = assert_batch_equals_reference(seg, part, ctx)
    named = {(f["topic"], f["partition"], f["broker_id"], f["log_dir"]) for f in found if f["severity"] != "PASS"}
    # the live partition dirs with segment rows (synthesize's rows cap leaves some dirs without)
    dirs = {(s["topic"], s["partition"], s["broker_id"], s["log_dir"]) for s in seg if s["dir_kind"] == "live"}
    assert dirs <= named, sorted(dirs - named)[:5]
    reference = None  # the reference on the first frame kind, held to both
    for frame in (as_frame(seg, SEGMENT_SCHEMA), segment_frame(pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA))):
        batch = PartitionBatch(frame, as_frame(part, PARTITION_SCHEMA))
        reference = reference or Reference(batch, ctx)
        assert assert_columnar_equals_reference(batch, ctx, reference=reference) >= len(dirs)
        assert_judged_equals_reference(batch, ctx, min_judged=20, reference=reference)


def test_synthetic_tables_replay_target_batch_equals_reference():
    seg, part, ctx = synthetic_tables(3, rows=600)
    ctx.replay_at_ms = ctx.as_of_ms - 2 * 86_400_000
    ctx.replay_topics = ("synthetic-topic-0", "synthetic-topic-2")
    found = assert_batch_equals_reference(seg, part, ctx, names=["replay.safety"])
    assert {f["topic"] for f in found if f["check"] == "replay.safety" and f["topic"]} == set(ctx.replay_topics)


def test_batch_keys_and_spans():
    """The batch's partitions are the reference's (null topic first), each with all its rows."""
    seg, part, _ = synthetic_tables(4, rows=500)
    seg[0]["topic"] = None
    batch = PartitionBatch(pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA).to_pandas(),
                           pa.Table.from_pylist(part).to_pandas())
    assert batch.keys[0][0] is None
    assert len(batch.keys) == len({(s["topic"], s["partition"]) for s in seg} | {(p["topic"], p["partition"]) for p in part})
    total = sum(len(batch.input(i).segments) for i in range(len(batch)))
    assert total == len(seg)
    one = batch.input(1)
    assert set(one.segments["topic"]) == {one.topic} and set(one.segments["partition"]) == {one.partition}


def test_driver_frame_and_moving_sort_give_the_same_findings():
    """The local engine's frame (auditor.engines.local.tables.segment_frame: equal list cells shared) sorted
    by checks.framework.batch.sort_rows_moving (column by column, the input emptied) is the frame the batch
    sorts itself, and gives the same findings, on SYNTHETIC rows with a null topic and shuffled rows."""
    import pandas as pd

    from auditor.engines.local.tables import segment_frame
    from checks.framework.batch import _sorted_rows, sort_rows_moving

    seg, part, ctx = synthetic_tables(6, rows=800)
    seg[5]["topic"] = None
    seg = [seg[i] for i in np.random.default_rng(6).permutation(len(seg))]
    table = pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA)
    expected = _sorted_rows(table.to_pandas())
    frame = segment_frame(table)
    moved, positions = sort_rows_moving(frame)
    assert len(frame.columns) == 0 and sorted(positions.tolist()) == list(range(len(seg)))
    pd.testing.assert_frame_equal(moved, expected)
    parts = as_frame(part, PARTITION_SCHEMA)
    found = [f.to_dict() for f in run_local(moved, parts, ctx, segments_sorted=True)]
    assert found == [f.to_dict() for f in run_local(seg, part, ctx)]
    assert sum(f["severity"] != "PASS" for f in found) > 10


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_synthetic_flagged_partitions_judged_from_the_batch(seed, kept):
    """On SYNTHETIC tables with planted anomalies, in both frames the engines hand the checks (the
    driver's shared-cell frame and Arrow's default conversion)."""
    from auditor.engines.local.tables import segment_frame

    seg, part, ctx, reference = kept(seed)  # the reference on the first frame kind, held to both
    parts = as_frame(part, PARTITION_SCHEMA)
    for frame in (as_frame(seg, SEGMENT_SCHEMA), segment_frame(pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA))):
        batch = PartitionBatch(frame, parts)
        assert assert_judged_equals_reference(batch, ctx, min_judged=20, reference=reference) > 0


def test_uncertain_replica_order_goes_to_the_reference():
    """A replica with two segments on one base offset, or a row without a broker id: the order the
    reference's own sort gives is not certain, so that partition is run by the reference, and the
    findings stay equal."""
    # 3 topics: the reference's cost is per partition, and two uncertain ones are the point here
    seg, part, ctx = synthetic_tables(8, rows=300, topics=3)
    twin = dict(seg[10], log_mtime_ms=seg[10]["log_mtime_ms"] + 9 * 86_400_000)
    seg.append(twin)
    seg[20]["broker_id"] = None
    batch = PartitionBatch(as_frame(seg, SEGMENT_SCHEMA), as_frame(part, PARTITION_SCHEMA))
    for row in (twin, seg[20]):
        i = batch.keys.index((row["topic"], row["partition"]))
        assert batch.replica_records(i, REGISTRY["mtime.reset"].replica_columns) is None
    assert_judged_equals_reference(batch, ctx)
    assert_batch_equals_reference(seg, part, ctx)


def _plain_cells(rows: list[dict]) -> list[dict]:
    """Rows comparable with ==: NaN as None, list cells as lists."""
    def cell(v):
        if isinstance(v, float) and v != v:
            return None
        return [cell(x) for x in v] if isinstance(v, (list, np.ndarray)) else v
    return [{k: cell(v) for k, v in r.items()} for r in rows]


def test_records_are_the_partition_frames_rows():
    """``PartitionBatch.records`` (what the replay search of ``audit --at`` is handed) holds, per
    partition, the rows and values ``to_dict("records")`` of the partition's frame gives, in both
    frame kinds, a null topic included."""
    from auditor.engines.local.tables import segment_frame

    seg, part, _ = synthetic_tables(9, rows=500)
    seg[3]["topic"] = None
    parts = as_frame(part, PARTITION_SCHEMA)
    for frame in (as_frame(seg, SEGMENT_SCHEMA), segment_frame(pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA))):
        batch = PartitionBatch(frame, parts)
        for i in range(len(batch)):
            data = batch.input(i)
            assert _plain_cells(batch.records(i, "segments")) == _plain_cells(data.segments.to_dict("records"))
            assert _plain_cells(batch.records(i, "partitions")) == _plain_cells(data.partitions.to_dict("records"))


def test_frame_records_are_to_dicts_records(kept):
    """``checks.framework.base.frame_records`` (what the per-partition checks read rows with) gives
    ``to_dict("records")``, type for type, on these frames of both kinds and each replica's rows."""
    seg, part, _, _ = kept(1)
    seg = [dict(r) for r in seg]  # the kept rows stay as they are
    seg[3]["topic"] = None
    frames = [as_frame(seg, SEGMENT_SCHEMA), segment_frame(pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA)),
              as_frame(part, PARTITION_SCHEMA)]
    for frame in frames:
        assert assert_records_equal(frame) == len(frame)
        assert assert_records_equal(frame.iloc[0:0]) == 0
    # what the checks hand it: one replica's rows, cut, sorted and re-indexed (live_replicas); every
    # 8th of each frame kind's ~100 (the cells are those compared whole above: these are about the cut)
    replicas = [[rows for _, one in frame.groupby(["topic", "partition"]) for _, _, rows in live_replicas(one)]
                for frame in frames[:2]]
    assert all(len(r) > 40 for r in replicas)
    for rows in replicas[0][::8] + replicas[1][::8]:
        assert assert_records_equal(rows) == len(rows)
