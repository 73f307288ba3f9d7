"""Tiered storage (KIP-405) on a real broker: issue 14 part 2.

One broker with tiered storage on (Kafka's LocalTieredStorage, the topic-based remote log
metadata manager; tests/harness/tiered.py), one topic of two partitions whose data sits in three
zones: remote only (uploaded, then deleted locally: ``*.deleted``, local log start 320), remote
and local, local only (the active segment); partition 1 also had ``delete_records`` to 100, so
its log start is 100 and two remote segments were deleted from remote storage.

Oracles: Kafka's ``DumpLogSegments --remote-log-metadata-decoder`` for our decoding of
``__remote_log_metadata``; LocalTieredStorage's own files for the remote segments' offsets and
sizes; the broker's ``offsets_for_times`` for the predicted modern answers (>= 200 targets
before, inside, at the edges of and between every segment, and after the newest record).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

# tier (tests/harness/tiers.py): its `tiered` fixture starts a tiered-storage broker without kafka_cluster_factory
pytestmark = pytest.mark.live

from auditor import replay
from auditor.cluster import remote_storage as rs
from auditor.formats import remote_log_metadata as rlm
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.scan import plan_log_dir, scan_partition_dir
from harness.airflow_home import airflow_env, run_dag  # noqa: F401 - the module-scoped Airflow home, the DAG runner
from harness.log_dirs import copy_live_dir
from tests.harness.rlm_dump import dump_remote_log_metadata
from tests.harness.tiered import (OffsetsForTimes, TieredScenario, highest_tiered_offset, local_log_start,
                                  tiered_cluster)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    wd = tmp_path_factory.mktemp("tiered")
    kc = tiered_cluster(wd)
    kc.start()
    try:
        sc = TieredScenario(kc, wd).build()
        oracle = OffsetsForTimes(kc)
        try:
            answers = {p: [(t, oracle(sc.topic, p, t)) for t in sc.targets(p)] for p in range(sc.partitions)}
        finally:
            oracle.close()
        earliest = {p: kc.list_offsets(sc.topic, p, "earliest")[0] for p in range(sc.partitions)}
        local_start = {p: local_log_start(kc, sc.topic, p) for p in range(sc.partitions)}
        tiered_to = {p: highest_tiered_offset(kc, sc.topic, p) for p in range(sc.partitions)}
        latest = {p: kc.list_offsets(sc.topic, p, "latest")[0] for p in range(sc.partitions)}
        yield SimpleNamespace(kc=kc, sc=sc, wd=Path(wd), log_dir=kc.log_dirs()[0], remote_dir=sc.remote_dir,
                              answers=answers, earliest=earliest, local_start=local_start, tiered_to=tiered_to,
                              latest=latest)
    finally:
        kc.stop()


def _partition(t, p: int, log_dir=None):
    """Scan one partition dir as replay-check does: (views, partition row)."""
    log_dir = log_dir or t.log_dir
    plan = plan_log_dir(log_dir)
    (pdir,) = [d for d in plan.partition_dirs if d.name == f"{t.sc.topic}-{p}"]
    rows, prow = scan_partition_dir(pdir, "headers", log_dir_info=plan.info,
                                    checkpoints_by_tp=plan.checkpoints_by_tp, root=plan.root)
    return replay.segment_views(rows), prow


def test_the_broker_tiered_for_real(tiered):
    t = tiered
    for p in range(t.sc.partitions):
        names = os.listdir(t.kc.partition_dir(t.sc.topic, p))
        # local copies deleted for real: no local segment below the local log start is left; the
        # broker renamed them *.log.deleted, and removes those file.delete.delay.ms (60 s) later,
        # logging it first (so the log is read after the listing), maybe before this test runs
        bases = sorted(int(n[: -len(".log")]) for n in names if n.endswith(".log"))
        assert bases and bases[0] == t.local_start[p], (t.local_start[p], names)
        server_log = t.kc.nodes[1].server_log.read_text(errors="replace").splitlines()
        removed = any(f"partition={t.sc.topic}-{p}," in line and "Deleting segment files" in line
                      for line in server_log)
        assert removed or any(n.endswith(".log.deleted") for n in names), names
        assert t.local_start[p] > t.earliest[p]  # the local log starts above the log start
        assert t.tiered_to[p] >= t.local_start[p]  # and remote storage reaches into the local log
    assert t.earliest == {0: 0, 1: TieredScenario.deleted_to}
    views, prow = _partition(t, 0)
    assert prow["log_start_offset"] == 0 and prow["log_start_offset_source"] == "checkpoint"
    assert views[0].base_offset == t.local_start[0]
    assert list(t.remote_dir.rglob("*.log")), "LocalTieredStorage holds no segment"


def test_decoder_equals_kafka_dump(tiered):
    """Every record of every __remote_log_metadata partition decodes to what Kafka's own
    decoder prints, field by field; each partition's events sit where the partitioner says."""
    t = tiered
    meta_dirs = sorted(t.log_dir.glob(f"{rs.METADATA_TOPIC}-*"))
    assert meta_dirs
    compared = 0
    kinds = set()
    for d in meta_dirs:
        ours = []
        for log in sorted(d.glob("*.log")):
            events, problems, _ = rs.read_log_events(log)
            assert problems == []
            ours += events
        theirs = dump_remote_log_metadata(d, t.kc.classpath)
        assert len(ours) == len(theirs), d
        k = int(d.name.rsplit("-", 1)[1])
        for ev, kd in zip(ours, theirs):
            assert ev.kind == kd["kind"]
            assert (ev.metadata_offset, ev.topic, ev.partition, ev.topic_id, ev.segment_id, ev.state,
                    ev.event_ms, ev.broker_id) == (kd["offset"], kd["topic"], kd["partition"], kd["topic_id"],
                                                   kd["segment_id"], kd["state"], kd["eventTimestampMs"],
                                                   kd["brokerId"])
            if ev.kind == rlm.SEGMENT_METADATA:
                assert (ev.start_offset, ev.end_offset, ev.max_timestamp_ms, ev.size_bytes, ev.leader_epochs,
                        ev.txn_index_empty) == (kd["startOffset"], kd["endOffset"], kd["maxTimestampMs"],
                                                kd["segmentSizeInBytes"], kd["segmentLeaderEpochs"], kd["txnIdxEmpty"])
            assert rs.metadata_partition_for(ev.topic_id, ev.partition, len(meta_dirs)) == k
            kinds.add((ev.kind, ev.state))
            compared += 1
    print(f"\n__remote_log_metadata: {compared} records equal to DumpLogSegments --remote-log-metadata-decoder; "
          f"kinds/states {sorted(kinds)}")
    assert compared >= 50
    assert {s for _, s in kinds} == {rs.COPY_SEGMENT_STARTED, rs.COPY_SEGMENT_FINISHED, rs.DELETE_SEGMENT_STARTED,
                                     rs.DELETE_SEGMENT_FINISHED}


