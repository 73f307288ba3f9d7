"""The audit's key statistics (auditor.keys.audit_keys) and what the key checks read of the
sketches: first records per key, replicas, manifests without a key part, keys shown as fingerprints
and the config's prefix (pure functions and real KeyStats; the real-broker proof is test_keys_live)."""

from __future__ import annotations

import pytest

from auditor.keys.audit_keys import build_key_audit, key_document, key_label, shown_key
from auditor.keys.partition_keys import PartitionKeys
from auditor.keys.partitioners import murmur2
from auditor.keys.sketches import KeyInfo, KeyStats
from checks.framework.config import Config, ConfigError

pytestmark = pytest.mark.unit


def _stats(records, prefix_bytes=0) -> KeyStats:
    stats = KeyStats(prefix_bytes=prefix_bytes)
    for offset, (key, ts) in enumerate(records):
        stats.add(key, 5, offset, ts)
    return stats.seal()


def test_first_seen_is_the_first_record_of_each_kept_key_and_survives_merge_and_serialisation():
    early = _stats([(b"a", 100), (b"b", 110), (b"a", 120)])
    late = KeyStats()
    late.add(b"b", 5, 7, 200)
    late.add(b"c", 5, 8, 210)
    merged = KeyStats.from_dict(early.to_dict()).merge(late)
    by_key = {info.hashes.murmur2: merged.first_seen[ident] for ident, info in merged.info.items()}
    assert by_key == {murmur2(b"a"): (0, 100), murmur2(b"b"): (1, 110), murmur2(b"c"): (8, 210)}
    again = KeyStats.from_dict(merged.to_dict())
    assert again.first_seen == merged.first_seen


def test_a_sketch_written_before_first_seen_still_reads():
    data = _stats([(b"a", 1)]).to_dict()
    del data["first_seen"]
    assert KeyStats.from_dict(data).first_seen == {}


def test_add_without_offsets_keeps_no_first_seen():
    stats = KeyStats()
    stats.add(b"a", 1)
    assert stats.seal().first_seen == {}


def _pair(broker, partition, stats, kind="live"):
    location = {"broker_id": broker, "log_dir": f"/d{broker}", "topic": "t", "partition": partition,
                "dir_kind": kind, "dir_name": f"t-{partition}"}
    return location, PartitionKeys(stats, "all", None, 10, 10, 0, stats.records - 1)


def test_replicas_are_not_added_up_the_fullest_is_used_and_future_dirs_are_left_out():
    full = _stats([(b"k%d" % i, 1) for i in range(10)])
    partial = _stats([(b"k%d" % i, 1) for i in range(4)])
    future = _stats([(b"k%d" % i, 1) for i in range(50)])
    audit = build_key_audit([_pair(1, 0, partial), _pair(2, 0, full), _pair(3, 0, future, "future"),
                             _pair(1, 1, partial)], "test", counts={"t": 2})
    assert audit.ran and audit.read("t", 0).stats.records == 10 and audit.read("t", 0).broker_id == 2
    assert audit.read("t", 0).replicas_seen == 2
    assert audit.verdicts["t"]["partition_count"] == 2


def test_nothing_read_means_the_key_checks_did_not_run_and_the_document_says_why():
    audit = build_key_audit([], "manifests (collect --keys)", notes=["/m: no key statistics"])
    doc = key_document(audit)
    assert doc["ran"] is False and doc["notes"][0] == "/m: no key statistics"
    assert "did not run" in doc["notes"][-1]
    assert key_document(None)["ran"] is False


def test_a_key_is_shown_as_its_fingerprint_and_a_prefix_only_when_allowed_and_kept():
    info = KeyInfo.of(b"customer-42", prefix_bytes=8)
    assert shown_key(info) == {"murmur2": murmur2(b"customer-42"), "length": 11, "printable": True}
    assert shown_key(info, 4)["prefix"] == "cust"
    assert "prefix" not in shown_key(KeyInfo.of(b"customer-42"), 4)  # the scan kept none
    binary = KeyInfo.of(b"\x00\xff\x10", prefix_bytes=8)
    assert "prefix" not in shown_key(binary, 8) and key_label(shown_key(binary)).endswith("binary)")
    assert key_label(shown_key(info)) == f"key#{murmur2(b'customer-42') & 0xFFFFFFFF:08x} (len 11)"


def test_config_keys_show_prefix_bytes():
    assert Config(None).key_prefix_bytes == 0
    assert Config({"keys": {"show_prefix_bytes": 6}}).key_prefix_bytes == 6
    assert Config({"keys": {"show_prefix_bytes": 6}}).to_dict()["keys"] == {"show_prefix_bytes": 6}
    for bad in ({"show_prefix_bytes": -1}, {"show_prefix_bytes": True}, {"prefix": 3}, [1]):
        with pytest.raises(ConfigError, match="keys"):
            Config({"keys": bad})
