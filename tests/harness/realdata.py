"""Where the real broker data lives, and how to get a private copy of it.

The recorded and live tiers read files written by real Kafka brokers from ``../shared/fixtures/real``
(the ``shared`` folder beside this checkout; its README says what each holds). Without it the run
stops at collection with one line saying where to put it: a missing fixture never turns into a
skipped test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared"
REAL = SHARED / "fixtures" / "real"
BROKER_DIRS = REAL / "broker-dirs"
RECORD_SETS = REAL / "record-sets"

if not REAL.is_dir():
    pytest.exit(f"real Kafka fixtures not found: put the shared folder, with fixtures/real/ inside, at {SHARED} "
                "(beside this checkout); the unit tier runs without it (TEST_TIERS=unit)", returncode=4)



def at_least(items, minimum: int, what: str) -> list:
    """``items`` as a list, or RuntimeError (at collection) when the fixtures hold fewer than
    ``minimum``: a partly emptied fixture folder must fail, never shrink a parametrization."""
    items = list(items)
    if len(items) < minimum:
        raise RuntimeError(f"{what}: {len(items)} found under {REAL}, at least {minimum} expected "
                           "(the fixtures README lists them): the real fixtures are incomplete")
    return items


LOG_DIRS = at_least(sorted(p for p in BROKER_DIRS.glob("*/*") if p.is_dir()), 3, "broker log dirs")
"""The log dirs (the broker's log.dirs entries) under broker-dirs/."""
RECORD_SET_FILES = at_least(sorted(RECORD_SETS.rglob("*.bin")), 45, "record sets (*.bin)")
"""Every real record set (fetch responses and produce batches laid out like a .log)."""


def copy_log_dir(name: str, dest: Path) -> Path:
    """A private, writable copy of one real log dir (tests that damage files work on this)."""
    src = next(p for p in LOG_DIRS if p.parent.name == name)
    target = dest / name / src.name
    shutil.copytree(src, target)
    return target
