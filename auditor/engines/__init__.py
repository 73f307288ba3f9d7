"""The audit's table stages behind one interface, on the driver or on Spark.

:class:`TableEngine` is what :func:`auditor.audit.run_tables` calls: read or scan the input, build
the aggregate tables, run the checks and the Great Expectations suite, hand back a
:class:`TableOutcome`. Two implementations: :class:`auditor.engines.local.engine.LocalEngine`
(pyarrow and pandas in this process; no JVM) and :class:`auditor.engines.spark.engine.SparkEngine`
(a Spark session started and stopped here). :func:`auditor.engines.choose.select_engine` picks one from the request alone
(nothing is scanned; see :func:`auditor.engines.choose.choose_engine`), so the pipeline never asks which it runs on.

``--engine local|spark`` says which outright; ``auto`` (the default) picks Spark for any
``--master``/``--conf``/``--parquet``, under ``spark-submit``, for remote manifests, and when the
input holds more than ``LOCAL_MAX_SEGMENT_ROWS`` segments (counted from the listing: one
``scandir`` per partition dir, stopping as soon as the limit is passed; for manifests, the Parquet
footers' row counts). ``tests/test_local_engine.py`` proves both engines' findings equal on the
same inputs; ``benchmarks/engines.py`` and ``benchmarks/fleet.py`` measure them.

This package's own import loads nothing: ``auditor.engines.spark`` (what ``scan --engine spark``
uses) must not pull the local engine's pandas into a broker's base install.
"""
