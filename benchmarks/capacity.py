"""The capacity projection against node_exporter's peer rule, on byte series recorded from real runs.

    .venv/bin/python benchmarks/capacity.py [--series benchmarks/capacity-series]

The series (``benchmarks/capacity-series/*.json``) were recorded by tests/test_capacity_live.py with
``KLA_CAPACITY_RECORD=benchmarks/capacity-series``: a real KRaft broker whose only log dir is a
tmpfs, a producer at a constant rate, the filesystem's used bytes every 0.5 s (statvfs), the
audit's prediction at t = 0 (the audit time) and, where the disk filled, the broker's own log dir
failure time:

* ``steady-climb``: no retention within reach (7 d), 300,000 B/s until the 32 MiB tmpfs is full;
* ``sawtooth``: retention.ms 30 s, segment.ms 5 s, file.delete.delay.ms 5 s, checks every second,
  100,000 B/s on 64 MiB: it never fills;
* ``blocked-retention``: retention.ms 15 s, segment.ms 3 s, but one record a day ahead written
  first: retention stops and the 32 MiB fill.

The peer is node_exporter's ``NodeFilesystemSpaceFillingUp``: ``predict_linear(avail[W], H) < 0``
(a least-squares line through the available bytes of the last W, extrapolated H ahead). Its
production W and H (6 h, 24 h) are for disks that fill over days; these runs last minutes, so W and
H are scaled and several are shown. For each run: the time to full each predicts at t = 0 against
the one observed, and (for the run that never fills) how often the peer's rule would fire between
t = 0 and the end: each firing a false alarm. The model gives one number per run (its audit at
t = 0). Prints a table; asserts nothing.

``--scale`` times the projection itself on the fleet's shape instead (the target: the capacity
stage over the 100,000-row fleet of benchmarks/fleet.py in at most 2 s on the driver): 50,000
partitions of 2 segments over 30 filesystems and 500 topics, the median CPU of 5 runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WINDOWS_S = (5.0, 10.0, 20.0)
HORIZONS_S = (60.0, 600.0, 3600.0)


def predict_linear(t: np.ndarray, avail: np.ndarray, at: float, window: float, horizon: float) -> float | None:
    """Prometheus' predict_linear(avail[window], horizon) evaluated at ``at``: None when fewer than two samples."""
    sel = (t > at - window) & (t <= at)
    if sel.sum() < 2:
        return None
    slope, intercept = np.polyfit(t[sel] - at, avail[sel], 1)
    return float(intercept + slope * horizon)


def linear_time_to_full(t: np.ndarray, avail: np.ndarray, at: float, window: float) -> float | None:
    """When the peer's line reaches 0 available bytes, seen from ``at`` (None: not falling)."""
    sel = (t > at - window) & (t <= at)
    if sel.sum() < 2:
        return None
    slope, intercept = np.polyfit(t[sel] - at, avail[sel], 1)
    return float(-intercept / slope) if slope < 0 else None


def _fmt(x: float | None) -> str:
    return "never" if x is None else f"{x:7.1f} s"


def _err(pred: float | None, obs: float | None) -> str:
    if obs is None:
        return "right" if pred is None else "false alarm"
    if pred is None:
        return "missed"
    return f"{(pred - obs) / obs * 100:+6.1f}%"


def report(run: dict) -> list[str]:
    samples = np.array(run["samples"], dtype=float)
    t, used = samples[:, 0], samples[:, 1]
    avail = run["usable_bytes"] - used
    observed = run.get("observed_full_s")
    model = run["model"]["seconds_to_full"]
    lines = [f"{run['name']} ({run['rules']}): observed full {_fmt(observed)}; steady state predicted "
             f"{run['model']['steady_state_bytes']} B, peak seen {int(used.max())} B of {run['usable_bytes']} B",
             f"  model (Kafka's rules, audit at t=0):  time to full {_fmt(model)}  error {_err(model, observed)}"]
    after = t[(t >= 0) & (t <= (observed if observed is not None else t.max()))]
    for w in WINDOWS_S:
        peer = linear_time_to_full(t, avail, 0.0, w)
        fires = {h: np.mean([(p := predict_linear(t, avail, at, w, h)) is not None and p < 0 for at in after])
                 for h in HORIZONS_S}
        alarm = ", ".join(f"H={h:.0f} s fires {fires[h] * 100:5.1f}% of the time" for h in HORIZONS_S)
        lines.append(f"  predict_linear W={w:4.0f} s:             time to full {_fmt(peer)}  error {_err(peer, observed)};"
                     f" {alarm}{' (false alarms: it never fills)' if observed is None else ''}")
    return lines


def scale(runs: int = 5) -> None:
    """The projection over 100,000 segment rows of the fleet's shape: median CPU seconds of ``runs``."""
    import math
    import statistics
    import time

    import pandas as pd
    import pyarrow as pa

    from auditor.capacity import TopicRules, project_capacity
    from auditor.capacity.columns import from_arrow

    now, n_parts, per, segment_bytes = 1_800_000_000_000, 50_000, 2, 1_000_000
    rng = np.random.default_rng(35)
    part = np.repeat(np.arange(n_parts), per)
    seg = np.tile(np.arange(per), n_parts)
    rate = rng.uniform(0, 20_000, n_parts)[part]
    end = now - (per - 1 - seg) * 100_000
    frame = pd.DataFrame({
        "log_dir": pd.Categorical([f"/synthetic/b{p % 30}" for p in part]), "topic": pd.Categorical([f"t{p % 500}" for p in part]),
        "partition": part, "dir_kind": "live", "base_offset": seg * 1000, "log_size_bytes": rate * 100,
        "index_size_bytes": 0, "timeindex_size_bytes": 0, "min_timestamp_ms": end - 100_000, "max_timestamp_ms": end,
        "is_active": seg == per - 1, "record_count": 1000})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    infos = [{"log_dir": f"/synthetic/b{i}", "broker_id": i, "fs_total_bytes": 10**13, "fs_free_bytes": 10**12,
              "fs_available_bytes": 10**12, "fs_device": f"8:{i}", "fs_mount": f"/synthetic/b{i}", "fs_statted_at_ms": now}
             for i in range(30)]
    rules = {f"t{i}": TopicRules(retention_s=3600 * (i % 48 + 1), segment_bytes=segment_bytes,
                                 retention_bytes=(10**9 if i % 7 == 0 else math.inf)) for i in range(500)}
    spent = []
    for _ in range(runs):
        started = time.process_time()
        result = project_capacity(from_arrow(table), infos, rules, now)
        spent.append(time.process_time() - started)
    assert len(result.filesystems) == 30 and all(e["growth_bytes_per_s"] > 0 for e in result.filesystems)
    print(f"capacity projection, {len(frame):,} segment rows, {n_parts:,} partitions, 30 filesystems: "
          f"median {statistics.median(spent):.2f} s CPU of {runs} (min {min(spent):.2f}, max {max(spent):.2f}; target <= 2 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", default=str(HERE / "capacity-series"))
    parser.add_argument("--scale", action="store_true", help="time the projection on the fleet's shape instead")
    args = parser.parse_args()
    if args.scale:
        scale()
        return
    runs = [json.loads(p.read_text()) for p in sorted(Path(args.series).glob("*.json"))]
    if not runs:
        raise SystemExit(f"no series in {args.series} (record them: KLA_CAPACITY_RECORD=... tests/test_capacity_live.py)")
    for run in runs:
        print("\n".join(report(run)))
        print()


if __name__ == "__main__":
    main()
