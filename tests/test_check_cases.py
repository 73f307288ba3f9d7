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


import pandas as pd
import pytest

from auditor.schema import PARTITION_COLUMNS, SEGMENT_COLUMNS
from checks import REGISTRY
from checks.framework.base import Severity
from auditor.engines.local.checks import run_local
from harness.check_cases import CASES, case_context, complete_rows, time_fields

# every YAML case through its check: 3 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=3)]

def test_every_check_has_cases():
    covered = {p.values[0] for p in CASES}
    missing = sorted(set(REGISTRY) - covered)
    assert not missing, f"checks without a case file in tests/check_cases/: {missing}"


@pytest.mark.parametrize("check_name,case", CASES)
def test_check_case(check_name, case):
    assert check_name in REGISTRY, f"case file {check_name}.yaml names no registered check"
    names = case.get("checks", [check_name])
    ctx = case_context(check_name, case)
    stats = None
    if "stats" in case:
        stats = {k: pd.DataFrame([time_fields(r) for r in v]) for k, v in case["stats"].items()}
    findings = run_local(complete_rows(case.get("segments"), SEGMENT_COLUMNS), complete_rows(case.get("partitions"), PARTITION_COLUMNS),
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
        stats = {k: pd.DataFrame([time_fields(r) for r in v]) for k, v in case["stats"].items()}
    findings = run_local(complete_rows(case.get("segments"), SEGMENT_COLUMNS), complete_rows(case.get("partitions"), PARTITION_COLUMNS),
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
