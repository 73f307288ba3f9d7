"""The cluster-scope checks read only ``CLUSTER_PARTITION_COLUMNS`` of the partition rows and
``CLUSTER_STATS_COLUMNS`` of ``replica_stats`` (the Spark driver collects just those, one row per
partition dir: issue 19): every YAML case of every cluster check (tests/check_cases/) gives the
same findings, evidence included, from the whole rows as from those columns alone."""

from __future__ import annotations

import pandas as pd
import pytest

from auditor.check_runner import CLUSTER_PARTITION_COLUMNS, CLUSTER_STATS_COLUMNS, _checks, _run_checks, as_frame, run_cluster_checks
from auditor.engines.local.tables import AGGREGATE_SCHEMAS
from auditor.schema import PARTITION_COLUMNS, PARTITION_SCHEMA
from checks import REGISTRY
from checks.framework.base import CheckInput
from harness.check_cases import CASES, case_context, complete_rows, time_fields

pytestmark = pytest.mark.unit

CLUSTER_CASES = [p for p in CASES if any(REGISTRY[n].scope == "cluster" for n in p.values[1].get("checks", [p.values[0]]))]


def test_the_columns_exist():
    assert set(CLUSTER_PARTITION_COLUMNS) <= set(PARTITION_SCHEMA.names)
    assert set(CLUSTER_STATS_COLUMNS) <= set(AGGREGATE_SCHEMAS["replica_stats"].names)
    assert len(CLUSTER_CASES) >= 20, len(CLUSTER_CASES)


@pytest.mark.parametrize("check_name,case", CLUSTER_CASES)
def test_cluster_checks_need_no_other_column(check_name, case):
    names = case.get("checks", [check_name])
    ctx = case_context(check_name, case)
    stats = {k: pd.DataFrame([time_fields(r) for r in v]) for k, v in (case.get("stats") or {}).items()}
    partitions = as_frame(complete_rows(case.get("partitions"), PARTITION_COLUMNS), PARTITION_SCHEMA)
    whole = CheckInput(partitions=partitions, replica_stats=stats.get("replica_stats"),
                       topic_stats=stats.get("topic_stats"), broker_stats=stats.get("broker_stats"),
                       log_dir_stats=stats.get("log_dir_stats"))
    reference = [f.to_dict() for f in _run_checks(_checks("cluster", names), whole, ctx)]
    projected = [f.to_dict() for f in run_cluster_checks(stats, partitions, ctx, names)]
    assert projected == reference
