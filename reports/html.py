"""The HTML report: one self-contained file (inline CSS, JS and PNG charts; no external resource).

``render(doc, history)`` turns the audit document (the same dict that is written as the JSON
of findings, see ``reports/findings.schema.json``) into HTML with Jinja2 autoescaping on, so
every string from the data (topic names, paths, messages, evidence) is escaped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from jinja2 import Environment, FileSystemLoader, select_autoescape

from auditor.replay.evidence_text import gap_text, tier_text
from auditor.schema import MAX_TIMELINE_PARTITIONS, with_utc
from auditor.units import human_bytes, iso_utc
from auditor.nightly.identity import RANK
from reports import charts
from reports.capacity_view import capacity_section

TEMPLATES = Path(__file__).parent / "templates"
#: Skewed topics whose partition sizes get a chart.
MAX_SKEW_CHARTS = 6
#: The report is mailed: per check it lists the worst findings up to this many, and per finding
#: the first evidence items; findings.json always has everything.
MAX_ROWS_PER_CHECK = 200
MAX_EVIDENCE_ITEMS = 5


def _env() -> Environment:
    return Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"]),
                       trim_blocks=False, lstrip_blocks=False)


def where(finding: dict, *, detail: bool = True) -> str:
    """A finding's place, the same in the report and on the terminal: topic-partition (or topic, or
    "cluster"); with ``detail`` also the broker, log dir and segment."""
    parts = []
    if finding.get("topic") is not None:
        partition = finding.get("partition")
        parts.append(f"{finding['topic']}-{partition}" if partition is not None else finding["topic"])
    if detail:
        if finding.get("broker_id") is not None:
            parts.append(f"broker {finding['broker_id']}")
        if finding.get("log_dir"):
            parts.append(finding["log_dir"])
        if finding.get("base_offset") is not None:
            parts.append(f"segment {finding['base_offset']}")
    return ", ".join(parts) or "cluster"


def _with_times(value):
    """Evidence for people: every instant (``auditor.schema.INSTANT_FIELDS``) gets a *_utc twin."""
    if isinstance(value, dict):
        return with_utc({k: _with_times(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_with_times(v) for v in value]
    return value


def _groups(findings: Sequence[dict], titles: dict[str, str]) -> list[dict]:
    """Findings grouped per check, each group titled from the document's ``check_titles``."""
    groups: dict[str, dict] = {}
    for f in findings:
        g = groups.setdefault(f["check"], {"check": f["check"], "code": f["code"], "findings": [],
                                           "title": titles.get(f["check"], f["check"])})
        g["findings"].append((-RANK[f["severity"]], where(f), f))
    out = []
    for g in groups.values():
        ranked = sorted(g["findings"], key=lambda x: x[:2])  # stable: equal ranks and places keep their order
        g["worst"] = ranked[0][2]["severity"]
        g["total"] = len(ranked)
        g["by_severity"] = {s: 0 for s in ("FAIL", "WARN", "INFO", "PASS")}
        for _, _, f in ranked:
            g["by_severity"][f["severity"]] += 1
        # the evidence and thresholds as text only for the rows shown (a fleet on fire has 50,000 a check)
        g["findings"] = [{
            **f, "rank": -rank, "where": place,
            "evidence_json": "\n".join(json.dumps(_with_times(e), default=str, separators=(", ", ": "))
                                       for e in (f.get("evidence") or [])[:MAX_EVIDENCE_ITEMS]),
            "evidence_shown": min(len(f.get("evidence") or []), MAX_EVIDENCE_ITEMS),
            "thresholds_json": json.dumps(f.get("thresholds") or {}, indent=1, sort_keys=True, default=str),
        } for rank, place, f in ranked[:MAX_ROWS_PER_CHECK]]
        out.append(g)
    return sorted(out, key=lambda g: (-RANK[g["worst"]], g["code"]))


#: The replay-readiness table lists the worst partitions up to this many (the findings JSON has every one).
MAX_REPLAY_ROWS = 500


