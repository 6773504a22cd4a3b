/*
 * store_read.c — the read methods of MooncakeDistributedStore: get, get_batch (into new bytes),
 * get_buffer, batch_get_buffer (into new BufferHandles), get_into, batch_get_into,
 * batch_get_into_multi_buffers, get_into_ranges (into registered memory, by pointer).
 *
 * Reading into new objects needs a capacity before the size is known. C's get answers
 * BUFFER_OVERFLOW (-10) when the object is larger than the buffer, so a read first tries the
 * size of the last object this store read (`get_hint`: one master round trip when sizes repeat,
 * as they do for KV-cache blocks), and only for the objects that did not fit asks get_size and
 * reads again. The new bytes objects (from bytes_pool.c for values of 1 MiB and more: reused
 * objects nobody else references) are written by C with the GIL released; that is safe because
 * nobody else holds a reference to them yet. The guess is a speculative take from the pool: it
 * never evicts the pool's idle objects of the size actually read. A 0-capacity bytes object may be
 * the shared empty singleton: C never writes to a 0-byte destination.
 */
#include "mcpy.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

#define MCPY_GET_HINT_MAX (4ull << 20) /* bytes: larger objects always ask get_size first */
#define MCPY_GET_RETRIES 3             /* size changed between get_size and get (upserts) */
#define MCPY_UNSET64 INT64_MIN

typedef int (*get_batch_fn)(mc_store_t *, const char *const *, void *const *, const size_t *,
                            size_t, int64_t *);

/*
 * Runs a batch read on keys[idx[0..m)], with bufs/caps indexed like keys, storing each answer
 * in results[idx[j]]. Call with the GIL released.
 */
static void get_subset(mc_store_t *s, get_batch_fn fn, const char *const *keys, void *const *bufs,
                       const size_t *caps, const size_t *idx, size_t m, int64_t *results)
{
    if (m == 0)
        return;
    const char **k = PyMem_RawCalloc(m, sizeof(char *));
    void **b = PyMem_RawCalloc(m, sizeof(void *));
    size_t *c = PyMem_RawCalloc(m, sizeof(size_t));
    int64_t *r = PyMem_RawCalloc(m, sizeof(int64_t));
    if (!k || !b || !c || !r) {
        for (size_t j = 0; j < m; j++)
            results[idx[j]] = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t j = 0; j < m; j++) {
        k[j] = keys[idx[j]];
        b[j] = bufs[idx[j]];
        c[j] = caps[idx[j]];
        r[j] = MCPY_UNSET64;
    }
    int rc = fn(s, k, b, c, m, r);
    /* A call refused as a whole (no store, closed) leaves r untouched: report its code. */
    for (size_t j = 0; j < m; j++)
        results[idx[j]] = r[j] != MCPY_UNSET64 ? r[j] : rc ? rc : MC_ERR_INTERNAL_ERROR;
out:
    PyMem_RawFree(k);
    PyMem_RawFree(b);
    PyMem_RawFree(c);
    PyMem_RawFree(r);
}

/* ---- reading into new objects ------------------------------------------------------------ */

/* n reads into new bytes (as_handle 0) or BufferHandles (1). Arrays have n entries. */
typedef struct owned_read {
    size_t n;
    int as_handle;
    const char *const *keys; /* NULL: invalid key */
    PyObject **objs;         /* new references, NULL where nothing was read */
    char **bufs;
    size_t *caps;
    unsigned char *pooled; /* bytes objects: 1 when taken from the pool (bytes_pool.c) */
    unsigned char *fresh;  /* bytes objects: 1 when new memory (advised huge pages) */
    int64_t *results;      /* bytes read, or a negative code */
    size_t *idx;           /* scratch */
} owned_read_t;

/* A new destination of `cap` bytes for read i (`speculative`: cap is a guess, get_hint);
 * -1 with MemoryError. */
static int owned_alloc(owned_read_t *r, size_t i, size_t cap, int speculative)
{
    Py_CLEAR(r->objs[i]);
    if (r->as_handle) {
        McBufferHandleObject *h = mcpy_buffer_handle_new(cap);
        if (!h)
            return -1;
        r->objs[i] = (PyObject *)h;
        r->bufs[i] = h->data;
    } else {
        int pooled, fresh;
        PyObject *b = mcpy_bytes_take(cap, speculative, &pooled, &fresh);
        if (!b)
            return -1;
        r->objs[i] = b;
        r->bufs[i] = PyBytes_AS_STRING(b);
        r->pooled[i] = (unsigned char)pooled;
        r->fresh[i] = (unsigned char)fresh;
    }
    r->caps[i] = cap;
    return 0;
}

/* Trims read i's object to the bytes read; -1 with an exception. */
static int owned_trim(owned_read_t *r, size_t i)
{
    size_t len = (size_t)r->results[i];
    if (len == r->caps[i])
        return 0;
    if (r->as_handle) {
        ((McBufferHandleObject *)r->objs[i])->size = len;
        return 0;
    }
    return mcpy_bytes_finish(&r->objs[i], len, r->pooled[i]);
}

