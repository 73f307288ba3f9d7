"""The audit config: one YAML (or JSON) file, defaults from the checks, per-topic overrides.

Layout::

    fail_on: FAIL                    # worst severity at which `kafka-audit audit` exits non-zero
    checks:                          # per check name: its options, and `enabled`
      skew.partition_size: {warn_ratio: 3.0}
    kafka:                           # topic configs used when the live cluster is not asked
      retention.ms: 604800000
    topics:                          # overrides for topics matching a glob (first match wins...
      "payments.*":                  # ...in file order; an exact name beats any glob)
        checks: {skew.partition_size: {warn_ratio: 5.0}}
        kafka: {retention.ms: 86400000}

Every key is validated when the file is loaded: an unknown check, an unknown option, a value
of the wrong type or outside its rule gives one :class:`ConfigError` naming the file, the key
path and the value.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any, Mapping

from checks.framework.base import Check, Severity

LONG_MAX = 9223372036854775807

KAFKA_DEFAULTS: dict[str, str] = {
    # Kafka 4.x broker/topic defaults for the settings the checks read.
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": str(LONG_MAX),
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.difference.max.ms": str(LONG_MAX),
    "file.delete.delay.ms": "60000",
}
_KAFKA_INT_KEYS = {k for k, v in KAFKA_DEFAULTS.items() if v.lstrip("-").isdigit()}
#: Kafka's internal topics are created compacted, whatever the broker default says.
INTERNAL_TOPIC_DEFAULTS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact"},
    "__transaction_state": {"cleanup.policy": "compact"},
    "__share_group_state": {"cleanup.policy": "delete"},
}
_TOP_LEVEL = {"fail_on", "checks", "kafka", "topics", "keys"}
#: ``keys:`` settings: how record keys may be shown (issue 23: keys are data).
KEY_SETTINGS = {"show_prefix_bytes": "a printable prefix of at most N bytes beside a key's fingerprint (default 0: none)"}


class ConfigError(ValueError):
    """A bad config: the message names the file, the key path and the value."""


def _kafka_section(where: str, section: Any) -> dict[str, str]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: expected a mapping of Kafka topic configs, got {section!r}")
    out = {}
    for key, value in section.items():
        if key in _KAFKA_INT_KEYS:
            try:
                int(str(value))
            except ValueError:
                raise ConfigError(f"{where}.{key}: expected an integer, got {value!r}") from None
        out[str(key)] = str(value)
    return out


def _key_prefix_bytes(where: str, section: Any) -> int:
    """``keys.show_prefix_bytes`` (an integer >= 0; 0 when absent): keys are shown as fingerprints only by default."""
    if section is None:
        return 0
    if not isinstance(section, Mapping) or set(section) - set(KEY_SETTINGS):
        raise ConfigError(f"{where}: expected a mapping with {', '.join(KEY_SETTINGS)}, got {section!r}")
    value = section.get("show_prefix_bytes", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}.show_prefix_bytes: expected an integer >= 0, got {value!r}")
    return value


class Config:
    def __init__(self, data: Mapping[str, Any] | None = None, source: str = "<defaults>",
                 registry: Mapping[str, type[Check]] | None = None):
        self.source = source
        self._registry = dict(registry) if registry is not None else None
        data = dict(data or {})
        unknown = set(data) - _TOP_LEVEL
        if unknown:
            raise ConfigError(f"{source}: unknown top-level key(s) {', '.join(sorted(map(str, unknown)))}; "
                              f"known: {', '.join(sorted(_TOP_LEVEL))}")
        try:
            self.fail_on = Severity.parse(data.get("fail_on", "FAIL"))
        except ValueError as e:
            raise ConfigError(f"{source}: fail_on: {e}") from None
        self.checks = self._check_section(f"{source}: checks", data.get("checks"))
        self.kafka = _kafka_section(f"{source}: kafka", data.get("kafka"))
        self.key_prefix_bytes = _key_prefix_bytes(f"{source}: keys", data.get("keys"))
        self.topics: list[tuple[str, dict, dict]] = []
        topics = data.get("topics") or {}
        if not isinstance(topics, Mapping):
            raise ConfigError(f"{source}: topics: expected a mapping of topic name or glob to overrides, got {topics!r}")
        for pattern, body in topics.items():
            where = f"{source}: topics.{pattern}"
            body = body or {}
            if not isinstance(body, Mapping) or set(body) - {"checks", "kafka"}:
                raise ConfigError(f"{where}: expected a mapping with 'checks' and/or 'kafka', got {body!r}")
            self.topics.append((str(pattern), self._check_section(f"{where}.checks", body.get("checks")),
                                _kafka_section(f"{where}.kafka", body.get("kafka"))))

    @property
    def registry(self) -> dict[str, type[Check]]:
        """The checks a config may name (default: every registered check, imported when first asked:
        a config without a ``checks`` section needs none of them)."""
        if self._registry is None:
            from checks import REGISTRY

            self._registry = dict(REGISTRY)
        return self._registry

    def _check_section(self, where: str, section: Any) -> dict[str, dict[str, Any]]:
        if section is None:
            return {}
        if not isinstance(section, Mapping):
            raise ConfigError(f"{where}: expected a mapping of check name to options, got {section!r}")
        out: dict[str, dict[str, Any]] = {}
        for name, opts in section.items():
            check = self.registry.get(name)
            if check is None:
                raise ConfigError(f"{where}: unknown check {name!r}; known: {', '.join(sorted(self.registry))}")
            opts = opts or {}
            if not isinstance(opts, Mapping):
                raise ConfigError(f"{where}.{name}: expected a mapping of options, got {opts!r}")
            clean: dict[str, Any] = {}
            for key, value in opts.items():
                if key == "enabled":
                    if not isinstance(value, bool):
                        raise ConfigError(f"{where}.{name}.enabled: expected true or false, got {value!r}")
                    clean[key] = value
                    continue
                option = check.options.get(key)
                if option is None:
                    known = ", ".join(sorted(["enabled", *check.options])) or "enabled"
                    raise ConfigError(f"{where}.{name}: unknown option {key!r}; known: {known}")
                try:
                    clean[key] = option.check_value(f"{where}.{name}.{key}", value)
                except ValueError as e:
                    raise ConfigError(str(e)) from None
            out[name] = clean
        return out

    @classmethod
    def load(cls, path: str | Path | None, registry: Mapping[str, type[Check]] | None = None) -> "Config":
        if path is None:
            return cls(None, registry=registry)
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise ConfigError(f"{p}: cannot read the config file: {e.strerror or e}") from None
        try:
            if p.suffix == ".json":
                data = json.loads(text)
            else:
                import yaml

                data = yaml.safe_load(text)
        except Exception as e:  # noqa: BLE001 - YAML and JSON errors both name line and column
            raise ConfigError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {e}") from None
        if data is not None and not isinstance(data, Mapping):
            raise ConfigError(f"{p}: expected a mapping at the top, got {type(data).__name__}")
        return cls(data, source=str(p), registry=registry)

    def _topic_layers(self, topic: str | None):
        """Matching per-topic sections, weakest first (globs in file order, exact name last)."""
        if topic is None:
            return []
        globs = [t for t in self.topics if t[0] != topic and fnmatch.fnmatchcase(topic, t[0])]
        exact = [t for t in self.topics if t[0] == topic]
        return list(reversed(globs)) + exact

    def options(self, check: type[Check] | Check, topic: str | None = None) -> dict[str, Any]:
        """The check's options for ``topic``: defaults < ``checks:`` < matching ``topics:``."""
        opts: dict[str, Any] = {"enabled": True, **{k: o.default for k, o in check.options.items()}}
        opts.update(self.checks.get(check.name, {}))
        for _pattern, checks, _kafka in self._topic_layers(topic):
            opts.update(checks.get(check.name, {}))
        return opts

    def enabled(self, check: type[Check] | Check, topic: str | None = None) -> bool:
        return bool(self.options(check, topic)["enabled"])

    def kafka_setting(self, topic: str | None, key: str) -> str | None:
        value = INTERNAL_TOPIC_DEFAULTS.get(topic or "", {}).get(key) or self.kafka.get(key, KAFKA_DEFAULTS.get(key))
        for _pattern, _checks, kafka in self._topic_layers(topic):
            value = kafka.get(key, value)
        return value

    def to_dict(self) -> dict[str, Any]:
        """What the report prints as "config used"."""
        return {
            "source": self.source,
            "fail_on": self.fail_on.name,
            "checks": self.checks,
            "kafka": self.kafka,
            "topics": {p: {"checks": c, "kafka": k} for p, c, k in self.topics},
            "keys": {"show_prefix_bytes": self.key_prefix_bytes},
        }
