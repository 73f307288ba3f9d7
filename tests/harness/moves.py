"""Real replica moves on a harness cluster: inter-broker reassignment and log-dir moves.

Kafka's own Java Admin API does the work (``java/MoveReplicas.java``, run in Java's source-file
mode against the harness's Kafka jars), because confluent-kafka's Python AdminClient has neither
``alterPartitionReassignments`` nor ``alterReplicaLogDirs``. Both calls return when the move has
completed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

from harness.kafka import KafkaCluster, KafkaHarnessError

SOURCE = Path(__file__).parent / "java" / "MoveReplicas.java"


def _run(cluster: KafkaCluster, *args: str) -> None:
    cmd = ["java", "-cp", cluster.classpath, str(SOURCE), cluster.bootstrap_servers, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 or "done" not in proc.stdout:
        raise KafkaHarnessError(f"{' '.join(args)} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")


def reassign(cluster: KafkaCluster, topic: str, partition: int, replicas: Sequence[int]) -> None:
    """alterPartitionReassignments to ``replicas``; waits until no reassignment is ongoing."""
    _run(cluster, "replicas", topic, str(partition), ",".join(map(str, replicas)))


def move_log_dir(cluster: KafkaCluster, topic: str, partition: int, broker: int, log_dir: str | Path) -> None:
    """alterReplicaLogDirs of one replica; waits until the future log has replaced the current one."""
    _run(cluster, "logdir", topic, str(partition), str(broker), str(log_dir))
