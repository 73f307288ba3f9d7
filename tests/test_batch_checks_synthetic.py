"""Batch semantics equal the per-partition reference on SYNTHETIC tables, for every partition-scope check.

benchmarks/synthetic_rows.py's rows (drawn from the real fixtures' segment rows), with anomalies
planted at random under per-topic configs, so every prefilter has partitions to find and to drop;
compared as in tests/test_batch_checks.py (``assert_batch_equals_reference``: the findings of
``run_local`` and ``run_local_reference``, PASS summaries included, equal check by check). A file of
its own so that pytest-xdist runs these seconds-long fleets beside test_batch_checks' YAML cases
instead of after them in one worker.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from auditor.check_runner import as_frame
from auditor.engines.local.checks import run_local
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA
from checks import REGISTRY
from checks.framework.base import AuditContext, Check
from checks.framework.batch import PartitionBatch
from checks.framework.config import Config
from test_batch_checks import PARTITION_CHECKS, assert_batch_equals_reference, assert_judged_equals_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

# recorded: the SYNTHETIC rows are drawn from the real fixtures' rows (synthetic_rows.base_rows scans them)
# five fleets: 12 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=12)]


SYNTHETIC_CONFIG = {
    "kafka": {"retention.ms": 86_400_000},
    "checks": {"timestamps.backward": {"threshold_ms": 600_000}},
    "topics": {
        "synthetic-topic-1": {"checks": {"integrity.crc": {"enabled": False}}, "kafka": {"cleanup.policy": "compact"}},
        "synthetic-topic-2*": {"checks": {"timestamps.backward": {"threshold_ms": 60_000},
                                          "mtime.reset": {"mtime_after_ms": 3_600_000}},
                               "kafka": {"retention.ms": 3_600_000, "message.timestamp.before.max.ms": 60_000}},
        "synthetic-topic-3": {"kafka": {"retention.ms": -1}},
    },
}


_BASE: list = []


def _base_rows():
    """The real fixtures' segment rows (scanned once per module)."""
    if not _BASE:
        from synthetic_rows import base_rows

        _BASE.append(base_rows(None)[0])
    return _BASE[0]


def synthetic_tables(seed: int, rows: int = 900, topics: int = 6):
    """SYNTHETIC rows (benchmarks/synthetic_rows.py over the real fixtures' rows), anomalies planted
    at random: CRC failures, backward jumps, cut tails, magic 0, future and old timestamps, index
    entries past the .log, missing indexes, offset gaps, late and reset mtimes, -future copies."""
    from synthetic_rows import synthesize

    base = _base_rows()
    seg, part = synthesize(rows, base, brokers=5, topics=topics, partitions=6, rf=3, seed=seed)
    seg = seg.to_pylist()
    part = part.to_pylist()
    rng = np.random.default_rng(seed)
    now = max(s["log_mtime_ms"] for s in seg) + 3_600_000

    def some(p):
        return [s for s in seg if rng.random() < p]

    for s in some(0.01):
        s["crc_failures"] = int(rng.integers(1, 4))
    for s in some(0.02):
        s["max_backward_jump_ms"], s["max_backward_jump_offset"] = int(rng.integers(1, 7_200_000)), s["base_offset"] + 1
    for s in some(0.01):
        s["stop_reason"], s["trailing_bytes"] = str(rng.choice(["corrupt", "truncated"])), int(rng.integers(0, 90))
    for s in some(0.01):
        s["magics"], s["timestamp_types"] = [0], ["NoTimestampType"]
    for s in some(0.01):
        s["max_timestamp_ms"] = now + int(rng.integers(-7_200_000, 90 * 86_400_000))
    for s in some(0.02):
        s["min_timestamp_ms"] = s["min_batch_timestamp_ms"] = s["log_mtime_ms"] - int(rng.integers(0, 7_200_000))
    for s in some(0.01):
        s["last_index_position"] = (s["log_size_bytes"] or 0) + int(rng.integers(0, 2))
    for s in some(0.01):
        s["last_index_offset"] = s["last_offset"] + int(rng.integers(0, 2))
    for s in some(0.01):
        s["index_size_bytes"] = None
    for s in some(0.01):
        s["notes"] = list(s["notes"] or []) + ["index entry 3: offsets expected strictly increasing"]
    for s in some(0.02):
        s["first_offset"] = s["first_offset"] + int(rng.integers(0, 3))
    for s in some(0.02):
        s["log_mtime_ms"] = s["log_mtime_ms"] + int(rng.integers(0, 5 * 86_400_000))
    for s in some(0.005):
        s["dir_kind"], s["dir_name"] = "future", s["dir_name"] + ".abc-future"
    for s in some(0.005):
        s["file_state"] = "deleted"
    groups = [{"group": f"g{i}", "topic": s["topic"], "partition": s["partition"],
               "committed_offset": int(s["base_offset"]) + int(rng.integers(-5, 5)), "commit_timestamp_ms": now}
              for i, s in enumerate(some(0.01))]
    for p in part:
        if rng.random() < 0.05:
            p["log_start_offset"] = int(rng.integers(0, 3_000_000))
    ctx = AuditContext(as_of_ms=now, config=Config(SYNTHETIC_CONFIG, source="synthetic"), group_offsets=tuple(groups),
                       topic_configs={"synthetic-topic-4": {"message.timestamp.type": "LogAppendTime"}})
    return seg, part, ctx


@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_tables_batch_equals_reference(seed):
    seg, part, ctx = synthetic_tables(seed)
    found = assert_batch_equals_reference(seg, part, ctx)
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
def test_synthetic_flagged_partitions_judged_from_the_batch(seed):
    """On SYNTHETIC tables with planted anomalies, in both frames the engines hand the checks (the
    driver's shared-cell frame and Arrow's default conversion)."""
    from auditor.engines.local.tables import segment_frame

    seg, part, ctx = synthetic_tables(seed)
    parts = as_frame(part, PARTITION_SCHEMA)
    for frame in (as_frame(seg, SEGMENT_SCHEMA), segment_frame(pa.Table.from_pylist(seg, schema=SEGMENT_SCHEMA))):
        assert assert_judged_equals_reference(PartitionBatch(frame, parts), ctx, min_judged=20) > 0


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
