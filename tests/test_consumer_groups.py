"""Consumer groups read from ``__consumer_offsets`` on disk, against a real broker's own answers.

One real Kafka 4.2.1 broker per module (tests/harness/groups.py): 25 groups (classic members,
KIP-848 members, simple commit-only groups with metadata, a deleted group, committed and aborted
transactional commits, a lagging group, a commit below the log start, a commit to a deleted
topic), ``__consumer_offsets`` rolled and compacted by the cleaner. Oracles:

* the broker's ``list_consumer_group_offsets`` for every group (committed offsets, metadata);
* ``describe_consumer_groups`` (protocol type and state);
* the same audit of the same manifest on local disk, for the one collected into a real S3 server
  (s3proxy, tests/harness/s3proxy.py);
* Kafka's ``DumpLogSegments --offsets-decoder`` over every ``__consumer_offsets`` partition,
  folded as the coordinator replays (tests/harness/offsets_dump.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from auditor.cluster.consumer_groups import OFFSETS_TOPIC, offsets_partition_dirs, read_groups
from checks.framework.base import Severity
from harness.cli import kafka_audit
from harness.groups import (GROUP_BROKER_CONFIG, build_group_scenario, describe_groups, list_committed_offsets,
                            wait_offsets_cleaned, wait_offsets_settled)
from harness.log_dirs import copy_live_dir
from harness.offsets_dump import dump_offsets, latest_offsets
from harness.offsets_replay import assert_same_both_ways
from harness.s3proxy import s3_server  # noqa: F401 - the module's S3 server (one test collects into it)

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def groups_cluster(kafka_cluster_factory):
    kc = kafka_cluster_factory(broker_config=GROUP_BROKER_CONFIG)
    scenario = build_group_scenario(kc)
    cleaned = wait_offsets_cleaned(kc)
    # the tests compare the files with the broker's answers: nothing may rewrite them meanwhile
    wait_offsets_settled(kc, sorted(set(scenario.groups) - set(scenario.deleted_groups)))
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


def test_c_and_python_replays_agree_on_the_real_broker(groups_cluster, monkeypatch):
    # the broker's multi-partition commit batches, KIP-848 records, transactions and cleaned
    # segments: the C replay of plain batches (auditor/formats/_coffsets.c) and the pure-Python
    # one give the same stores, open transactions, notes and groups
    kc, _, _ = groups_cluster
    (folds, groups, notes, records), c_records = assert_same_both_ways(kc.log_dirs(1), monkeypatch)
    assert len(folds) == 3 and len(groups) >= 20 and notes == []
    assert 0 < c_records < 2 * records      # most records folded in C, the transactional ones in Python


# ------------------------------------------------------------------------------ the commands


def test_groups_command_json(groups_cluster):
    import json
    kc, scenario, _ = groups_cluster
    proc = kafka_audit("groups", *kc.log_dirs(1), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    import jsonschema  # the published schema of `groups --json` (reports/groups.schema.json)
    jsonschema.validate(doc, json.loads((Path(__file__).resolve().parents[1] / "reports" / "groups.schema.json").read_text()))
    live = doc["groups"]
    assert "deleted-group" not in live and "deleted-group" in doc["deleted_groups"]
    listed = list_committed_offsets(kc, sorted(live))
    n = 0
    for g, entry in live.items():
        got = {(t, int(p)): (v["committed_offset"], _strip_nul(v["metadata"]))
               for t, parts in entry["topics"].items() for p, v in parts.items()}
        assert got == listed[g], g
        for t, parts in entry["topics"].items():
            for p, v in parts.items():
                start = kc.list_offsets(t, int(p), "earliest")[0]
                end = kc.list_offsets(t, int(p), "latest")[0]
                assert (v["log_start_offset"], v["log_end_offset"]) == (start, end), (g, t, p)
                assert v["lag_records"] == end - max(v["committed_offset"], start)
                assert v["lag_bytes"] >= 0 and (v["lag_bytes"] > 0) == (v["lag_records"] > 0)
                assert v["commit_time_utc"].endswith("Z")
                n += 1
    assert len(live) >= 20 and n >= 90
    assert live["kip848-0"]["protocol"] == "consumer" and live["simple-0"]["protocol"] == "classic"
    text = kafka_audit("groups", *kc.log_dirs(1))
    assert text.returncode == 0 and "below-start" in text.stdout and "deleted-group" not in text.stdout


def _cli_inprocess(*args) -> tuple[int, str]:
    """The real command in this interpreter (no interpreter start and imports per call)."""
    import contextlib
    import io
    from auditor.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in args])
    return rc, out.getvalue()


def test_replay_check_group_equals_reset_offsets_dry_run(groups_cluster, kafka_classpath):
    """replay-check --group (disk and protocol modes) against the real kafka-consumer-groups
    --reset-offsets --to-datetime --dry-run, for targets before the data, inside it and after the
    newest record (where the tool falls back to the log end offset)."""
    import json
    import time
    from harness.groups import ConsumerGroupsTool
    kc, scenario, _ = groups_cluster
    tool = ConsumerGroupsTool(kafka_classpath, kc.bootstrap_servers)
    # one group of every kind the scenario made (classic, KIP-848 consumer, simple, transactional
    # commit, lagging, below the log start, a deleted topic's, ...) that holds committed offsets
    kinds: dict[str, str] = {}
    for name, info in sorted(scenario.groups.items()):
        if name not in scenario.deleted_groups and scenario.expected.get(name):
            kinds.setdefault(info["kind"], name)
    groups = sorted(set(kinds.values()) | {"simple-3", "kip848-3", "below-start", "lagging-group"})
    assert len(groups) >= 7, kinds
    now = int(time.time() * 1000)
    targets = {"before the data": scenario.t0_ms - 3_600_000,
               "inside the data": scenario.t0_ms + 13 * 60_000 + 500,
               "after the newest record": now + 3_600_000}
    compared = 0
    for label, target in targets.items():
        dry_runs = tool.reset_to_datetime_dry_run_groups(groups, target)
        for group in groups:
            theirs = dry_runs[group]
            assert theirs, (group, label)
            for mode in (("--log-dir", *kc.log_dirs(1)), ("--bootstrap-server", kc.bootstrap_servers)):
                args = ["replay-check", "--group", group, "--at", str(target), "--json"]
                for i in range(1, len(mode)):
                    args += [mode[0], mode[i]]
                rc, out = _cli_inprocess(*args)
                doc = json.loads(out)
                # the exact exit code of the verdict the document states (0 safe, 1 unsafe)
                assert rc == (0 if doc["safe"] else 1), (group, label, mode[0], rc, doc["worst"], doc["fail_on"])
                assert doc["safe"] == (Severity.parse(doc["worst"]) < Severity.parse(doc["fail_on"])), doc
                got = {(p["topic"], p["partition"]): p["reset_offset"] for p in doc["group"]["partitions"]}
                assert got == theirs, (group, label, mode[0])
                compared += len(got)
                for p in doc["group"]["partitions"]:
                    c = p["committed_offset"]
                    assert p["records_reread"] == max(c - p["reset_offset"], 0)
                    assert p["records_skipped"] == max(p["reset_offset"] - c, 0)
                    if mode[0] == "--log-dir":
                        # bytes of the batches between the two positions (batch granularity: the data
                        # was produced 5 records per batch, so offsets 5 apart are in different batches)
                        moved = p["bytes_reread"] + p["bytes_skipped"]
                        assert moved >= 0 and min(p["bytes_reread"], p["bytes_skipped"]) == 0
                        if abs(p["reset_offset"] - max(c, p["log_start_offset"])) >= 5:
                            assert moved > 0, p
                    else:
                        assert p["bytes_reread"] is None and p["bytes_skipped"] is None
    assert compared >= 80
    print(f"\nreplay-check --group vs kafka-consumer-groups --dry-run: {len(groups)} groups "
          f"({', '.join(groups)}) x {len(targets)} targets x 2 modes, {compared} partitions")
    # the subprocess path (exit code, JSON on stdout) once
    proc = kafka_audit("replay-check", "--group", "below-start", "--at", targets["inside the data"], "--log-dir",
                kc.log_dirs(1)[0], "--json")
    assert proc.returncode in (0, 1) and json.loads(proc.stdout)["group"]["group"] == "below-start"
    assert kafka_audit("replay-check", "--group", "no-such-group", "--at", targets["inside the data"], "--log-dir",
                kc.log_dirs(1)[0]).returncode == 3


def test_group_checks_on_the_real_cluster(groups_cluster):
    """KLA060/061/062 over the broker's own files: the scan's rows, the groups read from disk,
    the live topic configs (retention.ms)."""
    import time
    from auditor.engines.local.checks import run_local
    from auditor.cluster.consumer_groups import commit_rows
    from auditor.scan import scan_log_dirs
    from checks.framework.base import AuditContext, Severity
    from checks.framework.config import Config

    kc, scenario, _ = groups_cluster
    scan = scan_log_dirs(kc.log_dirs(1), depth="headers")
    groups = read_groups(kc.log_dirs(1))
    topics = sorted(scenario.topics)
    ctx = AuditContext(as_of_ms=int(time.time() * 1000), config=Config(None),
                       topic_configs={t: kc.topic_config(t) for t in topics},
                       group_offsets=commit_rows(groups))
    names = ["groups.below_log_start", "groups.time_to_loss", "groups.missing_partition"]
    findings = [f for f in run_local(scan.segments, scan.partitions, ctx, stats={}, names=names)
                if f.severity != Severity.PASS]
    below = [f for f in findings if f.code == "KLA060"]
    assert [(f.topic, f.partition, f.evidence[0]["group"], f.evidence[0]["records_gone"]) for f in below] == \
        [("trimmed", 0, "below-start", 20)]
    loss = [f for f in findings if f.code == "KLA061"]
    assert {(f.topic, f.partition) for f in loss} == {("lagging", 0), ("lagging", 1)}
    for f in loss:
        assert f.severity == Severity.WARN and f.evidence[0]["group"] == "lagging-group"
        # the first lagging segment's newest record is 7 d - 1 h old: due in about 3 h
        assert 2 * 3_600_000 < f.evidence[0]["time_to_loss_ms"] < 4 * 3_600_000, f.evidence[0]
        assert sum(e["size_bytes"] for e in f.evidence) > 0
    # Kafka 4.2 dropped gone-group's offsets of the deleted topic itself: nothing left to report
    assert [f for f in findings if f.code == "KLA062"] == []
    assert {f.code for f in findings} == {"KLA060", "KLA061"}

    # KLA062's two sources on the same real files, with the 'lagging' topic's dirs left out of the
    # rows (as if its broker were not audited): the scanned dirs call its partitions missing and say
    # so; the broker's own KRaft metadata log knows they exist and finds nothing
    from auditor.cluster.metadata_audit import PartitionMoves
    from auditor.cluster.metadata_log import read_metadata_log
    rows = [r for r in scan.partitions if r["topic"] != "lagging"]
    segs = [r for r in scan.segments if r["topic"] != "lagging"]
    by_dirs = [f for f in run_local(segs, rows, ctx, stats={}, names=["groups.missing_partition"])
               if f.severity != Severity.PASS]
    assert [(f.evidence[0]["group"], sorted((e["topic"], e["partition"]) for e in f.evidence)) for f in by_dirs] == \
        [("lagging-group", [("lagging", 0), ("lagging", 1)])], [f.message for f in by_dirs]
    assert "no KRaft metadata log was readable" in by_dirs[0].message
    assert {e["source"] for e in by_dirs[0].evidence} == {"scanned partition dirs"}
    ctx.partition_moves = PartitionMoves.from_log(read_metadata_log(kc.log_dirs(1), history=True))
    assert ("lagging", 0) in ctx.partition_moves.assignments
    assert [f for f in run_local(segs, rows, ctx, stats={}, names=["groups.missing_partition"])
            if f.severity != Severity.PASS] == []


def test_groups_and_replay_check_from_a_manifest(groups_cluster, kafka_classpath, tmp_path):
    """The same answers from a `kafka-audit collect` manifest (committed offsets from the
    __consumer_offsets files at the recorded paths, partition facts from the manifest's rows)."""
    import json
    from harness.groups import ConsumerGroupsTool
    kc, scenario, _ = groups_cluster
    manifest = tmp_path / "manifest"
    proc = kafka_audit("collect", "--out", manifest, "--depth", "headers", "--no-progress", *kc.log_dirs(1))
    assert proc.returncode == 0, proc.stderr
    from_disk = json.loads(kafka_audit("groups", *kc.log_dirs(1), "--json").stdout)["groups"]
    proc = kafka_audit("groups", "--manifest", manifest, "--json")
    assert proc.returncode == 0, proc.stderr
    from_manifest = json.loads(proc.stdout)["groups"]
    strip = ("lag_bytes",)   # the manifest was taken after the disk read: compare what cannot move
    assert {g: {t: {p: {k: v for k, v in e.items() if k not in strip} for p, e in parts.items()}
                for t, parts in d["topics"].items()} for g, d in from_manifest.items()} == \
        {g: {t: {p: {k: v for k, v in e.items() if k not in strip} for p, e in parts.items()}
             for t, parts in d["topics"].items()} for g, d in from_disk.items()}
    target = scenario.t0_ms + 21 * 60_000 + 250
    theirs = ConsumerGroupsTool(kafka_classpath, kc.bootstrap_servers).reset_to_datetime_dry_run("simple-6", target)
    proc = kafka_audit("replay-check", "--group", "simple-6", "--at", target, "--manifest", manifest, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["mode"] == "manifest"
    assert {(p["topic"], p["partition"]): p["reset_offset"] for p in doc["group"]["partitions"]} == theirs


def test_audit_from_a_manifest_has_the_groups_disk_mode_has(groups_cluster, tmp_path):
    """Manifests carry __consumer_offsets decoded (consumer_groups.jsonl.gz): the groups read back
    equal read_groups on the log dir (every group, live and deleted, every committed offset), and
    the audit from the manifest gives the same groups.* findings (KLA060/061/062) as the audit of
    the log dir. Before, an audit from manifests had no consumer groups at all."""
    import time
    from auditor.audit import AuditRequest, run_audit
    from auditor.manifest import CONSUMER_GROUPS_FILE, collect_manifest, read_consumer_groups
    kc, _scenario, _ = groups_cluster
    manifest = tmp_path / "manifest"
    res = collect_manifest(kc.log_dirs(1), manifest, "headers")
    assert (manifest / CONSUMER_GROUPS_FILE).is_file(), res.cluster_parts
    disk = read_groups(kc.log_dirs(1))
    carried, notes = read_consumer_groups([manifest])
    assert notes == [] and carried.notes == disk.notes and carried.partitions == disk.partitions
    assert {g: grp.to_dict() for g, grp in carried.groups.items()} == {g: grp.to_dict() for g, grp in disk.groups.items()}
    assert len(carried.live) >= 20
    as_of_ms = int(time.time() * 1000)
    codes = ("KLA060", "KLA061", "KLA062")
    outcomes = [run_audit(AuditRequest(engine="local", as_of_ms=as_of_ms, depth="headers", **src))
                for src in ({"log_dirs": [str(d) for d in kc.log_dirs(1)]}, {"manifests": [str(manifest)]})]
    found = [sorted((f.code, f.severity.name, f.topic or "", f.partition if f.partition is not None else -1,
                     f.message, repr(f.evidence)) for f in o.findings if f.code in codes) for o in outcomes]
    assert found[1] == found[0]
    assert {f[0] for f in found[0] if f[1] != "PASS"} >= {"KLA060", "KLA061"}, found[0]
    assert len(outcomes[1].groups.live) == len(outcomes[0].groups.live)


def test_group_commands_from_a_manifest_need_no_offsets_files(groups_cluster, kafka_classpath, tmp_path):
    """replay-check --group and groups from a manifest that carries the groups, with the
    __consumer_offsets files no longer reachable at the recorded paths (collected from a copy of
    the log dir, then the copy's __consumer_offsets dirs removed): the resets equal Kafka's
    kafka-consumer-groups --reset-offsets --to-datetime --dry-run, the groups equal the log dir's."""
    import json
    from auditor.manifest import collect_manifest
    from harness.groups import ConsumerGroupsTool
    kc, scenario, _ = groups_cluster
    copy = tmp_path / "copy" / kc.log_dirs(1)[0].name
    copy_live_dir(kc.log_dirs(1)[0], copy)   # shutil.copytree fails when a checkpoint's .tmp vanishes
    manifest = tmp_path / "manifest"
    collect_manifest([copy], manifest, "headers")
    for d in copy.glob(f"{OFFSETS_TOPIC}-*"):
        shutil.rmtree(d)
    target = scenario.t0_ms + 21 * 60_000 + 250
    theirs = ConsumerGroupsTool(kafka_classpath, kc.bootstrap_servers).reset_to_datetime_dry_run("simple-6", target)
    proc = kafka_audit("replay-check", "--group", "simple-6", "--at", target, "--manifest", manifest, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["mode"] == "manifest"
    assert {(p["topic"], p["partition"]): p["reset_offset"] for p in doc["group"]["partitions"]} == theirs
    proc = kafka_audit("groups", "--manifest", manifest, "--json")
    assert proc.returncode == 0, proc.stderr
    from_disk = json.loads(kafka_audit("groups", *kc.log_dirs(1), "--json").stdout)["groups"]
    committed = {g: {t: {p: e["committed_offset"] for p, e in parts.items()} for t, parts in d["topics"].items()}
                 for g, d in json.loads(proc.stdout)["groups"].items()}
    assert committed == {g: {t: {p: e["committed_offset"] for p, e in parts.items()} for t, parts in d["topics"].items()}
                         for g, d in from_disk.items()}
    assert kafka_audit("replay-check", "--group", "no-such-group", "--at", target, "--manifest", manifest).returncode == 3


def test_collected_into_s3_from_the_running_broker_audits_as_on_local_disk(groups_cluster, kafka_classpath,
                                                                           s3_server, tmp_path):  # noqa: F811
    """``collect --out s3://`` on the running broker's log dir (as on a broker, a process with the
    standard AWS environment; s3proxy on 127.0.0.1): the audit of the objects (``--manifest
    s3://``, the driver reading through pyarrow's S3 client) equals the audit of the same objects
    copied to local disk, finding for finding; ``replay-check --group`` from S3 equals Kafka's
    ``--reset-offsets --to-datetime --dry-run``."""
    import json
    from harness.groups import ConsumerGroupsTool
    kc, scenario, _ = groups_cluster
    env = s3_server.env()
    proc = kafka_audit("collect", "--out", "s3://audits/live/b1", "--no-progress", *kc.log_dirs(1), env=env)
    assert proc.returncode == 0, proc.stderr
    local = tmp_path / "live" / "b1"
    shutil.copytree(s3_server.data / "audits" / "live" / "b1", local)   # the objects, byte for byte
    assert (local / "_complete.json").is_file() and (local / "consumer_groups.jsonl.gz").is_file()
    docs = {}
    for where, spec in (("s3", "s3://audits/live/*"), ("disk", f"{tmp_path / 'live'}/*")):
        out = tmp_path / f"{where}.json"
        proc = kafka_audit("audit", "--engine", "local", "--manifest", spec, "--json", out,
                           "--as-of", "2030-01-01T00:00:00Z", env=env)
        assert proc.returncode in (0, 1), proc.stderr
        docs[where] = json.loads(out.read_text())
    assert docs["s3"]["findings"] == docs["disk"]["findings"]
    assert docs["s3"]["counts"] == docs["disk"]["counts"] and docs["s3"]["totals"] == docs["disk"]["totals"]
    assert {f["code"] for f in docs["s3"]["findings"] if f["severity"] != "PASS"} >= {"KLA060", "KLA061"}
    target = scenario.t0_ms + 21 * 60_000 + 250
    theirs = ConsumerGroupsTool(kafka_classpath, kc.bootstrap_servers).reset_to_datetime_dry_run("simple-6", target)
    proc = kafka_audit("replay-check", "--group", "simple-6", "--at", target, "--manifest", "s3://audits/live",
                       "--json", env=env)
    assert proc.returncode in (0, 1), proc.stderr
    assert {(p["topic"], p["partition"]): p["reset_offset"] for p in json.loads(proc.stdout)["group"]["partitions"]} \
        == theirs
