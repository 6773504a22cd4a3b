/*
 * module.c — the `mooncake._store` extension module: initialisation, the IntEnum classes
 * (SoftPinAction, ObjectDataType, ReplicaStatus), BufferHandle and MooncakeHostMemAllocator.
 *
 * Users import `mooncake.store` (python/mooncake/store.py), which re-exports everything here and
 * adds the pure-Python BufferPool. Type names say `mooncake.store.X` for that reason.
 *
 * Memory handed out by MooncakeHostMemAllocator is shared memory (mc_store_alloc_shared: a memfd
 * a dummy client can hand to its real client), tracked in a
 * module-level dict {address: size} so free() can refuse an address it did not hand out instead
 * of crashing; it is never freed behind the caller's back (the caller may have registered it).
 */
#include "mcpy.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

PyObject *mcpy_SoftPinAction;
PyObject *mcpy_ObjectDataType;
PyObject *mcpy_ReplicaStatus;

static PyObject *host_allocations; /* dict int address -> int size, for MooncakeHostMemAllocator */

PyObject *mcpy_enum_member(PyObject *enum_class, long value)
{
    return PyObject_CallFunction(enum_class, "l", value);
}

/* ---- BufferHandle ------------------------------------------------------------------------ */

#define HANDLE ((McBufferHandleObject *)self)
#define MCPY_HANDLE_ALIGN 64 /* bytes: cache-line aligned, as a DMA-friendly default */

McBufferHandleObject *mcpy_buffer_handle_new(size_t capacity)
{
    McBufferHandleObject *h = PyObject_New(McBufferHandleObject, &McBufferHandle_Type);
    if (!h)
        return NULL;
    h->data = NULL;
    h->size = capacity;
    h->capacity = capacity;
    h->mapped = 0;
    void *p = NULL;
    /* At least one byte, so even an empty handle exports a non-NULL pointer. */
    if (posix_memalign(&p, MCPY_HANDLE_ALIGN, capacity ? capacity : 1) != 0) {
        Py_DECREF(h);
        return (McBufferHandleObject *)PyErr_NoMemory();
    }
    h->data = p;
    return h;
}

/* A handle over `size` bytes of zeroed, page-aligned anonymous memory. */
static McBufferHandleObject *buffer_handle_mapped(size_t size)
{
    McBufferHandleObject *h = PyObject_New(McBufferHandleObject, &McBufferHandle_Type);
    if (!h)
        return NULL;
    h->data = NULL;
    h->size = size;
    h->capacity = size;
    h->mapped = 1;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        Py_DECREF(h);
        return (McBufferHandleObject *)PyErr_NoMemory();
    }
    h->data = p;
    return h;
}

static void handle_dealloc(PyObject *self)
{
    if (HANDLE->data && HANDLE->mapped)
        munmap(HANDLE->data, HANDLE->capacity);
    else
        free(HANDLE->data);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *handle_ptr(PyObject *self, PyObject *unused)
{
    return PyLong_FromVoidPtr(HANDLE->data);
}

static PyObject *handle_size(PyObject *self, PyObject *unused)
{
    return PyLong_FromSize_t(HANDLE->size);
}

static Py_ssize_t handle_len(PyObject *self)
{
    return (Py_ssize_t)HANDLE->size;
}

static int handle_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, self, HANDLE->data, (Py_ssize_t)HANDLE->size, 0, flags);
}

static PyObject *handle_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<BufferHandle ptr=%p size=%zu>", HANDLE->data, HANDLE->size);
}

static PyMethodDef handle_methods[] = {
    {"ptr", handle_ptr, METH_NOARGS, "ptr() -> int\n\nAddress of the first byte."},
    {"size", handle_size, METH_NOARGS, "size() -> int\n\nLength in bytes (also len(handle))."},
    {NULL},
};

static PySequenceMethods handle_as_sequence = {.sq_length = handle_len};
static PyBufferProcs handle_as_buffer = {.bf_getbuffer = handle_getbuffer};

PyTypeObject McBufferHandle_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".BufferHandle",
    .tp_basicsize = sizeof(McBufferHandleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("Bytes owned by this object (an object read by get_buffer()).\n\n"
                        "ptr() -> int address, size() / len() -> bytes; supports the buffer "
                        "protocol (memoryview(h), numpy.frombuffer(h, ...)), writable. The memory "
                        "lives as long as the handle or any view of it."),
    .tp_dealloc = handle_dealloc,
    .tp_repr = handle_repr,
    .tp_methods = handle_methods,
    .tp_as_sequence = &handle_as_sequence,
    .tp_as_buffer = &handle_as_buffer,
};

/* ---- MooncakeHostMemAllocator ------------------------------------------------------------ */

