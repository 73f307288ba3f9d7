"""KLA101 capacity.steady_state: the bytes retention keeps at steady state exceed the filesystem or its headroom.

What it checks:
    Per filesystem under the audited log dirs, the steady state of the capacity projection
    (``auditor.capacity``): every growing partition replica at the top of its retention sawtooth
    (time rule: rate x (``retention.ms`` + a segment's time + the check interval + the delete
    delay); size rule: ``retention.bytes`` + a segment + the growth between checks and before the
    delete), the others as retention leaves them, other files held constant. A topic without
    retention that grows has no steady state (unbounded, WARN); a growing compact-only topic is
    bounded by its distinct keys: with key statistics over every record (``--keys``) at the top of
    the cleaner's cycle (``auditor.capacity.compaction``), without them unknown (INFO).

Why it matters:
    Even when the disk does not fill within the projection's horizon, retention that keeps more
    than the disk holds fills it in the end; over the headroom, a reassignment (old and new copies
    on disk at once) or a burst fills it first.

Example finding:
    FAIL broker 2 /data1: steady state 2.4 TiB > 1.8 TiB the filesystem holds (headroom 1.5 TiB);
    topics: clicks 1.9 TiB, orders 300.0 GiB.

How to fix:
    Lower ``retention.ms`` / ``retention.bytes`` (per partition) of the topics that hold most,
    spread their partitions over more log dirs or brokers, or add disk.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, severity_option
from auditor.units import human_bytes


class CapacitySteadyState(Check):
    code = "KLA101"
    name = "capacity.steady_state"
    title = "Retention keeps more than the disk holds"
    scope = "cluster"
    identity = ("broker_id", "log_dir")
    options = {
        "over_full_severity": severity_option("FAIL", "severity when the steady state exceeds what the filesystem holds"),
        "over_headroom_severity": severity_option("WARN", "severity when it exceeds the headroom only"),
        "unbounded_severity": severity_option("WARN", "severity when a growing topic has no retention to bound it"),
        "compacted_severity": severity_option("INFO", "severity when growing compact-only topics leave the steady state "
                                                      "unknown (bounded by their distinct keys)"),
    }

    def run(self, data: CheckInput, ctx, opts):
        result = getattr(ctx, "capacity", None)
        if result is None:
            return []
        return [f for entry in result.filesystems if entry.get("capacity_known") for f in self._judge(entry, opts)]

    def _judge(self, entry: dict, opts) -> list:
        where = {"broker_id": entry.get("broker_id"), "log_dir": (entry.get("log_dirs") or [None])[0]}
        name = "filesystem " + (entry.get("mount") or ", ".join(entry.get("log_dirs") or []))
        topics = entry.get("steady_state_by_topic") or []
        evidence = [{"topic": t["topic"], "steady_state_bytes": t["steady_state_bytes"], "partitions": t["partitions"],
                     "growth_bytes_per_s": t["growth_bytes_per_s"]} for t in topics]
        thresholds = {"usable_bytes": entry["usable_bytes"], "headroom_bytes": entry["headroom_bytes"]}
        steady = entry.get("steady_state_bytes")
        if steady is None:
            if entry.get("steady_state_unbounded"):
                causes = [c for c in entry.get("causes") or [] if c["cause"] == "no retention"]
                why = "; ".join(c["detail"] for c in causes[:3]) or "a growing partition has no retention bounding it"
                return [self.finding(opts["unbounded_severity"], f"{name}: no steady state: {why}",
                                     "Give the growing topics a retention (retention.ms / retention.bytes).",
                                     thresholds=thresholds, evidence=evidence, **where)]
            causes = [c for c in entry.get("causes") or [] if c["cause"] == "compaction"]
            why = "; ".join(c["detail"] for c in causes[:3]) or "growing compact-only topics"
            return [self.finding(opts["compacted_severity"], f"{name}: steady state unknown: {why}",
                                 "Check that the compacted topics' keys are bounded (audit --keys gives their key "
                                 "counts), or add delete to their cleanup.policy.", thresholds=thresholds,
                                 evidence=evidence, **where)]
        listed = ", ".join(f"{t['topic']} {human_bytes(t['steady_state_bytes'] or 0)}" for t in topics[:3])
        if steady > entry["usable_bytes"]:
            severity, over = opts["over_full_severity"], f"> {human_bytes(entry['usable_bytes'])} the filesystem holds"
        elif steady > entry["headroom_bytes"]:
            severity, over = opts["over_headroom_severity"], f"> the headroom {human_bytes(entry['headroom_bytes'])}"
        else:
            return []
        return [self.finding(severity, f"{name}: steady state {human_bytes(steady)} {over}; topics: {listed}",
                             "Lower retention.ms / retention.bytes (per partition) of the topics that hold most, spread "
                             "their partitions over more log dirs, or add disk.", thresholds=thresholds,
                             evidence=evidence, **where)]
