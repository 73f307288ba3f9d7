"""The rule checks: one per module, found and registered here.

Every module of this package that defines a :class:`checks.base.Check` subclass is a check
module (the framework modules define none). ``REGISTRY`` maps each check's dotted name to its
class; ``tests/test_checks_framework.py`` fails when a code or name repeats, when a module holds
more than one check, or when a docstring lacks one of the sections.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from checks.base import Check

FRAMEWORK_MODULES = {"base", "batch", "audit_config", "expectations", "gx_import"}


def _discover() -> dict[str, type[Check]]:
    found: dict[str, type[Check]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in FRAMEWORK_MODULES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Check) and obj is not Check and obj.__module__ == module.__name__:
                if obj.name in found:
                    raise RuntimeError(f"check name {obj.name!r} defined twice: {found[obj.name].__module__} and {module.__name__}")
                found[obj.name] = obj
    return dict(sorted(found.items(), key=lambda kv: kv[1].code))


def __getattr__(name: str):
    """``REGISTRY``: every check module imported on first use (then kept as an attribute), so that
    a command running one check (replay-check: replay.safety) compiles and imports that one alone."""
    if name != "REGISTRY":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    registry = globals()["REGISTRY"] = _discover()
    return registry


def module_names(name: str) -> tuple[str, str]:
    """Where a check lives: the module named after the last part of its config key, or, where two
    would read alike, after the whole key (``timestamps.missing``: checks/timestamps_missing.py next
    to checks/missing_partition.py); ``tests/test_checks_framework.py::test_one_name_everywhere``."""
    return name.rpartition(".")[2], name.replace(".", "_")


def check_named(name: str) -> type[Check] | None:
    """``REGISTRY.get(name)``, importing only the check's own module (:func:`module_names`) when the
    registry is not built; any other name builds the registry."""
    if name in _NAMED:
        return _NAMED[name]
    if "REGISTRY" not in globals():
        for module_name in module_names(name):
            if not module_name.isidentifier() or module_name in FRAMEWORK_MODULES or module_name.startswith("_"):
                continue
            try:
                module = importlib.import_module(f"{__name__}.{module_name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{__name__}.{module_name}":
                    raise
                continue
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, Check) and obj is not Check and obj.__module__ == module.__name__ \
                        and obj.name == name:
                    _NAMED[name] = obj
                    return obj
    registry = globals().get("REGISTRY")  # built once: __getattr__ would discover every module again
    return (registry if registry is not None else __getattr__("REGISTRY")).get(name)


_NAMED: dict[str, type[Check]] = {}
"""Checks found by :func:`check_named` before the registry was built (asked once per partition)."""
