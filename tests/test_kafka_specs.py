"""The generated spec tables (auditor/formats/specs/) and the generic decoder (kafka_message.py).

- The committed tables equal what scripts/gen_kafka_specs.py makes from the Kafka jars in the
  Maven cache (.cache/m2, resolved by scripts/kafka-jars.sh): a missing jar fails, never skips.
- Every metadata record type the audit needs is there, with its versions.
- The decoder on bytes written here by hand, field by field, from the encoding rules (an
  independent little encoder below), on the real metadata snapshots, and on broken bytes: every
  break is a FormatError naming position, field, value found and value expected.
The oracle comparison with Kafka's own decoder (DumpLogSegments) is in test_metadata_log.py.
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import uuid
from pathlib import Path

import pytest

from auditor.formats import kafka_message as km
from auditor.formats.errors import FormatError
from auditor.formats.specs import kafka_metadata
from harness.encoding import uvarint

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_kafka_specs", ROOT / "scripts" / "gen_kafka_specs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_kafka_specs"] = mod
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ generator ----------------

def test_committed_tables_equal_what_the_generator_makes_from_the_jars():
    gen = _generator()
    version = kafka_metadata.KAFKA_VERSION
    for source in gen.SOURCES:
        jar = gen.jar_path(gen.DEFAULT_M2, source.artifact, version)
        assert jar.is_file(), f"{jar} missing: run `bash scripts/kafka-jars.sh` (Kafka {version})"
    files = gen.generate(version, gen.DEFAULT_M2)
    assert gen.differences(files, ROOT / "auditor" / "formats" / "specs") == []


def test_generator_check_mode_notices_an_edited_table(tmp_path):
    gen = _generator()
    out = tmp_path / "specs"
    assert gen.main(["--out", str(out)]) == 0
    assert gen.main(["--out", str(out), "--check"]) == 0
    path = out / "kafka_metadata.py"
    path.write_text(path.read_text().replace("'PartitionRecord'", "'PartitionRecordX'", 1))
    assert gen.main(["--out", str(out), "--check"]) == 1
    (out / "stray.py").write_text("")
    assert len(gen.differences(gen.generate(), out)) == 2


def test_comment_stripping_keeps_slashes_inside_strings():
    gen = _generator()
    text = '// licence\n{ "a": "http://x//y", // trailing\n  "b": 1 }\n'
    assert gen.strip_comments(text).split() == ['{', '"a":', '"http://x//y",', '"b":', '1', '}']
    assert gen.parse_versions("0+", "t") == (0, None)
    assert gen.parse_versions("1-3", "t") == (1, 3)
    assert gen.parse_versions("2", "t") == (2, 2)
    assert gen.parse_versions("none", "t") is None


def test_tables_carry_no_prose():
    for path in (ROOT / "auditor" / "formats" / "specs").glob("*.py"):
        text = path.read_text()
        assert "'about'" not in text and "Licensed to the Apache" not in text, path


METADATA_RECORDS = {   # name: (api key, lowest highest version at least)
    "RegisterBrokerRecord": (0, 3), "UnregisterBrokerRecord": (1, 0), "TopicRecord": (2, 0),
    "PartitionRecord": (3, 2), "ConfigRecord": (4, 0), "PartitionChangeRecord": (5, 2),
    "FenceBrokerRecord": (7, 0), "UnfenceBrokerRecord": (8, 0), "RemoveTopicRecord": (9, 0),
    "FeatureLevelRecord": (12, 0), "NoOpRecord": (20, 0), "ZkMigrationStateRecord": (21, 0),
    "BrokerRegistrationChangeRecord": (17, 2), "BeginTransactionRecord": (23, 0),
    "EndTransactionRecord": (24, 0), "AbortTransactionRecord": (25, 0),
    "RegisterControllerRecord": (27, 0),
}


@pytest.mark.parametrize("name", sorted(METADATA_RECORDS))
def test_metadata_record_types_are_covered(name):
    api_key, highest = METADATA_RECORDS[name]
    s = km.spec(name)
    assert s.source == "kafka_metadata" and s.type == "metadata" and s.api_key == api_key
    assert s.has_version(highest)
    assert km.by_api_key("metadata", api_key) is s


def test_partition_change_directories_and_register_broker_log_dirs_are_in_the_tables():
    pcr = {f["name"]: f for f in km.spec("PartitionChangeRecord").fields}
    assert pcr["Directories"]["type"] == "[]uuid" and pcr["Directories"]["tag"] == 8
    rbr = {f["name"]: f for f in km.spec("RegisterBrokerRecord").fields}
    assert rbr["LogDirs"]["type"] == "[]uuid"
    for name in ("SnapshotHeaderRecord", "SnapshotFooterRecord", "LeaderChangeMessage", "VotersRecord",
                 "KRaftVersionRecord"):
        assert km.spec(name).source == "kafka_clients"
    for name in ("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue"):
        assert km.spec(name).source == "kafka_group_coordinator"
    for name in ("RemoteLogSegmentMetadataRecord", "RemoteLogSegmentMetadataUpdateRecord",
                 "RemotePartitionDeleteMetadataRecord", "RemoteLogSegmentMetadataSnapshotRecord"):
        assert km.spec(name).source == "kafka_storage"
    assert km.by_api_key("coordinator-key", 1).name == "OffsetCommitKey"


# ------------------------------------------------------------------ an independent encoder ----

def cstr(s):            # compact (flexible) nullable string
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def cint32s(xs):        # compact nullable []int32
    if xs is None:
        return b"\x00"
    return uvarint(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)


def cuuids(us):
    return uvarint(len(us) + 1) + b"".join(u for u in us)


def tagged(*fields):    # (tag, bytes) ...
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in fields)


U1 = uuid.UUID("6f3b6c64-7b1a-4e3e-9a53-0b8f7a1c2d3e").bytes
U2 = uuid.UUID("00000000-0000-0000-0000-000000000001").bytes


def test_uuid_prints_as_kafka_uuid_tostring():
    # Uuid.toString(): Base64.getUrlEncoder().withoutPadding() of the 16 bytes
    assert km.uuid_str(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert km.uuid_str(b"\xff" * 16) == "_____________________w"
    assert km.uuid_bytes(km.uuid_str(U1)) == U1


def test_partition_record_v2_by_hand():
    # Directories is a plain field from v1; LeaderRecoveryState (0), the ELR lists (1, 2) are tagged
    body = (struct.pack(">i", 3) + U1 + cint32s([1, 2, 3]) + cint32s([1, 3]) + cint32s([]) + cint32s([2])
            + struct.pack(">iii", 1, 7, 9) + cuuids([U1, U2, U1])
            + tagged((0, b"\x01"), (1, cint32s([3])), (2, cint32s([])), (99, b"\x01\x02")))
    rec = km.decode("PartitionRecord", 2, body)
    assert rec == {"partitionId": 3, "topicId": km.uuid_str(U1), "replicas": [1, 2, 3], "isr": [1, 3],
                   "removingReplicas": [], "addingReplicas": [2], "leader": 1, "leaderEpoch": 7,
                   "partitionEpoch": 9, "leaderRecoveryState": 1,
                   "directories": [km.uuid_str(U1), km.uuid_str(U2), km.uuid_str(U1)],
                   "eligibleLeaderReplicas": [3], "lastKnownElr": [],
                   "_unknownTaggedFields": {99: b"\x01\x02"}}


def test_partition_change_record_tagged_defaults_and_nulls():
    body = struct.pack(">i", 0) + U2 + tagged((1, struct.pack(">i", -1)), (8, cuuids([U2])))
    rec = km.decode("PartitionChangeRecord", 1, body)
    assert rec["leader"] == -1 and rec["directories"] == [km.uuid_str(U2)]
    assert rec["isr"] is None and rec["replicas"] is None and rec["leaderRecoveryState"] == -1
    assert "eligibleLeaderReplicas" not in rec          # a version-2 field is absent from v1
    assert km.decode("PartitionChangeRecord", 0, struct.pack(">i", 0) + U2 + b"\x00")["leader"] == -2


def test_config_record_nullable_value_and_non_flexible_coordinator_messages():
    body = struct.pack(">b", 2) + cstr("t") + cstr("retention.ms") + cstr(None) + b"\x00"
    assert km.decode("ConfigRecord", 0, body) == {"resourceType": 2, "resourceName": "t",
                                                  "name": "retention.ms", "value": None}

    def s16(s):
        b = s.encode()
        return struct.pack(">h", len(b)) + b
    key = s16("g") + s16("orders") + struct.pack(">i", 4)
    assert km.decode("OffsetCommitKey", 0, key) == {"group": "g", "topic": "orders", "partition": 4}
    v1 = struct.pack(">q", 42) + s16("meta") + struct.pack(">qq", 1000, 2000)
    assert km.decode("OffsetCommitValue", 1, v1) == {"offset": 42, "metadata": "meta",
                                                     "commitTimestamp": 1000, "expireTimestamp": 2000}
    v4 = struct.pack(">qi", 42, 3) + cstr("") + struct.pack(">q", 1000) + tagged((0, U1))
    assert km.decode("OffsetCommitValue", 4, v4)["topicId"] == km.uuid_str(U1)


def test_register_broker_record_nested_structs_and_prefix_reader():
    s = km.spec("RegisterBrokerRecord")
    body = (struct.pack(">i", 5) + b"\x00" + U1 + struct.pack(">q", 77)
            + uvarint(2) + cstr("PLAINTEXT") + cstr("h") + struct.pack(">Hh", 9092, 0) + b"\x00"   # EndPoints
            + uvarint(2) + cstr("metadata.version") + struct.pack(">hh", 1, 27) + b"\x00"         # Features
            + cstr("rack-a") + b"\x01"                                                              # Rack, Fenced
            + b"\x00"                                                                               # InControlledShutdown
            + tagged((0, cuuids([U2]))))                                                           # LogDirs (tag 0)
    rec = s.decode(body, 3)
    assert rec["brokerId"] == 5 and rec["endPoints"] == [{"name": "PLAINTEXT", "host": "h", "port": 9092,
                                                          "securityProtocol": 0}]
    assert rec["features"][0] == {"name": "metadata.version", "minSupportedVersion": 1, "maxSupportedVersion": 27}
    assert rec["rack"] == "rack-a" and rec["fenced"] is True and rec["logDirs"] == [km.uuid_str(U2)]
    obj, end = s.reader(3, exact=False)(body + b"trailing")
    assert obj == rec and end == len(body)


# ------------------------------------------------------------------ errors ---------------------

def test_truncated_body_names_field_and_position():
    body = struct.pack(">i", 3) + U1[:10]
    with pytest.raises(FormatError) as e:
        km.spec("TopicRecord").decode(cstr("t") + U1[:10], 0, file="snap.checkpoint", base=100)
    assert e.value.file == "snap.checkpoint" and e.value.position == 102
    assert e.value.field == "TopicRecord.TopicId" and "10 byte(s) left" in str(e.value.found)
    with pytest.raises(FormatError) as e:
        km.decode("PartitionChangeRecord", 0, body)
    assert e.value.field == "PartitionChangeRecord.TopicId"


def test_huge_lengths_are_errors_not_allocations():
    body = struct.pack(">i", 3) + U1 + uvarint(0x7FFFFFF0)     # Replicas: ~2^31 elements
    with pytest.raises(FormatError) as e:
        km.decode("PartitionRecord", 0, body)
    assert e.value.field == "PartitionRecord.Replicas" and e.value.found == 0x7FFFFFF0 - 1
    assert "byte(s) left" in e.value.expected
    with pytest.raises(FormatError) as e:
        km.decode("TopicRecord", 0, uvarint(40000) + b"x" * 10)
    assert e.value.field == "TopicRecord.Name"
    with pytest.raises(FormatError) as e:   # a tagged field's size beyond the end
        km.decode("PartitionChangeRecord", 0, struct.pack(">i", 0) + U2 + uvarint(1) + uvarint(0) + uvarint(1000))
    assert e.value.field == "PartitionChangeRecord._taggedFields" and e.value.found == 1000
    with pytest.raises(FormatError) as e:   # a varint longer than 5 bytes
        km.decode("TopicRecord", 0, b"\xff" * 8)
    assert "varint" in e.value.field or "varint" in e.value.expected


def test_null_in_a_non_nullable_field_trailing_bytes_and_versions():
    with pytest.raises(FormatError) as e:
        km.decode("TopicRecord", 0, cstr(None) + U1 + b"\x00")
    assert e.value.field == "TopicRecord.Name" and "non-nullable" in e.value.expected
    with pytest.raises(FormatError) as e:
        km.decode("TopicRecord", 0, cstr("t") + U1 + b"\x00" + b"junk")
    assert e.value.found == "4 byte(s) after the message"
    with pytest.raises(FormatError) as e:
        km.decode("TopicRecord", 99, cstr("t") + U1 + b"\x00")
    assert e.value.field == "TopicRecord.version" and e.value.found == 99 and "0" in e.value.expected
    with pytest.raises(FormatError) as e:   # a tagged value shorter than its declared size
        km.decode("PartitionChangeRecord", 0, struct.pack(">i", 0) + U2 + tagged((1, struct.pack(">ih", 1, 0))))
    assert e.value.field == "PartitionChangeRecord.Leader"


def test_invalid_utf8_decodes_as_java_does_with_replacement():
    rec = km.decode("TopicRecord", 0, uvarint(3) + b"a\xff" + U1 + b"\x00")
    assert rec["name"] == "a\ufffd"


def test_every_message_and_version_compiles():
    count = 0
    for s in km.specs():
        lo, hi = s.valid_versions
        for v in range(lo, hi + 1):
            s.compiled(v)
            s.compiled(v, checked=True)
            s.reader(v)
            count += 1
    assert count > 100


# ------------------------------------------------------------------ real snapshots -------------

def test_real_metadata_snapshots_decode_every_record():
    """The three real snapshots: every record frame decodes at its version (no error), and the
    newest holds the 9 topics and 139 partitions the cluster had."""
    from harness.realdata import REAL
    from auditor.formats import offsets_records
    from auditor.formats.log_reader import LogReader

    control = {2: "LeaderChangeMessage", 3: "SnapshotHeaderRecord", 4: "SnapshotFooterRecord",
               5: "KRaftVersionRecord", 6: "VotersRecord"}
    snapshots = sorted((REAL / "metadata").glob("*/__cluster_metadata-0/*.checkpoint"))
    assert len(snapshots) == 3
    for path in snapshots:
        reader = LogReader(path)
        types = []
        for batch in reader.batches():
            data = reader.read_batch_bytes(batch)
            for offset, _ts, key, value in offsets_records.iter_key_values(batch, data, label=str(path)):
                if batch.is_control:
                    version, ctype = struct.unpack(">hh", key)
                    types.append(control[ctype])
                    km.spec(control[ctype]).decode(value, version, file=path)
                    continue
                frame, pos = km.read_uvarint(value, 0, len(value))
                api_key, pos = km.read_uvarint(value, pos, len(value))
                version, pos = km.read_uvarint(value, pos, len(value))
                s = km.by_api_key("metadata", api_key)
                assert frame == 1 and s is not None and s.has_version(version), (path, offset, api_key, version)
                s.decode(value, version, pos=pos, file=path)
                types.append(s.name)
        assert reader.stop_reason is None, reader.stop_detail
        assert types[0] == "SnapshotHeaderRecord" and types[-1] == "SnapshotFooterRecord"
    assert types.count("TopicRecord") == 9 and types.count("PartitionRecord") == 139
