"""The audit's metrics for the alerting stack: the findings document as Prometheus text.

:func:`render` is pure: the findings document (``reports.document.build_document``, as written to
the findings JSON, with its ``tables.replica_stats``) in, the Prometheus text exposition format
(version 0.0.4, what node_exporter's textfile collector reads) out. :func:`render_failure` is the
file of a run that did not finish. :func:`write_textfile` is the thin writer: a temporary file in
the target's directory, fsync, rename, so the textfile collector never reads half a file.
docs/metrics.md lists every metric, its labels and the bound on its series.

Every metric is a gauge: each run replaces the file, so nothing here only goes up, and none ends
in ``_total``. No sample carries a timestamp (the textfile collector refuses them).

Label cardinality is bounded by design:

* constant labels (``--metrics-label cluster=prod``): one value each, on every series;
* run metrics: no labels (``kafka_audit_run_info``: one series);
* findings: ``check`` (the registered checks) x ``severity`` (4) x ``status`` (6 values);
* per topic: ``topic`` for at most ``max_topics`` topics (those with findings first, then the
  largest); ``kafka_audit_metrics_dropped_topics`` counts the topics left out;
* per partition: only partitions with a finding above PASS, at most ``max_partitions`` (the worst
  first); ``kafka_audit_metrics_dropped_partitions`` counts the ones left out;
* per filesystem under the audited log dirs (capacity): ``broker`` x ``mount``, one series each
  (a few per broker);
* never per segment, per partition replica or per consumer group.

Stdlib only: the CLI imports this module without pandas or Spark.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from auditor.atomic import OutputError, atomic_write
from checks.framework.base import SEVERITIES

PREFIX = "kafka_audit_"
#: Statuses of a finding since the last run, as the findings JSON gives them.
TRACKED_STATUSES = ("new", "worsened", "persisting")
ACCEPTED = "accepted"
"""The status label of the document's ``accepted`` findings (accepted, not yet expired)."""
UNTRACKED = "untracked"
"""The status label of a finding without a status (the audit had no --history)."""
OTHER = "other"
"""The status label of a status this version does not know (keeps the label's values bounded)."""
STATUSES = (*TRACKED_STATUSES, ACCEPTED, UNTRACKED, OTHER)

MAX_TOPICS = 1000
"""Topics given per-topic series, by default."""
MAX_PARTITIONS = 500
"""Partitions (with a finding) given per-partition series, by default."""

TIME_TO_LOSS_CHECK = "groups.time_to_loss"
REPLAY_CHECK = "replay.safety"
METRICS_SUFFIX = ".prom"


class MetricsPathError(ValueError):
    """The metrics file's path is unusable (not ``*.prom``): the textfile collector would not read it."""


@dataclass
class Family:
    """One metric: its name (without the prefix), HELP, and samples (labels, value)."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value, **labels) -> None:
        self.samples.append(({k: str(v) for k, v in labels.items()}, value))


# --- text format -------------------------------------------------------------------------------

def escape_label_value(value: str) -> str:
    """A label value as the text format wants it inside double quotes: backslash, double quote
    and line feed escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text: backslash and line feed escaped (a double quote stays as it is)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value) -> str:
    """A sample value: integers exactly, floats by repr, infinities and NaN as the format spells them."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(value)


def exposition(families: Iterable[Family], const_labels: Mapping[str, str] | None = None) -> str:
    """The families as Prometheus text: HELP, TYPE gauge, then the samples (``const_labels``
    first on each); families without samples are left out (a HELP without samples tells nothing)."""
    lines: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        name = PREFIX + fam.name
        lines.append(f"# HELP {name} {escape_help(fam.help)}")
        lines.append(f"# TYPE {name} gauge")
        for labels, value in fam.samples:
            text = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in {**(const_labels or {}), **labels}.items())
            lines.append(f"{name}{{{text}}} {format_value(value)}" if text else f"{name} {format_value(value)}")
    return "\n".join(lines) + "\n"


# --- the document -> families ------------------------------------------------------------------

def status_of(finding: Mapping) -> str:
    """The ``status`` label of a finding of the document's ``findings`` list."""
    status = finding.get("status")
    if status is None:
        return UNTRACKED
    return status if status in TRACKED_STATUSES else OTHER


