/*
 * metadata_server.c — the extension `mooncake._metadata_server`: our C HTTP metadata server
 * (include/mooncake/http_metadata.h) as a Python object, so `mooncake.http_metadata_server`
 * (upstream's KVBootstrapServer and `python -m mooncake.http_metadata_server`) serves with the
 * C server instead of an HTTP server written in Python.
 *
 *   MetadataServer(host="0.0.0.0", port=8080, cluster_secret=None, cluster_secret_file=None)
 *       starts serving at once on its own thread (libmicrohttpd); port 0 = any free port.
 *       Secret: the arguments, else MOONCAKE_CLUSTER_SECRET_FILE / MOONCAKE_CLUSTER_SECRET from
 *       the environment, else none (writes open, as upstream; a wildcard host then logs one
 *       warning line). Raises OSError when the address cannot be bound, ValueError for a bad
 *       host, port or unreadable secret file.
 *   .port -> int      the port bound
 *   .size() -> int    keys held
 *   .running -> bool
 *   .stop()           stops serving and frees every value; idempotent; also on collection.
 *
 * Thread-safety: the C server is thread-safe; start and stop release the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mooncake/http_metadata.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    mc_http_metadata_server_t *server; /* NULL once stopped */
    int port;
} McMetadataServerObject;

static int md_init(PyObject *obj, PyObject *args, PyObject *kw)
{
    McMetadataServerObject *self = (McMetadataServerObject *)obj;
    static char *kwlist[] = {"host", "port", "cluster_secret", "cluster_secret_file", NULL};
    const char *host = "0.0.0.0";
    int port = 8080;
    const char *secret = NULL, *secret_file = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|si$zz:MetadataServer", kwlist, &host, &port,
                                     &secret, &secret_file))
        return -1;
    if (self->server) {
        PyErr_SetString(PyExc_RuntimeError, "MetadataServer is already serving");
        return -1;
    }
    if (port < 0 || port > 65535) {
        PyErr_Format(PyExc_ValueError, "port %d is not in 0..65535", port);
        return -1;
    }
    mc_http_metadata_server_options_t opts;
    memset(&opts, 0, sizeof(opts));
    opts.cluster_secret = secret;
    opts.cluster_secret_file = secret_file;
    mc_http_metadata_server_t *server = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_http_metadata_server_start_opts(host, port, &opts, &server);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        if (rc == -600) /* MC_ERR_INVALID_PARAMS */
            PyErr_Format(PyExc_ValueError,
                         "HTTP metadata server: invalid host \"%s\" or unreadable cluster "
                         "secret file (see the log)",
                         host);
        else
            PyErr_Format(PyExc_OSError, "HTTP metadata server: cannot listen on %s:%d (%d)", host,
                         port, rc);
        return -1;
    }
    self->server = server;
    self->port = mc_http_metadata_server_port(server);
    return 0;
}

static void md_stop_server(McMetadataServerObject *self)
{
    mc_http_metadata_server_t *server = self->server;
    self->server = NULL;
    if (!server)
        return;
    Py_BEGIN_ALLOW_THREADS
    mc_http_metadata_server_stop(server);
    Py_END_ALLOW_THREADS
}

static void md_dealloc(PyObject *obj)
{
    md_stop_server((McMetadataServerObject *)obj);
    Py_TYPE(obj)->tp_free(obj);
}

static PyObject *md_stop(PyObject *obj, PyObject *unused)
{
    md_stop_server((McMetadataServerObject *)obj);
    Py_RETURN_NONE;
}

static PyObject *md_size(PyObject *obj, PyObject *unused)
{
    McMetadataServerObject *self = (McMetadataServerObject *)obj;
    if (!self->server)
        return PyLong_FromLong(0);
    size_t n;
    Py_BEGIN_ALLOW_THREADS
    n = mc_http_metadata_server_size(self->server);
    Py_END_ALLOW_THREADS
    return PyLong_FromSize_t(n);
}

static PyObject *md_get_port(PyObject *obj, void *unused)
{
    return PyLong_FromLong(((McMetadataServerObject *)obj)->port);
}

static PyObject *md_get_running(PyObject *obj, void *unused)
{
    return PyBool_FromLong(((McMetadataServerObject *)obj)->server != NULL);
}

static PyMethodDef md_methods[] = {
    {"stop", md_stop, METH_NOARGS,
     "stop() -> None\n\nStops serving and frees every value. Idempotent."},
    {"size", md_size, METH_NOARGS, "size() -> int\n\nNumber of keys held (0 once stopped)."},
    {NULL},
};

static PyGetSetDef md_getset[] = {
    {"port", md_get_port, NULL, "the port bound (int)", NULL},
    {"running", md_get_running, NULL, "True until stop()", NULL},
    {NULL},
};

static PyTypeObject McMetadataServer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mooncake._metadata_server.MetadataServer",
    .tp_basicsize = sizeof(McMetadataServerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "MetadataServer(host=\"0.0.0.0\", port=8080, *, cluster_secret=None,\n"
              "               cluster_secret_file=None)\n\n"
              "The C HTTP metadata server (GET|PUT|DELETE /metadata?key=K, GET /health), serving\n"
              "from construction until stop(). See include/mooncake/http_metadata.h.",
    .tp_new = PyType_GenericNew,
    .tp_init = md_init,
    .tp_dealloc = md_dealloc,
    .tp_methods = md_methods,
    .tp_getset = md_getset,
};

static struct PyModuleDef md_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mooncake._metadata_server",
    .m_doc = "The C HTTP metadata server of mooncake-c (used by mooncake.http_metadata_server).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__metadata_server(void)
{
    if (PyType_Ready(&McMetadataServer_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&md_module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "MetadataServer", (PyObject *)&McMetadataServer_Type) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
