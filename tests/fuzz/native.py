"""The C extensions built for fuzzing, beside (never over) the normal in-place build.

Two variants, each into ``build/fuzz/<variant>/`` (``build/`` is git-ignored; the in-place
``auditor/formats/*.so`` that setup.py builds is never touched):

* ``asan``: ``clang -fsanitize=fuzzer-no-link,address,undefined`` (libFuzzer's coverage counters
  and comparison hooks, AddressSanitizer, UndefinedBehaviorSanitizer made fatal with
  ``-fno-sanitize-recover=all``), ``-g -O1 -fno-omit-frame-pointer``. Such a library has no
  sanitizer runtime of its own: the process must start with one preloaded (:func:`sanitizer_env`).
* ``cov``: ``-fprofile-instr-generate -fcoverage-mapping`` (clang's source-based coverage, for
  ``llvm-cov``), no sanitizer: the line coverage the fuzz corpus reaches in each C file.

:func:`install` loads one variant's modules under their real names
(``auditor.formats._cwalk`` ...) into ``sys.modules`` before any decoder module imports them, so
``auditor.formats.log_reader`` and the others run on the instrumented code without a change.
"""

from __future__ import annotations

import hashlib
import json
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "fuzz"
FORMATS = ROOT / "auditor" / "formats"
#: module name -> its C source (setup.py's three extensions)
EXTENSIONS = {
    "auditor.formats._cwalk": FORMATS / "_cwalk.c",
    "auditor.formats._coffsets": FORMATS / "_coffsets.c",
    "auditor.formats._cmessage": FORMATS / "_cmessage.c",
    "auditor.keys._ckeys": ROOT / "auditor" / "keys" / "_ckeys.c",  # includes formats/_record_batch.h (-I)
}
DEPENDS = [FORMATS / "_record_batch.h", FORMATS / "_record_reading.h", FORMATS / "_legacy_message.h"]
CLANG = os.environ.get("FUZZ_CLANG", "clang-14")
COMMON_FLAGS = ["-shared", "-fPIC", "-g", "-fno-omit-frame-pointer", "-Wall", "-Werror=implicit-function-declaration"]
VARIANT_FLAGS = {
    "asan": ["-O1", "-fsanitize=fuzzer-no-link,address,undefined", "-fno-sanitize-recover=all"],
    "cov": ["-O0", "-fprofile-instr-generate", "-fcoverage-mapping"],
}
#: Where atheris keeps the ASan runtime with libFuzzer linked in (pip wheel: beside site-packages).
SANITIZER_RUNTIME = "asan_with_fuzzer.so"


class NativeBuildError(RuntimeError):
    """clang, the sanitizer runtime or atheris is missing, or a compile failed: the fuzz tests fail."""


def _suffix() -> str:
    return sysconfig.get_config_var("EXT_SUFFIX")


def module_path(variant: str, name: str) -> Path:
    return BUILD / variant / (name.replace(".", "/") + _suffix())


def _stamp(variant: str) -> str:
    h = hashlib.sha256()
    for path in [*EXTENSIONS.values(), *DEPENDS]:
        h.update(path.read_bytes())
    h.update(" ".join([CLANG, *COMMON_FLAGS, *VARIANT_FLAGS[variant], sys.version]).encode())
    return h.hexdigest()


