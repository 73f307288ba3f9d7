"""The Spark session of the audit: small-machine defaults for local mode, any master, spark-submit.

Settings are layered: :data:`COMMON_DEFAULTS` (and :data:`LOCAL_DEFAULTS` for ``local[*]``), then
what spark-submit set (:func:`submitted_conf`), then ``--conf`` given to the command.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from auditor.object_store import is_s3, spark_s3a_conf


BATCH_ROWS = 2048
"""Rows per Arrow RecordBatch (scan tasks yield at most this many; Arrow transfers use it too)."""

LOCAL_DEFAULTS = {
    # 2-core laptop / CI box: few shuffle partitions (AQE coalesces further), modest heap.
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": None,  # filled from os.cpu_count()
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
COMMON_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": str(BATCH_ROWS),
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.compression.codec": "zstd",
    "spark.sql.debug.maxToStringFields": "200",  # the segment schema is wide; no truncation warning
}
#: The driver JVM on a cluster (client mode) holds the per-partition-dir statistics and the findings,
#: never a segment row: a small footprint (benchmarks/README.md, fleet_spark.py, measured at 1M rows):
#: serial GC (G1's remembered sets cost native memory); a heap that starts at 64 MiB with a 32 MiB young
#: generation (by default it starts at 1/64 of the machine's RAM and its eden is all touched: the
#: largest share of the JVM's RSS; the maximum heap, spark.driver.memory, is unchanged); the client
#: compiler only (C2's code cache and arenas; the driver runs no hot loop); a 64 MiB code cache; metaspace
#: bounded. ``--conf spark.driver.extraJavaOptions=...`` replaces them. Local mode keeps the JVM's
#: defaults: its JVM runs the executors' tasks too.
#: The heap is also given back after a full GC down to 30% free (the default 70%), in one step (not
#: over four GCs), and grown to only 10% free (default 40%): one collect of 500,000 dirs' statistics
#: or GX's first jobs grew it by 40-100 MiB that it then kept (benchmarks/README.md, fleet_spark).
CLUSTER_DRIVER_JAVA_OPTIONS = ("-XX:+UseSerialGC -Xms64m -Xmn32m -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m "
                               "-XX:MaxMetaspaceSize=256m -XX:MaxHeapFreeRatio=30 -XX:MinHeapFreeRatio=10 "
                               "-XX:-ShrinkHeapInSteps")
CLUSTER_DEFAULTS = {"spark.driver.extraJavaOptions": CLUSTER_DRIVER_JAVA_OPTIONS}


# ---------------------------------------------------------------------------------------
# Session
# ---------------------------------------------------------------------------------------


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` to a dict; a pair without '=' is a usage error (ValueError)."""
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def spark_conf(master: str | None = None, conf: dict[str, str] | None = None) -> dict[str, str]:
    """The settings :func:`build_spark` applies: defaults for the master, then ``conf`` on top."""
    master = master or os.environ.get("KAFKA_AUDIT_SPARK_MASTER") or "local[*]"
    settings = {"spark.master": master, "spark.app.name": "kafka-log-auditor"}
    settings.update(COMMON_DEFAULTS)
    if master.startswith("local"):
        for key, value in LOCAL_DEFAULTS.items():
            settings[key] = value if value is not None else str(os.cpu_count() or 2)
    else:
        settings.update(CLUSTER_DEFAULTS)
    if not os.environ.get("PYSPARK_PYTHON"):
        # Python workers run the driver's interpreter (its venv has pyarrow and the auditor); on a
        # cluster whose executors live elsewhere, set spark.pyspark.python to their Python.
        settings["spark.pyspark.python"] = sys.executable
    settings.update(conf or {})
    return settings


