"""The cluster parts of a manifest (auditor.cluster.portable, auditor.manifest), without a broker:
the real KRaft metadata fixture round-trips, the most advanced copy of several is used, a manifest
without the parts (the format before them) reads as before, and a damaged part is a note naming
the file, never a crash. The real-broker proofs are in test_tiered_storage.py (replay-check
--manifest = --log-dir = offsets_for_times) and test_metadata_log_cluster.py (audit from
manifests = disk-mode audit)."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from auditor.audit import AuditRequest, audit_context
from auditor.cluster import metadata_log as ml
from auditor.cluster import portable
from auditor.cluster.remote_storage import RemoteLogMetadata, RemotePartition, RemoteSegment
from auditor.manifest import (CLUSTER_METADATA_FILE, COMPLETE_FILE, REMOTE_LOG_METADATA_FILE, collect_manifest,
                              finish_manifest, read_cluster_metadata, read_remote_log_metadata)
from auditor.scan.pagecache import file_residency
from harness.realdata import LOG_DIRS, REAL

pytestmark = pytest.mark.recorded

REAL_METADATA = REAL / "metadata" / "kraft-transactional"


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    """collect of the real metadata log dir (a broker's log dir holding __cluster_metadata-0)."""
    out = tmp_path_factory.mktemp("m") / "broker"
    res = collect_manifest([REAL_METADATA], out, "index")
    assert res.cluster_parts[0].startswith("metadata log: ") and res.cluster_parts[0].endswith(CLUSTER_METADATA_FILE)
    assert res.cluster_parts[1].startswith("remote log metadata: no __remote_log_metadata")
    return out


def test_the_real_metadata_log_round_trips(manifest):
    disk = ml.read_metadata_log([REAL_METADATA], history=True)
    log, notes = read_cluster_metadata([manifest])
    assert notes == []
    assert log.state == disk.state and log.history == disk.history and log.notes == disk.notes
    assert (len(log.state.topics), log.state.partition_count) == (9, 139)
    assert (log.metadata_dir, log.base_snapshot, log.base_offset, log.snapshots, log.segments) == (
        disk.metadata_dir, disk.base_snapshot, disk.base_offset, disk.snapshots, disk.segments)
    by_url, notes = read_cluster_metadata([manifest.as_uri()])   # a URL: through pyarrow's file systems
    assert notes == [] and by_url.state == disk.state and by_url.history == disk.history
    assert not (manifest / REMOTE_LOG_METADATA_FILE).exists()
    assert read_remote_log_metadata([manifest]) == (None, [])


def test_history_and_notes_round_trip():
    """Every field of every kind of history line (tuples, lists, dicts, None) and of notes."""
    disk = ml.read_metadata_log([REAL_METADATA], history=True)
    disk.history = [
        ml.Change(5, 1000, "f", "config", resource=("topic", "t"), name="retention.ms", before=None, after="1"),
        ml.Change(6, 1001, "f", "replicas", topic="t", topic_id="x", partition=0, before=[1], after=[1, 2]),
        ml.Change(7, 1002, "f", "partition-created", topic="t", topic_id="x", partition=1,
                  after={"replicas": [1], "directories": ["d"]}),
        ml.Change(8, 1003, "f", "directories", topic="t", partition=0, broker=2, before="a", after="b"),
    ]
    disk.notes = [ml.Note("f", 12, 5, "something")]
    buf = io.BytesIO()
    portable.write_metadata(disk, buf)
    back = portable.read_metadata(io.BytesIO(buf.getvalue()), "x")
    assert back.history == disk.history and back.notes == disk.notes and back.state == disk.state


def _copy_with_header(src: Path, dest: Path, **header) -> Path:
    """A copy of a manifest whose metadata part's header line is changed."""
    shutil.copytree(src, dest)
    path = dest / CLUSTER_METADATA_FILE
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    head = json.loads(lines[0])
    head.update(header)
    lines[0] = json.dumps(head)
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return dest


def test_the_most_advanced_copy_is_used(manifest, tmp_path):
    """Several brokers' copies: the highest snapshot/segment offset wins whatever the order (the
    rule read_metadata_log picks by); ties go to the first manifest; the others are listed."""
    behind = _copy_with_header(manifest, tmp_path / "a-behind", advance=7364, metadata_dir="/broker-2/__cluster_metadata-0")
    ahead = _copy_with_header(manifest, tmp_path / "b-ahead", advance=99999, metadata_dir="/broker-3/__cluster_metadata-0")
    for order in ([behind, ahead], [ahead, behind]):
        log, notes = read_cluster_metadata(order)
        assert notes == [] and str(log.metadata_dir) == "/broker-3/__cluster_metadata-0"
        assert [str(p) for p in log.other_metadata_dirs] == ["/broker-2/__cluster_metadata-0"]
    tie = _copy_with_header(manifest, tmp_path / "c-tie", advance=99999, metadata_dir="/broker-4/__cluster_metadata-0")
    log, _ = read_cluster_metadata([tmp_path / "b-ahead", tie])
    assert str(log.metadata_dir) == "/broker-3/__cluster_metadata-0"


def test_damaged_parts_are_notes_and_the_next_copy_is_used(manifest, tmp_path):
    cut = shutil.copytree(manifest, tmp_path / "a-cut")
    data = gzip.decompress((cut / CLUSTER_METADATA_FILE).read_bytes())
    (cut / CLUSTER_METADATA_FILE).write_bytes(gzip.compress(data[: data.rindex(b"\n", 0, len(data) // 2) + 1]))
    _copy_with_header(manifest, tmp_path / "b-newer", version=portable.VERSION + 1, advance=10**9)
    log, notes = read_cluster_metadata([cut, tmp_path / "b-newer"])
    assert log is None and len(notes) == 2
    by_file = {n.file: n.message for n in notes}
    assert f"version {portable.VERSION + 1} is newer than this tool reads" in by_file[
        str(tmp_path / "b-newer" / CLUSTER_METADATA_FILE)]
    assert by_file[str(cut / CLUSTER_METADATA_FILE)].startswith("not used: cut off after ")
    # a cut copy that claims to be the most advanced: noted, and the good copy is used
    cut_ahead = _copy_with_header(cut, tmp_path / "c-cut-ahead", advance=10**9)
    data = gzip.decompress((cut_ahead / CLUSTER_METADATA_FILE).read_bytes())
    (cut_ahead / CLUSTER_METADATA_FILE).write_bytes(gzip.compress(data[: len(data) - 40]))
    log, notes = read_cluster_metadata([cut_ahead, manifest])
    assert log is not None and len(log.state.topics) == 9
    assert len(notes) == 1 and "not used" in notes[0].message and notes[0] in log.notes
    (tmp_path / "junk").mkdir()
    shutil.copy(manifest / "segments.parquet", tmp_path / "junk")
    (tmp_path / "junk" / CLUSTER_METADATA_FILE).write_bytes(b"not gzip at all")
    finish_manifest(tmp_path / "junk", 0, "index")  # (a complete manifest: only its part is junk)
    log, notes = read_cluster_metadata([tmp_path / "junk"])
    assert log is None and "not used" in notes[0].message


def test_a_manifest_without_the_parts_reads_as_before(manifest, tmp_path):
    """The manifest format before the cluster parts (the three Parquet files only): nothing from
    the metadata log, no remote view; the audit context is what it was."""
    old = tmp_path / "old"
    shutil.copytree(manifest, old, ignore=shutil.ignore_patterns("*.jsonl.gz", COMPLETE_FILE))
    finish_manifest(old, 0, "index")  # (complete without them)
    assert read_cluster_metadata([old]) == (None, [])
    assert read_remote_log_metadata([old]) == (None, [])
    ctx = audit_context(AuditRequest(manifests=[str(old)]), lambda m: None)
    assert ctx.partition_moves is None and ctx.topic_configs == {}
    ctx = audit_context(AuditRequest(manifests=[str(manifest)]), lambda m: None)
    assert ctx.partition_moves is not None and len(ctx.partition_moves.topic_ids) == 9
    # a log dir without a metadata log: no part written, and a re-collect removes a stale one
    out = tmp_path / "plain"
    shutil.copytree(manifest, out)
    res = collect_manifest([LOG_DIRS[0]], out, "stat")
    assert res.cluster_parts[0].startswith("metadata log: none")
    assert not (out / CLUSTER_METADATA_FILE).exists()


def _segment(topic, partition, sid, start, end):
    return RemoteSegment(segment_id=sid, topic=topic, partition=partition, topic_id="AAAAAAAAAAAAAAAAAAAAAA",
                         start_offset=start, end_offset=end, max_timestamp_ms=start * 10, size_bytes=100,
                         leader_epochs=[(0, start)], broker_id=1, state="COPY_SEGMENT_FINISHED",
                         state_event_ms=1, copy_started_ms=1, history=[("COPY_SEGMENT_FINISHED", 1, 1)])


def _remote(partitions: dict[int, list[RemoteSegment]], incomplete=None) -> RemoteLogMetadata:
    meta = RemoteLogMetadata(metadata_partitions=set(partitions), incomplete=incomplete or {})
    for k, segs in partitions.items():
        meta.metadata_dirs.append(f"/d/__remote_log_metadata-{k}")
        for s in segs:
            rp = meta.partitions.setdefault((s.topic, s.partition), RemotePartition(s.topic, s.partition, s.topic_id))
            rp.metadata_partitions.add(k)
            rp.segments[s.segment_id] = s
    return meta


def test_remote_parts_round_trip_and_merge_first_copy_wins():
    a = _remote({0: [_segment("t", 0, "s1", 0, 9)], 1: [_segment("t", 1, "s2", 0, 4)]},
                incomplete={1: ["bad record"]})
    a.notes.append("bad record")
    buf = io.BytesIO()
    portable.write_remote(a, buf)
    back = portable.read_remote(io.BytesIO(buf.getvalue()), "x")
    assert back.partitions == a.partitions and back.incomplete == a.incomplete and back.notes == a.notes
    # a second broker with its own replica of metadata partition 1 (newer) and partition 2
    b = _remote({1: [_segment("t", 1, "s3", 0, 7)], 2: [_segment("u", 0, "s4", 5, 6)]})
    merged = portable.merge_remote([back, b])
    assert merged.metadata_partitions == {0, 1, 2}
    assert merged.partitions[("t", 1)].segments == {"s2": a.partitions[("t", 1)].segments["s2"]}
    assert ("u", 0) in merged.partitions and merged.incomplete == {1: ["bad record"]}
    assert merged.notes.count("bad record") == 1


def _cold(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_collect_page_cache_care_covers_the_metadata_log(tmp_path):
    """collect --page-cache-care: reading the metadata log for the manifest leaves its files'
    page-cache residency as it was (a plain collect, for contrast, leaves them cached)."""
    log_dir = tmp_path / "broker"
    shutil.copytree(REAL_METADATA, log_dir)
    files = sorted(p for p in (log_dir / ml.METADATA_DIR_NAME).iterdir() if p.is_file())
    for p in files:
        _cold(p)
    before = [file_residency(p) for p in files]
    assert sum(total for _, total in before) >= 10 and sum(r for r, _ in before) == 0
    res = collect_manifest([log_dir], tmp_path / "m-care", "index", page_cache_care=True)
    assert (tmp_path / "m-care" / CLUSTER_METADATA_FILE).is_file(), res.cluster_parts
    assert [file_residency(p) for p in files] == before
    collect_manifest([log_dir], tmp_path / "m-plain", "index")
    assert sum(r for r, _ in (file_residency(p) for p in files)) > 0


def _group(name: str, part: int, offset: int):
    from auditor.cluster.consumer_groups import CommittedOffset, Group
    c = CommittedOffset(name, "t", 0, offset, None, "", 1, None, 5, part, False, 3)
    return Group(name, "classic", "consumer", "Empty", 1, 0, None, None, False, part, {("t", 0): c})


def test_groups_round_trip_and_merge_takes_the_furthest_replica():
    from auditor.cluster.consumer_groups import GroupsResult
    a = GroupsResult({"g1": _group("g1", 0, 10), "g2": _group("g2", 1, 20)}, ["note a"],
                     {0: "/b1/__consumer_offsets-0", 1: "/b1/__consumer_offsets-1"}, 7)
    buf = io.BytesIO()
    portable.write_groups(a, buf)
    back = portable.read_groups(io.BytesIO(buf.getvalue()), "x")
    assert back.groups == a.groups and back.partitions == a.partitions and back.notes == a.notes
    # broker 2 holds a replica of partition 1 that reaches further (log end 50 > 40): its g2 wins
    b = GroupsResult({"g2": _group("g2", 1, 25)}, [], {1: "/b2/__consumer_offsets-1"}, 3)
    merged = portable.merge_groups([(back, {0: 100, 1: 40}), (b, {1: 50})])
    assert merged.groups["g2"].offsets[("t", 0)].offset == 25 and merged.groups["g1"].offsets[("t", 0)].offset == 10
    assert merged.partitions == {0: "/b1/__consumer_offsets-0", 1: "/b2/__consumer_offsets-1"}
    assert any("2 replicas" in n and "read /b2/__consumer_offsets-1" in n for n in merged.notes)
    tie = portable.merge_groups([(back, {1: 50}), (b, {1: 50})])
    assert tie.groups["g2"].offsets[("t", 0)].offset == 20
