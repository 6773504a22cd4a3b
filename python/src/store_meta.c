/*
 * store_meta.c — the metadata methods of MooncakeDistributedStore: is_exist (and its camelCase
 * alias isExist, which store_kv_bench.py calls), batch_is_exist, get_size, remove, batch_remove,
 * remove_all, remove_by_regex, register_buffer, unregister_buffer, get_replica_desc,
 * batch_get_replica_desc; the replica task methods create_copy_task, create_move_task,
 * _query_task (query_task in mooncake.store) and batch_replica_clear; and the segment methods
 * (mount_segment, allocate_and_mount_segment, unmount_segment, unmount_and_free_segment,
 * unmount_local_disk_segment) and init_all.
 *
 * register_buffer / unregister_buffer also keep the object's mirror of registered ranges
 * (McStoreObject.regs), which the multi-buffer and range calls check before the binding itself
 * copies from or to a caller's pointer.
 */
#include "mcpy.h"

#include "log.h"

#include <string.h>

#define MCPY_INIT_ALL_SEGMENT (16ull << 20) /* init_all's default mount_segment_size (upstream) */
#define MCPY_INIT_ALL_BUFFER (1ull << 30)   /* init_all's local buffer (upstream: 1 GiB) */

/* ---- exist, size -------------------------------------------------------------------------- */

/* Parses (key) or (key, force=False); returns the C key, or NULL with *code set (a store code,
 * or -1 with an exception). */
static const char *one_key(PyObject *args, PyObject *kw, const char *format, char **kwlist,
                           int *force, int *code)
{
    PyObject *key_obj;
    int ok = force ? PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &key_obj, force)
                   : PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &key_obj);
    if (!ok) {
        *code = -1;
        return NULL;
    }
    const char *key = NULL;
    *code = mcpy_key(key_obj, &key);
    return *code == 0 ? key : NULL;
}

#define ONE_KEY_OR_RETURN(format, kwlist, force)                                                   \
    int code_;                                                                                     \
    const char *key = one_key(args, kw, format, kwlist, force, &code_);                            \
    if (!key)                                                                                      \
        return PyErr_Occurred() ? NULL : PyLong_FromLong(code_);

static PyObject *exist_impl(PyObject *obj, PyObject *args, PyObject *kw, const char *format)
{
    static char *kwlist[] = {"key", NULL};
    ONE_KEY_OR_RETURN(format, kwlist, NULL)
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_exist(s, key);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

static PyObject *store_is_exist(PyObject *obj, PyObject *args, PyObject *kw)
{
    return exist_impl(obj, args, kw, "O:is_exist");
}

static PyObject *store_isExist(PyObject *obj, PyObject *args, PyObject *kw)
{
    return exist_impl(obj, args, kw, "O:isExist");
}

static PyObject *store_get_size(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"key", NULL};
    ONE_KEY_OR_RETURN("O:get_size", kwlist, NULL)
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    int64_t size;
    Py_BEGIN_ALLOW_THREADS
    size = mc_store_get_size(s, key);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(size);
}

/*
 * A batch over keys answered per key (exist, remove). C is called on the whole key array:
 * invalid keys are NULL there and C answers MC_ERR_INVALID_KEY for them.
 */
static PyObject *per_key_batch(McStoreObject *self, PyObject *keys_obj, int remove, int force)
{
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    size_t n = (size_t)keys.n;
    int *results = PyMem_Calloc(n ? n : 1, sizeof(int));
    if (!results) {
        mcpy_keys_free(&keys);
        return PyErr_NoMemory();
    }
    for (size_t i = 0; i < n; i++)
        results[i] = MCPY_UNSET;
    mc_store_t *s = mcpy_store(self);
    int rc = 0;
    if (n > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = remove ? mc_store_batch_remove(s, keys.ptrs, n, force, results)
                    : mc_store_batch_exist(s, keys.ptrs, n, results);
        Py_END_ALLOW_THREADS
    }
    for (size_t i = 0; i < n; i++) {
        if (results[i] == MCPY_UNSET) /* C refused the call as a whole */
            results[i] = rc ? rc : MC_ERR_INTERNAL_ERROR;
    }
    PyObject *list = mcpy_list_from_int(results, n);
    PyMem_Free(results);
    mcpy_keys_free(&keys);
    return list;
}

static PyObject *store_batch_is_exist(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"keys", NULL};
    PyObject *keys;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_is_exist", kwlist, &keys))
        return NULL;
    return per_key_batch((McStoreObject *)obj, keys, 0, 0);
}

