"""``kafka-audit replay-check --json`` against its published schema (reports/replay-check.schema.json)
on a real broker's log dir in ../shared/fixtures/real (topic and group forms, disk mode): a
document that drifts from the schema (a renamed or missing field) fails."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import jsonschema
import pytest

from auditor.cli import main
from harness.realdata import LOG_DIRS

pytestmark = pytest.mark.recorded

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "reports" / "replay-check.schema.json").read_text())
LOG_DIR = next(p for p in LOG_DIRS if p.parent.name == "kafka-2018-v2")
AT = "2018-08-15T02:00:00Z"


def _replay_check_json(*args) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["replay-check", *args, "--at", AT, "--log-dir", str(LOG_DIR), "--json"]) in (0, 1)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("args", [["--topic", "debug_topic"], ["--group", "debug-consumer-group"]],
                         ids=["topic", "group"])
def test_replay_check_json_matches_its_schema(args):
    doc = _replay_check_json(*args)
    jsonschema.validate(doc, SCHEMA)
    assert doc["partitions"], "the real broker's topic has partitions to judge"
    assert all(p["evidence"][0]["replay_at_ms"] == doc["replay_at_ms"] for p in doc["partitions"])
    if "--group" in args:
        assert doc["group"]["partitions"]


def test_the_schema_refuses_the_old_field_names():
    doc = _replay_check_json("--topic", "debug_topic")
    doc["target_ms"] = doc.pop("replay_at_ms")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)
