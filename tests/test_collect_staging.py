"""``collect --out s3://`` stages the manifest in ``$TMPDIR`` before the upload; a collect killed
with SIGKILL cannot remove its staging directory, so the next collect removes those whose
collect is dead (auditor.cli.collect.remove_stale_staging) and leaves a running one's alone.
Real processes, really killed (the S3 side: tests/test_s3_collect_kills.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from auditor.cli.collect import STAGING_LOCK, STAGING_PREFIX, remove_stale_staging
from harness.cli import REPO_ROOT

pytestmark = pytest.mark.unit

HOLDER = ("import sys, time\n"
          "from auditor.cli.collect import make_staging\n"
          "staging, lock = make_staging()\n"
          "(staging / 'segments.parquet').write_bytes(b'x' * 1000)\n"
          "print(staging, flush=True)\n"
          "time.sleep(600)\n")


def holder(tmp_path):
    """A process that made a staging directory (as collect does) and is still writing there."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], env=dict(os.environ, TMPDIR=str(tmp_path)),
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_a_killed_collects_staging_is_removed_and_a_running_ones_kept(tmp_path):
    killed, killed_dir = holder(tmp_path)
    running, running_dir = holder(tmp_path)
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        # killed between making the directory and its lock file: only its pid tells
        unlocked_dead = tmp_path / f"{STAGING_PREFIX}{killed.pid}-abcd1234"
        unlocked_dead.mkdir()
        unlocked_live = tmp_path / f"{STAGING_PREFIX}{running.pid}-abcd1234"
        unlocked_live.mkdir()
        other = tmp_path / "kafka-audit-collect-xyz"    # not a staging directory of this naming
        other.mkdir()
        assert sorted(remove_stale_staging(str(tmp_path))) == sorted([killed_dir, str(unlocked_dead)])
        assert not os.path.exists(killed_dir) and not unlocked_dead.exists()
        assert os.path.isfile(os.path.join(running_dir, STAGING_LOCK)) and unlocked_live.is_dir() and other.is_dir()
        assert remove_stale_staging(str(tmp_path)) == []
    finally:
        running.kill()
        running.wait()
    assert sorted(remove_stale_staging(str(tmp_path))) == sorted([running_dir, str(unlocked_live)])


def test_nothing_to_remove_in_a_missing_tmpdir(tmp_path):
    assert remove_stale_staging(str(tmp_path / "absent")) == []