static void owned_free(owned_read_t *r)
{
    for (size_t i = 0; r->objs && i < r->n; i++)
        Py_XDECREF(r->objs[i]);
    PyMem_Free(r->objs);
    PyMem_Free(r->bufs);
    PyMem_Free(r->caps);
    PyMem_Free(r->pooled);
    PyMem_Free(r->fresh);
    PyMem_Free(r->results);
    PyMem_Free(r->idx);
}

static int owned_init(owned_read_t *r, const char *const *keys, size_t n, int as_handle)
{
    memset(r, 0, sizeof(*r));
    r->n = n;
    r->as_handle = as_handle;
    r->keys = keys;
    r->objs = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    r->bufs = PyMem_Calloc(n ? n : 1, sizeof(char *));
    r->caps = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    r->pooled = PyMem_Calloc(n ? n : 1, 1);
    r->fresh = PyMem_Calloc(n ? n : 1, 1);
    r->results = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    r->idx = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    if (!r->objs || !r->bufs || !r->caps || !r->pooled || !r->fresh || !r->results || !r->idx) {
        owned_free(r);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/*
 * Reads every key into a new object. Afterwards results[i] >= 0 and objs[i] holds exactly
 * those bytes, or results[i] < 0. Returns 0, or -1 with an exception (MemoryError).
 */
static int owned_run(McStoreObject *self, owned_read_t *r)
{
    mc_store_t *s = mcpy_store(self);
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++) {
        r->results[i] = r->keys[i] ? 0 : MC_ERR_INVALID_KEY;
        if (!r->keys[i])
            continue;
        if (owned_alloc(r, i, self->get_hint, 1) != 0)
            return -1;
        r->idx[m++] = i;
    }
    for (int attempt = 0; m > 0; attempt++) {
        Py_BEGIN_ALLOW_THREADS
        for (size_t j = 0; j < m; j++) {
            if (r->fresh[r->idx[j]])
                mcpy_bytes_advise(r->bufs[r->idx[j]], r->caps[r->idx[j]]);
        }
        get_subset(s, mc_store_get_batch, r->keys, (void *const *)r->bufs, r->caps, r->idx, m,
                   r->results);
        Py_END_ALLOW_THREADS
        /* Objects larger than their destination: ask their size, then read them again. */
        size_t retry = 0;
        for (size_t j = 0; j < m; j++) {
            if (r->results[r->idx[j]] == MC_ERR_BUFFER_OVERFLOW && attempt < MCPY_GET_RETRIES)
                r->idx[retry++] = r->idx[j];
        }
        m = retry;
        if (m == 0)
            break;
        Py_BEGIN_ALLOW_THREADS
        for (size_t j = 0; j < m; j++)
            r->results[r->idx[j]] = mc_store_get_size(s, r->keys[r->idx[j]]);
        Py_END_ALLOW_THREADS
        retry = 0;
        for (size_t j = 0; j < m; j++) {
            size_t i = r->idx[j];
            if (r->results[i] < 0)
                continue;
            if (owned_alloc(r, i, (size_t)r->results[i], 0) != 0)
                return -1;
            r->idx[retry++] = i;
        }
        m = retry;
    }
    for (size_t i = 0; i < r->n; i++) {
        if (r->results[i] < 0) {
            Py_CLEAR(r->objs[i]);
            continue;
        }
        if (owned_trim(r, i) != 0)
            return -1;
        if ((uint64_t)r->results[i] <= MCPY_GET_HINT_MAX && r->results[i] > 0)
            self->get_hint = (size_t)r->results[i];
    }
    return 0;
}

/* The object read for key i, or `fallback` (b"" / None); a new reference. */
static PyObject *owned_take(owned_read_t *r, size_t i, PyObject *fallback)
{
    PyObject *o = r->objs[i]; /* the reference moves out of objs[] */
    r->objs[i] = NULL;
    if (!o) {
        o = fallback;
        Py_INCREF(o);
    }
    return o;
}

/* get / get_buffer (key) */
static PyObject *read_one(McStoreObject *self, PyObject *args, PyObject *kw, int as_handle,
                          const char *format)
{
    static char *kwlist[] = {"key", NULL};
    PyObject *key_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &key_obj))
        return NULL;
    const char *key = NULL;
    int rc = mcpy_key(key_obj, &key);
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    PyObject *fallback = as_handle ? Py_None : PyBytes_FromStringAndSize("", 0);
    if (!fallback)
        return NULL;
    if (as_handle)
        Py_INCREF(fallback);
    owned_read_t r;
    const char *keys[1] = {rc == 0 ? key : NULL};
    PyObject *result = NULL;
    if (owned_init(&r, keys, 1, as_handle) == 0) {
        if (owned_run(self, &r) == 0)
            result = owned_take(&r, 0, fallback);
        owned_free(&r);
    }
    Py_DECREF(fallback);
    return result;
}

