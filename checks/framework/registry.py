"""The registry of rule checks: every check module found by where it lives.

A check with config key ``<family>.<rule>`` lives in ``checks/<family>/<rule>.py`` (the family is
the config key's first part: ``retention.overdue`` in ``checks/retention/overdue.py``), one check
per module. Discovery walks the family packages of :mod:`checks`; the framework
(:mod:`checks.framework`) is a package of its own, so no list says which module is not a check.
``tests/test_checks_framework.py`` fails when a code or name repeats, when a module holds more than
one check, when a check lives elsewhere than its key says, or when a docstring lacks a section.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from checks.framework.base import Check

PACKAGE = "checks"
FRAMEWORK = "framework"


def module_of(name: str) -> str:
    """The module a check of config key ``name`` lives in: ``checks.<family>.<rule>``."""
    family, _, rule = name.partition(".")
    return f"{PACKAGE}.{family}.{rule}"


def _checks_in(module) -> list[type[Check]]:
    return [obj for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, Check) and obj is not Check and obj.__module__ == module.__name__]


def discover() -> dict[str, type[Check]]:
    """Every check of every family package, by config key, in code order."""
    root = importlib.import_module(PACKAGE)
    found: dict[str, type[Check]] = {}
    for family in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if not family.ispkg or family.name == FRAMEWORK or family.name.startswith("_"):
            continue
        package = importlib.import_module(f"{PACKAGE}.{family.name}")
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for obj in _checks_in(module):
                if obj.name in found:
                    raise RuntimeError(f"check name {obj.name!r} defined twice: {found[obj.name].__module__} "
                                       f"and {module.__name__}")
                found[obj.name] = obj
    return dict(sorted(found.items(), key=lambda kv: kv[1].code))


def find_one(name: str) -> type[Check] | None:
    """The check of config key ``name``, importing its own module only (None when there is none)."""
    family, dot, rule = name.partition(".")
    if not (dot and family.isidentifier() and rule.isidentifier()) or family == FRAMEWORK:
        return None
    try:
        module = importlib.import_module(module_of(name))
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_of(name).startswith(exc.name):
            return None
        raise
    return next((obj for obj in _checks_in(module) if obj.name == name), None)
