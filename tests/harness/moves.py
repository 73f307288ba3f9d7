"""Real replica moves on a harness cluster: inter-broker reassignment and log-dir moves.

Kafka's own Java Admin API does the work (``java/MoveReplicas.java``, run in Java's source-file
mode against the harness's Kafka jars), because confluent-kafka's Python AdminClient has neither
``alterPartitionReassignments`` nor ``alterReplicaLogDirs``. Both calls return when the move has
completed, on the brokers' disks too: the Admin API reports a move done a moment before the
broker has renamed the old replica's directory (``LogManager.replaceCurrentWithFutureLog``
updates its maps first, then renames the source dir to ``-delete``; a replica removed by a
reassignment is renamed when its broker applies the metadata change), so each call then waits
until only the new places hold a ``topic-partition`` directory.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Sequence

from harness.kafka import KafkaCluster, KafkaHarnessError, wait_until

SOURCE = Path(__file__).parent / "java" / "MoveReplicas.java"
#: How long the disk may lag the Admin API's "done" (a loaded machine: JVM stalls of 30 s happen).
DISK_WAIT_S = 120.0


def _run(cluster: KafkaCluster, *args: str) -> None:
    cmd = ["java", "-cp", cluster.classpath, str(SOURCE), cluster.bootstrap_servers, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 or "done" not in proc.stdout:
        raise KafkaHarnessError(f"{' '.join(args)} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")


def _replica_dirs(cluster: KafkaCluster, topic: str, partition: int) -> dict[int, list[Path]]:
    """node -> every log dir of it holding a plain ``topic-partition`` dir or its ``-future`` dir."""
    out: dict[int, list[Path]] = {}
    for node_id, node in cluster.nodes.items():
        for d in node.log_dirs:
            if (d / f"{topic}-{partition}").is_dir() or any(d.glob(f"{topic}-{partition}.*-future")):
                out.setdefault(node_id, []).append(d)
    return out


def _wait_disk(cluster: KafkaCluster, topic: str, partition: int, want: dict[int, Path | None], what: str) -> None:
    """Until exactly the nodes of ``want`` hold the partition, each in one log dir (the given
    one, or any when None), with a ``.log`` and no ``-future`` dir left."""
    deadline = time.monotonic() + DISK_WAIT_S
    while True:
        found = _replica_dirs(cluster, topic, partition)
        if set(found) == set(want) and all(
                len(dirs) == 1 and (want[n] is None or dirs[0] == Path(want[n]))
                and any((dirs[0] / f"{topic}-{partition}").glob("*.log")) for n, dirs in found.items()):
            return
        if time.monotonic() > deadline:
            raise KafkaHarnessError(f"{what}: done for the Admin API, but after {DISK_WAIT_S:.0f} s the disks "
                                    f"still hold {topic}-{partition} (or its -future dir) in {found}")
        time.sleep(0.1)


def reassign(cluster: KafkaCluster, topic: str, partition: int, replicas: Sequence[int]) -> None:
    """alterPartitionReassignments to ``replicas``; waits until no reassignment is ongoing and
    only the brokers of ``replicas`` hold the partition's directory."""
    _run(cluster, "replicas", topic, str(partition), ",".join(map(str, replicas)))
    _wait_disk(cluster, topic, partition, {b: None for b in replicas},
               f"reassignment of {topic}-{partition} to {list(replicas)}")


def move_log_dir(cluster: KafkaCluster, topic: str, partition: int, broker: int, log_dir: str | Path) -> None:
    """alterReplicaLogDirs of one replica; waits until the future log has replaced the current one
    and, on ``broker``'s disk, only ``log_dir`` holds the partition's directory (the old one renamed
    to ``-delete``). The metadata log may record the move as A->B, B->A, A->B: the last of those
    can land after this returns."""
    _run(cluster, "logdir", topic, str(partition), str(broker), str(log_dir))
    others = {n: None for n, dirs in _replica_dirs(cluster, topic, partition).items() if n != broker}
    _wait_disk(cluster, topic, partition, {**others, broker: Path(log_dir)},
               f"log-dir move of {topic}-{partition} on broker {broker} to {log_dir}")


def wait_replica_quiet(cluster: KafkaCluster, topic: str, partition: int, quiet_s: float,
                       timeout_s: float = 120.0) -> None:
    """Until no segment (.log) of the partition's replicas was written for ``quiet_s`` (their newest
    mtime): a move made after that gives the new replica's segments mtimes at least ``quiet_s``
    apart from the old ones, measured on the files, however long producing took on a loaded machine."""
    dirs = list(cluster.partition_dirs(topic, partition).values())

    def newest_mtime() -> float:
        return max(p.stat().st_mtime for d in dirs for p in d.glob("*.log"))

    wait_until(lambda: time.time() - newest_mtime() > quiet_s, timeout_s,
               f"{topic}-{partition}'s files to stay unwritten for {quiet_s} s")
