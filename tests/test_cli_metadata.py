"""``kafka-audit metadata`` on the real metadata snapshots: table, JSON, exit codes.
(The real-cluster run with --history is in test_metadata_log_cluster.py.)"""

from __future__ import annotations

import pytest
import json

from auditor.cli import main
from harness.realdata import BROKER_DIRS, REAL

pytestmark = pytest.mark.recorded

METADATA_PARENT = REAL / "metadata" / "kraft-transactional"
DATA_DIR = BROKER_DIRS / "kraft-transactional" / "kafka-data"   # the broker's data log dir (directory.id)


def test_table_lists_brokers_topics_partitions_and_configs(capsys):
    assert main(["metadata", str(METADATA_PARENT), str(DATA_DIR)]) == 0
    out = capsys.readouterr().out
    assert "state from 00000000000000060500-0000000025.checkpoint" in out
    assert "at 2024-10-10T21:03:41.482Z" in out
    assert "topics (9), partitions (139):" in out
    # the replica's directory ID is mapped to the log dir through its meta.properties
    assert f"1:{DATA_DIR}" in out and "not among the given log dirs" not in out
    assert "topic docker-connect-offsets: cleanup.policy=compact" in out


def test_json_topics_with_ids_and_config_maps(capsys):
    assert main(["metadata", str(METADATA_PARENT), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tool"] == "kafka-log-auditor" and doc["notes"] == []
    topics = doc["topics"]
    assert len(topics) == 9 and sum(len(t["partitions"]) for t in topics.values()) == 139
    t = topics["_confluent-ksql-default__command_topic"]
    assert t["topic_id"] == "TvQoTq0KRHWWLKQ64d1gfw"
    assert t["configs"]["retention.ms"] == "-1"
    p0 = t["partitions"]["0"]
    assert p0["replicas"] == [1] and p0["leader_epoch"] == 38
    assert p0["directories"] == [{"broker": 1, "directory_id": "ROP8qUaSlk7r55i85yz4Cg", "log_dir": None}]
    assert doc["brokers"][0]["broker_id"] == 1 and doc["features"] == {"metadata.version": 19}


def test_no_metadata_log_exits_3_and_says_so(capsys, tmp_path):
    # the broker's data log dir does not hold the metadata log (metadata.log.dir elsewhere)
    assert main(["metadata", str(DATA_DIR)]) == 3
    err = capsys.readouterr().err
    assert "no __cluster_metadata-0 directory in" in err and str(DATA_DIR) in err
    assert main(["metadata", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
