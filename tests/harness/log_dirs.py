"""Kafka's own ``Admin.describeLogDirs`` on a harness cluster (``java/DescribeLogDirs.java``, run
in Java's source-file mode against the harness's Kafka jars): which log dir of which broker
holds which partition, as the brokers themselves report it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.kafka import KafkaCluster, KafkaHarnessError

SOURCE = Path(__file__).parent / "java" / "DescribeLogDirs.java"


def describe_log_dirs(cluster: KafkaCluster, brokers=None) -> dict[int, dict[str, set[tuple[str, int]]]]:
    """{broker: {log dir path: {(topic, partition), ...}}} (every log dir, also empty ones)."""
    brokers = sorted(brokers or cluster.nodes)
    cmd = ["java", "-cp", cluster.classpath, str(SOURCE), cluster.bootstrap_servers, *map(str, brokers)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not proc.stdout.rstrip().endswith("done"):
        raise KafkaHarnessError(f"describeLogDirs failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    out: dict[int, dict[str, set[tuple[str, int]]]] = {}
    for line in proc.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 2:
            out.setdefault(int(parts[0]), {}).setdefault(parts[1], set())
        elif len(parts) == 5:
            out.setdefault(int(parts[0]), {}).setdefault(parts[1], set()).add((parts[2], int(parts[3])))
    return out
