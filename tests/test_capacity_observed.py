"""Model against observation (auditor.capacity.observed, auditor.nightly.capacity_history): the
bytes written between two runs, like with like, beside the model's growth, on synthetic segment
rows of two runs (unit tier: no broker; the two-audit test on real log data is
tests/test_capacity_history.py, the planted rate change on a real broker tests/test_capacity_live.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from auditor.capacity import CapacitySettings, TopicRules, project_capacity
from auditor.capacity.columns import from_pandas
from auditor.capacity.ledger import replica_rows
from auditor.capacity.observed import PreviousCapacity, compare_with_previous
from auditor.nightly import capacity_history

pytestmark = pytest.mark.unit

T1 = 1_800_000_000_000
RATE = 10_000.0  # log bytes/s
SEG = 1_000_000
PER_RECORD = 1000
OVERHEAD = 1 + 20 / 4096  # index bytes per log byte, as the model counts them


def replica(topic, first, active_seg, active_bytes, end_ms, rate=RATE, log_dir="/d", partition=0) -> list[dict]:
    """Closed segments ``first`` .. ``active_seg - 1`` of SEG bytes, then the active one of
    ``active_bytes``, written at ``rate`` and ending at ``end_ms`` (base offsets: segment index x 1000)."""
    rows, t = [], end_ms - active_bytes / rate * 1000
    starts = [t - (active_seg - i) * SEG / rate * 1000 for i in range(first, active_seg)] + [t]
    for k, i in enumerate(range(first, active_seg + 1)):
        size = SEG if i < active_seg else active_bytes
        begin, end = starts[k], (starts[k + 1] if k + 1 < len(starts) else end_ms)
        rows.append({"log_dir": log_dir, "topic": topic, "partition": partition, "dir_kind": "live", "broker_id": 1,
                     "base_offset": i * 1000, "first_offset": i * 1000, "last_offset": i * 1000 + size // PER_RECORD - 1,
                     "record_count": size // PER_RECORD, "log_size_bytes": size, "index_size_bytes": 0,
                     "timeindex_size_bytes": 0, "index_entries": 0, "timeindex_entries": 0, "min_timestamp_ms": int(begin),
                     "first_batch_max_timestamp_ms": int(begin), "max_timestamp_ms": int(end), "is_active": i == active_seg})
    return rows


def fs_row(log_dir="/d", at=T1, device="8:1", free=500_000_000, known=True) -> dict:
    if not known:
        return {"log_dir": log_dir, "broker_id": 1, "fs_total_bytes": None, "fs_problem": "cannot stat: capacity unknown"}
    return {"log_dir": log_dir, "broker_id": 1, "fs_total_bytes": 1_000_000_000, "fs_free_bytes": free,
            "fs_available_bytes": free, "fs_device": device, "fs_mount": "/mnt" + device, "fs_statted_at_ms": at}


def run(rows, at, infos=None, rules=None):
    return project_capacity(from_pandas(pd.DataFrame(rows)), infos or [fs_row(at=at)], rules or {}, at, CapacitySettings())


def previous(result, at) -> PreviousCapacity:
    """What the history keeps of a run, as the next run reads it."""
    fs = [dict(r, series=result.filesystems[k].get("series"))
          for k, r in enumerate(capacity_history.filesystem_rows(result.filesystems))]
    return PreviousCapacity(as_of_ms=at, filesystems=fs, replicas=replica_rows(result.ledger))


def compare(before, t_before, after, t_after) -> tuple[dict, list[str]]:
    notes = compare_with_previous(after.filesystems, after.ledger, previous(before, t_before), t_after)
    return after.filesystems[0], notes


def test_first_run_has_nothing_to_compare():
    now = run(replica("a", 0, 10, 500_000, T1), T1)
    compare_with_previous(now.filesystems, now.ledger, PreviousCapacity(), T1)
    e = now.filesystems[0]
    assert e["observed_growth_bytes_per_s"] is None and e["observed_statement"] is None
    assert "no previous run" in e["observed"]["notes"][0]


def test_bytes_appended_not_used_bytes_under_retention():
    """90 s at the model's rate: the previous active segment filled (500,000 more bytes) and a new
    one holds 400,000; retention deleted three old segments meanwhile, so used bytes fell. The
    bytes written are 900,000 and match the model: no statement."""
    before = run(replica("a", 0, 10, 500_000, T1), T1)
    t2 = T1 + 90_000
    after = run(replica("a", 3, 11, 400_000, t2), t2, [fs_row(at=t2, free=500_000_000 + 2_100_000)])
    e, _ = compare(before, T1, after, t2)
    assert e["observed"]["appended_bytes"] == 900_000
    assert e["observed"]["replicas_by_method"] == {"segments": 1, "offsets": 0, "new": 0}
    assert e["observed_growth_bytes_per_s"] == pytest.approx(RATE * OVERHEAD, rel=1e-6)
    assert e["model_compared"] == "previous run" and abs(e["model_difference_percent"]) < 1
    assert e["observed_statement"] is None
    assert e["observed"]["used_delta_bytes"] == -2_100_000  # the sawtooth: used fell while 900,000 bytes were written


def test_a_rate_change_over_a_quarter_is_said_with_its_topic():
    before = run(replica("a", 0, 10, 500_000, T1) + replica("b", 0, 10, 500_000, T1), T1)
    t2 = T1 + 45_000  # "a" at twice its rate: 900,000 bytes in 45 s; "b" as modelled
    after = run(replica("a", 0, 11, 400_000, t2, rate=2 * RATE) + replica("b", 0, 10, 950_000, t2), t2,
                [fs_row(at=t2)])
    e, _ = compare(before, T1, after, t2)
    a = next(t for t in e["observed"]["by_topic"] if t["topic"] == "a")
    assert a["appended_bytes"] == 900_000 and a["difference_percent"] == pytest.approx(100, abs=1)
    assert e["model_difference_percent"] == pytest.approx(50, abs=1)
    assert "by +50%" in e["observed_statement"] and "a: " in e["observed_statement"]
    assert "its producers changed rate" in e["observed_statement"]
    assert "the model now measures" in e["observed_statement"]  # this run's model sees the new rate too
    assert e["observed"]["by_topic"][0]["topic"] == "a"  # the largest difference first


def test_a_gap_of_weeks_with_the_old_segments_gone_estimates_from_offsets():
    before = run(replica("a", 0, 10, 500_000, T1), T1)
    t2 = T1 + 21 * 86400_000
    after = run(replica("a", 5000, 5010, 300_000, t2), t2, [fs_row(at=t2)])
    e, _ = compare(before, T1, after, t2)
    assert e["observed"]["replicas_by_method"]["offsets"] == 1
    assert e["observed"]["appended_bytes"] == (5010 * 1000 + 300 - 10_500) * PER_RECORD
    notes = " ".join(e["observed"]["notes"])
    assert "21.0 d ago" in notes and "estimated from offsets" in notes
    assert e["observed_statement"] and e["model_difference_percent"] < -25


def test_previous_run_with_capacity_unknown_compares_with_this_runs_model():
    before = run(replica("a", 0, 10, 500_000, T1), T1, [fs_row(known=False)])
    assert before.ledger is not None and len(before.ledger) == 1
    t2 = T1 + 90_000
    after = run(replica("a", 3, 11, 400_000, t2), t2, [fs_row(at=t2)])
    e, _ = compare(before, T1, after, t2)
    assert e["model_compared"] == "this run" and abs(e["model_difference_percent"]) < 1
    assert any("capacity unknown then" in n for n in e["observed"]["notes"])


def test_capacity_unknown_in_both_runs_shows_the_bytes_with_no_model():
    before = run(replica("a", 0, 10, 500_000, T1), T1, [fs_row(known=False)])
    t2 = T1 + 90_000
    after = run(replica("a", 3, 11, 400_000, t2), t2, [fs_row(at=t2, known=False)])
    e, _ = compare(before, T1, after, t2)
    assert e["observed"]["appended_bytes"] == 900_000 and e["model_compared"] is None
    assert e["model_difference_percent"] is None and e["observed_statement"] is None
    assert any("no model to compare" in n for n in e["observed"]["notes"])


def test_different_log_dirs_and_a_reassignment_are_left_out_and_named():
    """Run 1 audits /d (topic a-0, a-1); run 2 /d and /e on one filesystem, a-1 moved to /e and a
    new partition c-0 created on /d. The moved replica's bytes are not growth; /e was not audited
    before (said); the new partition's bytes are."""
    before = run(replica("a", 0, 10, 500_000, T1) + replica("a", 0, 10, 500_000, T1, partition=1), T1)
    t2 = T1 + 90_000
    rows = (replica("a", 3, 11, 400_000, t2) + replica("a", 3, 11, 400_000, t2, log_dir="/e", partition=1)
            + replica("c", 0, 0, 200_000, t2))
    after = run(rows, t2, [fs_row(at=t2), fs_row("/e", at=t2)])
    e, _ = compare(before, T1, after, t2)
    assert e["observed"]["appended_bytes"] == 900_000 + 200_000
    assert e["observed"]["replicas_by_method"] == {"segments": 1, "offsets": 0, "new": 1}
    assert e["observed"]["left_out"] == {"moved out": {"replicas": 1, "bytes": 10 * SEG + 500_000}}
    assert any("not audited by the previous run" in n for n in e["observed"]["notes"])


