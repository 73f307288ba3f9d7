"""The small-audit engine (driver, pandas) gives what the Spark engine gives, on the same inputs.

For each input, the segment and partition rows are handed to both engines: Spark DataFrames
(aggregates on Spark, checks through ``applyInPandas``, GX on the Spark datasource) and plain rows
(``auditor.engines.local.tables`` aggregates, ``run_local``, GX on the pandas datasource). The four
aggregate tables must be equal frame for frame (same columns, dtypes and values), and the
findings and GX results equal item for item. Inputs: the real broker dirs of the fixtures, the
demo sample written by real brokers with its planted anomalies (its own config, replay target
and audit time), copies of it with further planted anomalies (a duplicated segment, a future
timestamp, offsets below the base offset, negative trailing bytes, a null topic, min > max,
an unknown directory kind), and a live broker's dirs with records in every state.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

# tier (tests/harness/tiers.py): `kafka-audit` runs on the Spark engine in subprocesses, beside the spark fixture
pytestmark = pytest.mark.live

from auditor.engines.local import tables as local_engine
from auditor.engines.local.checks import run_local
from auditor.engines.spark.checks import run_spark
from auditor.cli.demo import unpack_demo_sample
from auditor.engines.spark import aggregates
from auditor.scan import scan_log_dirs
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA, spark_schema, to_table
from checks.framework.base import AuditContext
from checks.framework.config import Config
from auditor.engines.local.expectations import run_expectations as run_expectations_local
from auditor.engines.spark.expectations import run_expectations as run_expectations_spark
from harness.realdata import LOG_DIRS
from harness.spark_session import spark  # noqa: F401

SORT_KEYS = {"replica_stats": ["broker_id", "log_dir", "dir_name"], "topic_stats": ["topic"],
             "broker_stats": ["broker_id"], "log_dir_stats": ["broker_id", "log_dir"]}


def _spark_df(spark, rows, schema):  # noqa: F811
    return spark.createDataFrame([tuple(r[f.name] for f in schema) for r in rows], spark_schema(schema))


def _sorted(frame: pd.DataFrame, keys) -> pd.DataFrame:
    return frame.sort_values(keys, na_position="first", kind="stable").reset_index(drop=True)


def assert_engines_agree(spark, segments, partitions, ctx):  # noqa: F811
    seg_df, part_df = _spark_df(spark, segments, SEGMENT_SCHEMA), _spark_df(spark, partitions, PARTITION_SCHEMA)
    on_spark = aggregates(seg_df, part_df)
    local = local_engine.aggregates(segments, partitions)
    assert list(local) == list(on_spark)
    for name, frame in on_spark.items():
        pd.testing.assert_frame_equal(_sorted(local[name], SORT_KEYS[name]),
                                      _sorted(frame.toPandas(), SORT_KEYS[name]), obj=name)
    spark_findings = [f.to_dict() for f in run_spark(seg_df, part_df, on_spark, ctx)]
    local_findings = [f.to_dict() for f in run_local(segments, partitions, ctx, local)]
    assert local_findings == spark_findings
    gx_spark = run_expectations_spark(seg_df, ctx)
    gx_local = run_expectations_local(to_table(segments, SEGMENT_SCHEMA).to_pandas(), ctx)
    assert gx_local.results == gx_spark.results
    assert [f.to_dict() for f in gx_local.findings] == [f.to_dict() for f in gx_spark.findings]
    assert (gx_local.success, gx_local.element_count) == (gx_spark.success, gx_spark.element_count)
    return spark_findings + [f.to_dict() for f in gx_spark.findings]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    log_dirs, meta = unpack_demo_sample(tmp_path_factory.mktemp("demo"))
    ctx = AuditContext(as_of_ms=meta["made_at_ms"], config=Config.load(str(log_dirs[0].parent / "demo-audit.yaml")),
                       replay_at_ms=meta["replay_at_ms"], replay_topics=tuple(meta["replay_topics"]))
    return scan_log_dirs(log_dirs, "deep"), ctx


def test_real_broker_dirs(spark):  # noqa: F811
    result = scan_log_dirs(LOG_DIRS, "headers")
    ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=Config.load(None))
    found = assert_engines_agree(spark, result.segments, result.partitions, ctx)
    assert len(found) > 10


def test_demo_sample_with_its_planted_anomalies(spark, demo):  # noqa: F811
    result, ctx = demo
    found = assert_engines_agree(spark, result.segments, result.partitions, ctx)
    codes = {f["code"] for f in found if f["severity"] in ("WARN", "FAIL")}
    assert {"KLA001", "KLA002", "KLA010"} <= codes, codes


def test_more_planted_anomalies(spark, demo):  # noqa: F811
    result, ctx = demo
    segs = copy.deepcopy(result.segments)
    segs.append(copy.deepcopy(segs[3]))                                  # the same segment twice
    segs[5]["max_timestamp_ms"] = ctx.as_of_ms + 20 * 365 * 86_400_000     # far future
    segs[6]["last_offset"] = segs[6]["base_offset"] - 5                  # below its own base offset
    segs[7]["trailing_bytes"] = -1
    segs[8]["topic"] = None                                              # a key missing
    segs[9]["max_timestamp_ms"], segs[9]["min_timestamp_ms"] = 1, 5     # min > max
    segs[10]["dir_kind"] = "weird"
    found = assert_engines_agree(spark, segs, result.partitions, ctx)
    gx = [f for f in found if f["code"] == "KLA090"]
    assert len(gx) >= 6, gx


def test_spark_buckets_equal_driver_batch_and_reference(spark):  # noqa: F811
    """Spark's bucketed batches (3 buckets of many partitions) give the partition checks' findings of
    the driver's batch and of the per-partition reference, on SYNTHETIC rows with planted anomalies."""
    from auditor.check_runner import with_pass_summaries
    from auditor.engines.local.checks import run_local_reference
    from auditor.engines.spark.checks import spark_partition_findings
    from checks.framework.base import Finding
    from harness.batch_equality import PARTITION_CHECKS
    from harness.synthetic_tables import on_fire_tables, synthetic_tables

    # planted anomalies, then a fleet on fire (every live partition dir flagged: the columnar findings)
    for segments, partitions, ctx in (synthetic_tables(5, rows=600), on_fire_tables(5, rows=600)):
        seg_df, part_df = _spark_df(spark, segments, SEGMENT_SCHEMA), _spark_df(spark, partitions, PARTITION_SCHEMA)
        rows = spark_partition_findings(seg_df, part_df, ctx, PARTITION_CHECKS, buckets=3).collect()
        on_spark = [f.to_dict() for f in with_pass_summaries([Finding.from_row(r.asDict()) for r in rows], PARTITION_CHECKS)]
        assert on_spark == [f.to_dict() for f in run_local(segments, partitions, ctx, names=PARTITION_CHECKS)]
        assert on_spark == [f.to_dict() for f in run_local_reference(segments, partitions, ctx, names=PARTITION_CHECKS)]
        assert sum(f["severity"] != "PASS" for f in on_spark) > 20


