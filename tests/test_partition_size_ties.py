"""skew.partition_size names the same replica whatever the order of the stats rows: among
replicas of equal size, the lowest broker id (the engines hand the rows in different orders;
found by benchmarks/fleet_spark.py, where Spark named broker 11 and the local engine broker 1)."""

from __future__ import annotations

import pytest
import itertools

import pandas as pd

from checks.framework.config import Config
from checks.framework.base import AuditContext, CheckInput
from checks.skew.partition_size import SkewPartitionSize

pytestmark = pytest.mark.unit

MIB = 1 << 20


def _stats(order) -> pd.DataFrame:
    # topic t: partition 0 is 8x the others, its three replicas (brokers 21, 1, 11) of equal size
    rows = [{"topic": "t", "partition": 0, "broker_id": b, "size_bytes": 8 * MIB, "message_count": 800, "dir_kind": "live"}
            for b in order]
    rows += [{"topic": "t", "partition": p, "broker_id": 1, "size_bytes": MIB, "message_count": 100, "dir_kind": "live"}
             for p in (1, 2, 3)]
    return pd.DataFrame(rows)


def test_equal_replicas_name_the_lowest_broker_in_every_order():
    ctx = AuditContext(as_of_ms=0, config=Config({}, source="test"))
    check = SkewPartitionSize()
    named = set()
    for order in itertools.permutations([21, 1, 11]):
        found = check.run(CheckInput(replica_stats=_stats(order)), ctx, ctx.options(SkewPartitionSize, "t"))
        assert len(found) == 1 and found[0].partition == 0, found
        named.add((found[0].broker_id, found[0].evidence[0]["largest_replica_broker"]))
    assert named == {(1, 1)}


def test_a_larger_replica_wins_over_a_lower_broker():
    ctx = AuditContext(as_of_ms=0, config=Config({}, source="test"))
    stats = _stats([21, 1, 11])
    stats.loc[(stats.partition == 0) & (stats.broker_id == 21), "size_bytes"] = 8 * MIB + 1
    found = SkewPartitionSize().run(CheckInput(replica_stats=stats),
                                    ctx, ctx.options(SkewPartitionSize, "t"))
    assert [f.broker_id for f in found] == [21]
