"""The engine: Spark only (layer 7). Session, distributed scan, aggregates, Parquet.

Nothing here prints or parses arguments: the commands in :mod:`auditor.cli` and the pipeline in
:mod:`auditor.audit` call it. PySpark is imported inside the functions that need it, so importing
this package costs nothing on a machine that only collects manifests.
"""

from auditor.engines.spark.aggregates import PARTITION_DIR_KEYS, aggregates
from auditor.engines.spark.parquet import read_manifests, write_parquet
from auditor.engines.spark.scan_job import LOG_DIR_INFO_KEYS, SparkScan, plan_tasks, rows_to_driver, scan_dataframes
from auditor.engines.spark.session import build_spark, parse_conf, spark_conf

__all__ = [
    "LOG_DIR_INFO_KEYS", "PARTITION_DIR_KEYS", "SparkScan", "aggregates", "build_spark", "parse_conf",
    "plan_tasks", "read_manifests", "rows_to_driver", "scan_dataframes", "spark_conf", "write_parquet",
]
