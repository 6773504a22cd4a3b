/*
 * engine.c — `mooncake.engine` (imported as `mooncake._engine`, re-exported by
 * python/mooncake/engine.py): upstream Mooncake's Python Transfer Engine over the C Transfer
 * Engine (include/mooncake/transfer_engine.h). Module init, the TransferEngine object
 * (initialize, registration, managed buffers, probes, topology) and InnerTransferEngine.
 * Transfers are in engine_transfer.c. Matches upstream `TransferEnginePy`
 * (mooncake-integration/transfer_engine/transfer_engine_py.cpp): plain int results, TypeError
 * only for arguments of the wrong type; where we differ the method docstring says so.
 */
#include "engine.h"

#include "log.h"
#include "net.h"
#include "transfer_internal.h" /* mc_metadata_lookup: a peer's descriptor (probe, first buffer) */

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RPC_PORT_MIN_DEFAULT 15000 /* upstream MC_MIN_RPC_PORT */
#define RPC_PORT_MAX_DEFAULT 17000 /* upstream MC_MAX_RPC_PORT */

/* ---- small helpers ---------------------------------------------------------------------- */

static int str_arg(PyObject *obj, const char *what, const char **out)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(obj);
    return *out ? 0 : -1;
}

static int env_port(const char *name, int def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long p = strtol(v, &end, 10);
    if (*end || p < 1 || p > 65535) {
        MC_WARN("%s=\"%s\" is not a port (1..65535); using %d", name, v, def);
        return def;
    }
    return (int)p;
}

/* MC_TRANSFER_TIMEOUT as upstream: seconds, at least 5, default 30. */
static int timeout_from_env(void)
{
    const char *v = getenv("MC_TRANSFER_TIMEOUT");
    if (!v)
        return 30 * 1000;
    int s = atoi(v);
    return (s < 5 ? 5 : s) * 1000;
}

/* ---- object ----------------------------------------------------------------------------- */

static PyObject *engine_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kw && PyDict_GET_SIZE(kw) != 0)) {
        PyErr_SetString(PyExc_TypeError, "TransferEngine() takes no arguments");
        return NULL;
    }
    McEngineObject *self = (McEngineObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->ranges = PyMem_RawCalloc(MCPY_TE_MAX_RANGES, sizeof(*self->ranges));
    self->batches = PyMem_RawCalloc(MCPY_TE_MAX_BATCHES, sizeof(*self->batches));
    if (!self->ranges || !self->batches) {
        PyMem_RawFree(self->ranges);
        PyMem_RawFree(self->batches);
        self->ranges = NULL;
        self->batches = NULL;
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    pthread_mutex_init(&self->ranges_lock, NULL);
    pthread_mutex_init(&self->batches_lock, NULL);
    self->timeout_ms = timeout_from_env();
    self->rpc_port = -1;
    return (PyObject *)self;
}

static void engine_dealloc(PyObject *obj)
{
    McEngineObject *self = (McEngineObject *)obj;
    if (self->batches) { /* fully constructed */
        Py_BEGIN_ALLOW_THREADS
        mcpy_te_free_batches(self);
        mc_te_destroy(self->te); /* frees managed buffers, drops registrations */
        Py_END_ALLOW_THREADS
        pthread_mutex_destroy(&self->ranges_lock);
        pthread_mutex_destroy(&self->batches_lock);
    }
    PyMem_RawFree(self->ranges);
    PyMem_RawFree(self->batches);
    Py_TYPE(obj)->tp_free(obj);
}

/* ---- initialize ------------------------------------------------------------------------- */

/* 1 when a TCP socket can bind host:port now (nobody listens there), 0 when not, -1 when host
 * does not resolve. Quiet: the range scan below expects busy ports. */
static int port_is_free(const struct addrinfo *ai, int port)
{
    struct sockaddr_storage sa;
    memcpy(&sa, ai->ai_addr, ai->ai_addrlen);
    if (sa.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)port);
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* as the engine binds */
    int ok = bind(fd, (struct sockaddr *)&sa, ai->ai_addrlen) == 0;
    close(fd);
    return ok;
}

/* A port in [lo, hi] free at host right now: every port of the range is tried once, from a
 * random start. The port, or -1 (none free, or host does not resolve). */
static int pick_port(const char *host, int lo, int hi, unsigned *seed)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(mc_net_is_wildcard(host) ? NULL : host, "0", &hints, &ai) != 0 || !ai) {
        MC_ERROR("initialize: local_hostname host \"%s\" does not resolve", host);
        return -1;
    }
    int span = hi - lo + 1, found = -1;
    int start = (int)(rand_r(seed) % (unsigned)span);
    for (int i = 0; i < span && found < 0; i++) {
        int port = lo + (start + i) % span;
        if (port_is_free(ai, port))
            found = port;
    }
    freeaddrinfo(ai);
    if (found < 0)
        MC_ERROR("initialize: no free port for the Transfer Engine at %s in %d..%d "
                 "(MC_MIN_RPC_PORT/MC_MAX_RPC_PORT)",
                 host, lo, hi);
    return found;
}

/*
 * Creates the engine into *out. GIL released. metadata: "P2PHANDSHAKE" or a full connection
 * string. Returns 0 or -1 (with a line saying why).
 */
