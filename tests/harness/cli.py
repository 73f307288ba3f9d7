"""The tests' one way to run ``kafka-audit`` as users and scripts do: a subprocess of this Python,
from the repository root, stdout and stderr captured as text."""

from __future__ import annotations

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
