"""The Spark engine's check runner: partition checks on the executors, a bucket of partitions per
Python call; only findings and the small aggregate tables come back to the driver."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from auditor.check_runner import CLUSTER_PARTITION_COLUMNS, CLUSTER_STATS_COLUMNS, GROUP, run_cluster_checks, run_partition_batch, with_pass_summaries
from auditor.schema import FINDING_FIELDS
from checks.framework.base import AuditContext, Finding


def spark_partition_findings(segments_df, partitions_df, ctx: AuditContext, names: Sequence[str] | None = None,
                             buckets: int | None = None):
    """Partition-scope checks distributed over Spark: a DataFrame of FINDING_SCHEMA rows.

    Rows are bucketed by a hash of (topic, partition) into ``buckets`` groups (default: the
    segment table's Spark partitions, at least the default parallelism; the audit slices the table
    at ~100,000 rows, so a bucket's pandas frames stay that size), and each bucket is one
    :class:`checks.framework.batch.PartitionBatch`: one Python call per bucket, not one per partition. A
    partition's rows all land in one bucket, so the findings are those of the local engine."""
    import pandas as pd
    from pyspark.sql import functions as F

    from auditor.schema import FINDING_SCHEMA, spark_schema

    if buckets is None:
        buckets = max(segments_df.rdd.getNumPartitions(), segments_df.sparkSession.sparkContext.defaultParallelism)
    buckets = max(1, min(int(buckets), MAX_SPARK_BUCKETS))

    def per_bucket(seg_pdf: pd.DataFrame, part_pdf: pd.DataFrame) -> pd.DataFrame:
        from checks.framework.batch import PartitionBatch

        batch = PartitionBatch(seg_pdf.drop(columns=[BUCKET]), part_pdf.drop(columns=[BUCKET]))
        found = run_partition_batch(batch, ctx, names)
        return pd.DataFrame([f.to_row() for f in found], columns=list(FINDING_FIELDS))

    def bucketed(df):
        return df.withColumn(BUCKET, F.pmod(F.hash(*GROUP), F.lit(buckets)))

    return (bucketed(segments_df).groupBy(BUCKET).cogroup(bucketed(partitions_df).groupBy(BUCKET))
            .applyInPandas(per_bucket, schema=spark_schema(FINDING_SCHEMA)))


#: The bucket column of :func:`spark_partition_findings` (dropped before the checks see the rows).
BUCKET = "_check_bucket"
#: Most buckets the Spark checks use: each is one Python call and one pandas batch.
MAX_SPARK_BUCKETS = 4096


def run_spark(segments_df, partitions_df, stats_dfs: Mapping[str, object], ctx: AuditContext,
              names: Sequence[str] | None = None, buckets: int | None = None,
              to_pandas: Callable | None = None) -> list[Finding]:
    """Spark engine: partition checks on executors (batches of partitions, see
    :func:`spark_partition_findings`); only findings and the small stats come back.
    ``stats_dfs``: the aggregates as Spark DataFrames, or already collected (pandas).
    ``to_pandas``: how a DataFrame of a row per partition dir reaches the driver (default
    ``DataFrame.toPandas``; the Spark engine's collects it in slices, ``auditor.engines.spark.engine``)."""
    to_pandas = to_pandas or (lambda df: df.toPandas())
    rows = spark_partition_findings(segments_df, partitions_df, ctx, names, buckets).collect()
    findings = [Finding.from_row(r.asDict()) for r in rows]
    del rows
    stats = {k: v if is_pandas(v) else to_pandas(v.select(*CLUSTER_STATS_COLUMNS) if k == "replica_stats" else v)
             for k, v in stats_dfs.items()}
    # one row per partition dir (500,000 at 10,000,000 segments): only the columns the checks read
    parts = to_pandas(partitions_df.select(*CLUSTER_PARTITION_COLUMNS))
    findings.extend(run_cluster_checks(stats, parts, ctx, names))
    return with_pass_summaries(findings, names)


def is_pandas(frame) -> bool:
    import pandas as pd

    return isinstance(frame, pd.DataFrame)


