/*
 * descriptors.c — where an object's replicas live, as get_replica_desc() reports them:
 * ReplicaDescriptor (.status, is_*_replica(), get_memory_descriptor(), get_disk_descriptor()),
 * MemoryDescriptor (.buffer_descriptor), Descriptor (.size, .buffer_address,
 * .transport_endpoint) and DiskDescriptor (.file_path, .object_size).
 *
 * All are read-only snapshots built from mc_replica_desc_t; they cannot be created from Python.
 * They hold no references that could form a cycle, so they do not take part in GC.
 */
#include "mcpy.h"

#include <string.h>
#include <structmember.h>

typedef struct McDescriptorObject {
    PyObject_HEAD
    PyObject *size;               /* int, bytes */
    PyObject *buffer_address;     /* int, address in the owner's registered memory */
    PyObject *transport_endpoint; /* str, the owning segment "host:port" */
} McDescriptorObject;

typedef struct McMemoryDescriptorObject {
    PyObject_HEAD
    PyObject *buffer_descriptor; /* Descriptor */
} McMemoryDescriptorObject;

typedef struct McDiskDescriptorObject {
    PyObject_HEAD
    PyObject *file_path;   /* str */
    PyObject *object_size; /* int, bytes */
} McDiskDescriptorObject;

typedef struct McReplicaDescriptorObject {
    PyObject_HEAD
    PyObject *status; /* ReplicaStatus member */
    int type;         /* mc_replica_type_t */
    PyObject *memory; /* MemoryDescriptor for memory replicas, else NULL */
    PyObject *disk;   /* DiskDescriptor for disk replicas, else NULL */
} McReplicaDescriptorObject;

/* ---- Descriptor, MemoryDescriptor, DiskDescriptor ---------------------------------------- */

