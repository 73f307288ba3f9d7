"""What a non-local master's executors get (``auditor.engines.spark.session.package_zip``, shipped with
``addPyFile``): a fresh interpreter with only that zip on its path (cwd elsewhere, no PYTHONPATH,
as a remote worker without this checkout) imports the partition checks and runs one batch with
them, as ``check_runner.spark_partition_findings``' per-bucket function does on an executor."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from auditor.engines.spark.session import SHIPPED_PACKAGES, package_zip

# a fresh interpreter importing the checks: 3 s at load 2 (tests/conftest.py: long files first)
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=3)]

PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import pandas as pd
import auditor, checks
from auditor.check_runner import run_partition_batch
from checks.framework.batch import PartitionBatch
from checks.framework.base import AuditContext
from checks.framework.config import Config
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA, to_table
assert auditor.__file__.startswith(sys.argv[1]) and checks.__file__.startswith(sys.argv[1]), (auditor.__file__, checks.__file__)
segments = to_table([], SEGMENT_SCHEMA).to_pandas()
partitions = to_table([], PARTITION_SCHEMA).to_pandas()
found = run_partition_batch(PartitionBatch(segments, partitions), AuditContext(as_of_ms=0, config=Config.load(None)))
print("imported", len(checks.REGISTRY), "checks; findings", len(found))
"""


def test_the_zip_holds_both_packages(tmp_path):
    names = zipfile.ZipFile(package_zip(tmp_path / "p.zip")).namelist()
    assert SHIPPED_PACKAGES == ("auditor", "checks")
    for package in SHIPPED_PACKAGES:
        assert f"{package}/__init__.py" in names
    assert "checks/framework/batch.py" in names and "auditor/check_runner.py" in names
    assert not [n for n in names if not n.endswith(".py")], "sources only"


def test_a_worker_without_the_checkout_runs_the_checks_from_the_zip(tmp_path):
    target = package_zip(tmp_path / "p.zip")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(target)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("imported "), done.stdout