def submitted_conf() -> dict[str, str]:
    """spark-submit's settings when it started this process, else {}.

    spark-submit starts the Python driver with its JVM already running (PYSPARK_GATEWAY_PORT);
    the settings live in that JVM's system properties, which SparkConf only sees once PySpark
    is attached to the gateway. In a plain interpreter nothing is attached here: the JVM is
    launched later by the builder, with the builder's settings (driver memory among them).
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def build_spark(master: str | None = None, conf: dict[str, str] | None = None, *, ship_code: bool | None = None,
                reads: Iterable[str] = ()):
    """A SparkSession for the audit: local[*] with small-machine defaults, or any master.

    ``conf`` overrides every default (``--conf k=v`` on the command line). Under ``spark-submit``
    pass ``master=None``: the submitted master and settings win over the defaults
    (:func:`submitted_conf`). For a non-local master the ``auditor`` and ``checks`` packages are
    zipped and shipped to executors (``ship_code``) so they need only pyarrow, pandas, crc32c and
    cramjam installed. ``reads``: the input paths; an ``s3://`` / ``s3a://`` one adds
    :func:`auditor.object_store.spark_s3a_conf`.
    """
    from pyspark.sql import SparkSession

    # Under spark-submit the launcher's settings (master, resources, --conf) win over the
    # defaults; an explicit master or --conf given to the audit wins over both.
    submitted = submitted_conf()
    submitted_master = submitted.pop("spark.master", None)
    settings = spark_conf(master or submitted_master, {**submitted, **(conf or {})})
    if any(is_s3(str(p)) for p in reads):
        # s3:// / s3a:// inputs: hadoop-aws on the classpath and the environment's AWS settings, unless
        # --conf or spark-submit gave them (auditor.object_store; ObjectStoreError without the jars)
        settings.update(spark_s3a_conf(settings))
    if "spark.pyspark.python" in settings:
        # PySpark takes the workers' interpreter from this variable when it creates the context.
        os.environ.setdefault("PYSPARK_PYTHON", settings["spark.pyspark.python"])
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.get("spark.log.level", "WARN"))
    if ship_code is None:
        ship_code = not settings["spark.master"].startswith("local")
    if ship_code:
        _ship_package(spark)
    return spark


#: The packages the executors import: the scan and the runner (``auditor``), the checks they run
#: (``checks``: the partition checks run in the executors' Python workers, ``applyInPandas``).
SHIPPED_PACKAGES = ("auditor", "checks")


def package_zip(target: Path) -> Path:
    """A zip of :data:`SHIPPED_PACKAGES`' Python sources (importable from the zip: ``addPyFile``)."""
    import importlib

    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in SHIPPED_PACKAGES:
            root = Path(importlib.import_module(name).__file__).resolve().parent
            for path in sorted(root.rglob("*.py")):
                zf.write(path, Path(name) / path.relative_to(root))
    return target


def _ship_package(spark) -> None:
    """Zips the packages the executors import and ships them (non-local masters): a cluster's
    workers then need only the third-party libraries (pyarrow, pandas, crc32c, cramjam)."""
    target = package_zip(Path(tempfile.mkdtemp(prefix="kafka-audit-pkg-")) / "kafka_audit.zip")
    spark.sparkContext.addPyFile(str(target))


def driver_jvm_running() -> bool:
    """Whether this process already has a driver JVM (a PySpark gateway): one launched for an
    earlier session (a test's), or the one spark-submit started this Python from."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


#: How long the driver JVM may take to exit once told to (its shutdown hooks: temp dirs).
JVM_EXIT_TIMEOUT_S = 60


def stop_driver_jvm() -> bool:
    """Ends the driver JVM this process launched (PySpark's gateway), after its sessions are
    stopped, so that the rest of the audit (findings document, JSON, HTML) runs without it: its
    resident memory (~450-600 MiB on a cluster: heap, metaspace, code) is otherwise held until the
    process exits (benchmarks/fleet_spark.py). The JVM exits when its stdin closes (PySpark's
    gateway server reads it for that); the next session in this process launches a new one.
    Returns False, doing nothing, when there is none or this process did not launch it (under
    spark-submit the JVM is the parent)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None or SparkContext._active_spark_context is not None:
        return False
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None
    gateway.close()  # this side's sockets (and callback server, if any)
    proc.stdin.close()
    try:
        proc.wait(timeout=JVM_EXIT_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired; it must not outlive the audit's memory budget
        proc.kill()
        proc.wait()
    return True