static PyObject *store_get(PyObject *self, PyObject *args, PyObject *kw)
{
    return read_one((McStoreObject *)self, args, kw, 0, "O:get");
}

static PyObject *store_get_buffer(PyObject *self, PyObject *args, PyObject *kw)
{
    return read_one((McStoreObject *)self, args, kw, 1, "O:get_buffer");
}

/* get_batch / batch_get_buffer (keys) -> list */
static PyObject *read_many(McStoreObject *self, PyObject *args, PyObject *kw, int as_handle,
                           const char *format)
{
    static char *kwlist[] = {"keys", NULL};
    PyObject *keys_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &keys_obj))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    PyObject *fallback = as_handle ? Py_None : PyBytes_FromStringAndSize("", 0);
    PyObject *list = NULL;
    owned_read_t r;
    if (!fallback)
        goto out;
    if (as_handle)
        Py_INCREF(fallback);
    if (owned_init(&r, keys.ptrs, (size_t)keys.n, as_handle) != 0)
        goto out;
    if (owned_run(self, &r) == 0)
        list = PyList_New(keys.n);
    for (Py_ssize_t i = 0; list && i < keys.n; i++)
        PyList_SET_ITEM(list, i, owned_take(&r, (size_t)i, fallback));
    owned_free(&r);
out:
    Py_XDECREF(fallback);
    mcpy_keys_free(&keys);
    return list;
}

static PyObject *store_get_batch(PyObject *self, PyObject *args, PyObject *kw)
{
    return read_many((McStoreObject *)self, args, kw, 0, "O:get_batch");
}

static PyObject *store_batch_get_buffer(PyObject *self, PyObject *args, PyObject *kw)
{
    return read_many((McStoreObject *)self, args, kw, 1, "O:batch_get_buffer");
}

/* ---- reading into registered memory ------------------------------------------------------ */

static PyObject *store_get_into(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"key", "buffer_ptr", "size", NULL};
    PyObject *key_obj, *ptr_obj, *size_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:get_into", kwlist, &key_obj, &ptr_obj,
                                     &size_obj))
        return NULL;
    const char *key = NULL;
    uint64_t ptr = 0, size = 0;
    int rc = mcpy_key(key_obj, &key);
    int prc = PyErr_Occurred() ? 0 : mcpy_unsigned(ptr_obj, UINTPTR_MAX, &ptr, "buffer_ptr");
    int src = PyErr_Occurred() ? 0 : mcpy_unsigned(size_obj, SIZE_MAX, &size, "size");
    if (PyErr_Occurred())
        return NULL;
    int64_t result = rc ? rc : prc ? prc : src;
    if (result == 0) {
        mc_store_t *s = mcpy_store(self);
        Py_BEGIN_ALLOW_THREADS
        result = mc_store_get_into(s, key, (void *)(uintptr_t)ptr, (size_t)size);
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLongLong(result);
}

static PyObject *store_batch_get_into(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"keys", "buffer_ptrs", "sizes", NULL};
    PyObject *keys_obj, *ptrs_obj, *sizes_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:batch_get_into", kwlist, &keys_obj, &ptrs_obj,
                                     &sizes_obj))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    size_t n = (size_t)keys.n;
    uint64_t *ptrs = NULL, *sizes = NULL;
    int *bad_ptr = NULL, *bad_size = NULL;
    int64_t *results = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    void **bufs = PyMem_Calloc(n ? n : 1, sizeof(void *));
    size_t *caps = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    size_t *idx = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    PyObject *list = NULL;
    if (!results || !bufs || !caps || !idx) {
        PyErr_NoMemory();
        goto out;
    }
    int lp = mcpy_uints_from(ptrs_obj, keys.n, UINTPTR_MAX, &ptrs, &bad_ptr, "buffer_ptrs");
    if (lp < 0)
        goto out;
    int ls = mcpy_uints_from(sizes_obj, keys.n, SIZE_MAX, &sizes, &bad_size, "sizes");
    if (ls < 0)
        goto out;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        results[i] = (lp || ls)      ? MC_ERR_INVALID_PARAMS
                     : !keys.ptrs[i] ? MC_ERR_INVALID_KEY
                     : bad_ptr[i]    ? bad_ptr[i]
                                     : bad_size[i];
        if (results[i] != 0)
            continue;
        bufs[i] = (void *)(uintptr_t)ptrs[i];
        caps[i] = (size_t)sizes[i];
        idx[m++] = i;
    }
    mc_store_t *s = mcpy_store(self);
    Py_BEGIN_ALLOW_THREADS
    get_subset(s, mc_store_get_into_batch, keys.ptrs, bufs, caps, idx, m, results);
    Py_END_ALLOW_THREADS
    list = mcpy_list_from_int64(results, n);
