"""KLA001's largest replica per partition made in column operations over every topic at once
(``checks.skew.partition_size.largest_replicas_by_topic``) equals its reference walk over each
topic's rows (``_largest_replicas`` under ``groupby("topic")``): the same partitions, sizes,
message counts and brokers, and the same findings as JSON text, on every YAML case with
per-partition-dir statistics, on random tables full of ties, unknown brokers and unknown sizes,
and on the replica statistics of the demo sample, the real broker dirs and the SYNTHETIC tables
(the on-fire ones too)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from auditor.cli.demo import unpack_demo_sample
from auditor.engines.local.tables import aggregates
from auditor.scan import scan_log_dirs
from checks.framework.base import AuditContext
from checks.framework.config import Config
from checks.skew.partition_size import SkewPartitionSize, _largest_replicas, largest_replicas_by_topic
from harness.check_cases import CASES, case_context, time_fields
from harness.realdata import LOG_DIRS
from harness.synthetic_tables import on_fire_tables, synthetic_tables

pytestmark = pytest.mark.recorded  # the real broker dirs (harness.realdata)

STATS_CASES = [c for c in CASES if (c.values[1].get("stats") or {}).get("replica_stats")]


def reference_by_topic(live) -> dict:
    return {topic: _largest_replicas(rows) for topic, rows in live.groupby("topic", sort=True)}


def assert_equal_to_reference(stats: pd.DataFrame, ctx: AuditContext) -> int:
    """The dicts equal (topics in order, partitions as sets of items) and KLA001's findings of
    both equal as JSON text; returns the partitions compared."""
    live = stats[stats["dir_kind"] == "live"]
    got, ref = largest_replicas_by_topic(live), reference_by_topic(live)
    assert list(got) == list(ref)
    for topic in ref:
        assert got[topic] == ref[topic], topic
    check = SkewPartitionSize()
    texts = []
    for per_topic in (got, ref):
        found = [check._judge_topic(t, pp, ctx.options(check, t)) for t, pp in per_topic.items()]
        texts.append(json.dumps([f.to_dict() for f in found if f is not None], sort_keys=True, default=str))
    assert texts[0] == texts[1]
    return sum(len(v) for v in ref.values())


@pytest.mark.parametrize("check_name,case", STATS_CASES)
def test_yaml_cases(check_name, case):
    stats = pd.DataFrame([time_fields(r) for r in case["stats"]["replica_stats"]])
    for column in ("broker_id", "size_bytes", "message_count", "dir_kind", "topic", "partition"):
        if column not in stats.columns:
            stats[column] = "live" if column == "dir_kind" else None
    assert_equal_to_reference(stats, case_context(check_name, case))


@pytest.mark.parametrize("seed", range(6))
def test_random_ties_unknown_brokers_and_sizes(seed):
    """Replicas of equal size on several brokers, unknown brokers and sizes, rows in any order."""
    rng = np.random.default_rng(seed)
    n = 400
    stats = pd.DataFrame({
        "topic": rng.choice(["a", "b", "c", "__internal"], n),
        "partition": rng.integers(0, 8, n),
        "broker_id": np.where(rng.random(n) < 0.15, np.nan, rng.integers(1, 5, n)),
        "size_bytes": np.where(rng.random(n) < 0.1, np.nan, rng.choice([0, 1 << 20, 2 << 20, 40 << 20], n)),
        "message_count": np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 5, n) * 1000),
        "dir_kind": rng.choice(["live", "live", "live", "deleted"], n),
        "log_dir": rng.choice(["/d0", "/d1"], n),
    })
    ctx = AuditContext(as_of_ms=0, config=Config(None))
    assert assert_equal_to_reference(stats, ctx) >= 24


def _stats(segments, partitions) -> pd.DataFrame:
    return aggregates(segments, partitions)["replica_stats"]


def test_demo_sample_and_real_broker_dirs(tmp_path):
    log_dirs, meta = unpack_demo_sample(tmp_path)
    scan = scan_log_dirs(log_dirs, "headers")
    ctx = AuditContext(as_of_ms=meta["made_at_ms"], config=Config.load(str(log_dirs[0].parent / "demo-audit.yaml")))
    assert assert_equal_to_reference(_stats(scan.segments, scan.partitions), ctx) > 0
    scan = scan_log_dirs(LOG_DIRS, "headers")
    assert assert_equal_to_reference(_stats(scan.segments, scan.partitions), AuditContext(as_of_ms=0, config=Config(None))) > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_and_on_fire_tables(seed):
    for make in (synthetic_tables, on_fire_tables):
        seg, part, ctx = make(seed)
        assert assert_equal_to_reference(_stats(seg, part), ctx) >= 30