/* ---- remove ------------------------------------------------------------------------------ */

static PyObject *store_remove(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"key", "force", NULL};
    int force = 0;
    ONE_KEY_OR_RETURN("O|p:remove", kwlist, &force)
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_remove(s, key, force);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

static PyObject *store_batch_remove(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"keys", "force", NULL};
    PyObject *keys;
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:batch_remove", kwlist, &keys, &force))
        return NULL;
    return per_key_batch((McStoreObject *)obj, keys, 1, force);
}

static PyObject *store_remove_all(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"force", NULL};
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:remove_all", kwlist, &force))
        return NULL;
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    int64_t count;
    Py_BEGIN_ALLOW_THREADS
    count = mc_store_remove_all(s, force);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(count < 0 ? -1 : count); /* upstream: -1 on any error */
}

static PyObject *store_remove_by_regex(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"regex_pattern", "force", NULL};
    const char *regex;
    Py_ssize_t len;
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|p:remove_by_regex", kwlist, &regex, &len,
                                     &force))
        return NULL;
    if (strlen(regex) != (size_t)len)
        return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    int64_t count;
    Py_BEGIN_ALLOW_THREADS
    count = mc_store_remove_by_regex(s, regex, force);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(count);
}

/* ---- buffer registration ----------------------------------------------------------------- */

static int mirror_add(McStoreObject *self, uintptr_t addr, size_t length)
{
    if (self->reg_count == self->reg_capacity) {
        size_t cap = self->reg_capacity ? self->reg_capacity * 2 : 8;
        mcpy_range_t *grown = PyMem_Realloc(self->regs, cap * sizeof(*grown));
        if (!grown)
            return -1;
        self->regs = grown;
        self->reg_capacity = cap;
    }
    self->regs[self->reg_count++] = (mcpy_range_t){addr, length};
    return 0;
}

static void mirror_remove(McStoreObject *self, uintptr_t addr)
{
    for (size_t i = 0; i < self->reg_count; i++) {
        if (self->regs[i].addr == addr) {
            self->regs[i] = self->regs[--self->reg_count];
            return;
        }
    }
}

static PyObject *store_register_buffer(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"buffer_ptr", "size", NULL};
    PyObject *ptr_obj, *size_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:register_buffer", kwlist, &ptr_obj, &size_obj))
        return NULL;
    uint64_t ptr = 0, size = 0;
    int rc = mcpy_unsigned(ptr_obj, UINTPTR_MAX, &ptr, "buffer_ptr");
    int src = PyErr_Occurred() ? 0 : mcpy_unsigned(size_obj, SIZE_MAX, &size, "size");
    if (PyErr_Occurred())
        return NULL;
    rc = rc ? rc : src;
    if (rc != 0)
        return PyLong_FromLong(rc);
    mc_store_t *s = mcpy_store(self);
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_register_buffer(s, (void *)(uintptr_t)ptr, (size_t)size);
    Py_END_ALLOW_THREADS
    /* Mirror it only if the store it went to is still the live one (not closed meanwhile). */
    if (rc == 0 && s && mcpy_store(self) == s && mirror_add(self, (uintptr_t)ptr, size) != 0) {
        Py_BEGIN_ALLOW_THREADS
        mc_store_unregister_buffer(s, (void *)(uintptr_t)ptr);
        Py_END_ALLOW_THREADS
        return PyErr_NoMemory();
    }
    return PyLong_FromLong(rc);
}

static PyObject *store_unregister_buffer(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"buffer_ptr", NULL};
    PyObject *ptr_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:unregister_buffer", kwlist, &ptr_obj))
        return NULL;
    uint64_t ptr = 0;
    int rc = mcpy_unsigned(ptr_obj, UINTPTR_MAX, &ptr, "buffer_ptr");
    if (rc != 0)
        return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
    /* Forget it before C does: from now on the binding no longer copies through it. */
    mirror_remove(self, (uintptr_t)ptr);
    mc_store_t *s = mcpy_store(self);
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_unregister_buffer(s, (void *)(uintptr_t)ptr);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

/* ---- replica descriptors ----------------------------------------------------------------- */

#define MCPY_REPLICAS_FIRST_TRY ((size_t)MC_MAX_REPLICAS * 2)

/*
 * The replicas of one key, with the GIL released. Returns 0 with *out (PyMem_RawMalloc'd,
 * caller frees) and *count set, or a negative code.
 */