def is_tracked(doc: Mapping) -> bool:
    """Whether the run compared itself with a previous one (--history). Schema v2 documents say so
    in ``since`` (null without --history, while ``resolved`` is always there, empty); a document
    without ``since``: its ``resolved`` list, or a finding that carries a status."""
    if "since" in doc:
        return doc["since"] is not None
    return isinstance(doc.get("resolved"), list) or any(f.get("status") is not None for f in doc.get("findings") or [])


def render(doc: Mapping, *, const_labels: Mapping[str, str] | None = None, max_topics: int = MAX_TOPICS,
           max_partitions: int = MAX_PARTITIONS) -> str:
    """The findings document as Prometheus text (see the module docstring and docs/metrics.md).
    ``const_labels`` (:func:`parse_const_label`) go on every series: one value each, so they add
    no cardinality; they keep the files of several audited clusters on one host apart."""
    return exposition(families(doc, max_topics=max_topics, max_partitions=max_partitions), const_labels)


def render_failure(started_at_s: float, duration_s: float, exit_code: int | None = None, *,
                   const_labels: Mapping[str, str] | None = None) -> str:
    """The file of a run that did not finish: its time, duration and success 0 (no findings:
    there are none to tell)."""
    fams = _run_families(started_at_s, duration_s, success=False, exit_code=exit_code)
    return exposition(fams, const_labels)


LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
RESERVED_LABELS = frozenset({"check", "severity", "status", "topic", "partition", "tier", "version", "engine",
                             "depth", "fail_on", "job", "instance"})
"""The metrics' own labels, and the two Prometheus sets on every scraped series."""


