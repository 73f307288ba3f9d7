"""Run one harness: ``python tests/fuzz/run.py HARNESS [--replay] [libFuzzer args: dirs, -flags]``.

* default: atheris (libFuzzer) on the ``asan`` build of the C extensions (built first, into
  build/fuzz/asan). The process re-executes itself once with the sanitizer environment
  (tests/fuzz/native.py sanitizer_env: LD_PRELOAD of atheris' ASan+libFuzzer runtime,
  PYTHONMALLOC=malloc, ASan/UBSan options). The harness's Python decoders are instrumented by
  atheris too (targets.INSTRUMENT: the decoders only), so the search is guided by Python and C
  coverage alike.
* a native harness (``c_walk`` ..., targets.NATIVE): the libFuzzer program of
  tests/fuzz/native/driver.c (native.build_native), the Python interpreter embedded in it and the
  four C extensions linked in, built with -fsanitize=fuzzer,address,undefined; only the C is
  instrumented (fuzz/native_targets.py says what each target calls and checks).
* ``--replay``: every file named (or in the dirs named) run once through the harness, on the
  ``cov`` build (clang source-based coverage; LLVM_PROFILE_FILE says where the profile goes), no
  fuzzing: the line coverage of the corpus (tools/fuzz.sh).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (str(ROOT), str(HERE.parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from fuzz import native, targets  # noqa: E402

_CHILD = "KLA_FUZZ_CHILD"


def _replay(name: str, paths: list[str]) -> int:
    native.build("cov")
    native.install("cov")
    harness = targets.load(name)
    files = []
    for p in map(Path, paths):
        files += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        harness.one_input(f.read_bytes())
    print(f"replayed {len(files)} inputs through {name}")
    return 0


def _native(name: str, rest: list[str]) -> int:
    """A native harness: the libFuzzer program (built first) with the target named in its environment."""
    binary = native.build_native()
    _shared, dictionary, max_len = targets.NATIVE[name]
    flags = [a for a in rest if a.startswith("-")]
    if not any(a.startswith("-dict=") for a in flags):
        rest.append(f"-dict={HERE / 'dicts' / dictionary}")
    if not any(a.startswith("-max_len=") for a in flags):
        rest.append(f"-max_len={max_len}")
    env = dict(os.environ, KLA_NATIVE_TARGET=name)
    os.execve(str(binary), [str(binary), *rest], env)


def _replay_native(name: str, paths: list[str]) -> int:
    native.build("cov")
    native.install("cov")
    from fuzz import native_targets

    one_input = native_targets.TARGETS[name]
    files = []
    for p in map(Path, paths):
        files += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        one_input(memoryview(f.read_bytes()))
    print(f"replayed {len(files)} inputs through {name}")
    return 0


def main(argv: list[str]) -> int:
    names = [*targets.HARNESSES, *targets.NATIVE]
    if len(argv) < 2 or argv[1] not in names:
        print(f"usage: run.py HARNESS [--replay] [libFuzzer args]; harnesses: {', '.join(names)}", file=sys.stderr)
        return 2
    name, rest = argv[1], argv[2:]
    if name in targets.NATIVE:
        if "--replay" in rest:
            return _replay_native(name, [a for a in rest if a != "--replay"])
        return _native(name, rest)
    if "--replay" in rest:
        return _replay(name, [a for a in rest if a != "--replay"])
    if os.environ.get(_CHILD) != "1":
        native.build("asan")
        env = native.sanitizer_env()
        env[_CHILD] = "1"
        os.execve(sys.executable, [sys.executable, *argv], env)
    import atheris

    native.install("asan")
    with atheris.instrument_imports(include=["auditor", "fuzz"], exclude=targets.not_instrumented(name)):
        harness = targets.load(name)
    module, dictionary, max_len = targets.HARNESSES[name]
    flags = [a for a in rest if a.startswith("-")]
    if not any(a.startswith("-dict=") for a in flags):
        rest.append(f"-dict={HERE / 'dicts' / dictionary}")
    if not any(a.startswith("-max_len=") for a in flags):
        rest.append(f"-max_len={max_len}")
    atheris.Setup([argv[0], *rest], harness.one_input, internal_libfuzzer=False)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
