"""Every fuzz harness (tests/fuzz/) run for a fixed number of executions from a fixed seed (the
same inputs every run) on its committed corpus, under AddressSanitizer + UndefinedBehaviorSanitizer
on the clang build of the C decoders, and the machinery itself shown to report what it is there to
report.

Needs clang-14 with libclang-rt-14-dev (scripts/system-packages.sh) and atheris (the test extra):
without them these tests FAIL, they never skip. Long runs: tools/fuzz.sh; docs/fuzzing.md.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

# live (the slow lane, after the fast tiers): a clang AddressSanitizer + UBSan build of the C decoders
# and libFuzzer runs on seeds cut from the real brokers' files, about 75 s of CPU at load 3 (the
# fast lane's budget is a minute for everything)
pytestmark = pytest.mark.live

from fuzz import native, targets

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tests" / "fuzz" / "run.py"
#: In the suite each harness runs a fixed number of executions from a fixed seed, so that a CI run
#: repeats exactly what the last run explored (a new finding belongs to tools/fuzz.sh's random long
#: runs, not to a CI run at random). A number of executions, not a time: a time limit explores
#: fewer and other inputs on a loaded machine, so what a run covers would depend on the load.
#: Repeatable needs more than libFuzzer's -seed and -runs (each seen to matter, docs/fuzzing.md):
#: PYTHONHASHSEED fixed (str hashing orders sets); a scratch directory not named at random
#: (KLA_FUZZ_SCRATCH); address randomization off (setarch -R: libFuzzer's comparison tracing feeds
#: the values the C code compares, pointers among them, into its mutations). Executions beyond the
#: corpus: a few seconds each at load 3; a loaded machine takes longer for the same work.
FUZZ_SEED = {
    "checkpoints": 2401, "index": 2402, "manifest_parts": 2403, "message": 2404,
    "metadata_batch": 2405, "offsets_fold": 2406, "producer_snapshot": 2407, "segment": 2408,
    "key_fold": 2409,
}
#: index: its C and Python proofs compare each file's inode number and write time, which differ from
#: run to run, and libFuzzer's comparison tracing put them into its mutations (two runs grew
#: different corpora even with all of the above): without the comparison-guided mutations three
#: runs of three grew the same files (cov 662, against 657-669 with them)
FUZZ_EXTRA_FLAGS = {"index": ["-use_cmp=0"]}
FUZZ_EXECUTIONS = {
    "checkpoints": 1500, "index": 120, "manifest_parts": 6000, "message": 2000,
    "metadata_batch": 150, "offsets_fold": 150, "producer_snapshot": 10000, "segment": 150,
    "key_fold": 60,
}
#: the native harnesses (targets.NATIVE): only C is instrumented, so thousands of executions take
#: seconds; fixed seeds as above
NATIVE_SEED = {"c_walk": 2411, "c_index": 2412, "c_offsets": 2413, "c_keys": 2414, "c_message": 2415,
               "c_metadata_batch": 2416}
NATIVE_EXECUTIONS = {"c_walk": 2000, "c_index": 1000, "c_offsets": 200, "c_keys": 500, "c_message": 5000,
                     "c_metadata_batch": 5000}


@pytest.fixture(scope="module")
def asan_build():
    try:
        native.build("asan")
        native.sanitizer_runtime()
    except native.NativeBuildError as exc:
        pytest.fail(f"the fuzz build cannot be made: {exc}", pytrace=False)
    return native.BUILD / "asan"


@functools.cache
def _no_aslr() -> list[str]:
    """setarch's prefix that turns address randomization off, or [] (with a warning) where the
    personality call is refused (a container's seccomp profile may): the run is then repeatable
    up to the pointer values the comparison tracing sees."""
    prefix = ["setarch", platform.machine(), "-R"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
        return prefix
    warnings.warn("setarch -R refused: the fuzz runs keep address randomization (less repeatable)", stacklevel=2)
    return []


def _run(args: list[str], timeout: float, scratch: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}", PYTHONHASHSEED="0", KLA_FUZZ_SCRATCH=str(scratch))
    return subprocess.run([*_no_aslr(), sys.executable, str(RUN), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _run_clean(harness: str, corpus: Path, seed: int, executions: int, tmp_path: Path, extra=()) -> str:
    """One fixed run of a harness on its committed corpus (``executions`` beyond the seeds, from
    libFuzzer seed ``seed``): no finding, exactly that many inputs run; its log."""
    seeds = len(list(corpus.iterdir()))
    assert seeds > 0, f"no committed seeds for {harness}"
    grown = tmp_path / "grown"
    grown.mkdir()
    runs = seeds + executions
    done = _run([harness, str(grown), str(corpus), f"-seed={seed}", f"-runs={runs}", "-timeout=60", *extra,
                 "-rss_limit_mb=3072", "-malloc_limit_mb=1024", f"-artifact_prefix={tmp_path}/",
                 "-print_final_stats=1"], timeout=600, scratch=tmp_path / "scratch")
    log = done.stdout + done.stderr
    executed = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    artifacts = [p.name for p in tmp_path.iterdir() if p.is_file()]
    assert done.returncode == 0 and not artifacts, (
        f"{harness}: a finding (rc {done.returncode}, artifacts {artifacts}); the input is in the log:\n{log[-6000:]}")
    assert executed and int(executed[-1]) == runs, f"{harness}: did not run {runs} inputs:\n{log[-3000:]}"
    return log


@pytest.mark.parametrize("harness", sorted(targets.HARNESSES))
def test_harness_runs_clean_under_sanitizers(harness, asan_build, tmp_path):
    log = _run_clean(harness, ROOT / "tests" / "fuzz" / "corpus" / harness, FUZZ_SEED[harness],
                     FUZZ_EXECUTIONS[harness], tmp_path, FUZZ_EXTRA_FLAGS.get(harness, []))
    assert "asan_with_fuzzer" in log or "INFO: Using preloaded libfuzzer" in log, log[-3000:]


@pytest.fixture(scope="module")
def native_build():
    try:
        return native.build_native()
    except native.NativeBuildError as exc:
        pytest.fail(f"the native fuzz harness cannot be built: {exc}", pytrace=False)


@pytest.mark.parametrize("harness", sorted(targets.NATIVE))
def test_native_harness_runs_clean_under_sanitizers(harness, native_build, tmp_path):
    """The libFuzzer program with the C decoders linked in (tests/fuzz/native/driver.c): a fixed
    number of executions from a fixed seed on the committed seeds it shares with an atheris
    harness, no finding."""
    _run_clean(harness, ROOT / targets.seeds(harness), NATIVE_SEED[harness], NATIVE_EXECUTIONS[harness], tmp_path)


def test_native_harness_reports_an_exception(native_build, tmp_path):
    """An exception escaping a native target (a Disagreement, or an error a decoder must not
    raise) stops the run with its traceback: the driver turns it into a crash libFuzzer saves."""
    (tmp_path / "in").write_bytes(b"x")
    (tmp_path / "planted.py").write_text("def boom(data):\n    raise ValueError('planted')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), KLA_NATIVE_TARGET="planted:boom")
    done = subprocess.run([str(native_build), str(tmp_path / "in")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0 and "ValueError: planted" in done.stderr, done.stderr[-3000:]


_BUGGY = textwrap.dedent("""
    #define PY_SSIZE_T_CLEAN
    #include <Python.h>
    /* reads byte len + k of the buffer it is given, or overflows an int: what the fuzz build must report */
    static PyObject *past_end(PyObject *self, PyObject *args) {
        Py_buffer v;
        Py_ssize_t k;
        if (!PyArg_ParseTuple(args, "y*n", &v, &k)) return NULL;
        unsigned char c = ((unsigned char *)v.buf)[v.len + k];
        PyBuffer_Release(&v);
        return PyLong_FromLong(c);
    }
    static PyObject *overflow(PyObject *self, PyObject *arg) {
        int x = (int)PyLong_AsLong(arg);
        return PyLong_FromLong(x + 2147483647);
    }
    static PyMethodDef m[] = {{"past_end", past_end, METH_VARARGS, ""}, {"overflow", overflow, METH_O, ""}, {NULL}};
    static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "buggy", NULL, -1, m};
    PyMODINIT_FUNC PyInit_buggy(void) { return PyModule_Create(&d); }
