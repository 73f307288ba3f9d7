"""Batch semantics equal the per-partition reference, for every partition-scope check.

``run_local`` hands the checks one :class:`checks.framework.batch.PartitionBatch` (each check's
``run_batch``: a vectorized prefilter, then ``run`` on the partitions it names);
``run_local_reference`` is today's semantics (one ``run`` per check per topic-partition). The
findings, PASS summaries included, must be equal item for item, check by check, on: every YAML
case of tests/check_cases/ (all partition checks, not only the case's own), the bundled demo sample
(its config, audit time and replay target), the real broker dirs of the fixtures, and SYNTHETIC
tables (benchmarks/synthetic_rows.py's rows, with anomalies planted at random under per-topic
configs, so every prefilter has partitions to find and to drop: tests/test_batch_checks_synthetic.py).
The Spark engine's bucketed batches are compared with the driver's in tests/test_local_engine.py.
"""

from __future__ import annotations

import pytest

from auditor.check_runner import as_frame
from auditor.cli.demo import unpack_demo_sample
from auditor.scan import scan_log_dirs
from auditor.schema import PARTITION_COLUMNS, PARTITION_SCHEMA, SEGMENT_COLUMNS, SEGMENT_SCHEMA
from checks.framework.base import AuditContext
from checks.framework.batch import PartitionBatch
from checks.framework.config import Config
from harness.realdata import LOG_DIRS
from harness.batch_equality import (BULK_JUDGED_CHECKS, COLUMNAR_CHECKS, JUDGED_CHECKS, PARTITION_CHECKS,
                                    assert_batch_equals_reference, assert_columnar_equals_reference,
                                    assert_judged_equals_reference)
from harness.check_cases import CASES, case_context, complete_rows

# YAML cases, the demo sample and the real dirs, both semantics: 7 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=7)]


def test_columnar_checks():
    assert COLUMNAR_CHECKS == ["mtime.reset", "retention.future_timestamp", "retention.overdue", "timestamps.bounds"]
    assert BULK_JUDGED_CHECKS == ["integrity.index_mismatch", "integrity.offset_gap"]


@pytest.mark.parametrize("check_name,case", CASES)
def test_yaml_case_columnar_equals_reference(check_name, case):
    ctx = case_context(check_name, case)
    batch = PartitionBatch(as_frame(complete_rows(case.get("segments"), SEGMENT_COLUMNS), SEGMENT_SCHEMA),
                           as_frame(complete_rows(case.get("partitions"), PARTITION_COLUMNS), PARTITION_SCHEMA))
    assert_columnar_equals_reference(batch, ctx)


def test_thirteen_partition_checks():
    assert len(PARTITION_CHECKS) == 13, PARTITION_CHECKS


@pytest.mark.parametrize("check_name,case", CASES)
def test_yaml_case_batch_equals_reference(check_name, case):
    ctx = case_context(check_name, case)
    assert_batch_equals_reference(complete_rows(case.get("segments"), SEGMENT_COLUMNS),
                                  complete_rows(case.get("partitions"), PARTITION_COLUMNS), ctx)


def test_demo_sample_batch_equals_reference(tmp_path):
    log_dirs, meta = unpack_demo_sample(tmp_path)
    ctx = AuditContext(as_of_ms=meta["made_at_ms"], config=Config.load(str(log_dirs[0].parent / "demo-audit.yaml")),
                       replay_at_ms=meta["replay_at_ms"], replay_topics=tuple(meta["replay_topics"]))
    scan = scan_log_dirs(log_dirs, "deep")
    found = assert_batch_equals_reference(scan.segments, scan.partitions, ctx)
    assert any(f["severity"] != "PASS" for f in found)  # the sample's planted anomalies are found
    assert_columnar_equals_reference(PartitionBatch(as_frame(scan.segments, SEGMENT_SCHEMA),
                                                    as_frame(scan.partitions, PARTITION_SCHEMA)), ctx)


def test_real_broker_dirs_batch_equals_reference():
    scan = scan_log_dirs(LOG_DIRS, "deep")
    ctx = AuditContext(as_of_ms=max(s["log_mtime_ms"] or 0 for s in scan.segments) + 40 * 86_400_000,
                       config=Config(None))
    assert_batch_equals_reference(scan.segments, scan.partitions, ctx)
    assert_columnar_equals_reference(PartitionBatch(as_frame(scan.segments, SEGMENT_SCHEMA),
                                                    as_frame(scan.partitions, PARTITION_SCHEMA)), ctx)


def test_four_checks_judge_flagged_partitions_from_the_batch():
    assert JUDGED_CHECKS == ["integrity.index_mismatch", "integrity.offset_gap", "mtime.reset", "timestamps.bounds"]


@pytest.mark.parametrize("check_name,case", [c for c in CASES if c.values[0] in JUDGED_CHECKS])
def test_yaml_case_judged_from_the_batch(check_name, case):
    ctx = case_context(check_name, case)
    batch = PartitionBatch(as_frame(complete_rows(case.get("segments"), SEGMENT_COLUMNS), SEGMENT_SCHEMA),
                           as_frame(complete_rows(case.get("partitions"), PARTITION_COLUMNS), PARTITION_SCHEMA))
    assert_judged_equals_reference(batch, ctx)
