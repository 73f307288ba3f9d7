"""The checks' YAML cases (tests/check_cases/<family>/<rule>.yaml): loaded, their partial rows
completed with the column defaults, and the audit context each describes. The format is in
tests/test_check_cases.py's docstring; that module and the batch and cluster-column equality tests
run the same cases."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
import yaml

from auditor.schema import SEGMENT_COLUMNS, empty_row
from checks.framework.base import AuditContext
from checks.framework.config import Config
from harness.keycases import key_audit_of

CASES_DIR = Path(__file__).resolve().parents[1] / "check_cases"
LOCATION_DEFAULTS = {"broker_id": 1, "cluster_id": "test", "log_dir": "/data/kafka", "topic": "t", "partition": 0,
                     "dir_kind": "live"}


def case_ms(value):
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)


def time_fields(row: dict) -> dict:
    return {k: (case_ms(v) if (k.endswith("_ms") and not isinstance(v, (int, type(None)))) else v) for k, v in row.items()}


def complete_rows(rows, columns):
    out = []
    for partial in rows or []:
        row = empty_row(columns)
        row.update(LOCATION_DEFAULTS)
        row.update(time_fields(partial))
        if row.get("dir_name") is None:
            row["dir_name"] = f"{row['topic']}-{row['partition']}"
        out.append(row)
    return out


def load_cases():
    params = []
    for path in sorted(CASES_DIR.glob("*/*.yaml")):  # check_cases/<family>/<rule>.yaml, as checks/<family>/<rule>.py
        name = f"{path.parent.name}.{path.stem}"
        for case in yaml.safe_load(path.read_text()) or []:
            params.append(pytest.param(name, case, id=f"{name}::{case['name']}"))
    return params


CASES = load_cases()


def case_context(check_name: str, case: dict) -> AuditContext:
    """The audit context a case describes (time, config, topic configs, replay target, groups, metadata)."""
    cfg = Config(case.get("config"), source=f"{check_name}.yaml::{case['name']}")
    ctx = AuditContext(as_of_ms=case_ms(case["now"]), config=cfg,
                       topic_configs={t: {k: str(v) for k, v in c.items()} for t, c in (case.get("topic_configs") or {}).items()},
                       replay_at_ms=case_ms(case.get("replay_at")),
                       replay_topics=tuple(case["replay_topics"]) if case.get("replay_topics") else None,
                       group_offsets=tuple(time_fields(g) for g in case.get("groups") or ()),
                       partition_moves=partition_moves_of(case.get("metadata"), case.get("metadata_dirs"),
                                                        case.get("metadata_history")),
                       topic_config_sources=case.get("topic_config_sources") or {},
                       keys=key_audit_of(case.get("keys"), case_ms))
    if "log_dirs" in case:  # the capacity.* checks: the projection the engines make, on the case's rows
        from auditor.engines.capacity_stage import run_capacity
        run_capacity(pd.DataFrame(complete_rows(case.get("segments"), SEGMENT_COLUMNS)),
                     [time_fields(d) for d in case["log_dirs"]], ctx, lambda _msg: None)
    return ctx


def partition_moves_of(metadata, dirs=None, history=None):
    """A metadata log's view (topics, IDs, replicas per partition, audited dirs; ``history``: its
    changes, as ``auditor.cluster.metadata_state.Change`` fields) from a case."""
    if metadata is None:
        return None
    from auditor.cluster.metadata_audit import PartitionMoves
    from auditor.cluster.metadata_state import Change
    by_partition: dict = {}
    for h in history or ():
        c = Change(file="<case>", **time_fields(h))
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