static int do_initialize(McEngineObject *self, const char *local_hostname, const char *metadata,
                         const char *protocol, const char *device_name, mc_transfer_engine_t **out)
{
    const char *proto;
    if (!strcmp(protocol, "tcp") || !*protocol) {
        proto = "tcp";
    } else if (!strcmp(protocol, "rdma")) {
        proto = "rdma";
    } else {
        MC_ERROR("initialize: protocol \"%s\" is not available in mooncake-c (it has tcp and "
                 "rdma; efa/cxi/nvlink/hip/musa/ascend/xgmi need hardware support this build "
                 "does not have)",
                 protocol);
        return -1;
    }
    int p2p = !strcmp(metadata, "P2PHANDSHAKE");
    /* etcd: "etcd://h:p[;h:p]" or no scheme (upstream reads a string without one as etcd) */
    int etcd = !p2p && (!strncmp(metadata, "etcd://", 7) || !strstr(metadata, "://"));
    if (!p2p && !etcd && strncmp(metadata, "http://", 7) != 0) {
        MC_ERROR("initialize: metadata server \"%s\": only \"P2PHANDSHAKE\", "
                 "\"http://host:port/metadata\" and etcd (\"etcd://host:port[;host:port]\" or "
                 "\"host:port\") are supported by mooncake-c",
                 metadata);
        return -1;
    }
    char host[MC_HOST_MAX];
    int port = 0;
    if (mc_net_split_endpoint(local_hostname, 0, host, &port) != 0) {
        MC_ERROR("initialize: local_hostname \"%s\" is not host or host:port", local_hostname);
        return -1;
    }
    /* P2PHANDSHAKE: always a random port in the RPC range (upstream ignores a port in
     * local_hostname there). HTTP or etcd metadata: the port in local_hostname when there is
     * one (our segment name is the endpoint, so it stays local_hostname verbatim), else random. */
    int random_port = p2p || port == 0;
    int lo = env_port("MC_MIN_RPC_PORT", RPC_PORT_MIN_DEFAULT);
    int hi = env_port("MC_MAX_RPC_PORT", RPC_PORT_MAX_DEFAULT);
    if (lo > hi) {
        MC_WARN("MC_MIN_RPC_PORT %d > MC_MAX_RPC_PORT %d; using %d..%d", lo, hi,
                RPC_PORT_MIN_DEFAULT, RPC_PORT_MAX_DEFAULT);
        lo = RPC_PORT_MIN_DEFAULT;
        hi = RPC_PORT_MAX_DEFAULT;
    }
    unsigned seed = (unsigned)getpid() ^ (unsigned)mc_now_ms() ^ (unsigned)(uintptr_t)self;
    int rc = MC_ERR_INTERNAL_ERROR;
    for (int attempt = 0; attempt < 4; attempt++) {
        if (random_port) {
            port = pick_port(host, lo, hi, &seed);
            if (port < 0)
                return -1;
        }
        char endpoint[MC_HOST_MAX + 16];
        if (strchr(host, ':'))
            snprintf(endpoint, sizeof(endpoint), "[%s]:%d", host, port);
        else
            snprintf(endpoint, sizeof(endpoint), "%s:%d", host, port);
        mc_transfer_engine_config_t tc = {
            .local_server_name = endpoint,
            .metadata_server = metadata,
            .protocol = proto,
            .device_names = *device_name ? device_name : NULL,
            .transfer_timeout_ms = self->timeout_ms,
            /* the cluster secret comes from MOONCAKE_CLUSTER_SECRET[_FILE] (mc_te_create) */
        };
        mc_transfer_engine_t *te = NULL;
        rc = mc_te_create(&tc, &te);
        if (rc == 0) {
            *out = te;
            return 0;
        }
        if (!random_port || rc != MC_ERR_INTERNAL_ERROR)
            break; /* only a lost race for the port is worth another try */
    }
    MC_ERROR("initialize: cannot start the Transfer Engine at %s (protocol %s): %s", local_hostname,
             proto, mc_error_name(rc));
    return -1;
}

static PyObject *run_initialize(McEngineObject *self, PyObject *host_o, PyObject *meta_o,
                                PyObject *proto_o, PyObject *dev_o, PyObject *type_o)
{
    const char *host, *meta, *proto, *dev, *type = NULL;
    if (str_arg(host_o, "local_hostname", &host) != 0 ||
        str_arg(meta_o, "metadata_server", &meta) != 0 ||
        str_arg(proto_o, "protocol", &proto) != 0 || str_arg(dev_o, "device_name", &dev) != 0 ||
        (type_o && str_arg(type_o, "metadata_type", &type) != 0))
        return NULL;
    if (self->te || self->initializing) {
        MC_ERROR("initialize: this TransferEngine is already initialized");
        return PyLong_FromLong(-1);
    }
    /* initialize_ext: "<type>://<server>" unless the server has a scheme or is P2PHANDSHAKE */
    char *conn = NULL;
    if (type && !strstr(meta, "://") && strcmp(meta, "P2PHANDSHAKE") != 0) {
        size_t n = strlen(type) + strlen(meta) + 4;
        conn = PyMem_Malloc(n);
        if (!conn)
            return PyErr_NoMemory();
        snprintf(conn, n, "%s://%s", type, meta);
        meta = conn;
    }
    self->initializing = 1;
    int ret;
    mc_transfer_engine_t *te = NULL;
    Py_BEGIN_ALLOW_THREADS
    ret = do_initialize(self, host, meta, proto, dev, &te);
    Py_END_ALLOW_THREADS
    self->initializing = 0;
    if (ret == 0) { /* published with the GIL held: threads that see te see it complete */
        char h[MC_HOST_MAX];
        int p;
        self->rpc_port =
            mc_net_split_endpoint(mc_te_local_segment_name(te), 0, h, &p) == 0 ? p : -1;
        self->te = te;
    }
    PyMem_Free(conn);
    return PyLong_FromLong(ret);
}

static PyObject *engine_initialize(PyObject *obj, PyObject *args)
{
    PyObject *h, *m, *p, *d;
    if (!PyArg_ParseTuple(args, "OOOO:initialize", &h, &m, &p, &d))
        return NULL;
    return run_initialize((McEngineObject *)obj, h, m, p, d, NULL);
}

static PyObject *engine_initialize_ext(PyObject *obj, PyObject *args)
{
    PyObject *h, *m, *p, *d, *t;
    if (!PyArg_ParseTuple(args, "OOOOO:initialize_ext", &h, &m, &p, &d, &t))
        return NULL;
    return run_initialize((McEngineObject *)obj, h, m, p, d, t);
}

