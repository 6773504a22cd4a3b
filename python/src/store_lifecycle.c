/*
 * store_lifecycle.c — MooncakeDistributedStore: the object, setup() in both of upstream's forms,
 * close(), health_check(), get_hostname(), and the type (its method table is joined from the
 * per-file tables of store_write.c, store_read.c and store_meta.c).
 *
 * Lifecycle: NEW --setup--> READY --close--> CLOSED --setup--> READY ...; setup and close run
 * with the GIL released (they talk to the master), marked by the SETTING_UP / CLOSING states so a
 * concurrent setup or close from another thread is refused or is a no-op rather than racing.
 * Handles are freed only in tp_dealloc (see McStoreObject in mcpy.h for why).
 *
 * `engine` (TransferEngine.get_engine() of mooncake.engine): the store moves its bytes through
 * that engine (mc_store_config_t.transfer_engine); the object keeps a reference to it so the
 * engine outlives the store's use of it. enable_client_http_server / client_http_port start
 * the client HTTP server (src/client/client_http.h) as upstream. A tenant_id other than "default"
 * is accepted with a warning line and has no effect, as upstream against a master without
 * multi-tenancy (ours has none): every key is in the default tenant.
 *
 * As upstream (RealClient::setup_internal): setup(config: dict) answers INVALID_PARAMS (-600,
 * logged) for a value that does not parse or a missing local_hostname / metadata_server, and
 * ignores unknown keys (with a warning); a local_hostname without a port gets one of
 * [MC_STORE_CLIENT_MIN_PORT, MC_STORE_CLIENT_MAX_PORT] (setup_on_free_port). enable_ssd_offload /
 * ssd_offload_path map to the store's offload configuration (mc_store_config_t.enable_offload /
 * offload_path), as mooncake_client --enable_offload does.
 */
#include "mcpy.h"

#include "engine.h"
#include "log.h"
#include "net.h"
#include "parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MCPY_DEFAULT_MASTER "127.0.0.1:50051"
#define MCPY_DEFAULT_SIZE (16ull << 20) /* bytes: dict form's default segment and buffer size */
#define MCPY_MIN_SIZE 1024ull           /* bytes: dict-form sizes are 0 or at least this */
#define MCPY_MAX_SIZE (1ull << 40)      /* bytes: 1 TiB */

/* Everything setup() takes, in C form. Strings are borrowed from objects the caller keeps alive. */
typedef struct setup_args {
    const char *local_hostname;
    const char *metadata_server;
    uint64_t global_segment_size;
    uint64_t local_buffer_size;
    const char *protocol;
    const char *rdma_devices;
    const char *master_server_addr;
    PyObject *engine;
    int enable_ssd_offload;
    const char *ssd_offload_path;
    const char *tenant_id;
    int enable_client_http_server;
    int64_t client_http_port;
    const char *cluster_secret; /* NULL: MOONCAKE_CLUSTER_SECRET[_FILE] from the environment */
} setup_args_t;

static const setup_args_t setup_defaults = {
    .local_hostname = NULL,
    .metadata_server = NULL,
    .global_segment_size = MCPY_DEFAULT_SIZE,
    .local_buffer_size = MCPY_DEFAULT_SIZE,
    .protocol = "tcp",
    .rdma_devices = "",
    .master_server_addr = MCPY_DEFAULT_MASTER,
    .engine = NULL,
    .enable_ssd_offload = 0,
    .ssd_offload_path = "",
    .tenant_id = "default",
    .enable_client_http_server = 0,
    .client_http_port = 9300,
};

/* ---- object ------------------------------------------------------------------------------ */

static PyObject *store_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return type->tp_alloc(type, 0); /* zeroed: state NEW, no handle */
}

static void store_dealloc(PyObject *obj)
{
    McStoreObject *self = (McStoreObject *)obj;
    mc_store_t *live = self->store;
    mc_store_t **retired = self->retired;
    size_t n = self->retired_count;
    Py_BEGIN_ALLOW_THREADS
    mc_store_free(live); /* closes first: unmounts the segment, stops threads */
    for (size_t i = 0; i < n; i++)
        mc_store_free(retired[i]);
    Py_END_ALLOW_THREADS
    PyMem_Free(self->retired);
    PyMem_Free(self->regs);
    Py_XDECREF(self->hostname);
    Py_XDECREF(self->engine);
    Py_TYPE(obj)->tp_free(obj);
}

