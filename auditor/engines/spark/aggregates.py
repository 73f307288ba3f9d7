"""Aggregates of the segment and partition tables: per partition dir, topic, broker and log dir.

DataFrame group-bys only: nothing is collected to the driver here.
"""

from __future__ import annotations

from collections.abc import Sequence

from auditor.schema import PARTITION_DIR_KEYS


def _exact_sum(F, col: str, unknown: str):
    """Sum of ``col`` that is None when any input was unknown (flagged by ``unknown``)."""
    return F.when(F.sum(unknown) > 0, F.lit(None)).otherwise(F.coalesce(F.sum(col), F.lit(0))).cast("long")


def _rollup(F, df, keys: Sequence[str]):
    """Shared columns of the topic / broker / log-dir rollups over per-partition-dir stats."""
    return df.groupBy(*keys).agg(
        F.count("*").alias("partition_dirs"),
        F.sum(F.when(F.col("dir_kind") == "live", 1).otherwise(0)).cast("long").alias("replicas"),
        F.sum("segment_count").cast("long").alias("segment_count"),
        F.sum("size_bytes").cast("long").alias("size_bytes"),
        _exact_sum(F, "message_count", F.col("message_count").isNull().cast("int")).alias("message_count"),
        F.min("oldest_record_timestamp_ms").alias("oldest_record_timestamp_ms"),
        F.max("newest_record_timestamp_ms").alias("newest_record_timestamp_ms"),
        F.min("oldest_log_mtime_ms").alias("oldest_log_mtime_ms"),
        F.max("newest_log_mtime_ms").alias("newest_log_mtime_ms"),
        F.sum("notes").cast("long").alias("notes"),
    ).withColumn("mtime_spread_ms", F.col("newest_log_mtime_ms") - F.col("oldest_log_mtime_ms"))


def aggregates(segments, partitions, *, cache: bool = True) -> dict:
    """Per partition dir, topic, broker and log dir, as DataFrames (nothing is collected).

    Definitions (the local twin is in tests/test_job.py):

    * a *live segment* has no file-state suffix and a ``.log`` (the scanner's ``segment_count``);
      ``segment_count``, ``size_bytes`` (of ``.log`` files), ``message_count`` and mtimes count
      live segments only; ``index_bytes`` adds up .index/.timeindex/.txnindex of live segments;
    * ``message_count`` is the sum of ``record_count``: None as soon as one live segment's count is
      unknown (depths ``stat``/``index``, legacy compressed wrappers at ``headers``);
    * ``oldest_record_timestamp_ms`` = min over segments of ``min_timestamp_ms`` (exact, ``deep``)
      else ``min_batch_timestamp_ms`` (an upper bound, ``headers``); ``newest_record_timestamp_ms``
      = max ``max_timestamp_ms``;
    * ``mtime_spread_ms`` = newest - oldest ``.log`` mtime;
    * ``replicas`` counts ``live`` partition dirs (not -future/-delete/-stray copies, not metadata);
    * topic rows use live dirs only; broker and log-dir rows use every partition dir (disk usage).

    With ``cache`` the per-partition-dir DataFrame is persisted (unpersist it when done with the
    results, or let the session's end drop it).
    """
    from pyspark.sql import functions as F

    per_partition = partition_dir_stats(F, segments, partitions)
    if cache:
        # One row per partition dir (small): computed once from the segment table, reused by the
        # three rollups instead of re-reading the segments three more times.
        from pyspark import StorageLevel

        per_partition = per_partition.persist(StorageLevel.MEMORY_AND_DISK)
    per_broker = _rollup(F, per_partition, ["broker_id"]).join(
        per_partition.groupBy("broker_id").agg(F.countDistinct("log_dir").cast("long").alias("log_dirs")), "broker_id")
    return {"replica_stats": per_partition, "topic_stats": topic_stats(F, per_partition),
            "broker_stats": per_broker, "log_dir_stats": _rollup(F, per_partition, ["broker_id", "log_dir"])}