def test_remote_segments_match_the_remote_files(tiered):
    """The folded latest state per segment agrees with what LocalTieredStorage holds."""
    t = tiered
    meta = rs.read_log_dirs([t.log_dir])
    assert meta.incomplete == {}
    for p in range(t.sc.partitions):
        rp = meta.get(t.sc.topic, p)
        finished = rp.finished()
        assert finished[0].start_offset <= t.earliest[p] and finished[-1].end_offset == t.tiered_to[p]
        for seg in finished:
            files = rs.remote_segment_files(t.remote_dir, seg)
            assert files is not None, seg
            assert os.path.getsize(files.log_path) == seg.size_bytes
            with LogReader(files.log_path) as reader:
                assert reader.first_batch().base_offset == seg.start_offset
        for seg in rp.deleted_segments:
            assert seg.state == rs.DELETE_SEGMENT_FINISHED
            assert rs.remote_segment_files(t.remote_dir, seg) is None
        # contiguous: every offset from the log start to the highest tiered offset is in remote storage
        covered = t.earliest[p]
        for seg in finished:
            assert seg.start_offset <= covered
            covered = max(covered, seg.end_offset + 1)
        assert covered == t.tiered_to[p] + 1
    assert len(meta.get(t.sc.topic, 1).deleted_segments) == 2 and not meta.get(t.sc.topic, 0).deleted_segments


