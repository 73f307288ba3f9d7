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

from harness.cli import kafka_audit
from harness.kafka import KafkaHarnessError, tools_log4j_config, wait_until

pytestmark = pytest.mark.live

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
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC"]
    cfg = tools_log4j_config(kc.classpath)
    if cfg is not None:
        cmd.append(f"-Dlog4j2.configurationFile={cfg}")
    cmd += ["-cp", kc.classpath, TOOL, "--bootstrap-server", kc.bootstrap_servers, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise KafkaHarnessError(f"kafka-reassign-partitions {' '.join(args)}: exit {proc.returncode}\n"
                                f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


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
        if t in TOPICS:
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
    wait_until(lambda: verify_done(kc, plan_file), 600, f"kafka-reassign-partitions --verify {plan_file.name}",
               interval_s=1.0)
    parts = json.loads(plan_file.read_text())["partitions"]
    expected = {(p["topic"], p["partition"]): {b: (None if d == "any" else d) for b, d in
                                               zip(p["replicas"], p.get("log_dirs") or ["any"] * len(p["replicas"]))}
                for p in parts}
    wait_until(lambda: settled(kc, expected), 300, f"the disks to hold exactly {plan_file.name}'s placement",
               interval_s=0.5)


def in_sync(kc) -> bool:
    """Every replica of the planted topics holds as many .log bytes as its partition's others."""
    sizes: dict[tuple[str, int], set[int]] = {}
    for (b, d, t, p), size in disk_replicas(kc).items():
        if t in TOPICS:
            sizes.setdefault((t, p), set()).add(size)
    return all(len(v) == 1 for v in sizes.values())


def all_log_dirs(kc) -> list[str]:
    return [str(d) for n in kc.nodes.values() for d in n.log_dirs]


def kla002(kc, tmp: Path, name: str) -> list[dict]:
    out = tmp / f"{name}.json"
    args = ["audit", *[a for d in all_log_dirs(kc) for a in ("--log-dir", d)], "--json", out, "--engine", "local",
            "--depth", "stat", "--exit-zero", "--no-progress"]
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
    kc = kafka_cluster_factory(brokers=3, log_dirs_per_broker=2, start=False,
                               broker_config={"file.delete.delay.ms": "500"})
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
    findings_before = kla002(kc, tmp, "audit-before")
    kinds = {("broker" if f.get("log_dir") is None else "log dir") for f in findings_before}
    assert kinds == {"broker", "log dir"}, findings_before

    out, summary_file, rollback = tmp / "plan.json", tmp / "plan-summary.json", tmp / "rollback.json"
    args = ["plan", *[a for d in all_log_dirs(kc) for a in ("--log-dir", d)], "--out", out, "--json", summary_file,
            "--rollback", rollback, "--throttle", THROTTLE]
    proc = kafka_audit(*args, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(summary_file.read_text())
    assert summary["target_reached"] and summary["bytes_moved"] > 0
    assert summary["lower_bound_bytes"] <= summary["bytes_moved"]
    assert summary["throttle"]["broker_configs"]["1"]["leader.replication.throttled.rate"] == str(THROTTLE)
    print(proc.stdout)

    before = disk_replicas(kc)
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
        "max_over_mean_before": max_over_mean(broker_bytes(before).values()),
        "max_over_mean_after": max_over_mean(broker_bytes(after).values())}))


def test_rollback_then_generate_side_by_side(skewed):
    """The rollback file puts the cluster back (the same skew); Kafka's --generate then moves far
    more bytes for a balance by count, not bytes."""
    kc, tmp = skewed
    summary = json.loads((tmp / "plan-summary.json").read_text())
    ours = json.loads((tmp / "figures-plan.json").read_text())
    run_reassignment(kc, tmp / "rollback.json")
    reset = disk_replicas(kc)
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
    gen_ratio = max_over_mean(broker_bytes(after).values())
    print(f"\n{'':>24} {'bytes moved':>12} {'max/mean after':>15}\n"
          f"{'kafka-audit plan':>24} {ours['measured']:>12} {ours['max_over_mean_after']:>15.3f}\n"
          f"{'kafka-reassign --generate':>24} {gen_moved:>12} {gen_ratio:>15.3f}\n"
          f"(before: max/mean {ours['max_over_mean_before']:.3f}; plan's lower bound {summary['lower_bound_bytes']})")
    (tmp / "figures-generate.json").write_text(json.dumps({"generate_moved": gen_moved, "generate_max_over_mean": gen_ratio}))
    assert_rf_and_racks(kc)
    assert ours["measured"] < gen_moved or ours["max_over_mean_after"] <= gen_ratio
