"""Line coverage of the C decoders by the fuzz corpus: ``python tests/fuzz/coverage.py [harness...]``.

Replays every input of each harness's corpus (atheris or native: a native harness's through
fuzz.native_targets) (committed tests/fuzz/corpus/H, the findings'
tests/fuzz/regressions/H and the grown build/fuzz/corpus/H) once through the harness on the ``cov`` build (clang
``-fprofile-instr-generate -fcoverage-mapping``; tests/fuzz/native.py), merges the profiles with
llvm-profdata and reads the per-line counts with ``llvm-cov show``. Prints each C file's line
coverage and the lines no input ran (numbers and text), so each can be explained or covered.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent)]

from fuzz import native, targets  # noqa: E402

PROFILES = native.BUILD / "cov" / "profiles"
_LINE = re.compile(r"^\s*(\d+)\|\s*([0-9.]+[kMG]?|)\|(.*)$")


def tool(name: str) -> str:
    found = shutil.which(f"{name}-14") or shutil.which(name)
    if found is None:
        raise SystemExit(f"coverage.py: {name} not found (Debian's llvm-14, installed with clang-14)")
    return found


def replay(harnesses: list[str]) -> None:
    shutil.rmtree(PROFILES, ignore_errors=True)
    PROFILES.mkdir(parents=True)
    env = dict(os.environ, LLVM_PROFILE_FILE=str(PROFILES / "%p-%m.profraw"))
    env["PYTHONPATH"] = f"{native.ROOT}:{native.ROOT / 'tests'}"
    for h in harnesses:
        shared = targets.NATIVE[h][0] if h in targets.NATIVE else h
        dirs = [str(d) for d in (HERE / "corpus" / shared, HERE / "regressions" / shared, native.BUILD / "corpus" / h)
                if d.is_dir()]
        subprocess.run([sys.executable, str(HERE / "run.py"), h, "--replay", *dirs], env=env, check=True,
                       stdout=subprocess.DEVNULL)


def line_counts() -> dict[str, dict[int, tuple[int, str]]]:
    """C file -> line -> (execution count, text), for the lines that hold code."""
    merged = PROFILES / "merged.profdata"
    subprocess.run([tool("llvm-profdata"), "merge", "-sparse", "-o", str(merged),
                    *map(str, PROFILES.glob("*.profraw"))], check=True)
    objects = [a for name in native.EXTENSIONS for a in ("-object", str(native.module_path("cov", name)))]
    out = subprocess.run([tool("llvm-cov"), "show", objects[1], *objects[2:], f"-instr-profile={merged}",
                          "-show-line-counts"], capture_output=True, text=True, check=True).stdout
    files: dict[str, dict[int, tuple[int, str]]] = {}
    current = None
    for raw in out.splitlines():
        if raw.startswith("/") and raw.endswith(":"):   # a source file's section (Python's headers left out)
            path = Path(raw[:-1])
            sources = {native.FORMATS, *(source.parent for source in native.EXTENSIONS.values())}
            current = files.setdefault(path.name, {}) if path.parent in sources else None
            continue
        m = _LINE.match(raw)
        if current is None or not m or not m.group(2) or m.group(3).lstrip().startswith("#"):
            continue   # no code, or a preprocessor line (counted where its macro is expanded)
        count = m.group(2)
        scale = {"k": 1e3, "M": 1e6, "G": 1e9}.get(count[-1], 1)
        current[int(m.group(1))] = (int(float(count.rstrip("kMG")) * scale), m.group(3))
    return files


def main(argv: list[str]) -> int:
    harnesses = argv or [*targets.HARNESSES, *targets.NATIVE]
    native.build("cov")
    replay(harnesses)
    for name, lines in sorted(line_counts().items()):
        covered = sum(1 for c, _ in lines.values() if c > 0)
        missed = sorted((n, t) for n, (c, t) in lines.items() if c == 0)
        print(f"{name}: {covered}/{len(lines)} lines = {100 * covered / max(1, len(lines)):.1f}%; "
              f"{len(missed)} never run:")
        for n, text in missed:
            print(f"  {name}:{n}: {text.strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
