/*
 * store_write.c — the write methods of MooncakeDistributedStore: put, upsert, put_parts,
 * upsert_parts, put_batch, upsert_batch (values from Python buffers), put_from, upsert_from,
 * put_from_with_metadata, batch_put_from, batch_upsert_from, batch_put_from_multi_buffers
 * (values in registered memory, by pointer).
 *
 * Each method converts its arguments with the GIL held (TypeError for wrong types), answers
 * what it can without C (invalid key -400, negative size -600, a ReplicateConfig C cannot honour),
 * then makes one C call with the GIL released. Values stay exported (Py_buffer) for the call, so
 * a bytearray cannot be resized under it. Batch calls with per-key results hand C only the keys
 * that passed the checks and merge C's answers back in key order.
 */
#include "mcpy.h"

#include <stdlib.h>
#include <string.h>

typedef int (*put_fn)(mc_store_t *, const char *, const void *, size_t,
                      const mc_replicate_config_t *);
typedef int (*put_batch_fn)(mc_store_t *, const char *const *, const void *const *, const size_t *,
                            size_t, const mc_replicate_config_t *, int *);

/* ---- values from Python buffers ---------------------------------------------------------- */

/* put / upsert (key, value, config=None) -> int */
static PyObject *write_value(McStoreObject *self, PyObject *args, PyObject *kw, put_fn fn,
                             const char *format)
{
    static char *kwlist[] = {"key", "value", "config", NULL};
    PyObject *key_obj, *value, *config = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &key_obj, &value, &config))
        return NULL;
    const char *key = NULL;
    int rc = mcpy_key(key_obj, &key);
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    mcpy_config_t cfg;
    if (mcpy_config_snapshot(config, &cfg) != 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) != 0) {
        mcpy_config_release(&cfg);
        return NULL;
    }
    if (rc == 0)
        rc = cfg.reject;
    if (rc == 0) {
        mc_store_t *s = mcpy_store(self);
        Py_BEGIN_ALLOW_THREADS
        rc = fn(s, key, view.buf, (size_t)view.len, &cfg.c);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    mcpy_config_release(&cfg);
    return PyLong_FromLong(rc);
}

static PyObject *store_put(PyObject *self, PyObject *args, PyObject *kw)
{
    return write_value((McStoreObject *)self, args, kw, mc_store_put, "OO|O:put");
}

static PyObject *store_upsert(PyObject *self, PyObject *args, PyObject *kw)
{
    return write_value((McStoreObject *)self, args, kw, mc_store_upsert, "OO|O:upsert");
}

/* put_parts / upsert_parts (key, *parts, config=None) -> int: the object is the parts
 * concatenated. */
static PyObject *write_parts(PyObject *obj, PyObject *args, PyObject *kw, put_fn fn)
{
    McStoreObject *self = (McStoreObject *)obj;
    PyObject *config = Py_None;
    if (kw && PyDict_GET_SIZE(kw) > 0) {
        config = PyDict_GetItemString(kw, "config");
        if (!config || PyDict_GET_SIZE(kw) != 1) {
            PyErr_SetString(PyExc_TypeError, "accepts only the keyword 'config'");
            return NULL;
        }
    }
    Py_ssize_t nparts = PyTuple_GET_SIZE(args) - 1;
    if (nparts < 0) {
        PyErr_SetString(PyExc_TypeError, "missing required argument 'key'");
        return NULL;
    }
    const char *key = NULL;
    int rc = mcpy_key(PyTuple_GET_ITEM(args, 0), &key);
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    mcpy_config_t cfg;
    if (mcpy_config_snapshot(config, &cfg) != 0)
        return NULL;
    Py_buffer *views = PyMem_Calloc(nparts ? (size_t)nparts : 1, sizeof(Py_buffer));
    if (!views) {
        mcpy_config_release(&cfg);
        return PyErr_NoMemory();
    }
    Py_ssize_t got = 0;
    size_t total = 0;
    for (; got < nparts; got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(args, got + 1), &views[got], PyBUF_SIMPLE) != 0)
            break;
        total += (size_t)views[got].len;
    }
    PyObject *result = NULL;
    if (got == nparts) {
        if (rc == 0)
            rc = cfg.reject;
        if (rc == 0 && nparts == 0)
            rc = MC_ERR_INVALID_PARAMS; /* no parts: almost certainly a caller's mistake */
        char *joined = NULL;
        if (rc == 0 && !(joined = malloc(total ? total : 1)))
            rc = MC_ERR_INTERNAL_ERROR;
        if (rc == 0) {
            mc_store_t *s = mcpy_store(self);
            Py_BEGIN_ALLOW_THREADS
            size_t off = 0;
            for (Py_ssize_t i = 0; i < nparts; i++) {
                memcpy(joined + off, views[i].buf, (size_t)views[i].len);
                off += (size_t)views[i].len;
            }
            rc = fn(s, key, joined, total, &cfg.c);
            Py_END_ALLOW_THREADS
        }
        free(joined);
        result = PyLong_FromLong(rc);
    }
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    mcpy_config_release(&cfg);
    return result;
}