static void descriptor_dealloc(PyObject *self)
{
    McDescriptorObject *d = (McDescriptorObject *)self;
    Py_XDECREF(d->size);
    Py_XDECREF(d->buffer_address);
    Py_XDECREF(d->transport_endpoint);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *descriptor_repr(PyObject *self)
{
    McDescriptorObject *d = (McDescriptorObject *)self;
    return PyUnicode_FromFormat("Descriptor(size=%R, buffer_address=%R, transport_endpoint=%R)",
                                d->size, d->buffer_address, d->transport_endpoint);
}

static PyMemberDef descriptor_members[] = {
    {"size", T_OBJECT_EX, offsetof(McDescriptorObject, size), READONLY, "int: bytes"},
    {"buffer_address", T_OBJECT_EX, offsetof(McDescriptorObject, buffer_address), READONLY,
     "int: address of the replica in its owner's registered memory"},
    {"transport_endpoint", T_OBJECT_EX, offsetof(McDescriptorObject, transport_endpoint), READONLY,
     "str: the segment holding the replica, \"host:port\""},
    {NULL},
};

PyTypeObject McDescriptor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".Descriptor",
    .tp_basicsize = sizeof(McDescriptorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("One memory extent of a replica: .size, .buffer_address, "
                        ".transport_endpoint."),
    .tp_dealloc = descriptor_dealloc,
    .tp_repr = descriptor_repr,
    .tp_members = descriptor_members,
};

static void memory_descriptor_dealloc(PyObject *self)
{
    Py_XDECREF(((McMemoryDescriptorObject *)self)->buffer_descriptor);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *memory_descriptor_repr(PyObject *self)
{
    return PyUnicode_FromFormat("MemoryDescriptor(buffer_descriptor=%R)",
                                ((McMemoryDescriptorObject *)self)->buffer_descriptor);
}

static PyMemberDef memory_descriptor_members[] = {
    {"buffer_descriptor", T_OBJECT_EX, offsetof(McMemoryDescriptorObject, buffer_descriptor),
     READONLY, "Descriptor: where the bytes are"},
    {NULL},
};

PyTypeObject McMemoryDescriptor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".MemoryDescriptor",
    .tp_basicsize = sizeof(McMemoryDescriptorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("A memory replica: .buffer_descriptor (a Descriptor)."),
    .tp_dealloc = memory_descriptor_dealloc,
    .tp_repr = memory_descriptor_repr,
    .tp_members = memory_descriptor_members,
};

static void disk_descriptor_dealloc(PyObject *self)
{
    McDiskDescriptorObject *d = (McDiskDescriptorObject *)self;
    Py_XDECREF(d->file_path);
    Py_XDECREF(d->object_size);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *disk_descriptor_repr(PyObject *self)
{
    McDiskDescriptorObject *d = (McDiskDescriptorObject *)self;
    return PyUnicode_FromFormat("DiskDescriptor(file_path=%R, object_size=%R)", d->file_path,
                                d->object_size);
}

static PyMemberDef disk_descriptor_members[] = {
    {"file_path", T_OBJECT_EX, offsetof(McDiskDescriptorObject, file_path), READONLY,
     "str: the file holding the replica"},
    {"object_size", T_OBJECT_EX, offsetof(McDiskDescriptorObject, object_size), READONLY,
     "int: bytes"},
    {NULL},
};

PyTypeObject McDiskDescriptor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".DiskDescriptor",
    .tp_basicsize = sizeof(McDiskDescriptorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("A disk replica: .file_path, .object_size."),
    .tp_dealloc = disk_descriptor_dealloc,
    .tp_repr = disk_descriptor_repr,
    .tp_members = disk_descriptor_members,
};

/* ---- ReplicaDescriptor ------------------------------------------------------------------- */

#define REPLICA ((McReplicaDescriptorObject *)self)

static int is_memory(const McReplicaDescriptorObject *r)
{
    return r->type == MC_REPLICA_MEMORY;
}

/* Shared-storage replicas (the legacy DISK tier and DFS) both carry a DiskDescriptor. */
static int is_disk(const McReplicaDescriptorObject *r)
{
    return r->type == MC_REPLICA_DISK || r->type == MC_REPLICA_DFS;
}

static int is_local_disk(const McReplicaDescriptorObject *r)
{
    return r->type == MC_REPLICA_LOCAL_DISK;
}

static PyObject *replica_is_memory(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(is_memory(REPLICA));
}

static PyObject *replica_is_disk(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(is_disk(REPLICA));
}

static PyObject *replica_is_local_disk(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(is_local_disk(REPLICA));
}

static PyObject *replica_get_memory(PyObject *self, PyObject *unused)
{
    if (!REPLICA->memory) {
        PyErr_SetString(PyExc_RuntimeError, "not a memory replica");
        return NULL;
    }
    Py_INCREF(REPLICA->memory);
    return REPLICA->memory;
}

static PyObject *replica_get_disk(PyObject *self, PyObject *unused)
{
    if (!REPLICA->disk) {
        PyErr_SetString(PyExc_RuntimeError, "not a disk replica");
        return NULL;
    }
    Py_INCREF(REPLICA->disk);
    return REPLICA->disk;
}

static PyMethodDef replica_methods[] = {
    {"is_memory_replica", replica_is_memory, METH_NOARGS,
     "is_memory_replica() -> bool\n\nTrue when the replica is in a client's memory segment."},
    {"is_disk_replica", replica_is_disk, METH_NOARGS,
     "is_disk_replica() -> bool\n\nTrue when the replica is a file on shared storage (DISK or "
     "DFS)."},
    {"is_local_disk_replica", replica_is_local_disk, METH_NOARGS,
     "is_local_disk_replica() -> bool\n\nTrue when the replica is on a client's local SSD."},
    {"get_memory_descriptor", replica_get_memory, METH_NOARGS,
     "get_memory_descriptor() -> MemoryDescriptor\n\nRaises RuntimeError for a replica that is "
     "not in memory."},
    {"get_disk_descriptor", replica_get_disk, METH_NOARGS,
     "get_disk_descriptor() -> DiskDescriptor\n\nRaises RuntimeError for a replica that is not "
     "on disk (DISK, DFS or LOCAL_DISK)."},
    {NULL},
};

static PyMemberDef replica_members[] = {
    {"status", T_OBJECT_EX, offsetof(McReplicaDescriptorObject, status), READONLY,
     "ReplicaStatus: COMPLETE for every replica get_replica_desc() returns"},
    {NULL},
};

static void replica_dealloc(PyObject *self)
{
    Py_XDECREF(REPLICA->status);
    Py_XDECREF(REPLICA->memory);
    Py_XDECREF(REPLICA->disk);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *replica_repr(PyObject *self)
{
    PyObject *where = REPLICA->memory ? REPLICA->memory : REPLICA->disk;
    return PyUnicode_FromFormat("ReplicaDescriptor(status=%R, %R)", REPLICA->status,
                                where ? where : Py_None);
}

PyTypeObject McReplicaDescriptor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".ReplicaDescriptor",
    .tp_basicsize = sizeof(McReplicaDescriptorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("One replica of an object: .status, is_memory_replica(), "
                        "is_disk_replica(), is_local_disk_replica(), get_memory_descriptor(), "
                        "get_disk_descriptor()."),
    .tp_dealloc = replica_dealloc,
    .tp_repr = replica_repr,
    .tp_methods = replica_methods,
    .tp_members = replica_members,
};

static PyObject *memory_descriptor_new(const mc_replica_desc_t *desc)
{
    McDescriptorObject *d = PyObject_New(McDescriptorObject, &McDescriptor_Type);
    if (!d)
        return NULL;
    d->size = PyLong_FromUnsignedLongLong(desc->size);
    d->buffer_address = PyLong_FromUnsignedLongLong(desc->address);
    d->transport_endpoint =
        PyUnicode_DecodeUTF8(desc->segment_name, (Py_ssize_t)strlen(desc->segment_name), "replace");
    if (!d->size || !d->buffer_address || !d->transport_endpoint) {
        Py_DECREF(d);
        return NULL;
    }
    McMemoryDescriptorObject *m = PyObject_New(McMemoryDescriptorObject, &McMemoryDescriptor_Type);
    if (!m) {
        Py_DECREF(d);
        return NULL;
    }
    m->buffer_descriptor = (PyObject *)d;
    return (PyObject *)m;
}

static PyObject *disk_descriptor_new(const mc_replica_desc_t *desc)
{
    McDiskDescriptorObject *d = PyObject_New(McDiskDescriptorObject, &McDiskDescriptor_Type);
    if (!d)
        return NULL;
    d->object_size = PyLong_FromUnsignedLongLong(desc->size);
    d->file_path = PyUnicode_DecodeFSDefault(desc->file_path);
    if (!d->object_size || !d->file_path) {
        Py_DECREF(d);
        return NULL;
    }
    return (PyObject *)d;
}

PyObject *mcpy_replica_descriptor_new(const mc_replica_desc_t *desc)
{
    McReplicaDescriptorObject *r =
        PyObject_New(McReplicaDescriptorObject, &McReplicaDescriptor_Type);
    if (!r)
        return NULL;
    r->type = (int)desc->type;
    r->memory = NULL;
    r->disk = NULL;
    r->status = mcpy_enum_member(mcpy_ReplicaStatus, (long)desc->status);
    if (!r->status) {
        Py_DECREF(r);
        return NULL;
    }
    if (is_memory(r))
        r->memory = memory_descriptor_new(desc);
    else
        r->disk = disk_descriptor_new(desc);
    if (!r->memory && !r->disk) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}
