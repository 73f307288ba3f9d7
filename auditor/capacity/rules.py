"""Each topic's retention rules as the projection applies them, and where each setting came from.

``UnifiedLog`` semantics (Kafka 4.x): ``retention.ms`` / ``retention.bytes`` (-1: none) apply when
``cleanup.policy`` holds ``delete``; a compact-only topic never shrinks by retention; with
``remote.storage.enable`` the local log keeps ``local.retention.ms`` / ``local.retention.bytes``
(-2: the topic's own retention); ``segment.bytes`` / ``segment.ms`` roll the active segment;
``file.delete.delay.ms`` keeps a deleted segment's files as ``*.deleted``; the broker's
``log.retention.check.interval.ms`` runs the rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

CAPACITY_KEYS = ("retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "cleanup.policy",
                 "file.delete.delay.ms", "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
                 "min.cleanable.dirty.ratio", "min.compaction.lag.ms")
"""The topic configs the projection reads (the first six as the checks read them)."""
BROKER_KEYS = ("log.retention.check.interval.ms", "log.cleaner.backoff.ms")
DEFAULTS = {"retention.ms": "604800000", "retention.bytes": "-1", "segment.bytes": "1073741824",
            "segment.ms": "604800000", "cleanup.policy": "delete", "file.delete.delay.ms": "60000",
            "remote.storage.enable": "false", "local.retention.ms": "-2", "local.retention.bytes": "-2",
            "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0",
            "log.retention.check.interval.ms": "300000", "log.cleaner.backoff.ms": "15000"}
"""Kafka 4.x's defaults of :data:`CAPACITY_KEYS` and :data:`BROKER_KEYS`."""


@dataclass
class TopicRules:
    """One topic's rules in seconds and bytes (``math.inf``: no limit)."""

    retention_s: float = 7 * 86400.0
    retention_bytes: float = math.inf
    segment_bytes: float = 1073741824.0
    segment_s: float = 7 * 86400.0
    deletes: bool = True
    compacts: bool = False
    tiered: bool = False
    delete_delay_s: float = 60.0
    check_interval_s: float = 300.0
    dirty_ratio: float = 0.5
    """``min.cleanable.dirty.ratio``: the cleaner takes a log once its uncleaned part is this share of it."""
    compaction_lag_s: float = 0.0
    """``min.compaction.lag.ms``: records younger than this are not cleaned."""
    cleaner_backoff_s: float = 15.0
    """The broker's ``log.cleaner.backoff.ms``: how long an idle cleaner thread waits before it looks again."""
    sources: dict[str, str] = field(default_factory=dict)
    """{config: where its value came from} for the configs read."""
    problems: list[str] = field(default_factory=list)


def _number(raw: str | None, key: str, problems: list[str]) -> float | None:
    try:
        return float(int(str(raw).strip()))
    except (TypeError, ValueError):
        problems.append(f"{key}={raw!r} is not an integer: Kafka's default {DEFAULTS[key]} used")
        return float(DEFAULTS[key])


def _ratio(raw: str, problems: list[str]) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        problems.append(f"min.cleanable.dirty.ratio={raw!r} is not a ratio in [0, 1]: Kafka's default 0.5 used")
        return 0.5
    return value


def rules_for(topic: str, setting: Callable[[str, str], tuple[str | None, str]]) -> TopicRules:
    """The rules of ``topic`` from ``setting(topic, key) -> (value, source)`` (value None: absent,
    Kafka's default then, source "Kafka default")."""
    problems: list[str] = []
    sources: dict[str, str] = {}

    def get(key: str) -> str:
        value, source = setting(topic, key)
        if value is None:
            value, source = DEFAULTS[key], "Kafka default"
        sources[key] = source
        return str(value)

    policy = {p.strip() for p in get("cleanup.policy").lower().split(",") if p.strip()}
    retention_ms = _number(get("retention.ms"), "retention.ms", problems)
    retention_bytes = _number(get("retention.bytes"), "retention.bytes", problems)
    tiered = get("remote.storage.enable").strip().lower() == "true"
    if tiered:
        local_ms = _number(get("local.retention.ms"), "local.retention.ms", problems)
        local_bytes = _number(get("local.retention.bytes"), "local.retention.bytes", problems)
        retention_ms = retention_ms if local_ms == -2 else local_ms
        retention_bytes = retention_bytes if local_bytes == -2 else local_bytes
    segment_bytes = _number(get("segment.bytes"), "segment.bytes", problems)
    segment_ms = _number(get("segment.ms"), "segment.ms", problems)
    delay_ms = _number(get("file.delete.delay.ms"), "file.delete.delay.ms", problems)
    interval_ms = _number(get("log.retention.check.interval.ms"), "log.retention.check.interval.ms", problems)
    dirty_ratio = _ratio(get("min.cleanable.dirty.ratio") if "compact" in policy else DEFAULTS["min.cleanable.dirty.ratio"],
                         problems)
    lag_ms = _number(get("min.compaction.lag.ms"), "min.compaction.lag.ms", problems) if "compact" in policy else 0.0
    backoff_ms = (_number(get("log.cleaner.backoff.ms"), "log.cleaner.backoff.ms", problems) if "compact" in policy
                  else 15000.0)
    return TopicRules(
        retention_s=retention_ms / 1000.0 if retention_ms is not None and retention_ms >= 0 else math.inf,
        retention_bytes=retention_bytes if retention_bytes is not None and retention_bytes >= 0 else math.inf,
        segment_bytes=max(segment_bytes or 1.0, 1.0), segment_s=max((segment_ms or 1.0) / 1000.0, 0.001),
        deletes="delete" in policy or not policy, compacts="compact" in policy, tiered=tiered,
        delete_delay_s=max(delay_ms or 0.0, 0.0) / 1000.0, check_interval_s=max(interval_ms or 0.0, 0.0) / 1000.0,
        dirty_ratio=dirty_ratio, compaction_lag_s=max(lag_ms or 0.0, 0.0) / 1000.0,
        cleaner_backoff_s=max(backoff_ms or 0.0, 0.0) / 1000.0,
        sources=sources, problems=problems)