def test_a_retention_change_and_a_truncated_log_are_named():
    rules1 = {"a": TopicRules(retention_s=86400.0)}
    before = run(replica("a", 0, 10, 500_000, T1) + replica("b", 0, 10, 500_000, T1), T1, rules=rules1)
    t2 = T1 + 45_000
    rules2 = {"a": TopicRules(retention_s=3600.0)}
    after = run(replica("a", 0, 11, 400_000, t2, rate=2 * RATE) + replica("b", 0, 2, 100_000, t2), t2, [fs_row(at=t2)],
                rules=rules2)
    e, _ = compare(before, T1, after, t2)
    assert e["observed"]["left_out"]["truncated or re-created"]["replicas"] == 1  # b: its end offset went back
    assert "retention.ms changed from 86400000 to 3600000" in e["observed_statement"]


def test_no_ledger_and_a_later_previous_run_are_said_not_compared():
    now = run(replica("a", 0, 10, 500_000, T1), T1)
    compare_with_previous(now.filesystems, None, PreviousCapacity(as_of_ms=T1 - 1000), T1)
    assert "projection failed" in now.filesystems[0]["observed"]["notes"][0]
    now = run(replica("a", 0, 10, 500_000, T1), T1)
    compare_with_previous(now.filesystems, now.ledger, PreviousCapacity(as_of_ms=T1 + 1000), T1)
    assert now.filesystems[0]["observed_growth_bytes_per_s"] is None