""")


@pytest.mark.parametrize("call, report", [
    # the first byte past a harness's exact buffer (common.exact_buffer: how _cmessage's input is given)
    ("buggy.past_end(common.exact_buffer(b'x' * 100), 0)", "heap-buffer-overflow"),
    # past a small bytes object: seen only because PYTHONMALLOC=malloc (pymalloc would hide it in an
    # arena); byte len + 1, as byte len is the NUL every bytes object ends with
    ("buggy.past_end(b'y' * 100, 1)", "heap-buffer-overflow"),
    ("buggy.overflow(5)", "signed integer overflow"),
])
def test_sanitizers_report_what_the_fuzz_build_must_catch(call, report, asan_build, tmp_path):
    """The fuzz build's flags and environment (native.py) on a known bug: the process dies with the
    sanitizer's report. Guards the LD_PRELOAD / PYTHONMALLOC / UBSan-abort set-up that every
    harness above relies on to turn a memory error into a finding."""
    source = tmp_path / "buggy.c"
    source.write_text(_BUGGY)
    import sysconfig
    target = tmp_path / ("buggy" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([native.CLANG, *native.COMMON_FLAGS, *native.VARIANT_FLAGS["asan"],
                    f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(target)], check=True)
    code = f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(ROOT / 'tests')!r}]; import buggy; from fuzz import common; {call}"
    done = subprocess.run([sys.executable, "-c", code], env=native.sanitizer_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and report in done.stderr, done.stderr[-3000:]
