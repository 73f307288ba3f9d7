"""Real-Kafka test harness: a KRaft cluster from Maven jars, DumpLogSegments as the oracle,
and conformance data produced through a real client.

Import as ``harness`` (tests/ is on sys.path under pytest, like ``realdata``)::

    from harness.kafka import KafkaCluster
    from harness.dumplog import DumpLogSegments
    from harness.scenarios import populate_conformance_data
"""
