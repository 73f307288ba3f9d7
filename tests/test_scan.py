"""The scanner over real broker log dirs: rows agree with the independent scan and grow with depth."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from auditor.scan import scan_log_dirs
from auditor.schema import DEPTHS, PARTITION_SCHEMA, SEGMENT_FIELDS, SEGMENT_SCHEMA, to_table
from harness.expected_txt import read_expected
from harness.realdata import BROKER_DIRS, LOG_DIRS, REAL

# scans of every real log dir: 3 s at load 2 (tests/conftest.py: long files first)
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=3)]

EXPECTED = {k: v for k, v in read_expected(REAL / "EXPECTED.txt").items() if k.startswith("broker-dirs/")}


def _utc_seconds(ms):
    if ms is None:
        return None
    return datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


@pytest.fixture(scope="module")
def deep_scan():
    return scan_log_dirs(LOG_DIRS, "deep")


def test_every_real_segment_is_scanned(deep_scan):
    seen = {str(__import__("pathlib").Path(s["log_dir"], s["dir_name"], f"{s['base_offset']:020d}.log").relative_to(REAL))
            for s in deep_scan.segments}
    assert set(EXPECTED) <= seen
    assert len(EXPECTED) == 7


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_deep_segment_row_matches_independent_scan(deep_scan, rel):
    exp = EXPECTED[rel]
    path = REAL / rel
    row = next(s for s in deep_scan.segments
               if s["log_dir"] == str(path.parent.parent) and s["dir_name"] == path.parent.name
               and s["base_offset"] == int(path.stem))
    assert row["log_size_bytes"] == exp["size"]
    assert row["batch_count"] == exp["batches"]
    assert row["magics"] == sorted(exp["magic"])
    assert row["codecs"] == sorted(exp["codec"])
    assert row["transactional_batches"] == exp["txn"]
    assert row["control_batches"] == exp["ctrl"]
    assert (row["first_offset"], row["last_offset"]) == exp["offs"]
    assert (_utc_seconds(row["min_timestamp_ms"]), _utc_seconds(row["max_timestamp_ms"])) == exp["ts"]
    assert row["crc_failures"] == exp["crc_bad"]
    assert row["trailing_bytes"] == exp["trail"]
    idx = exp["indexes"]
    if "index" in idx:
        assert row["index_entries"] == idx["index"][0]
    if "timeindex" in idx:
        assert row["timeindex_entries"] == idx["timeindex"][0]


def test_partition_rows_carry_checkpoints_and_metadata(deep_scan):
    parts = {(p["log_dir"].split("/")[-2], p["dir_name"]): p for p in deep_scan.partitions}
    compacted = parts[("kafka-2.7.1-compacted", "__consumer_offsets-39")]
    assert compacted["broker_id"] == 0 and compacted["cluster_id"] == "d0053poFTbGwSWThjV1DEg"
    assert compacted["cleaner_offset"] == 18
    assert compacted["recovery_point"] == 18
    assert compacted["segment_count"] == 2
    assert compacted["log_start_offset_source"] == "first-segment" and compacted["log_start_offset"] == 0
    assert compacted["log_end_offset"] == 20
    kraft = parts[("kraft-transactional", "_confluent-ksql-default__command_topic-0")]
    assert kraft["broker_id"] == 1
    assert kraft["topic_id"] is not None and len(kraft["topic_id"]) >= 22
    assert kraft["leader_epochs"] and kraft["latest_leader_epoch"] == kraft["leader_epochs"][-1]["epoch"]
    txn_seg = next(s for s in deep_scan.segments if s["dir_name"] == "_confluent-ksql-default__command_topic-0")
    assert txn_seg["commit_markers"] == 1 and txn_seg["abort_markers"] == 0


def test_missing_active_indexes_are_noted_not_fatal(deep_scan):
    seg = next(s for s in deep_scan.segments if s["dir_name"] == "_schemas-0")
    assert seg["index_size_bytes"] is None
    assert any("no .index beside it" in n for n in seg["notes"])
    assert seg["batch_count"] == 38


@pytest.mark.parametrize("depth", DEPTHS)
def test_every_depth_fills_what_it_promises_and_tables_convert(depth):
    result = scan_log_dirs(LOG_DIRS, depth)
    seg_table = to_table(result.segments, SEGMENT_SCHEMA)
    to_table(result.partitions, PARTITION_SCHEMA)
    assert seg_table.num_rows == len(result.segments) >= 7
    big = next(s for s in result.segments if s["dir_name"] == "__consumer_offsets-28")
    assert big["log_size_bytes"] == 1066451
    if depth == "stat":
        assert big["last_offset"] is None and big["batch_count"] is None
    else:
        # the broker's own view at 'index' depth equals the exact answer for this closed segment
        assert big["first_offset"] == 0 and big["last_offset"] == 8201
        assert _utc_seconds(big["max_timestamp_ms"]) == "2018-08-15T05:57:03"
        assert big["index_entries"] == 254 and big["timeindex_entries"] == 258
    if depth in ("headers", "deep"):
        assert big["batch_count"] == 8202
    assert (big["min_timestamp_ms"] is not None) == (depth == "deep")


def test_cli_scan_json_and_exit_code(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "auditor.cli", "scan", "--depth", "headers", "--json", *map(str, LOG_DIRS)],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {s["dir_name"] for s in doc["segments"]} >= {"__consumer_offsets-28", "_schemas-0", "debug_topic-0"}
    seg = doc["segments"][0]
    assert set(SEGMENT_FIELDS) <= set(seg)
    assert seg["log_mtime_utc"].endswith("Z")


def test_cli_rejects_missing_path_and_non_log_dir(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(tmp_path / "nope")],
                             capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    (tmp_path / "notes.txt").write_text("hello")
    not_kafka = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(tmp_path)],
                               capture_output=True, text=True, check=False)
    assert not_kafka.returncode == 3
    assert "not a Kafka log dir" in not_kafka.stdout


def test_scan_writes_parquet_outside_log_dir(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "auditor.cli", "scan", "--parquet", str(tmp_path / "out"), str(BROKER_DIRS / "kafka-2018-v2" / "kafka-logs")],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "segments.parquet")
    assert table.schema.equals(SEGMENT_SCHEMA)
    assert table.num_rows == 2
