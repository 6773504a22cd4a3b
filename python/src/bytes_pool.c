/*
 * bytes_pool.c — reusable bytes objects for the values get / get_batch return (store_read.c).
 *
 * Why: a get writes the object into a new bytes object. A large one is fresh memory, and on a
 * VM every fresh page costs a fault in the guest and often one in the host: first touch runs at
 * 0.07–0.7 GB/s on the 2-vCPU VM of docs/benchmarks.md, 10–100× below a copy into warm memory.
 * glibc does not keep such memory around for the next get: blocks at or above the mmap
 * threshold are unmapped on free, and a thread arena's heap (every lane thread of a benchmark
 * or a serving engine has one) is unmapped as soon as it is empty, whatever M_TRIM_THRESHOLD
 * says. So a thread reading 16 MiB values faulted in every page of every value.
 *
 * How: the pool keeps one reference to each bytes object it made (of at least
 * MCPY_BYTES_POOL_MIN bytes). An object whose only reference is the pool's (refcount 1) is
 * reachable by no one else — no variable, container, memoryview or C extension can hold its
 * address without holding a reference — so it is idle: its memory may be written again and
 * handed out as a new value. It is still a genuine `bytes` object (equality, hashing, slicing,
 * the buffer protocol and pickling are those of bytes): only its identity may repeat, as any
 * freed object's does. Taking an object resets its cached hash; finishing it sets its size and
 * terminating NUL, so nothing of an earlier value is visible.
 *
 * Bounds: the objects the pool holds (idle or in use) total at most `limit` bytes
 * (MC_PY_GET_POOL_BYTES, default MCPY_BYTES_POOL_DEFAULT; 0 disables the pool). A take that
 * finds no idle object of its size evicts idle objects, least recently used first, to make
 * room; when every object is in use it returns a plain new bytes object the pool does not keep.
 * mcpy_bytes_pool_clear() drops all the pool's references (idle memory goes back to malloc).
 *
 * New objects of at least MCPY_BYTES_HUGE_MIN bytes are advised MADV_HUGEPAGE (where the kernel's
 * transparent_hugepage mode is `madvise` or `always`): one fault per 2 MiB instead of per 4 KiB
 * makes their first touch 10–30× faster here; it has no effect elsewhere.
 *
 * Thread-safety: every function is called with the GIL held, which guards the pool and the
 * reference counts it reads. Between mcpy_bytes_take() and mcpy_bytes_finish() the caller holds
 * its own reference (refcount >= 2), so no other take hands the object out, and the caller may
 * write into its data with the GIL released.
 */
#include "mcpy.h"

#include "log.h"
#include "parse.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MCPY_BYTES_POOL_DEFAULT (1ull << 30) /* bytes held at most, unless MC_PY_GET_POOL_BYTES */
#define MCPY_BYTES_POOL_MIN (1ull << 20)     /* bytes: smaller values are malloc's business */
#define MCPY_BYTES_HUGE_MIN (4ull << 20)     /* bytes: smaller new objects are not advised */
#define MCPY_HUGE_PAGE (2ull << 20)          /* bytes, x86-64's transparent huge page */

/* The pool works on the bytes object's fields: only where they are what this file expects. */
#if PY_VERSION_HEX >= 0x030D0000 || defined(Py_GIL_DISABLED) || defined(Py_LIMITED_API)
#define MCPY_BYTES_POOL_SUPPORTED 0
#else
#define MCPY_BYTES_POOL_SUPPORTED 1
#endif

typedef struct pool_entry {
    PyObject *obj;   /* a bytes object; the pool's reference */
    size_t capacity; /* bytes its allocation holds (its size when made) */
    uint64_t last;   /* take counter when last taken: least recently used goes first */
} pool_entry_t;

static struct {
    int configured;
    uint64_t limit; /* bytes; 0: no pool */
    pool_entry_t *entries;
    size_t count, cap;
    int huge;      /* advise new objects MADV_HUGEPAGE */
    uint64_t held; /* bytes, sum of entries' capacities */
    uint64_t takes;
} pool;

/* A size from the environment variable `name`, else `fallback` (a bad value is logged). */
static uint64_t env_size(const char *name, uint64_t fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char err[128];
    uint64_t bytes = 0;
    if (mc_parse_size(v, &bytes, err, sizeof(err)) != 0) {
        MC_WARN("%s=\"%s\": %s; using %llu", name, v, err, (unsigned long long)fallback);
        return fallback;
    }
    return bytes;
}

static void pool_configure(void)
{
    pool.configured = 1;
    pool.limit =
        MCPY_BYTES_POOL_SUPPORTED ? env_size("MC_PY_GET_POOL_BYTES", MCPY_BYTES_POOL_DEFAULT) : 0;
    pool.huge = 1;
    const char *v = getenv("MC_PY_GET_HUGEPAGES");
    char err[128];
    if (v && *v && mc_parse_bool(v, &pool.huge, err, sizeof(err)) != 0) {
        MC_WARN("MC_PY_GET_HUGEPAGES=\"%s\": %s; using 1", v, err);
        pool.huge = 1;
    }
}

