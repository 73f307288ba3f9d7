"""``kafka-audit plan`` executed by Kafka's own ``kafka-reassign-partitions`` on a real cluster.

One cluster per module: 3 KRaft brokers on 127.0.0.1, 2 log dirs each, ``broker.rack`` set
(rack-1, rack-2, rack-3). Planted skew: topics created with explicit replica assignments that
load broker 1 most and broker 3 least, every replica pinned (by the tool itself, before any
record) to one log dir of its broker, then records produced unevenly. Then: a real audit (KLA002
findings), ``plan`` -> ``kafka-reassign-partitions --execute`` -> ``--verify`` polled until the
tool answers complete -> the disks settle (no ``-future`` / ``-delete`` dir) -> a new audit.
The oracle for bytes moved is the file system: every (broker, log dir, partition) directory that
holds a replica after and did not before, its ``.log`` bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.cli import kafka_audit, kafka_audit_in_process
from harness.kafka import kafka_tool, wait_until

# the longest live module (410-510 s, mostly waiting on reassignments): handed out first
pytestmark = [pytest.mark.live, pytest.mark.schedule_first(cpu_s=450)]

RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3"}
TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
THROTTLE = 20 * 1024 * 1024
#: topic -> (replica sets, KiB of records per partition)
TOPICS = {
    "big": ([[1, 2], [2, 1], [1, 2], [1, 3], [1, 2], [2, 1]], [2600, 2000, 1800, 1500, 1200, 900]),
    "small": ([[1, 2], [1, 2], [2, 1], [1, 3], [2, 1], [1, 2], [3, 1], [1, 2]],
              [420, 380, 350, 300, 260, 220, 180, 140]),
    # RF 1 on broker 1: with RF 2 alone broker 1 could hold at most half the bytes (1.5x the mean)
    "solo": ([[1], [1]], [1500, 1500]),
}


# ---------------------------------------------------------------------------------------------- helpers
def reassign_tool(kc, *args: str, timeout: float = 180) -> str:
    return kafka_tool(kc, TOOL, *args, timeout=timeout)


def verify_done(kc, plan_file: Path) -> bool:
    """The tool's own answer: every 'Reassignment of ...' line says completed."""
    out = reassign_tool(kc, "--verify", "--reassignment-json-file", str(plan_file))
    lines = [ln for ln in out.splitlines() if ln.startswith("Reassignment of")]
    return bool(lines) and all("completed" in ln for ln in lines)


def disk_replicas(kc) -> dict[tuple[int, str, str, int], int]:
    """(broker, log dir, topic, partition) -> .log bytes of every live partition dir; also
    returns entries for -future/-delete dirs under the key topic '<kind>'."""
    out = {}
    for b, node in kc.nodes.items():
        for d in node.log_dirs:
            for p in d.iterdir():
                if not p.is_dir() or p.name.startswith("__cluster_metadata"):
                    continue
                size = sum(f.stat().st_size for f in p.glob("*.log"))
                if p.name.endswith(("-future", "-delete")) or "." in p.name.rsplit("-", 1)[-1]:
                    out[(b, str(d), "<" + p.name.rsplit("-", 1)[-1] + ">", len(out))] = size
                    continue
                topic, part = p.name.rsplit("-", 1)
                out[(b, str(d), topic, int(part))] = size
    return out


def settled(kc, expected: dict[tuple[str, int], dict[int, str | None]]) -> bool:
    """No -future/-delete dir left and each partition exactly on the brokers (and log dirs) expected."""
    disk = disk_replicas(kc)
    if any(k[2].startswith("<") for k in disk):
        return False
    where: dict[tuple[str, int], dict[int, str]] = {}
    for (b, d, t, p) in disk:
        if t in TOPICS or (t, p) in expected:
            if b in where.setdefault((t, p), {}):
                return False
            where[(t, p)][b] = d
    for tp, dirs in expected.items():
        if set(where.get(tp, {})) != set(dirs):
            return False
        if any(d is not None and where[tp][b] != d for b, d in dirs.items()):
            return False
    return True


