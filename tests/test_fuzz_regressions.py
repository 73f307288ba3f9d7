"""What the fuzzers found (issue 24), replayed on the normal build: each minimized input in
tests/fuzz/regressions/<harness>/ goes through its harness (which checks the C and Python paths
agree and nothing raises but the documented errors), and the committed seed corpora replay clean
too, so a decoder change that breaks a harness shows here without clang or atheris. Fast tier:
no broker, no fixture outside the repository.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.formats import log_reader, message_program, offsets_records
from fuzz import targets

pytestmark = pytest.mark.unit

FUZZ = Path(__file__).resolve().parent / "fuzz"
REGRESSIONS = sorted(p for p in (FUZZ / "regressions").rglob("*") if p.is_file() and p.suffix != ".md")


def test_normal_build_is_what_runs_here():
    # the in-place build (setup.py), not the fuzz build: these replays prove the shipped code
    for module in (log_reader._cwalk, offsets_records._coffsets, message_program._cmessage):
        assert module is not None and "build/fuzz" not in module.__file__, module


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_finding_stays_fixed(path):
    targets.load(path.parent.name).one_input(path.read_bytes())


@pytest.mark.parametrize("harness", sorted(targets.HARNESSES))
def test_committed_corpus_replays_clean(harness):
    seeds = sorted((FUZZ / "corpus" / harness).iterdir())
    assert seeds
    module = targets.load(harness)
    for seed in seeds:
        module.one_input(seed.read_bytes())


@pytest.mark.parametrize("native", sorted(targets.NATIVE))
def test_committed_corpus_replays_clean_through_the_native_targets(native):
    """The functions the native libFuzzer harness calls (tests/fuzz/native_targets.py), on the
    normal build: a change of a C function's signature or refusals shows here without clang."""
    from fuzz import native_targets

    seeds = sorted((FUZZ.parent.parent / targets.seeds(native)).iterdir())
    assert seeds
    for seed in seeds:
        native_targets.TARGETS[native](memoryview(seed.read_bytes()))