static void set_size(PyObject *obj, size_t size)
{
    Py_SET_SIZE(obj, (Py_ssize_t)size);
    PyBytes_AS_STRING(obj)[size] = '\0';
#if MCPY_BYTES_POOL_SUPPORTED
    /* The hash cached for the bytes it held before (deprecated for readers since 3.11, still
     * the cache bytes.__hash__ uses). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ((PyBytesObject *)obj)->ob_shash = -1;
#pragma GCC diagnostic pop
#endif
}

/* Drops entry i (the pool's reference; the object lives on if someone else holds one). */
static void entry_drop(size_t i)
{
    PyObject *obj = pool.entries[i].obj;
    pool.held -= pool.entries[i].capacity;
    pool.entries[i] = pool.entries[--pool.count];
    Py_DECREF(obj);
}

/* The idle entry of least capacity in [size, size + size/8], or -1. */
static Py_ssize_t find_idle(size_t size)
{
    Py_ssize_t best = -1;
    for (size_t i = 0; i < pool.count; i++) {
        pool_entry_t *e = &pool.entries[i];
        if (Py_REFCNT(e->obj) != 1 || e->capacity < size || e->capacity - size > size / 8)
            continue;
        if (best < 0 || e->capacity < pool.entries[best].capacity)
            best = (Py_ssize_t)i;
    }
    return best;
}

/*
 * Evicts idle entries, least recently used first, until `size` more bytes fit the limit; 1 when
 * they fit. A speculative take (a guessed size, see store_read.c) evicts nothing: otherwise
 * guesses of one size could push out the idle objects of the size actually read.
 */
static int make_room(size_t size, int speculative)
{
    while (pool.held + size > pool.limit) {
        if (speculative)
            return 0;
        Py_ssize_t lru = -1;
        for (size_t i = 0; i < pool.count; i++) {
            if (Py_REFCNT(pool.entries[i].obj) == 1 &&
                (lru < 0 || pool.entries[i].last < pool.entries[lru].last))
                lru = (Py_ssize_t)i;
        }
        if (lru < 0)
            return 0;
        entry_drop((size_t)lru);
    }
    return 1;
}

/* A new pool entry for a new bytes object of `size` bytes; the entry or NULL (no exception:
 * the caller makes a plain object instead). */
static pool_entry_t *entry_new(size_t size)
{
    if (pool.count == pool.cap) {
        size_t cap = pool.cap ? pool.cap * 2 : 16;
        pool_entry_t *grown = PyMem_Realloc(pool.entries, cap * sizeof(*grown));
        if (!grown)
            return NULL;
        pool.entries = grown;
        pool.cap = cap;
    }
    PyObject *obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!obj) {
        PyErr_Clear();
        return NULL;
    }
    pool_entry_t *e = &pool.entries[pool.count++];
    e->obj = obj;
    e->capacity = size;
    pool.held += size;
    return e;
}

PyObject *mcpy_bytes_take(size_t size, int speculative, int *pooled, int *fresh)
{
    *pooled = 0;
    *fresh = 1;
    if (!pool.configured)
        pool_configure();
    if (size > PY_SSIZE_T_MAX)
        return PyErr_NoMemory();
    if (size >= MCPY_BYTES_POOL_MIN && size <= pool.limit) {
        Py_ssize_t i = find_idle(size);
        pool_entry_t *e = i >= 0                         ? &pool.entries[i]
                          : make_room(size, speculative) ? entry_new(size)
                                                         : NULL;
        if (e) {
            *fresh = i < 0;
            *pooled = 1;
            e->last = ++pool.takes;
            set_size(e->obj, size);
            Py_INCREF(e->obj);
            return e->obj;
        }
    }
    return PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
}

int mcpy_bytes_finish(PyObject **obj, size_t len, int pooled)
{
    size_t size = (size_t)PyBytes_GET_SIZE(*obj);
    if (len == size)
        return 0;
    if (!pooled)
        return _PyBytes_Resize(obj, (Py_ssize_t)len);
    if (len >= size - size / 8) { /* at most an eighth of the object's memory unused */
        set_size(*obj, len);
        return 0;
    }
    /* Much smaller than the object taken for it: a copy of its own, the pooled one goes back. */
    PyObject *copy = PyBytes_FromStringAndSize(PyBytes_AS_STRING(*obj), (Py_ssize_t)len);
    Py_SETREF(*obj, copy);
    return copy ? 0 : -1;
}

void mcpy_bytes_advise(void *data, size_t size)
{
    if (!pool.huge || size < MCPY_BYTES_HUGE_MIN)
        return;
    uintptr_t start = ((uintptr_t)data + MCPY_HUGE_PAGE - 1) & ~(uintptr_t)(MCPY_HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)data + size) & ~(uintptr_t)(MCPY_HUGE_PAGE - 1);
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE); /* advice: failure is harmless */
}

void mcpy_bytes_pool_clear(void)
{
    while (pool.count > 0)
        entry_drop(pool.count - 1);
    PyMem_Free(pool.entries);
    pool.entries = NULL;
    pool.cap = 0;
}
