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


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """The broker's two log dirs (data, metadata) collected, as on the broker (absolute paths)."""
    out = tmp_path_factory.mktemp("manifests") / "b1"
    assert main(["collect", "--out", str(out), str(DATA_DIR.resolve()), str(METADATA_PARENT.resolve())]) == 0
    return out


@pytest.mark.parametrize("history", [False, True])
def test_from_a_manifest_equals_the_log_dirs(manifest, capsys, history):
    """What collect carried is the cluster the log dirs describe: the same document, table and history."""
    flags = ["--history"] if history else []
    capsys.readouterr()
    outs = {}
    for where, argv in (("disk", [str(DATA_DIR.resolve()), str(METADATA_PARENT.resolve())]),
                        ("manifest", ["--manifest", str(manifest.parent)])):
        assert main(["metadata", *argv, *flags, "--json"]) == 0
        outs[where] = json.loads(capsys.readouterr().out)
        assert main(["metadata", *argv, *flags]) == 0
        outs[where + " table"] = capsys.readouterr().out
    assert outs["manifest"] == outs["disk"]
    assert outs["manifest table"] == outs["disk table"]
    assert len(outs["manifest"]["topics"]) == 9
    assert outs["manifest"]["topics"]["__consumer_offsets"]["partitions"]["0"]["directories"][0]["log_dir"] == \
        str(DATA_DIR.resolve())


def test_manifests_without_a_metadata_log_exit_3_and_say_so(tmp_path, capsys):
    assert main(["collect", "--out", str(tmp_path / "m" / "b1"), str(DATA_DIR)]) == 0
    capsys.readouterr()
    assert main(["metadata", "--manifest", str(tmp_path / "m")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("kafka-audit: error: no metadata log in the manifests under") and len(err.splitlines()) == 1
    assert main(["metadata", "--manifest", str(tmp_path / "m"), str(DATA_DIR)]) == 2
    assert "give exactly one input" in capsys.readouterr().err