out:
    PyMem_Free(ptrs);
    PyMem_Free(sizes);
    PyMem_Free(bad_ptr);
    PyMem_Free(bad_size);
    PyMem_Free(results);
    PyMem_Free(bufs);
    PyMem_Free(caps);
    PyMem_Free(idx);
    mcpy_keys_free(&keys);
    return list;
}

/* Copies `len` bytes of src over the object's buffers in order. Call with the GIL released. */
static void scatter(const mcpy_parts_t *parts, const char *src, size_t len)
{
    for (Py_ssize_t i = 0; i < parts->n && len > 0; i++) {
        size_t chunk = parts->sizes[i] < len ? (size_t)parts->sizes[i] : len;
        memcpy((void *)(uintptr_t)parts->ptrs[i], src, chunk);
        src += chunk;
        len -= chunk;
    }
}

/*
 * batch_get_into_multi_buffers(keys, all_buffer_ptrs, all_sizes, prefer_alloc_in_same_node=False)
 * An object is read across its buffers in order (one buffer: straight into it; several: through
 * a staging copy). Every buffer must be inside registered memory, checked before any byte moves.
 */
static PyObject *store_batch_get_into_multi_buffers(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"keys", "all_buffer_ptrs", "all_sizes", "prefer_alloc_in_same_node",
                             NULL};
    PyObject *keys_obj, *ptrs_obj, *sizes_obj;
    int same_node = 0; /* a read allocates nothing: accepted for compatibility, no effect */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|p:batch_get_into_multi_buffers", kwlist,
                                     &keys_obj, &ptrs_obj, &sizes_obj, &same_node))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    size_t n = (size_t)keys.n;
    PyObject *all_ptrs = mcpy_sequence(ptrs_obj, "all_buffer_ptrs");
    PyObject *all_sizes = all_ptrs ? mcpy_sequence(sizes_obj, "all_sizes") : NULL;
    mcpy_parts_t *parts = PyMem_Calloc(n ? n : 1, sizeof(mcpy_parts_t));
    int64_t *results = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    void **bufs = PyMem_Calloc(n ? n : 1, sizeof(void *));
    size_t *caps = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    size_t *idx = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    PyObject *list = NULL;
    if (!all_ptrs || !all_sizes)
        goto out;
    if (!parts || !results || !bufs || !caps || !idx) {
        PyErr_NoMemory();
        goto out;
    }
    int shape = PySequence_Fast_GET_SIZE(all_ptrs) == keys.n &&
                PySequence_Fast_GET_SIZE(all_sizes) == keys.n;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!shape || !keys.ptrs[i]) {
            results[i] = shape ? MC_ERR_INVALID_KEY : MC_ERR_INVALID_PARAMS;
            continue;
        }
        int rc = mcpy_parts_from(self, PySequence_Fast_GET_ITEM(all_ptrs, i),
                                 PySequence_Fast_GET_ITEM(all_sizes, i), &parts[i]);
        if (rc != 0 && PyErr_Occurred())
            goto out;
        results[i] = rc;
        if (rc != 0)
            continue;
        caps[i] = parts[i].total;
        bufs[i] = parts[i].n == 1 ? (void *)(uintptr_t)parts[i].ptrs[0]
                                  : malloc(parts[i].total ? parts[i].total : 1);
        if (!bufs[i]) {
            results[i] = MC_ERR_INTERNAL_ERROR;
            continue;
        }
        idx[m++] = i;
    }
    mc_store_t *s = mcpy_store(self);
    Py_BEGIN_ALLOW_THREADS
    get_subset(s, mc_store_get_batch, keys.ptrs, bufs, caps, idx, m, results);
    for (size_t j = 0; j < m; j++) {
        size_t i = idx[j];
        if (parts[i].n != 1 && results[i] > 0)
            scatter(&parts[i], bufs[i], (size_t)results[i]);
        /* matches upstream: buffers smaller than the object are INVALID_PARAMS */
        if (results[i] == MC_ERR_BUFFER_OVERFLOW)
            results[i] = MC_ERR_INVALID_PARAMS;
    }
    Py_END_ALLOW_THREADS
    list = mcpy_list_from_int64(results, n);
out:
    for (size_t i = 0; parts && bufs && i < n; i++) {
        if (parts[i].n != 1)
            free(bufs[i]);
        mcpy_parts_free(&parts[i]);
    }
    PyMem_Free(parts);
    PyMem_Free(results);
    PyMem_Free(bufs);
    PyMem_Free(caps);
    PyMem_Free(idx);
    Py_XDECREF(all_ptrs);
    Py_XDECREF(all_sizes);
    mcpy_keys_free(&keys);
    return list;
}

/* ---- get_into_ranges --------------------------------------------------------------------- */

/* One range: bytes [src, src+size) of an object go to address dst. */
typedef struct range {
    uint64_t dst, src, size;
    int64_t result;
} range_t;

