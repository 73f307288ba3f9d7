"""KLA100 capacity.time_to_full: a log dir's filesystem fills within days at the rates seen on disk.

What it checks:
    Per filesystem under the audited log dirs (log dirs on one device fill together), the
    projection of Kafka's own retention rules forward from the segments on disk
    (``auditor.capacity``): each partition replica's ingress rate from its recent segments'
    record times, the time rule on each segment's largest timestamp (a future timestamp blocks it
    and everything after it), the size rule per partition in whole segments, rolling by
    ``segment.bytes`` / ``segment.ms``, compact-only topics, tiered topics' local retention, the
    retention check interval and the delete delay; other files held constant. The finding says
    when the filesystem reaches 100% of what the broker can use (used + available) and the
    headroom, which partitions grow most and why. A filesystem that cannot be statted, or a
    manifest without filesystem sizes, is an INFO "capacity unknown", never a guess.

Why it matters:
    When a log dir fills, the broker's next write fails, ``LogDirFailureChannel`` marks the dir
    offline with every partition on it, and a broker with no live log dir left halts. A straight
    line through the used bytes (node_exporter's ``predict_linear``) is fooled by retention's
    sawtooth; Kafka's rules are not.

Example finding:
    FAIL broker 3 /data2 (/data2/kafka): full 2024-05-02T14:10:00Z (in 1.9 d): 1.6 TiB of 1.8 TiB
    used, growing 9.1 MiB/s; top: clicks-7 (61% of growth); cause: retention blocked by a future
    timestamp (clicks-7 until 2024-06-01T00:00:00Z).

How to fix:
    Act on the cause the finding names: remove or wait out the future-timestamped segment (and
    bound ``message.timestamp.after.max.ms``), give a topic without retention a retention, move
    skewed partitions to emptier log dirs (``kafka-reassign-partitions`` with ``log_dirs``),
    lower ``retention.ms`` / ``retention.bytes`` (per partition!), or add disk.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, Severity, non_negative, positive, severity_option
from auditor.units import human_bytes, human_duration

DAY_S = 86400.0
UNRECORDED = "capacity unknown: no filesystem recorded"
"""How ``auditor.capacity.filesystems`` names a log dir whose row carries no filesystem (an older manifest)."""


def _pct(value: float) -> bool:
    return 0 < value <= 100


class CapacityTimeToFull(Check):
    code = "KLA100"
    name = "capacity.time_to_full"
    title = "Log dir filesystem fills soon"
    scope = "cluster"
    identity = ("broker_id", "log_dir")
    options = {
        "fail_days": Option(3.0, "FAIL when the filesystem is projected full within this many days", float, non_negative, ">= 0"),
        "warn_days": Option(14.0, "WARN when it is projected full within this many days", float, non_negative, ">= 0"),
        "horizon_days": Option(30.0, "how far the projection looks ahead (a later fill is 'does not fill')", float, positive, "> 0"),
        "headroom_percent": Option(85.0, "the headroom line, in percent of what the broker can use", float, _pct, "in (0, 100]"),
        "rate_window_hours": Option(24.0, "a replica's ingress rate is measured over its segments of this many hours of record time", float, positive, "> 0"),
        "idle_after_hours": Option(1.0, "a replica whose newest record is older than this grows by 0", float, positive, "> 0"),
        "unknown_severity": severity_option("INFO", "severity when the filesystem's capacity or growth cannot be told"),
    }

    def run(self, data: CheckInput, ctx, opts):
        result = getattr(ctx, "capacity", None)
        if result is None:
            return []
        out = []
        unrecorded = [e for e in result.filesystems if e.get("problem", "").startswith(UNRECORDED)]
        if unrecorded:  # manifests collected before format 4: said once, not per log dir
            dirs = [d for e in unrecorded for d in e.get("log_dirs") or [] if d]
            out.append(self.finding(opts["unknown_severity"],
                                    f"capacity unknown for {len(dirs)} log dir(s) (first: {dirs[0] if dirs else '?'}): "
                                    "no filesystem recorded (manifests collected before format 4)",
                                    "Collect the manifests again with this version (kafka-audit collect) to project capacity.",
                                    evidence=[{"broker_id": e.get("broker_id"), "log_dir": d} for e in unrecorded
                                              for d in e.get("log_dirs") or []]))
        for entry in result.filesystems:
            if entry not in unrecorded:
                out += self._judge(entry, opts)
        return out

    def _judge(self, entry: dict, opts) -> list:
        where = {"broker_id": entry.get("broker_id"), "log_dir": (entry.get("log_dirs") or [None])[0]}
        dirs = ", ".join(d for d in entry.get("log_dirs") or [] if d)
        if not entry.get("capacity_known"):
            return [self.finding(opts["unknown_severity"], f"capacity unknown ({dirs}): {entry.get('problem')}",
                                 "Run collect/audit where the log dirs' filesystem can be statted (format-4 manifests).",
                                 **where)]
        seconds = entry.get("seconds_to_full")
        thresholds = {k: opts[k] for k in ("fail_days", "warn_days", "horizon_days", "headroom_percent")}
        if seconds is None:
            if entry.get("growth_bytes_per_s") == 0 and any(k not in ("measured", "idle") for k in entry.get("rates", {})):
                return [self.finding(opts["unknown_severity"],
                                     f"filesystem {entry.get('mount') or dirs}: {human_bytes(entry['used_bytes'])} of "
                                     f"{human_bytes(entry['usable_bytes'])} used; growth cannot be told: "
                                     + "; ".join(entry.get("notes") or []), thresholds=thresholds, **where)]
            return []
        days = seconds / DAY_S
        severity = (Severity.FAIL if days <= opts["fail_days"] else Severity.WARN if days <= opts["warn_days"]
                    else Severity.INFO)
        causes = entry.get("causes") or []
        top = entry.get("top_partitions") or []
        message = (f"filesystem {entry.get('mount') or dirs}: full {entry['full_at_utc']} (in {human_duration(max(seconds, 0) * 1000)}): "
                   f"{human_bytes(entry['used_bytes'])} of {human_bytes(entry['usable_bytes'])} used, growing "
                   f"{human_bytes(int(entry['growth_bytes_per_s'] or 0))}/s")
        if top:
            message += f"; top: {top[0]['topic']}-{top[0]['partition']} ({(top[0]['share_of_growth'] or 0) * 100:.0f}% of growth)"
        if causes:
            message += f"; cause: {causes[0]['cause']} ({causes[0]['detail']})"
        evidence = [{"full_at_utc": entry["full_at_utc"], "headroom_at_utc": entry.get("headroom_at_utc"),
                     "seconds_to_full": seconds, "log_dirs": entry.get("log_dirs"), "mount": entry.get("mount"),
                     "causes": [c["cause"] for c in causes], "notes": entry.get("notes"),
                     "config_sources": entry.get("config_sources")}]
        evidence += [{"cause": c["cause"], "detail": c["detail"]} for c in causes]
        evidence += [{"topic": p["topic"], "partition": p["partition"], "broker_id": p["broker_id"], "log_dir": p["log_dir"],
                      "growth_bytes_per_s": p["growth_bytes_per_s"], "share_of_growth": p["share_of_growth"],
                      "bytes_now": p["bytes_now"]} for p in top]
        return [self.finding(severity, message, _fix(causes), thresholds=thresholds, evidence=evidence, **where)]


def _fix(causes: list[dict]) -> str:
    names = {c["cause"] for c in causes}
    hints = []
    if "retention blocked by a future timestamp" in names:
        hints.append("delete or wait out the segments with future timestamps (kafka-delete-records past them) and "
                     "bound message.timestamp.after.max.ms")
    if "no retention" in names:
        hints.append("give the topics without retention a retention.ms or retention.bytes")
    if "compaction" in names:
        hints.append("check the compacted topics' key cardinality; add delete to cleanup.policy if old keys may go")
    if "skew" in names:
        hints.append("move the skewed partitions to emptier log dirs (kafka-reassign-partitions with log_dirs)")
    if "retention longer than the disk holds" in names:
        hints.append("lower retention.ms / retention.bytes (per partition) or add disk")
    return "; ".join(hints) or "Lower retention (retention.bytes is per partition), move partitions to emptier log dirs, or add disk."