static PyObject *store_put_parts(PyObject *obj, PyObject *args, PyObject *kw)
{
    return write_parts(obj, args, kw, mc_store_put);
}

static PyObject *store_upsert_parts(PyObject *obj, PyObject *args, PyObject *kw)
{
    return write_parts(obj, args, kw, mc_store_upsert);
}

/* C has no plain-memory upsert batch: the keys one after the other, results as a batch's. */
static int upsert_batch(mc_store_t *s, const char *const *keys, const void *const *values,
                        const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                        int *results)
{
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        results[i] =
            keys[i] ? mc_store_upsert(s, keys[i], values[i], sizes[i], config) : MC_ERR_INVALID_KEY;
        if (results[i] != 0 && first == 0)
            first = results[i];
    }
    return first;
}

/* put_batch / upsert_batch (keys, values, config=None) -> int: 0, or the first failing key's
 * code. */
static PyObject *write_batch(PyObject *obj, PyObject *args, PyObject *kw, put_batch_fn fn,
                             const char *format)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"keys", "values", "config", NULL};
    PyObject *keys_obj, *values_obj, *config = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &keys_obj, &values_obj, &config))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    PyObject *values = mcpy_sequence(values_obj, "values");
    mcpy_config_t cfg;
    if (!values || mcpy_config_snapshot(config, &cfg) != 0) {
        Py_XDECREF(values);
        mcpy_keys_free(&keys);
        return NULL;
    }
    size_t n = (size_t)keys.n;
    Py_buffer *views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    const void **bufs = PyMem_Calloc(n ? n : 1, sizeof(void *));
    size_t *sizes = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    int *results = PyMem_Calloc(n ? n : 1, sizeof(int));
    PyObject *result = NULL;
    size_t got = 0;
    if (!views || !bufs || !sizes || !results) {
        PyErr_NoMemory();
        goto out;
    }
    int rc = cfg.reject;
    if (rc == 0 && (PySequence_Fast_GET_SIZE(values) != keys.n ||
                    (cfg.group_count >= 0 && cfg.group_count != keys.n)))
        rc = MC_ERR_INVALID_PARAMS;
    /* Values are exported even when rc is already set: a non-buffer value is a TypeError. */
    for (; got < n && got < (size_t)PySequence_Fast_GET_SIZE(values); got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(values, got), &views[got], PyBUF_SIMPLE) !=
            0)
            goto out;
        bufs[got] = views[got].buf;
        sizes[got] = (size_t)views[got].len;
    }
    if (rc == 0) {
        mc_store_t *s = mcpy_store(self);
        Py_BEGIN_ALLOW_THREADS
        rc = fn(s, keys.ptrs, bufs, sizes, n, &cfg.c, results);
        Py_END_ALLOW_THREADS
    }
    result = PyLong_FromLong(rc);
