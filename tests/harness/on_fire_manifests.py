"""A small SYNTHETIC fleet on fire as manifests (benchmarks/fleet.py's ``synthesize(on_fire=True)``:
real rows of manifests collected from the demo sample and the real fixture brokers, copied into 30
brokers' manifests, every partition dir flagged), for tests that audit the same manifests on two
engines. The real rows are collected once under .cache/bench-fleet/real (as the benchmark does)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def on_fire_manifests(out: Path, rows: int = 3_000, dirs: int = 1_500) -> tuple[Path, str, dict]:
    """(the manifests' directory, the audit time that sets the fleet on fire, its shape)."""
    if str(REPO / "benchmarks") not in sys.path:
        sys.path.insert(0, str(REPO / "benchmarks"))
    import fleet

    shape = fleet.synthesize(rows, dirs, out, on_fire=True)
    return out, fleet.ON_FIRE_AS_OF, shape
