"""The engine's Parquet: broker manifests read into the scan's DataFrames, results written out.

Manifests written on brokers by ``kafka-audit collect`` (:mod:`auditor.manifest`) are read by
:func:`read_manifests` into the same three results as a direct scan, with the schema from
:mod:`auditor.schema` enforced on read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from auditor.engines.spark.scan_job import SparkScan
from auditor.manifest import LOG_DIRS_FILE, LOG_DIRS_SCHEMA, PARTITIONS_FILE, SEGMENTS_FILE, find_manifests
from auditor.object_store import s3a_url
from auditor.schema import PARTITION_FIELDS, PARTITION_SCHEMA, SEGMENT_FIELDS, SEGMENT_SCHEMA, spark_schema


def read_manifests(spark, paths: Iterable[str]) -> SparkScan:
    """Any number of manifests written by ``kafka-audit collect`` into the same three results."""
    dirs = [s3a_url(d) for d in find_manifests(paths)]  # listed and checked on the driver; Spark reads s3a://
    segments = spark.read.schema(spark_schema(SEGMENT_SCHEMA)).parquet(*[f"{d}/{SEGMENTS_FILE}" for d in dirs])
    partitions = spark.read.schema(spark_schema(PARTITION_SCHEMA)).parquet(*[f"{d}/{PARTITIONS_FILE}" for d in dirs])
    infos_df = spark.read.schema(spark_schema(LOG_DIRS_SCHEMA)).parquet(*[f"{d}/{LOG_DIRS_FILE}" for d in dirs])
    infos = [r.asDict(recursive=True) for r in infos_df.collect()]
    return SparkScan(segments.select(*SEGMENT_FIELDS), partitions.select(*PARTITION_FIELDS), infos)



def write_parquet(scan: SparkScan, aggs: dict, out_dir: str | os.PathLike, mode: str = "overwrite") -> list[str]:
    """Writes segments/partitions (from the executors) and the aggregates as Parquet directories."""
    out = str(out_dir).rstrip("/")
    written = []
    for name, df in (("segments", scan.segments), ("partitions", scan.partitions), *aggs.items()):
        path = f"{out}/{name}.parquet"
        df.write.mode(mode).parquet(path)
        written.append(path)
    path = f"{out}/log_dirs.json"
    if "://" not in out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(scan.log_dirs, indent=1) + "\n")
        written.append(path)
    return written