out:
    for (size_t i = 0; views && i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(bufs);
    PyMem_Free(sizes);
    PyMem_Free(results);
    mcpy_config_release(&cfg);
    Py_DECREF(values);
    mcpy_keys_free(&keys);
    return result;
}

static PyObject *store_put_batch(PyObject *obj, PyObject *args, PyObject *kw)
{
    return write_batch(obj, args, kw, mc_store_put_batch, "OO|O:put_batch");
}

static PyObject *store_upsert_batch(PyObject *obj, PyObject *args, PyObject *kw)
{
    return write_batch(obj, args, kw, upsert_batch, "OO|O:upsert_batch");
}

/* ---- values in registered memory --------------------------------------------------------- */

/* put_from / upsert_from (key, buffer_ptr, size, config=None) -> int */
static PyObject *write_from(McStoreObject *self, PyObject *args, PyObject *kw, put_fn fn,
                            const char *format)
{
    static char *kwlist[] = {"key", "buffer_ptr", "size", "config", NULL};
    PyObject *key_obj, *ptr_obj, *size_obj, *config = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &key_obj, &ptr_obj, &size_obj,
                                     &config))
        return NULL;
    const char *key = NULL;
    uint64_t ptr = 0, size = 0;
    int rc = mcpy_key(key_obj, &key);
    int prc = PyErr_Occurred() ? 0 : mcpy_unsigned(ptr_obj, UINTPTR_MAX, &ptr, "buffer_ptr");
    int src = PyErr_Occurred() ? 0 : mcpy_unsigned(size_obj, SIZE_MAX, &size, "size");
    if (PyErr_Occurred())
        return NULL;
    mcpy_config_t cfg;
    if (mcpy_config_snapshot(config, &cfg) != 0)
        return NULL;
    rc = rc ? rc : prc ? prc : src ? src : cfg.reject;
    if (rc == 0) {
        mc_store_t *s = mcpy_store(self);
        Py_BEGIN_ALLOW_THREADS
        rc = fn(s, key, (const void *)(uintptr_t)ptr, (size_t)size, &cfg.c);
        Py_END_ALLOW_THREADS
    }
    mcpy_config_release(&cfg);
    return PyLong_FromLong(rc);
}

static PyObject *store_put_from(PyObject *self, PyObject *args, PyObject *kw)
{
    return write_from((McStoreObject *)self, args, kw, mc_store_put_from, "OOO|O:put_from");
}

static PyObject *store_upsert_from(PyObject *self, PyObject *args, PyObject *kw)
{
    return write_from((McStoreObject *)self, args, kw, mc_store_upsert_from, "OOO|O:upsert_from");
}

/*
 * Runs a per-key batch write on the keys whose results[i] is still 0, passing C only those,
 * and stores C's answers in results. bufs/sizes are indexed like keys.
 */
static void write_subset(mc_store_t *s, put_batch_fn fn, const mcpy_keys_t *keys,
                         const void *const *bufs, const size_t *sizes,
                         const mc_replicate_config_t *cfg, int *results)
{
    size_t n = (size_t)keys->n, m = 0;
    const char **k = PyMem_RawCalloc(n ? n : 1, sizeof(char *));
    const void **b = PyMem_RawCalloc(n ? n : 1, sizeof(void *));
    size_t *z = PyMem_RawCalloc(n ? n : 1, sizeof(size_t));
    size_t *idx = PyMem_RawCalloc(n ? n : 1, sizeof(size_t));
    int *r = PyMem_RawCalloc(n ? n : 1, sizeof(int));
    if (!k || !b || !z || !idx || !r) {
        for (size_t i = 0; i < n; i++)
            results[i] = results[i] ? results[i] : MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (results[i] != 0)
            continue;
        k[m] = keys->ptrs[i];
        b[m] = bufs[i];
        z[m] = sizes[i];
        idx[m++] = i;
    }
    for (size_t j = 0; j < m; j++)
        r[j] = MCPY_UNSET;
    if (m > 0) {
        int rc = fn(s, k, b, z, m, cfg, r);
        /* A call refused as a whole (no store, closed) leaves r untouched: report its code. */
        for (size_t j = 0; j < m; j++)
            results[idx[j]] = r[j] != MCPY_UNSET ? r[j] : rc ? rc : MC_ERR_INTERNAL_ERROR;
    }
out:
    PyMem_RawFree(k);
    PyMem_RawFree(b);
    PyMem_RawFree(z);
    PyMem_RawFree(idx);
    PyMem_RawFree(r);
}

