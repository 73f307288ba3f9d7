"""Charts for the report: matplotlib figures rendered to inline PNG data URIs.

Each function takes plain rows (dicts) and returns ``(title, data_uri)`` or None when there is
nothing to draw; nothing here reads files or Spark. The Agg backend is forced: reports are
built on servers without a display.
"""

from __future__ import annotations

import base64
import functools
import io
from collections import defaultdict
from datetime import datetime, timezone
from typing import Iterable, Sequence

from auditor.units import human_bytes

DPI = 80
PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


@functools.cache
def _matplotlib():
    """matplotlib on the Agg backend, imported when the first chart is drawn: every kafka-audit
    command imports this module through the report, and only the report needs matplotlib
    (~0.5 s of start-up otherwise)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.collections
    import matplotlib.dates
    import matplotlib.pyplot
    import matplotlib.ticker
    return matplotlib


def _to_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    _matplotlib().pyplot.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _bytes_axis(ax) -> None:
    ax.yaxis.set_major_formatter(_matplotlib().ticker.FuncFormatter(lambda v, _: human_bytes(int(v))))


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


#: A partition chart draws at most this many partitions (the largest) and, above this many brokers,
#: each partition's largest and smallest replica instead of one bar per broker: a 30-broker topic of
#: 1,000 partitions drew 30,000 bars and a 30-entry legend placed by search (~30 s of CPU a chart).
MAX_CHART_PARTITIONS = 100
MAX_CHART_BROKERS = 8


def partition_bytes(topic: str, rows: Sequence[dict]) -> tuple[str, str] | None:
    """Bytes per partition of one topic, one bar per replica (broker) side by side; for a topic on
    many brokers, the largest and the smallest replica; for many partitions, the largest ones."""
    live = [r for r in rows if r["topic"] == topic and r.get("dir_kind") == "live"]
    if not live:
        return None
    sizes: dict = defaultdict(dict)  # series -> partition -> bytes
    brokers = sorted({int(r["broker_id"]) for r in live if r.get("broker_id") is not None})
    for r in live:
        size = int(r["size_bytes"] or 0)
        if len(brokers) > MAX_CHART_BROKERS:
            p = int(r["partition"])
            sizes["largest replica"][p] = max(sizes["largest replica"].get(p, 0), size)
            sizes["smallest replica"][p] = min(sizes["smallest replica"].get(p, size), size)
        elif r.get("broker_id") is not None:
            sizes[f"broker {int(r['broker_id'])}"][int(r["partition"])] = size
    every = sorted({int(r["partition"]) for r in live})
    partitions = every
    if len(every) > MAX_CHART_PARTITIONS:
        largest = {p: max(s.get(p, 0) for s in sizes.values()) for p in every}
        partitions = sorted(sorted(every, key=lambda p: -largest[p])[:MAX_CHART_PARTITIONS])
    series = sorted(sizes, key=lambda k: (k.split()[0] != "broker", int(k.split()[1]) if k.startswith("broker ") else k))
    width = 0.8 / max(len(series), 1)
    slots = range(len(partitions))
    mpl = _matplotlib()
    fig, ax = mpl.pyplot.subplots(figsize=(max(6, len(partitions) * 0.6), 3.2))
    top = 0
    for i, name in enumerate(series):
        # one artist per series (a PolyCollection of its bars): ax.bar makes a patch per bar, and
        # 100 partitions x 2 series of patches were most of a chart's time
        heights = [sizes[name].get(p, 0) for p in partitions]
        left = [x + (i - (len(series) - 1) / 2) * width - width / 2 for x in slots]
        ax.add_collection(mpl.collections.PolyCollection(
            [((x, 0), (x, h), (x + width, h), (x + width, 0)) for x, h in zip(left, heights)],
            facecolors=PALETTE[i % len(PALETTE)], edgecolors="none", label=name))
        top = max([top, *heights])
    ax.set_xlim(-0.5, len(partitions) - 0.5)
    ax.set_ylim(0, top * 1.05 or 1)
    ax.set_xticks(list(slots), [str(p) for p in partitions])
    ax.set_xlabel("partition")
    ax.set_ylabel(".log bytes")
    _bytes_axis(ax)
    if series:
        ax.legend(fontsize=8, ncol=min(len(series), 4), loc="upper right")
    shown = "" if len(partitions) == len(every) else f", the {len(partitions)} largest of {len(every)} partitions"
    replicas = f"largest and smallest of {len(brokers)} brokers" if len(brokers) > MAX_CHART_BROKERS else "replicas side by side"
    ax.set_title(f"{topic}: bytes per partition ({replicas}{shown})", fontsize=10)
    return f"Bytes per partition of {topic}", _to_uri(fig)


def disk_per_broker_and_log_dir(rows: Sequence[dict]) -> tuple[str, str] | None:
    """Bytes per broker and per log dir (every partition directory counts: disk use)."""
    if not rows:
        return None
    per_broker: dict = defaultdict(int)
    per_dir: dict = defaultdict(int)
    for r in rows:
        per_broker[r.get("broker_id")] += int(r.get("size_bytes") or 0)
        per_dir[(r.get("broker_id"), r.get("log_dir"))] += int(r.get("size_bytes") or 0)
    fig, (a1, a2) = _matplotlib().pyplot.subplots(1, 2, figsize=(10, 3.2), gridspec_kw={"width_ratios": [1, 2]})
    bk = sorted(per_broker, key=lambda b: (b is None, b))
    a1.bar([str(b) for b in bk], [per_broker[b] for b in bk], color=PALETTE[0])
    a1.set_xlabel("broker")
    a1.set_title("bytes per broker", fontsize=10)
    _bytes_axis(a1)
    dk = sorted(per_dir, key=lambda k: (str(k[0]), str(k[1])))
    labels = [f"{b}:{str(d).rstrip('/').split('/')[-1]}" for b, d in dk]
    a2.bar(labels, [per_dir[k] for k in dk], color=PALETTE[1])
    a2.set_xlabel("broker:log dir")
    a2.set_title("bytes per log dir", fontsize=10)
    a2.tick_params(axis="x", labelrotation=30, labelsize=8)
    _bytes_axis(a2)
    return "Bytes per broker and per log dir", _to_uri(fig)


def segment_timeline(topic: str, partition: int, segments: Iterable[dict], as_of_ms: int | None = None) -> tuple[str, str] | None:
    """Per segment and replica: the record-time range (bar) against the .log mtime (dot).

    On a healthy replica each dot sits at the right end of its bar; a reset (reassignment,
    move, copy) shows every dot piled up at one time far right of the bars; a future timestamp
    shows a bar reaching far past the audit time."""
    segs = [s for s in segments if s.get("log_mtime_ms") is not None]
    if not segs:
        return None
    replicas = sorted({(s.get("broker_id"), s.get("log_dir")) for s in segs}, key=str)
    fig, ax = _matplotlib().pyplot.subplots(figsize=(9, 0.9 + 0.28 * len(segs)))
    y = 0
    ticks, labels = [], []
    for ri, (broker, log_dir) in enumerate(replicas):
        mine = sorted((s for s in segs if (s.get("broker_id"), s.get("log_dir")) == (broker, log_dir)),
                      key=lambda s: s["base_offset"])
        bars: tuple[list, list, list] = ([], [], [])
        for s in mine:
            lo = s.get("min_timestamp_ms") if s.get("min_timestamp_ms") is not None else s.get("min_batch_timestamp_ms")
            hi = s.get("max_timestamp_ms")
            if lo is not None and hi is not None:
                for column, value in zip(bars, (y, _dt(lo), _dt(hi))):
                    column.append(value)
            ticks.append(y)
            labels.append(f"b{broker} {s['base_offset']}")
            y += 1
        # one artist per replica for the bars and one for the dots: a Line2D per segment cost ~0.1 s a chart
        if bars[0]:
            ax.hlines(*bars, colors=PALETTE[ri % len(PALETTE)], linewidth=5, capstyle="butt")
        ax.plot([_dt(s["log_mtime_ms"]) for s in mine], ticks[len(ticks) - len(mine):], linestyle="none", marker="o",
                color="black", markersize=4)
    if as_of_ms is not None:
        ax.axvline(_dt(as_of_ms), color="#C44E52", linestyle="--", linewidth=1, label="audit time")
        ax.legend(fontsize=8, loc="lower right")
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(_matplotlib().dates.DateFormatter("%Y-%m-%d\n%H:%M", tz=timezone.utc))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(f"{topic}-{partition}: record time range (bar) vs .log mtime (dot), UTC", fontsize=10)
    return f"Segment timeline of {topic}-{partition}", _to_uri(fig)


def trends(history: Sequence[dict], top: int = 8) -> tuple[str, str] | None:
    """Topic bytes and the worst skew ratio over the audit runs in the history."""
    runs = sorted({h["as_of_ms"] for h in history})
    if len(runs) < 2:
        return None
    latest = max(runs)
    biggest = sorted({h["topic"] for h in history if h["as_of_ms"] == latest},
                     key=lambda t: -max(h["size_bytes"] for h in history if h["topic"] == t and h["as_of_ms"] == latest))[:top]
    fig, (a1, a2) = _matplotlib().pyplot.subplots(1, 2, figsize=(10, 3.2))
    for i, topic in enumerate(biggest):
        pts = sorted((h["as_of_ms"], h["size_bytes"], h.get("skew_ratio")) for h in history if h["topic"] == topic)
        a1.plot([_dt(p[0]) for p in pts], [p[1] for p in pts], marker="o", label=topic, color=PALETTE[i % len(PALETTE)])
        a2.plot([_dt(p[0]) for p in pts if p[2] is not None], [p[2] for p in pts if p[2] is not None], marker="o",
                label=topic, color=PALETTE[i % len(PALETTE)])
    a1.set_title("topic bytes per run", fontsize=10)
    _bytes_axis(a1)
    a2.set_title("max / median partition bytes per run", fontsize=10)
    for ax in (a1, a2):
        ax.xaxis.set_major_formatter(_matplotlib().dates.DateFormatter("%m-%d\n%H:%M", tz=timezone.utc))
        ax.tick_params(axis="x", labelsize=7)
    a1.legend(fontsize=7)
    return "Trends over the audit history", _to_uri(fig)


def top_keys(topic: str, partition: int, keys: Sequence[dict]) -> tuple[str, str] | None:
    """The heaviest keys of one skewed partition: each key's share of the partition's records and
    of its bytes, side by side (keys shown by their fingerprint label, never their bytes)."""
    rows = [k for k in keys if k.get("share_of_records") is not None]
    if not rows:
        return None
    labels = [k["label"] for k in rows][::-1]
    records = [k["share_of_records"] * 100 for k in rows][::-1]
    nbytes = [(k.get("share_of_bytes") or 0) * 100 for k in rows][::-1]
    fig, ax = _matplotlib().pyplot.subplots(figsize=(6.5, 0.45 * len(rows) + 1.2))
    slots = range(len(rows))
    ax.barh([y + 0.2 for y in slots], records, height=0.4, label="share of records", color=PALETTE[0])
    ax.barh([y - 0.2 for y in slots], nbytes, height=0.4, label="share of bytes (key + value)", color=PALETTE[1])
    ax.set_yticks(list(slots), labels, fontsize=8)
    ax.set_xlabel("% of the partition")
    ax.set_xlim(0, 100)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"{topic}-{partition}: heaviest keys", fontsize=10)
    return f"Heaviest keys of {topic}-{partition}", _to_uri(fig)


def capacity_projection(entry: dict) -> tuple[str, str] | None:
    """Used bytes over the projection's horizon (retention's step function), the usable and the headroom lines."""
    from auditor.units import human_duration

    series = [p for p in entry.get("series") or [] if p[1] is not None and p[0] >= 1]  # log time axis: from 1 s
    if len(series) < 2 or not entry.get("usable_bytes"):
        return None
    mpl = _matplotlib()
    fig, ax = mpl.pyplot.subplots(figsize=(7, 2.6))
    ax.step([t for t, _ in series], [b for _, b in series], where="post", color="#4C72B0", label="projected used bytes")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: human_duration(v * 1000.0)))
    ax.axhline(entry["usable_bytes"], color="#C44E52", linestyle="--", label="100% (used + available)")
    ax.axhline(entry["headroom_bytes"], color="#DD8452", linestyle=":", label=f"headroom {entry['headroom'] * 100:.0f}%")
    ax.set_xlabel("time after the filesystem was statted (log scale)")
    ax.set_ylim(0, max(entry["usable_bytes"] * 1.05, max(b for _, b in series) * 1.05))
    _bytes_axis(ax)
    ax.legend(fontsize=7, loc="upper left")
    where = entry.get("mount") or (entry.get("log_dirs") or ["?"])[0]
    title = f"broker {entry.get('broker_id')} {where}: used bytes, now and projected"
    ax.set_title(title, fontsize=9)
    return title, _to_uri(fig)
