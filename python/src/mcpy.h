/*
 * mcpy.h — internals shared by the files of the `mooncake._store` extension (python/src/).
 *
 * The extension wraps the C store client (include/mooncake/store.h) in upstream Mooncake's Python
 * API (`mooncake.store`, see docs in python/README.md). Files, one per concern:
 *   module.c            module init, the enums, MooncakeHostMemAllocator, BufferHandle
 *   args.c              Python arguments -> C values (keys, pointers, sizes, lists, buffers)
 *   replicate_config.c  ReplicateConfig and its snapshot for one C call
 *   descriptors.c       ReplicaDescriptor, MemoryDescriptor, Descriptor, DiskDescriptor
 *   store_lifecycle.c   MooncakeDistributedStore: object, setup/close, health, the method table
 *   store_write.c       put / upsert, plain and zero-copy, single and batch
 *   store_read.c        get into bytes / BufferHandle / registered memory, ranges
 *   bytes_pool.c        reusable bytes objects for the large values get returns
 *   store_meta.c        exist, size, remove, buffer registration, replica descriptors
 *   store_dummy.c       setup_dummy, alloc_from_mem_pool (the dummy client)
 *
 * Conventions: every store method returns upstream's values (0 / negative store codes, per-key
 * lists, b"" on a failed get) and raises only for arguments of the wrong Python type (TypeError)
 * or for memory exhaustion. The GIL is released around every C store call; all Python objects a
 * call needs while the GIL is released are pinned (new references, Py_buffer exports) or copied
 * first, so another thread mutating a list argument cannot pull memory out from under C.
 */
#ifndef MCPY_H
#define MCPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mooncake/store.h"

#include <stdint.h>

#define MCPY_MODULE "mooncake.store" /* the name users import; types carry it in tp_name */

/* ---- module-level objects (module.c) ---------------------------------------------------- */

/* IntEnum classes created at import; owned by the module, borrowed here. */
extern PyObject *mcpy_SoftPinAction;
extern PyObject *mcpy_ObjectDataType;
extern PyObject *mcpy_ReplicaStatus;

extern PyTypeObject McBufferHandle_Type;
extern PyTypeObject McHostMemAllocator_Type;
extern PyTypeObject McReplicateConfig_Type;
extern PyTypeObject McReplicaDescriptor_Type;
extern PyTypeObject McMemoryDescriptor_Type;
extern PyTypeObject McDescriptor_Type;
extern PyTypeObject McDiskDescriptor_Type;
extern PyTypeObject McStore_Type;

/* Calls enum_class(value); a new reference, or NULL with an exception. */
PyObject *mcpy_enum_member(PyObject *enum_class, long value);

/*
 * BufferHandle: bytes owned by the handle (malloc'd), exported through the buffer protocol.
 * The memory lives until the handle and every view of it are gone.
 */
typedef struct McBufferHandleObject {
    PyObject_HEAD
    char *data;
    size_t size;     /* bytes exposed */
    size_t capacity; /* bytes allocated */
    int mapped;      /* 1: data is an mmap of `capacity` bytes, else malloc'd */
} McBufferHandleObject;

/* A handle of `capacity` bytes of malloc'd memory (size == capacity); NULL with MemoryError.
 * Views hold a reference to the handle, so the memory outlives every memoryview of it. */
McBufferHandleObject *mcpy_buffer_handle_new(size_t capacity);

/* ---- arguments (args.c) ----------------------------------------------------------------- */

/*
 * The UTF-8 bytes of a str key, or the bytes of a bytes key, borrowed from `obj`.
 * Returns 0, MC_ERR_INVALID_KEY (a NUL inside, or a str that is not encodable; no exception), or
 * -1 with TypeError set.
 */
int mcpy_key(PyObject *obj, const char **out);

/*
 * An integer argument (anything with __index__) as an unsigned number <= max.
 * Returns 0, MC_ERR_INVALID_PARAMS when negative or above max (no exception), or -1 with
 * TypeError set. `what` names the argument in the message.
 */
