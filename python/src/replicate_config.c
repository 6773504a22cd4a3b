/*
 * replicate_config.c — ReplicateConfig: placement and pinning options of a put, as upstream's
 * (`mooncake.store.ReplicateConfig`, reference §4.2).
 *
 * Every field is read/write and validated on assignment with upstream's (pybind11's) exceptions:
 * a value of the wrong type or out of range raises TypeError. The C store knows memory replicas
 * only, so mcpy_config_snapshot() turns the Python object into an mc_replicate_config_t plus a
 * verdict for the fields C cannot honour: prefer_alloc_in_same_node is refused by every put path
 * with INVALID_PARAMS (as upstream), and NoF / DFS replica counts with NOT_SUPPORTED (this build
 * has neither tier). data_type and preferred_nof_segments are kept for callers that read them back.
 */
#include "mcpy.h"

#include <string.h>

#define MCPY_DATA_TYPE_MAX 9 /* ObjectDataType.GENERAL */

typedef struct McReplicateConfigObject {
    PyObject_HEAD
    uint64_t replica_num;
    uint64_t nof_replica_num;
    uint64_t dfs_replica_num;
    PyObject *soft_pin_action; /* a SoftPinAction member */
    PyObject *soft_pin_ttl_ms; /* None or an int in [0, 2^64) */
    int with_hard_pin;
    PyObject *preferred_segments;     /* list of str, owned copy */
    PyObject *preferred_segment;      /* str */
    PyObject *preferred_nof_segments; /* list of str, owned copy */
    int prefer_alloc_in_same_node;
    PyObject *data_type; /* an ObjectDataType member */
    PyObject *group_ids; /* None or list of str, owned copy */
} McReplicateConfigObject;

/* ---- validation helpers ------------------------------------------------------------------ */

static int no_delete(PyObject *value, const char *name)
{
    if (value)
        return 0;
    PyErr_Format(PyExc_TypeError, "cannot delete ReplicateConfig.%s", name);
    return -1;
}

static int set_count(PyObject *value, uint64_t max, uint64_t *field, const char *name)
{
    if (no_delete(value, name) != 0)
        return -1;
    uint64_t v;
    int rc = mcpy_unsigned(value, max, &v, name);
    if (rc != 0 && PyErr_Occurred())
        return -1;
    if (rc != 0) {
        PyErr_Format(PyExc_TypeError, "ReplicateConfig.%s must be an int in [0, %llu]", name,
                     (unsigned long long)max);
        return -1;
    }
    *field = v;
    return 0;
}

static int set_flag(PyObject *value, int *field, const char *name)
{
    if (no_delete(value, name) != 0)
        return -1;
    int v = PyObject_IsTrue(value);
    if (v < 0)
        return -1;
    *field = v;
    return 0;
}

/* An enum member from a member of enum_class or an int in [0, max]. New reference or NULL. */
static PyObject *to_enum(PyObject *value, PyObject *enum_class, long max, const char *name)
{
    int is_member = PyObject_IsInstance(value, enum_class);
    if (is_member < 0)
        return NULL;
    if (is_member) {
        Py_INCREF(value);
        return value;
    }
    uint64_t v;
    int rc = (PyLong_Check(value) && !PyBool_Check(value))
                 ? mcpy_unsigned(value, (uint64_t)max, &v, name)
                 : MC_ERR_INVALID_PARAMS;
    if (rc != 0 && PyErr_Occurred())
        return NULL;
    if (rc != 0) {
        PyErr_Format(PyExc_TypeError,
                     "ReplicateConfig.%s must be a %s member or an int in [0, %ld]", name,
                     ((PyTypeObject *)enum_class)->tp_name, max);
        return NULL;
    }
    return mcpy_enum_member(enum_class, (long)v);
}

/* A new list holding the str items of a sequence; NULL with TypeError. */
static PyObject *str_list(PyObject *value, const char *name)
{
    PyObject *fast = mcpy_sequence(value, name);
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "ReplicateConfig.%s items must be str, not %.100s", name,
                         Py_TYPE(item)->tp_name);
            Py_CLEAR(list);
            break;
        }
        Py_INCREF(item);
        PyList_SET_ITEM(list, i, item);
    }
    Py_DECREF(fast);
    return list;
}

static int replace(PyObject **field, PyObject *value)
{
    if (!value)
        return -1;
    Py_XSETREF(*field, value);
    return 0;
}

/* ---- getters and setters ----------------------------------------------------------------- */

#define SELF ((McReplicateConfigObject *)self)

