"""The findings document of an audit: its one owner. ``findings.schema.json`` beside this module is
its published schema. :func:`build_document` makes it from the pipeline's typed outcome
(``auditor.audit.AuditOutcome``); :func:`write_outputs` writes it as JSON, appends the history and
renders the HTML (``reports.html`` renders the document, nothing else).
"""

from __future__ import annotations

import sys
from pathlib import Path

from auditor.atomic import atomic_open, atomic_write
from auditor.json_stream import write_document
from auditor.keys.audit_keys import key_document
from auditor.live_config import WANTED
from auditor.schema import json_envelope
from auditor.units import iso_utc
from auditor.nightly import run_history as hist
from reports.html import render
from checks.framework.base import SEVERITIES
from checks.framework.config import INTERNAL_TOPIC_DEFAULTS, KAFKA_DEFAULTS

SCHEMA_VERSION = 4


def build_document(outcome) -> dict:
    """The findings JSON of an ``AuditOutcome`` (schema: findings.schema.json), without a history
    or accept file (``auditor.nightly.compare.annotate`` adds those)."""
    from auditor.nightly.compare import annotate

    return annotate(plain_document(outcome), None, None)[0]


def plain_document(outcome, *, release_findings: bool = False) -> dict:
    """The findings JSON of an ``AuditOutcome`` before ``auditor.nightly.compare.annotate`` (which
    the caller runs once, with its history and accept file). ``release_findings``: the outcome's
    ``Finding`` objects are given up as they become the document's dicts (a fleet on fire has
    350,000; keeping both was the report stage's peak)."""
    req, tables, config = outcome.request, outcome.tables, outcome.config
    gx = tables.gx
    counts = {s: 0 for s in SEVERITIES}
    for f in outcome.findings:
        counts[f.severity.name] += 1
    keys = key_document(getattr(outcome, "keys", None),
                        {(f.topic, int(e["partition"])) for f in outcome.findings
                         if f.code == "KLA001" and f.severity.name != "PASS" for e in f.evidence})
    if release_findings:  # each Finding freed as its dict is made (the list is outcome.tables.findings too)
        source, findings = outcome.findings, []
        source.reverse()
        while source:
            findings.append(source.pop().to_dict())
    else:
        findings = [f.to_dict() for f in outcome.findings]
    return json_envelope(
        schema_version=SCHEMA_VERSION,
        as_of_ms=outcome.as_of_ms,
        as_of_utc=iso_utc(outcome.as_of_ms),
        elapsed_s=outcome.elapsed_s,
        verdict=outcome.worst.name,
        fail_on=config.fail_on.name,
        exit_code=outcome.exit_code,
        counts=counts,
        totals=_totals(tables.stats, tables.log_dirs, outcome.groups),
        inputs={"log_dirs": [str(d) for d in req.log_dirs], "manifests": [str(m) for m in req.manifests],
                "depth": req.depth if not req.manifests else "manifest",
                "log_dir_problems": [p for i in tables.log_dirs for p in (i.get("problems") or [])],
                "consumer_group_notes": list(outcome.groups.notes) if outcome.groups is not None else [],
                "topic_config_sources": outcome.topic_config_sources,
                "topic_configs": topic_config_rows(outcome),
                "metadata_log_notes": list(outcome.metadata_notes),
                "capacity_notes": list(getattr(getattr(outcome, "capacity", None), "notes", None) or [])},
        replay=({"replay_at_ms": req.replay_at_ms, "replay_at_utc": iso_utc(req.replay_at_ms), "topics": req.replay_topics or None}
                if req.replay_at_ms is not None else None),
        versions=tables.versions,
        engine=tables.engine,
        config=config.to_dict(),
        expectations={"success": gx.success, "gx_version": gx.gx_version, "element_count": gx.element_count,
                      "results": gx.results},
        check_titles=dict(outcome.check_titles),
        findings=findings,
        keys=keys,
        tables={"replica_stats": _stats_rows(tables.stats), "timelines": tables.timelines},
        plan=getattr(outcome, "plan", None),
        capacity=list(getattr(getattr(outcome, "capacity", None), "filesystems", None) or []),
    )


def topic_config_rows(outcome) -> list[dict]:
    """Per audited topic and config the checks read: its value and where it came from ("live
    cluster", "metadata log: ...", "config file", "Kafka default"), by the audit's precedence. A
    value equal to Kafka's default that no cluster source gave is called "Kafka default" even when
    the config file repeats it."""
    sources = outcome.topic_config_sources or {}
    values = outcome.topic_configs or {}
    topics = sorted({t for t in _distinct(outcome.tables.stats, "topic") if t is not None} | set(values))
    rows = []
    for topic in topics:
        for key in WANTED:
            source = sources.get(topic, {}).get(key)
            value = values.get(topic, {}).get(key) if source else None
            if source is None or value is None:
                value = outcome.config.kafka_setting(topic, key)
                default = INTERNAL_TOPIC_DEFAULTS.get(topic, {}).get(key) or KAFKA_DEFAULTS.get(key)
                source = "Kafka default" if value == default else "config file"
            if value is None:
                continue
            rows.append({"topic": topic, "config": key, "value": str(value), "source": source})
    return rows


