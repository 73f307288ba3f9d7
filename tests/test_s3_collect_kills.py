"""``collect --out s3://...`` killed with SIGKILL at random moments (issue 37; the disk twin is
tests/test_collect_kills.py): a reader never takes what a killed collect left for a manifest, and
the next run completes it.

A real S3 API server (s3proxy on 127.0.0.1) and the real fixture brokers' log dirs. One prefix is
collected again and again, each round from one of two brokers chosen at random (they hold
different parts: broker b1 has consumer groups, b2 none), so a killed run can leave new objects
beside a previous collect's. Each round a ``kafka-audit collect`` process is killed with SIGKILL
either after a random delay within an uninterrupted run's duration, or as soon as the server has
stored the k-th object of this run (k random; watched in s3proxy's storage directory) plus 0-5 ms:
the upload phase is short next to the process's start and the scan, and is where the order of
objects matters. The random generator is seeded; the seed is printed (``S3_KILLS_SEED`` replays).

After each kill, ``find_manifests`` either refuses the prefix (IncompleteManifest) or it is a
whole manifest: every object the size and CRC-32 its ``_complete.json`` lists (read through
``read_manifest``, which checks both), from one of the two brokers. Then the same command runs to
the end: the prefix is complete and its rows equal a local collect of the same broker (but for
the scan and collection times). At the end no staging directory is left in ``$TMPDIR``: each run
removes those of the killed runs before it.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from auditor.manifest import IncompleteManifest, find_manifests, read_manifest
from auditor.scan.filesystem import FS_FIELDS_OF_THE_MOMENT
from harness.cli import REPO_ROOT, kafka_audit
from harness.realdata import BROKER_DIRS
from harness.s3proxy import S3Proxy, s3_server  # noqa: F401 - the module's S3 server

pytestmark = pytest.mark.live

KILLS = 24
BROKERS = {"b1": BROKER_DIRS / "kafka-2018-v2" / "kafka-logs",
           "b2": BROKER_DIRS / "kraft-transactional" / "kafka-data"}
PREFIX = "s3://audits/killed"
TIME_COLUMNS = {"scanned_at_ms", "collected_at_ms", "finished_at_ms", *FS_FIELDS_OF_THE_MOMENT}


def rows(tables) -> list[list[tuple]]:
    out = []
    for table in tables:
        keep = [c for c in table.column_names if c not in TIME_COLUMNS]
        out.append(sorted(tuple(sorted(r.items())) for r in table.select(keep).to_pylist()))
    return [[tuple((k, repr(v)) for k, v in r) for r in t] for t in out]


def stored(server: S3Proxy) -> dict[str, int]:
    """Object name -> mtime_ns in the server's storage of the prefix."""
    root = server.data / "audits" / "killed"
    try:
        return {p.name: p.stat().st_mtime_ns for p in root.iterdir() if p.is_file()}
    except OSError:
        return {}


def run_and_kill(server: S3Proxy, env: dict, log_dir, rng: random.Random, full_run_s: float) -> str:
    before = stored(server)
    proc = subprocess.Popen([sys.executable, "-m", "auditor.cli", "collect", "--keys", "--out", PREFIX, str(log_dir)],
                            env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if rng.random() < 0.4:
        delay = rng.uniform(0.0, 1.1 * full_run_s)
        how = f"after {delay * 1000:.0f} ms"
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.002)
    else:
        k, extra = rng.randint(1, 6), rng.uniform(0.0, 0.005)
        how = f"after the server stored object {k} of the run +{extra * 1000:.1f} ms"
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            now = stored(server)
            changed = [n for n, m in now.items() if before.get(n) != m]
            if len(changed) >= k:
                time.sleep(extra)
                break
            time.sleep(0.001)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        how += ": killed"
    else:
        how += ": finished first"
    proc.wait()
    return how


def test_collect_to_s3_killed_at_random_moments(s3_server, tmp_path, monkeypatch):  # noqa: F811
    # a killed collect leaves its local staging directory behind, the next collect removes it
    # (auditor.cli.collect.remove_stale_staging): the staging here, not in /tmp, to be looked at
    (tmp_path / "staging").mkdir()
    env = s3_server.env(TMPDIR=str(tmp_path / "staging"))
    for name, value in env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    seed = int(os.environ.get("S3_KILLS_SEED", random.randrange(1 << 30)))
    print(f"S3_KILLS_SEED={seed}")
    rng = random.Random(seed)
    expected = {}
    for name, log_dir in BROKERS.items():
        res = kafka_audit("collect", "--keys", "--out", tmp_path / name, log_dir, env=env)
        assert res.returncode == 0, res.stderr
        expected[name] = rows(read_manifest(tmp_path / name))
    started = time.monotonic()
    res = kafka_audit("collect", "--keys", "--out", PREFIX, BROKERS["b1"], env=env)
    full_run_s = time.monotonic() - started
    assert res.returncode == 0, res.stderr
    outcomes = collections.Counter()
    for round_no in range(KILLS):
        name = rng.choice(sorted(BROKERS))
        how = run_and_kill(s3_server, env, BROKERS[name], rng, full_run_s)
        try:
            manifests = find_manifests([PREFIX])
        except IncompleteManifest as exc:
            outcomes["refused"] += 1
            assert "incomplete" in str(exc), (round_no, how, str(exc))
        else:
            outcomes["whole"] += 1
            assert manifests == [PREFIX], (round_no, how)
            got = rows(read_manifest(PREFIX))     # each object's size and CRC-32 checked against the marker
            assert got in expected.values(), (round_no, how)
        res = kafka_audit("collect", "--keys", "--out", PREFIX, BROKERS[name], env=env)
        assert res.returncode == 0, (round_no, how, res.stderr)
        assert find_manifests([PREFIX]) == [PREFIX]
        assert rows(read_manifest(PREFIX)) == expected[name], (round_no, how)
    print(f"outcomes after the kills: {dict(outcomes)}")
    assert list((tmp_path / "staging").iterdir()) == []   # each killed run's staging removed by the next
    assert outcomes["refused"] >= KILLS // 4, outcomes   # the kills did land in the writes