def _replay_rows(findings: Sequence[dict]) -> list[dict]:
    """One row per partition judged by the replay check, worst first (all of them: the template
    lists the first :data:`MAX_REPLAY_ROWS`)."""
    rows = []
    for f in findings:
        if f["check"] != "replay.safety" or not f.get("evidence"):
            continue
        e = f["evidence"][0]
        if "replay_at_ms" not in e:
            continue
        rows.append({
            "partition": f"{f['topic']}-{f['partition']}", "severity": f["severity"], "rank": RANK[f["severity"]],
            "oldest": iso_utc(e.get("oldest_timestamp_ms")) or "-", "newest": iso_utc(e.get("newest_timestamp_ms")) or "-",
            "modern": e["modern_offset"] if e.get("modern_offset") is not None else "-1 (none)",
            "legacy": e["legacy_offset"] if e.get("legacy_offset") is not None else "empty list",
            "gap": gap_text(e) or "none",
            "replica": f"broker {e.get('broker_id')} {e.get('log_dir')}",
            "tiers": tier_text(e) or "-",
        })
    return sorted(rows, key=lambda r: (-r["rank"], r["partition"]))


#: The report lists this many topic configs that did not come from Kafka's defaults; the JSON has all.
MAX_CONFIG_ROWS = 500


def _config_table(doc: dict) -> dict:
    """The "Topic configs" section: each config a cluster source or the config file gave (topic,
    config, value, source), then the Kafka defaults every other topic config fell back to, with
    how many topics each; sources counted for the heading."""
    rows = (doc.get("inputs") or {}).get("topic_configs") or []
    given = [r for r in rows if r["source"] != "Kafka default"]
    defaults: dict[tuple[str, str], int] = {}
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["source"]] = counts.get(r["source"], 0) + 1
        if r["source"] == "Kafka default":
            defaults[(r["config"], r["value"])] = defaults.get((r["config"], r["value"]), 0) + 1
    return {"rows": sorted(given, key=lambda r: (r["topic"], r["config"]))[:MAX_CONFIG_ROWS], "total_given": len(given),
            "defaults": [{"config": c, "value": v, "topics": n} for (c, v), n in sorted(defaults.items())],
            "counts": sorted(counts.items()), "any": bool(rows)}


#: Rows per table of the "Since the previous run" section (the JSON has all).
MAX_SINCE_ROWS = 200


def _since(doc: dict) -> dict:
    """The "Since the previous run" section: new and worsened (new FAILs first), resolved, still
    open with their age, the accepted findings with their reason, and the history's notes."""
    problems = [f for f in doc["findings"] if RANK[f["severity"]] > 0]

    def row(f: dict) -> dict:
        runs = f.get("runs_open")
        age = f"open for {runs} run{'s' if runs != 1 else ''}, since {f.get('first_seen')}" if runs else ""
        return {**f, "rank": RANK[f["severity"]], "where": where(f), "age": age}

    history = doc.get("history") or {}
    new = sum(f.get("status") == "new" for f in problems)
    first_run = doc.get("since") is not None and history.get("previous_run_utc") is None
    # a first run: every finding is new, and the line above the cards says so; its rows would
    # repeat the findings list (~28,000 rows on a fleet on fire, 18 in the demo)
    changed = [] if first_run else sorted((row(f) for f in problems if f.get("status") in ("new", "worsened")),
                                          key=lambda r: (r["status"] != "new", -r["rank"], r["where"]))
    still = sorted((row(f) for f in problems if f.get("status") == "persisting"),
                   key=lambda r: (-(r.get("runs_open") or 0), -r["rank"], r["where"]))
    resolved = [dict(r, where=where(r), rank=RANK[r["severity_before"]],
                     age=f"was open for {r.get('runs_open')} run(s), since {r.get('first_seen')}")
                for r in doc.get("resolved") or []]
    accepted = sorted((row(f) for f in doc.get("accepted") or []), key=lambda r: (-r["rank"], r["where"]))
    entries = ((doc.get("acceptance") or {}).get("entries")) or []
    return {
        "tracked": doc.get("since") is not None, "previous": history.get("previous_run_utc"),
        "runs": history.get("runs"), "notes": history.get("notes") or [],
        "counts": {"new": new, "worsened": sum(r["status"] == "worsened" for r in changed),
                   "resolved": len(resolved), "persisting": len(still), "accepted": len(accepted)},
        "changed": changed[:MAX_SINCE_ROWS], "resolved": resolved[:MAX_SINCE_ROWS], "still": still[:MAX_SINCE_ROWS],
        "accepted": accepted[:MAX_SINCE_ROWS], "entries": entries, "acceptance": doc.get("acceptance") is not None,
        "cap": MAX_SINCE_ROWS,
    }


