"""The capacity projection's pure core (auditor.capacity) on synthetic segment rows, the filesystem
the scan records under a log dir, and manifests with and without it (unit tier: no broker)."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from auditor.capacity import CapacitySettings, TopicRules, project_capacity
from auditor.capacity.columns import from_pandas
from auditor.capacity.model import _build, used_at
from auditor.capacity.filesystems import group_filesystems
from auditor.capacity.replicas import _group_cummax, build_replicas
from auditor.capacity.rules import rules_for

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
RATE = 10_000.0  # bytes/s of log data
SEG = 1_000_000  # bytes: 100 s of data a segment


def _fs(log_dir="/d", total=100_000_000, free=80_000_000, device="8:1", **kw) -> dict:
    return {"log_dir": log_dir, "broker_id": 1, "fs_total_bytes": total, "fs_free_bytes": free,
            "fs_available_bytes": free, "fs_device": device, "fs_mount": kw.pop("mount", log_dir), "fs_statted_at_ms": NOW, **kw}


def _partition(topic="a", partition=0, closed=10, log_dir="/d", future_at=None, active_bytes=SEG // 2) -> list[dict]:
    """``closed`` segments of SEG bytes at RATE, then the active one half full, ending now."""
    rows, start = [], NOW - int((closed * SEG + active_bytes) / RATE * 1000)
    for i in range(closed):
        first, last = start + int(i * SEG / RATE * 1000), start + int((i + 1) * SEG / RATE * 1000)
        rows.append({"log_dir": log_dir, "topic": topic, "partition": partition, "dir_kind": "live", "base_offset": i * 1000,
                     "log_size_bytes": SEG, "index_size_bytes": 0, "timeindex_size_bytes": 0, "min_timestamp_ms": first,
                     "max_timestamp_ms": future_at if (i == 0 and future_at) else last, "is_active": False,
                     "record_count": 1000})
    rows.append({"log_dir": log_dir, "topic": topic, "partition": partition, "dir_kind": "live", "base_offset": closed * 1000,
                 "log_size_bytes": active_bytes, "index_entries": 0, "timeindex_entries": 0,
                 "min_timestamp_ms": NOW - int(active_bytes / RATE * 1000), "first_batch_max_timestamp_ms": NOW - int(active_bytes / RATE * 1000),
                 "max_timestamp_ms": NOW, "is_active": True, "record_count": 500})
    return rows


def _project(rows, infos=None, rules=None, **settings):
    cols = from_pandas(pd.DataFrame(rows))
    return project_capacity(cols, infos or [_fs()], rules or {}, NOW, CapacitySettings(**settings))


def test_rate_and_time_to_full_without_retention_in_reach():
    entry = _project(_partition()).filesystems[0]
    assert entry["growth_bytes_per_s"] == pytest.approx(RATE * (1 + 20 / 4096), rel=1e-3)
    assert entry["seconds_to_full"] == pytest.approx(80_000_000 / (RATE * (1 + 20 / 4096)), rel=2e-3)
    assert entry["kafka_bytes"] == 10 * SEG + SEG // 2 and entry["other_bytes"] == 20_000_000 - entry["kafka_bytes"]
    assert entry["headroom_at_utc"] < entry["full_at_utc"]
    assert set(entry) >= {"broker_id", "log_dirs", "mount", "total_bytes", "free_bytes", "kafka_bytes", "other_bytes",
                          "growth_bytes_per_s", "steady_state_bytes", "seconds_to_full", "full_at_utc", "headroom_at_utc",
                          "config_sources"}


def test_time_retention_steady_state_and_sawtooth():
    rules = {"a": TopicRules(retention_s=3600, segment_bytes=SEG, check_interval_s=300, delete_delay_s=60)}
    entry = _project(_partition(), rules=rules).filesystems[0]
    g = RATE * (1 + 20 / 4096)
    assert entry["seconds_to_full"] is None
    fixed = 20_000_000 - (10 * SEG + SEG // 2)
    assert entry["steady_state_bytes"] == pytest.approx(fixed + g * (3600 + SEG / RATE + 360), rel=1e-3)
    series = [b for _, b in entry["series"]]
    assert max(series) <= entry["steady_state_bytes"] + 1 and any(b < a for a, b in zip(series, series[1:]))


def test_a_future_timestamp_blocks_retention_until_it_expires():
    rules = {"a": TopicRules(retention_s=3600, segment_bytes=SEG)}
    blocked = _project(_partition(future_at=NOW + 10 * 86400_000), rules=rules).filesystems[0]
    assert blocked["seconds_to_full"] == pytest.approx(80_000_000 / (RATE * (1 + 20 / 4096)), rel=2e-3)
    assert blocked["causes"][0]["cause"] == "retention blocked by a future timestamp"


def test_size_rule_is_per_partition_in_whole_segments():
    rules = {"a": TopicRules(retention_bytes=5 * SEG, segment_bytes=SEG)}
    rows = _partition(partition=0) + _partition(partition=1)
    entry = _project(rows, rules=rules).filesystems[0]
    g = RATE * (1 + 20 / 4096)
    per_partition = 5 * SEG + SEG * (1 + 20 / 4096) + g * 360
    assert entry["seconds_to_full"] is None
    assert entry["steady_state_bytes"] == pytest.approx(20_000_000 - 2 * (10 * SEG + SEG // 2) + 2 * per_partition, rel=1e-3)


def test_no_retention_is_unbounded_and_compact_only_unknown():
    for rules, cause, unbounded in (({"a": TopicRules(deletes=False, compacts=True)}, "compaction", False),
                                    ({"a": TopicRules(retention_s=math.inf)}, "no retention", True)):
        entry = _project(_partition(), rules=rules).filesystems[0]
        assert entry["steady_state_bytes"] is None and entry["steady_state_unbounded"] is unbounded
        assert entry["steady_state_unknown"] is not unbounded
        assert cause in [c["cause"] for c in entry["causes"]]
        assert entry["seconds_to_full"] is not None  # the upper edge: it grows as long as nothing is known to stop it


def test_tiered_topics_keep_local_retention():
    values = {"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "3600000"}
    r = rules_for("a", lambda t, k: (values.get(k), "metadata log: topic config") if k in values else (None, ""))
    assert r.tiered and r.retention_s == 3600 and r.sources["local.retention.ms"] == "metadata log: topic config"
    assert r.sources["segment.bytes"] == "Kafka default"
    values["local.retention.ms"] = "-2"
    assert math.isinf(rules_for("a", lambda t, k: (values.get(k), "x") if k in values else (None, "")).retention_s)


def test_deleted_files_go_within_the_delete_delay():
    rows = _partition() + [{"log_dir": "/d", "topic": "a", "partition": 0, "dir_kind": "live", "base_offset": 0,
                            "file_state": "deleted", "log_size_bytes": 5_000_000, "index_size_bytes": 0,
                            "timeindex_size_bytes": 0}]
    rules = {"a": TopicRules(delete_delay_s=60)}
    cols = from_pandas(pd.DataFrame(rows))
    fs = group_filesystems([_fs()])
    reps, going, constant = build_replicas(cols, np.array([0]), fs.origin_ms, [rules["a"]], 86400, 3600)
    m = _build(fs, reps, going, constant)
    used = used_at(m, np.array([0]), np.array([0.0, 59.0, 61.0]))[0]
    g = reps.rate[0]
    assert used[0] == pytest.approx(20_000_000, abs=1)
    assert used[2] - used[1] == pytest.approx(g * 2 - 5_000_000, rel=1e-6)


def test_log_dirs_on_one_device_are_one_filesystem_and_unknown_ones_are_said():
    infos = [_fs("/d1"), _fs("/d2"), _fs("/e", device="8:2"), {"log_dir": "/old", "broker_id": 2},
             {"log_dir": "/x", "broker_id": 3, "fs_total_bytes": None, "fs_problem": "/x: cannot stat"}]
    fs = group_filesystems(infos)
    assert [m["log_dirs"] for m in fs.members] == [["/d1", "/d2"], ["/e"]]
    assert len(fs.notes) == 1 and "format 4" in fs.notes[0]
    assert [u["problem"] for u in fs.unknown][1] == "/x: cannot stat"
    result = _project(_partition(log_dir="/d1") + _partition(topic="b", log_dir="/d2"), infos)
    first = result.filesystems[0]
    assert first["log_dirs"] == ["/d1", "/d2"] and first["growth_bytes_per_s"] == pytest.approx(2 * RATE * (1 + 20 / 4096), rel=1e-3)
    assert [e["capacity_known"] for e in result.filesystems] == [True, True, False, False]


@pytest.mark.parametrize("rows,state", [
    ([{"log_dir": "/d", "topic": "a", "partition": 0, "dir_kind": "live", "base_offset": 0, "log_size_bytes": 80,
       "max_timestamp_ms": NOW, "min_timestamp_ms": NOW, "is_active": True, "record_count": 1}], "one record or one timestamp"),
    ([{"log_dir": "/d", "topic": "a", "partition": 0, "dir_kind": "live", "base_offset": 0, "log_size_bytes": 10**9,
       "max_timestamp_ms": NOW, "min_timestamp_ms": -5, "is_active": True, "record_count": 10}], "absurd record-time span"),
    ([{"log_dir": "/d", "topic": "a", "partition": 0, "dir_kind": "live", "base_offset": 0, "log_size_bytes": 10**6,
       "is_active": True}], "no timestamps"),
])
def test_no_confident_number_built_on_nothing(rows, state):
    entry = _project(rows).filesystems[0]
    assert entry["rates"] == {state: 1} and entry["growth_bytes_per_s"] == 0 and entry["seconds_to_full"] is None
    assert any("not 'never'" in n for n in entry["notes"])


def test_group_cummax_is_exact_per_group():
    values = np.array([5.0, 1.0, 7.0, -np.inf, 2.0, np.inf, 3.0, 0.001])
    groups = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    assert list(_group_cummax(values, groups)) == [5.0, 5.0, 7.0, -np.inf, 2.0, np.inf, 3.0, 3.0]


def test_scan_records_the_filesystem_and_an_unstattable_one(tmp_path, monkeypatch):
    from auditor.scan import plan_log_dir
    from auditor.scan import filesystem

    info = plan_log_dir(tmp_path).info
    st = os.statvfs(tmp_path)
    assert info["fs_total_bytes"] == st.f_blocks * st.f_frsize and info["fs_problem"] is None
    assert info["fs_device"] == f"{os.major(os.stat(tmp_path).st_dev)}:{os.minor(os.stat(tmp_path).st_dev)}"
    assert str(tmp_path).startswith(info["fs_mount"])

    def refuse(path):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(filesystem.os, "statvfs", refuse)
    info = plan_log_dir(tmp_path).info
    assert info["fs_total_bytes"] is None and "Permission denied" in info["fs_problem"]


def test_manifest_carries_the_filesystem(tmp_path):
    from auditor.manifest import collect_manifest, read_manifest
    from auditor.manifest_write import MANIFEST_FORMAT

    log_dir = tmp_path / "logs"
    (log_dir / "t-0").mkdir(parents=True)
    (log_dir / "meta.properties").write_text("node.id=1\ncluster.id=c\nversion=1\n")
    collect_manifest([log_dir], tmp_path / "m")
    _, _, dirs = read_manifest(tmp_path / "m")
    row = dirs.to_pylist()[0]
    assert MANIFEST_FORMAT == 4 and row["fs_total_bytes"] == os.statvfs(log_dir).f_blocks * os.statvfs(log_dir).f_frsize


def _section() -> list[dict]:
    rows = _partition() + _partition(topic="b", log_dir="/e")
    infos = [_fs(), _fs("/e", device="8:2", free=99_000_000), {"log_dir": "/old", "broker_id": 2}]
    return _project(rows, infos, rules={"b": TopicRules(retention_s=600, segment_bytes=SEG)}).filesystems


def test_the_section_follows_the_published_schema():
    import json
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[1] / "reports" / "findings.schema.json").read_text())
    section = json.loads(json.dumps(_section(), default=str))
    jsonschema.validate(section, schema["properties"]["capacity"])
    assert [e["seconds_to_full"] is not None for e in section] == [True, False, False]  # soonest first, unknown last


def test_metrics_and_report_of_the_section():
    from reports.capacity_view import capacity_section
    from reports.metrics import capacity_families, exposition

    section = _section()
    text = exposition(capacity_families(section))
    assert 'kafka_audit_log_dir_seconds_to_full{broker="1",mount="/d"} 7' in text
    assert 'kafka_audit_log_dir_seconds_to_full{broker="1",mount="/d"} +Inf' not in text
    assert text.count("kafka_audit_log_dir_seconds_to_full{") == 2  # the unknown filesystem has none
    assert "+Inf" in text  # the filesystem under /e does not fill within the horizon
    view = capacity_section({"capacity": section, "inputs": {}})
    assert [r["where"] for r in view["rows"]] == ["/d", "/e", ""] and len(view["charts"]) == 2
    assert view["rows"][2]["used"] == "unknown"


def test_an_older_manifest_audits_as_capacity_unknown_said_once(tmp_path):
    """A manifest whose log_dirs.parquet has no filesystem columns (collected before format 4): the
    audit goes on, the capacity section and one KLA100 INFO say so once for all its log dirs."""
    import pyarrow.parquet as pq

    from auditor.audit import AuditRequest, run_audit
    from auditor.manifest import collect_manifest

    dirs = []
    for name in ("k1", "k2"):
        log_dir = tmp_path / name
        (log_dir / "t-0").mkdir(parents=True)
        (log_dir / "meta.properties").write_text("node.id=1\ncluster.id=c\nversion=1\n")
        dirs.append(log_dir)
    collect_manifest(dirs, tmp_path / "m")
    path = tmp_path / "m" / "log_dirs.parquet"
    table = pq.read_table(path)
    pq.write_table(table.drop_columns([c for c in table.column_names if c.startswith("fs_")])
                   .replace_schema_metadata(table.schema.metadata), path)
    outcome = run_audit(AuditRequest(manifests=[str(tmp_path / "m")], engine="local"))
    assert len(outcome.capacity.notes) == 1 and "format 4" in outcome.capacity.notes[0]
    unknown = [f for f in outcome.findings if f.code == "KLA100"]
    assert [(f.severity.name, f.evidence_count) for f in unknown] == [("INFO", 2)], unknown
    assert "capacity unknown for 2 log dir(s)" in unknown[0].message


def test_clock_skew_is_said():
    rows = [dict(r, max_timestamp_ms=r["max_timestamp_ms"] + 3_600_000, min_timestamp_ms=r["min_timestamp_ms"] + 3_600_000,
                 **({"first_batch_max_timestamp_ms": r["first_batch_max_timestamp_ms"] + 3_600_000}
                    if "first_batch_max_timestamp_ms" in r else {})) for r in _partition()]
    entry = _project(rows).filesystems[0]
    assert any(n.startswith("clock skew: the newest records of most partitions here are 3600 s after") for n in entry["notes"])
    assert not any("clock skew" in n for n in _project(_partition()).filesystems[0]["notes"])


COMPACT = {"a": TopicRules(segment_bytes=SEG, deletes=False, compacts=True, dirty_ratio=0.5, cleaner_backoff_s=10.0)}


def test_compact_only_without_key_statistics_is_unbounded_by_what_is_known():
    entry = _project(_partition(), rules=COMPACT).filesystems[0]
    assert entry["steady_state_bytes"] is None and entry["steady_state_unknown"]
    cause = next(c for c in entry["causes"] if c["cause"] == "compaction")
    assert "unbounded by what is known" in cause["detail"] and cause["key_bound_bytes"] is None and cause["distinct_keys"] is None


def test_compact_only_bounded_by_its_distinct_keys():
    """1,000 keys of 1,000 bytes: the cleaned log 1 MB; dirty ratio 0.5: 2 MB before a pass, up to a
    segment more (+1 MB: 100 s at 10 kB/s) and the cleaner's 10 s backoff (+100 kB), the cleaned
    copy beside the old files (+1 MB), the active segment (+1 MB)."""
    keys = {("a", 0): {"distinct_keys": 1000, "bytes_per_record": 1000.0, "complete": True, "relative_error": 0.016}}
    cols = from_pandas(pd.DataFrame(_partition()))
    entry = project_capacity(cols, [_fs()], COMPACT, NOW, CapacitySettings(), keys).filesystems[0]
    fixed = 20_000_000 - (10 * SEG + SEG // 2)
    bound = 2_000_000 + 1_000_000 + RATE * (1 + 20 / 4096) * 10 + 1_000_000 + 1_000_000
    assert entry["steady_state_bytes"] == pytest.approx(fixed + bound, rel=1e-6)
    assert entry["seconds_to_full"] is None  # held at the 10.5 MB there now (above the bound) until the cleaner runs
    cause = next(c for c in entry["causes"] if c["cause"] == "compaction")
    assert "~1,000 distinct keys" in cause["detail"] and cause["key_bound_bytes"] == round(bound)
    assert cause["distinct_keys"] == 1000
    sampled = {k: dict(v, complete=False) for k, v in keys.items()}  # a sample's keys are a lower bound only
    entry = project_capacity(cols, [_fs()], COMPACT, NOW, CapacitySettings(), sampled).filesystems[0]
    assert entry["steady_state_bytes"] is None


def test_compact_only_with_many_keys_fills_at_the_rate_seen():
    keys = {("a", 0): {"distinct_keys": 10_000_000, "bytes_per_record": 1000.0, "complete": True}}
    cols = from_pandas(pd.DataFrame(_partition()))
    entry = project_capacity(cols, [_fs()], COMPACT, NOW, CapacitySettings(), keys).filesystems[0]
    assert entry["seconds_to_full"] == pytest.approx(80_000_000 / (RATE * (1 + 20 / 4096)), rel=2e-3)
    assert entry["steady_state_bytes"] > entry["usable_bytes"]


def test_filesystems_do_not_follow_the_rows_order():
    """Log dirs sharing a filesystem come in each engine's own row order: the entries, their log dirs
    and the log dir a finding names are the same whatever the order."""
    infos = [_fs("/b", device="8:1"), _fs("/a", device="8:1"), _fs("/c", device="8:2"), {"log_dir": "/old", "broker_id": 1}]
    made = [group_filesystems(list(order)) for order in (infos, infos[::-1], infos[1:] + infos[:1])]
    for fs in made:
        assert [m["log_dirs"] for m in fs.members] == [["/a", "/b"], ["/c"]]
        assert fs.index_of == made[0].index_of and fs.unknown == made[0].unknown