/* ---- setup ------------------------------------------------------------------------------- */

/* A str argument as UTF-8 (borrowed). 0, MC_ERR_INVALID_PARAMS (NUL inside), or -1 TypeError. */
static int str_arg(PyObject *obj, const char *what, const char **out)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(obj, &len);
    if (!p)
        return -1;
    if (strlen(p) != (size_t)len) {
        MC_ERROR("setup: %s contains a NUL character", what);
        return MC_ERR_INVALID_PARAMS;
    }
    *out = p;
    return 0;
}

/* ---- port selection (matches upstream RealClient::setup_internal) ---------------------------- */

#define MCPY_MIN_PORT_DEFAULT 12300
#define MCPY_MAX_PORT_DEFAULT 14300
#define MCPY_SETUP_RETRIES_DEFAULT 20

/* An integer environment variable in [lo, hi], else `fallback` (a bad value is logged). */
static long env_long(const char *name, long fallback, long lo, long hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        MC_WARN("setup: %s=\"%s\" is not an integer in %ld..%ld; using %ld", name, v, lo, hi,
                fallback);
        return fallback;
    }
    return x;
}

/* 1 when nothing listens on `port` of any local address right now (the probe upstream's
 * AutoPortBinder makes: bind INADDR_ANY:port). */
static int port_is_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/*
 * setup() for a local_hostname without a port, as upstream: up to MC_STORE_CLIENT_SETUP_RETRIES
 * (20) attempts, each on a random port of [MC_STORE_CLIENT_MIN_PORT, MC_STORE_CLIENT_MAX_PORT]
 * (12300..14300; an invalid range falls back to the defaults); a busy port, or a setup that
 * fails to bind it (MC_ERR_INTERNAL_ERROR), moves on to another port. Any other failure (master
 * unreachable, refused secret, bad arguments) is returned at once: another port cannot fix it.
 * All attempts used up: MC_ERR_INTERNAL_ERROR (-1), as upstream. Called without the GIL.
 */
static int setup_on_free_port(const mc_store_config_t *base, const char *host, mc_store_t **out)
{
    long lo = env_long("MC_STORE_CLIENT_MIN_PORT", MCPY_MIN_PORT_DEFAULT, 1, 65535);
    long hi = env_long("MC_STORE_CLIENT_MAX_PORT", MCPY_MAX_PORT_DEFAULT, 1, 65535);
    long retries = env_long("MC_STORE_CLIENT_SETUP_RETRIES", MCPY_SETUP_RETRIES_DEFAULT, 1, 1000);
    if (lo > hi) {
        MC_WARN("setup: MC_STORE_CLIENT_MIN_PORT %ld > MC_STORE_CLIENT_MAX_PORT %ld; using %d..%d",
                lo, hi, MCPY_MIN_PORT_DEFAULT, MCPY_MAX_PORT_DEFAULT);
        lo = MCPY_MIN_PORT_DEFAULT;
        hi = MCPY_MAX_PORT_DEFAULT;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned seed = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 16) ^ (unsigned)(uintptr_t)out;
    int bracket = strchr(host, ':') != NULL; /* IPv6 literal */
    for (long attempt = 1; attempt <= retries; attempt++) {
        int port = (int)(lo + (long)(rand_r(&seed) % (unsigned)(hi - lo + 1)));
        if (!port_is_free(port)) {
            MC_WARN("setup: port %d is busy, retry %ld/%ld", port, attempt, retries);
            continue;
        }
        char endpoint[MC_ENDPOINT_MAX];
        snprintf(endpoint, sizeof(endpoint), bracket ? "[%s]:%d" : "%s:%d", host, port);
        mc_store_config_t cfg = *base;
        cfg.local_hostname = endpoint;
        int rc = mc_store_setup(&cfg, out);
        if (rc == 0)
            return 0;
        if (rc != MC_ERR_INTERNAL_ERROR)
            return rc;
        MC_WARN("setup: could not serve on port %d, retry %ld/%ld", port, attempt, retries);
    }
    MC_ERROR("setup: no free port in %ld..%ld after %ld attempts (MC_STORE_CLIENT_MIN_PORT, "
             "MC_STORE_CLIENT_MAX_PORT, MC_STORE_CLIENT_SETUP_RETRIES)",
             lo, hi, retries);
    return MC_ERR_INTERNAL_ERROR;
}

