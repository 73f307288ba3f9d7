"""The findings document of an audit: written as JSON (``findings.schema.json`` beside this
module is its published schema), appended to the history, rendered as HTML."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reports import history as hist
from reports.html import render


def write_outputs(result, out_html: str | None, out_json: str | None, history_dir: str | None) -> list[str]:
    """Writes the JSON (``-``: stdout), appends the history, renders the HTML (with the trends).
    Returns the paths written."""
    written = []
    if out_json == "-":
        sys.stdout.write(json.dumps(result.doc, indent=1, default=str) + "\n")
    elif out_json:
        p = Path(out_json)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(result.doc, indent=1, default=str) + "\n")
        written.append(str(p))
    history_rows: list[dict] = []
    if history_dir:
        rows = hist.topic_rows(result.doc["tables"]["partition_stats"], result.doc["generated_at_ms"],
                               result.doc["verdict"], result.doc["counts"])
        written.append(str(hist.append(history_dir, rows, result.doc["generated_at_ms"])))
        history_rows = hist.read(history_dir)
    if out_html:
        p = Path(out_html)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render(result.doc, history_rows))
        written.append(str(p))
    return written
