"""GX imported by ``checks.framework.gx_import.import_gx`` is GX: pydantic's field copies made during its import
(``_fast_field_copies``) and the collector paused (``_collector_paused``) give every GX model the
fields a plain ``import great_expectations`` gives, and ``copy.deepcopy`` and the collector are as
they were afterwards."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Union

import pytest

from checks.framework.gx_import import FIELD_CLASSES, _copied_generically, _copy_slots, _fast_field_copies

REPO = Path(__file__).resolve().parents[1]

# two fresh interpreters importing GX: 7.5 s CPU at load 5 (tests/conftest.py: long files first)
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=7.5)]

# Every pydantic v1 model's fields after the import, described by what pydantic reads of them (the
# field, its FieldInfo, validators by name, sub-fields, config, alias, shape, types); addresses masked.
DESCRIBE = r"""
import re, sys, copy, gc
import pydantic.v1 as p1
PLAIN = sys.argv[1] == "plain"
if PLAIN:
    import great_expectations
else:
    from checks.framework.gx_import import import_gx
    import_gx()
def names(vs):
    return [getattr(v, "__qualname__", repr(v)) for v in (vs or [])]
def desc(f):
    return (f"{f!r} | {f.field_info!r} | {sorted(f.class_validators)} | {names(f.validators)} {names(f.pre_validators)} "
            f"{names(f.post_validators)} | {[desc(s) for s in (f.sub_fields or [])]} | {f.model_config.__qualname__} "
            f"{f.alias} {f.shape} {f.allow_none} {f.required!r} {f.type_!r} {f.outer_type_!r}")
def walk(c):
    for s in c.__subclasses__():
        yield s
        yield from walk(s)
out = sorted({f"{m.__module__}.{m.__qualname__}.{n}: {desc(f)}" for m in walk(p1.BaseModel) for n, f in m.__fields__.items()})
left = [c for c in copy._deepcopy_dispatch if c.__module__.startswith("pydantic")]
print(f"left {left}, collector {gc.isenabled()}")
print(re.sub(r"0x[0-9a-f]+", "0xADDR", "\n".join(out)))
"""


def _describe(how: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", DESCRIBE, how], cwd=str(REPO), env=env, capture_output=True,
                         text=True, timeout=600, check=True).stdout.splitlines()
    assert out[0] == "left [], collector True", out[0]  # deepcopy's dispatch table and the collector as they were
    return out[1:]


def test_gx_models_have_the_fields_of_a_plain_import():
    fast, plain = _describe("fast"), _describe("plain")
    assert len(plain) > 2_000, len(plain)  # GX 1.x: ~370 models, ~3,000 fields
    assert any(".ExpectColumnValuesToBeBetween.min_value:" in line for line in plain)
    assert fast == plain


def test_slot_copies_are_deepcopys():
    """On a pydantic v1 model's fields (nested generic types, constraints, a mutable default, a
    validator, sub-fields, one FieldInfo shared by two entries): the same copies as deepcopy's
    generic path, sharing kept, nothing of the original shared but what deepcopy shares."""
    import pydantic.v1 as p1

    class Model(p1.BaseModel):
        a: Optional[Union[int, str]] = None
        b: Dict[str, List[int]] = p1.Field(default_factory=dict, description="nested")
        c: List[int] = [1, 2]
        d: int = p1.Field(3, ge=0, le=10)

        @p1.validator("d")
        def _small(cls, v):
            return v

    fields = dict(Model.__fields__)
    fields["e"] = fields["d"]  # a shared object: one copy for both
    classes = [getattr(__import__(m, fromlist=[n]), n) for m, n in FIELD_CLASSES]
    assert all(_copied_generically(c) for c in classes)
    plain = copy.deepcopy(fields)
    with _fast_field_copies():
        assert all(copy._deepcopy_dispatch.get(c) is _copy_slots for c in classes)
        fast = copy.deepcopy(fields)
    assert not any(c in copy._deepcopy_dispatch for c in classes)
    assert fast["e"] is fast["d"] and plain["e"] is plain["d"]
    for name, field in fields.items():
        for made in (fast[name], plain[name]):
            assert made is not field and made.field_info is not field.field_info
            assert made.default == field.default
        assert repr(fast[name]) == repr(plain[name]) and repr(fast[name].field_info) == repr(plain[name].field_info)
        for slot in type(field).__slots__:
            assert hasattr(fast[name], slot) == hasattr(plain[name], slot), slot
            if hasattr(plain[name], slot):  # the copied values compare by what they show (fields compare by identity)
                assert _shown(getattr(fast[name], slot)) == _shown(getattr(plain[name], slot)), slot
        assert fast[name].default is not field.default or not isinstance(field.default, list)
        assert [v.func for v in fast[name].class_validators.values()] == [
            v.func for v in plain[name].class_validators.values()]


def _shown(value) -> str:
    return re.sub(r"0x[0-9a-f]+", "0xADDR", repr(value))


def test_the_collector_is_as_it_was():
    import gc

    from checks.framework.gx_import import _collector_paused

    assert gc.isenabled()
    with _collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with _collector_paused():
            pass
        assert not gc.isenabled()  # a caller's own pause is left as it is
    finally:
        gc.enable()


def test_classes_with_their_own_copy_are_left_alone():
    class Hooked:
        __slots__ = ("x",)

        def __deepcopy__(self, memo):
            return self

    class WithDict:
        pass

    assert not _copied_generically(Hooked)
    assert not _copied_generically(WithDict)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