/* Runs the C setup for a validated argument set; returns the int setup() returns. */
static PyObject *run_setup(McStoreObject *self, const setup_args_t *a)
{
    if (self->state == MCPY_STORE_READY) {
        MC_ERROR("setup: this store is already set up; call close() first");
        return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
    }
    if (self->state == MCPY_STORE_SETTING_UP || self->state == MCPY_STORE_CLOSING) {
        MC_ERROR("setup: another thread is setting up or closing this store");
        return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
    }
    mc_transfer_engine_t *shared = NULL;
    if (a->engine && a->engine != Py_None) {
        PyObject *owner;
        if (!mcpy_inner_engine(a->engine, &shared, &owner)) {
            PyErr_Format(PyExc_TypeError,
                         "engine must be an InnerTransferEngine (TransferEngine.get_engine()) "
                         "or None, not %.100s",
                         Py_TYPE(a->engine)->tp_name);
            return NULL;
        }
        if (!shared) {
            MC_ERROR("setup: engine: its TransferEngine is not initialized");
            return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
        }
    }
    if (strcmp(a->tenant_id, "default") != 0)
        /* matches upstream with a master without --enable_multi_tenants: the master resolves
         * every request to the default tenant (rpc_service.cpp); our master has no tenants */
        MC_WARN("setup: tenant_id \"%s\": this cluster has no multi-tenancy; this client's keys "
                "are in the default tenant, shared with every client (as upstream with a master "
                "without --enable_multi_tenants)",
                a->tenant_id);
    if (a->client_http_port < 1 || a->client_http_port > 65535) {
        MC_ERROR("setup: client_http_port %lld is not in 1..65535", (long long)a->client_http_port);
        return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
    }

    mc_store_config_t cfg = {.local_hostname = a->local_hostname,
                             .metadata_server = a->metadata_server,
                             .global_segment_size = a->global_segment_size,
                             .local_buffer_size = a->local_buffer_size,
                             .protocol = a->protocol,
                             .device_name = a->rdma_devices,
                             .master_server_addr = a->master_server_addr,
                             /* upstream's SSD offload: the backend comes from the
                              * MOONCAKE_OFFLOAD_* / MOONCAKE_DISTRIBUTED_* environment
                              * (docs/offload.md); ssd_offload_path overrides the local
                              * backend's directory */
                             .enable_offload = a->enable_ssd_offload,
                             .offload_path = a->ssd_offload_path,
                             .cluster_secret = a->cluster_secret,
                             .transfer_engine = shared,
                             /* upstream's client HTTP server, on local_hostname's host */
                             .enable_http_server = a->enable_client_http_server,
                             .http_port = (int)a->client_http_port};
    char host[MC_HOST_MAX];
    int port = -1;
    if (mc_net_split_endpoint(a->local_hostname, -1, host, &port) != 0) {
        MC_ERROR("setup: local_hostname \"%s\" is not host or host:port", a->local_hostname);
        return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
    }
    mcpy_store_state_t before = self->state;
    self->state = MCPY_STORE_SETTING_UP;
    mc_store_t *handle = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (port >= 0)
        rc = mc_store_setup(&cfg, &handle);
    else
        rc = setup_on_free_port(&cfg, host, &handle);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        self->state = before;
        return PyLong_FromLong(rc);
    }
    PyObject *name =
        PyUnicode_DecodeUTF8(mc_store_get_hostname(handle),
                             (Py_ssize_t)strlen(mc_store_get_hostname(handle)), "replace");
    if (!name) {
        self->state = before;
        Py_BEGIN_ALLOW_THREADS
        mc_store_free(handle);
        Py_END_ALLOW_THREADS
        return NULL;
    }
    Py_XSETREF(self->hostname, name);
    Py_XSETREF(self->engine, shared ? Py_NewRef(a->engine) : NULL); /* engine outlives handle */
    self->store = handle;
    self->reg_count = 0;
    self->state = MCPY_STORE_READY;
    return PyLong_FromLong(0);
}

static int size_arg(PyObject *obj, const char *what, uint64_t *out)
{
    int rc = mcpy_unsigned(obj, UINT64_MAX, out, what);
    if (rc != 0 && !PyErr_Occurred())
        MC_ERROR("setup: %s must be a non-negative number of bytes", what);
    return rc;
}

/* setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
 *       rdma_devices, master_server_addr, engine=None, enable_ssd_offload=False, ...) */
static PyObject *setup_positional(McStoreObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"local_hostname",     "metadata_server", "global_segment_size",
                             "local_buffer_size",  "protocol",        "rdma_devices",
                             "master_server_addr", "engine",          "enable_ssd_offload",
                             "ssd_offload_path",   "tenant_id",       "enable_client_http_server",
                             "client_http_port",   "cluster_secret",  NULL};
    PyObject *host, *meta, *gss, *lbs, *proto, *devs, *master, *engine = Py_None;
    PyObject *ssd_path = NULL, *tenant = NULL, *port = NULL, *secret = NULL;
    int ssd = 0, http = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOOO|OpOOpOO:setup", kwlist, &host, &meta, &gss,
                                     &lbs, &proto, &devs, &master, &engine, &ssd, &ssd_path,
                                     &tenant, &http, &port, &secret))
        return NULL;
    setup_args_t a = setup_defaults;
    a.engine = engine;
    a.enable_ssd_offload = ssd;
    a.enable_client_http_server = http;
    if (port) {
        uint64_t p = 0;
        int prc = mcpy_unsigned(port, 65535, &p, "client_http_port");
        if (prc != 0 && PyErr_Occurred())
            return NULL;
        a.client_http_port = prc == 0 ? (int64_t)p : 0; /* 0: run_setup answers -600 */
    }
    int rc = 0;
    if (rc == 0)
        rc = str_arg(host, "local_hostname", &a.local_hostname);
    if (rc == 0)
        rc = str_arg(meta, "metadata_server", &a.metadata_server);
    if (rc == 0)
        rc = size_arg(gss, "global_segment_size", &a.global_segment_size);
    if (rc == 0)
        rc = size_arg(lbs, "local_buffer_size", &a.local_buffer_size);
    if (rc == 0)
        rc = str_arg(proto, "protocol", &a.protocol);
    if (rc == 0)
        rc = str_arg(devs, "rdma_devices", &a.rdma_devices);
    if (rc == 0)
        rc = str_arg(master, "master_server_addr", &a.master_server_addr);
    if (rc == 0 && ssd_path)
        rc = str_arg(ssd_path, "ssd_offload_path", &a.ssd_offload_path);
    if (rc == 0 && tenant)
        rc = str_arg(tenant, "tenant_id", &a.tenant_id);
    if (rc == 0 && secret && secret != Py_None)
        rc = str_arg(secret, "cluster_secret", &a.cluster_secret);
    if (rc != 0)
        return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
    return run_setup(self, &a);
}

/* The keys setup(config: dict) accepts, in the order the error message lists them. */
static const char *const dict_keys[] = {
    "local_hostname",     "metadata_server", "global_segment_size",
    "local_buffer_size",  "protocol",        "rdma_devices",
    "master_server_addr", "ipc_socket_path", "enable_ssd_offload",
    "ssd_offload_path",   "tenant_id",       "enable_client_http_server",
    "client_http_port",   "cluster_secret",  NULL};

/* A dict value as text (str(value)), its owner appended to `keep`. NULL with an exception, or
 * NULL with *bad = 1 (logged) for text with a NUL, which no option can hold: setup answers -600
 * for it as for any value that does not parse (upstream). */
static const char *dict_text(PyObject *value, PyObject *keep, const char *key, int *bad)
{
    PyObject *s = PyObject_Str(value);
    if (!s || PyList_Append(keep, s) != 0) {
        Py_XDECREF(s);
        return NULL;
    }
    Py_DECREF(s);
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(s, &len);
    if (p && strlen(p) != (size_t)len) {
        MC_ERROR("setup(config): %s contains a NUL character", key);
        *bad = 1;
        return NULL;
    }
    return p;
}

/* Fills one field of `a` from config[key] = text; 0, or MC_ERR_INVALID_PARAMS (logged, naming
 * key and value) for a value that does not parse. */
