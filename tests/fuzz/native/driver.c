/* A native libFuzzer harness for the C decoders (issue 24): the four extensions
 * (_cwalk, _coffsets, _cmessage, _ckeys) are linked into this program, built with
 * -fsanitize=fuzzer,address,undefined, and the Python interpreter is embedded once
 * (LLVMFuzzerInitialize). Each input goes to one function of tests/fuzz/native_targets.py
 * (named by $KLA_NATIVE_TARGET), plain uninstrumented Python that calls the extension
 * functions on the input: no atheris tracing of Python lines, no C-vs-Python comparison (the
 * atheris harnesses keep those), only the C decoders' coverage guides the search.
 *
 * The input reaches Python as a read-only memoryview of libFuzzer's own copy, which is
 * malloc'd to its exact size: a C read one byte past it is an ASan report. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_SETUP
#error "build with -DFUZZ_SETUP=\"python code\": the checkout and tests/ first on sys.path, the building Python's site-packages"
#endif

PyMODINIT_FUNC PyInit__cwalk(void);
PyMODINIT_FUNC PyInit__coffsets(void);
PyMODINIT_FUNC PyInit__cmessage(void);
PyMODINIT_FUNC PyInit__ckeys(void);

static PyObject *one_input;

/* CPython keeps its objects at exit (not leaks); a sanitizer report must stop the run. */
const char *__asan_default_options(void) {
    return "detect_leaks=0:allocator_may_return_null=1:detect_stack_use_after_return=1";
}
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

static void die(const char *what) {
    fprintf(stderr, "native fuzz harness: %s\n", what);
    if (PyErr_Occurred()) PyErr_Print();
    abort();
}

static void add_module(PyObject *modules, const char *name, PyObject *(*init)(void)) {
    PyObject *m = init();
    if (!m || PyDict_SetItemString(modules, name, m) < 0) die(name);
    Py_DECREF(m);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    PyPreConfig pre;
    PyPreConfig_InitPythonConfig(&pre);
    pre.allocator = PYMEM_ALLOCATOR_MALLOC;   /* every object from malloc: ASan red zones around each */
    if (PyStatus_Exception(Py_PreInitialize(&pre))) die("Py_PreInitialize");
    Py_InitializeEx(0);
    PyObject *modules = PyImport_GetModuleDict();
    /* under their real names, before any auditor module imports them */
    add_module(modules, "auditor.formats._cwalk", PyInit__cwalk);
    add_module(modules, "auditor.formats._coffsets", PyInit__coffsets);
    add_module(modules, "auditor.formats._cmessage", PyInit__cmessage);
    add_module(modules, "auditor.keys._ckeys", PyInit__ckeys);
    /* the checkout first, then the building interpreter's site-packages (cramjam, zstandard ...) */
    if (PyRun_SimpleString(FUZZ_SETUP) != 0) die("sys.path");
    const char *target = getenv("KLA_NATIVE_TARGET");
    if (!target) die("set KLA_NATIVE_TARGET to a name of tests/fuzz/native_targets.py TARGETS");
    const char *colon = strchr(target, ':');
    if (colon) {   /* "module:function": any function of one argument (the driver's own test) */
        PyObject *name = PyUnicode_FromStringAndSize(target, colon - target);
        PyObject *mod = name ? PyImport_Import(name) : NULL;
        Py_XDECREF(name);
        one_input = mod ? PyObject_GetAttrString(mod, colon + 1) : NULL;
        if (!one_input) die("$KLA_NATIVE_TARGET module:function not found");
        Py_DECREF(one_input);
    } else {
        PyObject *targets = PyImport_ImportModule("fuzz.native_targets");
        if (!targets) die("import fuzz.native_targets");
        PyObject *table = PyObject_GetAttrString(targets, "TARGETS");
        one_input = table ? PyDict_GetItemString(table, target) : NULL;
        if (!one_input) die("fuzz.native_targets.TARGETS has no such name as $KLA_NATIVE_TARGET");
    }
    Py_INCREF(one_input);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    PyObject *view = PyMemoryView_FromMemory((char *)data, (Py_ssize_t)size, PyBUF_READ);
    if (!view) die("memoryview");
    PyObject *r = PyObject_CallOneArg(one_input, view);
    if (!r) die("an exception escaped the target (a finding: its traceback is above)");
    Py_DECREF(r);
    /* a C function that kept a pointer into the input past the call would read freed memory:
     * release refuses while an export is still held */
    PyObject *released = PyObject_CallMethod(view, "release", NULL);
    if (!released) die("the input's memoryview is still exported after the call");
    Py_DECREF(released);
    Py_DECREF(view);
    return 0;
}
