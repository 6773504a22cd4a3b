/*
 * fuzz_tensor.c — fuzz target for the tensor object format of the Python package
 * (python/mooncake/tensor.py, docs/tensor-format.md): the 304-byte tensor header a reader
 * validates before it trusts an object (_parse_header), the shard manifest (_parse_manifest),
 * and safetensors files (_read_safetensors). The decoders are Python, so this target embeds
 * CPython, loads tensor.py from the source tree (with `torch` made unimportable: the decoders
 * do not need it, and tensor.py is written to import without it) and calls them.
 *
 * The readers promise never to raise for a malformed object (they return None and log why):
 * any exception escaping them is a crash here, and so is a log message that cannot be
 * formatted. libFuzzer cannot see Python's branches, so a trace function feeds which lines ran
 * (pairs of consecutive lines of a code object) into libFuzzer's extra counters.
 *
 * Input: byte 0 picks the decoder: 0 _parse_header(bytes 9.., total = bytes 1..8 as u64),
 * 1 _parse_header(bytes 1.., their length), 2 _parse_manifest, 3 _read_safetensors of a file
 * holding bytes 1.. (want None), 4 the same with want "w".
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNTERS (1u << 16)

__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t counters[COUNTERS];

/* The interpreter keeps what it allocated until exit, where LeakSanitizer would report it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static PyObject *fuzz_fn;
static char *scratch_file;
static uintptr_t previous;

static const char bootstrap[] =
    "import importlib.util, logging, sys\n"
    "sys.modules['torch'] = None\n"
    "spec = importlib.util.spec_from_file_location('mooncake_tensor', TENSOR_PY)\n"
    "t = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(t)\n"
    "class _Format(logging.Handler):\n"
    "    def emit(self, record):\n"
    "        record.getMessage()\n"
    "log = logging.getLogger('mooncake.tensor')\n"
    "log.addHandler(_Format())\n"
    "log.propagate = False\n"
    "log.setLevel(logging.DEBUG)\n"
    "def fuzz(mode, data, path):\n"
    "    if mode == 0:\n"
    "        t._parse_header(data[8:], int.from_bytes(data[:8], 'little'))\n"
    "    elif mode == 1:\n"
    "        t._parse_header(data, len(data))\n"
    "    elif mode == 2:\n"
    "        t._parse_manifest(data)\n"
    "    else:\n"
    "        with open(path, 'wb') as f:\n"
    "            f.write(data)\n"
    "        t._read_safetensors(path, None if mode == 3 else 'w')\n";

static int trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    (void)arg;
    if (what != PyTrace_LINE)
        return 0;
    PyCodeObject *code = PyFrame_GetCode(frame);
    uintptr_t here = ((uintptr_t)code >> 4) * 0x9E3779B1u + (uintptr_t)PyFrame_GetLineNumber(frame);
    Py_DECREF(code);
    counters[(here ^ (previous >> 1)) % COUNTERS]++;
    previous = here;
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    const char *dir = mc_fuzz_tempdir("tensor");
    size_t n = strlen(dir) + 32;
    scratch_file = malloc(n);
    if (!scratch_file)
        abort();
    snprintf(scratch_file, n, "%s/fuzz.safetensors", dir);
    Py_InitializeEx(0);
    PyObject *globals = PyDict_New();
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    PyObject *path = PyUnicode_FromString(MC_FUZZ_TENSOR_PY);
    PyDict_SetItemString(globals, "TENSOR_PY", path);
    Py_DECREF(path);
    PyObject *r = PyRun_String(bootstrap, Py_file_input, globals, globals);
    if (!r) {
        PyErr_Print();
        abort();
    }
    Py_DECREF(r);
    fuzz_fn = PyDict_GetItemString(globals, "fuzz");
    Py_XINCREF(fuzz_fn);
    if (!fuzz_fn)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    PyEval_SetTrace(trace, NULL);
    PyObject *r = PyObject_CallFunction(fuzz_fn, "iy#s", data[0] % 5, (const char *)data + 1,
                                        (Py_ssize_t)(size - 1), scratch_file);
    PyEval_SetTrace(NULL, NULL);
    previous = 0;
    if (!r) {
        fprintf(stderr, "fuzz_tensor: a reader raised instead of returning None:\n");
        PyErr_Print();
        abort();
    }
    Py_DECREF(r);
    return 0;
}
