"""Topic configs in the audit: live cluster > KRaft metadata log > config file kafka: block >
Kafka defaults, and where each came from (the live-cluster layer is proven in
test_metadata_log_cluster.py::test_audit_topic_config_precedence_on_the_cluster)."""

from __future__ import annotations

import pytest
from auditor.audit import AuditRequest, audit_context, topic_config_layers
from checks.framework.config import KAFKA_DEFAULTS
from harness.realdata import REAL

pytestmark = pytest.mark.recorded

METADATA_PARENT = REAL / "metadata" / "kraft-transactional"
KSQL = "_confluent-ksql-default__command_topic"


def test_metadata_log_configs_and_their_source():
    configs, sources, notes = topic_config_layers(AuditRequest(log_dirs=[str(METADATA_PARENT)]), lambda m: None)
    assert notes == []
    assert configs[KSQL]["retention.ms"] == "-1" and configs[KSQL]["cleanup.policy"] == "delete"
    assert sources[KSQL]["retention.ms"] == "metadata log: topic config"
    assert configs["docker-connect-offsets"] == {"cleanup.policy": "compact"}
    assert set(configs) >= {"__consumer_offsets", "_schemas"} and len(configs) == 9


def test_precedence_metadata_log_over_config_file_over_defaults(tmp_path):
    cfg = tmp_path / "audit.yaml"
    cfg.write_text("kafka:\n  retention.ms: 1000\n  segment.bytes: 2048\n")
    ctx = audit_context(AuditRequest(log_dirs=[str(METADATA_PARENT)], config_path=str(cfg)), lambda m: None)
    assert ctx.kafka_setting(KSQL, "retention.ms") == "-1"                 # metadata log over the file
    assert ctx.kafka_setting("_schemas", "retention.ms") == "1000"         # no such topic config: the file
    assert ctx.kafka_setting(KSQL, "segment.bytes") == "2048"              # the file's
    assert ctx.kafka_setting(KSQL, "message.timestamp.type") == KAFKA_DEFAULTS["message.timestamp.type"]
    # no metadata log among the dirs: the file's value
    ctx2 = audit_context(AuditRequest(log_dirs=[str(tmp_path)], config_path=str(cfg)), lambda m: None)
    assert ctx2.kafka_setting(KSQL, "retention.ms") == "1000"