@pytest.fixture(scope="module")
def live_broker(kafka_cluster_factory):
    """One broker, two log dirs, records in every state (closed segments a day old, a future
    timestamp, committed and aborted transactions) and a partition written in the last minute
    (a measured ingress rate for the capacity projection); (cluster, the time they were written)."""
    kc = kafka_cluster_factory(brokers=1, log_dirs_per_broker=2)
    kc.create_topic("events", partitions=3, config={"segment.ms": "60000", "segment.jitter.ms": "0"})
    kc.create_topic("tx", partitions=1)
    kc.create_topic("recent", partitions=1, config={"retention.ms": "3600000"})
    now = int(time.time() * 1000)
    for p in range(3):
        kc.roll_segments("events", p, segments=3 + 2 * p, records_per_segment=10 * (p + 1),
                         base_timestamp_ms=now - 86_400_000)
    kc.transaction("tx", [("k", "v", now)], commit=True)
    kc.transaction("tx", [("k", "w", now)], commit=False)
    kc.produce("events", [("late", "x", now + 7_200_000)], partition=0)  # a future timestamp
    kc.produce("recent", [(f"k{i}", "v" * 1000, now - 60_000 + i * 1000) for i in range(60)], batch_num_messages=1)
    return kc, now


def test_live_broker_dirs(spark, live_broker):  # noqa: F811
    kc, now = live_broker
    result = scan_log_dirs(kc.log_dirs(1), "deep")
    ctx = AuditContext(as_of_ms=now + 1000, config=Config.load(None), replay_at_ms=now - 2 * 86_400_000)
    assert_engines_agree(spark, result.segments, result.partitions, ctx)


