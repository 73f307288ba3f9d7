"""Every check's cases, from YAML files in tests/check_cases/, run by one parametrized test.

A case file holds a list of cases::

    - name: one corrupt batch
      now: 2024-01-01T00:00:00Z          # audit time (ISO-8601 with zone, or epoch ms)
      replay_at: ...                      # optional target time for replay checks
      config: {checks: {...}}             # optional, as in the config file
      topic_configs: {t: {retention.ms: '1000'}}   # optional, as if read from the cluster
      topic_config_sources: {t: {retention.ms: 'metadata log: topic config'}}  # optional: where from
      segments: [{base_offset: 0, crc_failures: 1, ...}]      # partial segment rows
      partitions: [{...}]                                      # partial partition rows
      stats: {replica_stats: [...], topic_stats: [...], broker_stats: [...], log_dir_stats: [...]}
      expect:                             # the non-PASS findings of the checks named in `checks`
        - {code: KLA050, severity: FAIL, topic: t, partition: 0, base_offset: 0, message: 'fail their CRC'}
      checks: [integrity.crc]             # optional: which checks run (default: the file's check)
      groups: [{group: g, topic: t, partition: 0, committed_offset: 5}]  # optional: groups' committed offsets
      metadata: {t: {id: TOPICID, partitions: {0: [1, 2]}}}   # optional: the KRaft metadata log's assignment
      metadata_history: [{kind: partition-created, topic: t, partition: 0, offset: 4, timestamp_ms: ...}]  # its changes
      # (replicas as a list, or {broker: directory ID}); metadata_dirs: {ID: [node, path]} the audited dirs
      keys: {topics: {t: {partitions: 4, produce: [...]}}}   # optional: key statistics (tests/harness/keycases.py)
      log_dirs: [{log_dir: /data/kafka, fs_total_bytes: ..., fs_statted_at_ms: ...}]  # optional: the capacity projection's input

Partial rows are completed with the column defaults below; ``expect`` must match exactly (same
number of non-PASS findings, each matched by code, severity, location fields given, and a
``message`` substring when given).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
import yaml

from auditor.schema import PARTITION_COLUMNS, SEGMENT_COLUMNS, empty_row
from checks import REGISTRY
from checks.framework.base import AuditContext, Severity
from checks.framework.config import Config
from auditor.engines.local.checks import run_local
from harness.keycases import key_audit_of

# every YAML case through its check: 3 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=3)]

CASES_DIR = Path(__file__).parent / "check_cases"
LOCATION_DEFAULTS = {"broker_id": 1, "cluster_id": "test", "log_dir": "/data/kafka", "topic": "t", "partition": 0,
                     "dir_kind": "live"}


def _ms(value):
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)


def _time_fields(row: dict) -> dict:
    return {k: (_ms(v) if (k.endswith("_ms") and not isinstance(v, (int, type(None)))) else v) for k, v in row.items()}


def _complete(rows, columns):
    out = []
    for partial in rows or []:
        row = empty_row(columns)
        row.update(LOCATION_DEFAULTS)
        row.update(_time_fields(partial))
        if row.get("dir_name") is None:
            row["dir_name"] = f"{row['topic']}-{row['partition']}"
        out.append(row)
    return out


def _load_cases():
    params = []
    for path in sorted(CASES_DIR.glob("*/*.yaml")):  # check_cases/<family>/<rule>.yaml, as checks/<family>/<rule>.py
        name = f"{path.parent.name}.{path.stem}"
        for case in yaml.safe_load(path.read_text()) or []:
            params.append(pytest.param(name, case, id=f"{name}::{case['name']}"))
    return params


CASES = _load_cases()


def test_every_check_has_cases():
    covered = {p.values[0] for p in CASES}
    missing = sorted(set(REGISTRY) - covered)
    assert not missing, f"checks without a case file in tests/check_cases/: {missing}"


def case_context(check_name: str, case: dict) -> AuditContext:
    """The audit context a case describes (time, config, topic configs, replay target, groups, metadata)."""
    cfg = Config(case.get("config"), source=f"{check_name}.yaml::{case['name']}")
    ctx = AuditContext(as_of_ms=_ms(case["now"]), config=cfg,
                       topic_configs={t: {k: str(v) for k, v in c.items()} for t, c in (case.get("topic_configs") or {}).items()},
                       replay_at_ms=_ms(case.get("replay_at")),
                       replay_topics=tuple(case["replay_topics"]) if case.get("replay_topics") else None,
                       group_offsets=tuple(_time_fields(g) for g in case.get("groups") or ()),
                       partition_moves=_partition_moves(case.get("metadata"), case.get("metadata_dirs"),
                                                        case.get("metadata_history")),
                       topic_config_sources=case.get("topic_config_sources") or {},
                       keys=key_audit_of(case.get("keys"), _ms))
    if "log_dirs" in case:  # the capacity.* checks: the projection the engines make, on the case's rows
        from auditor.engines.capacity_stage import run_capacity
        run_capacity(pd.DataFrame(_complete(case.get("segments"), SEGMENT_COLUMNS)),
                     [_time_fields(d) for d in case["log_dirs"]], ctx, lambda _msg: None)
    return ctx


@pytest.mark.parametrize("check_name,case", CASES)
def test_check_case(check_name, case):
    assert check_name in REGISTRY, f"case file {check_name}.yaml names no registered check"
    names = case.get("checks", [check_name])
    ctx = case_context(check_name, case)
    stats = None
    if "stats" in case:
        stats = {k: pd.DataFrame([_time_fields(r) for r in v]) for k, v in case["stats"].items()}
    findings = run_local(_complete(case.get("segments"), SEGMENT_COLUMNS), _complete(case.get("partitions"), PARTITION_COLUMNS),
                         ctx, stats=stats, names=names)
    got = [f for f in findings if f.severity != Severity.PASS]
    expected = case.get("expect") or []
    described = "\n".join(f"  {f.severity.name} {f.code} {f.topic}-{f.partition} b{f.broker_id} @{f.base_offset}: {f.message}" for f in got)
    assert len(got) == len(expected), f"expected {len(expected)} findings, got {len(got)}:\n{described}"
    unmatched = list(got)
    for exp in expected:
        match = next((f for f in unmatched if _matches(f, exp)), None)
        assert match is not None, f"no finding matches {exp}; got:\n{described}"
        unmatched.remove(match)
    if not expected:
        assert all(f.severity == Severity.PASS for f in findings)


def _partition_moves(metadata, dirs=None, history=None):
    """A metadata log's view (topics, IDs, replicas per partition, audited dirs; ``history``: its
    changes, as ``auditor.cluster.metadata_state.Change`` fields) from a case."""
    if metadata is None:
        return None
    from auditor.cluster.metadata_audit import PartitionMoves
    from auditor.cluster.metadata_state import Change
    by_partition: dict = {}
    for h in history or ():
        c = Change(file="<case>", **_time_fields(h))
        by_partition.setdefault((c.topic, c.partition), []).append(c)
    dirs = dirs or {}
    brokers: dict = {}
    for d, (node, _path) in dirs.items():
        brokers.setdefault(node, []).append(d)
    return PartitionMoves(by_partition=by_partition, dir_paths={d: p for d, (_n, p) in dirs.items()}, metadata_dir="<case>",
                          assignments={(t, int(p)): (dict(reps) if isinstance(reps, dict) else {b: None for b in reps})
                                       for t, d in metadata.items() for p, reps in (d.get("partitions") or {}).items()},
                          topic_ids={t: d["id"] for t, d in metadata.items()}, brokers=brokers,
                          dir_nodes={d: n for d, (n, _p) in dirs.items()})


def _matches(f, exp) -> bool:
    if exp.get("code", f.code) != f.code or Severity.parse(exp.get("severity", f.severity)) != f.severity:
        return False
    for key in ("topic", "partition", "broker_id", "base_offset", "log_dir"):
        if key in exp and getattr(f, key) != exp[key]:
            return False
    if "message" in exp and exp["message"] not in f.message:
        return False
    if "evidence_count" in exp and f.evidence_count != exp["evidence_count"]:
        return False
    return True


def _repeats_location(message: str, location: str) -> bool:
    """The message opens with its own location ("t-0 t-0: ..." once printed), followed by a
    separator: "target ..." does not repeat the location "t"."""
    if location == "cluster" or not message.startswith(location):
        return False
    rest = message[len(location):]
    return not rest or not (rest[0].isalnum() or rest[0] in "-_.")


@pytest.mark.parametrize("check_name,case", CASES)
def test_messages_do_not_repeat_their_location(check_name, case):
    """Every finding of every case (PASS included) is shown after its location (report and
    terminal: reports.html.where); a message that starts with it again reads "t-0 t-0: ..."."""
    from reports.html import where
    ctx = case_context(check_name, case)
    stats = None
    if "stats" in case:
        stats = {k: pd.DataFrame([_time_fields(r) for r in v]) for k, v in case["stats"].items()}
    findings = run_local(_complete(case.get("segments"), SEGMENT_COLUMNS), _complete(case.get("partitions"), PARTITION_COLUMNS),
                         ctx, stats=stats, names=case.get("checks", [check_name]))
    assert findings, "the case produced no finding at all (not even PASS)"
    repeated = [(where(f.to_dict(), detail=False), f.message) for f in findings
                if _repeats_location(f.message, where(f.to_dict(), detail=False))]
    assert not repeated, repeated


def test_repeats_location_itself():
    assert _repeats_location("test-topic-0: assigned to broker 1", "test-topic-0")
    assert _repeats_location("t-0 holds nothing", "t-0")
    assert not _repeats_location("target is after the newest record", "t")
    assert not _repeats_location("t-01 is another partition", "t-0")
    assert not _repeats_location("cluster-wide skew", "cluster")