def _predict_all(t, remote_storage_dir):
    meta = rs.read_log_dirs([t.log_dir])
    counts = {"exact": 0, "range": 0, "remote": 0, "local": 0}
    wrong = []
    for p in range(t.sc.partitions):
        views, prow = _partition(t, p)
        remote = meta.get(t.sc.topic, p, prow["topic_id"])
        epochs = [(e["epoch"], e["start_offset"]) for e in prow["leader_epochs"]]
        for target, broker in t.answers[p]:
            pred = replay.predict(views, target, log_start_offset=prow["log_start_offset"],
                                  log_end_offset=prow["log_end_offset"], high_watermark=prow["high_watermark"],
                                  as_of_ms=0, remote=remote, leader_epochs=epochs,
                                  remote_storage_dir=remote_storage_dir)
            a = pred.modern
            counts[a.tier or "local"] += 1
            got = a.offset if a.offset is not None else -1
            if a.exact:
                counts["exact"] += 1
                if got != broker:
                    wrong.append((p, target, broker, got, a.reason))
            else:
                counts["range"] += 1
                if not (a.offset <= broker <= a.upper_bound_offset):
                    wrong.append((p, target, broker, (a.offset, a.upper_bound_offset), a.reason))
    return counts, wrong


def test_predictions_equal_offsets_for_times(tiered):
    t = tiered
    total = sum(len(v) for v in t.answers.values())
    assert total >= 200
    exact_counts, wrong = _predict_all(t, str(t.remote_dir))
    assert wrong == []
    meta_counts, wrong = _predict_all(t, None)
    assert wrong == []
    print(f"\n{total} targets: with the remote storage dir {exact_counts['exact']} exact = offsets_for_times "
          f"({exact_counts['remote']} answered from remote segments, {exact_counts['local']} from the local log); "
          f"from the metadata alone {meta_counts['exact']} exact, {meta_counts['range']} ranges holding the "
          f"broker's answer")
    assert exact_counts["exact"] == total
    assert exact_counts["remote"] >= 50 and exact_counts["local"] >= 50
    assert meta_counts["range"] >= 50 and meta_counts["exact"] + meta_counts["range"] == total


def _replay_check(t, target, *extra, log_dir=None):
    cmd = [sys.executable, "-m", "auditor.cli", "replay-check", "--topic", t.sc.topic, f"--at={target}",
           "--log-dir", str(log_dir or t.log_dir), "--api", "modern", "--json", *extra]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"replay-check printed no JSON (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-3000:]}") from None
    return proc.returncode, {f["partition"]: f for f in out["partitions"]}


