"""SYNTHETIC segment and partition tables for the batch equality tests, drawn from the real
fixtures' rows (benchmarks/synthetic_rows.py): a fleet with anomalies planted at random under
per-topic configs, and a fleet on fire where every partition dir is flagged."""

from __future__ import annotations
import sys
from pathlib import Path
import numpy as np
from checks.framework.base import AuditContext
from checks.framework.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # synthetic_rows


SYNTHETIC_CONFIG = {
    "kafka": {"retention.ms": 86_400_000},
    "checks": {"timestamps.backward": {"threshold_ms": 600_000}},
    "topics": {
        "synthetic-topic-1": {"checks": {"integrity.crc": {"enabled": False}}, "kafka": {"cleanup.policy": "compact"}},
        "synthetic-topic-2*": {"checks": {"timestamps.backward": {"threshold_ms": 60_000},
                                          "mtime.reset": {"mtime_after_ms": 3_600_000}},
                               "kafka": {"retention.ms": 3_600_000, "message.timestamp.before.max.ms": 60_000}},
        "synthetic-topic-3": {"kafka": {"retention.ms": -1}},
    },
}


_BASE: list = []


def _base_rows():
    """The real fixtures' segment rows (scanned once per module)."""
    if not _BASE:
        from synthetic_rows import base_rows

        _BASE.append(base_rows(None)[0])
    return _BASE[0]


def synthetic_tables(seed: int, rows: int = 900, topics: int = 6):
    """SYNTHETIC rows (benchmarks/synthetic_rows.py over the real fixtures' rows), anomalies planted
    at random: CRC failures, backward jumps, cut tails, magic 0, future and old timestamps, index
    entries past the .log, missing indexes, offset gaps, late and reset mtimes, -future copies."""
    from synthetic_rows import synthesize

    base = _base_rows()
    seg, part = synthesize(rows, base, brokers=5, topics=topics, partitions=6, rf=3, seed=seed)
    seg = seg.to_pylist()
    part = part.to_pylist()
    rng = np.random.default_rng(seed)
    now = max(s["log_mtime_ms"] for s in seg) + 3_600_000

    def some(p):
        return [s for s in seg if rng.random() < p]

    for s in some(0.01):
        s["crc_failures"] = int(rng.integers(1, 4))
    for s in some(0.02):
        s["max_backward_jump_ms"], s["max_backward_jump_offset"] = int(rng.integers(1, 7_200_000)), s["base_offset"] + 1
    for s in some(0.01):
        s["stop_reason"], s["trailing_bytes"] = str(rng.choice(["corrupt", "truncated"])), int(rng.integers(0, 90))
    for s in some(0.01):
        s["magics"], s["timestamp_types"] = [0], ["NoTimestampType"]
    for s in some(0.01):
        s["max_timestamp_ms"] = now + int(rng.integers(-7_200_000, 90 * 86_400_000))
    for s in some(0.02):
        s["min_timestamp_ms"] = s["min_batch_timestamp_ms"] = s["log_mtime_ms"] - int(rng.integers(0, 7_200_000))
    for s in some(0.01):
        s["last_index_position"] = (s["log_size_bytes"] or 0) + int(rng.integers(0, 2))
    for s in some(0.01):
        s["last_index_offset"] = s["last_offset"] + int(rng.integers(0, 2))
    for s in some(0.01):
        s["index_size_bytes"] = None
    for s in some(0.01):
        s["notes"] = list(s["notes"] or []) + ["index entry 3: offsets expected strictly increasing"]
    for s in some(0.02):
        s["first_offset"] = s["first_offset"] + int(rng.integers(0, 3))
    for s in some(0.02):
        s["log_mtime_ms"] = s["log_mtime_ms"] + int(rng.integers(0, 5 * 86_400_000))
    for s in some(0.005):
        s["dir_kind"], s["dir_name"] = "future", s["dir_name"] + ".abc-future"
    for s in some(0.005):
        s["file_state"] = "deleted"
    groups = [{"group": f"g{i}", "topic": s["topic"], "partition": s["partition"],
               "committed_offset": int(s["base_offset"]) + int(rng.integers(-5, 5)), "commit_timestamp_ms": now}
              for i, s in enumerate(some(0.01))]
    for p in part:
        if rng.random() < 0.05:
            p["log_start_offset"] = int(rng.integers(0, 3_000_000))
    ctx = AuditContext(as_of_ms=now, config=Config(SYNTHETIC_CONFIG, source="synthetic"), group_offsets=tuple(groups),
                       topic_configs={"synthetic-topic-4": {"message.timestamp.type": "LogAppendTime"}})
    return seg, part, ctx


DAY_MS = 86_400_000


def on_fire_tables(seed: int, rows: int = 900):
    """:func:`synthetic_tables` on a bad day, every partition dir flagged (benchmarks/fleet.py's
    on-fire fleet): retention stopped (the audit 60 days after the newest mtime), each partition's
    replica on its highest broker re-written at once 20 days in (mtimes packed into 4 minutes),
    a producer clock 2 days ahead on every active segment."""
    seg, part, ctx = synthetic_tables(seed, rows)
    rng = np.random.default_rng(seed)
    moved_at = ctx.as_of_ms + 20 * DAY_MS
    ctx.as_of_ms += 60 * DAY_MS
    highest: dict = {}
    for s in seg:
        key = (s["topic"], s["partition"])
        highest[key] = max(highest.get(key, -1), s["broker_id"])
    for s in seg:
        if s["broker_id"] == highest[(s["topic"], s["partition"])]:
            s["log_mtime_ms"] = moved_at + int(rng.integers(0, 240_000))
        if s["is_active"]:
            s["max_timestamp_ms"] = ctx.as_of_ms + 2 * DAY_MS + int(rng.integers(0, 600_000))
    return seg, part, ctx
