"""An unexpected failure inside any command leaves with exit 4 (internal error) and one line on
stderr naming the command, the exception and where it was raised, never Python's traceback and
exit 1 (which means "findings at the failing severity" to a script gating on it). The traceback is
in the file the line names, or printed with ``--debug``.

One fresh interpreter runs every command through ``auditor.cli.main`` with the command's ``run``
replaced by one that raises (the failure is forced there; everything around it is the real CLI)."""

from __future__ import annotations

import pytest
import json
import subprocess
import sys
from pathlib import Path

from auditor.cli import COMMANDS
from auditor.cli.common import EXIT_INTERNAL

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import contextlib, importlib, io, json, sys
from auditor.cli import COMMANDS, main

def boom(args):
    raise RuntimeError("forced failure\nsecond line")

out = {}
for name, (module, _) in COMMANDS.items():
    importlib.import_module(module).run = boom
    for debug in (False, True):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                rc = main((["--debug"] if debug else []) + [name] + ARGS[name])
        except SystemExit as exc:  # argparse refused ARGS: say which
            sys.exit(f"{name}: {exc.code}: {err.getvalue()}")
        out[f"{name}{' --debug' if debug else ''}"] = [rc, err.getvalue()]
print(json.dumps(out))
"""

ARGS = {  # the least each command's parser takes; the run never starts its work
    "scan": ["/nonexistent"], "collect": ["--out", "/nonexistent/out", "/nonexistent"],
    "audit": ["--log-dir", "/nonexistent"], "report": ["--out", "/nonexistent/r.html", "/nonexistent.json"], "demo": [],
    "replay-check": ["--topic", "t", "--at", "2024-01-01T00:00:00Z", "--log-dir", "/nonexistent"],
    "groups": ["/nonexistent"], "metadata": ["/nonexistent"],
}


def test_every_command_exits_4_with_one_line_on_an_unexpected_error():
    assert set(ARGS) == set(COMMANDS), "a command without arguments in ARGS"
    code = f"ARGS = {ARGS!r}\n" + PROBE
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in COMMANDS:
        rc, err = results[name]
        assert rc == EXIT_INTERNAL, (name, rc, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, (name, err)
        assert lines[0].startswith(f"kafka-audit: internal error in {name}: RuntimeError: forced failure at <string>:"), lines
        assert "Traceback" not in err
        trace_file = Path(lines[0].split("traceback in ", 1)[1].split(" ", 1)[0])
        assert "RuntimeError: forced failure" in trace_file.read_text()
        trace_file.unlink()
        rc, err = results[f"{name} --debug"]
        assert rc == EXIT_INTERNAL and err.startswith("Traceback (most recent call last):"), (name, err)
        assert err.strip().splitlines()[-1].startswith(f"kafka-audit: internal error in {name}: RuntimeError"), err
