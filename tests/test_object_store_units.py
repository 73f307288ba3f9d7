"""Object storage, the parts that need no server (issue 37): URL globs as ``glob.glob`` reads them,
the environment's settings (checksum defaults for S3-compatible endpoints), the Spark settings
for s3a, and the outputs that refuse URLs with their reason. The real server's tests:
tests/test_s3_manifests.py, test_s3_collect_kills.py, test_s3_spark.py."""

from __future__ import annotations

import pytest

from auditor import object_store as store
from auditor.cli import main

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("pattern, url, hit", [
    ("s3://b/m/*", "s3://b/m/broker-1", True),
    ("s3://b/m/*", "s3://b/m/broker-1/segments.parquet", False),   # * never crosses a /
    ("s3://b/m/broker-?", "s3://b/m/broker-2", True),
    ("s3://b/m/broker-[12]", "s3://b/m/broker-3", False),
    ("s3://b/m/*/segments.parquet", "s3://b/m/x/segments.parquet", True),
    ("s3://b/m/**", "s3://b/m/x/y", True),
    ("s3://b/m.x/*", "s3://b/mQx/y", False),                        # the literal part is literal
])
def test_url_globs_read_like_glob_glob(pattern, url, hit):
    assert store.match(pattern, url) is hit


@pytest.mark.parametrize("pattern, prefix", [
    ("s3://b/m/*", "s3://b/m/"), ("s3://b/m/br*/x", "s3://b/m/"), ("s3://b/m/b1", "s3://b/m/b1"),
    ("s3a://b/*", "s3a://b/"),
])
def test_glob_prefix_is_the_literal_part_up_to_a_slash(pattern, prefix):
    assert store.glob_prefix(pattern) == prefix


def test_bucket_key_and_s3a_names():
    assert store.bucket_key("s3a://audits/m/b1/") == ("audits", "m/b1")
    assert store.bucket_key("s3://audits") == ("audits", "")
    assert store.s3a_url("s3://a/b") == "s3a://a/b" and store.s3a_url("s3a://a/b") == "s3a://a/b"
    with pytest.raises(ValueError, match="no bucket"):
        store.bucket_key("s3:///x")
    with pytest.raises(ValueError, match="not an s3"):
        store.bucket_key("hdfs://nn/x")


def test_an_endpoint_sets_the_checksum_defaults_unless_given():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_supported"}
    s = store.settings(env)
    assert s.endpoint == "http://127.0.0.1:9000" and s.region == "us-east-1"
    assert env["AWS_REQUEST_CHECKSUM_CALCULATION"] == "when_required"
    assert env["AWS_RESPONSE_CHECKSUM_VALIDATION"] == "when_supported"   # the user's choice stays
    assert s.checksum_defaults == ("AWS_REQUEST_CHECKSUM_CALCULATION",)
    aws = {"AWS_DEFAULT_REGION": "eu-west-1"}
    assert store.settings(aws).endpoint is None and store.settings(aws).region == "eu-west-1"
    assert "AWS_REQUEST_CHECKSUM_CALCULATION" not in aws                 # AWS itself: SDK defaults kept
    assert store.settings({"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://s3:2"}).endpoint == \
        "http://s3:2"


def test_known_failures_are_named_in_one_line():
    line = str(store.error("s3://b/k", "cannot write", OSError(
        "When uploading part for key 'k' in bucket 'b': AWS Error UNKNOWN (HTTP status 400) during UploadPart "
        "operation: Unable to parse ExceptionName: XAmzContentSHA256Mismatch Message: ...")))
    assert "AWS_REQUEST_CHECKSUM_CALCULATION=when_required" in line and "\n" not in line
    assert "does not exist" in str(store.error("s3://b/k", "cannot list", OSError("AWS Error NO_SUCH_BUCKET during")))
    assert "does not answer" in str(store.error("s3://b/k", "cannot reach", OSError("AWS Error NETWORK_CONNECTION")))


def test_spark_gets_the_same_settings(monkeypatch, tmp_path):
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    jar = tmp_path / "hadoop-aws.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv(store.JARS_ENV, str(jar))
    conf = store.spark_s3a_conf({"spark.hadoop.fs.s3a.path.style.access": "false"})
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "id" and conf["spark.hadoop.fs.s3a.secret.key"] == "secret"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert "spark.hadoop.fs.s3a.path.style.access" not in conf      # --conf wins
    assert conf["spark.jars"] == str(jar)
    given = {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.4.2"}
    assert "spark.jars" not in store.spark_s3a_conf(given)            # the user brought hadoop-aws
    monkeypatch.setenv(store.JARS_ENV, "")
    monkeypatch.setattr(store, "s3a_jars", lambda: None)
    with pytest.raises(store.ObjectStoreError, match="scripts/s3-jars.sh hadoop-aws"):
        store.spark_s3a_conf({})


@pytest.mark.parametrize("argv, option", [
    (["audit", "--manifest", "m", "--json", "s3://b/f.json"], "--json"),
    (["audit", "--manifest", "m", "--out", "s3a://b/r.html"], "--out"),
    (["audit", "--manifest", "m", "--history", "s3://b/h"], "--history"),
    (["audit", "--manifest", "m", "--metrics", "s3://b/k.prom"], "--metrics"),
    (["report", "f.json", "--out", "s3://b/r.html"], "--out"),
])
def test_outputs_that_take_no_url_refuse_it_in_one_line(argv, option, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kafka-audit: error: {option} ") and "takes a local path, not a URL" in err
    assert "\n" not in err


def test_collect_state_must_be_local(tmp_path, capsys):
    assert main(["collect", "--state", "s3://b/state", "--out", "s3://b/m", str(tmp_path)]) == 2
    assert "--state s3://b/state: must be a local directory" in capsys.readouterr().err
