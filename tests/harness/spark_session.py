"""The one session-scoped Spark fixture (chispa's convention). Import it in a test module:

    from harness.spark_session import spark  # noqa: F401

local[2] with the job's own defaults (auditor.engines.spark.build_spark): Arrow on, few shuffle partitions.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from auditor.engines.spark import build_spark
    from harness.tiers import refuse_in_fast_tiers

    refuse_in_fast_tiers("a Spark session")

    session = build_spark("local[2]", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()