/* One (buffer, key) entry of get_into_ranges and its ranges. */
typedef struct range_entry {
    size_t first, count; /* into the ranges array */
    int scalar;          /* offsets given as ints, not lists: one range */
} range_entry_t;

/* Items of seq[i] as a fast sequence of exactly n items, or a scalar (n must be 1 then). */
static PyObject *range_items(PyObject *item, int *scalar)
{
    *scalar = !PyList_Check(item) && !PyTuple_Check(item);
    if (*scalar)
        return PyTuple_Pack(1, item);
    return PySequence_Fast(item, "ranges");
}

/*
 * Parses the ranges of one (buffer, key) entry from the three offset/size items, appending to
 * *ranges. Returns 0, or -1 with an exception (TypeError for an item of the wrong type).
 */
static int parse_entry(McStoreObject *self, uint64_t base, PyObject *dst_item, PyObject *src_item,
                       PyObject *size_item, range_t **ranges, size_t *count, size_t *capacity,
                       range_entry_t *entry)
{
    int sd, ss, sz;
    PyObject *d = range_items(dst_item, &sd);
    PyObject *s = d ? range_items(src_item, &ss) : NULL;
    PyObject *z = s ? range_items(size_item, &sz) : NULL;
    int rc = -1;
    if (!z)
        goto out;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(d);
    /* dst offsets, src offsets and sizes of different lengths: every range of the entry
     * (counted by its dst offsets) is INVALID_PARAMS, as upstream (no exception) */
    int ragged = PySequence_Fast_GET_SIZE(s) != k || PySequence_Fast_GET_SIZE(z) != k;
    if (*count + (size_t)k > *capacity) {
        size_t cap = (*capacity ? *capacity * 2 : 16) + (size_t)k;
        range_t *grown = PyMem_Realloc(*ranges, cap * sizeof(range_t));
        if (!grown) {
            PyErr_NoMemory();
            goto out;
        }
        *ranges = grown;
        *capacity = cap;
    }
    entry->first = *count;
    entry->count = (size_t)k;
    entry->scalar = sd && ss && sz;
    for (Py_ssize_t j = 0; j < k; j++) {
        range_t *r = &(*ranges)[*count + (size_t)j];
        if (ragged) {
            *r = (range_t){.result = MC_ERR_INVALID_PARAMS};
            continue;
        }
        uint64_t dst_off = 0;
        int a = mcpy_unsigned(PySequence_Fast_GET_ITEM(d, j), UINT64_MAX, &dst_off, "dst offset");
        int b = PyErr_Occurred() ? 0
                                 : mcpy_unsigned(PySequence_Fast_GET_ITEM(s, j), UINT64_MAX,
                                                 &r->src, "src offset");
        int c = PyErr_Occurred()
                    ? 0
                    : mcpy_unsigned(PySequence_Fast_GET_ITEM(z, j), SIZE_MAX, &r->size, "size");
        if (PyErr_Occurred())
            goto out;
        r->dst = base + dst_off;
        r->result = a ? a : b ? b : c;
        if (r->result == 0 &&
            (r->dst < base || !mcpy_store_is_registered(self, (uintptr_t)r->dst, (size_t)r->size)))
            r->result = MC_ERR_INVALID_PARAMS;
    }
    *count += (size_t)k;
    rc = 0;
out:
    Py_XDECREF(d);
    Py_XDECREF(s);
    Py_XDECREF(z);
    return rc;
}

/* Appends an entry of k ranges that all answer INVALID_PARAMS; -1 with MemoryError. */
static int error_entry(Py_ssize_t k, range_t **ranges, size_t *count, size_t *capacity,
                       range_entry_t *entry)
{
    if (*count + (size_t)k > *capacity) {
        size_t cap = (*capacity ? *capacity * 2 : 16) + (size_t)k;
        range_t *grown = PyMem_Realloc(*ranges, cap * sizeof(range_t));
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        *ranges = grown;
        *capacity = cap;
    }
    entry->first = *count;
    entry->count = (size_t)k;
    entry->scalar = 0;
    for (Py_ssize_t j = 0; j < k; j++)
        (*ranges)[*count + (size_t)j] = (range_t){.result = MC_ERR_INVALID_PARAMS};
    *count += (size_t)k;
    return 0;
}

/* Number of ranges upstream answers for all_dst_offsets[i][j] when the shapes do not match: its
 * length when it exists and is a list (1 for a plain int or when it is missing). */
static Py_ssize_t error_fragments(PyObject *all_dst, Py_ssize_t i, Py_ssize_t j)
{
    if (i >= PySequence_Fast_GET_SIZE(all_dst))
        return 1;
    PyObject *row = PySequence_Fast_GET_ITEM(all_dst, i);
    if (!PyList_Check(row) && !PyTuple_Check(row))
        return 1;
    if (j >= PySequence_Size(row))
        return 1;
    PyObject *cell = PySequence_GetItem(row, j);
    if (!cell) {
        PyErr_Clear();
        return 1;
    }
    Py_ssize_t n = PyList_Check(cell) || PyTuple_Check(cell) ? PySequence_Size(cell) : 1;
    Py_DECREF(cell);
    return n < 0 ? 1 : n;
}