static PyObject *engine_get_rpc_port(PyObject *obj, PyObject *noargs)
{
    return PyLong_FromLong(((McEngineObject *)obj)->rpc_port);
}

/* ---- registration ----------------------------------------------------------------------- */

/* The range of this object starting at addr, or NULL. With ranges_lock held. */
static mcpy_te_range_t *range_at_locked(McEngineObject *self, uint64_t addr)
{
    for (size_t i = 0; i < self->range_count; i++)
        if (self->ranges[i].addr == addr)
            return &self->ranges[i];
    return NULL;
}

static void range_remove_locked(McEngineObject *self, mcpy_te_range_t *r)
{
    *r = self->ranges[--self->range_count];
}

/* Registers one range. GIL released. 0 or a negative code. */
static int register_one(McEngineObject *self, uint64_t addr, uint64_t len)
{
    if (!self->te) {
        MC_ERROR("register_memory: the TransferEngine is not initialized");
        return MC_ERR_INVALID_PARAMS;
    }
    if (addr == 0 || len == 0 || addr + len < addr) {
        MC_ERROR("register_memory: bad range 0x%llx + %llu", (unsigned long long)addr,
                 (unsigned long long)len);
        return MC_ERR_INVALID_PARAMS;
    }
    pthread_mutex_lock(&self->ranges_lock);
    int rc;
    if (self->range_count >= MCPY_TE_MAX_RANGES) {
        MC_ERROR("register_memory: %d ranges registered already, the most", MCPY_TE_MAX_RANGES);
        rc = MC_ERR_INVALID_PARAMS;
    } else {
        rc = mc_te_register_memory(self->te, (void *)(uintptr_t)addr, (size_t)len);
        if (rc == 0)
            self->ranges[self->range_count++] = (mcpy_te_range_t){addr, len, 0};
    }
    pthread_mutex_unlock(&self->ranges_lock);
    return rc;
}

static int unregister_one(McEngineObject *self, uint64_t addr)
{
    if (!self->te)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&self->ranges_lock);
    int rc;
    mcpy_te_range_t *r = range_at_locked(self, addr);
    if (r && r->managed) {
        MC_ERROR("unregister_memory: 0x%llx is a managed buffer; free it with "
                 "free_managed_buffer",
                 (unsigned long long)addr);
        rc = MC_ERR_INVALID_PARAMS;
    } else {
        rc = mc_te_unregister_memory(self->te, (void *)(uintptr_t)addr);
        if (rc == 0 && r)
            range_remove_locked(self, r);
    }
    pthread_mutex_unlock(&self->ranges_lock);
    return rc;
}

static PyObject *engine_register_memory(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"buffer_addr", "capacity", "location", NULL};
    PyObject *a, *c, *loc = NULL;
    uint64_t addr, len;
    const char *l;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:register_memory", kwlist, &a, &c, &loc) ||
        mcpy_te_u64(a, "buffer_addr", &addr) != 0 || mcpy_te_u64(c, "capacity", &len) != 0 ||
        (loc && str_arg(loc, "location", &l) != 0))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = register_one((McEngineObject *)obj, addr, len);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

static PyObject *engine_unregister_memory(PyObject *obj, PyObject *args)
{
    PyObject *a;
    uint64_t addr;
    if (!PyArg_ParseTuple(args, "O:unregister_memory", &a) ||
        mcpy_te_u64(a, "buffer_addr", &addr) != 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = unregister_one((McEngineObject *)obj, addr);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

/* A list of ints into a PyMem array; 0 or -1 with TypeError. */
static int int_list(PyObject *obj, const char *what, uint64_t **out, Py_ssize_t *n)
{
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of int, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *seq = PySequence_Fast(obj, what);
    if (!seq)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    uint64_t *v = PyMem_Malloc(sizeof(*v) * (size_t)(len ? len : 1));
    if (!v) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (mcpy_te_u64(PySequence_Fast_GET_ITEM(seq, i), what, &v[i]) != 0) {
            Py_DECREF(seq);
            PyMem_Free(v);
            return -1;
        }
    }
    Py_DECREF(seq);
    *out = v;
    *n = len;
    return 0;
}

static PyObject *engine_batch_register_memory(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"buffer_addresses", "capacities", "location", NULL};
    PyObject *a, *c, *loc = NULL;
    const char *l;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:batch_register_memory", kwlist, &a, &c,
                                     &loc) ||
        (loc && str_arg(loc, "location", &l) != 0))
        return NULL;
    uint64_t *addrs = NULL, *lens = NULL;
    Py_ssize_t na, nl;
    if (int_list(a, "buffer_addresses", &addrs, &na) != 0)
        return NULL;
    if (int_list(c, "capacities", &lens, &nl) != 0) {
        PyMem_Free(addrs);
        return NULL;
    }
    McEngineObject *self = (McEngineObject *)obj;
    int rc = 0;
    if (na != nl) {
        MC_ERROR("batch_register_memory: %zd addresses but %zd capacities", na, nl);
        rc = -1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t i;
        for (i = 0; i < na && rc == 0; i++)
            rc = register_one(self, addrs[i], lens[i]);
        if (rc != 0) /* all or nothing: undo this call's registrations */
            for (Py_ssize_t j = 0; j + 1 < i; j++)
                unregister_one(self, addrs[j]);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(addrs);
    PyMem_Free(lens);
    return PyLong_FromLong(rc);
}

static PyObject *engine_batch_unregister_memory(PyObject *obj, PyObject *args)
{
    PyObject *a;
    if (!PyArg_ParseTuple(args, "O:batch_unregister_memory", &a))
        return NULL;
    uint64_t *addrs;
    Py_ssize_t n;
    if (int_list(a, "buffer_addresses", &addrs, &n) != 0)
        return NULL;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = unregister_one((McEngineObject *)obj, addrs[i]);
        if (r != 0 && rc == 0)
            rc = r; /* the first error; the others are still unregistered */
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(addrs);
    return PyLong_FromLong(rc);
}

/* ---- managed buffers and byte access ---------------------------------------------------- */

static PyObject *engine_allocate_managed_buffer(PyObject *obj, PyObject *args)
{
    McEngineObject *self = (McEngineObject *)obj;
    PyObject *l;
    uint64_t len;
    if (!PyArg_ParseTuple(args, "O:allocate_managed_buffer", &l) ||
        mcpy_te_u64(l, "length", &len) != 0)
        return NULL;
    void *addr = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (!self->te) {
        MC_ERROR("allocate_managed_buffer: the TransferEngine is not initialized");
    } else if (len == 0 || len > ((uint64_t)1 << 40)) {
        MC_ERROR("allocate_managed_buffer: length %llu is not in 1..2^40", (unsigned long long)len);
    } else {
        pthread_mutex_lock(&self->ranges_lock);
        if (self->range_count >= MCPY_TE_MAX_RANGES) {
            MC_ERROR("allocate_managed_buffer: %d ranges registered already, the most",
                     MCPY_TE_MAX_RANGES);
        } else {
            int rc = mc_te_alloc_segment_memory(self->te, (size_t)len, &addr);
            if (rc == 0)
                self->ranges[self->range_count++] = (mcpy_te_range_t){(uintptr_t)addr, len, 1};
            else
                MC_ERROR("allocate_managed_buffer(%llu): %s", (unsigned long long)len,
                         mc_error_name(rc));
        }
        pthread_mutex_unlock(&self->ranges_lock);
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong((uintptr_t)addr);
}

static PyObject *engine_free_managed_buffer(PyObject *obj, PyObject *args)
{
    McEngineObject *self = (McEngineObject *)obj;
    PyObject *a, *l;
    uint64_t addr, len;
    if (!PyArg_ParseTuple(args, "OO:free_managed_buffer", &a, &l) ||
        mcpy_te_u64(a, "buffer_addr", &addr) != 0 || mcpy_te_u64(l, "length", &len) != 0)
        return NULL;
    int rc = -1;
    Py_BEGIN_ALLOW_THREADS
    if (self->te) {
        pthread_mutex_lock(&self->ranges_lock);
        mcpy_te_range_t *r = range_at_locked(self, addr);
        if (!r || !r->managed)
            MC_ERROR("free_managed_buffer: 0x%llx is not a managed buffer of this engine",
                     (unsigned long long)addr);
        else if (r->length != len)
            MC_ERROR("free_managed_buffer: 0x%llx has %llu bytes, not %llu",
                     (unsigned long long)addr, (unsigned long long)r->length,
                     (unsigned long long)len);
        else if ((rc = mc_te_free_segment_memory(self->te, (void *)(uintptr_t)addr)) == 0)
            range_remove_locked(self, r);
        pthread_mutex_unlock(&self->ranges_lock);
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc < 0 ? -1 : 0);
}

/* 1 when [addr, addr+len) lies in one range of this object. With ranges_lock held. */
static int range_covers_locked(McEngineObject *self, uint64_t addr, uint64_t len)
{
    for (size_t i = 0; i < self->range_count; i++) {
        const mcpy_te_range_t *r = &self->ranges[i];
        if (addr >= r->addr && len <= r->length && addr - r->addr <= r->length - len)
            return 1;
    }
    return 0;
}

static PyObject *engine_write_bytes_to_buffer(PyObject *obj, PyObject *args)
{
    McEngineObject *self = (McEngineObject *)obj;
    PyObject *a, *src, *l;
    uint64_t addr, len;
    if (!PyArg_ParseTuple(args, "OOO:write_bytes_to_buffer", &a, &src, &l) ||
        mcpy_te_u64(a, "dest_address", &addr) != 0 || mcpy_te_u64(l, "length", &len) != 0)
        return NULL;
    if (!PyBytes_Check(src)) {
        PyErr_Format(PyExc_TypeError, "src must be bytes, not %.100s", Py_TYPE(src)->tp_name);
        return NULL;
    }
    if (len > (uint64_t)PyBytes_GET_SIZE(src)) {
        MC_ERROR("write_bytes_to_buffer: length %llu is more than the %zd bytes given",
                 (unsigned long long)len, PyBytes_GET_SIZE(src));
        return PyLong_FromLong(-1);
    }
    const char *data = PyBytes_AS_STRING(src); /* immutable, referenced by args */
    int ok;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->ranges_lock);
    ok = len == 0 || range_covers_locked(self, addr, len);
    if (ok && len)
        memcpy((void *)(uintptr_t)addr, data, (size_t)len);
    pthread_mutex_unlock(&self->ranges_lock);
    Py_END_ALLOW_THREADS
    if (!ok) {
        MC_ERROR("write_bytes_to_buffer: [0x%llx, +%llu) is not inside memory registered or "
                 "allocated through this TransferEngine",
                 (unsigned long long)addr, (unsigned long long)len);
        return PyLong_FromLong(-1);
    }
    return PyLong_FromLong(0);
}

static PyObject *engine_read_bytes_from_buffer(PyObject *obj, PyObject *args)
{
    McEngineObject *self = (McEngineObject *)obj;
    PyObject *a, *l;
    uint64_t addr, len;
    if (!PyArg_ParseTuple(args, "OO:read_bytes_from_buffer", &a, &l) ||
        mcpy_te_u64(a, "source_address", &addr) != 0 || mcpy_te_u64(l, "length", &len) != 0)
        return NULL;
    if (len > PY_SSIZE_T_MAX) {
        MC_ERROR("read_bytes_from_buffer: length %llu too large", (unsigned long long)len);
        return PyLong_FromLong(-1);
    }
    /* The range is checked before the output is allocated, so `length` cannot make this
     * process allocate more than it has registered; checked again under the lock for the copy. */
    int ok;
    pthread_mutex_lock(&self->ranges_lock);
    ok = len == 0 || range_covers_locked(self, addr, len);
    pthread_mutex_unlock(&self->ranges_lock);
    PyObject *out = NULL;
    if (!ok)
        goto outside;
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!out)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->ranges_lock);
    ok = len == 0 || range_covers_locked(self, addr, len);
    if (ok && len)
        memcpy(PyBytes_AS_STRING(out), (const void *)(uintptr_t)addr, (size_t)len);
    pthread_mutex_unlock(&self->ranges_lock);
    Py_END_ALLOW_THREADS
    if (ok)
        return out;
outside:
    Py_XDECREF(out);
    MC_ERROR("read_bytes_from_buffer: [0x%llx, +%llu) is not inside memory registered or "
             "allocated through this TransferEngine",
             (unsigned long long)addr, (unsigned long long)len);
    return PyLong_FromLong(-1);
}

/* ---- peers, topology -------------------------------------------------------------------- */

/* Looks a segment's descriptor up afresh (HTTP metadata or a handshake with its endpoint).
 * GIL released. 0 or a negative code. */
static int lookup(McEngineObject *self, const char *name, mc_segment_desc_t *desc)
{
    if (!self->te) {
        MC_ERROR("the TransferEngine is not initialized");
        return MC_ERR_INVALID_PARAMS;
    }
    memset(desc, 0, sizeof(*desc));
    return mc_metadata_lookup(self->te, name, desc, mc_now_ms() + (uint64_t)self->timeout_ms);
}

static PyObject *engine_get_first_buffer_address(PyObject *obj, PyObject *args)
{
    PyObject *n;
    const char *name;
    if (!PyArg_ParseTuple(args, "O:get_first_buffer_address", &n) ||
        str_arg(n, "segment_name", &name) != 0)
        return NULL;
    uint64_t addr = 0;
    Py_BEGIN_ALLOW_THREADS
    mc_segment_desc_t d;
    if (lookup((McEngineObject *)obj, name, &d) == 0) {
        for (size_t i = 0; i < d.count; i++) /* the lowest address: ours are kept sorted */
            if (addr == 0 || d.regions[i].addr < addr)
                addr = d.regions[i].addr;
        mc_desc_free(&d);
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong(addr);
}

static PyObject *engine_send_probe(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"peer_server_name", NULL};
    PyObject *n;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:send_probe", kwlist, &n) ||
        str_arg(n, "peer_server_name", &name) != 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    mc_segment_desc_t d;
    rc = lookup((McEngineObject *)obj, name, &d);
    if (rc == 0)
        mc_desc_free(&d);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc == 0 ? 0 : -1);
}

static PyObject *engine_warmup_efa_segment(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"segment_name", NULL};
    PyObject *n;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:warmup_efa_segment", kwlist, &n) ||
        str_arg(n, "segment_name", &name) != 0)
        return NULL;
    return PyLong_FromLong(0);
}

/* Appends to `list` the names in directory `dir` that start with `prefix` and, when `filter` is
 * a non-empty comma list, are in it. 0, or -1 with an exception. */
static int list_dir(const char *dir, const char *prefix, const char *filter, PyObject *list)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* no such directory: nothing to list */
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (filter && *filter) {
            size_t l = strlen(e->d_name);
            const char *p = filter;
            int hit = 0;
            while (*p && !hit) {
                size_t k = strcspn(p, ",");
                hit = k == l && !strncmp(p, e->d_name, l);
                p += k + (p[k] == ',');
            }
            if (!hit)
                continue;
        }
        PyObject *name = PyUnicode_DecodeFSDefault(e->d_name + strlen(prefix));
        rc = name ? PyList_Append(list, name) : -1;
        Py_XDECREF(name);
    }
    closedir(d);
    if (rc == 0)
        rc = PyList_Sort(list);
    return rc;
}

static PyObject *engine_get_local_topology(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"device_name", NULL};
    PyObject *dev_o = Py_None;
    const char *dev = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:get_local_topology", kwlist, &dev_o))
        return NULL;
    if (dev_o != Py_None && str_arg(dev_o, "device_name", &dev) != 0)
        return NULL;
    /* {"cpu:<node>": [[rdma devices], []], ...}: upstream's shape (preferred devices, then the
     * others, per NUMA node). We do not map devices to nodes: every RDMA device this host shows
     * (/sys/class/infiniband, filtered by device_name) is listed as preferred for each node. */
    PyObject *devs = PyList_New(0), *nodes = PyList_New(0), *topo = PyDict_New();
    PyObject *json = NULL, *out = NULL;
    if (!devs || !nodes || !topo || list_dir("/sys/class/infiniband", "", dev, devs) != 0 ||
        list_dir("/sys/devices/system/node", "node", NULL, nodes) != 0)
        goto done;
    if (PyList_GET_SIZE(nodes) == 0) {
        PyObject *zero = PyUnicode_FromString("0");
        if (!zero || PyList_Append(nodes, zero) != 0) {
            Py_XDECREF(zero);
            goto done;
        }
        Py_DECREF(zero);
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *key = PyUnicode_FromFormat("cpu:%U", PyList_GET_ITEM(nodes, i));
        PyObject *val = Py_BuildValue("[O[]]", devs);
        int rc = key && val ? PyDict_SetItem(topo, key, val) : -1;
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (rc != 0)
            goto done;
    }
    json = PyImport_ImportModule("json");
    if (json)
        out = PyObject_CallMethod(json, "dumps", "O", topo);
done:
    Py_XDECREF(json);
    Py_XDECREF(devs);
    Py_XDECREF(nodes);
    Py_XDECREF(topo);
    return out;
}

static PyObject *engine_get_notifies(PyObject *obj, PyObject *noargs)
{
    return PyList_New(0);
}

/* ---- InnerTransferEngine ---------------------------------------------------------------- */

typedef struct McInnerEngineObject {
    PyObject_HEAD
    McEngineObject *owner; /* strong reference: the engine lives as long as this handle */
} McInnerEngineObject;

