"""The local engine: the whole audit in this process on pyarrow and pandas, no JVM. The scan or
the manifests read into Arrow tables, the aggregates (:mod:`~auditor.engines.local.tables`), the
checks on one frame of every partition (:mod:`~auditor.engines.local.checks`) and Great
Expectations on pandas (:mod:`~auditor.engines.local.expectations`); :mod:`~auditor.engines.local.engine`
ties them behind :class:`auditor.engines.base.TableEngine`."""