def build_charts(doc: dict) -> list[tuple[str, str]]:
    tables = doc.get("tables") or {}
    stats = tables.get("replica_stats") or []
    out = []
    skewed = sorted({f["topic"] for f in doc["findings"] if f["check"] == "skew.partition_size" and f["severity"] != "PASS"})
    charted = {topic: [] for topic in skewed[:MAX_SKEW_CHARTS]}
    disk: dict = {}  # what the disk chart reads: bytes per (broker, log dir), summed as read (not a row per dir)
    # one pass over the statistics (at fleet scale read lazily from Arrow, a dict per row made as read)
    for row in stats:
        if row.get("topic") in charted:
            charted[row["topic"]].append(row)
        where = (row.get("broker_id"), row.get("log_dir"))
        disk[where] = disk.get(where, 0) + int(row.get("size_bytes") or 0)
    disk = [{"broker_id": b, "log_dir": d, "size_bytes": size} for (b, d), size in disk.items()]
    for topic, rows in charted.items():
        chart = charts.partition_bytes(topic, rows)
        if chart:
            out.append(chart)
    chart = charts.disk_per_broker_and_log_dir(disk)
    if chart:
        out.append(chart)
    timelines = tables.get("timelines") or {}
    for key in list(timelines)[:MAX_TIMELINE_PARTITIONS]:
        topic, _, partition = key.rpartition("-")
        chart = charts.segment_timeline(topic, int(partition), timelines[key], doc.get("as_of_ms"))
        if chart:
            out.append(chart)
    return out


#: Skewed partitions whose heaviest keys get a chart (the rest: the table only).
MAX_KEY_CHARTS = 8


def _keys_section(doc: dict) -> dict:
    """The report's "Keys" section from the document's ``keys``: whether the key checks ran (and
    why not), per topic its partitioner, and per skewed partition its heaviest keys (fingerprint
    labels, shares of records and bytes) with a chart for the first few."""
    from auditor.keys.audit_keys import key_label

    keys = doc.get("keys") or {"ran": False, "notes": [], "topics": []}
    topics, skewed = [], []
    for t in keys.get("topics") or []:
        if t["topic"].startswith("__"):
            continue
        topics.append(dict(t, partitions_added_text=", ".join(
            f"{a['partition']} at {a.get('timestamp_utc') or a['timestamp_ms']}" for a in t.get("partitions_added") or [])))
        for p in t["partitions"]:
            if not p.get("top_keys"):
                continue
            rows = [dict(k, label=key_label(k["key"])) for k in p["top_keys"]]
            chart = charts.top_keys(t["topic"], p["partition"], rows) if len(skewed) < MAX_KEY_CHARTS else None
            skewed.append({"topic": t["topic"], "partition": p["partition"], "records": p["records"],
                           "null_key_records": p["null_key_records"], "mode": p.get("mode"), "top": rows, "chart": chart})
    return {"ran": keys.get("ran", False), "source": keys.get("source"), "notes": keys.get("notes") or [],
            "topics": topics, "skewed": skewed}