static int fetch_replicas(mc_store_t *s, const char *key, mc_replica_desc_t **out, size_t *count)
{
    size_t capacity = MCPY_REPLICAS_FIRST_TRY;
    *out = NULL;
    *count = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        mc_replica_desc_t *descs = PyMem_RawCalloc(capacity, sizeof(*descs));
        if (!descs)
            return MC_ERR_INTERNAL_ERROR;
        size_t n = 0;
        int rc = mc_store_get_replica_desc(s, key, descs, capacity, &n);
        if (rc != 0 || n <= capacity) {
            if (rc != 0) {
                PyMem_RawFree(descs);
                return rc;
            }
            *out = descs;
            *count = n;
            return 0;
        }
        PyMem_RawFree(descs); /* more replicas than room: ask again with enough */
        capacity = n;
    }
    return MC_ERR_INTERNAL_ERROR;
}

static PyObject *replica_list(const mc_replica_desc_t *descs, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *d = mcpy_replica_descriptor_new(&descs[i]);
        if (!d) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

static PyObject *store_get_replica_desc(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"key", NULL};
    PyObject *key_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_replica_desc", kwlist, &key_obj))
        return NULL;
    const char *key = NULL;
    int rc = mcpy_key(key_obj, &key);
    if (rc != 0)
        return PyErr_Occurred() ? NULL : PyList_New(0);
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    mc_replica_desc_t *descs = NULL;
    size_t n = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = fetch_replicas(s, key, &descs, &n);
    Py_END_ALLOW_THREADS
    PyObject *list = replica_list(descs, rc == 0 ? n : 0);
    PyMem_RawFree(descs);
    return list;
}

static PyObject *store_batch_get_replica_desc(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"keys", NULL};
    PyObject *keys_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_get_replica_desc", kwlist, &keys_obj))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    size_t n = (size_t)keys.n;
    mc_replica_desc_t **descs = PyMem_Calloc(n ? n : 1, sizeof(mc_replica_desc_t *));
    size_t *counts = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    PyObject *dict = NULL;
    if (!descs || !counts) {
        PyErr_NoMemory();
        goto out;
    }
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        if (keys.ptrs[i] && fetch_replicas(s, keys.ptrs[i], &descs[i], &counts[i]) != 0)
            counts[i] = 0;
    }
    Py_END_ALLOW_THREADS
    dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        PyObject *list = replica_list(descs[i], counts[i]);
        if (!list || PyDict_SetItem(dict, keys.objs[i], list) != 0)
            Py_CLEAR(dict);
        Py_XDECREF(list);
    }
out:
    for (size_t i = 0; descs && i < n; i++)
        PyMem_RawFree(descs[i]);
    PyMem_Free(descs);
    PyMem_Free(counts);
    mcpy_keys_free(&keys);
    return dict;
}

/* ---- segments mounted at run time, init_all --------------------------------------------- */

/* Upstream's -1 for every failure of these methods that is not the master's own error code
 * (RealClient::mountSegment & co. answer -1 for bad arguments and unknown ids). */
static int seg_code(int rc)
{
    return rc == MC_ERR_INVALID_PARAMS || rc == MC_ERR_INTERNAL_ERROR ||
                   rc == MC_ERR_UNAVAILABLE_IN_CURRENT_MODE /* a dummy */
               ? -1
               : rc;
}

/* {"ret": ret, "segment_ids": [id] or []} plus "allocated_size" when allocated >= 0. */
static PyObject *mount_result(int ret, const char *id, long long allocated)
{
    PyObject *ids = ret == 0 ? Py_BuildValue("[s]", id) : PyList_New(0);
    if (!ids)
        return NULL;
    PyObject *d = allocated >= 0 ? Py_BuildValue("{s:i,s:N,s:L}", "ret", ret, "segment_ids", ids,
                                                 "allocated_size", allocated)
                                 : Py_BuildValue("{s:i,s:N}", "ret", ret, "segment_ids", ids);
    return d;
}

