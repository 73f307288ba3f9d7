"""Spark reads manifests from a real S3 server through ``s3a://`` (issue 37): hadoop-aws and the AWS
SDK bundle at the Hadoop version of PySpark's jars (``scripts/s3-jars.sh hadoop-aws``), added to
the session with the environment's AWS settings by the tool itself: the command line below has no
``--conf`` (auditor.object_store.spark_s3a_conf).

The real fixture brokers are collected into s3proxy and onto local disk (as in
tests/test_s3_manifests.py); ``audit --engine spark --master local[2]`` of ``s3a://audits/m/*``
gives the same findings, finding for finding, as the same command on the local copy. Great
Expectations' evidence lists unexpected values in the order Spark's tasks met them (not an order
the document promises), so KLA090's evidence is compared as a sorted list.
"""

from __future__ import annotations

import json

import pytest

from harness.cli import kafka_audit
from harness.realdata import BROKER_DIRS
from harness.s3proxy import s3_server  # noqa: F401 - the module's S3 server

pytestmark = pytest.mark.live

AS_OF = "2026-01-01T00:00:00Z"
AT = "2018-01-01T00:00:00Z"
BROKERS = {"b1": BROKER_DIRS / "kafka-2018-v2" / "kafka-logs",
           "b2": BROKER_DIRS / "kraft-transactional" / "kafka-data",
           "b3": BROKER_DIRS / "kafka-2.7.1-compacted" / "kafka-logs"}


def findings(doc: dict) -> list[dict]:
    out = []
    for f in doc["findings"]:
        if f["code"] == "KLA090":
            f = {**f, "evidence": sorted(f["evidence"], key=repr)}
        out.append(f)
    return out


def test_spark_through_s3a_equals_spark_on_local_disk(s3_server, tmp_path):
    env = s3_server.env()
    local = tmp_path / "manifests"
    for name, log_dir in BROKERS.items():
        for out in (f"s3://audits/m/{name}", local / name):
            res = kafka_audit("collect", "--out", out, log_dir, env=env, timeout=300)
            assert res.returncode == 0, res.stderr
    docs = {}
    for where, spec in (("s3a", "s3a://audits/m/*"), ("local", f"{local}/*")):
        out = tmp_path / f"{where}.json"
        res = kafka_audit("audit", "--engine", "spark", "--master", "local[2]", "--manifest", spec, "--json", out,
                          "--as-of", AS_OF, "--at", AT, env=env, timeout=900)
        assert res.returncode in (0, 1), res.stderr[-3000:]
        docs[where] = json.loads(out.read_text())
        assert docs[where]["engine"]["name"] == "spark"
    assert findings(docs["s3a"]) == findings(docs["local"])
    assert docs["s3a"]["counts"] == docs["local"]["counts"] and sum(docs["s3a"]["counts"].values()) >= 20
    assert docs["s3a"]["totals"] == docs["local"]["totals"]
