"""Every fuzz harness (tests/fuzz/) run for a bounded time on its committed corpus, under
AddressSanitizer + UndefinedBehaviorSanitizer on the clang build of the C decoders, and the
machinery itself shown to report what it is there to report.

Needs clang-14 with libclang-rt-14-dev (scripts/system-packages.sh) and atheris (the test extra):
without them these tests FAIL, they never skip. Long runs: tools/fuzz.sh; docs/fuzzing.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# recorded: libFuzzer runs on seeds cut from the real brokers' files (about 75 s: not the unit lane)
pytestmark = pytest.mark.recorded

from fuzz import native, targets

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tests" / "fuzz" / "run.py"
#: seconds of fuzzing per harness in the suite (8 harnesses, each also ~5-15 s of start-up under ASan:
#: about two minutes in all at load 13 on 2 cores)
SECONDS = int(os.environ.get("KLA_FUZZ_TEST_SECONDS", "6"))


@pytest.fixture(scope="module")
def asan_build():
    try:
        native.build("asan")
        native.sanitizer_runtime()
    except native.NativeBuildError as exc:
        pytest.fail(f"the fuzz build cannot be made: {exc}", pytrace=False)
    return native.BUILD / "asan"


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}")
    return subprocess.run([sys.executable, str(RUN), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("harness", sorted(targets.HARNESSES))
def test_harness_runs_clean_under_sanitizers(harness, asan_build, tmp_path):
    corpus = ROOT / "tests" / "fuzz" / "corpus" / harness
    assert len(list(corpus.iterdir())) > 0, f"no committed seeds for {harness}"
    grown = tmp_path / "grown"
    grown.mkdir()
    done = _run([harness, str(grown), str(corpus), f"-max_total_time={SECONDS}", "-timeout=20",
                 "-rss_limit_mb=3072", "-malloc_limit_mb=1024", f"-artifact_prefix={tmp_path}/",
                 "-print_final_stats=1"], timeout=SECONDS + 240)
    log = done.stdout + done.stderr
    runs = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    artifacts = [p.name for p in tmp_path.iterdir() if p.is_file()]
    assert done.returncode == 0 and not artifacts, (
        f"{harness}: a finding (rc {done.returncode}, artifacts {artifacts}); the input is in the log:\n{log[-6000:]}")
    assert runs and int(runs[-1]) > len(list(corpus.iterdir())), f"{harness}: did not fuzz:\n{log[-3000:]}"
    assert "asan_with_fuzzer" in log or "INFO: Using preloaded libfuzzer" in log, log[-3000:]


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
