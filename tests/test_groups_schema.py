"""``kafka-audit groups --json`` against its published schema (reports/groups.schema.json) on the
real broker dirs in ../shared/fixtures/real that hold ``__consumer_offsets`` (the real-broker run
is validated in test_consumer_groups.py::test_groups_command_json); a document that drifts from
the schema fails."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import jsonschema
import pytest

from auditor.cli import main
from harness.realdata import REAL, at_least

pytestmark = pytest.mark.recorded

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "reports" / "groups.schema.json").read_text())
DIRS = sorted(p.parent for p in (REAL / "broker-dirs").glob("*/*/__consumer_offsets-*"))
LOG_DIRS = at_least(sorted(set(DIRS)), 2, "log dirs holding __consumer_offsets")


def _groups_json(*args) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["groups", *map(str, args), "--json"]) == 0
    return json.loads(out.getvalue())


def test_schema_is_valid():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("log_dir", LOG_DIRS, ids=lambda p: p.parent.name)
def test_real_groups_json_is_valid(log_dir):
    doc = _groups_json(log_dir)
    jsonschema.validate(doc, SCHEMA)
    assert doc["records_replayed"] > 0 and doc["offsets_partitions"]


def test_fixtures_found_and_drift_fails():
    assert len(LOG_DIRS) >= 2, f"real broker dirs with __consumer_offsets under {REAL}: {LOG_DIRS}"
    doc = next(d for d in map(_groups_json, LOG_DIRS) if d["groups"])
    bad = copy.deepcopy(doc)
    group = next(iter(bad["groups"].values()))
    part = next(iter(next(iter(group["topics"].values())).values()))
    part["lag_bytes"] = "12 KiB"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)
    bad = copy.deepcopy(doc)
    next(iter(bad["groups"].values()))["unlisted_field"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)
