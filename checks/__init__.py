"""The rule checks, one per module, grouped by family: ``checks/<family>/<rule>.py`` holds the
check whose config key is ``<family>.<rule>``. The framework they share (the ``Check`` base and
findings, the batch frame, the config, the registry, the Great Expectations suite) is
:mod:`checks.framework`.

``REGISTRY`` maps each check's config key to its class, every check module imported on first use;
:func:`check_named` imports one check's module only (replay-check runs one).
"""

from __future__ import annotations

from checks.framework.base import Check
from checks.framework.registry import discover, find_one, module_of

__all__ = ["REGISTRY", "check_named", "module_of"]


def __getattr__(name: str):
    """``REGISTRY``: every check module imported on first use (then kept as an attribute), so that
    a command running one check compiles and imports that one alone."""
    if name != "REGISTRY":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    registry = globals()["REGISTRY"] = discover()
    return registry


def check_named(name: str) -> type[Check] | None:
    """``REGISTRY.get(name)``, importing only the check's own module while the registry is not
    built; a name no module holds builds the registry."""
    if name in _NAMED:
        return _NAMED[name]
    if "REGISTRY" not in globals():
        found = find_one(name)
        if found is not None:
            _NAMED[name] = found
            return found
    registry = globals().get("REGISTRY")  # built once: __getattr__ would discover every module again
    return (registry if registry is not None else __getattr__("REGISTRY")).get(name)


_NAMED: dict[str, type[Check]] = {}
"""Checks found by :func:`check_named` before the registry was built (asked once per partition)."""
