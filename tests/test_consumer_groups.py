"""Consumer groups read from ``__consumer_offsets`` on disk, against a real broker's own answers.

One real Kafka 4.2.1 broker per module (tests/harness/groups.py): 25 groups (classic members,
KIP-848 members, simple commit-only groups with metadata, a deleted group, committed and aborted
transactional commits, a lagging group, a commit below the log start, a commit to a deleted
topic), ``__consumer_offsets`` rolled and compacted by the cleaner. Oracles:

* the broker's ``list_consumer_group_offsets`` for every group (committed offsets, metadata);
* ``describe_consumer_groups`` (protocol type and state);
* Kafka's ``DumpLogSegments --offsets-decoder`` over every ``__consumer_offsets`` partition,
  folded as the coordinator replays (tests/harness/offsets_dump.py).
"""

from __future__ import annotations

import pytest

from auditor.cluster.consumer_groups import OFFSETS_TOPIC, offsets_partition_dirs, read_groups
from harness.groups import (GROUP_BROKER_CONFIG, build_group_scenario, describe_groups, list_committed_offsets,
                            wait_offsets_cleaned)
from harness.offsets_dump import dump_offsets, latest_offsets


@pytest.fixture(scope="module")
def groups_cluster(kafka_cluster_factory):
    kc = kafka_cluster_factory(broker_config=GROUP_BROKER_CONFIG)
    scenario = build_group_scenario(kc)
    cleaned = wait_offsets_cleaned(kc)
    yield kc, scenario, cleaned
    kc.stop()


def _strip_nul(text: str) -> str:
    # librdkafka commits the metadata string with its C terminator (Kafka's own decoder shows the
    # trailing \u0000 on disk) and cuts it off again when it lists offsets
    return text[:-1] if text.endswith("\x00") else text


def test_committed_offsets_equal_list_consumer_group_offsets(groups_cluster):
    kc, scenario, cleaned = groups_cluster
    assert cleaned, "the cleaner must have compacted __consumer_offsets at least once"
    names = sorted(scenario.groups)
    assert len(names) >= 20
    listed = list_committed_offsets(kc, names)
    result = read_groups(kc.log_dirs(1))
    assert result.notes == []
    compared = 0
    for g in names:
        theirs = listed[g]
        grp = result.groups.get(g)
        if not theirs:
            # the deleted group: the broker lists nothing, the disk has only tombstones
            assert g in scenario.deleted_groups
            assert grp is not None and grp.deleted and g not in result.live
            continue
        assert grp is not None and not grp.deleted, g
        mine = {k: (c.offset, _strip_nul(c.metadata)) for k, c in grp.offsets.items()}
        assert mine == theirs, g
        compared += 1
    assert compared >= 20
    # what the scenario did, as the broker confirms it
    assert {k: c.offset for k, c in result.groups["txn-committed"].offsets.items()} == scenario.expected["txn-committed"]
    assert {k: c.offset for k, c in result.groups["txn-aborted"].offsets.items()} == scenario.expected["txn-aborted"]
    assert result.groups["txn-committed"].offsets[("orders", 0)].transactional
    assert ("gone", 0) not in result.groups["gone-group"].offsets   # the coordinator dropped the deleted topic's offsets
    assert result.groups["simple-4"].offsets[("orders", 0)].metadata.startswith("métadonnée ✓ 元数据")
    for g in names:
        if g in result.live:
            for c in result.groups[g].offsets.values():
                assert c.commit_timestamp_ms is not None and c.commit_timestamp_ms > scenario.t0_ms


def test_protocol_and_state_equal_describe_consumer_groups(groups_cluster):
    kc, scenario, _ = groups_cluster
    names = sorted(set(scenario.groups) - set(scenario.deleted_groups))
    described = describe_groups(kc, names)
    result = read_groups(kc.log_dirs(1))
    for g in names:
        grp = result.groups[g]
        assert grp.protocol == described[g]["type"].lower(), g
        assert grp.state.upper() == described[g]["state"], g
    assert {result.groups[g].protocol for g in names} == {"classic", "consumer"}
    assert result.groups["classic-member-0"].protocol_type == "consumer"
    assert result.groups["simple-0"].protocol_type == ""


def test_committed_offsets_equal_dumplogsegments_offsets_decoder(groups_cluster, dump_log_segments):
    kc, scenario, _ = groups_cluster
    result = read_groups(kc.log_dirs(1))
    dirs = offsets_partition_dirs(kc.log_dirs(1))
    assert sorted(dirs) == [0, 1, 2]
    theirs: dict = {}
    markers = set()
    for part, (d,) in dirs.items():
        records = dump_offsets(dump_log_segments, d)
        markers |= {r.control_type for r in records if r.control_type}
        theirs.update(latest_offsets(records))
    assert markers == {"COMMIT", "ABORT"}   # the transactional commits really are on disk
    mine = {g: {k: c.offset for k, c in grp.offsets.items()} for g, grp in result.live.items() if grp.offsets}
    assert mine == {g: {k: int(v["offset"]) for k, v in d.items()} for g, d in theirs.items()}
    # metadata exactly as Kafka decodes it (trailing NUL and non-ASCII included)
    for g, d in theirs.items():
        for k, v in d.items():
            assert result.groups[g].offsets[k].metadata == v["metadata"]
            assert result.groups[g].offsets[k].commit_timestamp_ms == v["commitTimestamp"]