def run_reassignment(kc, plan_file: Path, throttle: int | None = THROTTLE) -> None:
    args = ["--execute", "--reassignment-json-file", str(plan_file)]
    if throttle:
        args += ["--throttle", str(throttle), "--replica-alter-log-dirs-throttle", str(throttle)]
    reassign_tool(kc, *args)
    parts = json.loads(plan_file.read_text())["partitions"]
    expected = {(p["topic"], p["partition"]): {b: (None if d == "any" else d) for b, d in
                                               zip(p["replicas"], p.get("log_dirs") or ["any"] * len(p["replicas"]))}
                for p in parts}
    # the disks first (a cheap look), then the tool's own answer (a JVM each time; it also lifts the throttle)
    wait_until(lambda: settled(kc, expected), 600, f"the disks to hold exactly {plan_file.name}'s placement",
               interval_s=0.5)
    wait_until(lambda: verify_done(kc, plan_file), 300, f"kafka-reassign-partitions --verify {plan_file.name}",
               interval_s=1.0)


def in_sync(kc) -> bool:
    """Every replica of the planted topics holds as many .log bytes as its partition's others."""
    sizes: dict[tuple[str, int], set[int]] = {}
    for (b, d, t, p), size in disk_replicas(kc).items():
        if t in TOPICS:
            sizes.setdefault((t, p), set()).add(size)
    return all(len(v) == 1 for v in sizes.values())


def all_log_dirs(kc) -> list[str]:
    return [str(d) for n in kc.nodes.values() for d in n.log_dirs]


