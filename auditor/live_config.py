"""Topic configs from the live cluster (admin API), for the checks' thresholds.

``kafka-audit audit --bootstrap-server HOST:PORT`` asks the cluster for the topic configs the
checks read, so retention, segment size and timestamp limits are the ones really in force
(per topic, with broker defaults filled in by the broker) rather than the config file's.
"""

from __future__ import annotations

from typing import Iterable

#: The topic configs the checks read (and the pre-3.6 difference limit, still honoured).
WANTED = (
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "cleanup.policy",
    "file.delete.delay.ms",
    "message.timestamp.type",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "message.timestamp.difference.max.ms",
)


class LiveConfigError(RuntimeError):
    """The cluster could not be asked: the message names the server and the cause."""


def fetch_topic_configs(bootstrap_servers: str, topics: Iterable[str] | None = None,
                        timeout_s: float = 15.0, keys: Iterable[str] = WANTED) -> dict[str, dict[str, str]]:
    """{topic: {config: value}} of ``keys`` (default :data:`WANTED`) for ``topics`` (default: every
    topic of the cluster)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource

    wanted = frozenset(keys)
    admin = _admin(bootstrap_servers, timeout_s)
    try:
        names = sorted(topics) if topics is not None else sorted(admin.list_topics(timeout=timeout_s).topics)
        if not names:
            return {}
        resources = [ConfigResource("topic", name) for name in names]
        futures = admin.describe_configs(resources, request_timeout=timeout_s)
        out: dict[str, dict[str, str]] = {}
        for resource, future in futures.items():
            entries = future.result(timeout=timeout_s)
            out[resource.name] = {k: v.value for k, v in entries.items() if k in wanted and v.value is not None}
        return out
    except KafkaException as exc:
        raise LiveConfigError(f"{bootstrap_servers}: cannot read topic configs: {exc.args[0] if exc.args else exc}") from None
    except Exception as exc:  # noqa: BLE001 - timeouts surface as cf.TimeoutError / RuntimeError
        raise LiveConfigError(f"{bootstrap_servers}: cannot read topic configs: {type(exc).__name__}: {exc}") from None


def fetch_broker_configs(bootstrap_servers: str, keys: Iterable[str], timeout_s: float = 15.0) -> dict[str, str]:
    """{config: value} of ``keys`` as one broker of the cluster has them (its own, a cluster-wide
    dynamic default, or Kafka's default): broker settings such as ``log.cleaner.backoff.ms``."""
    from confluent_kafka.admin import ConfigResource

    wanted = frozenset(keys)
    admin = _admin(bootstrap_servers, timeout_s)
    try:
        brokers = sorted(admin.list_topics(timeout=timeout_s).brokers)
        if not brokers:
            return {}
        resource = ConfigResource("broker", str(brokers[0]))
        entries = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(timeout=timeout_s)
        return {k: v.value for k, v in entries.items() if k in wanted and v.value is not None}
    except Exception as exc:  # noqa: BLE001 - KafkaException, timeouts (cf.TimeoutError / RuntimeError)
        raise LiveConfigError(f"{bootstrap_servers}: cannot read broker configs: {type(exc).__name__}: {exc}") from None


def _admin(bootstrap_servers: str, timeout_s: float):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": int(timeout_s * 1000)})
