/*
 * args.c — Python arguments to C values for the store methods.
 *
 * The split between an exception and a store code follows upstream's binding: an argument of
 * the wrong Python type raises TypeError (pybind11 would find no matching overload), while a
 * value of the right type that the store cannot use — a key with a NUL, a negative size, a
 * pointer outside registered memory — is answered with a negative store code, per key where the
 * method returns per-key results.
 */
#include "mcpy.h"

#include <string.h>

int mcpy_key(PyObject *obj, const char **out)
{
    Py_ssize_t len;
    const char *p;
    if (PyUnicode_Check(obj)) {
        p = PyUnicode_AsUTF8AndSize(obj, &len);
        if (!p) { /* lone surrogates: no UTF-8 form, so no valid key */
            PyErr_Clear();
            return MC_ERR_INVALID_KEY;
        }
    } else if (PyBytes_Check(obj)) {
        p = PyBytes_AS_STRING(obj);
        len = PyBytes_GET_SIZE(obj);
    } else {
        PyErr_Format(PyExc_TypeError, "key must be str or bytes, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (strlen(p) != (size_t)len)
        return MC_ERR_INVALID_KEY;
    *out = p;
    return 0;
}

int mcpy_unsigned(PyObject *obj, uint64_t max, uint64_t *out, const char *what)
{
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *index = PyNumber_Index(obj);
    if (!index)
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    uint64_t u = 0;
    int rc = 0;
    if (overflow < 0 || (overflow == 0 && v < 0)) {
        rc = MC_ERR_INVALID_PARAMS;
    } else if (overflow > 0) {
        u = PyLong_AsUnsignedLongLong(index);
        if (PyErr_Occurred()) { /* beyond 2^64-1 */
            PyErr_Clear();
            rc = MC_ERR_INVALID_PARAMS;
        }
    } else {
        u = (uint64_t)v;
    }
    Py_DECREF(index);
    if (rc == 0 && u > max)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc == 0)
        *out = u;
    return rc;
}

PyObject *mcpy_sequence(PyObject *obj, const char *what)
{
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj) ||
        !PySequence_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list, not %.100s", what, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PySequence_Fast(obj, what);
}

void mcpy_keys_free(mcpy_keys_t *k)
{
    for (Py_ssize_t i = 0; k->objs && i < k->n; i++)
        Py_XDECREF(k->objs[i]);
    PyMem_Free(k->objs);
    PyMem_Free(k->ptrs);
    k->objs = NULL;
    k->ptrs = NULL;
    k->n = 0;
}

int mcpy_keys_from(PyObject *seq, mcpy_keys_t *out, const char *what)
{
    out->n = 0;
    out->objs = NULL;
    out->ptrs = NULL;
    PyObject *fast = mcpy_sequence(seq, what);
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    out->objs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(PyObject *));
    out->ptrs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(char *));
    if (!out->objs || !out->ptrs) {
        Py_DECREF(fast);
        mcpy_keys_free(out);
        PyErr_NoMemory();
        return -1;
    }
    out->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        Py_INCREF(item);
        out->objs[i] = item;
        int rc = mcpy_key(item, &out->ptrs[i]);
        if (rc != 0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            mcpy_keys_free(out);
            return -1;
        }
        if (rc != 0)
            out->ptrs[i] = NULL; /* C answers MC_ERR_INVALID_KEY for it */
    }
    Py_DECREF(fast);
    return 0;
}

int mcpy_uints_from(PyObject *seq, Py_ssize_t n, uint64_t max, uint64_t **values, int **bad,
                    const char *what)
{
    *values = NULL;
    *bad = NULL;
    PyObject *fast = mcpy_sequence(seq, what);
    if (!fast)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        Py_DECREF(fast);
        return 1;
    }
    *values = PyMem_Calloc(n ? (size_t)n : 1, sizeof(uint64_t));
    *bad = PyMem_Calloc(n ? (size_t)n : 1, sizeof(int));
    if (!*values || !*bad) {
        Py_DECREF(fast);
        PyMem_Free(*values);
        PyMem_Free(*bad);
        *values = NULL;
        *bad = NULL;
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc = mcpy_unsigned(PySequence_Fast_GET_ITEM(fast, i), max, &(*values)[i], what);
        if (rc != 0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            PyMem_Free(*values);
            PyMem_Free(*bad);
            *values = NULL;
            *bad = NULL;
            return -1;
        }
        (*bad)[i] = rc;
    }
    Py_DECREF(fast);
    return 0;
}

PyObject *mcpy_list_from_int(const int *results, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromLong(results[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

PyObject *mcpy_list_from_int64(const int64_t *results, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(results[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

void mcpy_parts_free(mcpy_parts_t *p)
{
    PyMem_Free(p->ptrs);
    PyMem_Free(p->sizes);
    p->ptrs = NULL;
    p->sizes = NULL;
    p->n = 0;
    p->total = 0;
}

/* A buffer check of the argument parsers (the store's registered ranges, mcpy.h). */
int mcpy_store_is_registered(const McStoreObject *self, uintptr_t addr, size_t len)
{
    for (size_t i = 0; i < self->reg_count; i++) {
        const mcpy_range_t *r = &self->regs[i];
        if (addr >= r->addr && len <= r->length && addr - r->addr <= r->length - len)
            return 1;
    }
    return 0;
}

int mcpy_parts_from(const McStoreObject *self, PyObject *ptr_list, PyObject *size_list,
                    mcpy_parts_t *out)
{
    memset(out, 0, sizeof(*out));
    PyObject *pl = mcpy_sequence(ptr_list, "buffer pointers");
    if (!pl)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(pl);
    int *bad_ptr = NULL, *bad_size = NULL;
    int rc = mcpy_uints_from(pl, n, UINTPTR_MAX, &out->ptrs, &bad_ptr, "buffer pointers");
    Py_DECREF(pl);
    if (rc == 0)
        rc = mcpy_uints_from(size_list, n, SIZE_MAX, &out->sizes, &bad_size, "buffer sizes");
    if (rc < 0) {
        mcpy_parts_free(out);
        PyMem_Free(bad_ptr);
        return -1;
    }
    if (rc == 1)
        rc = MC_ERR_INVALID_PARAMS; /* lengths differ */
    out->n = n;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        if (bad_ptr[i] || bad_size[i] ||
            !mcpy_store_is_registered(self, (uintptr_t)out->ptrs[i], (size_t)out->sizes[i]))
            rc = MC_ERR_INVALID_PARAMS;
        out->total += (size_t)out->sizes[i];
        if (out->total > MC_MAX_VALUE_SIZE)
            rc = MC_ERR_INVALID_PARAMS;
    }
    PyMem_Free(bad_ptr);
    PyMem_Free(bad_size);
    return rc;
}