int mcpy_unsigned(PyObject *obj, uint64_t max, uint64_t *out, const char *what);

/* A list/tuple (not str/bytes) as a new reference to a tuple-or-list via PySequence_Fast;
 * NULL with TypeError. */
PyObject *mcpy_sequence(PyObject *obj, const char *what);

/*
 * A snapshot of a key list: one new reference per key plus its C string, so the list may be
 * mutated by other threads while C runs. ptrs[i] is NULL for a key C must reject (NUL inside:
 * the C batch calls answer MC_ERR_INVALID_KEY for it).
 */
typedef struct mcpy_keys {
    Py_ssize_t n;
    PyObject **objs;
    const char **ptrs;
} mcpy_keys_t;

/* 0, or -1 with an exception (TypeError for a non-list or a key of the wrong type). */
int mcpy_keys_from(PyObject *seq, mcpy_keys_t *out, const char *what);
void mcpy_keys_free(mcpy_keys_t *keys);

/*
 * A list of integers (pointers or sizes) of exactly `n` items. values[i] receives each item,
 * bad[i] 0 or MC_ERR_INVALID_PARAMS (negative / too large). Returns 0, 1 when the list has
 * another length (no exception), or -1 with TypeError set. Arrays are PyMem_Malloc'd.
 */
int mcpy_uints_from(PyObject *seq, Py_ssize_t n, uint64_t max, uint64_t **values, int **bad,
                    const char *what);

/* A per-key result C has not written (C refused the whole call before looking at keys). */
#define MCPY_UNSET INT32_MIN

/* Builds a list of Python ints from n results. */
PyObject *mcpy_list_from_int(const int *results, size_t n);
PyObject *mcpy_list_from_int64(const int64_t *results, size_t n);

/* ---- ReplicateConfig (replicate_config.c) ----------------------------------------------- */

/*
 * One put's configuration, copied out of a ReplicateConfig so that C can use it with the GIL
 * released. `reject` is 0, or the code every put with this configuration must return without
 * calling C (MC_ERR_INVALID_PARAMS for prefer_alloc_in_same_node, MC_ERR_NOT_SUPPORTED for
 * NoF/DFS replicas, which this build does not have). `group_count` is len(group_ids), or -1.
 */
typedef struct mcpy_config {
    mc_replicate_config_t c;
    char *preferred_segment;
    char **preferred;
    size_t preferred_count;
    int reject;
    Py_ssize_t group_count;
} mcpy_config_t;

/* `obj` is a ReplicateConfig or None. 0, or -1 with TypeError / MemoryError. */
int mcpy_config_snapshot(PyObject *obj, mcpy_config_t *out);
void mcpy_config_release(mcpy_config_t *cfg);

/* ---- descriptors (descriptors.c) -------------------------------------------------------- */

/* A ReplicaDescriptor for one replica; NULL with an exception. */
PyObject *mcpy_replica_descriptor_new(const mc_replica_desc_t *desc);

/* ---- the store (store_*.c) -------------------------------------------------------------- */

typedef enum mcpy_store_state {
    MCPY_STORE_NEW = 0,    /* never set up */
    MCPY_STORE_SETTING_UP, /* setup() running with the GIL released */
    MCPY_STORE_READY,
    MCPY_STORE_CLOSING, /* close() running with the GIL released */
    MCPY_STORE_CLOSED,
} mcpy_store_state_t;

typedef struct mcpy_range {
    uintptr_t addr;
    size_t length;
} mcpy_range_t;

/*
 * Invariants (all fields are read and written with the GIL held):
 *  - `store` is non-NULL exactly in state READY.
 *  - a handle, once set up, is freed only in tp_dealloc: a call that fetched it while READY may
 *    still be about to enter C when another thread closes the store; C then answers
 *    MC_ERR_INVALID_PARAMS (closed) instead of touching freed memory. Closed handles wait in
 *    `retired` (one per setup/close cycle).
 *  - `regs` mirrors the buffers registered through this object (C's list is not queryable); the
 *    binding checks it before it copies from or to a caller's pointer itself (multi-buffer and
 *    range calls). Cleared at close, as C forgets registrations then.
 */
