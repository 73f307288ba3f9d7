"""Kafka's own ``Admin.describeLogDirs`` on a harness cluster (``java/DescribeLogDirs.java``, run
in Java's source-file mode against the harness's Kafka jars): which log dir of which broker
holds which partition, as the brokers themselves report it; and ``copy_live_dir``, a copy of a log
dir the broker keeps writing to."""

from __future__ import annotations

import os
import shutil
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


def copy_live_dir(src: str | Path, dst: str | Path, ignore=None) -> Path:
    """A copy (``copy2``: mtimes kept) of a directory a running broker writes to, as it was at
    about one moment. A running broker renames and deletes files at any time: a snapshot's
    ``.checkpoint.part`` becomes ``.checkpoint``, a checkpoint's ``.tmp`` replaces the file, a
    ``-delete`` dir is removed ``file.delete.delay.ms`` after a move. ``shutil.copytree`` raises
    when an entry it listed has gone by the time it copies it; here such an entry is left out
    (whatever part of it was copied is removed), as if the copy had been taken a moment later.
    Any other error is raised. ``ignore``: as ``shutil.copytree``'s (``shutil.ignore_patterns``)."""
    src, dst = Path(src), Path(dst)
    try:
        entries = list(os.scandir(src))
    except FileNotFoundError:
        return dst
    dst.mkdir(parents=True)
    skipped = ignore(str(src), [e.name for e in entries]) if ignore is not None else ()
    for entry in entries:
        if entry.name in skipped:
            continue
        target = dst / entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                copy_live_dir(entry.path, target, ignore)
            else:
                shutil.copy2(entry.path, target)
        except FileNotFoundError:
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
    try:
        shutil.copystat(src, dst)
    except FileNotFoundError:
        pass
    return dst
