"""kafka-log-auditor: read-only auditor for Apache Kafka log directories."""

__version__ = "0.1.0"