static int dict_field(setup_args_t *a, const char *key, const char *text)
{
    char err[256] = "";
    int rc = 0;
    if (!strcmp(key, "local_hostname")) {
        a->local_hostname = text;
    } else if (!strcmp(key, "metadata_server")) {
        a->metadata_server = text;
    } else if (!strcmp(key, "protocol")) {
        a->protocol = text;
    } else if (!strcmp(key, "rdma_devices")) {
        a->rdma_devices = text;
    } else if (!strcmp(key, "master_server_addr")) {
        a->master_server_addr = text;
    } else if (!strcmp(key, "ssd_offload_path")) {
        a->ssd_offload_path = text;
    } else if (!strcmp(key, "tenant_id")) {
        a->tenant_id = text;
    } else if (!strcmp(key, "cluster_secret")) {
        a->cluster_secret = text;
    } else if (!strcmp(key, "ipc_socket_path")) {
        /* dummy-client IPC; this build has no dummy client, so nothing uses it */
    } else if (!strcmp(key, "global_segment_size") || !strcmp(key, "local_buffer_size")) {
        uint64_t v = 0;
        rc = mc_parse_size(text, &v, err, sizeof(err));
        if (rc == 0 && v != 0 && (v < MCPY_MIN_SIZE || v > MCPY_MAX_SIZE)) {
            snprintf(err, sizeof(err), "%s \"%s\" must be 0 or between 1 KiB and 1 TiB", key, text);
            rc = MC_ERR_INVALID_PARAMS;
        }
        if (!strcmp(key, "global_segment_size"))
            a->global_segment_size = v;
        else
            a->local_buffer_size = v;
    } else if (!strcmp(key, "enable_ssd_offload")) {
        rc = mc_parse_bool(text, &a->enable_ssd_offload, err, sizeof(err));
    } else if (!strcmp(key, "enable_client_http_server")) {
        rc = mc_parse_bool(text, &a->enable_client_http_server, err, sizeof(err));
    } else if (!strcmp(key, "client_http_port")) {
        /* a number outside 1..65535 is setup's -600 (run_setup), as upstream */
        rc = mc_parse_int64(text, INT64_MIN, INT64_MAX, &a->client_http_port, err, sizeof(err));
    }
    if (rc != 0) {
        /* matches upstream RealClient::setup_internal(ConfigDict): logged, INVALID_PARAMS */
        MC_ERROR("setup(config): %s: %s", key, err);
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

static PyObject *setup_dict(McStoreObject *self, PyObject *config)
{
    setup_args_t a = setup_defaults;
    PyObject *keep = PyList_New(0); /* owners of the strings `a` points into */
    if (!keep)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    PyObject *result = NULL;
    while (PyDict_Next(config, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!k) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "setup(config): keys must be str, not %.100s",
                         Py_TYPE(key)->tp_name);
            goto out;
        }
        size_t i = 0;
        while (dict_keys[i] && strcmp(dict_keys[i], k) != 0)
            i++;
        if (!dict_keys[i]) {
            /* upstream ignores keys it does not know; we say so */
            MC_WARN("setup(config): unknown key '%s' ignored; accepted keys: local_hostname, "
                    "metadata_server, global_segment_size, local_buffer_size, protocol, "
                    "rdma_devices, master_server_addr, ipc_socket_path, enable_ssd_offload, "
                    "ssd_offload_path, tenant_id, enable_client_http_server, "
                    "client_http_port, cluster_secret",
                    k);
            continue;
        }
        int bad = 0;
        const char *text = dict_text(value, keep, k, &bad);
        if (!text) {
            if (bad)
                result = PyLong_FromLong(MC_ERR_INVALID_PARAMS);
            goto out;
        }
        int frc = dict_field(&a, k, text);
        if (frc != 0) {
            result = PyLong_FromLong(frc);
            goto out;
        }
    }
    if (!a.local_hostname || !a.local_hostname[0] || !a.metadata_server || !a.metadata_server[0]) {
        MC_ERROR("setup(config): missing required config: %s",
                 a.local_hostname && a.local_hostname[0] ? "metadata_server" : "local_hostname");
        result = PyLong_FromLong(MC_ERR_INVALID_PARAMS);
        goto out;
    }
    result = run_setup(self, &a);
out:
    Py_DECREF(keep);
    return result;
}

