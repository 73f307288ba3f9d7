"""The report's "Capacity" section from the findings document's ``capacity``: a table of the
filesystems under the audited log dirs sorted by time to full (unknown capacity last), and per
filesystem (the first few) a chart of used bytes now and projected, with the 100% and headroom lines."""

from __future__ import annotations

from auditor.units import human_bytes, human_duration
from reports.charts import capacity_projection

#: Filesystems that get a chart (the soonest full first); the table lists all.
MAX_CAPACITY_CHARTS = 8


def capacity_section(doc: dict) -> dict:
    entries = doc.get("capacity") or []
    rows = []
    for e in entries:
        known = e.get("capacity_known", e.get("total_bytes") is not None)
        seconds = e.get("seconds_to_full")
        rows.append({
            "broker": e.get("broker_id"), "where": e.get("mount") or "", "log_dirs": ", ".join(d for d in e.get("log_dirs") or [] if d),
            "used": f"{human_bytes(e.get('used_bytes'))} of {human_bytes(e.get('usable_bytes'))}" if known else "unknown",
            "kafka": human_bytes(e.get("kafka_bytes")) if known else "", "other": human_bytes(e.get("other_bytes")) if known else "",
            "growth": f"{human_bytes(int(e.get('growth_bytes_per_s') or 0))}/s" if known else "",
            "full_sort": seconds if seconds is not None else (1e18 if known else 2e18),
            "full": (f"{e['full_at_utc']} (in {human_duration(max(seconds, 0) * 1000)})" if seconds is not None
                     else ("unknown: " + (e.get("problem") or "; ".join(e.get("notes") or [])) if not known or
                           not e.get("growth_bytes_per_s") and e.get("notes") else "not within the horizon")),
            "headroom": e.get("headroom_at_utc") or "",
            "steady": ("unbounded" if e.get("steady_state_unbounded") else human_bytes(e.get("steady_state_bytes"))) if known else "",
            "causes": "; ".join(c["detail"] for c in (e.get("causes") or [])[:3]),
            "observed": _observed(e),
        })
    rows.sort(key=lambda r: r["full_sort"])
    charted = sorted((e for e in entries if e.get("capacity_known")),
                     key=lambda e: e["seconds_to_full"] if e.get("seconds_to_full") is not None else 1e18)
    charts = [c for c in (capacity_projection(e) for e in charted[:MAX_CAPACITY_CHARTS]) if c]
    statements = [f"{e.get('mount') or ', '.join(d for d in e.get('log_dirs') or [] if d)}: {e['observed_statement']}"
                  for e in entries if e.get("observed_statement")]
    return {"rows": rows, "charts": charts, "notes": (doc.get("inputs") or {}).get("capacity_notes") or [],
            "observed": any(e.get("observed_growth_bytes_per_s") is not None for e in entries), "statements": statements}


def _observed(e: dict) -> str:
    """Bytes written since the previous run (--history) beside the model's growth."""
    observed = e.get("observed_growth_bytes_per_s")
    if observed is None:
        return ""
    pct = e.get("model_difference_percent")
    model = e.get("model_growth_compared_bytes_per_s")
    if model is None:
        return f"{human_bytes(int(observed))}/s since {e['observed_since_utc']} (no model: capacity unknown)"
    return (f"{human_bytes(int(observed))}/s since {e['observed_since_utc']} (model, {e['model_compared']}: "
            f"{human_bytes(int(model))}/s" + (f", {pct:+.0f}%" if pct is not None else "") + ")")
