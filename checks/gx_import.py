"""Great Expectations imported at the cost of what the suite (``checks.expectations``) uses.

``import great_expectations`` loads every datasource, expectation and metric GX has, and the
optional libraries it finds installed: the demo's whole audit spent more CPU importing GX than
doing anything else. :func:`import_gx` imports it with the modules the suite never uses left to
load on first use (:data:`DEFERRED_MODULES`) or hidden during the import
(:data:`HIDDEN_MODULES`, extras GX imports in a ``try`` and does without). Nothing of GX's
installed files is changed; once GX is imported, every hidden or deferred module is the real one
for whoever imports it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import sys
import types

DEFERRED_MODULES = ("scipy.stats", "altair")
"""Modules GX imports for expectations this suite never uses (KL divergence and KS tests: their
statistics and charts), used by GX only inside functions: a stand-in until first use (~1 s CPU)."""
HIDDEN_MODULES = ("sqlalchemy", "pyspark.ml", "pyspark.sql.connect")
"""Hidden while GX is first imported, so GX sets itself up as without them (each import is in a
``try`` GX expects to fail): its optional SQL support (an extra of GX; Airflow pulls sqlalchemy into
the test venv; ~1 s CPU), Spark ML's ``Bucketizer`` (histogram metrics on Spark, which this suite
does not use; pyspark.ml pulls in scipy.sparse: ~0.2 s CPU) and Spark Connect (DataFrames of a
remote Spark Connect server, which the auditor never uses; its import pulls in grpc and asyncio
before failing here without zstandard: ~0.06 s CPU). Spark DataFrames validate as before."""


class _Deferred(types.ModuleType):
    """Stands in ``sys.modules`` for a module until one of its attributes is read; then the real
    module is imported and answers (``importlib.util.LazyLoader`` does not do here: the import
    statement reads ``__spec__``, which loads a lazy module at once)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__spec__ = importlib.machinery.ModuleSpec(name, None)

    def __getattr__(self, attr: str):
        real = self.__dict__.get("_kla_real")
        if real is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
            self.__dict__["_kla_real"] = real
        return getattr(real, attr)


@functools.cache
def import_gx() -> types.ModuleType:
    """``great_expectations``, imported once at the cost of what the suite needs: the modules of
    ``DEFERRED_MODULES`` left to load on first use, those of ``HIDDEN_MODULES`` hidden during the
    import (each only when nothing imported it yet). When GX is already imported, it is as it is."""
    if "great_expectations" in sys.modules:
        return importlib.import_module("great_expectations")
    for name in DEFERRED_MODULES:
        sys.modules.setdefault(name, _Deferred(name))
    hidden = [name for name in HIDDEN_MODULES if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # an import of it raises ImportError, which GX expects of its extras
    try:
        import great_expectations as gx
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return gx
