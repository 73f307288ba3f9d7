"""The KRaft metadata log read offline (auditor/cluster/metadata_log.py), against Kafka's own
decoder (``DumpLogSegments --cluster-metadata-decoder``) on real files, and bad input.

The real 3-broker cluster scenario (reassignment, log-dir move, configs, delete + re-create, a
snapshot) is in test_metadata_log_cluster.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from auditor.cluster import metadata_log as ml
from harness.metadata_dump import assert_equal_to_dump
from harness.metadata_records import rewrite_record
from harness.realdata import REAL

pytestmark = pytest.mark.recorded

REAL_METADATA = REAL / "metadata" / "kraft-transactional"
REAL_SNAPSHOTS = sorted((REAL_METADATA / ml.METADATA_DIR_NAME).glob("*.checkpoint"))


def test_real_snapshots_equal_kafkas_decoder(dump_log_segments):
    assert len(REAL_SNAPSHOTS) == 3
    total = assert_equal_to_dump(REAL_SNAPSHOTS, dump_log_segments)
    assert total == 165 + 165 + 171


def test_real_cluster_state_from_the_newest_snapshot():
    log = ml.read_metadata_log([REAL_METADATA])
    assert log.notes == []
    assert log.base_snapshot == REAL_SNAPSHOTS[-1] and log.base_offset == 60500
    st = log.state
    assert len(st.topics) == 9 and st.partition_count == 139
    assert st.last_offset == 60499
    assert set(st.brokers) == {1} and st.brokers[1].log_dirs == ["ROP8qUaSlk7r55i85yz4Cg"]
    assert st.features == {"metadata.version": 19}
    t = st.topic_named("_confluent-ksql-default__command_topic")
    assert t.topic_id == "TvQoTq0KRHWWLKQ64d1gfw"
    p = t.partitions[0]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.directories) == ([1], [1], 1, 38, ["ROP8qUaSlk7r55i85yz4Cg"])
    assert st.topic_configs("docker-connect-offsets") == {"cleanup.policy": "compact"}
    # given the log dir above it (as a user would), or the metadata dir itself: the same
    assert ml.read_metadata_log([REAL_METADATA / ml.METADATA_DIR_NAME]).state == st


def test_no_metadata_log_is_an_error_naming_the_dirs(tmp_path):
    with pytest.raises(ml.MetadataLogNotFound) as e:
        ml.read_metadata_log([tmp_path])
    assert str(tmp_path) in str(e.value) and "__cluster_metadata-0" in str(e.value)


# ------------------------------------------------------------------ bad input -----------------

def _copy(tmp_path) -> Path:
    d = tmp_path / "logdir" / ml.METADATA_DIR_NAME
    shutil.copytree(REAL_METADATA / ml.METADATA_DIR_NAME, d)
    return d


def test_truncated_newest_snapshot_falls_back_to_the_older_one(tmp_path):
    d = _copy(tmp_path)
    newest = d / REAL_SNAPSHOTS[-1].name
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    log = ml.read_metadata_log([d.parent])
    assert log.base_snapshot == d / REAL_SNAPSHOTS[1].name
    assert log.state.partition_count == 134
    msgs = [str(n) for n in log.notes]
    assert any(str(newest) in m and "snapshot incomplete" in m and "SnapshotFooter" in m for m in msgs), msgs
    assert any(str(newest) in m and "reading stopped (partial-tail)" in m for m in msgs), msgs


def test_unknown_api_key_newer_version_and_short_body_are_notes_and_reading_goes_on(tmp_path):
    d = _copy(tmp_path)
    newest = d / REAL_SNAPSHOTS[-1].name
    types = {e.offset: e.type for e in ml.read_entries(newest, [])}
    topic = min(o for o, t in types.items() if t == "TopicRecord")
    parts = sorted(o for o, t in types.items() if t == "PartitionRecord")
    # frame: frameVersion apiKey version (one byte each here), then the body
    rewrite_record(newest, topic, lambda v: v[:1] + bytes([99]) + v[2:])        # api key 99
    rewrite_record(newest, parts[0], lambda v: v[:2] + bytes([9]) + v[3:])      # PartitionRecord v9
    # PartitionRecord body: partitionId(4) topicId(16) then the Replicas length: 126 elements
    rewrite_record(newest, parts[1], lambda v: v[:23] + b"\x7f" + v[24:])
    notes: list[ml.Note] = []
    entries = list(ml.read_entries(newest, notes))
    assert len(entries) == 171 - 3
    msgs = [str(n) for n in notes]
    assert len(msgs) == 3, msgs
    assert f"(offset {topic})" in msgs[0] and "unknown metadata record type: api key 99" in msgs[0]
    assert f"(offset {parts[0]})" in msgs[1] and "PartitionRecord version 9 is newer than the Kafka 4.2.1 specs (0-2)" in msgs[1]
    assert f"(offset {parts[1]})" in msgs[2] and "PartitionRecord.Replicas = 126" in msgs[2] and "byte(s) left" in msgs[2]
    # every note names the file and the batch position
    assert all(str(newest) in m and ": byte " in m for m in msgs)
    log = ml.read_metadata_log([d.parent])
    assert log.base_snapshot == newest                     # a complete snapshot is still used
    assert len(log.state.topics) == 8                      # the TopicRecord is lost, so are its partitions (noted)
    orphans = [n for n in log.notes if "PartitionRecord for unknown topic ID" in n.message]
    assert log.state.partition_count + len(orphans) == 139 - 2


def test_metadata_transactions_aborted_are_not_applied():
    """KIP-868 metadata transactions: records between Begin and End apply at End; Abort drops them;
    one still open at the end of the log is not applied (note)."""
    def entry(offset, type_, **data):
        return ml.MetadataEntry("log", 0, offset, 1000 + offset, False, type_, 0, data)
    r = ml.Replayer(history=[])
    r.apply(entry(0, "BeginTransactionRecord", name="t1"))
    r.apply(entry(1, "TopicRecord", name="kept", topicId="A" * 22))
    assert r.state.topics == {}                                   # not before the end
    r.apply(entry(2, "EndTransactionRecord"))
    r.apply(entry(3, "BeginTransactionRecord", name="t2"))
    r.apply(entry(4, "TopicRecord", name="dropped", topicId="B" * 22))
    r.apply(entry(5, "AbortTransactionRecord", reason="test"))
    r.apply(entry(6, "BeginTransactionRecord", name="t3"))
    r.apply(entry(7, "TopicRecord", name="open", topicId="C" * 22))
    r.finish()
    assert [t.name for t in r.state.topics.values()] == ["kept"]
    assert [c.offset for c in r.history] == [1]
    assert len(r.notes) == 1 and "begun at offset 6 never ended" in r.notes[0].message
