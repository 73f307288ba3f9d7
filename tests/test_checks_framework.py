"""The check framework's own rules: codes, names, docstrings, config validation."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from checks import REGISTRY, module_of
from checks.framework.base import (CODE_PATTERN, DOCSTRING_SECTIONS, NAME_PATTERN, OPTIONS_POINTER, Check, Finding, Severity,
                         capped, documentation)
from checks.framework.config import Config, ConfigError

pytestmark = pytest.mark.unit


def test_registry_is_not_empty():
    assert REGISTRY, "no check module was discovered"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_check_declares_code_name_scope_and_sections(name):
    check = REGISTRY[name]
    assert CODE_PATTERN.match(check.code), check.code
    assert NAME_PATTERN.match(check.name), check.name
    assert check.scope in ("partition", "cluster")
    assert check.title
    module_doc = inspect.getmodule(check).__doc__ or ""
    assert module_doc.startswith(f"{check.code} {check.name}"), \
        f"module docstring must open with '{check.code} {check.name}'"
    # the Options section is generated from the declared options, never written by hand (one fact once)
    assert not re.search(r"^Options:\s*$", module_doc, re.M), \
        f"{check.__module__}: the Options section is generated (checks.framework.base.options_section); say '{OPTIONS_POINTER}'"
    doc = documentation(check)
    missing = [s for s in DOCSTRING_SECTIONS if not re.search(rf"^{re.escape(s)}:\s*$", doc, re.M)]
    assert not missing, f"{check.__module__} lacks docstring sections {missing}"
    for opt_name, option in check.options.items():
        assert re.search(rf"^    {re.escape(opt_name)} \(", doc, re.M), f"option {opt_name} missing from Options"
        assert option.description, f"option {opt_name} has no description"


def test_codes_are_unique():
    codes = [c.code for c in REGISTRY.values()]
    assert len(codes) == len(set(codes)), sorted(codes)


def test_one_check_per_module():
    modules = [c.__module__ for c in REGISTRY.values()]
    assert len(modules) == len(set(modules)), sorted(modules)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_one_name_everywhere(name):
    """The check of config key ``<family>.<rule>`` lives in checks/<family>/<rule>.py, its class is
    named after the rule's words, optionally led by the family's (integrity.index_mismatch:
    checks/integrity/index_mismatch.py, IntegrityIndexMismatch; groups.time_to_loss: GroupTimeToLoss),
    and its cases are in tests/check_cases/<family>/<rule>.yaml."""
    check = REGISTRY[name]
    first, last = name.split(".", 1)[0], name.rsplit(".", 1)[1]
    assert check.__module__ == module_of(name), f"{name}: module {check.__module__}, expected {module_of(name)}"
    stem = "".join(w[:1].upper() + w[1:] for w in last.split("_"))
    lead = check.__name__[: -len(stem)] if check.__name__.endswith(stem) else None
    assert lead is not None and first.lower().startswith(lead.lower()), (
        f"{name}: class {check.__name__}, expected {stem} led by nothing or by {first.capitalize()}")
    case_file = Path(__file__).parent / "check_cases" / first / f"{last}.yaml"
    assert case_file.exists(), f"{name}: no case file {case_file.relative_to(Path(__file__).parent)}"


def test_defaults_validate():
    for check in REGISTRY.values():
        for key, option in check.options.items():
            option.check_value(f"{check.name}.{key}", option.default)


def test_config_rejects_unknown_check(tmp_path):
    p = tmp_path / "audit.yaml"
    p.write_text("checks:\n  no.such_check: {}\n")
    with pytest.raises(ConfigError, match=r"audit.yaml: checks: unknown check 'no.such_check'"):
        Config.load(p)


def test_config_rejects_bad_value_naming_path(tmp_path):
    p = tmp_path / "audit.yaml"
    p.write_text("checks:\n  integrity.crc:\n    severity: LOUD\n")
    with pytest.raises(ConfigError, match=r"checks.integrity.crc.severity: 'LOUD' breaks the rule"):
        Config.load(p)


def test_config_rejects_unknown_option_and_bad_kafka_value(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_text("checks:\n  integrity.crc:\n    sevrity: WARN\n")
    with pytest.raises(ConfigError, match="unknown option 'sevrity'"):
        Config.load(p)
    p.write_text("topics:\n  'orders*':\n    kafka:\n      retention.ms: a week\n")
    with pytest.raises(ConfigError, match=r"topics.orders\*.kafka.retention.ms: expected an integer, got 'a week'"):
        Config.load(p)


def test_config_rejects_bad_yaml(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_text("checks: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Config.load(p)


def test_per_topic_overrides_exact_beats_glob(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_text(
        "kafka: {retention.ms: 1000}\n"
        "checks: {integrity.crc: {severity: WARN}}\n"
        "topics:\n"
        "  'orders*': {checks: {integrity.crc: {severity: INFO}}, kafka: {retention.ms: 2000}}\n"
        "  orders-eu: {checks: {integrity.crc: {severity: FAIL}}}\n"
    )
    cfg = Config.load(p)
    crc = REGISTRY["integrity.crc"]
    assert cfg.options(crc, "payments")["severity"] == "WARN"
    assert cfg.options(crc, "orders-us")["severity"] == "INFO"
    assert cfg.options(crc, "orders-eu")["severity"] == "FAIL"
    assert cfg.kafka_setting("payments", "retention.ms") == "1000"
    assert cfg.kafka_setting("orders-eu", "retention.ms") == "2000"
    assert cfg.kafka_setting("x", "segment.bytes") == "1073741824"


def test_finding_round_trips_through_a_row():
    f = Finding(code="KLA050", check="integrity.crc", severity=Severity.FAIL, message="m", fix="x", broker_id=1,
                topic="t", partition=2, base_offset=5, thresholds={"a": 1}, evidence=[{"offset": 7}], evidence_count=9)
    assert Finding.from_row(f.to_row()) == f


def test_capped_keeps_full_count():
    kept, count = capped(iter(range(1000)), cap=3)
    assert kept == [0, 1, 2] and count == 1000


def test_every_check_class_is_a_check():
    assert all(issubclass(c, Check) for c in REGISTRY.values())


def test_check_named_imports_one_module_and_equals_the_registry():
    """checks.check_named finds a check through its module's name alone (replay-check imports one
    check, not the registry): in a fresh interpreter, the same class as REGISTRY for every name, the
    registry not built until asked, an unknown name None."""
    import subprocess
    import sys
    from pathlib import Path

    code = """
import sys
import checks
assert 'REGISTRY' not in vars(checks)
safety = checks.check_named('replay.safety')
assert sorted(m for m in sys.modules if m.startswith('checks.')) == [
    'checks.framework', 'checks.framework.base', 'checks.framework.registry', 'checks.replay', 'checks.replay.safety'], sys.modules
assert 'REGISTRY' not in vars(checks)
found = {}
for name in ('replay.safety', 'integrity.crc', 'mtime.reset', 'skew.partition_size'):
    found[name] = checks.check_named(name)
assert checks.check_named('no.such_check') is None
registry = checks.REGISTRY
assert all(found[n] is registry[n] for n in found) and safety is registry['replay.safety'], found
assert all(checks.check_named(n) is c for n, c in registry.items())
print('ok', len(registry))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr
