/*
 * store_dummy.c — MooncakeDistributedStore.setup_dummy() and alloc_from_mem_pool(): the dummy
 * client of upstream's dummy/real split (store.h "dummy clients", mc_store_setup_dummy).
 *
 * A store set up with setup_dummy forwards every method to the mooncake_client on this host
 * whose --port is the port of server_address (the C dispatch does it; every other method of the
 * type works unchanged). get_hostname() is "" on a dummy, as upstream.
 */
#include "mcpy.h"

#include "log.h"

#include <string.h>

static PyObject *store_setup_dummy(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    static char *kwlist[] = {"mem_pool_size", "local_buffer_size", "server_address",
                             "cluster_secret", NULL};
    PyObject *pool_obj, *buf_obj;
    const char *addr, *secret = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOs|z:setup_dummy", kwlist, &pool_obj, &buf_obj,
                                     &addr, &secret))
        return NULL;
    uint64_t pool, buffer;
    int rc = mcpy_unsigned(pool_obj, UINT64_MAX, &pool, "mem_pool_size");
    if (rc == 0)
        rc = mcpy_unsigned(buf_obj, UINT64_MAX, &buffer, "local_buffer_size");
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    if (rc != 0) {
        MC_ERROR("setup_dummy: sizes must be non-negative numbers of bytes");
        return PyLong_FromLong(-1);
    }
    if (self->state == MCPY_STORE_READY || self->state == MCPY_STORE_SETTING_UP ||
        self->state == MCPY_STORE_CLOSING) {
        MC_ERROR("setup_dummy: this store is set up (or being set up or closed); close() first");
        return PyLong_FromLong(-1);
    }
    mc_store_dummy_config_t cfg = {.real_client_addr = addr,
                                   .local_buffer_size = buffer,
                                   .mem_pool_size = pool,
                                   .cluster_secret = secret};
    mcpy_store_state_t before = self->state;
    self->state = MCPY_STORE_SETTING_UP;
    mc_store_t *handle = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_setup_dummy(&cfg, &handle);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        self->state = before;
        return PyLong_FromLong(-1); /* upstream: -1 for any failure */
    }
    PyObject *name = PyUnicode_FromStringAndSize("", 0);
    if (!name) {
        self->state = before;
        Py_BEGIN_ALLOW_THREADS
        mc_store_free(handle);
        Py_END_ALLOW_THREADS
        return NULL;
    }
    Py_XSETREF(self->hostname, name);
    self->store = handle;
    self->reg_count = 0;
    self->state = MCPY_STORE_READY;
    return PyLong_FromLong(0);
}

static PyObject *store_alloc_from_mem_pool(PyObject *obj, PyObject *arg)
{
    uint64_t size;
    int rc = mcpy_unsigned(arg, PY_SSIZE_T_MAX, &size, "size");
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    void *p = NULL;
    if (rc == 0 && size > 0 && s) {
        Py_BEGIN_ALLOW_THREADS
        rc = mc_store_alloc_shared(s, (size_t)size, &p);
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromVoidPtr(rc == 0 ? p : NULL);
}

PyMethodDef mcpy_store_dummy_methods[] = {
    {"setup_dummy", MCPY_KW(store_setup_dummy), METH_VARARGS | METH_KEYWORDS,
     "setup_dummy(mem_pool_size, local_buffer_size, server_address, cluster_secret=None) -> int\n\n"
     "Makes this store a dummy client of the mooncake_client on this host whose --port is the\n"
     "port of server_address (\"host:port\"; it serves the abstract unix socket\n"
     "@mooncake_client_<port>.sock). local_buffer_size bytes of shared memory stage the copying\n"
     "calls (put/get of bytes; -200 when full); mem_pool_size is accepted and unused, as\n"
     "upstream. Zero-copy calls need memory from alloc_from_mem_pool() or\n"
     "MooncakeHostMemAllocator, registered with register_buffer(ptr, size) naming exactly the\n"
     "allocation. While the real client is unreachable every call returns -900; the dummy\n"
     "reconnects every 2 s and recovers. cluster_secret (not in upstream): as setup().\n"
     "Returns 0, or -1 (no real client there, bad arguments, secret refused: see the log)."},
    {"alloc_from_mem_pool", store_alloc_from_mem_pool, METH_O,
     "alloc_from_mem_pool(size: int) -> int\n\n"
     "Address of `size` bytes of zeroed shared memory (a memfd the real client can map) owned\n"
     "by this store (freed when it is garbage-collected), or 0 (size 0, not set up, no memory)."},
    {NULL},
};