def _totals(stats, log_dirs: list[dict], groups) -> dict:
    table = getattr(stats, "table", None)  # columnar rows (ArrowRows): counted on the columns
    if table is not None:
        counts = _arrow_totals(table)
        return {"brokers": counts["brokers"], "log_dirs": len(log_dirs),
                **{k: counts[k] for k in ("topics", "partitions", "partition_dirs", "segments", "size_bytes")},
                "consumer_groups": len(groups.live) if groups is not None else 0}
    broker, kind, topic, partition = (_column(stats, c) for c in ("broker_id", "dir_kind", "topic", "partition"))
    live = [i for i, k in enumerate(kind) if k == "live"]
    return {
        "brokers": len({b for b in broker if b is not None}),
        "log_dirs": len(log_dirs),
        "topics": len({topic[i] for i in live}),
        "partitions": len({(topic[i], partition[i]) for i in live}),
        "partition_dirs": len(stats),
        "segments": int(sum(v or 0 for v in _column(stats, "segment_count"))),
        "size_bytes": int(sum(v or 0 for v in _column(stats, "size_bytes"))),
        "consumer_groups": len(groups.live) if groups is not None else 0,
    }


def _arrow_totals(table) -> dict:
    """:func:`_totals`' counts of the per-dir statistics on Arrow columns (no Python value per
    partition dir: 500,000 dirs' four columns were ~80 MiB of lists): the same sets, a null a value
    of its own as in a Python set. A string column may be a sorted dictionary (the Spark driver's
    table, ``auditor.arrow_compact``): its distinct indices are its distinct strings."""
    import pyarrow.compute as pc

    from auditor.arrow_compact import sort_key

    live = table.select(["topic", "partition"]).filter(pc.equal(table["dir_kind"], "live"))  # of two columns, not all

    def total(name: str) -> int:
        return int(pc.sum(table[name]).as_py() or 0)

    return {"brokers": pc.count_distinct(table["broker_id"], mode="only_valid").as_py(),
            "topics": pc.count_distinct(sort_key(live["topic"]), mode="all").as_py(),
            "partitions": live.group_by(["topic", "partition"], use_threads=False).aggregate([]).num_rows,
            "partition_dirs": table.num_rows, "segments": total("segment_count"), "size_bytes": total("size_bytes")}


def _column(stats, name: str) -> list:
    """One statistic of every partition dir (None where a row lacks it): read as one column when
    the rows are columnar (``ArrowRows.column``), not as a dict per row."""
    column = getattr(stats, "column", None)
    return column(name) if column is not None else [s.get(name) for s in stats]


def _distinct(stats, name: str) -> set:
    """The distinct values of one statistic (on the Arrow column when the rows are columnar)."""
    table = getattr(stats, "table", None)
    if table is not None and name in table.column_names:
        import pyarrow.compute as pc

        return set(pc.unique(table[name]).to_pylist())
    return set(_column(stats, name))


def _stats_rows(stats):
    """The per-partition-dir statistics as the document holds them: a list (Spark's collected
    rows) with numpy / Decimal numbers made plain; any other sequence (the local engine's rows
    read lazily from Arrow: ``auditor.engines.local.tables.ArrowRows``, plain Python values already) as it
    is, so the document never holds 100,000 dicts at once (the JSON writer streams it)."""
    return [_jsonable(s) for s in stats] if isinstance(stats, list) else stats


def _jsonable(row: dict) -> dict:
    """Numpy / Decimal numbers as plain floats (ints stay ints)."""
    return {k: (float(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, (int, float)) else v) for k, v in row.items()}


def write_outputs(doc: dict, out_html: str | None, out_json: str | None, history_dir: str | None,
                  progress=lambda msg: None) -> list[str]:
    """Writes the JSON (``-``: stdout), appends the history, renders the HTML (with the trends).
    Returns the paths written."""
    written = []
    if out_json:
        progress(f"writing the findings JSON ({len(doc['findings']):,} findings)")
    if out_json == "-":
        write_document(doc, sys.stdout, default=str)
    elif out_json:
        p = Path(out_json)
        p.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(p, "w") as fh:  # whole or not at all (auditor.atomic): a killed run leaves the old file
            write_document(doc, fh, default=str)
        written.append(str(p))
    history_rows: list[dict] = []
    if history_dir:
        rows = hist.topic_rows(doc["tables"]["replica_stats"], doc["as_of_ms"], doc["verdict"], doc["counts"])
        written.append(str(hist.append(history_dir, rows, doc["as_of_ms"])))
        history_rows = hist.read(history_dir)
    if out_html:
        progress("rendering the HTML report")
        p = Path(out_html)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(p, render(doc, history_rows))
        written.append(str(p))
    return written
