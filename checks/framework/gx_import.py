"""Great Expectations imported at the cost of what the suite (``checks.framework.expectations``) uses.

``import great_expectations`` loads every datasource, expectation and metric GX has, and the
optional libraries it finds installed: the demo's whole audit spent more CPU importing GX than
doing anything else. :func:`import_gx` imports it with the modules the suite never uses left to
load on first use (:data:`DEFERRED_MODULES`) or hidden during the import
(:data:`HIDDEN_MODULES`, extras GX imports in a ``try`` and does without), pydantic's copies
of inherited fields made without ``copy.deepcopy``'s generic path (:func:`_fast_field_copies`:
the same copies, ~0.2 s of the import's ~1.35 s CPU less) and the cyclic garbage collector paused
(:func:`_collector_paused`: ~0.1 s less). Nothing of GX's installed files is changed;
once GX is imported, every hidden or deferred module is the real one for whoever imports it, and
``copy.deepcopy`` is as it was.
"""

from __future__ import annotations

import contextlib
import copy
import copyreg
import functools
import gc
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
    import (each only when nothing imported it yet), pydantic's field copies made by
    :func:`_fast_field_copies`, the collector paused (:func:`_collector_paused`). When GX is
    already imported, it is as it is."""
    if "great_expectations" in sys.modules:
        return importlib.import_module("great_expectations")
    for name in DEFERRED_MODULES:
        sys.modules.setdefault(name, _Deferred(name))
    hidden = [name for name in HIDDEN_MODULES if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # an import of it raises ImportError, which GX expects of its extras
    try:
        with _fast_field_copies(), _collector_paused():
            import great_expectations as gx
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return gx


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off while GX is imported, as it was after. The import makes
    ~130,000 objects that live as long as the process (classes, functions, pydantic fields), and
    the collector, run by allocation counts, scanned them ~300 times, twice all the process's
    objects: ~0.2 s of the import's CPU (benchmarks/README.md). An import makes little garbage;
    what cycles it leaves are collected by the next collection, as before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


FIELD_CLASSES = (("pydantic.v1.fields", "ModelField"), ("pydantic.v1.fields", "FieldInfo"),
                 ("pydantic.v1.class_validators", "Validator"))
"""pydantic v1's classes of a model's field (its definition, its declared constraints, its
validators), which GX's ~370 models copy from their bases."""


@contextlib.contextmanager
def _fast_field_copies():
    """``copy.deepcopy`` of the :data:`FIELD_CLASSES` made by :func:`_copy_slots` while GX is
    imported. Every pydantic v1 model class deep-copies its bases' fields (``ModelMetaclass``:
    ``smart_deepcopy(base.__fields__)``), ~3,800 fields for GX's models; through ``deepcopy``'s
    generic path (``__reduce_ex__``, a state tuple and dict deep-copied, ~120 calls a field) that
    was ~0.45 s of the import's ~1.35 s CPU (benchmarks/README.md). Only classes whose instances
    copy by that generic path are taken (slots only, no copy hook of their own); ``copy``'s
    dispatch table is as it was after the import, whatever happens."""
    dispatch = copy._deepcopy_dispatch  # deepcopy's per-exact-type copiers (the stdlib's own table)
    taken = {}
    for module, name in FIELD_CLASSES:
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if cls not in dispatch and _copied_generically(cls):
            taken[cls] = dispatch[cls] = _copy_slots
    try:
        yield
    finally:
        for cls in taken:
            if dispatch.get(cls) is _copy_slots:
                del dispatch[cls]


def _copied_generically(cls) -> bool:
    """``deepcopy`` copies ``cls``'s instances as ``_copy_slots`` does: slots and no ``__dict__``,
    no copy or pickle hook of its own, nothing registered for it in ``copyreg``."""
    return (cls.__dictoffset__ == 0 and cls.__new__ is object.__new__
            and cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
            and getattr(cls, "__getstate__", None) is getattr(object, "__getstate__", None)
            and not any(hasattr(cls, hook) for hook in ("__deepcopy__", "__setstate__", "__getnewargs__",
                                                        "__getnewargs_ex__"))
            and cls not in copyreg.dispatch_table)


def _copy_slots(x, memo):
    """``copy.deepcopy`` of an object of slots only, as its generic path makes it (``_reconstruct``:
    a new instance, memoized first, then each set slot, in ``copyreg._slotnames`` order, set to a
    deep copy of its value), without the intermediate state tuple and dict, and with the values
    ``deepcopy`` returns as they are (its atomic types: None, numbers, strings, classes,
    functions) set without a call."""
    cls = type(x)
    y = cls.__new__(cls)
    memo[id(x)] = y
    dispatch, atomic = copy._deepcopy_dispatch, copy._deepcopy_atomic
    for name in copyreg._slotnames(cls):
        try:
            value = getattr(x, name)
        except AttributeError:  # a slot never set: not in the generic path's state either
            continue
        setattr(y, name, value if dispatch.get(type(value)) is atomic else copy.deepcopy(value, memo))
    return y
