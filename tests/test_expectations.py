"""The Great Expectations suite on a real Spark DataFrame: clean on real broker data, and every
planted violation reported with its count."""

from __future__ import annotations

import json
import time

import pytest

from auditor.engines.spark import scan_dataframes
from auditor.schema import SEGMENT_COLUMNS, SEGMENT_KEY, SEGMENT_SCHEMA, empty_row, spark_schema
from checks.framework.base import AuditContext, Severity
from checks.framework.config import Config
from auditor.engines.spark.expectations import run_expectations
from harness.realdata import LOG_DIRS
from harness.spark_session import spark  # noqa: F401

# a fresh Python importing Great Expectations: 6 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = pytest.mark.schedule_first(cpu_s=6)


def _ctx():
    return AuditContext(as_of_ms=int(time.time() * 1000), config=Config.load(None))


@pytest.mark.live
def test_real_broker_table_meets_every_expectation(spark):  # noqa: F811
    scan = scan_dataframes(spark, LOG_DIRS, "headers")
    res = run_expectations(scan.segments, _ctx())
    failed = [r for r in res.results if not r["success"]]
    assert res.success, failed
    assert len(res.results) >= 20 and res.element_count == scan.segments.count()
    assert [f.severity for f in res.findings] == [Severity.PASS]
    assert res.gx_version.startswith("1.")


def _row(**values):
    row = empty_row(SEGMENT_COLUMNS)
    row.update(broker_id=1, cluster_id="c", log_dir="/d", topic="t", partition=0, dir_kind="live", dir_name="t-0",
               base_offset=0, depth="headers", log_size_bytes=100, log_mtime_ms=1_700_000_000_000,
               first_offset=0, last_offset=9, min_timestamp_ms=1_700_000_000_000, max_timestamp_ms=1_700_000_001_000,
               batch_count=1, record_count=10, trailing_bytes=0)
    row.update(values)
    return row


@pytest.mark.live
def test_planted_violations_are_each_reported(spark):  # noqa: F811
    rows = [
        _row(base_offset=0),
        _row(base_offset=0),                                    # duplicate segment key
        _row(base_offset=100, first_offset=100, last_offset=50),  # last < base and < first
        _row(base_offset=200, first_offset=200, last_offset=209,
             min_timestamp_ms=1_700_000_009_000, max_timestamp_ms=1_700_000_001_000),  # min > max
        _row(base_offset=300, first_offset=300, last_offset=309, trailing_bytes=-4),
        _row(base_offset=400, first_offset=400, last_offset=409, dir_kind="weird"),
        _row(base_offset=500, first_offset=500, last_offset=509, topic=None),
        _row(base_offset=600, first_offset=600, last_offset=609, max_timestamp_ms=4_102_444_800_000 * 10),
    ]
    df = spark.createDataFrame([tuple(r[c.name] for c in SEGMENT_COLUMNS) for r in rows], spark_schema(SEGMENT_SCHEMA))
    res = run_expectations(df, _ctx())
    assert not res.success
    failed = {(r["expectation"], tuple(r["columns"] or [r["column"]])): r["unexpected_count"]
              for r in res.results if not r["success"]}
    pair = "expect_column_pair_values_a_to_be_greater_than_b"
    assert failed == {
        ("expect_compound_columns_to_be_unique", tuple(SEGMENT_KEY)): 2,
        (pair, ("last_offset", "base_offset")): 1,
        (pair, ("last_offset", "first_offset")): 1,
        (pair, ("max_timestamp_ms", "min_timestamp_ms")): 1,
        ("expect_column_values_to_be_between", ("trailing_bytes",)): 1,
        ("expect_column_values_to_be_in_set", ("dir_kind",)): 1,
        ("expect_column_values_to_not_be_null", ("topic",)): 1,
        ("expect_column_values_to_be_between", ("max_timestamp_ms",)): 1,
    }
    by_message = {f.message for f in res.findings}
    assert any("each segment appears once" in m and "2 of 8 rows" in m for m in by_message), by_message
    assert all(f.code == "KLA090" and f.severity in (Severity.WARN, Severity.FAIL) for f in res.findings)
    assert len(res.findings) == sum(1 for r in res.results if not r["success"])


@pytest.mark.live
@pytest.mark.parametrize("segment_bytes", [1 << 20])
def test_size_bound_follows_segment_bytes(spark, segment_bytes):  # noqa: F811
    cfg = Config({"kafka": {"segment.bytes": segment_bytes}})
    ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=cfg)
    rows = [_row(base_offset=0, log_size_bytes=segment_bytes + 2_000_000)]
    df = spark.createDataFrame([tuple(r[c.name] for c in SEGMENT_COLUMNS) for r in rows], spark_schema(SEGMENT_SCHEMA))
    res = run_expectations(df, ctx)
    bad = [r for r in res.results if not r["success"]]
    assert [(r["expectation"], r["column"], r["unexpected_count"]) for r in bad] == [
        ("expect_column_values_to_be_between", "log_size_bytes", 1)]


