"""How values are shown to people: UTC ISO-8601 with the zone, sizes in binary units."""

from __future__ import annotations

from datetime import datetime, timezone

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def iso_utc(epoch_ms: int | None) -> str | None:
    """2024-10-10T11:57:55.123Z; None stays None; out-of-range values are shown raw."""
    if epoch_ms is None:
        return None
    try:
        dt = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"<out of range: {epoch_ms} ms>"
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def human_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