def test_capacity_section_same_on_both_engines(spark, live_broker, tmp_path):  # noqa: F811
    """The capacity projection on Spark (the capacity columns collected to the driver) equals the
    local engine's, field for field, from one manifest: the filesystem statted once, when it was
    collected (FS_FIELDS_OF_THE_MOMENT and all that follows from the free space are then the same
    input; two audits of the live log dirs would stat them twice while the broker writes on, its
    metadata log included)."""
    from auditor.audit import AuditRequest, run_audit
    from harness.cli import kafka_audit_in_process

    kc, now = live_broker
    manifest = tmp_path / "manifest"
    done = kafka_audit_in_process("collect", "--out", manifest, "--no-progress", *kc.log_dirs(1))
    assert done.returncode == 0, done.stderr[-2000:]
    sections = {}
    for engine in ("local", "spark"):
        capacity = run_audit(AuditRequest(manifests=[str(manifest)], as_of_ms=now + 1000, engine=engine)).capacity
        sections[engine] = json.loads(json.dumps({"filesystems": capacity.filesystems, "notes": capacity.notes},
                                                 default=str))
    local, on_spark = sections["local"], sections["spark"]
    assert len(local["filesystems"]) == len(on_spark["filesystems"])
    for a, b in zip(local["filesystems"], on_spark["filesystems"]):
        assert a == b, {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
    assert local["notes"] == on_spark["notes"]
    entry = on_spark["filesystems"][0]
    assert entry["growth_bytes_per_s"] > 0 and entry["rates"].get("measured"), entry
    assert any(p["topic"] == "recent" for p in entry["top_partitions"]), entry["top_partitions"]


def test_per_dir_tables_collected_in_slices_equal_one_collect(spark, demo, monkeypatch):  # noqa: F811
    """The Spark driver collects a table of a row per partition dir in slices (one job each) and
    compacts each (``auditor.engines.spark.engine._collect_table``): the same rows as one ``toArrow``, and
    the same pandas frame as ``toPandas`` gives, whatever the slice size (rows in slice order)."""
    from auditor.arrow_compact import compact_columns, is_sorted_dictionary
    from auditor.engines.local.tables import segment_frame
    from auditor.engines.spark import engine as spark_engine

    result, _ = demo
    per_dir = aggregates(_spark_df(spark, result.segments, SEGMENT_SCHEMA),
                         _spark_df(spark, result.partitions, PARTITION_SCHEMA))["replica_stats"]
    rows = per_dir.count()
    whole = compact_columns(per_dir.toArrow())
    key = SORT_KEYS["replica_stats"]
    for per_slice in (7, 1, rows + 1):
        monkeypatch.setattr(spark_engine, "ROWS_PER_COLLECT_SLICE", per_slice)
        got = spark_engine._collect_table(per_dir, rows)
        assert got.schema.names == whole.schema.names
        assert sorted(got.to_pylist(), key=repr) == sorted(whole.to_pylist(), key=repr), per_slice
        for name in got.column_names:  # a dictionary column: one sorted dictionary over all the slices
            column = got.column(name)
            if pa.types.is_dictionary(column.type):
                assert is_sorted_dictionary(column.type), (per_slice, name)
                assert len({tuple(c.dictionary.to_pylist()) for c in column.chunks}) <= 1, (per_slice, name)
        pd.testing.assert_frame_equal(_sorted(segment_frame(got), key), _sorted(per_dir.toPandas(), key))


FREE_SPACE_FIELDS = {"free_bytes", "available_bytes", "used_bytes", "usable_bytes", "other_bytes", "headroom_bytes",
                     "steady_state_bytes", "seconds_to_full", "full_at_utc", "seconds_to_headroom", "headroom_at_utc",
                     "origin_utc", "series", "summary"}
"""A capacity entry's fields that follow from the free space statted when the audit ran."""


def test_whole_audit_same_document_on_both_engines(demo, tmp_path, monkeypatch):
    """run_audit end to end on the demo sample: the local engine's document equals Spark's but for
    the engine, the versions and the elapsed time (the order of replica_stats rows aside). The
    Spark driver collects its per-dir tables in slices of 5 rows here, as it does above 100,000
    dirs (one job each, compacted and joined: ``auditor.engines.spark.engine._collect_table``)."""
    from auditor.audit import AuditRequest, run_audit
    from auditor.engines.spark import engine as spark_engine
    from reports.document import build_document

    monkeypatch.setattr(spark_engine, "ROWS_PER_COLLECT_SLICE", 5)
    result, ctx = demo
    log_dirs = [i["log_dir"] for i in result.log_dirs]
    docs = {}
    for engine in ("local", "spark"):
        req = AuditRequest(log_dirs=log_dirs, depth="deep", config_path=str(Path(log_dirs[0]).parent / "demo-audit.yaml"),
                           replay_at_ms=ctx.replay_at_ms, replay_topics=list(ctx.replay_topics), as_of_ms=ctx.as_of_ms, engine=engine)
        doc = dict(build_document(run_audit(req)))
        assert doc.pop("engine")["name"] == engine
        for key in ("versions", "elapsed_s"):
            doc.pop(key)
        # the filesystem's free space is statted at each run, and other processes write to it
        # meanwhile: what follows from it differs between the two runs, not between the engines
        doc["capacity"] = [{k: v for k, v in e.items() if k not in FREE_SPACE_FIELDS} for e in doc["capacity"]]
        doc["tables"] = dict(doc["tables"])
        doc["tables"]["replica_stats"] = sorted(doc["tables"]["replica_stats"],
                                                  key=lambda r: (r["broker_id"], r["log_dir"], r["dir_name"]))
        doc["tables"]["timelines"] = {k: sorted(v, key=lambda r: (r["broker_id"], r["log_dir"], r["base_offset"]))
                                      for k, v in doc["tables"]["timelines"].items()}
        docs[engine] = json.loads(json.dumps(doc, default=str))
    assert docs["local"] == docs["spark"]
    assert docs["local"]["counts"]["FAIL"] >= 3