static PyObject *store_setup(PyObject *obj, PyObject *args, PyObject *kw)
{
    McStoreObject *self = (McStoreObject *)obj;
    if (PyTuple_GET_SIZE(args) == 1 && (!kw || PyDict_GET_SIZE(kw) == 0) &&
        PyDict_Check(PyTuple_GET_ITEM(args, 0)))
        return setup_dict(self, PyTuple_GET_ITEM(args, 0));
    return setup_positional(self, args, kw);
}

/* ---- close, health, hostname -------------------------------------------------------------- */

static PyObject *store_close(PyObject *obj, PyObject *unused)
{
    McStoreObject *self = (McStoreObject *)obj;
    if (self->state != MCPY_STORE_READY)
        return PyLong_FromLong(0);
    mc_store_t **grown =
        PyMem_Realloc(self->retired, (self->retired_count + 1) * sizeof(mc_store_t *));
    if (!grown)
        return PyErr_NoMemory();
    self->retired = grown;
    mc_store_t *handle = self->store;
    self->retired[self->retired_count++] = handle;
    self->store = NULL;
    self->state = MCPY_STORE_CLOSING;
    Py_BEGIN_ALLOW_THREADS
    mc_store_close(handle); /* waits for calls in flight, then unmounts and stops */
    Py_END_ALLOW_THREADS
    self->reg_count = 0; /* C forgot every registration */
    self->state = MCPY_STORE_CLOSED;
    mcpy_bytes_pool_clear(); /* the idle memory of get's pool goes back to malloc */
    return PyLong_FromLong(0);
}