def build(variant: str = "asan") -> Path:
    """Compile the three extensions for ``variant`` (skipped when sources and flags are unchanged)."""
    if shutil.which(CLANG) is None:
        raise NativeBuildError(f"{CLANG} not found: install Debian's clang and libclang-rt-14-dev "
                               f"(scripts/system-packages.sh)")
    out = BUILD / variant
    stamp = out / "stamp"
    want = _stamp(variant)
    if stamp.is_file() and stamp.read_text() == want and all(module_path(variant, n).is_file() for n in EXTENSIONS):
        return out
    include = sysconfig.get_paths()["include"]
    for name, source in EXTENSIONS.items():
        target = module_path(variant, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        # into a temporary file, then renamed over the target: a linker may rewrite an existing output
        # file in place, which would change the code under a fuzzer that has it loaded (several
        # tools/fuzz.sh may run at once, and two builds at once): a rename leaves the running one its file
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        cmd = [CLANG, *COMMON_FLAGS, *VARIANT_FLAGS[variant], f"-I{include}", f"-I{FORMATS}", str(source),
               "-o", str(partial)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise NativeBuildError(f"{' '.join(cmd)} failed:\n{done.stderr}")
        os.replace(partial, target)
    stamp.write_text(want)
    return out


def install(variant: str) -> dict[str, str]:
    """Load ``variant``'s modules into sys.modules under their real names; their paths by name.
    Must run before anything imports auditor.formats' C modules (it checks that nothing did)."""
    loaded = {}
    for name in EXTENSIONS:
        if name in sys.modules:
            raise NativeBuildError(f"{name} was imported before the {variant} build was installed")
        path = module_path(variant, name)
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sys.modules[name] = module
        loaded[name] = str(path)
    return loaded


def sanitizer_runtime() -> Path:
    """atheris' ASan runtime with libFuzzer linked in (it also holds UBSan's handlers)."""
    try:
        import atheris
    except ImportError as exc:
        raise NativeBuildError("atheris is not installed: .venv/bin/python -m pip install atheris "
                               "(the test extra of pyproject.toml)") from exc
    path = Path(atheris.path()) / SANITIZER_RUNTIME
    if not path.is_file():
        raise NativeBuildError(f"{path} missing: the atheris wheel ships it; reinstall atheris")
    return path


def sanitizer_env(base: dict | None = None) -> dict:
    """The environment a process running the ``asan`` build must start with.

    LD_PRELOAD: the instrumented libraries reference the ASan/UBSan runtime and libFuzzer's
    coverage callbacks, which neither python nor atheris' default module provide.
    PYTHONMALLOC=malloc: every Python object (the bytes a decoder reads) comes from malloc, so
    ASan puts red zones around it; with pymalloc a read past a small bytes object stays inside an
    arena and goes unseen. detect_leaks=0: CPython keeps its objects at exit by design.
    """
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = str(sanitizer_runtime())
    env["PYTHONMALLOC"] = "malloc"
    env["ASAN_OPTIONS"] = ("detect_leaks=0:abort_on_error=1:symbolize=1:allocator_may_return_null=1:"
                           "detect_stack_use_after_return=1:strict_string_checks=1")
    env["UBSAN_OPTIONS"] = "halt_on_error=1:abort_on_error=1:print_stacktrace=1"
    symbolizer = shutil.which("llvm-symbolizer-14") or shutil.which("llvm-symbolizer")
    if symbolizer:
        env["ASAN_SYMBOLIZER_PATH"] = symbolizer
    return env


#: the native libFuzzer harnesses (tests/fuzz/native/driver.c + tests/fuzz/native_targets.py)
DRIVER = ROOT / "tests" / "fuzz" / "native" / "driver.c"
NATIVE_FLAGS = ["-g", "-O1", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]


def native_binary() -> Path:
    return BUILD / "native" / "fuzz_c"


def build_native() -> Path:
    """The native harness (every target of fuzz.native_targets.TARGETS, picked at run time by
    $KLA_NATIVE_TARGET): the four extensions
    compiled with -fsanitize=fuzzer-no-link,address,undefined (coverage of the C decoders alone),
    the driver with -fsanitize=fuzzer,address,undefined (libFuzzer's main), linked against the
    running Python's libpython (embedded once per process). Skipped when nothing changed."""
    if shutil.which(CLANG) is None:
        raise NativeBuildError(f"{CLANG} not found: install Debian's clang and libclang-rt-14-dev "
                               f"(scripts/system-packages.sh)")
    libdir = sysconfig.get_config_var("LIBDIR")
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not (Path(libdir) / ldlib).is_file():
        raise NativeBuildError(f"{sys.executable} has no shared libpython ({libdir}/{ldlib}) to embed")
    out = native_binary()
    # the same in every process that builds it (pytest's sys.path is not python's), so no rebuild
    sites = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    sys_path = (f"import site, sys\nsys.path[:0] = {[str(ROOT), str(ROOT / 'tests')]!r}\n"
                f"for d in {sites!r}:\n    site.addsitedir(d)\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    for path in [*EXTENSIONS.values(), *DEPENDS, DRIVER]:
        h.update(path.read_bytes())
    h.update(" ".join([CLANG, sys_path, *NATIVE_FLAGS, sys.version]).encode())
    stamp = out.with_suffix(".stamp")
    if stamp.is_file() and stamp.read_text() == h.hexdigest() and out.is_file():
        return out
    include = sysconfig.get_paths()["include"]
    objects = []
    for name, source in EXTENSIONS.items():
        obj = out.parent / f"{name.rsplit('.', 1)[1]}.{os.getpid()}.o"
        cmd = [CLANG, "-c", "-fPIC", *NATIVE_FLAGS, "-fsanitize=fuzzer-no-link,address,undefined", f"-I{include}",
               f"-I{FORMATS}", str(source), "-o", str(obj)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise NativeBuildError(f"{' '.join(cmd)} failed:\n{done.stderr}")
        objects.append(str(obj))
    partial = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    lib = ldlib[3:].split(".so")[0]   # libpython3.11.so -> python3.11
    cmd = [CLANG, *NATIVE_FLAGS, "-fsanitize=fuzzer,address,undefined", f"-I{include}",
           f"-DFUZZ_SETUP={json.dumps(sys_path)}", str(DRIVER), *objects, f"-L{libdir}",
           f"-Wl,-rpath,{libdir}", f"-l{lib}", "-lm", "-ldl", "-lpthread", "-o", str(partial)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    for obj in objects:
        Path(obj).unlink(missing_ok=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise NativeBuildError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    os.replace(partial, out)
    stamp.write_text(h.hexdigest())
    return out
