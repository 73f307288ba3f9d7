"""How values are shown to people: UTC ISO-8601 with the zone, sizes in binary units."""

from __future__ import annotations

from datetime import datetime, timedelta

_EPOCH = datetime(1970, 1, 1)
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def iso_utc(epoch_ms: int | None) -> str | None:
    """2024-10-10T11:57:55.123Z; None stays None; values outside years 1..9999 are shown raw.
    Integer arithmetic: ``epoch_ms / 1000`` as a float lost the last millisecond of far-future
    values (253402300799999 came out as ...59.998Z)."""
    if epoch_ms is None:
        return None
    seconds, millis = divmod(int(epoch_ms), 1000)
    try:
        dt = _EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        return f"<out of range: {epoch_ms} ms>"
    return f"{dt.isoformat()}.{millis:03d}Z"


def human_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


_RELATIVE_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


def parse_time(text: str, as_of_ms: int) -> int:
    """A time as people write it -> epoch ms (UTC).

    Accepted: ISO-8601 with a zone (``2024-05-01T12:00:00Z``, ``...+02:00``), epoch
    milliseconds (``1714564800000``), or relative to now (``-6h``, ``-30m``, ``-2d``, ``-1w``,
    ``now``). A time without a zone is refused rather than guessed."""
    s = text.strip()
    if s == "now":
        return as_of_ms
    if s.lstrip("-").isdigit() and len(s.lstrip("-")) >= 10:
        return int(s)
    if s and s[0] in "+-" and s[-1] in _RELATIVE_UNITS_MS and s[1:-1].replace(".", "", 1).isdigit():
        sign = -1 if s[0] == "-" else 1
        return as_of_ms + sign * int(float(s[1:-1]) * _RELATIVE_UNITS_MS[s[-1]])
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"time {text!r} not understood: use ISO-8601 with a zone (2024-05-01T12:00:00Z), "
                         f"epoch milliseconds, or relative (-6h, -30m, -2d)") from None
    if dt.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone: add one (Z for UTC, or +02:00)")
    return int(dt.timestamp() * 1000)


def human_duration(ms: float) -> str:
    """A duration for people: 3.2 y, 4.5 d, 7.0 h, 12 min, 3.5 s (the largest unit that reads well)."""
    ms = abs(ms)
    days = ms / 86_400_000
    if days >= 730:
        return f"{days / 365.25:.1f} y"
    if days >= 2:
        return f"{days:.1f} d"
    if ms >= 3_600_000:
        return f"{ms / 3_600_000:.1f} h"
    if ms >= 60_000:
        return f"{ms / 60_000:.0f} min"
    return f"{ms / 1000:.1f} s"