/* batch_put_from / batch_upsert_from (keys, buffer_ptrs, sizes, config=None) -> list[int] */
static PyObject *write_from_batch(McStoreObject *self, PyObject *args, PyObject *kw,
                                  put_batch_fn fn, const char *format)
{
    static char *kwlist[] = {"keys", "buffer_ptrs", "sizes", "config", NULL};
    PyObject *keys_obj, *ptrs_obj, *sizes_obj, *config = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &keys_obj, &ptrs_obj, &sizes_obj,
                                     &config))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    size_t n = (size_t)keys.n;
    uint64_t *ptrs = NULL, *sizes = NULL;
    int *bad_ptr = NULL, *bad_size = NULL;
    int *results = NULL;
    PyObject *result = NULL;
    mcpy_config_t cfg;
    int have_cfg = 0;
    int lp = mcpy_uints_from(ptrs_obj, keys.n, UINTPTR_MAX, &ptrs, &bad_ptr, "buffer_ptrs");
    if (lp < 0)
        goto out;
    int ls = mcpy_uints_from(sizes_obj, keys.n, SIZE_MAX, &sizes, &bad_size, "sizes");
    if (ls < 0)
        goto out;
    if (mcpy_config_snapshot(config, &cfg) != 0)
        goto out;
    have_cfg = 1;
    results = PyMem_Calloc(n ? n : 1, sizeof(int));
    if (!results) {
        PyErr_NoMemory();
        goto out;
    }
    int all = cfg.reject;
    if (all == 0 && (lp || ls || (cfg.group_count >= 0 && cfg.group_count != keys.n)))
        all = MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        results[i] = all             ? all
                     : !keys.ptrs[i] ? MC_ERR_INVALID_KEY
                     : bad_ptr[i]    ? bad_ptr[i]
                                     : bad_size[i];
    }
    if (!all) {
        /* uint64_t and void* / size_t have the same width on every platform we build for. */
        const void **bufs = PyMem_Calloc(n ? n : 1, sizeof(void *));
        size_t *lens = PyMem_Calloc(n ? n : 1, sizeof(size_t));
        if (!bufs || !lens) {
            PyMem_Free(bufs);
            PyMem_Free(lens);
            PyErr_NoMemory();
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            bufs[i] = (const void *)(uintptr_t)ptrs[i];
            lens[i] = (size_t)sizes[i];
        }
        mc_store_t *s = mcpy_store(self);
        Py_BEGIN_ALLOW_THREADS
        write_subset(s, fn, &keys, bufs, lens, &cfg.c, results);
        Py_END_ALLOW_THREADS
        PyMem_Free(bufs);
        PyMem_Free(lens);
    }
    result = mcpy_list_from_int(results, n);
out:
    PyMem_Free(ptrs);
    PyMem_Free(sizes);
    PyMem_Free(bad_ptr);
    PyMem_Free(bad_size);
    PyMem_Free(results);
    if (have_cfg)
        mcpy_config_release(&cfg);
    mcpy_keys_free(&keys);
    return result;
}

static PyObject *store_batch_put_from(PyObject *self, PyObject *args, PyObject *kw)
{
    return write_from_batch((McStoreObject *)self, args, kw, mc_store_put_from_batch,
                            "OOO|O:batch_put_from");
}

static PyObject *store_batch_upsert_from(PyObject *self, PyObject *args, PyObject *kw)
{
    return write_from_batch((McStoreObject *)self, args, kw, mc_store_upsert_from_batch,
                            "OOO|O:batch_upsert_from");
}