typedef struct McStoreObject {
    PyObject_HEAD
    mc_store_t *store;
    mcpy_store_state_t state;
    mc_store_t **retired;
    size_t retired_count;
    PyObject *hostname; /* str, this client's segment name; NULL until set up */
    PyObject *engine;   /* the InnerTransferEngine given to setup(engine=...), or NULL */
    mcpy_range_t *regs;
    size_t reg_count, reg_capacity;
    size_t get_hint; /* bytes: size of the last object get() read, a first-guess capacity */
} McStoreObject;

/* The live handle, or NULL when not set up / closed (C calls then return their "no store"
 * result). Valid until tp_dealloc, see the invariants above. */
static inline mc_store_t *mcpy_store(McStoreObject *self)
{
    return self->state == MCPY_STORE_READY ? self->store : NULL;
}

/* 1 when [addr, addr+len) lies inside one registered buffer (len 0: addr inside or at its end). */
int mcpy_store_is_registered(const McStoreObject *self, uintptr_t addr, size_t len);

/*
 * One object's list of buffers (the multi-buffer calls): parallel lists of pointers and sizes,
 * every buffer inside memory registered with this store. Arrays are PyMem_Malloc'd.
 */
typedef struct mcpy_parts {
    Py_ssize_t n;
    uint64_t *ptrs;
    uint64_t *sizes;
    size_t total; /* bytes, sum of sizes */
} mcpy_parts_t;

/*
 * Returns 0, MC_ERR_INVALID_PARAMS (lists of different lengths, a negative value, a buffer
 * outside registered memory, a total above MC_MAX_VALUE_SIZE; no exception), or -1 with
 * TypeError set. `out` is always safe to pass to mcpy_parts_free().
 */
int mcpy_parts_from(const McStoreObject *self, PyObject *ptr_list, PyObject *size_list,
                    mcpy_parts_t *out);
void mcpy_parts_free(mcpy_parts_t *parts);

/* ---- reusable bytes for get (bytes_pool.c) ---------------------------------------------- */

/*
 * A new reference to a bytes object of `size` bytes (contents undefined) for a get to write
 * into; NULL with MemoryError. *pooled is 1 when it came from the pool (then only
 * mcpy_bytes_finish may change its size), *fresh 1 when its memory was never written. The caller
 * may write its data with the GIL released, and must call mcpy_bytes_finish() (or drop its
 * reference, which returns a pooled object to the pool) before anyone else sees it.
 * GIL held. Configured by MC_PY_GET_POOL_BYTES (size text; 0 = no pool).
 */
PyObject *mcpy_bytes_take(size_t size, int speculative, int *pooled, int *fresh);
/* Sets the object's size to len <= its size (a copy when much smaller and pooled); 0, or -1 with
 * MemoryError (then *obj is NULL). GIL held. */
int mcpy_bytes_finish(PyObject **obj, size_t len, int pooled);
/* Advises `size` bytes of fresh memory at data to use transparent huge pages (at least 4 MiB;
 * only whole 2 MiB pages inside). Any thread; GIL not needed. */
void mcpy_bytes_advise(void *data, size_t size);
/* Drops every reference the pool holds (idle objects are freed). GIL held. */
void mcpy_bytes_pool_clear(void);

/* A keyword-taking method in a PyMethodDef table, without a function-type-cast warning. */
#define MCPY_KW(fn) ((PyCFunction)(void (*)(void))(fn))

/* The store's methods, one NULL-terminated table per file, beside their code and docstrings;
 * mcpy_store_type_init() joins them into the type's tp_methods and readies the type. */
extern PyMethodDef mcpy_store_write_methods[];
extern PyMethodDef mcpy_store_read_methods[];
extern PyMethodDef mcpy_store_meta_methods[];
extern PyMethodDef mcpy_store_dummy_methods[]; /* store_dummy.c */
int mcpy_store_type_init(void);

#endif /* MCPY_H */