/* A list of n INVALID_PARAMS codes; NULL with an exception. */
static PyObject *error_codes(Py_ssize_t n)
{
    PyObject *codes = PyList_New(n);
    for (Py_ssize_t k = 0; codes && k < n; k++) {
        PyObject *v = PyLong_FromLong(MC_ERR_INVALID_PARAMS);
        if (!v)
            Py_CLEAR(codes);
        else
            PyList_SET_ITEM(codes, k, v);
    }
    return codes;
}

/*
 * The answer of get_into_ranges when the five top-level lists differ in length, shaped as
 * upstream's (build_ranged_read_results_like): one row per buffer, per key of all_keys[i] (one
 * when missing), per dst offset (one when missing), every code INVALID_PARAMS.
 */
static PyObject *ranges_shape_error(Py_ssize_t nbuf, PyObject *all_keys, PyObject *all_dst)
{
    PyObject *result = PyList_New(nbuf);
    for (Py_ssize_t i = 0; result && i < nbuf; i++) {
        Py_ssize_t nkeys = 1;
        if (i < PySequence_Fast_GET_SIZE(all_keys)) {
            PyObject *row = PySequence_Fast_GET_ITEM(all_keys, i);
            nkeys = PyList_Check(row) || PyTuple_Check(row) ? PySequence_Size(row) : 1;
        }
        PyObject *per_key = PyList_New(nkeys < 0 ? 0 : nkeys);
        for (Py_ssize_t j = 0; per_key && j < nkeys; j++) {
            PyObject *codes = error_codes(error_fragments(all_dst, i, j));
            if (!codes)
                Py_CLEAR(per_key);
            else
                PyList_SET_ITEM(per_key, j, codes);
        }
        if (!per_key)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, per_key);
    }
    return result;
}

/* Copies the ranges of one fetched object. Call with the GIL released. */
static void copy_ranges(range_t *ranges, const range_entry_t *e, const char *data, int64_t got)
{
    for (size_t k = e->first; k < e->first + e->count; k++) {
        range_t *r = &ranges[k];
        if (r->result != 0)
            continue;
        if (got < 0) {
            r->result = got;
        } else if (r->src > (uint64_t)got || r->size > (uint64_t)got - r->src) {
            r->result = MC_ERR_INVALID_PARAMS; /* range beyond the object's end */
        } else {
            memcpy((void *)(uintptr_t)r->dst, data + r->src, (size_t)r->size);
            r->result = (int64_t)r->size;
        }
    }
}

/*
 * get_into_ranges(buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes)
 *   -> list[list[list[int]]]
 * For buffer i and its key j, copies bytes [src, src+size) of the object to
 * buffer_ptrs[i] + dst for every range k of all_*[i][j][k] (an int instead of a list is one
 * range). Result [i][j][k]: bytes copied, or a negative code. Each object is read once.
 */