/* mount_segment(path, size, offset=0, protocol="tcp", location="") -> dict */
static PyObject *store_mount_segment(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "size", "offset", "protocol", "location", NULL};
    const char *path, *protocol = "tcp", *location = "";
    PyObject *size_obj, *offset_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|Oss", kwlist, &path, &size_obj, &offset_obj,
                                     &protocol, &location))
        return NULL;
    uint64_t size = 0, offset = 0;
    int rc = mcpy_unsigned(size_obj, MC_MAX_VALUE_SIZE, &size, "size");
    if (rc == 0 && offset_obj)
        rc = mcpy_unsigned(offset_obj, UINT64_MAX, &offset, "offset");
    if (rc == -1)
        return NULL;
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    char id[MC_STORE_SEGMENT_ID_MAX] = "";
    if (rc == 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = mc_store_mount_file_segment(s, path, offset, size, protocol, id);
        Py_END_ALLOW_THREADS
    }
    (void)location; /* a NUMA/device hint upstream; nothing to place here */
    return mount_result(rc == 0 ? 0 : -1, id, -1);
}

/* allocate_and_mount_segment(size, protocol="tcp", location="") -> dict */
static PyObject *store_allocate_and_mount_segment(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"size", "protocol", "location", NULL};
    const char *protocol = "tcp", *location = "";
    PyObject *size_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|ss", kwlist, &size_obj, &protocol, &location))
        return NULL;
    uint64_t size = 0, allocated = 0;
    int rc = mcpy_unsigned(size_obj, MC_MAX_VALUE_SIZE, &size, "size");
    if (rc == -1)
        return NULL;
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    char id[MC_STORE_SEGMENT_ID_MAX] = "";
    if (rc == 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = mc_store_allocate_and_mount_segment(s, size, protocol, id, &allocated);
        Py_END_ALLOW_THREADS
    }
    (void)location;
    return mount_result(rc == 0 ? 0 : -1, id, rc == 0 ? (long long)allocated : 0);
}

/* Unmounts every id of `ids` with fn; the first failure's code (upstream), or 0. */
static PyObject *unmount_ids(PyObject *obj, PyObject *args, PyObject *kw,
                             int (*fn)(mc_store_t *, const char *, uint64_t))
{
    static char *kwlist[] = {"segment_ids", "grace_period_seconds", NULL};
    PyObject *ids_obj, *grace_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &ids_obj, &grace_obj))
        return NULL;
    uint64_t grace_s = 0;
    int first = grace_obj
                    ? mcpy_unsigned(grace_obj, UINT64_MAX / 1000, &grace_s, "grace_period_seconds")
                    : 0;
    if (first == -1)
        return NULL;
    if (first != 0)
        return PyLong_FromLong(-1);
    mcpy_keys_t ids;
    if (PyUnicode_Check(ids_obj) || PyBytes_Check(ids_obj)) {
        PyErr_SetString(PyExc_TypeError, "segment_ids must be a list of str");
        return NULL;
    }
    if (mcpy_keys_from(ids_obj, &ids, "segment_ids") != 0)
        return NULL;
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < ids.n; i++) {
        int rc = ids.ptrs[i] ? fn(s, ids.ptrs[i], grace_s * 1000) : MC_ERR_INVALID_PARAMS;
        if (rc != 0 && first == 0)
            first = seg_code(rc);
    }
    Py_END_ALLOW_THREADS
    mcpy_keys_free(&ids);
    return PyLong_FromLong(first);
}

static PyObject *store_unmount_segment(PyObject *obj, PyObject *args, PyObject *kw)
{
    return unmount_ids(obj, args, kw, mc_store_unmount_segment);
}

static PyObject *store_unmount_and_free_segment(PyObject *obj, PyObject *args, PyObject *kw)
{
    return unmount_ids(obj, args, kw, mc_store_unmount_and_free_segment);
}

/* unmount_local_disk_segment(grace_period_seconds=0) -> int */
static PyObject *store_unmount_local_disk_segment(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"grace_period_seconds", NULL};
    PyObject *grace_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &grace_obj))
        return NULL;
    uint64_t grace_s = 0;
    int rc = grace_obj
                 ? mcpy_unsigned(grace_obj, UINT64_MAX / 1000, &grace_s, "grace_period_seconds")
                 : 0;
    if (rc == -1)
        return NULL;
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    if (rc == 0) {
        if (!s)
            return PyLong_FromLong(-1); /* upstream: "Client not initialized" */
        Py_BEGIN_ALLOW_THREADS
        rc = mc_store_unmount_local_disk(s, grace_s * 1000);
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLong(rc == 0 ? 0 : -1);
}

/* init_all(protocol, device_name, mount_segment_size=16 MiB) -> int: upstream's
 * RealClient::initAll, i.e. setup("localhost:12345", <metadata>, mount_segment_size, 1 GiB,
 * protocol, device_name) with the default master 127.0.0.1:50051. */
