"""How replay.safety's evidence reads for people: the same sentences in the HTML report
(``reports/html.py``) and on the terminal (``kafka-audit replay-check``)."""

from __future__ import annotations

from auditor.units import human_bytes

MS_PER_HOUR = 3_600_000


def gap_text(e: dict) -> str | None:
    """The missed span of a replay (``gap_ms``) in hours, with its estimated bytes when known;
    None when nothing is missed."""
    gap = e.get("gap_ms") or 0
    if not gap:
        return None
    return f"{gap / MS_PER_HOUR:.1f} h" + (f", ~{human_bytes(e['gap_bytes'])}" if e.get("gap_bytes") else "")


def tier_text(e: dict) -> str | None:
    """Tiered storage, per partition: which offsets are local and which remote, their bytes, and
    whether anything was ever deleted; None when no remote storage is known."""
    if e.get("local_start_offset") is None and not e.get("remote_segments"):
        return None
    start, end = e.get("local_start_offset"), e.get("local_end_offset")
    if start is None:
        local = "local: none"
    elif end is None or end <= start:  # every local segment deleted after its upload: the active one is empty
        local = f"local: no record (from offset {start})"
    else:
        local = f"local {start}..{end - 1} ({human_bytes(e.get('local_bytes') or 0)})"
    remote = (f"remote {e['remote_start_offset']}..{e['remote_end_offset']} ({human_bytes(e.get('remote_bytes') or 0)}, "
              f"{e['remote_segments']} segments)" if e.get("remote_segments") else "remote: not known")
    return f"{local}; {remote}; {e.get('deleted') or 'deletions unknown'}"


def log_start_text(e: dict) -> str:
    """The log start offset and whether records were ever deleted below it (0: nothing ever was)."""
    lso = e.get("log_start_offset")
    if lso is None:
        return "-"
    deleted = e.get("records_ever_deleted")
    return f"{lso}" + (" (deleted below)" if deleted else " (none deleted)" if deleted is False else "")