def partition_dir_stats(F, segments, partitions):
    """One row per partition dir: its partition row joined with the fold of its segments."""
    live = F.col("file_state").isNull() & F.col("log_size_bytes").isNotNull()
    seg = segments.groupBy(*PARTITION_DIR_KEYS).agg(
        F.sum(F.when(live, 1).otherwise(0)).cast("long").alias("_live"),
        F.sum(F.when(~live, 1).otherwise(0)).cast("long").alias("other_segment_files"),
        F.sum(F.when(live, F.col("log_size_bytes"))).cast("long").alias("_size"),
        F.sum(F.when(live, F.coalesce("index_size_bytes", F.lit(0)) + F.coalesce("timeindex_size_bytes", F.lit(0))
                     + F.coalesce("txnindex_size_bytes", F.lit(0)))).cast("long").alias("index_bytes"),
        _exact_sum(F, F.when(live, F.col("record_count")),
                   F.when(live & F.col("record_count").isNull(), 1).otherwise(0)).alias("message_count"),
        F.min(F.coalesce("min_timestamp_ms", "min_batch_timestamp_ms")).alias("oldest_record_timestamp_ms"),
        F.max("max_timestamp_ms").alias("newest_record_timestamp_ms"),
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.sum(F.size("notes")).cast("long").alias("segment_notes"),
    )
    part = partitions.select(
        *PARTITION_DIR_KEYS, "cluster_id", "topic_id", "segment_count", "size_bytes", "log_start_offset",
        "log_end_offset", "high_watermark", "oldest_log_mtime_ms", "newest_log_mtime_ms",
        F.size("notes").cast("long").alias("partition_notes"),
    )
    per_partition = (
        part.join(seg, list(PARTITION_DIR_KEYS), "left")
        .withColumn("other_segment_files", F.coalesce("other_segment_files", F.lit(0)).cast("long"))
        .withColumn("index_bytes", F.coalesce("index_bytes", F.lit(0)).cast("long"))
        .withColumn("message_count", F.when(F.col("_live").isNull(), F.lit(0)).otherwise(F.col("message_count")).cast("long"))
        .withColumn("mtime_spread_ms", F.col("newest_log_mtime_ms") - F.col("oldest_log_mtime_ms"))
        .withColumn("notes", F.col("partition_notes") + F.coalesce("segment_notes", F.lit(0)))
        .drop("_live", "_size", "segment_notes", "partition_notes")
    )
    return per_partition


def topic_stats(F, per_partition):
    """One row per topic, from live partition dirs only (the largest replica of each partition counts)."""
    live_dirs = per_partition.where(F.col("dir_kind") == "live")
    # Per topic-partition first (replicas agree on data, not on bytes): the largest replica counts.
    tp = live_dirs.groupBy("topic", "partition").agg(
        F.count("*").alias("replicas"),
        F.max("size_bytes").alias("size_bytes"),
        F.max("message_count").alias("message_count"),
        F.sum(F.col("message_count").isNull().cast("int")).alias("_unknown"),
    )
    topic_tp = tp.groupBy("topic").agg(
        F.count("*").alias("partitions"),
        F.min("replicas").alias("min_replicas"),
        F.max("replicas").alias("max_replicas"),
        F.max("size_bytes").alias("max_partition_size_bytes"),
        F.percentile("size_bytes", 0.5).alias("median_partition_size_bytes"),
        F.when(F.sum("_unknown") > 0, F.lit(None)).otherwise(F.sum("message_count")).cast("long")
        .alias("partition_message_count"),
    )
    brokers_per_topic = live_dirs.groupBy("topic").agg(F.countDistinct("broker_id").cast("long").alias("brokers"))
    return _rollup(F, live_dirs, ["topic"]).drop("partition_dirs").join(topic_tp, "topic").join(brokers_per_topic, "topic")