static void inner_dealloc(PyObject *obj)
{
    Py_XDECREF(((McInnerEngineObject *)obj)->owner);
    Py_TYPE(obj)->tp_free(obj);
}

static PyObject *inner_repr(PyObject *obj)
{
    McEngineObject *o = ((McInnerEngineObject *)obj)->owner;
    return PyUnicode_FromFormat("<mooncake.engine.InnerTransferEngine %s>",
                                o && o->te ? mc_te_local_segment_name(o->te) : "(not initialized)");
}

PyTypeObject McInnerEngine_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_ENGINE_MODULE ".InnerTransferEngine",
    .tp_basicsize = sizeof(McInnerEngineObject),
    .tp_dealloc = inner_dealloc,
    .tp_repr = inner_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "InnerTransferEngine: the handle TransferEngine.get_engine() returns, to pass to\n"
              "MooncakeDistributedStore.setup(..., engine=handle) so the store moves its bytes\n"
              "through this engine instead of creating its own (matches upstream). It keeps\n"
              "its TransferEngine alive. Cannot be created from Python.",
};

int mcpy_inner_engine(PyObject *obj, mc_transfer_engine_t **te, PyObject **owner)
{
    if (!obj || !PyObject_TypeCheck(obj, &McInnerEngine_Type))
        return 0;
    McEngineObject *o = ((McInnerEngineObject *)obj)->owner;
    *te = o ? o->te : NULL;
    *owner = (PyObject *)o;
    return 1;
}

static PyObject *engine_get_engine(PyObject *obj, PyObject *noargs)
{
    McInnerEngineObject *h = PyObject_New(McInnerEngineObject, &McInnerEngine_Type);
    if (!h)
        return NULL;
    Py_INCREF(obj);
    h->owner = (McEngineObject *)obj;
    return (PyObject *)h;
}

static PyObject *engine_get_engine_ptr(PyObject *obj, PyObject *noargs)
{
    return PyLong_FromUnsignedLongLong((uintptr_t)((McEngineObject *)obj)->te);
}