static PyObject *allocator_alloc(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"size", NULL};
    PyObject *size_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:alloc", kwlist, &size_obj))
        return NULL;
    uint64_t size;
    int rc = mcpy_unsigned(size_obj, PY_SSIZE_T_MAX, &size, "size");
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    if (rc != 0 || size == 0) {
        PyErr_SetString(PyExc_ValueError, "size must be a positive number of bytes");
        return NULL;
    }
    void *p = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = mc_store_alloc_shared(NULL, (size_t)size, &p); /* a memfd: a dummy can register it */
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return PyErr_NoMemory();
    PyObject *addr = PyLong_FromVoidPtr(p);
    PyObject *len = PyLong_FromUnsignedLongLong(size);
    if (!addr || !len || PyDict_SetItem(host_allocations, addr, len) != 0) {
        Py_XDECREF(addr);
        Py_XDECREF(len);
        mc_store_free_shared(NULL, p);
        return NULL;
    }
    Py_DECREF(len);
    return addr;
}

static PyObject *allocator_free(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ptr", NULL};
    PyObject *ptr;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:free", kwlist, &ptr))
        return NULL;
    if (!PyLong_Check(ptr)) {
        PyErr_Format(PyExc_TypeError, "ptr must be an int, not %.100s", Py_TYPE(ptr)->tp_name);
        return NULL;
    }
    PyObject *len = PyDict_GetItemWithError(host_allocations, ptr);
    if (!len) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError,
                            "ptr was not returned by alloc() or is already freed");
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(ptr);
    if (PyDict_DelItem(host_allocations, ptr) != 0)
        return NULL;
    mc_store_free_shared(NULL, p);
    Py_RETURN_NONE;
}

static PyMethodDef allocator_methods[] = {
    {"alloc", MCPY_KW(allocator_alloc), METH_VARARGS | METH_KEYWORDS,
     "alloc(size: int) -> int\n\n"
     "Maps `size` bytes (> 0) of zeroed, page-aligned shared memory (a memfd, as upstream's "
     "ShmHelper, so a dummy client can hand it to its real client) and returns its address. "
     "Register it with MooncakeDistributedStore.register_buffer() to use it with the zero-copy "
     "calls. Raises ValueError for size <= 0, MemoryError when the mapping fails."},
    {"free", MCPY_KW(allocator_free), METH_VARARGS | METH_KEYWORDS,
     "free(ptr: int) -> None\n\n"
     "Unmaps memory returned by alloc(). Unregister it from every store first. Raises "
     "ValueError for an address alloc() did not return (or already freed)."},
    {NULL},
};

PyTypeObject McHostMemAllocator_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".MooncakeHostMemAllocator",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("MooncakeHostMemAllocator()\n--\n\n"
                        "Host memory for the zero-copy calls: alloc(size) -> int, free(ptr). "
                        "Allocations belong to the module, not to the allocator object."),
    .tp_new = PyType_GenericNew,
    .tp_methods = allocator_methods,
};

/* ---- module ------------------------------------------------------------------------------ */

static PyObject *alloc_host_buffer(PyObject *module, PyObject *arg)
{
    uint64_t size;
    int rc = mcpy_unsigned(arg, PY_SSIZE_T_MAX, &size, "size");
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    if (rc != 0 || size == 0) {
        PyErr_SetString(PyExc_ValueError, "size must be a positive number of bytes");
        return NULL;
    }
    return (PyObject *)buffer_handle_mapped(size);
}

static PyMethodDef module_methods[] = {
    {"_alloc_host_buffer", alloc_host_buffer, METH_O,
     "_alloc_host_buffer(size: int) -> BufferHandle\n\n"
     "Zeroed, page-aligned memory owned by a BufferHandle (BufferPool's regions): freed when the "
     "handle and all its views are gone. ValueError for size <= 0."},
    {NULL},
};

PyDoc_STRVAR(
    module_doc,
    "Mooncake Store client (mooncake-c). Import it as `mooncake.store`.\n\n"
    "MooncakeDistributedStore connects to mooncake_master and puts/gets objects in the\n"
    "cluster's memory pool. Methods return upstream Mooncake's values: 0 or a negative\n"
    "error code (-704 not found, -706 leased, -200 no space, -600 invalid arguments),\n"
    "per-key lists for batch calls, byte counts from *_into calls, and b\"\" from get on a\n"
    "miss or error. Sizes are in bytes; pointers are ints.\n\n"
    "Integrity (mooncake-c): a read returns the object's exact bytes or fails. Every value's\n"
    "CRC32C is computed on put and verified on every get path; -801 when no replica verifies,\n"
    "-707 when a memory read outlived its read lease. A put whose key another client is still\n"
    "writing waits up to 5 s for that put's outcome (-703 if still running), where upstream\n"
    "returns 0 at once. MC_STORE_CHECKSUM=0 in the environment turns checksums off.");

