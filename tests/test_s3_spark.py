"""Spark reads manifests from a real S3 server through ``s3a://`` (issue 37): hadoop-aws and the AWS
SDK bundle at the Hadoop version of PySpark's jars (``scripts/s3-jars.sh hadoop-aws``), added to
the session with the environment's AWS settings by the tool itself: the command lines below have
no ``--conf`` (auditor.object_store.spark_s3a_conf).

The real fixture brokers are collected into s3proxy and onto local disk (as in
tests/test_s3_manifests.py), once for the module. Then, each a ``kafka-audit`` process with its
own Spark ``local[2]`` driver (as a user runs it):

* ``audit --engine spark`` of ``s3a://audits/m/*`` gives the same findings, finding for finding, as
  the local engine's audit of the local copy (the engines' own equality is tests/test_local_engine.py's;
  the oracle here costs no second JVM). Great Expectations' evidence lists unexpected values in the
  order Spark's tasks met them (not an order the document promises), so KLA090's evidence is
  compared as a sorted list;
* ``scan --engine spark --manifest s3a://...`` gives every row the local copies hold (read here
  with pyarrow), with the credentials taken from a profile (``AWS_PROFILE`` and a shared
  credentials file, no key in the environment) on the driver and by s3a;
* an object changed since ``_complete.json`` with its size kept (a flipped byte) is refused on
  Spark as on the driver: one line naming the CRC-32, exit 3 (the executors compute the CRC-32
  of the objects they read, auditor.engines.spark.parquet.check_remote_crcs).
"""

from __future__ import annotations

import json
import time

import pytest

from auditor.manifest import read_manifest
from harness.cli import kafka_audit
from harness.realdata import BROKER_DIRS
from harness.s3proxy import CREDENTIAL, IDENTITY, s3_server  # noqa: F401 - the module's S3 server

pytestmark = pytest.mark.live

AS_OF = "2026-01-01T00:00:00Z"
AT = "2018-01-01T00:00:00Z"
BROKERS = {"b1": BROKER_DIRS / "kafka-2018-v2" / "kafka-logs",
           "b2": BROKER_DIRS / "kraft-transactional" / "kafka-data",
           "b3": BROKER_DIRS / "kafka-2.7.1-compacted" / "kafka-logs"}


@pytest.fixture(scope="module")
def collected(s3_server, tmp_path_factory):  # noqa: F811 - the fixture imported above
    """Each broker collected into s3://audits/m/<b> and into a local dir <b> (the oracle)."""
    local = tmp_path_factory.mktemp("manifests")
    env = s3_server.env()
    for name, log_dir in BROKERS.items():
        for out in (f"s3://audits/m/{name}", local / name):
            res = kafka_audit("collect", "--out", out, log_dir, env=env, timeout=300)
            assert res.returncode == 0, res.stderr
    return env, local


def findings(doc: dict) -> list[dict]:
    out = []
    for f in doc["findings"]:
        if f["code"] == "KLA090":
            f = {**f, "evidence": sorted(f["evidence"], key=repr)}
        out.append(f)
    return out


def test_spark_through_s3a_equals_the_local_copy(collected, tmp_path):
    env, local = collected
    docs = {}
    for where, engine, spec in (("s3a", ["--engine", "spark", "--master", "local[2]"], "s3a://audits/m/*"),
                                ("local", ["--engine", "local"], f"{local}/*")):
        out = tmp_path / f"{where}.json"
        res = kafka_audit("audit", *engine, "--manifest", spec, "--json", out,
                          "--as-of", AS_OF, "--at", AT, env=env, timeout=900)
        assert res.returncode in (0, 1), res.stderr[-3000:]
        docs[where] = json.loads(out.read_text())
        assert docs[where]["engine"]["name"] == engine[1]
    assert findings(docs["s3a"]) == findings(docs["local"])
    assert docs["s3a"]["counts"] == docs["local"]["counts"] and sum(docs["s3a"]["counts"].values()) >= 20
    assert docs["s3a"]["totals"] == docs["local"]["totals"]


def test_scan_on_spark_from_s3a_gives_the_manifests_rows(collected, tmp_path):
    """With the credentials in a profile of the shared credentials file (AWS_PROFILE, no key in the
    environment): the driver's listing (pyarrow) and Spark's s3a reads both take it."""
    _, local = collected
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[auditor]\naws_access_key_id = {IDENTITY}\naws_secret_access_key = {CREDENTIAL}\n")
    env = {k: v for k, v in collected[0].items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env.update(AWS_PROFILE="auditor", AWS_SHARED_CREDENTIALS_FILE=str(credentials))
    res = kafka_audit("scan", "--engine", "spark", "--master", "local[2]", "--manifest", "s3a://audits/m",
                      "--json", env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    seg_key = ("log_dir", "topic", "partition", "dir_kind", "base_offset", "log_size_bytes", "record_count",
               "max_timestamp_ms")
    part_key = ("log_dir", "topic", "partition", "dir_kind", "log_start_offset", "log_end_offset", "size_bytes")
    want_seg, want_part, want_dirs = [], [], []
    for name in BROKERS:
        seg, part, dirs = read_manifest(local / name)
        want_seg += [tuple(r[k] for k in seg_key) for r in seg.to_pylist()]
        want_part += [tuple(r[k] for k in part_key) for r in part.to_pylist()]
        want_dirs += [r["log_dir"] for r in dirs.to_pylist()]
    assert doc["engine"] == "spark"
    assert sorted(tuple(r[k] for k in seg_key) for r in doc["segments"]) == sorted(want_seg) and len(want_seg) >= 7
    assert sorted(tuple(r[k] for k in part_key) for r in doc["partitions"]) == sorted(want_part)
    assert sorted(r["log_dir"] for r in doc["log_dirs"]) == sorted(want_dirs)


def test_a_changed_object_of_the_same_size_is_refused_on_spark(collected, s3_server):  # noqa: F811
    env, _ = collected
    assert kafka_audit("collect", "--out", "s3://audits/changed/b1", BROKERS["b1"], env=env).returncode == 0
    segments = s3_server.data / "audits" / "changed" / "b1" / "segments.parquet"
    flipped = bytearray(segments.read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF
    segments.write_bytes(bytes(flipped))                 # the listing's sizes still agree with _complete.json
    started = time.monotonic()
    res = kafka_audit("audit", "--engine", "spark", "--master", "local[2]", "--manifest", "s3a://audits/changed/*",
                      "--as-of", AS_OF, env=env, timeout=900)
    err = res.stderr.strip().splitlines()
    assert res.returncode == 3, res.stderr[-3000:]
    assert err[-1].startswith("kafka-audit: error: manifest s3a://audits/changed/b1: segments.parquet is"), err[-1]
    assert "CRC-32" in err[-1] and "changed since it was collected" in err[-1]
    print(f"refused on Spark in {time.monotonic() - started:.1f} s")
