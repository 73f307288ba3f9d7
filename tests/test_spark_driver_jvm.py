"""An audit on Spark ends the driver JVM it launched once its table stages are done, before the
findings document and the report (issue 19: the driver's RSS is the Python driver and its JVM
together; the JVM's ~450-600 MiB of heap, metaspace and code were held through the report stage
until the process exited, benchmarks/fleet_spark.py). A JVM the audit did not launch stays
(a test's session: ``stop_driver_jvm`` refuses while a context is active)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import REPO_ROOT
from harness.realdata import LOG_DIRS
from harness.spark_session import spark  # noqa: F401

pytestmark = pytest.mark.live  # the audit's subprocess starts Spark (local[1])

STOPPED = "Spark stopped; its driver JVM ended"


def _children(pid: int) -> list[tuple[int, str]]:
    """The live child processes of ``pid`` (pid, command line), from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):  # gone while read
            continue
        if ppid == pid:
            out.append((int(entry.name), cmdline))
    return out


def test_the_audit_ends_its_driver_jvm_before_the_report(tmp_path):
    out_json, out_html = tmp_path / "findings.json", tmp_path / "report.html"
    cmd = [sys.executable, "-m", "auditor.cli", "audit", "--log-dir", str(LOG_DIRS[0]), "--engine", "spark",
           "--master", "local[1]", "--json", str(out_json), "--out", str(out_html), "--exit-zero", "--progress"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, jvm_seen, after_stop = [], False, None
    try:
        for line in proc.stderr:  # the audit's progress, line by line (bounded by pytest's timeout)
            lines.append(line)
            children = _children(proc.pid)
            jvm_seen = jvm_seen or any("SparkSubmit" in c for _, c in children)
            if STOPPED in line:
                after_stop = children
    finally:
        rc = proc.wait(timeout=600)
    log = "".join(lines)[-4000:]
    assert rc == 0, log
    assert jvm_seen, f"no driver JVM was ever a child of the audit:\n{log}"
    assert after_stop is not None, f"no {STOPPED!r} progress line:\n{log}"
    assert after_stop == [], f"still running once Spark stopped: {after_stop}"
    # the report and the document came after it, from what the table stages collected
    assert log.index(STOPPED) < log.rindex("wrote"), log
    doc = json.loads(out_json.read_text())
    assert doc["engine"]["name"] == "spark" and doc["findings"], sorted(doc)
    assert out_html.stat().st_size > 0


def test_a_session_that_was_there_stays(spark):  # noqa: F811 - the tests' own session
    from auditor.engines.spark.session import driver_jvm_running, stop_driver_jvm

    assert driver_jvm_running()
    assert stop_driver_jvm() is False  # its context is active: not this call's to end
    assert spark.range(3).count() == 3