static PyObject *store_init_all(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"protocol", "device_name", "mount_segment_size", NULL};
    PyObject *protocol, *device, *size = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "UU|O", kwlist, &protocol, &device, &size))
        return NULL;
    McStoreObject *self = (McStoreObject *)obj;
    if (self->state == MCPY_STORE_READY) {
        /* a dummy is the only set-up store without a segment name (mc_store_get_hostname) */
        int dummy = mc_store_get_hostname(self->store)[0] == '\0';
        MC_ERROR("init_all: %s", dummy ? "not on a dummy client" : "this store is already set up");
        /* upstream: -1 on a dummy (DummyClient::initAll), INVALID_PARAMS on a real client */
        return PyLong_FromLong(dummy ? -1 : MC_ERR_INVALID_PARAMS);
    }
    PyObject *seg = size ? Py_NewRef(size) : PyLong_FromUnsignedLongLong(MCPY_INIT_ALL_SEGMENT);
    if (!seg)
        return NULL;
    /* upstream passes the etcd address "127.0.0.1:2379" (needing an etcd there); P2PHANDSHAKE
     * finds segments the same way for every peer without one */
    PyObject *r = PyObject_CallMethod(obj, "setup", "ssOKOOs", "localhost:12345", "P2PHANDSHAKE",
                                      seg, (unsigned long long)MCPY_INIT_ALL_BUFFER, protocol,
                                      device, "127.0.0.1:50051");
    Py_DECREF(seg);
    return r;
}

/* ---- method table ------------------------------------------------------------------------ */

#define EXIST_DOC                                                                                  \
    "(key) -> int\n\n"                                                                             \
    "1 when the object exists, 0 when not, or a negative code (-400 invalid key, -600 not set\n"   \
    "up, -900 master unreachable). An existing object gets a read lease, as upstream.\n"

/* get_offload_rpc_read_count() -> int: reads this client served from disk replicas. */
static PyObject *store_get_offload_rpc_read_count(PyObject *obj, PyObject *unused)
{
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    mc_store_offload_stats_t st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_get_offload_stats(s, &st);
    Py_END_ALLOW_THREADS
    /* upstream answers 0 for a client that cannot read offloaded objects */
    return PyLong_FromUnsignedLongLong(rc == 0 ? st.fallback_reads : 0);
}

/* ---- replica copy/move tasks, replica clear ------------------------------------------------ */

#define NIL_TASK_ID "00000000-0000-0000-0000-000000000000" /* upstream's UUID{0, 0} */

static PyObject *task_result(int rc, const char *id)
{
    return Py_BuildValue("(si)", rc == 0 ? id : NIL_TASK_ID, rc);
}

static PyObject *store_create_copy_task(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"key", "targets", NULL};
    PyObject *key_obj, *targets_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:create_copy_task", kwlist, &key_obj,
                                     &targets_obj))
        return NULL;
    const char *key = NULL;
    int rc = mcpy_key(key_obj, &key);
    if (rc != 0)
        return PyErr_Occurred() ? NULL : task_result(rc, NULL);
    mcpy_keys_t targets;
    if (mcpy_keys_from(targets_obj, &targets, "targets") != 0)
        return NULL;
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    char id[MC_TASK_ID_LEN + 1] = "";
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_create_copy_task(s, key, targets.ptrs, (size_t)targets.n, id);
    Py_END_ALLOW_THREADS
    mcpy_keys_free(&targets);
    return task_result(rc, id);
}

static PyObject *store_create_move_task(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"key", "source", "target", NULL};
    PyObject *key_obj;
    const char *source, *target;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oss:create_move_task", kwlist, &key_obj, &source,
                                     &target))
        return NULL;
    const char *key = NULL;
    int rc = mcpy_key(key_obj, &key);
    if (rc != 0)
        return PyErr_Occurred() ? NULL : task_result(rc, NULL);
    /* The strings belong to the argument tuple, which outlives the call. */
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    char id[MC_TASK_ID_LEN + 1] = "";
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_create_move_task(s, key, source, target, id);
    Py_END_ALLOW_THREADS
    return task_result(rc, id);
}

/* A task id: the text UUID, or upstream's (high, low) pair of 64-bit ints. 0, or
 * MC_ERR_INVALID_PARAMS (no exception) for anything else. */