#define COUNT_FIELD(field, max)                                                                    \
    static PyObject *get_##field(PyObject *self, void *closure)                                    \
    {                                                                                              \
        return PyLong_FromUnsignedLongLong(SELF->field);                                           \
    }                                                                                              \
    static int set_##field(PyObject *self, PyObject *value, void *closure)                         \
    {                                                                                              \
        return set_count(value, (max), &SELF->field, #field);                                      \
    }

#define FLAG_FIELD(field)                                                                          \
    static PyObject *get_##field(PyObject *self, void *closure)                                    \
    {                                                                                              \
        return PyBool_FromLong(SELF->field);                                                       \
    }                                                                                              \
    static int set_##field(PyObject *self, PyObject *value, void *closure)                         \
    {                                                                                              \
        return set_flag(value, &SELF->field, #field);                                              \
    }

#define OBJECT_GETTER(field)                                                                       \
    static PyObject *get_##field(PyObject *self, void *closure)                                    \
    {                                                                                              \
        Py_INCREF(SELF->field);                                                                    \
        return SELF->field;                                                                        \
    }

/* List fields return a copy, as pybind11 does: mutating the result leaves the config alone. */
#define LIST_GETTER(field)                                                                         \
    static PyObject *get_##field(PyObject *self, void *closure)                                    \
    {                                                                                              \
        if (SELF->field == Py_None)                                                                \
            Py_RETURN_NONE;                                                                        \
        return PyList_GetSlice(SELF->field, 0, PyList_GET_SIZE(SELF->field));                      \
    }

COUNT_FIELD(replica_num, UINT32_MAX)
COUNT_FIELD(nof_replica_num, UINT32_MAX)
COUNT_FIELD(dfs_replica_num, UINT32_MAX)
FLAG_FIELD(with_hard_pin)
FLAG_FIELD(prefer_alloc_in_same_node)
OBJECT_GETTER(soft_pin_action)
OBJECT_GETTER(soft_pin_ttl_ms)
OBJECT_GETTER(preferred_segment)
OBJECT_GETTER(data_type)
LIST_GETTER(preferred_segments)
LIST_GETTER(preferred_nof_segments)
LIST_GETTER(group_ids)

static int set_soft_pin_action(PyObject *self, PyObject *value, void *closure)
{
    if (no_delete(value, "soft_pin_action") != 0)
        return -1;
    return replace(&SELF->soft_pin_action,
                   to_enum(value, mcpy_SoftPinAction, MC_SOFT_PIN_DISABLE, "soft_pin_action"));
}

static int set_data_type(PyObject *self, PyObject *value, void *closure)
{
    if (no_delete(value, "data_type") != 0)
        return -1;
    return replace(&SELF->data_type,
                   to_enum(value, mcpy_ObjectDataType, MCPY_DATA_TYPE_MAX, "data_type"));
}

static int set_soft_pin_ttl_ms(PyObject *self, PyObject *value, void *closure)
{
    if (no_delete(value, "soft_pin_ttl_ms") != 0)
        return -1;
    if (value == Py_None) {
        Py_INCREF(value);
        return replace(&SELF->soft_pin_ttl_ms, value);
    }
    uint64_t v;
    int rc = PyBool_Check(value) ? MC_ERR_INVALID_PARAMS
                                 : mcpy_unsigned(value, UINT64_MAX, &v, "soft_pin_ttl_ms");
    if (rc != 0 && PyErr_Occurred())
        return -1;
    if (rc != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "ReplicateConfig.soft_pin_ttl_ms must be None or an int in [0, 2^64)");
        return -1;
    }
    return replace(&SELF->soft_pin_ttl_ms, PyLong_FromUnsignedLongLong(v));
}

static int set_preferred_segment(PyObject *self, PyObject *value, void *closure)
{
    if (no_delete(value, "preferred_segment") != 0)
        return -1;
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "ReplicateConfig.preferred_segment must be str, not %.100s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    Py_INCREF(value);
    return replace(&SELF->preferred_segment, value);
}

static int set_preferred_segments(PyObject *self, PyObject *value, void *closure)
{
    if (no_delete(value, "preferred_segments") != 0)
        return -1;
    return replace(&SELF->preferred_segments, str_list(value, "preferred_segments"));
}

static int set_preferred_nof_segments(PyObject *self, PyObject *value, void *closure)
{
    if (no_delete(value, "preferred_nof_segments") != 0)
        return -1;
    return replace(&SELF->preferred_nof_segments, str_list(value, "preferred_nof_segments"));
}

static int set_group_ids(PyObject *self, PyObject *value, void *closure)
{
    if (no_delete(value, "group_ids") != 0)
        return -1;
    if (value == Py_None) {
        Py_INCREF(value);
        return replace(&SELF->group_ids, value);
    }
    return replace(&SELF->group_ids, str_list(value, "group_ids"));
}

#define FIELD(name, doc)                                                                           \
    {                                                                                              \
#name, get_##name, set_##name, doc, NULL                                                   \
    }

static PyGetSetDef config_getset[] = {
    FIELD(replica_num, "int: memory replicas on distinct segments, best effort (default 1)."),
    FIELD(nof_replica_num, "int: NoF (SSD pool) replicas (default 0). This build has no NoF tier: "
                           "puts with a value > 0 return NOT_SUPPORTED (-1012)."),
    FIELD(dfs_replica_num, "int: DFS replicas (default 0). This build has no DFS tier: puts with "
                           "a value > 0 return NOT_SUPPORTED (-1012)."),
    FIELD(soft_pin_action, "SoftPinAction: PRESERVE (default), ENABLE (evicted last, until the "
                           "soft-pin TTL) or DISABLE. An int 0..2 is converted."),
    FIELD(soft_pin_ttl_ms, "None (master default) or int milliseconds in [0, 2^64): soft-pin "
                           "duration. Anything else raises TypeError."),
    FIELD(with_hard_pin, "bool: never evicted; still removable explicitly (default False)."),
    FIELD(preferred_segments, "list[str]: segments (\"host:port\") tried first, in order "
                              "(default []). Reading returns a copy."),
    FIELD(preferred_segment, "str: deprecated single preferred segment \"host:port\" "
                             "(default \"\")."),
    FIELD(preferred_nof_segments, "list[str]: preferred NoF segments (default []); kept, unused "
                                  "by this build."),
    FIELD(prefer_alloc_in_same_node, "bool (default False). Every put path rejects True with "
                                     "INVALID_PARAMS (-600), as upstream."),
    FIELD(data_type, "ObjectDataType (default UNKNOWN); an int 0..9 is converted."),
    FIELD(group_ids, "None (default) or list[str]: one group per key of a batch put (\"\" = "
                     "ungrouped); a batch whose key count differs gets INVALID_PARAMS (-600)."),
    {NULL},
};

/* ---- the type ---------------------------------------------------------------------------- */

static PyObject *config_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    McReplicateConfigObject *self = (McReplicateConfigObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->replica_num = 1;
    self->soft_pin_action = mcpy_enum_member(mcpy_SoftPinAction, MC_SOFT_PIN_PRESERVE);
    self->data_type = mcpy_enum_member(mcpy_ObjectDataType, 0);
    self->preferred_segments = PyList_New(0);
    self->preferred_nof_segments = PyList_New(0);
    self->preferred_segment = PyUnicode_FromStringAndSize("", 0);
    Py_INCREF(Py_None);
    self->soft_pin_ttl_ms = Py_None;
    Py_INCREF(Py_None);
    self->group_ids = Py_None;
    if (!self->soft_pin_action || !self->data_type || !self->preferred_segments ||
        !self->preferred_nof_segments || !self->preferred_segment) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* ReplicateConfig(**fields): each keyword is assigned through its setter (same validation). */
static int config_init(PyObject *self, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "ReplicateConfig() takes keyword arguments only");
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (kw && PyDict_Next(kw, &pos, &key, &value)) {
        if (PyObject_SetAttr(self, key, value) != 0)
            return -1;
    }
    return 0;
}

static void config_dealloc(PyObject *self)
{
    Py_XDECREF(SELF->soft_pin_action);
    Py_XDECREF(SELF->soft_pin_ttl_ms);
    Py_XDECREF(SELF->preferred_segments);
    Py_XDECREF(SELF->preferred_segment);
    Py_XDECREF(SELF->preferred_nof_segments);
    Py_XDECREF(SELF->data_type);
    Py_XDECREF(SELF->group_ids);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *config_str(PyObject *self)
{
    PyObject *action = PyObject_GetAttrString(SELF->soft_pin_action, "name");
    PyObject *dtype = PyObject_GetAttrString(SELF->data_type, "name");
    PyObject *s = NULL;
    if (action && dtype) {
        s = PyUnicode_FromFormat(
            "ReplicateConfig: { replica_num: %llu, nof_replica_num: %llu, dfs_replica_num: %llu, "
            "soft_pin_action: %U, soft_pin_ttl_ms: %R, with_hard_pin: %s, preferred_segments: %R, "
            "preferred_segment: %R, preferred_nof_segments: %R, prefer_alloc_in_same_node: %s, "
            "data_type: %U, group_ids: %R }",
            (unsigned long long)SELF->replica_num, (unsigned long long)SELF->nof_replica_num,
            (unsigned long long)SELF->dfs_replica_num, action, SELF->soft_pin_ttl_ms,
            SELF->with_hard_pin ? "True" : "False", SELF->preferred_segments,
            SELF->preferred_segment, SELF->preferred_nof_segments,
            SELF->prefer_alloc_in_same_node ? "True" : "False", dtype, SELF->group_ids);
    }
    Py_XDECREF(action);
    Py_XDECREF(dtype);
    return s;
}

PyDoc_STRVAR(config_doc,
             "ReplicateConfig(**fields)\n--\n\n"
             "Placement and pinning of a put. Default-constructible; every field is read/write\n"
             "and may also be given as a keyword. Invalid assignments raise TypeError.\n"
             "str(cfg) prints every field.");

PyTypeObject McReplicateConfig_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = MCPY_MODULE ".ReplicateConfig",
    .tp_basicsize = sizeof(McReplicateConfigObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = config_doc,
    .tp_new = config_new,
    .tp_init = config_init,
    .tp_dealloc = config_dealloc,
    .tp_str = config_str,
    .tp_repr = config_str,
    .tp_getset = config_getset,
};

/* ---- snapshot for one C call ------------------------------------------------------------- */

/* A PyMem copy of a str's UTF-8 form; NULL with an exception, or *nul set when it holds a NUL. */
static char *copy_utf8(PyObject *str, int *nul)
{
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(str, &len);
    if (!p)
        return NULL;
    if (strlen(p) != (size_t)len)
        *nul = 1;
    char *copy = PyMem_Malloc((size_t)len + 1);
    if (!copy)
        return (char *)PyErr_NoMemory();
    memcpy(copy, p, (size_t)len + 1);
    return copy;
}

void mcpy_config_release(mcpy_config_t *cfg)
{
    for (size_t i = 0; cfg->preferred && i < cfg->preferred_count; i++)
        PyMem_Free(cfg->preferred[i]);
    PyMem_Free(cfg->preferred);
    PyMem_Free(cfg->preferred_segment);
    cfg->preferred = NULL;
    cfg->preferred_segment = NULL;
    cfg->preferred_count = 0;
}

int mcpy_config_snapshot(PyObject *obj, mcpy_config_t *out)
{
    mc_replicate_config_t def = MC_REPLICATE_CONFIG_INIT;
    memset(out, 0, sizeof(*out));
    out->c = def;
    out->group_count = -1;
    if (!obj || obj == Py_None)
        return 0;
    if (!PyObject_TypeCheck(obj, &McReplicateConfig_Type)) {
        PyErr_Format(PyExc_TypeError, "config must be a ReplicateConfig, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    McReplicateConfigObject *c = (McReplicateConfigObject *)obj;
    out->c.replica_num = (uint32_t)c->replica_num;
    out->c.soft_pin_action = (mc_soft_pin_action_t)PyLong_AsLong(c->soft_pin_action);
    out->c.with_hard_pin = c->with_hard_pin;
    if (c->soft_pin_ttl_ms != Py_None) {
        out->c.has_soft_pin_ttl = 1;
        out->c.soft_pin_ttl_ms = PyLong_AsUnsignedLongLong(c->soft_pin_ttl_ms);
    }
    if (c->prefer_alloc_in_same_node)
        out->reject = MC_ERR_INVALID_PARAMS;
    else if (c->nof_replica_num > 0 || c->dfs_replica_num > 0)
        out->reject = MC_ERR_NOT_SUPPORTED;
    if (c->group_ids != Py_None)
        out->group_count = PyList_GET_SIZE(c->group_ids);

    int nul = 0;
    out->preferred_segment = copy_utf8(c->preferred_segment, &nul);
    if (!out->preferred_segment)
        goto fail;
    out->c.preferred_segment = out->preferred_segment;
    /* Nothing below runs Python code, so the list cannot change while it is copied. */
    PyObject *list = c->preferred_segments;
    Py_ssize_t n = PyList_GET_SIZE(list);
    out->preferred = PyMem_Calloc(n ? (size_t)n : 1, sizeof(char *));
    if (!out->preferred) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out->preferred[i] = copy_utf8(PyList_GET_ITEM(list, i), &nul);
        if (!out->preferred[i])
            goto fail;
        out->preferred_count++;
    }
    out->c.preferred_segments = (const char *const *)out->preferred;
    out->c.preferred_segment_count = out->preferred_count;
    if (nul && out->reject == 0)
        out->reject = MC_ERR_INVALID_PARAMS; /* "host\0..." names no segment */
    return 0;
fail:
    mcpy_config_release(out);
    return -1;
}