/* ---- type and module -------------------------------------------------------------------- */

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef engine_methods[] = {
    {"initialize", engine_initialize, METH_VARARGS,
     "initialize(local_hostname, metadata_server, protocol, device_name, /) -> int\n\n"
     "Starts the engine. 0, or -1 (the log says why). Matches upstream: metadata_server\n"
     "\"P2PHANDSHAKE\" listens on a random free port in [MC_MIN_RPC_PORT=15000,\n"
     "MC_MAX_RPC_PORT=17000] of local_hostname's host (a port in local_hostname is ignored)\n"
     "and names the segment \"<host>:<rpc_port>\": peers use f\"{host}:{get_rpc_port()}\".\n"
     "\"http://host:port/metadata\" and etcd (\"etcd://h:p[;h:p]\", or \"h:p\" without a\n"
     "scheme, as upstream): the segment is named local_hostname verbatim when it has a port\n"
     "(the engine listens there), else \"<host>:<random port>\" (differs: upstream keeps the\n"
     "bare host). In etcd the descriptor lives under a lease of the engine (TTL\n"
     "MC_ETCD_METADATA_LEASE_TTL s, default 10; differs: upstream uses none). redis:// gives\n"
     "-1. protocol \"tcp\"\n"
     "or \"rdma\" (UCX; without an RDMA device it runs over UCX's tcp/shm); others give -1\n"
     "(differs: upstream falls back to tcp). device_name: comma list of RDMA devices, \"\" =\n"
     "automatic. The cluster secret comes from MOONCAKE_CLUSTER_SECRET[_FILE]. Once only.\n"
     "Releases the GIL."},
    {"initialize_ext", engine_initialize_ext, METH_VARARGS,
     "initialize_ext(local_hostname, metadata_server, protocol, device_name, metadata_type, /)\n"
     "-> int\n\nAs initialize with metadata \"<metadata_type>://<metadata_server>\" unless the\n"
     "server already has a scheme or is P2PHANDSHAKE (matches upstream)."},
    {"get_rpc_port", engine_get_rpc_port, METH_NOARGS,
     "get_rpc_port() -> int\n\nThe TCP port of this engine's handshake/transfer listener, the\n"
     "port of its segment name; -1 before initialize (matches upstream)."},
    {"register_memory", FN(engine_register_memory), KW,
     "register_memory(buffer_addr, capacity, location=\"*\") -> int\n\n"
     "Registers [buffer_addr, buffer_addr+capacity) (bytes of this process, caller-owned; keep\n"
     "it alive until unregister_memory) so peers can read/write it. 0 or a negative store code\n"
     "(-600 bad/overlapping range or not initialized). location is accepted and ignored (no\n"
     "NUMA/GPU placement). Releases the GIL. Matches upstream."},
    {"unregister_memory", engine_unregister_memory, METH_VARARGS,
     "unregister_memory(buffer_addr, /) -> int\n\n0 or a negative store code (-600 when not\n"
     "registered, or a managed buffer: use free_managed_buffer). Releases the GIL."},
    {"batch_register_memory", FN(engine_batch_register_memory), KW,
     "batch_register_memory(buffer_addresses, capacities, location=\"*\") -> int\n\n"
     "register_memory for each pair: 0, -1 when the lists differ in length, else the first\n"
     "error (then none of this call's ranges stays registered; upstream may keep some)."},
    {"batch_unregister_memory", engine_batch_unregister_memory, METH_VARARGS,
     "batch_unregister_memory(buffer_addresses, /) -> int\n\n0 or the first error (the other\n"
     "addresses are still unregistered)."},
    {"transfer_sync_write", FN(mcpy_te_transfer_sync_write), KW,
     "transfer_sync_write(target_hostname, buffer, peer_buffer_address, length,\n"
     "transport_hint=\"\") -> int\n\nCopies length bytes at local address buffer to\n"
     "peer_buffer_address in segment target_hostname (\"host:port\"), which must lie in the\n"
     "peer's registered memory (checked before any byte moves). Blocks until done: 0, or -1\n"
     "(unreachable/refused peer, unregistered range, timeout MC_TRANSFER_TIMEOUT). Releases\n"
     "the GIL. transport_hint is ignored (transport is chosen per peer: local, shm, tcp,\n"
     "rdma). Matches upstream."},
    {"transfer_sync_read", FN(mcpy_te_transfer_sync_read), KW,
     "transfer_sync_read(target_hostname, buffer, peer_buffer_address, length,\n"
     "transport_hint=\"\") -> int\n\nAs transfer_sync_write, from the peer into buffer."},
    {"transfer_sync", FN(mcpy_te_transfer_sync), KW,
     "transfer_sync(target_hostname, buffer, peer_buffer_address, length, opcode,\n"
     "notify=None, transport_hint=\"\") -> int\n\nopcode TransferOpcode.Read/Write. Differs:\n"
     "a notify (TransferNotify) gives -1 without moving bytes: this engine has no notify\n"
     "channel."},
    {"batch_transfer_sync_write", FN(mcpy_te_batch_sync_write), KW,
     "batch_transfer_sync_write(target_hostname, buffers, peer_buffer_addresses, lengths,\n"
     "transport_hint=\"\") -> int\n\nOne request per index of the three lists, run in\n"
     "parallel; blocks until all are done. 0 when all moved, else -1 (also on a list-length\n"
     "mismatch). Empty lists: 0. Releases the GIL. Matches upstream."},
    {"batch_transfer_sync_read", FN(mcpy_te_batch_sync_read), KW,
     "batch_transfer_sync_read(target_hostname, buffers, peer_buffer_addresses, lengths,\n"
     "transport_hint=\"\") -> int\n\nAs batch_transfer_sync_write, reading."},
    {"batch_transfer_sync", FN(mcpy_te_batch_sync), KW,
     "batch_transfer_sync(target_hostname, buffers, peer_buffer_addresses, lengths, opcode,\n"
     "notify=None, transport_hint=\"\") -> int\n\nAs the batch forms with an opcode; a notify\n"
     "gives -1 (no notify channel, differs)."},
    {"batch_transfer_async_write", FN(mcpy_te_batch_async_write), KW,
     "batch_transfer_async_write(target_hostname, buffers, peer_buffer_addresses, lengths,\n"
     "transport_hint=\"\") -> int\n\nStarts the batch and returns its id (an int != 0), or 0\n"
     "on failure (bad lists, unreachable peer, more than 1024 uncollected batches: differs,\n"
     "upstream has no bound). Collect it with get_batch_transfer_status or\n"
     "transfer_check_status; the local buffers must stay valid until then."},
    {"batch_transfer_async_read", FN(mcpy_te_batch_async_read), KW,
     "batch_transfer_async_read(target_hostname, buffers, peer_buffer_addresses, lengths,\n"
     "transport_hint=\"\") -> int\n\nAs batch_transfer_async_write, reading."},
    {"batch_transfer_async", FN(mcpy_te_batch_async), KW,
     "batch_transfer_async(target_hostname, buffers, peer_buffer_addresses, lengths, opcode,\n"
     "transport_hint=\"\") -> int\n\nAs the async forms with an opcode."},
    {"get_batch_transfer_status", mcpy_te_get_batch_transfer_status, METH_VARARGS,
     "get_batch_transfer_status(batch_ids, /) -> int\n\nWaits until every listed batch is\n"
     "done (each request is bounded by MC_TRANSFER_TIMEOUT) and frees the ids: 0 when all\n"
     "succeeded, -1 when any failed or an id is unknown/already collected. Releases the GIL.\n"
     "Matches upstream."},
    {"transfer_submit_write", FN(mcpy_te_transfer_submit_write), KW,
     "transfer_submit_write(target_hostname, buffer, peer_buffer_address, length,\n"
     "transport_hint=\"\") -> int\n\nOne asynchronous write: a batch id, or 0 on failure."},
    {"transfer_check_status", mcpy_te_transfer_check_status, METH_VARARGS,
     "transfer_check_status(batch_id, /) -> int\n\nNon-blocking: 1 completed (id freed), 0\n"
     "still running, -1 failed (id freed; also for an unknown or collected id), -2 still\n"
     "running past MC_TRANSFER_TIMEOUT (the id stays live). Matches upstream."},
    {"allocate_managed_buffer", engine_allocate_managed_buffer, METH_VARARGS,
     "allocate_managed_buffer(length, /) -> int\n\nlength bytes of registered memory (shared\n"
     "memory, so same-host peers copy straight into it), owned by this engine: its address,\n"
     "or 0 on failure. Free with free_managed_buffer; freed with the engine otherwise.\n"
     "Differs: one mapping per call, no buddy allocator."},
    {"free_managed_buffer", engine_free_managed_buffer, METH_VARARGS,
     "free_managed_buffer(buffer_addr, length, /) -> int\n\n0, or -1 when buffer_addr is not a\n"
     "managed buffer of this engine or length differs from the allocation (differs: upstream\n"
     "always answers 0)."},
    {"write_bytes_to_buffer", engine_write_bytes_to_buffer, METH_VARARGS,
     "write_bytes_to_buffer(dest_address, src, length, /) -> int\n\nCopies the first length\n"
     "bytes of src (bytes) to dest_address: 0, or -1 when length > len(src) or the range is\n"
     "not inside memory registered or allocated through this engine (differs: upstream\n"
     "copies to any address, which can crash the process)."},
    {"read_bytes_from_buffer", engine_read_bytes_from_buffer, METH_VARARGS,
     "read_bytes_from_buffer(source_address, length, /) -> bytes\n\nlength bytes from\n"
     "source_address, which must lie in memory registered or allocated through this engine;\n"
     "else -1 (an int; differs: upstream reads any address)."},
    {"get_first_buffer_address", engine_get_first_buffer_address, METH_VARARGS,
     "get_first_buffer_address(segment_name, /) -> int\n\nThe lowest address the segment has\n"
     "registered (asked afresh from its owner or the metadata service), 0 when it has none or\n"
     "cannot be reached. Differs: upstream gives the first in registration order."},
    {"get_local_topology", FN(engine_get_local_topology), KW,
     "get_local_topology(device_name=None) -> str\n\nJSON {\"cpu:<numa node>\": [[rdma\n"
     "devices], []], ...} as upstream's shape, from /sys: every RDMA device of this host\n"
     "(filtered by the comma list device_name) under each NUMA node (we do not map devices\n"
     "to nodes). No GPUs are listed (no CUDA support)."},
    {"get_notifies", engine_get_notifies, METH_NOARGS,
     "get_notifies() -> list\n\nAlways [] (absent: mooncake-c's Transfer Engine has no notify\n"
     "channel; transfers with a notify return -1)."},
    {"send_probe", FN(engine_send_probe), KW,
     "send_probe(peer_server_name) -> int\n\n0 when the segment answers a fresh handshake (or\n"
     "is found at the metadata service), -1 otherwise, within MC_TRANSFER_TIMEOUT. Releases\n"
     "the GIL. Matches upstream's meaning (0 = reachable)."},
    {"warmup_efa_segment", FN(engine_warmup_efa_segment), KW,
     "warmup_efa_segment(segment_name) -> int\n\n0: a no-op (no EFA), as upstream's non-EFA\n"
     "builds."},
    {"get_engine", engine_get_engine, METH_NOARGS,
     "get_engine() -> InnerTransferEngine\n\nA handle for MooncakeDistributedStore.setup(...,\n"
     "engine=handle); it keeps this TransferEngine alive. Matches upstream."},
    {"get_engine_ptr", engine_get_engine_ptr, METH_NOARGS,
     "get_engine_ptr() -> int\n\nAddress of the C mc_transfer_engine_t (0 before\n"
     "initialize); not upstream's C++ object, so it cannot be handed to upstream C++ code."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject McEngine_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_ENGINE_MODULE ".TransferEngine",
    .tp_basicsize = sizeof(McEngineObject),
    .tp_dealloc = engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = engine_new,
    .tp_methods = engine_methods,
    .tp_doc =
        "TransferEngine() — upstream Mooncake's Python Transfer Engine over mooncake-c's C\n"
        "engine: register memory, then read/write byte ranges of peers' registered memory.\n\n"
        "Create, then initialize(...) once. Addresses are ints (process virtual addresses),\n"
        "lengths bytes. Results are plain ints as upstream (0 / -1 / negative store codes /\n"
        "batch ids); only arguments of the wrong type raise TypeError. Reads MC_TRANSFER_TIMEOUT\n"
        "(seconds, at least 5, default 30) at construction: the bound on each transfer slice.\n"
        "Thread-safe: methods may be called from many threads; blocking calls release the GIL.\n"
        "Dropping the last reference stops the engine, frees its managed buffers and collects\n"
        "its batches.",
};

static struct PyModuleDef engine_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mooncake._engine",
    .m_doc = "mooncake._engine: the C part of mooncake.engine (import mooncake.engine).",
    .m_size = -1,
};