/*
 * One object of batch_put_from_multi_buffers: its buffers, checked against the registered
 * memory. Returns 0 and sets *data and *len (the buffer itself when there is one, else a malloc'd
 * join the caller frees, *owned = 1), or a store code, or -1 with an exception.
 */
static int gather_parts(McStoreObject *self, PyObject *ptr_list, PyObject *size_list,
                        const void **data, size_t *len, int *owned)
{
    *owned = 0;
    mcpy_parts_t parts;
    int rc = mcpy_parts_from(self, ptr_list, size_list, &parts);
    if (rc != 0)
        goto out;
    *len = parts.total;
    if (parts.n == 1) {
        *data = (const void *)(uintptr_t)parts.ptrs[0];
        goto out;
    }
    char *joined = malloc(parts.total ? parts.total : 1);
    if (!joined) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    size_t off = 0;
    for (Py_ssize_t i = 0; i < parts.n; i++) {
        memcpy(joined + off, (const void *)(uintptr_t)parts.ptrs[i], (size_t)parts.sizes[i]);
        off += (size_t)parts.sizes[i];
    }
    Py_END_ALLOW_THREADS
    *data = joined;
    *owned = 1;
out:
    mcpy_parts_free(&parts);
    return rc;
}

/*
 * put_from_with_metadata(key, buffer_ptr, metadata_buffer_ptr, size, metadata_size, config=None)
 *   -> int
 * The object is metadata_size bytes at metadata_buffer_ptr followed by size bytes at buffer_ptr
 * (matches upstream: both in registered memory). Codes as put_from.
 */
static PyObject *store_put_from_with_metadata(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"key",    "buffer_ptr", "metadata_buffer_ptr", "size", "metadata_size",
                             "config", NULL};
    PyObject *key_obj, *ptr, *meta_ptr, *size, *meta_size, *config = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|O:put_from_with_metadata", kwlist, &key_obj,
                                     &ptr, &meta_ptr, &size, &meta_size, &config))
        return NULL;
    const char *key = NULL;
    int rc = mcpy_key(key_obj, &key);
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    PyObject *ptrs = PyList_New(2), *sizes = ptrs ? PyList_New(2) : NULL;
    if (!sizes) {
        Py_XDECREF(ptrs);
        return NULL;
    }
    Py_INCREF(meta_ptr);
    Py_INCREF(ptr);
    Py_INCREF(meta_size);
    Py_INCREF(size);
    PyList_SET_ITEM(ptrs, 0, meta_ptr);
    PyList_SET_ITEM(ptrs, 1, ptr);
    PyList_SET_ITEM(sizes, 0, meta_size);
    PyList_SET_ITEM(sizes, 1, size);
    mcpy_config_t cfg;
    PyObject *result = NULL;
    const void *data = NULL;
    size_t len = 0;
    int owned = 0;
    if (mcpy_config_snapshot(config, &cfg) != 0)
        goto out_lists;
    if (rc == 0)
        rc = cfg.reject;
    if (rc == 0) {
        rc = gather_parts(self, ptrs, sizes, &data, &len, &owned);
        if (rc != 0 && PyErr_Occurred())
            goto out_cfg;
    }
    if (rc == 0) {
        mc_store_t *s = mcpy_store(self);
        Py_BEGIN_ALLOW_THREADS
        rc = mc_store_put(s, key, data, len, &cfg.c);
        Py_END_ALLOW_THREADS
    }
    result = PyLong_FromLong(rc);
out_cfg:
    if (owned)
        free((void *)data);
    mcpy_config_release(&cfg);
out_lists:
    Py_DECREF(ptrs);
    Py_DECREF(sizes);
    return result;
}

/*
 * batch_put_from_multi_buffers(keys, all_buffer_ptrs, all_sizes, config=None) -> list[int]
 * Every buffer must lie in registered memory; the binding checks that before it reads them,
 * then joins an object's buffers (one buffer is used in place) and puts all objects in one batch.
 */
