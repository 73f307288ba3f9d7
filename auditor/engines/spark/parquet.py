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
from auditor.object_store import is_s3, s3a_url
from auditor.schema import PARTITION_FIELDS, PARTITION_SCHEMA, SEGMENT_FIELDS, SEGMENT_SCHEMA, spark_schema


def read_manifests(spark, paths: Iterable[str]) -> SparkScan:
    """Any number of manifests written by ``kafka-audit collect`` into the same three results.
    Manifests in object storage are listed and their sizes checked on the driver, their tables'
    CRC-32 by the executors (:func:`check_remote_crcs`) before they are read."""
    found = find_manifests(paths)
    check_remote_crcs(spark, [d for d in found if is_s3(d)])
    dirs = [s3a_url(d) for d in found]  # Spark reads s3a://
    segments = spark.read.schema(spark_schema(SEGMENT_SCHEMA)).parquet(*[f"{d}/{SEGMENTS_FILE}" for d in dirs])
    partitions = spark.read.schema(spark_schema(PARTITION_SCHEMA)).parquet(*[f"{d}/{PARTITIONS_FILE}" for d in dirs])
    infos_df = spark.read.schema(spark_schema(LOG_DIRS_SCHEMA)).parquet(*[f"{d}/{LOG_DIRS_FILE}" for d in dirs])
    infos = [r.asDict(recursive=True) for r in infos_df.collect()]
    return SparkScan(segments.select(*SEGMENT_FIELDS), partitions.select(*PARTITION_FIELDS), infos)


def check_remote_crcs(spark, manifests: list[str]) -> None:
    """Each table object of the ``s3://`` manifests has the CRC-32 its ``_complete.json`` lists,
    computed where Spark reads it (the executors: ``binaryFile`` and Spark SQL's ``crc32``, the
    zlib polynomial the marker's CRC uses); ChangedManifest (exit 3, one line) otherwise, as on
    the driver (auditor.manifest_remote.read_checked). The objects are read one more time for it."""
    if not manifests:
        return
    from pyspark.sql import functions as F

    from auditor.manifest_remote import ChangedManifest, read_marker
    from auditor.manifest_write import COMPLETE_FILE

    want = {}
    for m in manifests:
        files = read_marker(m)["files"]
        for name in (SEGMENTS_FILE, PARTITIONS_FILE, LOG_DIRS_FILE):
            if name in files:
                want[f"{s3a_url(m)}/{name}"] = (m, name, files[name])
    got = (spark.read.format("binaryFile").load(list(want))
           .select("path", "length", F.lower(F.lpad(F.hex(F.crc32("content")), 8, "0")).alias("crc32"))
           .collect())
    for row in sorted(got, key=lambda r: r["path"]):
        m, name, listed = want[row["path"]]
        if row["crc32"] != listed.get("crc32") or row["length"] != listed.get("bytes"):
            raise ChangedManifest(f"manifest {m}: {name} is {row['length']} bytes with CRC-32 {row['crc32']}, "
                                  f"{COMPLETE_FILE} says {listed.get('bytes')} bytes, {listed.get('crc32')}: changed "
                                  "since it was collected; run collect again")


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

