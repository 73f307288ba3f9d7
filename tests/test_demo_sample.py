"""The bundled demo sample (auditor/samples/demo-cluster.tar.gz, written by real Kafka 4.2 brokers
with scripts/make_demo_sample.py) holds what the README's demo section lists, and the commands
`kafka-audit demo` prints after its audit read it: read offline, no broker, no Spark."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

# recorded: real broker files read offline, CLI subprocesses without Spark
pytestmark = pytest.mark.recorded

from auditor.cli.demo import next_commands, remote_storage_of, unpack_demo_sample

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return unpack_demo_sample(tmp_path_factory.mktemp("demo"))


def kafka_audit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_the_sample_holds_groups_a_tiered_topic_and_keyed_topics(sample):
    from auditor.cluster.consumer_groups import commit_rows, read_groups
    from auditor.scan import scan_log_dirs
    log_dirs, meta = sample
    commits = {(c["group"], c["topic"], c["partition"]): c["committed_offset"] for c in commit_rows(read_groups(log_dirs))}
    legacy = next(g for g, _t, _p in commits if g.startswith("legacy-etl"))
    assert commits[("billing", "orders", 0)] == 200 and commits[("audit-archiver", "audit-log", 0)] == 15
    assert commits[(legacy, "old-events", 0)] == 20
    scan = scan_log_dirs(log_dirs, "headers")
    topics = {(r["topic"], r["partition"]) for r in scan.partitions if r.get("dir_kind") == "live"}
    assert ("old-events", 0) not in topics  # deleted: only the group's commit is left of it
    assert {p for t, p in topics if t == "customers"} == set(range(6))  # 3 -> 6 by kafka-topics --alter
    remote = remote_storage_of(log_dirs, meta)
    assert remote is not None and len(list(remote.rglob("*.log"))) >= 5  # LocalTieredStorage's segments
    size = sum(f.stat().st_size for d in [log_dirs[0].parent] for f in d.rglob("*") if f.is_file())
    assert size < 8 << 20, size  # a few MiB unpacked


def test_replay_check_prints_no_none_and_explains_minus_one(sample):
    """orders-1 is empty: the oldest-record column prints '-', and the -1 verdict says what the
    clients that see it do (null from offsetsForTimes, the tool's reset to the log end)."""
    log_dirs, meta = sample
    at = meta["replay_at_ms"]
    proc = kafka_audit("replay-check", "--topic", "orders", "--at", at, "--api", "modern",
                       *[a for d in log_dirs for a in ("--log-dir", d)])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "None" not in proc.stdout, proc.stdout
    (row,) = [line for line in proc.stdout.splitlines() if line.startswith("orders-1 ")]
    assert row.split()[1:3] == ["FAIL", "-"], row
    assert "offsetsForTimes returns null" in row and "NullPointerException" in row, row
    assert "resets it to the log end offset" in row, row
    doc = json.loads(kafka_audit("replay-check", "--topic", "orders", "--at", at, "--api", "modern", "--json",
                                 *[a for d in log_dirs for a in ("--log-dir", d)]).stdout)
    (empty,) = [p for p in doc["partitions"] if p["partition"] == 1]
    assert empty["fix"].startswith("Test each offsetsForTimes entry for null before calling .offset()"), empty["fix"]


def test_next_commands_name_the_sample(sample):
    """What the demo prints to run next: replay-check of its replay topics (with the tiered
    topic's remote files), replay-check --group, groups; every log dir in each, quoted for a shell."""
    log_dirs, meta = sample
    commands = next_commands(log_dirs, meta, "kafka-audit")
    assert [shlex.split(c)[1] for _what, c in commands] == ["replay-check", "replay-check", "groups"]
    for _what, c in commands:
        args = shlex.split(c)
        assert all(str(d) in args for d in log_dirs), c
    assert "--remote-storage-dir" in commands[0][1] and f"--group {meta['replay_group']}" in commands[1][1]


def test_the_keyed_topic_shows_a_hot_key_null_keys_and_split_keys(sample):
    """customers, through the key statistics (auditor.keys): murmur2 (the Java partitioner) at 6
    partitions explains most records and murmur2 at 3 the rest (kafka-topics --alter 3 -> 6), keys
    split over two partitions, a hot key (cust-vip, 600 records) and null keys as skew causes."""
    from auditor.keys.attribution import attribute_topic, checked_keys, skew_causes, split_keys
    from auditor.keys.partition_keys import scan_partition_keys
    log_dirs, _meta = sample
    stats = {int(d.name.rsplit("-", 1)[1]): scan_partition_keys(d).stats
             for log_dir in log_dirs for d in log_dir.glob("customers-*")}
    assert sorted(stats) == list(range(6))
    verdict = attribute_topic("customers", stats, 6)
    assert verdict["null_key_records"] == 300 and verdict["partitioner"] is None, verdict["verdict"]
    two = verdict["two_explanations"]
    assert (two["first"]["family"], two["first"]["partition_count"]) == ("murmur2", 6)
    assert (two["second"]["family"], two["second"]["partition_count"]) == ("murmur2", 3) and two["share"] == 1.0
    split = split_keys(stats, {p: checked_keys(s) for p, s in stats.items()}, 6)
    assert split["split_keys_found"] > 50, split
    causes = {c["cause"] for c in skew_causes(stats, verdict)}
    assert {"hot keys", "null keys"} <= causes, causes
    hot = next(c for c in skew_causes(stats, verdict) if c["cause"] == "hot keys")
    assert hot["keys"][0]["records_min"] == 600  # cust-vip: 300 records before the change, 300 after