static PyObject *store_batch_put_from_multi_buffers(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"keys", "all_buffer_ptrs", "all_sizes", "config", NULL};
    PyObject *keys_obj, *ptrs_obj, *sizes_obj, *config = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O:batch_put_from_multi_buffers", kwlist,
                                     &keys_obj, &ptrs_obj, &sizes_obj, &config))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    size_t n = (size_t)keys.n;
    PyObject *all_ptrs = mcpy_sequence(ptrs_obj, "all_buffer_ptrs");
    PyObject *all_sizes = all_ptrs ? mcpy_sequence(sizes_obj, "all_sizes") : NULL;
    const void **data = PyMem_Calloc(n ? n : 1, sizeof(void *));
    size_t *lens = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    int *owned = PyMem_Calloc(n ? n : 1, sizeof(int));
    int *results = PyMem_Calloc(n ? n : 1, sizeof(int));
    PyObject *result = NULL;
    mcpy_config_t cfg;
    int have_cfg = 0;
    if (!all_ptrs || !all_sizes)
        goto out;
    if (!data || !lens || !owned || !results) {
        PyErr_NoMemory();
        goto out;
    }
    if (mcpy_config_snapshot(config, &cfg) != 0)
        goto out;
    have_cfg = 1;
    int all = cfg.reject;
    if (all == 0 && (PySequence_Fast_GET_SIZE(all_ptrs) != keys.n ||
                     PySequence_Fast_GET_SIZE(all_sizes) != keys.n ||
                     (cfg.group_count >= 0 && cfg.group_count != keys.n)))
        all = MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        if (all || !keys.ptrs[i]) {
            results[i] = all ? all : MC_ERR_INVALID_KEY;
            continue;
        }
        int rc =
            gather_parts(self, PySequence_Fast_GET_ITEM(all_ptrs, i),
                         PySequence_Fast_GET_ITEM(all_sizes, i), &data[i], &lens[i], &owned[i]);
        if (rc != 0 && PyErr_Occurred())
            goto out;
        results[i] = rc;
    }
    if (!all) {
        mc_store_t *s = mcpy_store(self);
        Py_BEGIN_ALLOW_THREADS
        write_subset(s, mc_store_put_batch, &keys, data, lens, &cfg.c, results);
        Py_END_ALLOW_THREADS
    }
    result = mcpy_list_from_int(results, n);
out:
    for (size_t i = 0; owned && data && i < n; i++) {
        if (owned[i])
            free((void *)data[i]);
    }
    PyMem_Free(data);
    PyMem_Free(lens);
    PyMem_Free(owned);
    PyMem_Free(results);
    if (have_cfg)
        mcpy_config_release(&cfg);
    Py_XDECREF(all_ptrs);
    Py_XDECREF(all_sizes);
    mcpy_keys_free(&keys);
    return result;
}

/* ---- method table ------------------------------------------------------------------------ */

#define CONFIG_DOC                                                                                 \
    "config (ReplicateConfig or None): placement; prefer_alloc_in_same_node=True gives -600,\n"    \
    "nof/dfs replicas give -1012 (this build has memory replicas only).\n"