static PyObject *store_get_into_ranges(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"buffer_ptrs",     "all_keys",  "all_dst_offsets",
                             "all_src_offsets", "all_sizes", NULL};
    PyObject *a[5];
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO:get_into_ranges", kwlist, &a[0], &a[1], &a[2],
                                     &a[3], &a[4]))
        return NULL;
    static const char *const names[5] = {"buffer_ptrs", "all_keys", "all_dst_offsets",
                                         "all_src_offsets", "all_sizes"};
    PyObject *f[5] = {NULL};
    PyObject *inner[4] = {NULL}; /* all_keys[i], all_dst_offsets[i], ... as fast sequences */
    PyObject *result = NULL;
    range_t *ranges = NULL;
    size_t nranges = 0, cap_ranges = 0;
    range_entry_t *entries = NULL;
    size_t nentries = 0, cap_entries = 0;
    Py_ssize_t *keys_per_buffer = NULL;
    PyObject *key_objs = PyList_New(0); /* pins every key while C runs */
    const char **key_ptrs = NULL;
    owned_read_t r;
    int have_read = 0;
    if (!key_objs)
        return NULL;
    for (int i = 0; i < 5; i++) {
        if (!(f[i] = mcpy_sequence(a[i], names[i])))
            goto out;
    }
    Py_ssize_t nbuf = PySequence_Fast_GET_SIZE(f[0]);
    for (int i = 1; i < 5; i++) {
        if (PySequence_Fast_GET_SIZE(f[i]) != nbuf) {
            /* as upstream: logged, every range INVALID_PARAMS (no exception) */
            MC_ERROR("get_into_ranges: %s has %zd items, buffer_ptrs %zd", names[i],
                     PySequence_Fast_GET_SIZE(f[i]), nbuf);
            result = ranges_shape_error(nbuf, f[1], f[2]);
            goto out;
        }
    }
    keys_per_buffer = PyMem_Calloc(nbuf ? (size_t)nbuf : 1, sizeof(Py_ssize_t));
    if (!keys_per_buffer) {
        PyErr_NoMemory();
        goto out;
    }
    /* Parse: per buffer, per key, the ranges. */
    for (Py_ssize_t i = 0; i < nbuf; i++) {
        uint64_t base = 0;
        int brc = mcpy_unsigned(PySequence_Fast_GET_ITEM(f[0], i), UINTPTR_MAX, &base,
                                "buffer_ptrs item");
        if (brc != 0 && PyErr_Occurred())
            goto out;
        for (int t = 0; t < 4; t++) {
            Py_CLEAR(inner[t]);
            if (!(inner[t] = mcpy_sequence(PySequence_Fast_GET_ITEM(f[t + 1], i), names[t + 1])))
                goto out;
        }
        Py_ssize_t nkeys = PySequence_Fast_GET_SIZE(inner[0]);
        keys_per_buffer[i] = nkeys;
        int buffer_ragged = 0; /* as upstream: this buffer's ranges all INVALID_PARAMS */
        for (int t = 1; t < 4; t++) {
            if (PySequence_Fast_GET_SIZE(inner[t]) != nkeys) {
                MC_ERROR("get_into_ranges: %s[%zd] has %zd items, all_keys[%zd] %zd", names[t + 1],
                         i, PySequence_Fast_GET_SIZE(inner[t]), i, nkeys);
                buffer_ragged = 1;
            }
        }
        for (Py_ssize_t j = 0; j < nkeys; j++) {
            if (nentries == cap_entries) {
                size_t cap = cap_entries ? cap_entries * 2 : 16;
                range_entry_t *grown = PyMem_Realloc(entries, cap * sizeof(*grown));
                if (!grown) {
                    PyErr_NoMemory();
                    goto out;
                }
                entries = grown;
                cap_entries = cap;
            }
            PyObject *key = PySequence_Fast_GET_ITEM(inner[0], j);
            const char *kp;
            int krc = mcpy_key(key, &kp);
            if (krc != 0 && PyErr_Occurred())
                goto out;
            if (PyList_Append(key_objs, key) != 0)
                goto out;
            range_entry_t *e = &entries[nentries++];
            if (buffer_ragged) {
                if (error_entry(error_fragments(f[2], i, j), &ranges, &nranges, &cap_ranges, e) !=
                    0)
                    goto out;
                continue;
            }
            if (parse_entry(self, base, PySequence_Fast_GET_ITEM(inner[1], j),
                            PySequence_Fast_GET_ITEM(inner[2], j),
                            PySequence_Fast_GET_ITEM(inner[3], j), &ranges, &nranges, &cap_ranges,
                            e) != 0)
                goto out;
            int entry_rc = brc ? brc : krc;
            for (size_t k = e->first; entry_rc && k < e->first + e->count; k++)
                ranges[k].result = entry_rc;
        }
    }
    /* Fetch each object that has a range to fill, whole, into a handle. */
    key_ptrs = PyMem_Calloc(nentries ? nentries : 1, sizeof(char *));
    if (!key_ptrs) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t e = 0; e < nentries; e++) {
        int wanted = 0;
        for (size_t k = entries[e].first; k < entries[e].first + entries[e].count; k++)
            wanted |= ranges[k].result == 0;
        /* Keys were checked while parsing: a wanted entry's key is valid. */
        if (wanted)
            mcpy_key(PyList_GET_ITEM(key_objs, (Py_ssize_t)e), &key_ptrs[e]);
    }
    if (owned_init(&r, key_ptrs, nentries, 1) != 0)
        goto out;
    have_read = 1;
    if (owned_run(self, &r) != 0)
        goto out;
    Py_BEGIN_ALLOW_THREADS
    for (size_t e = 0; e < nentries; e++) {
        const char *data = r.objs[e] ? ((McBufferHandleObject *)r.objs[e])->data : NULL;
        copy_ranges(ranges, &entries[e], data, r.results[e]);
    }
    Py_END_ALLOW_THREADS
    /* Shape the answer like the input (as parsed: the lists may have changed since). */
    result = PyList_New(nbuf);
    size_t e = 0;
    for (Py_ssize_t i = 0; result && i < nbuf; i++) {
        PyObject *per_key = PyList_New(keys_per_buffer[i]);
        if (!per_key) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, per_key);
        for (Py_ssize_t j = 0; j < keys_per_buffer[i]; j++, e++) {
            PyObject *codes = PyList_New((Py_ssize_t)entries[e].count);
            for (size_t k = 0; codes && k < entries[e].count; k++) {
                PyObject *v = PyLong_FromLongLong(ranges[entries[e].first + k].result);
                if (!v)
                    Py_CLEAR(codes);
                else
                    PyList_SET_ITEM(codes, (Py_ssize_t)k, v);
            }
            if (!codes) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(per_key, j, codes);
        }
    }
