"""Where the real broker data lives, and how to get a private copy of it."""

from __future__ import annotations

import shutil
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
REAL = SHARED / "fixtures" / "real"
BROKER_DIRS = REAL / "broker-dirs"
RECORD_SETS = REAL / "record-sets"

if not REAL.is_dir():  # fail loudly: a missing fixture must never turn into a skipped test
    raise RuntimeError(f"real Kafka fixtures not found at {REAL}: ../shared must sit beside the repo")

LOG_DIRS = sorted(p for p in BROKER_DIRS.glob("*/*") if p.is_dir())
"""The log dirs (the broker's log.dirs entries) under broker-dirs/."""


def copy_log_dir(name: str, dest: Path) -> Path:
    """A private, writable copy of one real log dir (tests that damage files work on this)."""
    src = next(p for p in LOG_DIRS if p.parent.name == name)
    target = dest / name / src.name
    shutil.copytree(src, target)
    return target