def test_replay_check_disk_mode_agrees(tiered):
    """replay-check --log-dir: the broker's answers, no KLA010 gap for data in remote storage,
    and local vs remote ranges and bytes per partition in the evidence."""
    t = tiered
    meta = rs.read_log_dirs([t.log_dir])
    by_target = {p: dict(t.answers[p]) for p in range(t.sc.partitions)}
    stamps = t.sc.group_stamps[0]
    targets = [(stamps[3][0] + stamps[3][-1]) // 2,    # remote only
               (stamps[10][0] + stamps[10][-1]) // 2,  # remote and local
               (stamps[-1][0] + stamps[-1][-1]) // 2]  # local only (active segment)
    for target in targets:
        for extra in ((), ("--remote-storage-dir", str(t.remote_dir))):
            code, found = _replay_check(t, target, *extra)
            assert code == 0, found
            for p in range(t.sc.partitions):
                f = found[p]
                assert f["severity"] == "PASS", f["message"]
                e = f["evidence"][0]
                broker = by_target[p][target]
                if e["modern_exact"]:
                    assert e["modern_offset"] == broker
                else:
                    assert extra == () and e["modern_offset"] <= broker <= e["modern_upper_offset"]
                rp = meta.get(t.sc.topic, p)
                assert (e["log_start_offset"], e["local_start_offset"], e["remote_start_offset"],
                        e["remote_end_offset"], e["remote_bytes"]) == (
                    t.earliest[p], t.local_start[p], rp.finished()[0].start_offset, t.tiered_to[p], rp.remote_bytes)
                assert e["ever_deleted"] is (p == 1)


def test_a_real_gap_stays_a_gap(tiered):
    """Partition 1 lost offsets 0..99 (delete_records): a target before them is a gap when the
    remote files say where the oldest record is, and 'cannot tell' from the metadata alone;
    never PASS."""
    t = tiered
    target = t.sc.first_ms - 1
    code, found = _replay_check(t, target, "--remote-storage-dir", str(t.remote_dir))
    assert code == 1 and found[1]["severity"] == "FAIL", found[1]["message"]
    assert found[1]["evidence"][0]["modern_offset"] == dict(t.answers[1])[target] == TieredScenario.deleted_to
    code, found = _replay_check(t, target)
    assert found[1]["severity"] == "WARN" and "cannot tell" in found[1]["message"], found[1]["message"]


def _copy_log_dir(t, dest: Path) -> Path:
    """The tiered topic's and __remote_log_metadata's dirs and the log dir's files, from the running
    broker: its retention task removes a tiered segment's *.deleted files file.delete.delay.ms after
    renaming them, and it replaces its checkpoints through .tmp files every few seconds; an entry
    gone before its copy is left out (copy_live_dir), not an error."""
    dest.mkdir()
    for entry in t.log_dir.iterdir():
        if entry.is_dir():
            if entry.name.startswith((t.sc.topic + "-", rs.METADATA_TOPIC)):
                copy_live_dir(entry, dest / entry.name)
        elif not entry.name.startswith("."):
            try:
                shutil.copy2(entry, dest / entry.name)
            except FileNotFoundError:  # a checkpoint's .tmp, renamed over the checkpoint since the listing
                pass
    return dest


def test_bad_remote_metadata_says_what_it_cannot_know(tiered, tmp_path):
    """A __remote_log_metadata record with an unknown version: a note naming the file, field and
    value, and the partitions whose events live in that metadata partition get 'cannot tell'
    (neither PASS nor FAIL); the other partition's verdict is unchanged."""
    t = tiered
    copy = _copy_log_dir(t, tmp_path / "copy")
    meta = rs.read_log_dirs([copy])
    rp0 = meta.get(t.sc.topic, 0)
    (k0,) = rp0.metadata_partitions
    # the topic id is random: partition 1's events share partition 0's metadata partition 1 time in 3
    shared = meta.get(t.sc.topic, 1).metadata_partitions == {k0}
    log = sorted((copy / f"{rs.METADATA_TOPIC}-{k0}").glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    # the first value: frame version 1, apiKey 0, version 0, then the topic name (compact string)
    frame = bytes([rlm.FRAME_VERSION, 0, 0, len(t.sc.topic) + 1]) + t.sc.topic.encode()
    at = data.index(frame)
    data[at + 2] = 9  # RemoteLogSegmentMetadataRecord version 9: unknown to Kafka 4.2.1's specs
    log.write_bytes(bytes(data))
    meta = rs.read_log_dirs([copy])
    assert list(meta.incomplete) == [k0]
    (problem,) = meta.incomplete[k0]
    assert str(log) in problem and "version" in problem and "9" in problem
    target = (t.sc.group_stamps[0][3][0] + t.sc.group_stamps[0][3][-1]) // 2
    code, found = _replay_check(t, target, log_dir=copy)
    assert found[0]["severity"] == "WARN" and "cannot tell" in found[0]["message"], found[0]["message"]
    assert "version" in found[0]["message"]
    if shared:
        assert found[1]["severity"] == "WARN" and "cannot tell" in found[1]["message"], found[1]["message"]
    else:
        assert found[1]["severity"] == "PASS", found[1]["message"]
    # a manifest of the damaged copy carries what cannot be known: the same verdicts and the note
    from auditor.manifest import collect_manifest
    collect_manifest([copy], tmp_path / "manifest", "headers")
    _rc, carried, problems = _replay_check_inproc("--topic", t.sc.topic, f"--at={target}", "--manifest",
                                                  tmp_path / "manifest")
    assert {p: (f["severity"], f["message"]) for p, f in carried.items()} == {
        p: (f["severity"], f["message"]) for p, f in found.items()}
    assert any(str(log) in p and "version" in p for p in problems), problems


def test_values_cut_short_or_unknown_are_errors_not_crashes(tiered):
    """Every prefix of real values, an unknown apiKey, a bad frame version and trailing bytes:
    a FormatError naming the field, never another exception, never an event."""
    t = tiered
    log = sorted(next(t.log_dir.glob(f"{rs.METADATA_TOPIC}-*")).glob("*.log"))
    values = []
    for path in sorted(p for d in t.log_dir.glob(f"{rs.METADATA_TOPIC}-*") for p in d.glob("*.log")):
        with LogReader(path) as reader:
            for batch in reader.batches():
                values += [v for _, v, _ in rlm.record_values(reader, batch)]
    assert log and len(values) >= 50
    kinds_seen = {v[1] for v in values}
    assert {0, 1} <= kinds_seen
    checked = 0
    for value in {v[1]: v for v in values}.values():  # one value per apiKey
        assert rlm.decode_value(value, "x") is not None
        for cut in range(len(value)):
            with pytest.raises(FormatError):
                rlm.decode_value(value[:cut], "x")
            checked += 1
        with pytest.raises(FormatError, match="after the message"):
            rlm.decode_value(value + b"\x00", "x")
    with pytest.raises(FormatError, match="apiKey"):
        rlm.decode_value(bytes([1, 7, 0]) + values[0][3:], "x")
    with pytest.raises(FormatError, match="frame version"):
        rlm.decode_value(bytes([0]) + values[0][1:], "x")
    assert checked > 100


def test_audit_at_agrees_and_the_report_shows_local_and_remote(tiered, tmp_path):
    """audit --at (the pipeline, local engine) on the same log dir: the replay verdicts of the
    tiered partitions equal replay-check's (no gap for remote data, the broker's answer), and the
    HTML report's replay table says per partition which range is local and which remote, and
    whether anything was ever deleted."""
    t = tiered
    stamps = t.sc.group_stamps[0]
    target = (stamps[3][0] + stamps[3][-1]) // 2
    config = tmp_path / "audit.yaml"
    config.write_text("checks:\n  replay.safety:\n    api: modern\n")
    out_json, out_html = tmp_path / "findings.json", tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "auditor.cli", "audit", "--log-dir", str(t.log_dir), f"--at={target}",
                           "--topic", t.sc.topic, "--engine", "local", "--config", str(config),
                           "--remote-storage-dir", str(t.remote_dir), "--json", str(out_json), "--out", str(out_html)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(out_json.read_text())
    replay_findings = {f["partition"]: f for f in doc["findings"] if f["code"] == "KLA010" and f["topic"] == t.sc.topic}
    assert set(replay_findings) == {0, 1}
    html = out_html.read_text()
    for p, f in replay_findings.items():
        assert f["severity"] == "PASS", f["message"]
        e = f["evidence"][0]
        assert e["modern_exact"] and e["modern_tier"] == "remote"
        assert e["modern_offset"] == dict(t.answers[p])[target]
        assert f"remote {e['remote_start_offset']}..{e['remote_end_offset']}" in html
    assert "nothing was ever deleted (log start offset 0)" in html
    assert f"offsets 0..{TieredScenario.deleted_to - 1} were deleted" in html


# ---------------------------------------------------------------------------------------------
# Manifests carry __remote_log_metadata (issue 14: disk mode, manifests and audit --at agree)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiered_manifest(tiered, tmp_path_factory):
    """``kafka-audit collect`` of the tiered broker's log dir (in-process, as the CLI runs it)."""
    import time

    from auditor.manifest import collect_manifest
    # the broker rewrites log-start-offset-checkpoint about once a minute: wait until it holds
    # partition 1's deleteRecords (100), so the manifest and later disk reads see the same file
    checkpoint = tiered.log_dir / "log-start-offset-checkpoint"
    want = f"{tiered.sc.topic} 1 {TieredScenario.deleted_to}"
    deadline = time.monotonic() + 150
    while want not in checkpoint.read_text().splitlines():
        assert time.monotonic() < deadline, f"{checkpoint} never said {want!r}: {checkpoint.read_text()}"
        time.sleep(1)
    out = tmp_path_factory.mktemp("tiered-manifest") / "broker-1"
    res = collect_manifest([tiered.log_dir], out, "headers")
    return SimpleNamespace(dir=out, result=res)


def _replay_check_inproc(*args):
    """``kafka-audit replay-check ... --api modern --json`` in-process: (exit code, findings by partition)."""
    import contextlib
    import io

    from auditor.cli import main as kafka_audit_main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = kafka_audit_main(["replay-check", *map(str, args), "--api", "modern", "--json"])
    assert rc in (0, 1), out.getvalue()[-2000:] + err.getvalue()[-3000:]
    doc = json.loads(out.getvalue())
    return rc, {f["partition"]: f for f in doc["partitions"]}, doc["problems"]


def test_collect_carries_the_remote_log_metadata(tiered, tiered_manifest):
    """The manifest's copy of __remote_log_metadata equals what disk mode reads from the log dir:
    every remote segment (offsets, epochs, max timestamp, size, state and its history), what is
    unknown, the notes, the inferred partition counts."""
    from auditor.manifest import REMOTE_LOG_METADATA_FILE, read_remote_log_metadata
    t, m = tiered, tiered_manifest
    assert (m.dir / REMOTE_LOG_METADATA_FILE).is_file()
    assert any(line.startswith("remote log metadata:") and "-> remote_log_metadata" in line
               for line in m.result.cluster_parts), m.result.cluster_parts
    ours, notes = read_remote_log_metadata([m.dir])
    disk = rs.read_log_dirs([t.log_dir])
    assert notes == [] and ours.notes == disk.notes
    assert set(ours.partitions) == set(disk.partitions) and ours.incomplete == disk.incomplete
    assert (ours.partition_counts, ours.metadata_partitions, ours.records) == (
        disk.partition_counts, disk.metadata_partitions, disk.records)
    for key, rp in disk.partitions.items():
        mine = ours.partitions[key]
        assert mine.segments == rp.segments and mine.metadata_partitions == rp.metadata_partitions
        assert (mine.topic_id, mine.delete_state, mine.notes) == (rp.topic_id, rp.delete_state, rp.notes)
    assert sum(len(rp.segments) for rp in ours.partitions.values()) >= 20


def test_replay_check_from_the_manifest_equals_disk_mode_and_the_broker(tiered, tiered_manifest):
    """replay-check --manifest for every target of the scenario (before, inside, at the edges of
    and between every remote-only, remote-and-local and local segment, and after): the same
    verdicts, messages and evidence as --log-dir, with and without --remote-storage-dir, and the
    predicted offset equal to the broker's offsets_for_times (exact with the remote storage dir,
    else a range holding it). Before this, a remote-range target was WARN 'cannot tell' from a
    manifest."""
    t, m = tiered, tiered_manifest
    by_target: dict[int, dict[int, int]] = {}
    for p, pairs in t.answers.items():
        for target, broker in pairs:
            by_target.setdefault(target, {})[p] = broker
    counts = {"targets": 0, "compared": 0, "exact": 0, "range": 0, "remote": 0}
    for i, (target, brokers) in enumerate(sorted(by_target.items())):
        with_dir = ("--remote-storage-dir", t.remote_dir)
        runs = [with_dir] + ([()] if i % 3 == 0 else [])  # metadata-only answers: every third target
        for extra in runs:
            rc_disk, disk, _ = _replay_check_inproc("--topic", t.sc.topic, f"--at={target}", "--log-dir", t.log_dir, *extra)
            rc_man, man, problems = _replay_check_inproc("--topic", t.sc.topic, f"--at={target}",
                                                         "--manifest", m.dir, *extra)
            assert problems == [] and rc_man == rc_disk
            for p, broker in brokers.items():
                assert man[p] == disk[p], (target, p, man[p]["message"], disk[p]["message"])
                e = man[p]["evidence"][0]
                got = e["modern_offset"] if e["modern_offset"] is not None else -1
                if e["modern_exact"]:
                    assert got == broker, (target, p, e)
                    counts["exact"] += 1
                else:
                    assert extra == () and e["modern_offset"] <= broker <= e["modern_upper_offset"], (target, p, e)
                    counts["range"] += 1
                counts["remote"] += e.get("modern_tier") == "remote"
                counts["compared"] += 1
        counts["targets"] += 1
    print(f"\nreplay-check --manifest = --log-dir on {counts['compared']} partition answers for "
          f"{counts['targets']} targets: {counts['exact']} exact = offsets_for_times, {counts['range']} ranges "
          f"holding it (no --remote-storage-dir), {counts['remote']} answered from remote segments")
    assert counts["targets"] >= 100 and counts["remote"] >= 100 and counts["range"] >= 20


def test_an_old_manifest_without_remote_metadata_reads_as_before(tiered, tiered_manifest, tmp_path):
    """A manifest without the remote part (format 1, or a copy with it removed) still reads:
    replay-check --manifest runs, and a remote-only target is WARN 'cannot tell' (as before)."""
    from auditor.manifest import CLUSTER_METADATA_FILE, REMOTE_LOG_METADATA_FILE, read_remote_log_metadata
    from auditor.manifest_write import COMPLETE_FILE, finish_manifest
    t = tiered
    old = tmp_path / "old"
    shutil.copytree(tiered_manifest.dir, old,
                    ignore=shutil.ignore_patterns(REMOTE_LOG_METADATA_FILE, CLUSTER_METADATA_FILE, COMPLETE_FILE))
    finish_manifest(old, 0, "index")  # complete without the two parts, as an older collect left it
    assert read_remote_log_metadata([old]) == (None, [])
    stamps = t.sc.group_stamps[0]
    target = (stamps[3][0] + stamps[3][-1]) // 2
    rc, found, problems = _replay_check_inproc("--topic", t.sc.topic, f"--at={target}", "--manifest", old)
    assert problems == []
    for p in range(t.sc.partitions):
        assert found[p]["severity"] == "WARN" and "cannot tell" in found[p]["message"], found[p]["message"]
    rc, found, _ = _replay_check_inproc("--topic", t.sc.topic, f"--at={target}", "--manifest", tiered_manifest.dir)
    assert rc == 0 and all(f["severity"] == "PASS" for f in found.values())


# airflow db migrate (this module's first use of airflow_env) and two whole DAG runs: at load 33 they
# took more than the suite's 900 s per test
@pytest.mark.timeout(1800)
def test_pre_replay_dag_passes_the_remote_storage_dir(tiered, tiered_manifest, airflow_env):
    """The pre-replay DAG (real Airflow, dag.test()) on the broker's manifest with the
    ``remote_storage_dir`` param: the gate's answers in the remote range are exact and equal the
    broker's offsets_for_times; a target before partition 1's deleted records fails the gate (FAIL:
    the remote files show the real gap; without the directory it would be WARN 'cannot tell')."""
    t, m = tiered, tiered_manifest
    env = airflow_env
    stamps = t.sc.group_stamps[0]
    target = (stamps[3][0] + stamps[3][-1]) // 2
    base = {"topics": [t.sc.topic], "manifests": [str(m.dir)], "api": "modern", "remote_storage_dir": str(t.remote_dir)}
    safe = run_dag(env, "kafka_pre_replay_check", {**base, "at": str(target)})
    assert safe["tasks"] == {"replay_gate": "success", "start_replay": "success"}, safe
    for f in safe["xcom"]["replay_gate.replay_check"]["partitions"]:
        e = f["evidence"][0]
        assert e["modern_exact"] and e["modern_tier"] == "remote", e
        assert e["modern_offset"] == dict(t.answers[f["partition"]])[target]
    unsafe = run_dag(env, "kafka_pre_replay_check", {**base, "at": str(t.sc.first_ms - 1)})
    assert unsafe["tasks"] == {"replay_gate": "failed", "start_replay": "upstream_failed"}, unsafe
    found = {f["partition"]: f for f in unsafe["xcom"]["replay_gate.replay_check"]["partitions"]}
    assert found[1]["severity"] == "FAIL" and found[1]["evidence"][0]["modern_offset"] == TieredScenario.deleted_to


def test_audit_at_from_the_manifest_equals_the_log_dir_audit(tiered, tiered_manifest, tmp_path):
    """audit --at (the pipeline, local engine) from the manifest and from the log dir: the same
    replay findings for the tiered partitions (remote-range target: PASS, exact, the broker's
    answer), with and without --remote-storage-dir."""
    from auditor.audit import AuditRequest, run_audit
    t, m = tiered, tiered_manifest
    stamps = t.sc.group_stamps[0]
    target = (stamps[3][0] + stamps[3][-1]) // 2
    config = tmp_path / "audit.yaml"
    config.write_text("checks:\n  replay.safety:\n    api: modern\n")
    for remote_dir in (str(t.remote_dir), None):
        common = dict(replay_at_ms=target, replay_topics=[t.sc.topic], engine="local", config_path=str(config),
                      remote_storage_dir=remote_dir, as_of_ms=t.sc.first_ms + 10**9)
        replays = []
        for req in (AuditRequest(log_dirs=[str(t.log_dir)], depth="headers", **common),
                    AuditRequest(manifests=[str(m.dir)], **common)):
            out = run_audit(req)
            replays.append({f.partition: f for f in out.findings if f.code == "KLA010" and f.topic == t.sc.topic})
        disk, man = replays
        assert set(man) == {0, 1}
        for p, f in man.items():
            a, b = f.evidence[0], disk[p].evidence[0]
            differ = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
            assert differ == {} and (f.severity, f.message) == (disk[p].severity, disk[p].message), (p, differ)
            e = f.evidence[0]
            assert f.severity.name == "PASS" and e["modern_tier"] == "remote", f.message
            broker = dict(t.answers[p])[target]
            if remote_dir:
                assert e["modern_exact"] and e["modern_offset"] == broker
            else:
                assert e["modern_offset"] <= broker <= e["modern_upper_offset"]
