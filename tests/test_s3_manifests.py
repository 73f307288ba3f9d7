"""Manifests on a real S3 API server (issue 37): s3proxy on 127.0.0.1 (tests/harness/s3proxy.py),
the tool configured only through the standard AWS environment (AWS_ENDPOINT_URL, keys, region;
the checksum variables left unset, as a new user leaves them).

The real brokers' log dirs of ../shared/fixtures/real are collected with ``kafka-audit collect``
(a process, as on a broker) twice: into the bucket and onto local disk. Then, against the local
copy as the oracle: ``audit --manifest s3://...`` on the driver gives the same findings finding for
finding, ``replay-check``, ``groups`` and ``metadata`` the same answers; a re-collect removes the parts the log
dirs no longer hold; an object changed since ``_complete.json`` (size, or same size and another
CRC-32), a prefix without it, a missing bucket, wrong credentials and a stopped server are each
one line and exit 3 within 30 s. Spark through s3a: tests/test_s3_spark.py; SIGKILL:
tests/test_s3_collect_kills.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.cli import kafka_audit
from harness.kafka import free_port
from harness.realdata import BROKER_DIRS, REAL
from harness.s3proxy import s3_server  # noqa: F401 - the module's S3 server

pytestmark = pytest.mark.live

AS_OF = "2026-01-01T00:00:00Z"
AT = "2018-01-01T00:00:00Z"
BROKERS = {"b1": BROKER_DIRS / "kafka-2018-v2" / "kafka-logs",
           "b2": BROKER_DIRS / "kraft-transactional" / "kafka-data",
           "b3": BROKER_DIRS / "kafka-2.7.1-compacted" / "kafka-logs"}
METADATA_DIR = (REAL / "metadata" / "kraft-transactional").resolve()   # b2's metadata.log.dir
FAILURE_BOUND_S = 30


@pytest.fixture(scope="module")
def collected(s3_server, tmp_path_factory):  # noqa: F811 - the fixture imported above
    """Each fixture broker collected into s3://audits/m/<b> and into a local dir <b> (the oracle);
    b2 with its metadata log dir (a KRaft broker's metadata.log.dir beside its data dir)."""
    local = tmp_path_factory.mktemp("manifests")
    env = s3_server.env()
    for name, log_dir in BROKERS.items():
        dirs = [log_dir, METADATA_DIR] if name == "b2" else [log_dir]
        for out in (f"s3://audits/m/{name}", local / name):
            res = kafka_audit("collect", "--keys", "--out", out, *dirs, env=env, timeout=300)
            assert res.returncode == 0, res.stderr
    return env, local


def one_line_exit_3(res, started: float) -> str:
    err = res.stderr.strip()
    assert res.returncode == 3, (res.returncode, res.stderr)
    assert len(err.splitlines()) == 1 and err.startswith("kafka-audit: error: "), err
    assert time.monotonic() - started < FAILURE_BOUND_S
    return err


def test_collect_publishes_whole_objects_and_the_marker_last(collected, s3_server):  # noqa: F811
    env, local = collected
    listed = sorted(p.relative_to(s3_server.data / "audits").as_posix()
                    for p in (s3_server.data / "audits" / "m").rglob("*") if p.is_file())
    expected = sorted(f"m/{b}/{f.name}" for b in BROKERS for f in (local / b).iterdir())
    assert listed == expected
    for b in BROKERS:
        marker = json.loads((s3_server.data / "audits" / "m" / b / "_complete.json").read_text())
        for name, want in marker["files"].items():
            assert (s3_server.data / "audits" / "m" / b / name).stat().st_size == want["bytes"], (b, name)


def test_audit_on_the_driver_equals_the_local_manifests(collected, tmp_path):
    env, local = collected
    docs = {}
    for where, spec in (("s3", "s3://audits/m/*"), ("local", f"{local}/*")):
        out = tmp_path / f"{where}.json"
        res = kafka_audit("audit", "--engine", "local", "--manifest", spec, "--json", out, "--as-of", AS_OF,
                          "--at", AT, "--keys", env=env, timeout=600)
        assert res.returncode in (0, 1), res.stderr
        docs[where] = json.loads(out.read_text())
    assert docs["s3"]["engine"]["name"] == "local"
    assert docs["s3"]["findings"] == docs["local"]["findings"]   # (they name the brokers' log dirs, not the manifests)
    assert docs["s3"]["counts"] == docs["local"]["counts"] and sum(docs["s3"]["counts"].values()) >= 20
    assert docs["s3"]["totals"] == docs["local"]["totals"]


def test_auto_engine_counts_remote_rows_and_stays_on_the_driver(collected, tmp_path):
    env, _ = collected
    res = kafka_audit("audit", "--manifest", "s3a://audits/m", "--json", tmp_path / "a.json", "--as-of", AS_OF,
                      env=env, timeout=600)
    assert res.returncode in (0, 1), res.stderr
    assert json.loads((tmp_path / "a.json").read_text())["engine"]["name"] == "local"


def test_replay_check_and_groups_equal_the_disk_answers(collected):
    env, local = collected
    outs = {}
    for where, spec, root in (("s3", "s3://audits/m/*", "s3://audits/m"), ("local", str(local), str(local))):
        replay = kafka_audit("replay-check", "--manifest", spec, "--topic", "debug_topic,_schemas", "--at", AT,
                             "--json", env=env, timeout=300)
        groups = kafka_audit("groups", "--manifest", spec, "--json", env=env, timeout=300)
        assert replay.returncode == 1 and groups.returncode == 0, (replay.stderr, groups.stderr)
        outs[where] = (replay.stdout.replace(root, "M"), groups.stdout.replace(root, "M"))
    assert outs["s3"] == outs["local"]
    assert '"mode": "manifest"' in outs["s3"][0] and '"debug-consumer-group"' in outs["s3"][1]


def test_metadata_from_s3_manifests_equals_the_local_ones_and_the_log_dirs(collected):
    env, local = collected
    outs = {}
    for where, argv in (("s3", ["--manifest", "s3a://audits/m"]), ("local", ["--manifest", f"{local}/*"]),
                        ("disk", [BROKERS["b2"], METADATA_DIR])):
        res = kafka_audit("metadata", *argv, "--history", "--json", env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        outs[where] = json.loads(res.stdout)
    assert outs["s3"] == outs["local"] == outs["disk"]
    assert len(outs["s3"]["topics"]) == 9 and outs["s3"]["metadata_dir"] == str(METADATA_DIR / "__cluster_metadata-0")


def test_recollect_removes_parts_the_log_dirs_no_longer_hold(collected, s3_server):  # noqa: F811
    env, _ = collected
    prefix = s3_server.data / "audits" / "again"
    assert kafka_audit("collect", "--keys", "--out", "s3://audits/again", BROKERS["b1"], env=env).returncode == 0
    assert {"consumer_groups.jsonl.gz", "keys.jsonl.gz"} <= {p.name for p in prefix.iterdir()}
    res = kafka_audit("collect", "--out", "s3://audits/again", BROKERS["b2"], env=env)   # no groups, no --keys
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in prefix.iterdir()) == ["_complete.json", "log_dirs.parquet", "partitions.parquet",
                                                        "segments.parquet"]


def test_changed_objects_and_a_missing_marker_are_refused(collected, s3_server, tmp_path):  # noqa: F811
    env, _ = collected
    prefix = s3_server.data / "audits" / "changed"
    assert kafka_audit("collect", "--out", "s3://audits/changed/b1", BROKERS["b1"], env=env).returncode == 0
    segments = prefix / "b1" / "segments.parquet"
    original = segments.read_bytes()
    segments.write_bytes(original + b"x")                       # another size: seen in the listing
    started = time.monotonic()
    err = one_line_exit_3(kafka_audit("audit", "--manifest", "s3://audits/changed/*", env=env), started)
    assert "segments.parquet is" in err and "changed since it was collected" in err
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0xFF
    segments.write_bytes(bytes(flipped))                        # the same size, another CRC-32: seen when read
    started = time.monotonic()
    err = one_line_exit_3(kafka_audit("replay-check", "--manifest", "s3://audits/changed", "--topic", "debug_topic",
                                      "--at", AT, env=env), started)
    assert "CRC-32" in err and "changed since it was collected" in err
    segments.write_bytes(original)
    (prefix / "b1" / "_complete.json").unlink()                 # what a killed collect leaves
    started = time.monotonic()
    err = one_line_exit_3(kafka_audit("audit", "--manifest", "s3://audits/changed/b1", env=env), started)
    assert "no _complete.json" in err
    # a cluster part (read whole on the driver, not a table) is checked the same way
    assert kafka_audit("collect", "--out", "s3://audits/changed/b2", BROKERS["b2"], METADATA_DIR,
                       env=env).returncode == 0
    part = prefix / "b2" / "cluster_metadata.jsonl.gz"
    flipped = bytearray(part.read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF
    part.write_bytes(bytes(flipped))
    started = time.monotonic()
    err = one_line_exit_3(kafka_audit("metadata", "--manifest", "s3://audits/changed/b2", env=env), started)
    assert "cluster_metadata.jsonl.gz is" in err and "CRC-32" in err and "changed since it was collected" in err


@pytest.mark.parametrize("case", ["missing bucket", "wrong secret", "unknown key"])
@pytest.mark.parametrize("command", ["collect", "audit", "replay-check"])
def test_store_failures_are_one_line_exit_3(collected, command, case):
    env, _ = collected
    bucket = "no-such-bucket" if case == "missing bucket" else "audits"
    env = dict(env)
    if case == "wrong secret":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    if case == "unknown key":
        env["AWS_ACCESS_KEY_ID"] = "nobody"
    argv = {"collect": ["collect", "--out", f"s3://{bucket}/m/b9", BROKERS["b1"]],
            "audit": ["audit", "--manifest", f"s3://{bucket}/m/*"],
            "replay-check": ["replay-check", "--manifest", f"s3://{bucket}/m", "--topic", "debug_topic", "--at", AT]}
    started = time.monotonic()
    err = one_line_exit_3(kafka_audit(*argv[command], env=env), started)
    assert ("does not exist" if case == "missing bucket" else "access denied") in err
    assert env["AWS_ENDPOINT_URL"] in err


def test_a_stopped_server_is_one_line_exit_3(s3_server):  # noqa: F811
    # what a stopped server is to its clients: nothing listens on its port any more (a port of
    # 127.0.0.1 free now, rather than a second s3proxy started and stopped)
    endpoint = f"http://127.0.0.1:{free_port()}"
    env = s3_server.env(AWS_ENDPOINT_URL=endpoint)
    for argv in (["collect", "--out", "s3://audits/m/b1", BROKERS["b1"]], ["audit", "--manifest", "s3://audits/m/*"],
                 ["metadata", "--manifest", "s3://audits/m"]):
        started = time.monotonic()
        err = one_line_exit_3(kafka_audit(*argv, env=env), started)
        assert "the endpoint does not answer" in err and endpoint in err


def test_the_collect_leaves_no_local_directory_named_after_the_url(collected, tmp_path):
    env, _ = collected
    res = kafka_audit("collect", "--out", "s3://audits/m/b1", BROKERS["b1"], env=env)
    assert res.returncode == 0, res.stderr
    assert not any(Path(p).name.startswith("s3:") for p in Path(__file__).resolve().parents[1].iterdir())
