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

FRAMEWORK_MODULES = {"base", "config", "expectations"}


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


REGISTRY: dict[str, type[Check]] = _discover()