def render(doc: dict, history: Sequence[dict] = ()) -> str:
    summary = dict(doc)
    summary["config_json"] = json.dumps(doc.get("config"), indent=1, sort_keys=True)
    summary["totals"] = dict(doc["totals"], size_human=human_bytes(doc["totals"].get("size_bytes")))
    if doc.get("replay"):
        topics = doc["replay"].get("topics")
        summary["replay"] = dict(doc["replay"], topics_text=", ".join(topics) if topics else "every topic")
    gx = doc.get("expectations") or {}
    gx_results = [dict(r, columns_text=", ".join(r.get("columns") or [r.get("column") or ""])) for r in gx.get("results") or []]
    template = _env().get_template("report.html.j2")
    groups = _groups(doc["findings"], doc.get("check_titles") or {})
    replay_rows = _replay_rows(doc["findings"])
    return template.render(
        summary=summary, groups=groups, listed=sum(len(g["findings"]) for g in groups), cap=MAX_ROWS_PER_CHECK,
        findings_total=len(doc["findings"]), replay_rows=replay_rows[:MAX_REPLAY_ROWS], replay_total=len(replay_rows),
        charts=build_charts(doc), expectations={"gx_version": gx.get("gx_version", ""), "results": gx_results},
        trend_chart=charts.trends(history) if history else None,
        topic_configs=_config_table(doc), since=_since(doc), keys=_keys_section(doc), capacity=capacity_section(doc),
        plan=_plan_section(doc),
    )


def _plan_section(doc: dict) -> dict | None:
    """The "fix for disk skew" section from the document's plan (None: no section)."""
    plan = doc.get("plan")
    if not plan or plan.get("error"):
        return plan or None
    inputs = doc.get("inputs") or {}
    args = [f"--log-dir {d}" for d in inputs.get("log_dirs") or []] + [f"--manifest {m}" for m in inputs.get("manifests") or []]
    between = plan["bytes_moved_between_brokers"]
    return dict(
        plan, moved_human=human_bytes(plan["bytes_moved"]), between_brokers_human=human_bytes(between),
        between_dirs_human=human_bytes(plan["bytes_moved"] - between), lower_bound_human=human_bytes(plan["lower_bound_bytes"]),
        tolerance_pct=f"{plan['tolerance']:.0%}",
        command="kafka-audit plan " + " ".join(args) + " --out plan.json --rollback rollback.json --json plan-summary.json",
        broker_rows=[_both(b) for b in plan["brokers"]],
        dir_rows=[dict(_both(d), peak_human=human_bytes(d["bytes_peak"])) for d in plan["log_dirs"]],
        move_rows=[dict(m, human=human_bytes(m["size_bytes"])) for m in plan.get("moves") or []],
        **_balanced(plan))


def _both(row: dict) -> dict:
    """A plan's broker or log dir row with its sizes, today's and at steady state, for people."""
    def h(key):
        return "-" if row.get(key) is None else human_bytes(row[key])
    return dict(row, before_human=h("bytes_before"), after_human=h("bytes_after"),
                steady_before_human=h("steady_bytes_before"), steady_after_human=h("steady_bytes_after"))


def _balanced(plan: dict) -> dict:
    """What the plan balanced, and how many replicas weighed their bytes of today for want of a steady state."""
    st = plan.get("steady_state")
    steady = plan.get("balance") == "steady"
    text = "each replica's bytes at retention steady state" if steady else "today's bytes"
    if not st or not st.get("replicas_at_bytes_today"):
        return {"balanced_text": text, "fallback_text": "", "fallback_rows": []}
    return {"balanced_text": text,
            "fallback_text": (f"The steady state of {st['replicas_at_bytes_today']} of {st['replicas']} replicas "
                              f"({human_bytes(st['bytes_at_bytes_today'])}) is unknown: they count at their bytes of today."),
            "fallback_rows": [dict(f, human=human_bytes(f["bytes"])) for f in st.get("fallbacks") or []]}