def kla002(kc, tmp: Path, name: str, html: bool = False) -> list[dict]:
    out = tmp / f"{name}.json"
    args = ["audit", *[a for d in all_log_dirs(kc) for a in ("--log-dir", d)], "--json", out, "--engine", "local",
            "--depth", "stat", "--exit-zero", "--no-progress", *(["--out", tmp / f"{name}.html"] if html else [])]
    proc = kafka_audit(*args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    found = []

    def walk(x):
        if isinstance(x, dict):
            if (x.get("code") == "KLA002" and "message" in x and "broker_id" in x
                    and x.get("severity") not in (None, "PASS")):
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return found


def bytes_moved(before: dict, after: dict) -> int:
    """The .log bytes of every replica directory present after and not before (same broker, log dir)."""
    return sum(size for key, size in after.items() if key[2] in TOPICS and key not in before)


def broker_bytes(disk: dict) -> dict[int, int]:
    out = {b: 0 for b in RACKS}
    for (b, _d, t, _p), size in disk.items():
        if t in TOPICS:
            out[b] += size
    return out


def _save_disk(path: Path, disk: dict) -> None:
    path.write_text(json.dumps([[*k, v] for k, v in disk.items()]))


def _load_disk(path: Path) -> dict:
    return {tuple(r[:4]): r[4] for r in json.loads(path.read_text())}


def dir_bytes(kc, disk: dict) -> dict[tuple[int, str], int]:
    out = {(b, str(d)): 0 for b, n in kc.nodes.items() for d in n.log_dirs}
    for (b, d, t, _p), size in disk.items():
        if t in TOPICS:
            out[(b, d)] += size
    return out


def max_over_mean(values) -> float:
    values = list(values)
    return max(values) / (sum(values) / len(values))


def assert_rf_and_racks(kc) -> None:
    md = kc.admin().list_topics(timeout=15)
    for t, (sets, _) in TOPICS.items():
        parts = md.topics[t].partitions
        assert len(parts) == len(sets)
        for p in parts.values():
            assert len(p.replicas) == len(sets[0]) == len(set(p.replicas)), (t, p.id, p.replicas)
            assert len({RACKS[b] for b in p.replicas}) == len(p.replicas), (t, p.id, p.replicas)
            assert sorted(p.isrs) == sorted(p.replicas), (t, p.id, p.isrs, p.replicas)


# ---------------------------------------------------------------------------------------------- fixture
@pytest.fixture(scope="module")
def skewed(kafka_cluster_factory, tmp_path_factory):
    # retention checked every second: the steady-state test's short-retention topic reaches its steady
    # state within seconds (no other topic here has a record older than its retention)
    kc = kafka_cluster_factory(brokers=3, log_dirs_per_broker=2, start=False,
                               broker_config={"file.delete.delay.ms": "500", "log.retention.check.interval.ms": "1000"})
    for b, node in kc.nodes.items():
        node.config["broker.rack"] = RACKS[b]
    kc.start()
    tmp = tmp_path_factory.mktemp("plan")
    pin = []
    for t, (sets, _) in TOPICS.items():
        kc.create_topic(t, replica_assignment=sets)
        for i, reps in enumerate(sets):
            # brokers 1 and 2: everything in data-0; broker 3: data-1
            pin.append({"topic": t, "partition": i, "replicas": reps,
                        "log_dirs": [str(kc.nodes[b].log_dirs[1 if b == 3 else 0]) for b in reps]})
    pin_file = tmp / "pin.json"
    pin_file.write_text(json.dumps({"version": 1, "partitions": pin}))
    run_reassignment(kc, pin_file, throttle=None)
    for t, (sets, kib) in TOPICS.items():
        for i, k in enumerate(kib):
            kc.produce(t, ((None, os.urandom(512).hex(), None) for _ in range(k)), partition=i, linger_ms=20)
    wait_until(lambda: in_sync(kc), 180, "every follower to hold its leader's bytes")
    return kc, tmp


# ---------------------------------------------------------------------------------------------- tests
def test_plan_executed_by_kafka_balances_the_cluster(skewed):
    kc, tmp = skewed
    findings_before = kla002(kc, tmp, "audit-before", html=True)
    kinds = {("broker" if f.get("log_dir") is None else "log dir") for f in findings_before}
    assert kinds == {"broker", "log dir"}, findings_before

    out, summary_file, rollback = tmp / "plan.json", tmp / "plan-summary.json", tmp / "rollback.json"
    args = ["plan", *[a for d in all_log_dirs(kc) for a in ("--log-dir", d)], "--out", out, "--json", summary_file,
            "--rollback", rollback, "--throttle", THROTTLE, "--balance", "current"]
    proc = kafka_audit(*args, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(summary_file.read_text())
    assert summary["target_reached"] and summary["bytes_moved"] > 0
    assert summary["lower_bound_bytes"] <= summary["bytes_moved"]
    assert summary["throttle"]["broker_configs"]["1"]["leader.replication.throttled.rate"] == str(THROTTLE)
    # the audit that found the skew carries the same plan, and its report shows it
    audit_plan = json.loads((tmp / "audit-before.json").read_text())["plan"]
    assert audit_plan["bytes_moved"] == summary["bytes_moved"] and audit_plan["target_reached"]
    assert 'id="plan"' in (tmp / "audit-before.html").read_text()
    print(proc.stdout)

    before = disk_replicas(kc)
    _save_disk(tmp / "before.json", before)
    run_reassignment(kc, out)
    after = disk_replicas(kc)
    measured = bytes_moved(before, after)
    print(f"planned {summary['bytes_moved']} bytes, measured {measured} bytes, lower bound "
          f"{summary['lower_bound_bytes']}; brokers max/mean {max_over_mean(broker_bytes(before).values()):.3f} -> "
          f"{max_over_mean(broker_bytes(after).values()):.3f}")
    assert abs(measured - summary["bytes_moved"]) <= 0.05 * summary["bytes_moved"], (measured, summary["bytes_moved"])
    assert_rf_and_racks(kc)
    findings_after = kla002(kc, tmp, "audit-after")
    assert findings_after == [], findings_after
    (tmp / "figures-plan.json").write_text(json.dumps({
        "planned": summary["bytes_moved"], "measured": measured, "lower_bound": summary["lower_bound_bytes"],
        "kla002_before": len(findings_before), "kla002_after": len(findings_after),
        "between_brokers": summary["bytes_moved_between_brokers"],
        "max_over_mean_before": max_over_mean(broker_bytes(before).values()),
        "max_over_mean_after": max_over_mean(broker_bytes(after).values()),
        "dirs_max_over_mean_before": max_over_mean(dir_bytes(kc, before).values()),
        "dirs_max_over_mean_after": max_over_mean(dir_bytes(kc, after).values())}))


def test_rollback_then_generate_side_by_side(skewed):
    """The rollback file puts the cluster back (the same skew: KLA002 again); then Kafka's own
    --generate (round-robin by partition count, sizes and log dirs ignored) is executed from the
    same state, and both tools' bytes moved and resulting max/mean are printed side by side."""
    kc, tmp = skewed
    summary = json.loads((tmp / "plan-summary.json").read_text())
    ours = json.loads((tmp / "figures-plan.json").read_text())
    run_reassignment(kc, tmp / "rollback.json")
    reset = disk_replicas(kc)
    # every replica back on its broker and in its log dir (sizes: the copies hold the same batches)
    assert {k[:4] for k in reset} == {k[:4] for k in _load_disk(tmp / "before.json")}
    assert kla002(kc, tmp, "audit-reset"), "the rollback should bring the skew back"

    topics = tmp / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in TOPICS]}))
    out = reassign_tool(kc, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3")
    proposed = out.split("Proposed partition reassignment configuration", 1)[1].strip().splitlines()[0]
    gen_file = tmp / "generate.json"
    gen_file.write_text(proposed)
    run_reassignment(kc, gen_file)
    after = disk_replicas(kc)
    gen_moved = bytes_moved(reset, after)
    gen_b, gen_d = max_over_mean(broker_bytes(after).values()), max_over_mean(dir_bytes(kc, after).values())
    gen_findings = kla002(kc, tmp, "audit-generate")
    print(f"\n{'':<26} {'bytes moved':>12} {'of which between brokers':>25} {'brokers max/mean':>17} "
          f"{'log dirs max/mean':>18} {'KLA002 after':>13}\n"
          f"{'kafka-audit plan':<26} {ours['measured']:>12} {ours['between_brokers']:>25} "
          f"{ours['max_over_mean_after']:>17.3f} {ours['dirs_max_over_mean_after']:>18.3f} {ours['kla002_after']:>13}\n"
          f"{'kafka-reassign --generate':<26} {gen_moved:>12} {gen_moved:>25} {gen_b:>17.3f} {gen_d:>18.3f} "
          f"{len(gen_findings):>13}\n"
          f"(before both: brokers max/mean {ours['max_over_mean_before']:.3f}, log dirs max/mean "
          f"{ours['dirs_max_over_mean_before']:.3f}, KLA002 {ours['kla002_before']}; the plan's lower bound "
          f"{summary['lower_bound_bytes']})")
    (tmp / "figures-generate.json").write_text(json.dumps({"generate_moved": gen_moved, "brokers": gen_b,
                                                           "dirs": gen_d, "kla002": len(gen_findings)}))
    assert_rf_and_racks(kc)


def plan_cli(kc, tmp: Path, name: str, *extra, in_process: bool = False) -> tuple[subprocess.CompletedProcess, dict, Path]:
    out, summary_file = tmp / f"{name}.json", tmp / f"{name}-summary.json"
    args = ["plan", *[a for d in all_log_dirs(kc) for a in ("--log-dir", d)], "--out", out, "--json", summary_file,
            "--throttle", THROTTLE, *extra]
    proc = kafka_audit_in_process(*args) if in_process else kafka_audit(*args, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc, json.loads(summary_file.read_text()), out


def test_drain_broker_3(skewed):
    kc, tmp = skewed
    proc, summary, out = plan_cli(kc, tmp, "drain", "--drain-broker", "3", "--balance", "current")
    print(proc.stdout)
    b3 = {b["broker_id"]: b for b in summary["brokers"]}[3]
    assert b3["drained"] and b3["bytes_before"] > b3["unmovable_bytes"] == b3["bytes_after"]   # its metadata log stays
    before = disk_replicas(kc)
    run_reassignment(kc, out)
    after = disk_replicas(kc)
    assert not [k for k in after if k[0] == 3 and k[2] in TOPICS], "broker 3 still holds replicas"
    measured = bytes_moved(before, after)
    print(f"drain: planned {summary['bytes_moved']} bytes, measured {measured}, lower bound {summary['lower_bound_bytes']}")
    assert abs(measured - summary["bytes_moved"]) <= 0.05 * summary["bytes_moved"]
    assert summary["lower_bound_bytes"] <= summary["bytes_moved"]
    assert_rf_and_racks(kc)


def test_headroom_forbids_the_obvious_log_dir(skewed):
    """Broker 3 is empty after the drain: both its log dirs are the obvious landing places. Its
    data-0 is declared small (--capacity): no copy may take it over 85%, so the big replicas land
    in data-1; Kafka puts them exactly there, and data-0 never passes the headroom on disk."""
    kc, tmp = skewed
    small = kc.nodes[3].log_dirs[0]
    cap = 3 * 1024 * 1024
    proc, summary, out = plan_cli(kc, tmp, "headroom", "--capacity", f"{small}={cap}", "--capacity", "1GiB",
                                  "--balance", "current")
    print(proc.stdout)
    assert any(str(small) in n and "headroom" in n for n in summary["notes"]), summary["notes"]
    peak = {(d["broker_id"], d["log_dir"]): d for d in summary["log_dirs"]}[(3, str(small))]
    assert peak["bytes_peak"] <= 0.85 * cap
    landed = [m for m in summary["moves"] if m["to_broker"] == 3]
    assert landed and any(m["to_dir"] != str(small) for m in landed)
    run_reassignment(kc, out)
    on_small = sum(s for k, s in disk_replicas(kc).items() if k[0] == 3 and k[1] == str(small))
    print(f"headroom: broker 3 {small.name}: {on_small} bytes on disk, plan's peak {peak['bytes_peak']}, "
          f"85% of the capacity {int(0.85 * cap)}; target reached: {summary['target_reached']}")
    assert on_small <= 0.85 * cap
    assert_rf_and_racks(kc)


def test_bootstrap_server_gives_the_plan_the_metadata_log_gives(skewed):
    """Replica sets, leaders and racks from the live cluster (Metadata, DescribeCluster) instead of
    the metadata log on disk: the same plan. With neither, exit 2 and one line."""
    kc, tmp = skewed
    _, from_disk, out_disk = plan_cli(kc, tmp, "from-disk", "--balance", "current")
    _, from_cluster, out_cluster = plan_cli(kc, tmp, "from-cluster", "--bootstrap-server", kc.bootstrap_servers,
                                            "--balance", "current")
    assert json.loads(out_disk.read_text()) == json.loads(out_cluster.read_text())
    assert [b["rack"] for b in from_cluster["brokers"]] == [RACKS[b] for b in sorted(RACKS)]
    assert from_disk["bytes_moved"] == from_cluster["bytes_moved"]
    no_meta = [str(d) for n in kc.nodes.values() for d in n.log_dirs[1:]]     # metadata.log.dir is data-0
    proc = kafka_audit("plan", *[a for d in no_meta for a in ("--log-dir", d)], timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--bootstrap-server" in proc.stderr


# ---------------------------------------------------------------------------------------------- steady state
#: RF 1 topics for the steady-state case: "keep" keeps everything (retention.ms -1), most of it on
#: broker 2; "ebb" (on broker 1, the largest today) is written with record times 2 h old under a
#: 3 h retention: the broker deletes it within the hour, so at steady state it weighs nothing
KEEP = [2] * 8 + [1, 1, 3, 3]
EBB = [1] * 4
KEEP_KIB, EBB_KIB = 1000, 3000


def steady_case_bytes(kc) -> tuple[dict[int, int], dict[tuple[int, str], int], dict[str, int]]:
    """.log bytes of keep and ebb: per broker, per log dir, per topic."""
    per_b, per_d, per_t = {b: 0 for b in RACKS}, {(b, str(d)): 0 for b, n in kc.nodes.items() for d in n.log_dirs}, {}
    for (b, d, t, _p), size in disk_replicas(kc).items():
        if t in ("keep", "ebb"):
            per_b[b] += size
            per_d[(b, d)] += size
            per_t[t] = per_t.get(t, 0) + size
    return per_b, per_d, per_t


def test_default_plan_balances_the_steady_state_and_the_brokers_reach_it(skewed):
    """Today broker 1 is the heaviest (ebb); at retention's steady state broker 2 is (keep). The
    default plan (steady) moves keep off broker 2 and leaves ebb, where ``--balance current`` would
    move ebb; Kafka executes it; then ebb's retention is brought forward (retention.ms 1 h: its
    records are 2 h old) so the brokers reach the steady state now rather than within the hour,
    and what they hold is what the plan promised, balanced. Runs after the tests of the planted topics: it deletes them."""
    import time

    kc, tmp = skewed
    started = time.monotonic()
    for f in kc.admin().delete_topics(list(TOPICS), operation_timeout=30).values():
        f.result(timeout=30)
    # (their -delete dirs go while the new topics are made: the pinning below waits until none is left)
    kc.create_topic("keep", replica_assignment=[[b] for b in KEEP], config={"retention.ms": "-1"})
    kc.create_topic("ebb", replica_assignment=[[b] for b in EBB], config={"retention.ms": str(3 * 3600_000)})
    pin, nth = [], {}
    for t, brokers in (("keep", KEEP), ("ebb", EBB)):
        for i, b in enumerate(brokers):
            k = nth[(t, b)] = nth.get((t, b), -1) + 1      # each broker's partitions of a topic alternate its dirs
            pin.append({"topic": t, "partition": i, "replicas": [b], "log_dirs": [str(kc.nodes[b].log_dirs[k % 2])]})
    (tmp / "pin-steady.json").write_text(json.dumps({"version": 1, "partitions": pin}))
    run_reassignment(kc, tmp / "pin-steady.json", throttle=None)
    two_hours_ago = int(time.time() * 1000) - 2 * 3600_000
    for t, brokers, kib in (("keep", KEEP, KEEP_KIB), ("ebb", EBB, EBB_KIB)):
        for i in range(len(brokers)):
            # record times 10 ms apart: a record-time span the projection reads a rate from (idle: 2 h old)
            kc.produce(t, ((None, os.urandom(512).hex(), two_hours_ago + 10 * j) for j in range(kib)), partition=i,
                       linger_ms=20)

    wait_until(lambda: not any(k[2] in TOPICS or k[2].startswith("<") for k in disk_replicas(kc)), 120,
               "the planted topics' dirs to be gone")
    phases = {"old topics deleted, new ones created, pinned, written": time.monotonic() - started}
    proc, steady, out = plan_cli(kc, tmp, "steady", in_process=True)
    print(proc.stdout)
    _, current, _ = plan_cli(kc, tmp, "current", "--balance", "current", in_process=True)
    assert steady["balance"] == "steady" and steady["target_reached"], steady["reasons"]
    # the file systems under the log dirs bound the headroom; below it, the same plan
    _, on_disk, out_disk = plan_cli(kc, tmp, "steady-disk", "--capacity-from-disk", in_process=True)
    phases["three plans"] = time.monotonic() - started - sum(phases.values())
    assert on_disk["capacities_known"] and sorted(d for f in on_disk["file_systems"] for d in f["log_dirs"]) == sorted(
        all_log_dirs(kc))
    if all(f["peak_fraction"] < 0.8 for f in on_disk["file_systems"]):
        assert json.loads(out_disk.read_text()) == json.loads(out.read_text())
    assert steady["steady_state"]["replicas_at_bytes_today"] == 0, steady["steady_state"]
    moved = {m["topic"] for m in steady["moves"] if m["kind"] == "broker"}
    assert moved == {"keep"} and all(m["from_broker"] == 2 for m in steady["moves"] if m["kind"] == "broker")
    assert "ebb" in {m["topic"] for m in current["moves"] if m["kind"] == "broker"}, current["moves"]
    promised = {b["broker_id"]: b["steady_bytes_after"] - b["unmovable_bytes"] for b in steady["brokers"]}
    today_after = {b["broker_id"]: b["bytes_after"] - b["unmovable_bytes"] for b in steady["brokers"]}
    assert max_over_mean(today_after.values()) > 1.10        # today's bytes are left skewed on purpose

    run_reassignment(kc, out)
    phases["executed"] = time.monotonic() - started - sum(phases.values())
    kc.alter_topic_config("ebb", {"retention.ms": 3600_000})
    wait_until(lambda: steady_case_bytes(kc)[2].get("ebb", 0) == 0, 120, "retention to delete ebb's records")
    phases["ebb at steady state"] = time.monotonic() - started - sum(phases.values())
    per_b, per_d, per_t = steady_case_bytes(kc)
    print(f"steady state: promised per broker {promised}, held {per_b} (keep {per_t.get('keep')} bytes); "
          + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    mean = sum(per_b.values()) / len(per_b)
    for b, held in per_b.items():
        assert abs(held - promised[b]) <= 0.01 * mean, (b, held, promised[b])
    assert max_over_mean(per_b.values()) <= 1.10
    for b, node in kc.nodes.items():
        dirs = [per_d[(b, str(d))] for d in node.log_dirs]
        assert max(dirs) <= 1.10 * (sum(dirs) / len(dirs)), (b, dirs)


def test_bootstrap_server_reads_the_retention_rules_the_metadata_log_holds(skewed):
    """The steady state's rules from the live cluster (DescribeConfigs of the topics and of a broker)
    are those the KRaft metadata log on disk holds, the cleaner's settings included: a compact topic's
    min.cleanable.dirty.ratio / min.compaction.lag.ms and the cluster-wide log.cleaner.backoff.ms; and
    the cluster also answers its static settings, which the log does not hold (the module's
    log.retention.check.interval.ms of 1 s). The topic is empty and deleted at the end, the default
    set back: last in the module."""
    from auditor.cli.plan_input import metadata_from_disk
    from auditor.cli.plan_steady import rules_from_cluster, rules_from_state

    kc, _tmp = skewed
    log_dirs = [str(d) for n in kc.nodes.values() for d in n.log_dirs]

    def on_disk() -> dict:
        return rules_from_state(metadata_from_disk(log_dirs, [])[3])

    kc.create_topic("compacted", config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2",
                                         "min.compaction.lag.ms": "60000"})
    # the cluster-wide default through Kafka's kafka-configs (the Python client names no default resource)
    kafka_tool(kc, "kafka.admin.ConfigCommand", "--entity-type", "brokers", "--entity-default", "--alter",
               "--add-config", "log.cleaner.backoff.ms=7000")
    try:
        wait_until(lambda: (r := on_disk().get("compacted")) is not None and r.cleaner_backoff_s == 7.0, 30,
                   "the metadata log holding the new topic and the cluster default")
        disk, live = on_disk(), rules_from_cluster(kc.bootstrap_servers)
        got = live["compacted"]
        assert (got.compacts, got.deletes, got.dirty_ratio, got.compaction_lag_s, got.cleaner_backoff_s) == \
            (True, False, 0.2, 60.0, 7.0), got
        topics = sorted(set(disk) & set(live))   # this module's topics by now (the steady-state case replaced its first ones)
        assert "compacted" in topics and len(topics) >= 3, (sorted(disk), sorted(live))
        dynamic = ("retention_s", "retention_bytes", "segment_s", "deletes", "compacts", "tiered", "delete_delay_s",
                   "dirty_ratio", "compaction_lag_s", "cleaner_backoff_s")
        for t in topics:
            assert {k: getattr(live[t], k) for k in dynamic} == {k: getattr(disk[t], k) for k in dynamic}, t
            # what the metadata log cannot hold, the brokers' static server.properties, the cluster answers
            assert live[t].check_interval_s == 1.0 and disk[t].check_interval_s == 300.0, t
    finally:
        kafka_tool(kc, "kafka.admin.ConfigCommand", "--entity-type", "brokers", "--entity-default", "--alter",
                   "--delete-config", "log.cleaner.backoff.ms")
        kc.admin().delete_topics(["compacted"])["compacted"].result(timeout=30)
