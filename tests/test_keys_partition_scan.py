"""auditor.keys.partition_keys on real broker data (fixtures/real) and on damaged copies of it."""

from __future__ import annotations

import pytest
import shutil
from pathlib import Path

from auditor.formats.log_reader import LogReader
from auditor.keys.partition_keys import scan_partition_keys
from auditor.keys.sketches import key_id
from harness.realdata import BROKER_DIRS

pytestmark = pytest.mark.recorded

REAL = BROKER_DIRS / "kafka-2018-v2" / "kafka-logs"  # ../shared beside the repo (tests/harness/realdata.py)
OFFSETS = REAL / "__consumer_offsets-28"   # 8,202 one-record batches, 1,066,451 bytes (EXPECTED.txt)
DEBUG = REAL / "debug_topic-0"             # 40 records in 3 batches, 883 bytes


def exact_keys(path: Path) -> dict[int, int]:
    """Every record's key, counted by the plain reader: the truth beside the sketches."""
    counts: dict[int, int] = {}
    with LogReader(path / "00000000000000000000.log") as reader:
        for batch in reader.batches():
            for record in reader.records(batch, keys=True):
                ident = key_id(record.key)
                counts[ident] = counts.get(ident, 0) + 1
    return counts


def test_all_records_of_a_real_partition():
    found = scan_partition_keys(OFFSETS)
    assert (found.mode, found.log_bytes, found.scanned_bytes) == ("all", 1066451, 1066451)
    assert (found.first_offset, found.last_offset, found.stats.records) == (0, 8201, 8202)
    truth = exact_keys(OFFSETS)
    assert found.stats.hll.estimate() == len(truth)
    top_id, top_count, _ = found.stats.heavy.top(1)[0]
    assert truth[top_id] == top_count == max(truth.values())
    assert found.notes == []


def test_sampled_mode_reads_the_newest_bytes_only():
    found = scan_partition_keys(OFFSETS, sample_bytes=64 * 1024)
    assert found.mode == "sampled" and found.sample_bytes == 64 * 1024
    assert 64 * 1024 <= found.scanned_bytes < 64 * 1024 + 1000  # from the batch holding the cut (~130 bytes each)
    assert found.last_offset == 8201 and found.first_offset > 7000
    assert found.stats.records == found.last_offset - found.first_offset + 1  # one record per batch
    doc = found.to_json()
    assert doc["scanned_bytes"] == found.scanned_bytes and doc["log_bytes"] == 1066451


def test_a_cut_tail_and_a_bad_key_length_are_notes(tmp_path):
    part = tmp_path / "debug_topic-0"
    shutil.copytree(DEBUG, part)
    log = part / "00000000000000000000.log"
    log.chmod(0o644)
    data = bytearray(log.read_bytes())
    with LogReader(log) as reader:
        batches = list(reader.batches())
    # the first batch's first record: its keyLength varint (after length, attributes, two deltas)
    # set to a huge value; the last batch cut in the middle
    first_record = 61
    key_length_at = first_record + 1 + 1 + 1 + 1
    data[key_length_at] = 0x7E  # zigzag 63: far past the record's end
    cut = batches[-1].position + 30
    log.write_bytes(bytes(data[:cut]))
    found = scan_partition_keys(part)
    assert found.unreadable_batches == 1
    assert found.stats.records == 40 - batches[0].record_count - batches[-1].record_count
    text = " ".join(found.notes)
    assert f"byte {batches[0].position}" in text and "records unreadable" in text
    assert "partial-tail" in text and f"byte {batches[-1].position}" in text