static PyObject *store_health_check(PyObject *obj, PyObject *unused)
{
    mc_store_t *s = mcpy_store((McStoreObject *)obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_health_check(s);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

static PyObject *store_get_hostname(PyObject *obj, PyObject *unused)
{
    McStoreObject *self = (McStoreObject *)obj;
    if (self->state != MCPY_STORE_READY || !self->hostname)
        return PyUnicode_FromStringAndSize("", 0);
    Py_INCREF(self->hostname);
    return self->hostname;
}

static PyMethodDef lifecycle_methods[] = {
    {"setup", MCPY_KW(store_setup), METH_VARARGS | METH_KEYWORDS,
     "setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,\n"
     "      rdma_devices, master_server_addr, engine=None, enable_ssd_offload=False,\n"
     "      ssd_offload_path=\"\", tenant_id=\"default\", enable_client_http_server=False,\n"
     "      client_http_port=9300, cluster_secret=None) -> int\n"
     "setup(config: dict) -> int\n\n"
     "Connects to mooncake_master, starts serving this client's segment and mounts it.\n\n"
     "local_hostname (str): \"host\" or \"host:port\" this client serves its segment on. No\n"
     "  port: as upstream, a random free port of [MC_STORE_CLIENT_MIN_PORT,\n"
     "  MC_STORE_CLIENT_MAX_PORT] (12300..14300), up to MC_STORE_CLIENT_SETUP_RETRIES (20)\n"
     "  attempts, then -1; get_hostname() reports \"host:PORT\".\n"
     "metadata_server (str): \"P2PHANDSHAKE\" or \"http://host:port/metadata\".\n"
     "global_segment_size (int, bytes): memory contributed to the pool, 0 = none.\n"
     "local_buffer_size (int, bytes): 0 makes a pure server that cannot put or get.\n"
     "protocol (str): \"tcp\" (or \"rdma\" when built). rdma_devices (str): comma list or \"\".\n"
     "master_server_addr (str): \"host:port\" of mooncake_master, or upstream's HA spec\n"
     "  \"etcd://h1:p1;h2:p2\": follow the master elected in that etcd cluster (cluster id from\n"
     "  env MC_STORE_CLUSTER_ID, default \"mooncake_cluster\", = the masters' --cluster_id),\n"
     "  also across failovers; redis:// and k8s:// return -600 (not built).\n"
     "engine: None, or TransferEngine.get_engine() of an initialized mooncake.engine\n"
     "  TransferEngine: the store moves its bytes through it (and registers its segment there)\n"
     "  instead of creating its own; the store keeps it alive. Another type: TypeError.\n"
     "tenant_id: any; as upstream with a\n"
     "  master without multi-tenancy, keys are in the default tenant (a warning line says so).\n"
     "enable_client_http_server starts the client HTTP server (GET /health, /metrics,\n"
     "  /metrics/summary) on local_hostname's host, port client_http_port (1..65535, else\n"
     "  setup returns -600; a port that cannot be bound only warns), as upstream.\n"
     "cluster_secret (str, not in upstream): the secret every connection of the cluster must\n"
     "  prove (docs/security.md); None = MOONCAKE_CLUSTER_SECRET_FILE or MOONCAKE_CLUSTER_SECRET\n"
     "  from the environment, or no secret (upstream's behaviour). A master or peer that refuses\n"
     "  this client (or has no secret while this client has one) makes setup return -601.\n\n"
     "The dict form takes the same names (rdma_devices, master_server_addr default\n"
     "127.0.0.1:50051, protocol default tcp, plus ipc_socket_path); values are converted with\n"
     "str(); local_hostname and metadata_server are required; sizes may be ints or sizes such\n"
     "as \"16MB\" / \"16 MB\" / \"1.5 GiB\" (default 16 MiB each) and must be 0 or 1 KiB..1 TiB.\n"
     "As upstream, a missing required key or an unparsable value returns -600 (logged) and an\n"
     "unknown key is ignored (with a warning); a non-str key raises TypeError.\n\n"
     "Returns 0, or a negative code: -600 invalid arguments (negative size, already set up;\n"
     "the log says which), -900 master unreachable, -300 master of another version,\n"
     "-1012 unsupported option, -1 no free port (local_hostname without a port). Raises\n"
     "TypeError for arguments of the wrong type."},
    {"close", store_close, METH_NOARGS,
     "close() -> int\n\n"
     "Unmounts the segment (objects stored in it are gone), stops the client's threads and\n"
     "forgets registered buffers. Waits for calls in flight on other threads; calls made\n"
     "afterwards return -600 (health_check: 1). Idempotent; always returns 0. setup() may be\n"
     "called again. Also done when the object is garbage-collected."},
    {"health_check", store_health_check, METH_NOARGS,
     "health_check() -> int\n\n0 healthy, 1 not set up or closed, 2 master unreachable."},
    {"get_hostname", store_get_hostname, METH_NOARGS,
     "get_hostname() -> str\n\nThis client's segment name \"host:port\" (\"\" when not set up)."},
    {NULL},
};

/* ---- type -------------------------------------------------------------------------------- */

static size_t table_len(const PyMethodDef *t)
{
    size_t n = 0;
    while (t[n].ml_name)
        n++;
    return n;
}

int mcpy_store_type_init(void)
{
    static PyMethodDef *joined;
    if (joined)
        return 0;
    const PyMethodDef *tables[] = {lifecycle_methods, mcpy_store_write_methods,
                                   mcpy_store_read_methods, mcpy_store_meta_methods,
                                   mcpy_store_dummy_methods};
    size_t total = 1;
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
        total += table_len(tables[i]);
    /* Lives as long as the type, i.e. the process. */
    joined = PyMem_RawCalloc(total, sizeof(PyMethodDef));
    if (!joined) {
        PyErr_NoMemory();
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        size_t n = table_len(tables[i]);
        memcpy(&joined[k], tables[i], n * sizeof(PyMethodDef));
        k += n;
    }
    McStore_Type.tp_methods = joined;
    return 0;
}

PyDoc_STRVAR(store_doc,
             "MooncakeDistributedStore()\n--\n\n"
             "A Mooncake Store client. Create it, call setup(...), then put/get objects; close()\n"
             "when done. One object may be shared by any number of threads: every call releases\n"
             "the GIL while it talks to the cluster.\n\n"
             "Keys are str (UTF-8 encoded) or bytes, 1..4096 bytes without NUL (else -400).\n"
             "Values are any contiguous buffer (bytes, bytearray, memoryview, numpy array).\n"
             "Pointers are ints, inside memory registered with register_buffer().\n"
             "Return codes follow upstream Mooncake: 0 ok, negative ErrorCode (-704 not found,\n"
             "-706 object leased, -200 no space, -600 invalid arguments, -900 RPC failure), and\n"
             "the integrity codes: -801 no replica matched its checksum, -707 a read outlived its\n"
             "lease, -703 (put) another put of the key still in progress after 5 s.");

PyTypeObject McStore_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".MooncakeDistributedStore",
    .tp_basicsize = sizeof(McStoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = store_doc,
    .tp_new = store_new,
    .tp_dealloc = store_dealloc,
};