def parse_const_label(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` -> (name, value); ValueError naming what is wrong."""
    name, sep, value = text.partition("=")
    if not sep or not LABEL_NAME.match(name) or name.startswith("__"):
        raise ValueError(f"metrics label {text!r}: expected NAME=VALUE with NAME of letters, digits and _ "
                         "(not starting with a digit or __)")
    if name in RESERVED_LABELS:
        raise ValueError(f"metrics label {text!r}: {name} is a label of the metrics themselves or of Prometheus "
                         f"(reserved: {', '.join(sorted(RESERVED_LABELS))})")
    return name, value


def families(doc: Mapping, *, max_topics: int = MAX_TOPICS, max_partitions: int = MAX_PARTITIONS) -> list[Family]:
    """Every metric of a finished run: the run, the totals, the findings, per topic, per partition."""
    findings = list(doc.get("findings") or [])
    accepted = list(doc.get("accepted") or [])
    out = _run_families(doc["as_of_ms"] / 1000, doc.get("elapsed_s") or 0.0, success=True,
                        exit_code=doc.get("exit_code"))
    info = Family("run_info", "The audit run: tool version, engine, scan depth and failing severity (value 1).")
    info.add(1, version=doc.get("version") or "", engine=(doc.get("engine") or {}).get("name") or "",
             depth=(doc.get("inputs") or {}).get("depth") or "", fail_on=doc.get("fail_on") or "")
    out.append(info)
    out += _totals_families(doc.get("totals") or {})
    out += _findings_families(doc, findings, accepted)
    stats = (doc.get("tables") or {}).get("replica_stats") or []
    out += _topic_and_partition_families(doc["as_of_ms"], stats, findings, accepted, max_topics, max_partitions)
    out += capacity_families(doc.get("capacity") or [])
    return out


def capacity_families(entries: Sequence[Mapping]) -> list[Family]:
    """Per filesystem under the audited log dirs (the document's ``capacity`` section): time to
    full (+Inf: does not fill within the projection's horizon; absent: capacity or growth unknown),
    steady state (+Inf: unbounded), what the broker can use, used now."""
    full = Family("log_dir_seconds_to_full",
                  "Seconds until the filesystem under the log dirs is full at the rates seen, by Kafka's retention "
                  "rules projected forward (+Inf: not within the horizon; absent: unknown).")
    head = Family("log_dir_seconds_to_headroom",
                  "Seconds until it reaches the headroom (capacity.time_to_full headroom_percent; +Inf: not within the horizon).")
    steady = Family("log_dir_steady_state_bytes",
                    "Used bytes at the top of retention's sawtooth once the rules hold every growing partition (+Inf: unbounded).")
    usable = Family("log_dir_usable_bytes", "Bytes of the filesystem the broker can use: used + available (statvfs).")
    used = Family("log_dir_used_bytes", "Used bytes of the filesystem at the audit (total - free).")
    for e in entries:
        if not e.get("capacity_known"):
            continue
        labels = {"broker": "" if e.get("broker_id") is None else e["broker_id"],
                  "mount": e.get("mount") or (e.get("log_dirs") or [""])[0]}
        unknown = e.get("seconds_to_full") is None and any(k not in ("measured", "idle") for k in e.get("rates") or {}) \
            and not e.get("growth_bytes_per_s")
        if not unknown:
            full.add(math.inf if e.get("seconds_to_full") is None else max(e["seconds_to_full"], 0.0), **labels)
            head.add(math.inf if e.get("seconds_to_headroom") is None else max(e["seconds_to_headroom"], 0.0), **labels)
        steady.add(math.inf if e.get("steady_state_bytes") is None else e["steady_state_bytes"], **labels)
        usable.add(e.get("usable_bytes") or 0, **labels)
        used.add(e.get("used_bytes") or 0, **labels)
    return [full, head, steady, usable, used]


def _run_families(started_at_s: float, duration_s: float, *, success: bool, exit_code: int | None) -> list[Family]:
    ts = Family("run_timestamp_seconds",
                "Audit time of the run (Unix time): when it started, or its --as-of time.")
    ts.add(started_at_s)
    dur = Family("run_duration_seconds", "Wall time the audit took.")
    dur.add(duration_s)
    ok = Family("run_success", "1 when the audit ran to the end and wrote its results, 0 when it failed.")
    ok.add(1 if success else 0)
    code = Family("run_exit_code",
                  "The audit's exit code before --exit-zero: 0 below --fail-on, 1 at or above it, 2 usage or "
                  "config error.")
    if exit_code is not None:
        code.add(int(exit_code))
    return [ts, dur, ok, code]


TOTALS = (
    ("segments", "audited_segments", "Live segments audited (every replica)."),
    ("size_bytes", "audited_bytes", "Bytes of the live segments audited (every replica)."),
    ("partitions", "audited_partitions", "Topic partitions audited."),
    ("topics", "audited_topics", "Topics audited."),
    ("brokers", "audited_brokers", "Brokers audited."),
    ("log_dirs", "audited_log_dirs", "Log dirs audited."),
)


def _totals_families(totals: Mapping) -> list[Family]:
    out = []
    for key, name, help_text in TOTALS:
        fam = Family(name, help_text)
        if totals.get(key) is not None:
            fam.add(totals[key])
        out.append(fam)
    return out


def _findings_families(doc: Mapping, findings: Sequence[Mapping], accepted: Sequence[Mapping]) -> list[Family]:
    counts: Counter = Counter()
    for f in findings:
        counts[(f["check"], f["severity"], status_of(f))] += 1
    for f in accepted:
        counts[(f["check"], f["severity"], ACCEPTED)] += 1
    tracked = is_tracked(doc)
    checks = sorted(set(doc.get("check_titles") or {}) | {c for c, _s, _st in counts})
    # Zeros for every check, severity and status this run can tell about, so `> 0` alerts and
    # graphs see a series before anything is found; other combinations only when counted.
    expected = (*TRACKED_STATUSES, ACCEPTED) if tracked else (UNTRACKED, ACCEPTED)
    keys = {(c, s, st) for c in checks for s in SEVERITIES for st in expected} | set(counts)
    fam = Family("findings",
                 "Findings of the run by check, severity and status since the last run (new, worsened, "
                 "persisting; accepted: matched by an unexpired acceptance; untracked: no --history).")
    for check, severity, status in sorted(keys, key=lambda k: (k[0], SEVERITIES.index(k[1]) if k[1] in SEVERITIES
                                                               else 99, k[1], STATUSES.index(k[2]))):
        fam.add(counts.get((check, severity, status), 0), check=check, severity=severity, status=status)
    resolved = Family("resolved_findings", "Findings of the previous run gone in this one, by check (with --history).")
    if tracked:
        gone = Counter(f.get("check") or "" for f in doc.get("resolved") or [])
        for check in sorted(set(checks) | set(gone)):
            resolved.add(gone.get(check, 0), check=check)
    return [fam, resolved]


def _live_rows(stats: Iterable[Mapping]) -> list[Mapping]:
    return [s for s in stats if s.get("dir_kind") == "live" and s.get("topic") is not None]


def _largest_replicas(rows: Iterable[Mapping]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> bytes of its largest live replica (the partition's size, as KLA001 sees it)."""
    sizes: dict[tuple[str, int], int] = {}
    for r in rows:
        key = (r["topic"], int(r["partition"]))
        sizes[key] = max(sizes.get(key, 0), int(r.get("size_bytes") or 0))
    return sizes


def skew_ratio(size: int, median: float) -> float | None:
    """size / median; +Inf for data beside an empty median partition (as KLA001 judges it); None
    when both are empty (no skew to tell)."""
    if median > 0:
        return size / median
    return math.inf if size > 0 else None


def _time_to_loss_s(findings: Iterable[Mapping]) -> dict[str, float]:
    """topic -> the smallest time to data loss (s) of any consumer group, from groups.time_to_loss
    findings' evidence (0 when already due)."""
    out: dict[str, float] = {}
    for f in findings:
        if f.get("check") != TIME_TO_LOSS_CHECK or f.get("topic") is None:
            continue
        for e in f.get("evidence") or []:
            ms = e.get("time_to_loss_ms")
            if ms is not None:
                out[f["topic"]] = min(out.get(f["topic"], math.inf), max(ms, 0) / 1000)
    return out


def _remote_bytes(findings: Iterable[Mapping]) -> dict[str, int]:
    """topic -> bytes in remote storage (tiered storage), summed over the partitions replay.safety
    judged whose evidence knows them (a partition's replicas share its remote segments)."""
    per_partition: dict[tuple[str, int], int] = {}
    for f in findings:
        if f.get("check") != REPLAY_CHECK or f.get("topic") is None or f.get("partition") is None:
            continue
        known = [e["remote_bytes"] for e in f.get("evidence") or [] if e.get("remote_bytes") is not None]
        if known:
            key = (f["topic"], int(f["partition"]))
            per_partition[key] = max(per_partition.get(key, 0), *known)
    out: dict[str, int] = defaultdict(int)
    for (topic, _p), size in per_partition.items():
        out[topic] += size
    return dict(out)


@dataclass
class PartitionSizes:
    """The partitions' sizes as KLA001 sees them: each one's largest live replica, and each topic's median."""

    largest: dict[tuple[str, int], int]
    by_topic: dict[str, list[int]]
    medians: dict[str, float]

    @classmethod
    def of(cls, live: Iterable[Mapping]) -> "PartitionSizes":
        largest = _largest_replicas(live)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for (topic, _p), size in largest.items():
            by_topic[topic].append(size)
        return cls(largest, dict(by_topic), {t: statistics.median(v) for t, v in by_topic.items()})


def _topic_and_partition_families(as_of_ms: int, stats: Sequence[Mapping], findings: Sequence[Mapping],
                                  accepted: Sequence[Mapping], max_topics: int, max_partitions: int) -> list[Family]:
    live = _live_rows(stats)
    sizes = PartitionSizes.of(live)
    judged = [f for f in findings if f.get("severity") in SEVERITIES[1:]]
    return [*_topic_families(as_of_ms, live, sizes, judged, [*findings, *accepted], max_topics),
            *_partition_families(sizes, judged, max_partitions)]


def _topic_families(as_of_ms: int, live: Sequence[Mapping], sizes: PartitionSizes, judged: Sequence[Mapping],
                    facts: Sequence[Mapping], max_topics: int) -> list[Family]:
    """Per topic: skew, oldest record age, time to data loss, bytes by tier; at most ``max_topics``
    topics (those with findings first, then the largest). ``facts``: findings and accepted ones
    (measured values: an acceptance does not change them)."""
    local_bytes: Counter = Counter()
    oldest: dict[str, int] = {}
    for r in live:
        local_bytes[r["topic"]] += int(r.get("size_bytes") or 0)
        ts = r.get("oldest_record_timestamp_ms")
        if ts is not None:
            oldest[r["topic"]] = min(oldest.get(r["topic"], ts), int(ts))
    ttl, remote = _time_to_loss_s(facts), _remote_bytes(facts)
    with_findings = {f["topic"] for f in judged if f.get("topic") is not None}
    topics = sorted(set(sizes.by_topic) | set(ttl) | set(remote),
                    key=lambda t: (t not in with_findings, -local_bytes.get(t, 0), t))
    kept, dropped = topics[:max(max_topics, 0)], topics[max(max_topics, 0):]

    skew = Family("topic_partition_skew_ratio",
                  "Bytes of the topic's largest partition over its median partition (largest live replica "
                  "of each); +Inf when the median partition is empty and the largest is not.")
    age = Family("topic_oldest_record_age_seconds",
                 "Age of the topic's oldest retained record at the audit time (a lower bound below depth deep).")
    loss = Family("topic_time_to_data_loss_seconds",
                  "Smallest time until time retention deletes records some consumer group has not read "
                  "(groups.time_to_loss; only topics where a group is within its warn window; 0: already due).")
    tier = Family("topic_size_bytes",
                  "Bytes of the topic by tier: local (live replicas on the audited brokers' disks, every replica), "
                  "remote (tiered storage, one copy; known with --at from __remote_log_metadata).")
    for topic in sorted(kept):
        if topic in sizes.medians:
            ratio = skew_ratio(max(sizes.by_topic[topic]), sizes.medians[topic])
            if ratio is not None:
                skew.add(ratio, topic=topic)
            tier.add(local_bytes[topic], topic=topic, tier="local")
        if topic in oldest:
            age.add((as_of_ms - oldest[topic]) / 1000, topic=topic)
        if topic in ttl:
            loss.add(ttl[topic], topic=topic)
        if topic in remote:
            tier.add(remote[topic], topic=topic, tier="remote")
    d_topics = Family("metrics_dropped_topics",
                      "Topics left without per-topic series by the cap on topics (0: none left out).")
    d_topics.add(len(dropped))
    return [skew, age, loss, tier, d_topics]


def _partition_families(sizes: PartitionSizes, judged: Sequence[Mapping], max_partitions: int) -> list[Family]:
    """Per partition with a finding above PASS: findings by severity, size, skew; at most
    ``max_partitions`` of them (worst severity first, then the most findings)."""
    per_partition: dict[tuple[str, int], Counter] = defaultdict(Counter)
    for f in judged:
        if f.get("topic") is not None and f.get("partition") is not None:
            per_partition[(f["topic"], int(f["partition"]))][f["severity"]] += 1

    def rank(key):
        c = per_partition[key]
        return (-max(SEVERITIES.index(s) for s in c), -sum(c.values()), key)

    ranked = sorted(per_partition, key=rank)
    kept, dropped = ranked[:max(max_partitions, 0)], ranked[max(max_partitions, 0):]
    p_findings = Family("partition_findings",
                        "Findings above PASS on the partition, by severity (partitions with a finding only, capped).")
    p_size = Family("partition_size_bytes",
                    "Bytes of the partition's largest live replica (partitions with a finding only, capped).")
    p_skew = Family("partition_skew_ratio",
                    "Bytes of the partition over its topic's median partition (partitions with a finding only, capped).")
    for topic, partition in sorted(kept):
        for severity in SEVERITIES[1:]:
            n = per_partition[(topic, partition)].get(severity, 0)
            if n:
                p_findings.add(n, topic=topic, partition=partition, severity=severity)
        size = sizes.largest.get((topic, partition))
        if size is not None:
            p_size.add(size, topic=topic, partition=partition)
            ratio = skew_ratio(size, sizes.medians[topic])
            if ratio is not None:
                p_skew.add(ratio, topic=topic, partition=partition)
    d_parts = Family("metrics_dropped_partitions",
                     "Partitions with a finding left without per-partition series by the cap (0: none left out).")
    d_parts.add(len(dropped))
    return [p_findings, p_size, p_skew, d_parts]


# --- the writer --------------------------------------------------------------------------------

def check_path(path: str | os.PathLike) -> Path:
    """The metrics file's path, or MetricsPathError: node_exporter's textfile collector reads
    ``*.prom`` files only."""
    p = Path(path)
    if not p.name.endswith(METRICS_SUFFIX) or p.name == METRICS_SUFFIX:
        raise MetricsPathError(f"{path}: a metrics file must be named *{METRICS_SUFFIX} "
                               "(node_exporter's textfile collector reads those only)")
    return p


def write_textfile(path: str | os.PathLike, text: str) -> Path:
    """Writes ``text`` to ``path`` as the textfile collector expects, with :func:`auditor.atomic.atomic_write`:
    into a temporary file in the same directory (a dot name not ending in .prom, so the collector
    skips it), fsynced, then renamed over ``path`` (a scrape sees the old file or the new one),
    the directory fsynced. The file gets the usual permissions (0666 less the umask):
    node_exporter often runs as another user. A path that cannot be written: OutputError naming it."""
    p = check_path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(p.parent, exc) from exc
    return atomic_write(p, text)