static int add_bool(PyObject *m, const char *name, int v)
{
    return PyModule_AddObjectRef(m, name, v ? Py_True : Py_False);
}

PyMODINIT_FUNC PyInit__engine(void)
{
    if (PyType_Ready(&McEngine_Type) < 0 || PyType_Ready(&McInnerEngine_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&engine_module);
    if (!m)
        return NULL;
    /* TransferOpcode: an IntEnum (arithmetic, as upstream's py::arithmetic enum). */
    PyObject *enum_mod = PyImport_ImportModule("enum");
    PyObject *opcode = enum_mod ? PyObject_CallMethod(enum_mod, "IntEnum", "s[(si)(si)]",
                                                      "TransferOpcode", "Read", 0, "Write", 1)
                                : NULL;
    Py_XDECREF(enum_mod);
    if (!opcode)
        goto fail;
    PyObject *modname = PyUnicode_FromString(MCPY_ENGINE_MODULE);
    int rc = modname ? PyObject_SetAttrString(opcode, "__module__", modname) : -1;
    Py_XDECREF(modname);
    if (rc != 0 || PyDict_SetItemString(McEngine_Type.tp_dict, "TransferOpcode", opcode) != 0) {
        Py_DECREF(opcode);
        goto fail;
    }
    PyType_Modified(&McEngine_Type);
    PyObject *rd = PyObject_GetAttrString(opcode, "Read");
    PyObject *wr = PyObject_GetAttrString(opcode, "Write");
    rc = rd && wr ? 0 : -1;
    if (rc == 0)
        rc = PyModule_AddObjectRef(m, "Read", rd);
    if (rc == 0)
        rc = PyModule_AddObjectRef(m, "Write", wr);
    Py_XDECREF(rd);
    Py_XDECREF(wr);
    if (rc != 0 || PyModule_AddObject(m, "TransferOpcode", opcode) != 0) {
        Py_DECREF(opcode);
        goto fail;
    }
#ifdef MC_HAVE_RDMA
    int rdma = 1;
#else
    int rdma = 0;
#endif
    if (add_bool(m, "SUPPORT_EFA", 0) || add_bool(m, "SUPPORT_HIP", 0) ||
        add_bool(m, "SUPPORT_MNNVL", 0) || add_bool(m, "SUPPORT_MUSA", 0) ||
        add_bool(m, "SUPPORT_INTRA_NVLINK", 0) || add_bool(m, "SUPPORT_CUDA", 0) ||
        add_bool(m, "_RDMA_TRANSPORT", rdma) ||
        PyModule_AddObjectRef(m, "TransferEngine", (PyObject *)&McEngine_Type) ||
        PyModule_AddObjectRef(m, "InnerTransferEngine", (PyObject *)&McInnerEngine_Type))
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