@pytest.mark.live
def test_schema_drift_is_one_finding_and_the_size_bound_is_the_largest_segment_bytes(spark):  # noqa: F811
    # A manifest from another version (a column missing) and topics with their own segment.bytes:
    # one row-wise bound cannot follow each topic, so it is the largest configured value.
    cfg = Config({"kafka": {"segment.bytes": 1 << 20}, "topics": {"big-*": {"kafka": {"segment.bytes": 1 << 30}}}})
    ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=cfg)
    rows = [_row(base_offset=0, topic="small", log_size_bytes=100 << 20)]
    df = spark.createDataFrame([tuple(r[c.name] for c in SEGMENT_COLUMNS) for r in rows],
                               spark_schema(SEGMENT_SCHEMA)).drop("crc_failures")
    res = run_expectations(df, ctx)
    bad = [r for r in res.results if not r["success"]]
    assert [r["expectation"] for r in bad] == ["expect_table_columns_to_match_ordered_list"], bad
    assert [f.severity for f in res.findings] == [Severity.FAIL]
    assert "the declared segment columns" in res.findings[0].message
    assert "crc_failures" in json.dumps(res.findings[0].evidence), res.findings[0].evidence  # names the column
    json.dumps([r for r in res.results])  # JSON-serialisable as promised (reports embed it)
    json.dumps([f.to_dict() for f in res.findings])


GX_IMPORT_PROBE = r"""
import json, sys, time
import pandas as pd
from auditor.schema import SEGMENT_COLUMNS, SEGMENT_SCHEMA, empty_row, to_table
from checks.framework.base import AuditContext
from checks.framework.config import Config
from auditor.engines.local.expectations import run_expectations
row = empty_row(SEGMENT_COLUMNS)
row.update(broker_id=1, cluster_id="c", log_dir="/d", topic="t", partition=0, dir_kind="live", dir_name="t-0",
           base_offset=0, depth="headers", log_size_bytes=100, log_mtime_ms=1_700_000_000_000, first_offset=0,
           last_offset=9, min_timestamp_ms=1_700_000_000_000, max_timestamp_ms=1_700_000_001_000, batch_count=1,
           record_count=10, trailing_bytes=0)
res = run_expectations(to_table([row, dict(row, base_offset=10, first_offset=10, last_offset=5)], SEGMENT_SCHEMA)
                       .to_pandas(), AuditContext(as_of_ms=int(time.time() * 1000), config=Config.load(None)))
out = {"failed": sorted(r["expectation"] + ":" + ",".join(r["columns"] or [r["column"]])
                        for r in res.results if not r["success"]),
       "loaded": {m: type(sys.modules.get(m)).__name__ for m in ("scipy.stats", "altair", "sqlalchemy", "pyspark.ml",
                                                              "pyspark.sql.connect")}}
from scipy.stats import entropy                      # the stand-ins give the real modules on first use
import altair, sqlalchemy, importlib.util
# pyspark.ml: hidden during the import only, so findable again (importing it here cost 1.3 s of CPU)
out["after"] = [round(float(entropy([1, 2], [2, 1])), 6), altair.Chart.__name__, sqlalchemy.__name__,
                importlib.util.find_spec("pyspark.ml").name,
                type(sys.modules["scipy.stats"]).__name__, type(sys.modules["altair"]).__name__]
print(json.dumps(out))
"""


@pytest.mark.recorded
def test_gx_is_imported_without_what_the_suite_does_not_use():
    """In a fresh process, as the CLI runs it: the pandas validation works and finds the planted
    fault, GX's import left scipy.stats and altair as stand-ins (not loaded) and did not import
    sqlalchemy, pyspark.ml or Spark Connect; afterwards each is the real module for whoever uses it."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", GX_IMPORT_PROBE], capture_output=True, text=True, cwd=repo,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["failed"] == ["expect_column_pair_values_a_to_be_greater_than_b:last_offset,base_offset",
                             "expect_column_pair_values_a_to_be_greater_than_b:last_offset,first_offset"], out
    assert out["loaded"] == {"scipy.stats": "_Deferred", "altair": "_Deferred", "sqlalchemy": "NoneType",
                             "pyspark.ml": "NoneType", "pyspark.sql.connect": "NoneType"}, out
    assert out["after"] == [0.231049, "Chart", "sqlalchemy", "pyspark.ml", "module", "module"], out
