"""The Spark settings an audit starts its session with (``auditor.engines.spark.session.spark_conf``): on a
cluster the driver JVM gets the small-footprint options (issue 19: the driver's RSS), which
``--conf spark.driver.extraJavaOptions`` replaces; local mode keeps the JVM's defaults (its JVM
runs the executors' tasks too)."""

from __future__ import annotations

import pytest
from auditor.engines.spark.session import CLUSTER_DRIVER_JAVA_OPTIONS, spark_conf

pytestmark = pytest.mark.unit

KEY = "spark.driver.extraJavaOptions"


def test_a_cluster_driver_gets_the_small_footprint_options():
    settings = spark_conf("spark://127.0.0.1:7077")
    assert settings[KEY] == CLUSTER_DRIVER_JAVA_OPTIONS
    for option in ("-XX:+UseSerialGC", "-Xms64m", "-Xmn32m", "-XX:TieredStopAtLevel=1", "-XX:MaxHeapFreeRatio=30",
                   "-XX:MinHeapFreeRatio=10", "-XX:-ShrinkHeapInSteps"):
        assert option in settings[KEY].split()
    assert not any(o.startswith("-Xmx") for o in settings[KEY].split()), "Spark refuses -Xmx here: spark.driver.memory"
    assert "spark.driver.memory" not in settings  # the maximum heap stays Spark's (or the user's)


def test_the_users_options_replace_them():
    settings = spark_conf("spark://127.0.0.1:7077", {KEY: "-XX:+UseG1GC"})
    assert settings[KEY] == "-XX:+UseG1GC"


def test_local_mode_keeps_the_jvm_defaults():
    assert KEY not in spark_conf("local[2]")
