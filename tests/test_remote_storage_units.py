"""Units of auditor/cluster/remote_storage.py that need no broker: Kafka's murmur2 and the
remote log metadata partitioner, and the folding of events into the latest state per segment.

The vectors were computed by Kafka 4.2.1 itself (jshell on the kafka-clients/kafka-storage jars:
``Utils.murmur2(s.getBytes())`` and ``new RemoteLogMetadataTopicPartitioner(n).metadataPartition(
new TopicIdPartition(Uuid.fromString(id), new TopicPartition("t", p)))``).
"""

from __future__ import annotations

import pytest

from auditor.cluster import remote_lookup as rl
from auditor.cluster import remote_storage as rs
from auditor.formats import remote_log_metadata as rlm

pytestmark = pytest.mark.unit

MURMUR2 = [
    ('21', -973932308),
    ('foobar', -790332482),
    ('a-little-bit-long-string', -985981536),
    ('lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971),
    ('', 275646681),
]

PARTITIONER = [
    ('ghfu-HQkRaC5az1xMQRA5A', 0, 3, 2),
    ('ghfu-HQkRaC5az1xMQRA5A', 0, 50, 5),
    ('ghfu-HQkRaC5az1xMQRA5A', 1, 3, 0),
    ('ghfu-HQkRaC5az1xMQRA5A', 1, 50, 16),
    ('ghfu-HQkRaC5az1xMQRA5A', 7, 3, 1),
    ('ghfu-HQkRaC5az1xMQRA5A', 7, 50, 38),
    ('ghfu-HQkRaC5az1xMQRA5A', 49, 3, 2),
    ('ghfu-HQkRaC5az1xMQRA5A', 49, 50, 42),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 0, 3, 1),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 0, 50, 35),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 1, 3, 2),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 1, 50, 6),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 7, 3, 2),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 7, 50, 46),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 49, 3, 2),
    ('AAAAAAAAAAAAAAAAAAAAAQ', 49, 50, 43),
    ('_____________________w', 0, 3, 0),
    ('_____________________w', 0, 50, 6),
    ('_____________________w', 1, 3, 1),
    ('_____________________w', 1, 50, 30),
    ('_____________________w', 7, 3, 1),
    ('_____________________w', 7, 50, 31),
    ('_____________________w', 49, 3, 2),
    ('_____________________w', 49, 50, 8),
    ('5oTBTgpdQrO6kKOMynYHXQ', 0, 3, 0),
    ('5oTBTgpdQrO6kKOMynYHXQ', 0, 50, 20),
    ('5oTBTgpdQrO6kKOMynYHXQ', 1, 3, 0),
    ('5oTBTgpdQrO6kKOMynYHXQ', 1, 50, 6),
    ('5oTBTgpdQrO6kKOMynYHXQ', 7, 3, 1),
    ('5oTBTgpdQrO6kKOMynYHXQ', 7, 50, 8),
    ('5oTBTgpdQrO6kKOMynYHXQ', 49, 3, 2),
    ('5oTBTgpdQrO6kKOMynYHXQ', 49, 50, 45),
]


@pytest.mark.parametrize("text,expected", MURMUR2)
def test_murmur2_equals_kafka(text, expected):
    assert rs.murmur2(text.encode()) == expected


@pytest.mark.parametrize("topic_id,partition,partitions,expected", PARTITIONER)
def test_metadata_partition_equals_kafka(topic_id, partition, partitions, expected):
    assert rs.metadata_partition_for(topic_id, partition, partitions) == expected


def _event(kind, state, seg="S" * 22, start=0, end=9, where="w"):
    return rlm.RemoteLogEvent(kind, "t", 0, "A" * 22, state, 1, 1, where, segment_id=seg, start_offset=start,
                              end_offset=end, max_timestamp_ms=5, size_bytes=100, leader_epochs=[(0, start)])


def test_fold_keeps_the_latest_state_and_flags_orphan_updates():
    meta = rs.RemoteLogMetadata()
    rs.fold_events([_event(rlm.SEGMENT_METADATA, rs.COPY_SEGMENT_STARTED),
                    _event(rlm.SEGMENT_UPDATE, rs.COPY_SEGMENT_FINISHED),
                    _event(rlm.SEGMENT_METADATA, rs.COPY_SEGMENT_STARTED, seg="T" * 22, start=10, end=19),
                    _event(rlm.SEGMENT_UPDATE, rs.DELETE_SEGMENT_STARTED, seg="U" * 22, where="orphan")], meta)
    rp = meta.partitions[("t", 0)]
    assert [s.segment_id for s in rp.finished()] == ["S" * 22]
    assert rp.summary()["remote_copies_in_progress"] == 1
    assert rp.remote_range == (0, 9) and rp.remote_bytes == 100
    assert len(rp.unknown) == 1 and "orphan" in rp.unknown[0]


def test_epoch_for_offset_and_lineage():
    entries = [(0, 0), (2, 50), (3, 50), (5, 120)]
    assert rl.epoch_for_offset(entries, 0) == 0
    assert rl.epoch_for_offset(entries, 49) == 0
    assert rl.epoch_for_offset(entries, 50) == 2  # the first entry with that exact start offset
    assert rl.epoch_for_offset(entries, 130) == 5
    assert rl.epoch_for_offset([(1, 10)], 5) is None
    lineage = {0: 0, 3: 50, 5: 120}  # epoch 2 has no records: filtered out, as Kafka does
    seg = rs.RemoteSegment("S" * 22, "t", 0, "A" * 22, 40, 60, 9, 1, [(0, 40), (3, 50)], 1,
                           rs.COPY_SEGMENT_FINISHED, 0, 0)
    assert rl.within_leader_epochs(seg, 200, lineage)
    assert not rl.within_leader_epochs(seg, 60, lineage)  # must end below the log end offset
    seg.leader_epochs = [(0, 40), (4, 50)]  # an epoch the partition never had
    assert not rl.within_leader_epochs(seg, 200, lineage)


def test_partition_count_inferred_from_where_events_were_found():
    """A broker's log dirs may hold only some metadata partitions: the count is inferred from
    where each user partition's events sit (Kafka's own placements, 50 partitions)."""
    found = [(tid, p, k) for tid, p, n, k in PARTITIONER if n == 50]
    counts = rs.infer_partition_counts(found, max(k for *_, k in found))
    assert 50 in counts and counts[0] >= 47
    meta = rs.RemoteLogMetadata(metadata_partitions={k for *_, k in found}, partition_counts=counts,
                                incomplete={45: ["bad record"], 6: ["other"]})
    assert meta.unknown_for("5oTBTgpdQrO6kKOMynYHXQ", 49) == ["__remote_log_metadata-45: bad record"]
    assert meta.unknown_for("5oTBTgpdQrO6kKOMynYHXQ", 0) == []
    # an unknown count concerns every partition
    assert len(rs.RemoteLogMetadata(incomplete={45: ["x"], 6: ["y"]}).unknown_for("5oTBTgpdQrO6kKOMynYHXQ", 0)) == 2
