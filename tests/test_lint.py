"""The code passes the linter its pyproject.toml configures (``[tool.ruff]``): pyflakes'
undefined and unused names, pycodestyle's errors, bugbear's likely bugs and blind excepts that do
not say why."""

from __future__ import annotations

import pytest
import shutil
import subprocess
import sys
from pathlib import Path

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean():
    ruff = Path(sys.executable).with_name("ruff")
    ruff = str(ruff) if ruff.exists() else shutil.which("ruff")
    assert ruff, "ruff is not installed: it is in the [test] extra (bash scripts/setup.sh --test)"
    proc = subprocess.run([ruff, "check", "--output-format", "concise", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