def test_the_history_file_round_trips_and_bad_files_are_notes(tmp_path):
    before = run(replica("a", 0, 10, 500_000, T1), T1)
    path = capacity_history.append(tmp_path, T1, before.filesystems, before.ledger)
    assert path.name == "capacity-20270115T080000.000Z.parquet"
    prev = capacity_history.read_previous(tmp_path, T1 + 90_000)
    assert prev.as_of_ms == T1 and len(prev.replicas) == 1 and prev.replicas[0]["end_offset"] == 10_500
    assert prev.filesystems[0]["series"] == before.filesystems[0]["series"]
    assert capacity_history.read_previous(tmp_path, T1).as_of_ms is None  # only earlier runs
    (tmp_path / "capacity-20270116T080000.000Z.parquet").write_bytes(b"not parquet")
    cut = capacity_history.read_previous(tmp_path, T1 + 2 * 86400_000)
    assert cut.as_of_ms is None and "unreadable" in cut.notes[0]
    t2 = T1 + 90_000
    after = run(replica("a", 3, 11, 400_000, t2), t2, [fs_row(at=t2)])
    capacity_history.observe(tmp_path, after, t2)
    assert after.filesystems[0]["observed"]["appended_bytes"] == 900_000
    assert after.filesystems[0]["observed"]["predicted_used_bytes"] is not None
