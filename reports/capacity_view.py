"""The report's "Capacity" section from the findings document's ``capacity``: a table of the
filesystems under the audited log dirs sorted by time to full (unknown capacity last), and per
filesystem (the first few) a chart of used bytes now and projected, with the 100% and headroom lines."""

from __future__ import annotations

from auditor.units import human_bytes, human_duration

#: Filesystems that get a chart (the soonest full first); the table lists all.
MAX_CAPACITY_CHARTS = 8


def projection_chart(entry: dict) -> tuple[str, str] | None:
    """Used bytes over the projection's horizon (retention's step function), the usable and the headroom lines."""
    from reports.charts import _bytes_axis, _matplotlib, _to_uri

    series = [p for p in entry.get("series") or [] if p[1] is not None]
    if len(series) < 2 or not entry.get("usable_bytes"):
        return None
    plt = _matplotlib().pyplot
    fig, ax = plt.subplots(figsize=(7, 2.6))
    days = [t / 86400.0 for t, _ in series]
    ax.step(days, [b for _, b in series], where="post", color="#4C72B0", label="projected used bytes")
    ax.axhline(entry["usable_bytes"], color="#C44E52", linestyle="--", label="100% (used + available)")
    ax.axhline(entry["headroom_bytes"], color="#DD8452", linestyle=":", label=f"headroom {entry['headroom'] * 100:.0f}%")
    ax.set_xlabel("days after the filesystem was statted")
    ax.set_ylim(0, max(entry["usable_bytes"] * 1.05, max(b for _, b in series) * 1.05))
    _bytes_axis(ax)
    ax.legend(fontsize=7, loc="upper left")
    where = entry.get("mount") or (entry.get("log_dirs") or ["?"])[0]
    title = f"broker {entry.get('broker_id')} {where}: used bytes, now and projected"
    ax.set_title(title, fontsize=9)
    return title, _to_uri(fig)


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
        })
    rows.sort(key=lambda r: r["full_sort"])
    charted = sorted((e for e in entries if e.get("capacity_known")),
                     key=lambda e: e["seconds_to_full"] if e.get("seconds_to_full") is not None else 1e18)
    charts = [c for c in (projection_chart(e) for e in charted[:MAX_CAPACITY_CHARTS]) if c]
    return {"rows": rows, "charts": charts, "notes": (doc.get("inputs") or {}).get("capacity_notes") or []}
