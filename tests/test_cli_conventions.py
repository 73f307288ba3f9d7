"""One way to say each thing on every command: log dirs as ``--log-dir DIR`` or as words (both
accepted everywhere, the flag preferred), the same ``--depth`` default where the same table is asked
for, ``--engine auto|local|spark`` on scan as on audit, and older outputs read under their new names."""

from __future__ import annotations

import contextlib
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from auditor.cli import main
from auditor.nightly import run_history
from auditor.scan.filesystem import FS_FIELDS_OF_THE_MOMENT
from harness.realdata import LOG_DIRS

pytestmark = pytest.mark.recorded


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def scan_json(*argv) -> dict:
    rc, out, err = run_cli("scan", "--json", "--no-progress", *argv)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["as_of_utc"].endswith("Z") and doc["schema_version"] == 2
    for volatile in ("as_of_ms", "as_of_utc"):
        doc.pop(volatile)
    for s in doc["segments"]:
        s.pop("scanned_at_ms")
        s.pop("scanned_at_utc")
    for d in doc["log_dirs"]:  # the filesystem under it, statted at each scan (auditor.scan.filesystem)
        for volatile in FS_FIELDS_OF_THE_MOMENT:
            d.pop(volatile, None)
    return doc


def test_log_dirs_as_flags_or_words_give_the_same_scan():
    a, b = LOG_DIRS[0], LOG_DIRS[1]
    words = scan_json(a, b)
    assert scan_json("--log-dir", a, "--log-dir", b) == words
    assert scan_json("--log-dir", a, b) == words  # both forms at once: flags first, then words
    assert words["depth"] == "headers" and "engine" not in words  # auto: the local scan without --manifest/--master


@pytest.mark.parametrize("command,extra", [("collect", ["--out", "/nonexistent/m"]), ("metadata", []),
                                           ("audit", ["--out", "/nonexistent/r.html"]),
                                           ("replay-check", ["--topic", "t", "--at", "2024-01-01T00:00:00Z"])])
def test_a_command_without_its_input_says_so_in_one_line(command, extra):
    rc, out, err = run_cli(command, *extra)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--log-dir" in err, err


def test_two_inputs_at_once_are_refused_naming_both():
    rc, _, err = run_cli("audit", LOG_DIRS[0], "--manifest", "/nonexistent", "--out", "/nonexistent/r.html")
    assert rc == 2 and "got --log-dir and --manifest" in err, err


def test_a_run_history_file_from_before_the_rename_reads_under_as_of_ms(tmp_path):
    old = pa.table({"run_at_ms": [1_700_000_000_000], "verdict": ["FAIL"], "topic": ["t"], "partitions": [3],
                    "size_bytes": [10], "message_count": [1], "skew_ratio": [1.0], "fail": [1], "warn": [0], "info": [0]})
    pq.write_table(old, tmp_path / "run-2023-11-14T221320.000Z.parquet")
    rows = run_history.read(tmp_path)
    assert rows == [{"verdict": "FAIL", "topic": "t", "partitions": 3, "size_bytes": 10, "message_count": 1,
                     "skew_ratio": 1.0, "fail": 1, "warn": 0, "info": 0, "as_of_ms": 1_700_000_000_000}]
