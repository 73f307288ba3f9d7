"""The tests' two ways to run ``kafka-audit``: as users and scripts do (a subprocess of this Python,
from the repository root), and in this process (``auditor.cli.main``, the function
``python -m auditor.cli`` exits with) for tests about a command's results and exit codes rather
than about the process: no Python start and no import of the stack per command."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def kafka_audit(*args, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m auditor.cli ARGS`` (each argument str()'d). Spark, when a command starts it, binds
    127.0.0.1 (SPARK_LOCAL_IP). ``timeout`` bounds the whole command (subprocess.TimeoutExpired)."""
    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return subprocess.run([sys.executable, "-m", "auditor.cli", *map(str, args)], capture_output=True,
                          text=True, env=run_env, timeout=timeout, cwd=REPO_ROOT)


def kafka_audit_in_process(*args) -> subprocess.CompletedProcess:
    """``kafka-audit ARGS`` through ``auditor.cli.main`` here, stdout and stderr captured; an
    argparse usage error (SystemExit) gives its exit code, as the process would."""
    from auditor.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return subprocess.CompletedProcess(["kafka-audit", *map(str, args)], rc, out.getvalue(), err.getvalue())