static int task_id_from(PyObject *o, char out[MC_TASK_ID_LEN + 1])
{
    if (PyUnicode_Check(o)) {
        Py_ssize_t n;
        const char *t = PyUnicode_AsUTF8AndSize(o, &n);
        if (!t) {
            PyErr_Clear();
            return MC_ERR_INVALID_PARAMS;
        }
        if (n != MC_TASK_ID_LEN)
            return MC_ERR_INVALID_PARAMS;
        memcpy(out, t, MC_TASK_ID_LEN + 1);
        return 0;
    }
    unsigned long long hi, lo;
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2)
        return MC_ERR_INVALID_PARAMS;
    hi = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(o, 0));
    lo = PyErr_Occurred() ? 0 : PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(o, 1));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return MC_ERR_INVALID_PARAMS;
    }
    snprintf(out, MC_TASK_ID_LEN + 1, "%08llx-%04llx-%04llx-%04llx-%012llx", hi >> 32,
             (hi >> 16) & 0xffff, hi & 0xffff, lo >> 48, lo & 0xffffffffffffull);
    return 0;
}

static PyObject *store_query_task_raw(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"task_id", NULL};
    PyObject *id_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:_query_task", kwlist, &id_obj))
        return NULL;
    char id[MC_TASK_ID_LEN + 1];
    int rc = task_id_from(id_obj, id);
    mc_task_info_t info;
    if (rc == 0) {
        mc_store_t *s = mcpy_store((McStoreObject *)obj);
        Py_BEGIN_ALLOW_THREADS
        rc = mc_store_query_task(s, id, &info);
        Py_END_ALLOW_THREADS
    }
    if (rc != 0)
        return Py_BuildValue("(Oi)", Py_None, rc);
    return Py_BuildValue("((siiKKss)i)", info.id, (int)info.type, (int)info.status,
                         (unsigned long long)info.created_at_ms_epoch,
                         (unsigned long long)info.last_updated_at_ms_epoch, info.assigned_client,
                         info.message, 0);
}

static PyObject *store_batch_replica_clear(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"keys", "segment_name", NULL};
    PyObject *keys_obj;
    const char *segment = "";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|s:batch_replica_clear", kwlist, &keys_obj,
                                     &segment))
        return NULL;
    mcpy_keys_t keys;
    if (mcpy_keys_from(keys_obj, &keys, "keys") != 0)
        return NULL;
    size_t n = (size_t)keys.n;
    int *cleared = PyMem_Calloc(n ? n : 1, sizeof(int));
    const char **valid = PyMem_Calloc(n ? n : 1, sizeof(char *));
    if (!cleared || !valid) {
        PyMem_Free(cleared);
        PyMem_Free(valid);
        mcpy_keys_free(&keys);
        return PyErr_NoMemory();
    }
    size_t m = 0; /* keys C can take (a NUL inside is never an object's key) */
    for (size_t i = 0; i < n; i++) {
        if (keys.ptrs[i])
            valid[m++] = keys.ptrs[i];
    }
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_batch_replica_clear(s, valid, m, segment, cleared);
    Py_END_ALLOW_THREADS
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && rc == 0 && i < m; i++) {
        if (cleared[i]) {
            PyObject *k = PyUnicode_FromString(valid[i]);
            if (!k || PyList_Append(list, k) != 0)
                Py_CLEAR(list);
            Py_XDECREF(k);
        }
    }
    PyMem_Free(cleared);
    PyMem_Free(valid);
    mcpy_keys_free(&keys);
    return list;
}

#define TASKS_DOC_TAIL                                                                             \
    "The task runs on the client holding the source replica (its task executor polls the\n"        \
    "master every second); the new replica becomes visible only once its bytes are written\n"      \
    "and verified. Follow it with query_task(task_id)."

