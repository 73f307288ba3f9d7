"""The test suite's three tiers, declared by every test module (checked by tests/conftest.py).

unit      pure functions and synthetic bytes: no file from ../shared/fixtures/real, no JVM.
recorded  real broker files read offline (../shared/fixtures/real), or Kafka's own tools run on
          files (DumpLogSegments, the jars): a JVM may run, no broker ever starts.
live      a running component: a Kafka broker, Spark (local session or standalone), Airflow,
          headless Chromium, Prometheus.

Where a reader sees it: a test module whose tests share a tier says ``pytestmark =
pytest.mark.<tier>`` (in a list beside its other marks); in a module of several tiers, each test
says ``@pytest.mark.<tier>`` above its ``def``. Collection fails on a test that declares no tier or
more than one, and on a test declared lighter than what it uses: a fixture of LIVE_FIXTURES (directly or
through other fixtures: ``item.fixturenames`` is the whole closure) makes it live, one of
RECORDED_FIXTURES or the real-fixture locator (harness.realdata) recorded.

The guard: when a session selects no live test (``-m unit``, ``-m recorded``, a file of unit
tests), FAST_ONLY_ENV is set, and the harness refuses to start a broker or Spark (KafkaCluster,
StandaloneSpark, the ``spark`` fixture) with a message saying to mark the module live. So a test
declared lighter than it is fails loudly in the fast lane instead of slowing it down unnoticed.
"""

from __future__ import annotations

import os

TIERS = ("unit", "recorded", "live")  # lightest first

LIVE_FIXTURES = frozenset({
    "kafka_cluster_factory",  # conftest: real KRaft brokers
    "spark",                  # harness.spark_session: a local[2] SparkSession (a JVM)
    "spark_standalone",       # test_airflow_dags: a standalone Spark master + worker
    "airflow_env",            # harness.airflow_home: a migrated Airflow home for dag.test()
    "browser",                # harness.chromium: headless Chromium
    "smtp_server",            # test_airflow_dags: a real SMTP server for the DAG's failure mail
    "s3_server",              # tests/test_s3_*: a real S3 API server (s3proxy, harness/s3proxy.py)
})
RECORDED_FIXTURES = frozenset({
    "kafka_classpath",        # conftest: the Kafka jars (a JVM tool may run, no broker)
    "kafka_classpath_str",
    "dump_log_segments",      # conftest: Kafka's DumpLogSegments on recorded files
})
RECORDED_MODULE = "harness.realdata"  # where ../shared/fixtures/real lives

FAST_ONLY_ENV = "KLA_TEST_FAST_TIERS_ONLY"


def refuse_in_fast_tiers(what: str) -> None:
    """Raise when the running session selected only fast tiers (see the module docstring)."""
    if os.environ.get(FAST_ONLY_ENV):
        raise RuntimeError(
            f"{what} started in a session that selected only the fast tiers (unit/recorded): the "
            "test is misclassified; add `pytestmark = pytest.mark.live` to its module "
            "(tests/harness/tiers.py says how tiers are applied)")
