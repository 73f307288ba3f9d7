"""KLA083 metadata.topic_config: topic configs, as the cluster records them, that change what other checks judge.

What it checks:
    For every audited topic whose configs came from the cluster itself (the KRaft metadata log
    under the log dirs, or the live cluster with ``--bootstrap-server``), the settings that differ
    from Kafka's defaults in a way the timestamp checks depend on: ``message.timestamp.type`` =
    LogAppendTime (record timestamps are the broker's append times: KLA030 does not judge the
    topic), and ``message.timestamp.before.max.ms`` / ``after.max.ms`` other than the defaults
    (KLA030's limits follow them). Configs from the config file alone are not reported. The
    finding names where the value came from when the audit knows it (the topic's own config in
    the metadata log, the metadata log's cluster-wide default, the live cluster).

Why it matters:
    A reader of the report must know why a topic got no timestamp findings, or different limits
    than its neighbours: the topic says so, not the auditor. A LogAppendTime topic also loses
    the producers' event times, which a replay by time may have expected.

Example finding:
    INFO orders: message.timestamp.type = LogAppendTime (the cluster's topic config; Kafka's
    default CreateTime): record timestamps are the brokers' append times, KLA030 does not judge
    this topic.

How to fix:
    Nothing, if intended. To judge producers' timestamps again, set the topic back to CreateTime
    (``kafka-configs --alter --entity-type topics --entity-name T --delete-config
    message.timestamp.type``).

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, severity_option
from checks.framework.config import KAFKA_DEFAULTS

#: The topic configs the timestamp checks depend on, and what a non-default value changes.
WATCHED = {
    "message.timestamp.type": "record timestamps are the brokers' append times, KLA030 does not judge this topic",
    "message.timestamp.before.max.ms": "KLA030's past limit follows it",
    "message.timestamp.after.max.ms": "KLA030's future limit follows it",
}

#: How a finding names the source ``auditor.audit.topic_config_layers`` recorded (None: not known).
SOURCE_TEXT = {
    None: "the cluster's topic config",
    "metadata log: topic config": "the cluster's topic config",
    "metadata log: cluster default": "the cluster-wide default in the metadata log",
    "live cluster": "the live cluster's config",
}


class TopicConfig(Check):
    code = "KLA083"
    name = "metadata.topic_config"
    title = "Topic configs recorded by the cluster that change what other checks judge"
    scope = "cluster"
    identity = ("topic", "evidence.config")
    options = {
        "severity": severity_option("INFO"),
    }

    def run(self, data: CheckInput, ctx, opts):
        parts = data.partitions
        if parts is None or not len(parts) or not ctx.topic_configs:
            return []
        out = []
        sources = ctx.topic_config_sources  # empty: where they came from is unknown
        for topic in sorted({t for t in parts["topic"] if t is not None}):
            recorded = ctx.topic_configs.get(topic, {})
            for key, effect in WATCHED.items():
                value, default = recorded.get(key), KAFKA_DEFAULTS.get(key)
                if value is None or value == default:
                    continue
                source = sources.get(topic, {}).get(key)
                out.append(self.finding(
                    opts["severity"],
                    f"{key} = {value} ({SOURCE_TEXT.get(source, SOURCE_TEXT[None])}; Kafka's default {default}): {effect}",
                    "Nothing if intended; otherwise reset the topic config with kafka-configs --delete-config "
                    "(or the cluster-wide default with --entity-default).",
                    evidence=[{"topic": topic, "config": key, "value": value, "kafka_default": default,
                               "source": source}],
                    topic=topic))
        return out