PyMethodDef mcpy_store_write_methods[] = {
    {"put", MCPY_KW(store_put), METH_VARARGS | METH_KEYWORDS,
     "put(key, value, config=None) -> int\n\n"
     "Stores a copy of `value` (any contiguous buffer: bytes, bytearray, memoryview, numpy) under\n"
     "`key` (str or bytes). Objects are immutable: 0 also when the key already exists (the old\n"
     "value is kept; use upsert to replace).\n" CONFIG_DOC
     "Returns 0 or a negative code: -400 invalid key, -200 no space even after eviction,\n"
     "-600 invalid arguments or store not set up, -900 master unreachable.\n"
     "TypeError: key not str/bytes, value not a buffer, config not a ReplicateConfig."},
    {"upsert", MCPY_KW(store_upsert), METH_VARARGS | METH_KEYWORDS,
     "upsert(key, value, config=None) -> int\n\n"
     "Like put, but an existing object is replaced (readers see the old or the new value,\n"
     "never a mix). Returns 0 or a negative code as put."},
    {"put_parts", MCPY_KW(store_put_parts), METH_VARARGS | METH_KEYWORDS,
     "put_parts(key, *parts, config=None) -> int\n\n"
     "Stores the concatenation of `parts` (buffers, in order) as one object. No parts: -600.\n"
     "Returns 0 or a negative code as put."},
    {"upsert_parts", MCPY_KW(store_upsert_parts), METH_VARARGS | METH_KEYWORDS,
     "upsert_parts(key, *parts, config=None) -> int\n\n"
     "As put_parts, replacing an existing object (matches upstream upsert_parts)."},
    {"upsert_batch", MCPY_KW(store_upsert_batch), METH_VARARGS | METH_KEYWORDS,
     "upsert_batch(keys, values, config=None) -> int\n\n"
     "As put_batch, replacing existing objects (matches upstream upsert_batch): 0 when every\n"
     "key succeeded, else the first failing key's code. The keys are upserted one after the\n"
     "other; a failure does not stop the others."},
    {"put_from_with_metadata", MCPY_KW(store_put_from_with_metadata), METH_VARARGS | METH_KEYWORDS,
     "put_from_with_metadata(key, buffer_ptr, metadata_buffer_ptr, size, metadata_size,\n"
     "                       config=None) -> int\n\n"
     "Stores metadata_size bytes at metadata_buffer_ptr followed by size bytes at buffer_ptr\n"
     "(both in registered memory, else -600) as one object (matches upstream). Returns 0 or a\n"
     "negative code as put_from."},
    {"put_batch", MCPY_KW(store_put_batch), METH_VARARGS | METH_KEYWORDS,
     "put_batch(keys, values, config=None) -> int\n\n"
     "Stores values[i] under keys[i] in one batch. Returns a single code: 0 when every key\n"
     "succeeded, else the first failing key's code (lists of different lengths, or group_ids\n"
     "not one per key: -600)."},
    {"put_from", MCPY_KW(store_put_from), METH_VARARGS | METH_KEYWORDS,
     "put_from(key, buffer_ptr, size, config=None) -> int\n\n"
     "Zero-copy put of `size` bytes at address `buffer_ptr` (int), which must lie inside memory\n"
     "registered with register_buffer() (else -600; nothing is read). Negative pointer or\n"
     "size: -600. Returns 0 or a negative code as put."},
    {"upsert_from", MCPY_KW(store_upsert_from), METH_VARARGS | METH_KEYWORDS,
     "upsert_from(key, buffer_ptr, size, config=None) -> int\n\n"
     "Zero-copy upsert from registered memory; as put_from, replacing an existing object."},
    {"batch_put_from", MCPY_KW(store_batch_put_from), METH_VARARGS | METH_KEYWORDS,
     "batch_put_from(keys, buffer_ptrs, sizes, config=None) -> list[int]\n\n"
     "Zero-copy batch put: object i is sizes[i] bytes at buffer_ptrs[i] (registered memory).\n"
     "Returns one code per key (0 or negative). An unregistered buffer fails the whole batch\n"
     "with -600 per key; lists of different lengths: -600 per key."},
    {"batch_upsert_from", MCPY_KW(store_batch_upsert_from), METH_VARARGS | METH_KEYWORDS,
     "batch_upsert_from(keys, buffer_ptrs, sizes, config=None) -> list[int]\n\n"
     "As batch_put_from, replacing existing objects."},
    {"batch_put_from_multi_buffers", MCPY_KW(store_batch_put_from_multi_buffers),
     METH_VARARGS | METH_KEYWORDS,
     "batch_put_from_multi_buffers(keys, all_buffer_ptrs, all_sizes, config=None) -> list[int]\n\n"
     "Object i is the concatenation of the buffers all_buffer_ptrs[i][j] of all_sizes[i][j]\n"
     "bytes, each inside registered memory (else -600 for that key). Returns one code per key."},
    {NULL},
};
