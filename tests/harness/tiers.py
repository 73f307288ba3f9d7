"""The test suite's three tiers, and how a test gets its tier (applied by tests/conftest.py).

unit      pure functions and synthetic bytes: no file from ../shared/fixtures/real, no JVM.
recorded  real broker files read offline (../shared/fixtures/real), or Kafka's own tools run on
          files (DumpLogSegments, the jars): a JVM may run, no broker ever starts.
live      a running component: a Kafka broker, Spark (local session or standalone), Airflow,
          headless Chromium.

A test's tier is the heaviest of:
  1. the fixtures it uses, directly or through other fixtures (``item.fixturenames`` is the whole
     closure, so a module fixture built on ``kafka_cluster_factory`` makes its tests live):
     LIVE_FIXTURES or a name matching LIVE_FIXTURE_NAME (not in RECORDED_FIXTURES) -> live,
     RECORDED_FIXTURES -> recorded;
  2. its module importing the real-fixture locator (``from realdata import ...`` /
     ``import realdata``) -> recorded;
  3. an explicit ``pytest.mark.unit|recorded|live`` (module ``pytestmark`` or decorator), for
     what the fixtures cannot tell (a module fixture that starts a broker or Spark without the
     factory, a CLI subprocess that starts Spark).
An explicit mark lighter than what the fixtures imply is a collection error, never a silent
demotion. A test none of these classify ("unclassified") is unit.

The guard: when a session selects no live test (``-m unit``, ``-m recorded``, a file of unit
tests), FAST_ONLY_ENV is set, and the harness refuses to start a broker or Spark (KafkaCluster,
StandaloneSpark, the ``spark`` fixture) with a message saying to mark the module live. So an
unclassified test that starts a broker without a known fixture fails loudly in the fast lane
instead of slowing it down unnoticed.
"""

from __future__ import annotations

import os
import re

TIERS = ("unit", "recorded", "live")  # lightest first

LIVE_FIXTURES = frozenset({
    "kafka_cluster_factory",  # conftest: real KRaft brokers
    "spark",                  # spark_session: a local[2] SparkSession (a JVM)
    "spark_standalone",       # test_airflow_dags: a standalone Spark master + worker
    "airflow_env",            # test_airflow_dags: a migrated Airflow home for dag.test()
    "s3_server",              # tests/test_s3_*: a real S3 API server (s3proxy, tests/harness/s3proxy.py)
})
# A fixture named after a component (``prometheus_server``, ``broker``, ``groups_cluster``,
# ``browser``) is live too, unless listed in RECORDED_FIXTURES: a new helper's fixture that starts
# one lands in the live tier without a list to update (erring towards live: slower, never hidden).
LIVE_FIXTURE_NAME = re.compile(r"kafka|broker|cluster|spark|airflow|chromium|browser|playwright|prometheus|exporter")
RECORDED_FIXTURES = frozenset({
    "kafka_classpath",        # conftest: the Kafka jars (a JVM tool may run, no broker)
    "kafka_classpath_str",
    "dump_log_segments",      # conftest: Kafka's DumpLogSegments on recorded files
})
RECORDED_MODULE = "realdata"  # tests/realdata.py: where ../shared/fixtures/real lives

FAST_ONLY_ENV = "KLA_TEST_FAST_TIERS_ONLY"


def refuse_in_fast_tiers(what: str) -> None:
    """Raise when the running session selected only fast tiers (see the module docstring)."""
    if os.environ.get(FAST_ONLY_ENV):
        raise RuntimeError(
            f"{what} started in a session that selected only the fast tiers (unit/recorded): the "
            "test is misclassified; add `pytestmark = pytest.mark.live` to its module "
            "(tests/harness/tiers.py says how tiers are applied)")