out:
    if (have_read)
        owned_free(&r);
    for (int i = 0; i < 5; i++)
        Py_XDECREF(f[i]);
    for (int t = 0; t < 4; t++)
        Py_XDECREF(inner[t]);
    PyMem_Free(ranges);
    PyMem_Free(entries);
    PyMem_Free(key_ptrs);
    PyMem_Free(keys_per_buffer);
    Py_DECREF(key_objs);
    return result;
}

/* ---- method table ------------------------------------------------------------------------ */

PyMethodDef mcpy_store_read_methods[] = {
    {"get", MCPY_KW(store_get), METH_VARARGS | METH_KEYWORDS,
     "get(key) -> bytes\n\n"
     "The object's bytes; b\"\" when the key is missing, invalid, the store is not set up, or\n"
     "any other error (an empty object also reads as b\"\"; use is_exist to tell them apart).\n"
     "Grants a read lease. TypeError: key not str/bytes.\n"
     "Values of 1 MiB or more come from a process-wide pool of bytes objects: one the caller\n"
     "no longer references may be refilled for a later get (a genuine bytes object; only its\n"
     "id() repeats). MC_PY_GET_POOL_BYTES (default 1GiB, 0 = off) bounds the memory the pool\n"
     "keeps; MC_PY_GET_HUGEPAGES=0 stops advising huge pages for new values (python/README.md)."},
    {"get_batch", MCPY_KW(store_get_batch), METH_VARARGS | METH_KEYWORDS,
     "get_batch(keys) -> list[bytes]\n\n"
     "One bytes per key, b\"\" for each key that failed; [] for []. Large values as get's."},
    {"get_buffer", MCPY_KW(store_get_buffer), METH_VARARGS | METH_KEYWORDS,
     "get_buffer(key) -> BufferHandle | None\n\n"
     "The object's bytes in a new BufferHandle (buffer protocol, ptr(), size()); None on a miss\n"
     "or any error."},
    {"batch_get_buffer", MCPY_KW(store_batch_get_buffer), METH_VARARGS | METH_KEYWORDS,
     "batch_get_buffer(keys) -> list[BufferHandle | None]\n\nOne entry per key, None where the "
     "read failed."},
    {"get_into", MCPY_KW(store_get_into), METH_VARARGS | METH_KEYWORDS,
     "get_into(key, buffer_ptr, size) -> int\n\n"
     "Zero-copy read into `size` bytes of registered memory at `buffer_ptr` (int). Returns the\n"
     "object's size in bytes (>= 0), or a negative code: -704 not found, -10 object larger than\n"
     "size, -600 buffer not inside registered memory / negative pointer or size, -400 invalid\n"
     "key."},
    {"batch_get_into", MCPY_KW(store_batch_get_into), METH_VARARGS | METH_KEYWORDS,
     "batch_get_into(keys, buffer_ptrs, sizes) -> list[int]\n\n"
     "get_into for every key in one batch: bytes read or a negative code per key. An\n"
     "unregistered buffer fails the batch with -600 per key; lists of different lengths: -600\n"
     "per key."},
    {"batch_get_into_multi_buffers", MCPY_KW(store_batch_get_into_multi_buffers),
     METH_VARARGS | METH_KEYWORDS,
     "batch_get_into_multi_buffers(keys, all_buffer_ptrs, all_sizes,\n"
     "                             prefer_alloc_in_same_node=False) -> list[int]\n\n"
     "Reads object i across its buffers all_buffer_ptrs[i][j] (all_sizes[i][j] bytes each, in\n"
     "registered memory) in order. Per key: bytes read, -600 when the object is larger than\n"
     "the buffers together (as upstream) or a buffer is outside registered memory, or another\n"
     "negative code.\n"
     "prefer_alloc_in_same_node has no effect on reads."},
    {"get_into_ranges", MCPY_KW(store_get_into_ranges), METH_VARARGS | METH_KEYWORDS,
     "get_into_ranges(buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes)\n"
     "    -> list[list[list[int]]]\n\n"
     "For buffer i (an address in registered memory) and each key all_keys[i][j], copies bytes\n"
     "[src, src+size) of that object to buffer_ptrs[i] + dst, for every range k given by\n"
     "all_dst_offsets[i][j][k], all_src_offsets[i][j][k], all_sizes[i][j][k] (plain ints instead\n"
     "of the innermost lists mean one range). Result [i][j][k]: bytes copied, or a negative code\n"
     "(-704 missing object, -600 destination outside registered memory or range beyond the\n"
     "object). Lists whose lengths do not match answer -600 for the ranges concerned, shaped\n"
     "by all_keys and all_dst_offsets (matches upstream: no exception)."},
    {NULL},
};