static struct PyModuleDef store_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "mooncake._store",
    .m_doc = module_doc,
    .m_size = -1,
    .m_methods = module_methods,
};

/* enum.IntEnum(name, [(member, value), ...], module="mooncake.store"); new reference. */
static PyObject *make_enum(PyObject *enum_mod, const char *name, const char *const *names,
                           const long *values, size_t n)
{
    PyObject *members = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; members && i < n; i++) {
        PyObject *pair = Py_BuildValue("(sl)", names[i], values[i]);
        if (!pair) {
            Py_CLEAR(members);
            break;
        }
        PyList_SET_ITEM(members, (Py_ssize_t)i, pair);
    }
    if (!members)
        return NULL;
    PyObject *int_enum = PyObject_GetAttrString(enum_mod, "IntEnum");
    PyObject *args = Py_BuildValue("(sO)", name, members);
    PyObject *kw = Py_BuildValue("{ss}", "module", MCPY_MODULE);
    PyObject *cls = (int_enum && args && kw) ? PyObject_Call(int_enum, args, kw) : NULL;
    Py_XDECREF(int_enum);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(members);
    return cls;
}

static int add_enums(PyObject *m)
{
    static const char *const soft_pin[] = {"PRESERVE", "ENABLE", "DISABLE"};
    static const long soft_pin_v[] = {MC_SOFT_PIN_PRESERVE, MC_SOFT_PIN_ENABLE,
                                      MC_SOFT_PIN_DISABLE};
    static const char *const data_type[] = {"UNKNOWN",  "KVCACHE",    "TENSOR",   "WEIGHT",
                                            "SAMPLE",   "ACTIVATION", "GRADIENT", "OPTIMIZER_STATE",
                                            "METADATA", "GENERAL"};
    static const long data_type_v[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const char *const status[] = {"UNDEFINED", "INITIALIZED", "PROCESSING",
                                         "COMPLETE",  "REMOVED",     "FAILED"};
    static const long status_v[] = {MC_REPLICA_UNDEFINED,  MC_REPLICA_INITIALIZED,
                                    MC_REPLICA_PROCESSING, MC_REPLICA_COMPLETE,
                                    MC_REPLICA_REMOVED,    MC_REPLICA_FAILED};
    PyObject *enum_mod = PyImport_ImportModule("enum");
    if (!enum_mod)
        return -1;
    mcpy_SoftPinAction = make_enum(enum_mod, "SoftPinAction", soft_pin, soft_pin_v, 3);
    mcpy_ObjectDataType = make_enum(enum_mod, "ObjectDataType", data_type, data_type_v, 10);
    mcpy_ReplicaStatus = make_enum(enum_mod, "ReplicaStatus", status, status_v, 6);
    Py_DECREF(enum_mod);
    if (!mcpy_SoftPinAction || !mcpy_ObjectDataType || !mcpy_ReplicaStatus)
        return -1;
    /* PyModule_AddObjectRef keeps our references: the statics stay valid for the process. */
    if (PyModule_AddObjectRef(m, "SoftPinAction", mcpy_SoftPinAction) != 0 ||
        PyModule_AddObjectRef(m, "ObjectDataType", mcpy_ObjectDataType) != 0 ||
        PyModule_AddObjectRef(m, "ReplicaStatus", mcpy_ReplicaStatus) != 0)
        return -1;
    return 0;
}

static int add_type(PyObject *m, PyTypeObject *type, const char *name)
{
    if (PyType_Ready(type) != 0)
        return -1;
    return PyModule_AddObjectRef(m, name, (PyObject *)type);
}

PyMODINIT_FUNC PyInit__store(void)
{
    PyObject *m = PyModule_Create(&store_module);
    if (!m)
        return NULL;
    host_allocations = host_allocations ? host_allocations : PyDict_New();
    if (!host_allocations || add_enums(m) != 0 ||
        add_type(m, &McBufferHandle_Type, "BufferHandle") != 0 ||
        add_type(m, &McHostMemAllocator_Type, "MooncakeHostMemAllocator") != 0 ||
        add_type(m, &McReplicateConfig_Type, "ReplicateConfig") != 0 ||
        add_type(m, &McDescriptor_Type, "Descriptor") != 0 ||
        add_type(m, &McMemoryDescriptor_Type, "MemoryDescriptor") != 0 ||
        add_type(m, &McDiskDescriptor_Type, "DiskDescriptor") != 0 ||
        add_type(m, &McReplicaDescriptor_Type, "ReplicaDescriptor") != 0 ||
        mcpy_store_type_init() != 0 ||
        add_type(m, &McStore_Type, "MooncakeDistributedStore") != 0 ||
        PyModule_AddStringConstant(m, "__version__", MC_VERSION_STRING) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