PyMethodDef mcpy_store_meta_methods[] = {
    {"get_offload_rpc_read_count", store_get_offload_rpc_read_count, METH_NOARGS,
     "get_offload_rpc_read_count() -> int\n\n"
     "How many reads this client has served from disk replicas (its own offloaded files, a\n"
     "peer's through the peer's offload server, or the distributed backend) since setup; 0\n"
     "when not set up. Upstream counts the offload-RPC reads of its real client (attempts, not\n"
     "successes); here only reads that returned the object count."},
    {"mount_segment", MCPY_KW(store_mount_segment), METH_VARARGS | METH_KEYWORDS,
     "mount_segment(path, size, offset=0, protocol=\"tcp\", location=\"\") -> dict\n\n"
     "Maps [offset, offset+size) of the file at `path` (read-write, shared; e.g.\n"
     "/dev/shm/<name>) and contributes it to the pool as a new segment of this client, reached\n"
     "by peers through this client's endpoint. offset must be page-aligned and the range inside\n"
     "the file. Returns {\"ret\": 0, \"segment_ids\": [id]} or {\"ret\": -1, \"segment_ids\": []}\n"
     "(bad arguments, master refusal, not set up). protocol: \"tcp\" or the engine's;\n"
     "location is accepted and unused. Matches upstream RealClient::mountSegment (one segment\n"
     "per call here)."},
    {"allocate_and_mount_segment", MCPY_KW(store_allocate_and_mount_segment),
     METH_VARARGS | METH_KEYWORDS,
     "allocate_and_mount_segment(size, protocol=\"tcp\", location=\"\") -> dict\n\n"
     "Allocates size bytes rounded up to 4 MiB (upstream's slab) and mounts them as a new\n"
     "segment. Returns {\"ret\": 0, \"segment_ids\": [id], \"allocated_size\": bytes}, or ret -1,\n"
     "[] and 0 (size 0 or above 1 TiB, master refusal, not set up)."},
    {"unmount_segment", MCPY_KW(store_unmount_segment), METH_VARARGS | METH_KEYWORDS,
     "unmount_segment(segment_ids, grace_period_seconds=0) -> int\n\n"
     "Unmounts segments of mount_segment. grace 0: their replicas are dropped at once (objects\n"
     "without another replica are gone), then the file is unmapped. grace > 0: returns at once;\n"
     "no new object is placed on them, their objects stay readable for the grace period, then\n"
     "they are unmounted. 0, -1 for an id this client did not mount with mount_segment (the\n"
     "others are still unmounted), or the master's error code; the first failure is returned."},
    {"unmount_and_free_segment", MCPY_KW(store_unmount_and_free_segment),
     METH_VARARGS | METH_KEYWORDS,
     "unmount_and_free_segment(segment_ids, grace_period_seconds=0) -> int\n\n"
     "unmount_segment for segments of allocate_and_mount_segment; their memory is freed."},
    {"unmount_local_disk_segment", MCPY_KW(store_unmount_local_disk_segment),
     METH_VARARGS | METH_KEYWORDS,
     "unmount_local_disk_segment(grace_period_seconds=0) -> int\n\n"
     "Stops this client's disk tier: offloading stops, the master drops its local-disk\n"
     "replicas, then the call waits grace_period_seconds (<= 3600). 0 (also when this client\n"
     "does not offload, as upstream), or -1."},
    {"init_all", MCPY_KW(store_init_all), METH_VARARGS | METH_KEYWORDS,
     "init_all(protocol, device_name, mount_segment_size=16777216) -> int\n\n"
     "Upstream's shortcut: setup(\"localhost:12345\", \"P2PHANDSHAKE\", mount_segment_size,\n"
     "1 GiB, protocol, device_name, \"127.0.0.1:50051\"). Upstream's metadata is etcd at\n"
     "127.0.0.1:2379; this one needs no etcd there (setup takes etcd:// when you want it).\n"
     "-600 when already set up."},
    {"is_exist", MCPY_KW(store_is_exist), METH_VARARGS | METH_KEYWORDS, "is_exist" EXIST_DOC},
    {"isExist", MCPY_KW(store_isExist), METH_VARARGS | METH_KEYWORDS,
     "isExist" EXIST_DOC "Alias of is_exist (store_kv_bench.py calls this name)."},
    {"batch_is_exist", MCPY_KW(store_batch_is_exist), METH_VARARGS | METH_KEYWORDS,
     "batch_is_exist(keys) -> list[int]\n\nis_exist per key: 1, 0 or a negative code; [] for []."},
    {"get_size", MCPY_KW(store_get_size), METH_VARARGS | METH_KEYWORDS,
     "get_size(key) -> int\n\n"
     "The object's size in bytes, or a negative code (-704 not found, -400 invalid key).\n"
     "Grants a read lease."},
    {"remove", MCPY_KW(store_remove), METH_VARARGS | METH_KEYWORDS,
     "remove(key, force=False) -> int\n\n"
     "Removes the object: 0, -704 not found, -706 a read lease is active (get / is_exist /\n"
     "get_size grant one; force=True removes anyway), -400 invalid key."},
    {"batch_remove", MCPY_KW(store_batch_remove), METH_VARARGS | METH_KEYWORDS,
     "batch_remove(keys, force=False) -> list[int]\n\nremove per key, in one batch."},
    {"remove_all", MCPY_KW(store_remove_all), METH_VARARGS | METH_KEYWORDS,
     "remove_all(force=False) -> int\n\n"
     "Removes every object (leased ones only with force=True). Returns the number removed, or\n"
     "-1 on any error (as upstream)."},
    {"remove_by_regex", MCPY_KW(store_remove_by_regex), METH_VARARGS | METH_KEYWORDS,
     "remove_by_regex(regex_pattern, force=False) -> int\n\n"
     "Removes the objects whose keys match `regex_pattern` (str) anywhere (anchor with ^ and\n"
     "$). Upstream's ECMAScript patterns, run by PCRE2 on the master with ECMAScript options.\n"
     "Returns the number removed, or a negative code: -600 for an invalid pattern, one over\n"
     "4096 bytes, or one exceeding the master's per-key match limits (nothing is removed then);\n"
     "-601 when the master does not know this client (just after a master restart)."},
    {"register_buffer", MCPY_KW(store_register_buffer), METH_VARARGS | METH_KEYWORDS,
     "register_buffer(buffer_ptr, size) -> int\n\n"
     "Registers `size` bytes at address `buffer_ptr` (int) for the zero-copy calls (put_from,\n"
     "get_into, ...). The caller keeps ownership and must keep the memory valid until\n"
     "unregister_buffer() or close(). Returns 0, or -600 (null pointer, size 0, negative\n"
     "values, store not set up)."},
    {"unregister_buffer", MCPY_KW(store_unregister_buffer), METH_VARARGS | METH_KEYWORDS,
     "unregister_buffer(buffer_ptr) -> int\n\n"
     "Forgets a buffer registered at exactly `buffer_ptr`. Returns 0, or -600 when no buffer is\n"
     "registered there."},
    {"get_replica_desc", MCPY_KW(store_get_replica_desc), METH_VARARGS | METH_KEYWORDS,
     "get_replica_desc(key) -> list[ReplicaDescriptor]\n\n"
     "Where the complete replicas of the object are; [] when it does not exist or on any error."},
    {"batch_get_replica_desc", MCPY_KW(store_batch_get_replica_desc), METH_VARARGS | METH_KEYWORDS,
     "batch_get_replica_desc(keys) -> dict[key, list[ReplicaDescriptor]]\n\n"
     "get_replica_desc for every key; each key maps to [] when missing or failed."},
    {"create_copy_task", MCPY_KW(store_create_copy_task), METH_VARARGS | METH_KEYWORDS,
     "create_copy_task(key, targets) -> tuple[str, int]\n\n"
     "Queues a copy of the object onto each segment in `targets` (segment names \"host:port\").\n"
     "Returns (task_id, 0) or (\"00000000-0000-0000-0000-000000000000\", code): -704 no such\n"
     "object, -600 no/unknown target, -710 no memory replica to copy, -1401 pending-task limit.\n"
     "Upstream returns the id as a UUID pair; here it is its text form.\n" TASKS_DOC_TAIL},
    {"create_move_task", MCPY_KW(store_create_move_task), METH_VARARGS | METH_KEYWORDS,
     "create_move_task(key, source, target) -> tuple[str, int]\n\n"
     "Queues a move of the object's replica on segment `source` to segment `target`; codes as\n"
     "create_copy_task, and -600 when source == target or no replica is on "
     "`source`.\n" TASKS_DOC_TAIL},
    {"_query_task", MCPY_KW(store_query_task_raw), METH_VARARGS | METH_KEYWORDS,
     "_query_task(task_id) -> tuple[tuple|None, int]\n\n"
     "The raw fields of query_task (mooncake.store wraps them in QueryTaskResponse)."},
    {"batch_replica_clear", MCPY_KW(store_batch_replica_clear), METH_VARARGS | METH_KEYWORDS,
     "batch_replica_clear(keys, segment_name=\"\") -> list[str]\n\n"
     "Upstream's replica clear: of `keys`, the objects this client put whose lease has run out\n"
     "lose all their replicas (segment_name \"\": the object is removed, unless a put of it is\n"
     "in progress) or their replica on segment `segment_name` (the object goes with its last\n"
     "one). Returns the keys cleared; [] on any error or when not set up."},
    {NULL},
};
