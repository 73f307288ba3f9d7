"""The key statistics part of a manifest (collect --keys): written, read back equal, optional."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.keys.manifest_part import KEYS_FILE, read_keys_parts
from auditor.keys.partition_keys import scan_partition_keys
from auditor.manifest import find_manifests
from harness.realdata import BROKER_DIRS

# collect and audit runs: 3 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=3)]


def read_key_stats(paths):
    return read_keys_parts(find_manifests(paths))

ROOT = Path(__file__).resolve().parents[1]
REAL = BROKER_DIRS / "kafka-2018-v2" / "kafka-logs"  # ../shared beside the repo (tests/harness/realdata.py)


def collect(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "auditor.cli", "collect", "--out", str(out), *extra, str(REAL)],
                          capture_output=True, text=True, env=env, timeout=600)


def test_collect_keys_reads_back_equal_to_a_direct_scan(tmp_path):
    done = collect(tmp_path / "m", "--keys")
    assert done.returncode == 0, done.stderr
    assert "key statistics: 2 partition dirs (all records)" in done.stderr
    pairs, notes = read_key_stats([tmp_path / "m"])
    assert notes == []
    by_dir = {location["dir_name"]: found for location, found in pairs}
    assert sorted(by_dir) == ["__consumer_offsets-28", "debug_topic-0"]
    assert {location["dir_kind"] for location, _ in pairs} == {"live"}
    for name, found in by_dir.items():
        direct = scan_partition_keys(REAL / name)
        assert found.stats.to_dict() == direct.stats.to_dict()
        assert (found.scanned_bytes, found.last_offset) == (direct.scanned_bytes, direct.last_offset)
    assert b"debug" not in gzip.decompress((tmp_path / "m" / KEYS_FILE).read_bytes()).replace(b"debug_topic", b"")


def test_manifests_without_the_part_still_read_and_a_bad_part_is_a_note(tmp_path):
    done = collect(tmp_path / "m")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "m" / KEYS_FILE).exists()
    assert read_key_stats([tmp_path / "m"]) == ([], [])
    (tmp_path / "m" / KEYS_FILE).write_bytes(gzip.compress(b'{"format": "something else"}\n'))
    pairs, notes = read_key_stats([tmp_path / "m"])
    assert pairs == [] and len(notes) == 1 and KEYS_FILE in notes[0] and "not used" in notes[0]


def test_sampled_collect_says_so(tmp_path):
    done = collect(tmp_path / "m", "--keys-sample-mib", "0.01")
    assert done.returncode == 0, done.stderr
    assert "the newest 10,485 bytes of each partition" in done.stderr
    pairs, _ = read_key_stats([tmp_path / "m"])
    assert {found.mode for _, found in pairs} == {"sampled"}
