"""Keys of records: which partitioner placed them, and bounded summaries of them (issue 23).

* :mod:`auditor.keys.partitioners`: the partition each known default client partitioner
  chooses for a key and a partition count (pure).
* :mod:`auditor.keys.sketches`: mergeable, bounded-memory summaries of a stream of keys
  (distinct count, heavy hitters, sizes, a uniform sample of distinct keys), serialisable (pure).
* :mod:`auditor.keys.partition_keys`: one partition dir's records -> its key summary (reads
  .log files read-only through :class:`auditor.formats.log_reader.LogReader`).
* :mod:`auditor.keys.attribution`: per topic, which partitioner explains the keyed records, keys
  split across partitions, two partitioners or a raised partition count (pure).
* :mod:`auditor.keys.manifest_part`: the summaries as a manifest part (``collect --keys``).

Keys are data (docs/principles.md, "A nightly people act on"): nothing here keeps a key's bytes past the
scan of its partition. Summaries hold a key's fingerprint (Kafka's murmur2 of it, its length,
whether it is printable) and the raw hashes the partitioners need; values are never kept.
"""
