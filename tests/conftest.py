"""Session fixtures for the real-Kafka harness (tests/harness/).

Java and Maven are required: when they are missing these fixtures FAIL (never skip), because
a test that silently skips its real broker proves nothing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.dumplog import DumpLogSegments
from harness.kafka import KafkaCluster, kafka_classpath


def _require_java_and_maven() -> None:
    missing = [t for t in ("java", "mvn") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"the real-Kafka test harness needs {' and '.join(missing)} on PATH "
                    "(Java 17+, Maven 3.8+); install them, do not skip these tests", pytrace=False)
    out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    first = out.splitlines()[0] if out else ""
    try:
        major = int(first.split('"')[1].split(".")[0])
    except (IndexError, ValueError):
        major = 0
    if major < 17:
        pytest.fail(f"Kafka 4.x needs Java 17+, found: {first!r}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_classpath_str() -> str:
    """The ':'-joined classpath of Kafka 4.2.1 jars (runs scripts/kafka-jars.sh once)."""
    _require_java_and_maven()
    return kafka_classpath()




@pytest.fixture(scope="session", name="kafka_classpath")
def _kafka_classpath(kafka_classpath_str: str) -> str:
    return kafka_classpath_str


@pytest.fixture(scope="session")
def kafka_cluster_factory(tmp_path_factory, kafka_classpath_str):
    """``factory(brokers=1, log_dirs_per_broker=1, broker_config=None, start=True, **kw)`` ->
    a started KafkaCluster in a fresh tmp dir.  Every cluster is stopped at session end."""
    clusters: list[KafkaCluster] = []

    def factory(brokers: int = 1, log_dirs_per_broker: int = 1, broker_config=None,
                start: bool = True, **kw) -> KafkaCluster:
        workdir = tmp_path_factory.mktemp(f"kafka-{brokers}b")
        kc = KafkaCluster(workdir, brokers=brokers, log_dirs_per_broker=log_dirs_per_broker,
                          broker_config=broker_config, classpath=kafka_classpath_str, **kw)
        clusters.append(kc)
        if start:
            kc.start()
        return kc

    yield factory
    errors = []
    for kc in clusters:
        try:
            kc.stop()
        except Exception as e:  # stop the rest anyway
            errors.append(f"{kc.workdir}: {e}")
    if errors:
        raise RuntimeError("stopping Kafka clusters failed: " + "; ".join(errors))


@pytest.fixture(scope="session")
def dump_log_segments(kafka_classpath_str) -> DumpLogSegments:
    """Kafka's own DumpLogSegments, parsed (``.dump(files)``, ``.dump_dir(dir)``,
    ``.dump_record_set(bytes_or_path)``)."""
    return DumpLogSegments(classpath=kafka_classpath_str)
