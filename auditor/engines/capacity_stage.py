"""The capacity stage of both engines: the segment table's capacity columns and the log-dir rows
-> ``ctx.capacity`` (an ``auditor.capacity.CapacityResult``), which the capacity.* checks judge
and the findings document carries. Runs on the driver (the driver engine's Arrow table; on Spark
the capacity columns of the live rows, collected)."""

from __future__ import annotations

import time

from auditor.capacity import CapacitySettings, TopicRules, project_capacity
from auditor.capacity.columns import from_arrow, from_pandas
from auditor.capacity.compaction import keys_from_audit
from auditor.capacity.steady import replica_steady_states
from auditor.capacity.rules import BROKER_KEYS, CAPACITY_KEYS, DEFAULTS, rules_for
from checks import check_named
from checks.framework.base import AuditContext
from checks.framework.config import INTERNAL_TOPIC_DEFAULTS

CHECK = "capacity.time_to_full"


def capacity_settings(ctx: AuditContext) -> CapacitySettings:
    """The projection's settings from capacity.time_to_full's options (the config file's conventions)."""
    check = check_named(CHECK)
    opts = ctx.options(check, None) if check is not None else {}
    return CapacitySettings(horizon_s=float(opts.get("horizon_days", 30)) * 86400.0,
                            headroom=float(opts.get("headroom_percent", 85)) / 100.0,
                            rate_window_s=float(opts.get("rate_window_hours", 24)) * 3600.0,
                            idle_after_s=float(opts.get("idle_after_hours", 1)) * 3600.0)


def topic_setting(ctx: AuditContext):
    """``(topic, key) -> (value, source)`` by the audit's precedence: the cluster's configs (live
    cluster, metadata log; for broker settings ``ctx.broker_settings``) with their recorded source,
    else the config file's ``kafka:`` block ("config file"), else Kafka's default."""

    def setting(topic: str, key: str):
        if key in BROKER_KEYS and key in (ctx.broker_settings or {}):
            return ctx.broker_settings[key]
        given = (ctx.topic_configs or {}).get(topic, {})
        if key in given and key not in BROKER_KEYS:
            return given[key], (ctx.topic_config_sources or {}).get(topic, {}).get(key, "live cluster or metadata log")
        value = ctx.config.kafka_setting(topic, key)
        if value is None or str(value) == DEFAULTS.get(key):
            return DEFAULTS.get(key), "Kafka default"
        if str(value) == INTERNAL_TOPIC_DEFAULTS.get(topic, {}).get(key):
            return str(value), "Kafka default"  # an internal topic's own (e.g. __consumer_offsets: compact)
        return str(value), "config file"

    return setting


def run_capacity(segments, log_dirs: list[dict], ctx: AuditContext, progress) -> None:
    """Sets ``ctx.capacity`` (never raises for bad input: a failure is a note in the section)."""
    from auditor.capacity.model import CapacityResult

    started = time.monotonic()
    try:
        cols = from_pandas(segments) if hasattr(segments, "iloc") else from_arrow(segments)
        setting = topic_setting(ctx)
        rules: dict[str, TopicRules] = {t: rules_for(t, setting) for t in cols.labels["topic"] if t is not None}
        settings, keys = capacity_settings(ctx), keys_from_audit(getattr(ctx, "keys", None))
        ctx.capacity = project_capacity(cols, log_dirs, rules, ctx.as_of_ms, settings, keys)
        ctx.capacity.replica_steady = replica_steady_states(cols, log_dirs, rules, settings.horizon_s,
                                                            settings.rate_window_s, settings.idle_after_s, keys)
        for topic, r in rules.items():
            ctx.capacity.notes += [f"{topic}: {p}" for p in r.problems]
    except Exception as exc:  # noqa: BLE001 - the audit goes on; the section says why it is empty
        ctx.capacity = CapacityResult(notes=[f"capacity projection failed: {type(exc).__name__}: {exc}"])
    progress(f"capacity: {len(ctx.capacity.filesystems)} filesystem(s) projected in {time.monotonic() - started:.2f} s")
    for note in ctx.capacity.notes:
        progress(f"capacity: {note}")


__all__ = ["CAPACITY_KEYS", "run_capacity", "capacity_settings", "topic_setting"]
