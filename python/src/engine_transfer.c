/*
 * engine_transfer.c — the transfer methods of `mooncake.engine.TransferEngine`: synchronous
 * single and batch transfers, asynchronous batches with their id table, and status polling.
 * Matches upstream `TransferEnginePy::transferSync*`, `batchTransfer*`, `transferSubmitWrite`,
 * `transferCheckStatus`, `getBatchTransferStatus` (mooncake-integration/transfer_engine/
 * transfer_engine_py.cpp) in arguments and return values; see engine.h for thread-safety.
 *
 * Every call releases the GIL while it opens the target segment, submits and waits. A request
 * moves `length` bytes between local memory at `buffer` (any readable/writable memory of this
 * process; registration is not needed on the initiating side) and the target segment's
 * registered memory at `peer_buffer_address` (checked against the peer's registrations before
 * any byte moves).
 */
#include "engine.h"

#include "log.h"
#include "net.h"

#include <stdlib.h>
#include <string.h>

int mcpy_te_u64(PyObject *obj, const char *what, uint64_t *out)
{
    if (!PyLong_Check(obj) && !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be int, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *num = PyNumber_Index(obj);
    if (!num)
        return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(num);
    Py_DECREF(num);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be an int in 0..2**64-1", what);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int str_arg(PyObject *obj, const char *what, const char **out)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(obj);
    return *out ? 0 : -1;
}

/* A list of ints. Returns 0 (values PyMem_Malloc'd, *n set), or -1 with TypeError. */
static int u64_list(PyObject *obj, const char *what, uint64_t **values, Py_ssize_t *n)
{
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of int, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *seq = PySequence_Fast(obj, what); /* a tuple/list snapshot held while we read */
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
            PyMem_Free(v);
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *values = v;
    *n = len;
    return 0;
}

static int opcode_arg(PyObject *obj, mc_transfer_opcode_t *out)
{
    uint64_t v;
    if (mcpy_te_u64(obj, "opcode", &v) != 0)
        return -1;
    if (v > 1) {
        PyErr_SetString(PyExc_TypeError, "opcode must be TransferOpcode.Read (0) or Write (1)");
        return -1;
    }
    *out = v ? MC_TRANSFER_WRITE : MC_TRANSFER_READ;
    return 0;
}

/* notify: None or a TransferNotify. Returns 0 (none), 1 (one given), -1 with TypeError. */
static int notify_arg(PyObject *obj)
{
    if (!obj || obj == Py_None)
        return 0;
    if (!PyObject_HasAttrString(obj, "name") || !PyObject_HasAttrString(obj, "msg")) {
        PyErr_Format(PyExc_TypeError, "notify must be a TransferNotify or None, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 1;
}

/* A parsed transfer call: n requests to one target. */
typedef struct call {
    const char *target;
    mc_transfer_opcode_t opcode;
    uint64_t *bufs, *peers, *lens;
    Py_ssize_t n;
    int has_notify;
    int list_mismatch; /* the three lists differ in length */
} call_t;

static void call_free(call_t *c)
{
    PyMem_Free(c->bufs);
    PyMem_Free(c->peers);
    PyMem_Free(c->lens);
}

/*
 * Parses (target_hostname, buffer(s), peer_buffer_address(es), length(s)[, opcode][, notify]
 * [, transport_hint]). batch: list arguments. with_opcode / with_notify: those parameters exist.
 * Returns 0 or -1 with TypeError.
 */
static int parse_call(PyObject *args, PyObject *kw, int batch, int with_opcode, int with_notify,
                      mc_transfer_opcode_t fixed, call_t *c)
{
    static char *kw_single[] = {"target_hostname", "buffer",         "peer_buffer_address",
                                "length",          "transport_hint", NULL};
    static char *kw_batch[] = {"target_hostname", "buffers",        "peer_buffer_addresses",
                               "lengths",         "transport_hint", NULL};
    static char *kw_single_op[] = {"target_hostname", "buffer", "peer_buffer_address", "length",
                                   "opcode",          "notify", "transport_hint",      NULL};
    static char *kw_batch_op[] = {"target_hostname", "buffers", "peer_buffer_addresses", "lengths",
                                  "opcode",          "notify",  "transport_hint",        NULL};
    static char *kw_batch_async_op[] = {
        "target_hostname", "buffers", "peer_buffer_addresses", "lengths", "opcode",
        "transport_hint",  NULL};
    PyObject *target, *b, *p, *l, *op = NULL, *notify = Py_None, *hint = NULL;
    int ok;
    memset(c, 0, sizeof(*c));
    c->opcode = fixed;
    if (!with_opcode)
        ok = PyArg_ParseTupleAndKeywords(args, kw, "OOOO|O", batch ? kw_batch : kw_single, &target,
                                         &b, &p, &l, &hint);
    else if (with_notify)
        ok = PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|OO", batch ? kw_batch_op : kw_single_op,
                                         &target, &b, &p, &l, &op, &notify, &hint);
    else
        ok = PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|O", kw_batch_async_op, &target, &b, &p,
                                         &l, &op, &hint);
    if (!ok)
        return -1;
    const char *hint_s;
    if (str_arg(target, "target_hostname", &c->target) != 0 ||
        (hint && str_arg(hint, "transport_hint", &hint_s) != 0) ||
        (op && opcode_arg(op, &c->opcode) != 0))
        return -1;
    c->has_notify = notify_arg(notify);
    if (c->has_notify < 0)
        return -1;
    if (!batch) {
        c->n = 1;
        c->bufs = PyMem_Malloc(sizeof(uint64_t));
        c->peers = PyMem_Malloc(sizeof(uint64_t));
        c->lens = PyMem_Malloc(sizeof(uint64_t));
        if (!c->bufs || !c->peers || !c->lens) {
            call_free(c);
            PyErr_NoMemory();
            return -1;
        }
        if (mcpy_te_u64(b, "buffer", c->bufs) != 0 ||
            mcpy_te_u64(p, "peer_buffer_address", c->peers) != 0 ||
            mcpy_te_u64(l, "length", c->lens) != 0) {
            call_free(c);
            return -1;
        }
        return 0;
    }
    Py_ssize_t nb, np, nl;
    if (u64_list(b, "buffers", &c->bufs, &nb) != 0 ||
        u64_list(p, "peer_buffer_addresses", &c->peers, &np) != 0 ||
        u64_list(l, "lengths", &c->lens, &nl) != 0) {
        call_free(c);
        return -1;
    }
    c->n = nb;
    c->list_mismatch = nb != np || nb != nl;
    return 0;
}

/* Checks what C would refuse, with a line saying why. 0 or -1. GIL held or not. */
static int check_call(McEngineObject *self, const call_t *c, const char *what)
{
    if (!self->te) {
        MC_ERROR("%s: the TransferEngine is not initialized (call initialize first)", what);
        return -1;
    }
    if (c->list_mismatch) {
        MC_ERROR("%s: buffers, peer_buffer_addresses and lengths differ in length", what);
        return -1;
    }
    if ((size_t)c->n > MCPY_TE_MAX_BATCH_REQS) {
        MC_ERROR("%s: %zd requests in one call, more than %u", what, c->n, MCPY_TE_MAX_BATCH_REQS);
        return -1;
    }
    if (c->has_notify) {
        MC_ERROR("%s: notify is not supported by mooncake-c's Transfer Engine (no notify "
                 "channel); nothing was transferred",
                 what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < c->n; i++) {
        if (c->lens[i] == 0 || c->bufs[i] == 0) {
            MC_ERROR("%s: request %zd has %s", what, i,
                     c->lens[i] == 0 ? "length 0" : "buffer address 0");
            return -1;
        }
    }
    return 0;
}

/* Opens the target and builds the requests. GIL released. 0 or -1; *reqs malloc'd. */
static int build_reqs(McEngineObject *self, const call_t *c, const char *what,
                      mc_transfer_req_t **reqs)
{
    mc_segment_id_t seg;
    int rc = mc_te_open_segment(self->te, c->target, &seg);
    if (rc != 0) {
        MC_ERROR("%s: cannot open segment %s: %s", what, c->target, mc_error_name(rc));
        return -1;
    }
    mc_transfer_req_t *r = calloc((size_t)c->n, sizeof(*r));
    if (!r)
        return -1;
    for (Py_ssize_t i = 0; i < c->n; i++) {
        r[i].opcode = c->opcode;
        r[i].source = (void *)(uintptr_t)c->bufs[i];
        r[i].target_id = seg;
        r[i].target_offset = c->peers[i];
        r[i].length = (size_t)c->lens[i];
    }
    *reqs = r;
    return 0;
}

/* Synchronous: 0 when every byte moved, else -1 (matches upstream). */
static PyObject *run_sync(PyObject *obj, PyObject *args, PyObject *kw, int batch, int with_opcode,
                          mc_transfer_opcode_t fixed, const char *what)
{
    McEngineObject *self = (McEngineObject *)obj;
    call_t c;
    if (parse_call(args, kw, batch, with_opcode, with_opcode, fixed, &c) != 0)
        return NULL;
    int ret = check_call(self, &c, what);
    if (ret == 0 && c.n > 0) {
        Py_BEGIN_ALLOW_THREADS
        mc_transfer_req_t *reqs = NULL;
        ret = build_reqs(self, &c, what, &reqs);
        if (ret == 0) {
            int rc = mc_te_transfer_sync(self->te, reqs, (size_t)c.n);
            if (rc != 0) {
                MC_ERROR("%s to %s: %s", what, c.target, mc_error_name(rc));
                ret = -1;
            }
        }
        free(reqs);
        Py_END_ALLOW_THREADS
    }
    call_free(&c);
    return PyLong_FromLong(ret);
}

/* Takes a free slot for a new batch. With batches_lock held. The id, or 0 when full. */
static uint64_t batch_add_locked(McEngineObject *self, mc_batch_t *b, size_t n)
{
    if (self->batch_count >= MCPY_TE_MAX_BATCHES)
        return 0;
    for (size_t i = 0; i < MCPY_TE_MAX_BATCHES; i++) {
        if (self->batches[i].id == 0) {
            uint64_t id = ++self->next_batch_id;
            self->batches[i] = (mcpy_te_batch_t){id, b, n, mc_now_ms()};
            self->batch_count++;
            return id;
        }
    }
    return 0;
}

static mcpy_te_batch_t *batch_find_locked(McEngineObject *self, uint64_t id)
{
    if (id == 0)
        return NULL;
    for (size_t i = 0; i < MCPY_TE_MAX_BATCHES; i++)
        if (self->batches[i].id == id)
            return &self->batches[i];
    return NULL;
}

/* Asynchronous: the batch id (!= 0), or 0 on failure (matches upstream). */
static PyObject *run_async(PyObject *obj, PyObject *args, PyObject *kw, int batch, int with_opcode,
                           mc_transfer_opcode_t fixed, const char *what)
{
    McEngineObject *self = (McEngineObject *)obj;
    call_t c;
    if (parse_call(args, kw, batch, with_opcode, 0, fixed, &c) != 0)
        return NULL;
    uint64_t id = 0;
    if (check_call(self, &c, what) == 0) {
        if (c.n == 0) {
            MC_ERROR("%s: no requests", what);
        } else {
            Py_BEGIN_ALLOW_THREADS
            mc_transfer_req_t *reqs = NULL;
            mc_batch_t *b = NULL;
            if (build_reqs(self, &c, what, &reqs) == 0) {
                int rc = mc_te_batch_create(self->te, (size_t)c.n, &b);
                if (rc == 0)
                    rc = mc_te_submit(b, reqs, (size_t)c.n);
                if (rc == 0) {
                    pthread_mutex_lock(&self->batches_lock);
                    id = batch_add_locked(self, b, (size_t)c.n);
                    pthread_mutex_unlock(&self->batches_lock);
                    if (id == 0)
                        MC_ERROR("%s: %d batches are in flight, the most one TransferEngine "
                                 "keeps; collect some with get_batch_transfer_status or "
                                 "transfer_check_status first",
                                 what, MCPY_TE_MAX_BATCHES);
                } else {
                    MC_ERROR("%s to %s: %s", what, c.target, mc_error_name(rc));
                }
                if (id == 0)
                    mc_te_batch_free(b); /* waits for what was submitted */
            }
            free(reqs);
            Py_END_ALLOW_THREADS
        }
    }
    call_free(&c);
    return PyLong_FromUnsignedLongLong(id);
}

PyObject *mcpy_te_transfer_sync_write(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_sync(self, args, kw, 0, 0, MC_TRANSFER_WRITE, "transfer_sync_write");
}

PyObject *mcpy_te_transfer_sync_read(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_sync(self, args, kw, 0, 0, MC_TRANSFER_READ, "transfer_sync_read");
}

PyObject *mcpy_te_transfer_sync(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_sync(self, args, kw, 0, 1, MC_TRANSFER_READ, "transfer_sync");
}

PyObject *mcpy_te_batch_sync_write(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_sync(self, args, kw, 1, 0, MC_TRANSFER_WRITE, "batch_transfer_sync_write");
}

PyObject *mcpy_te_batch_sync_read(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_sync(self, args, kw, 1, 0, MC_TRANSFER_READ, "batch_transfer_sync_read");
}

PyObject *mcpy_te_batch_sync(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_sync(self, args, kw, 1, 1, MC_TRANSFER_READ, "batch_transfer_sync");
}

PyObject *mcpy_te_batch_async_write(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_async(self, args, kw, 1, 0, MC_TRANSFER_WRITE, "batch_transfer_async_write");
}

PyObject *mcpy_te_batch_async_read(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_async(self, args, kw, 1, 0, MC_TRANSFER_READ, "batch_transfer_async_read");
}

PyObject *mcpy_te_batch_async(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_async(self, args, kw, 1, 1, MC_TRANSFER_READ, "batch_transfer_async");
}

PyObject *mcpy_te_transfer_submit_write(PyObject *self, PyObject *args, PyObject *kw)
{
    return run_async(self, args, kw, 0, 0, MC_TRANSFER_WRITE, "transfer_submit_write");
}

/* 1 all completed, -1 one failed, 0 some still waiting. */
static int batch_state(const mcpy_te_batch_t *b)
{
    int waiting = 0;
    for (size_t i = 0; i < b->n; i++) {
        mc_transfer_status_t st;
        if (mc_te_get_status(b->batch, i, &st) != 0 || st.state == MC_TRANSFER_FAILED)
            return -1;
        if (st.state == MC_TRANSFER_WAITING)
            waiting = 1;
    }
    return waiting ? 0 : 1;
}

PyObject *mcpy_te_get_batch_transfer_status(PyObject *obj, PyObject *args)
{
    McEngineObject *self = (McEngineObject *)obj;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O:get_batch_transfer_status", &list))
        return NULL;
    uint64_t *ids;
    Py_ssize_t n;
    if (u64_list(list, "batch_ids", &ids, &n) != 0)
        return NULL;
    int ret = 0;
    mcpy_te_batch_t *taken = PyMem_Malloc(sizeof(*taken) * (size_t)(n ? n : 1));
    if (!taken) {
        PyMem_Free(ids);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    size_t nt = 0;
    pthread_mutex_lock(&self->batches_lock);
    for (Py_ssize_t i = 0; i < n; i++) {
        mcpy_te_batch_t *b = batch_find_locked(self, ids[i]);
        if (!b) {
            MC_ERROR("get_batch_transfer_status: batch id %llu is unknown or already collected",
                     (unsigned long long)ids[i]);
            ret = -1;
            continue;
        }
        taken[nt++] = *b;
        b->id = 0;
        self->batch_count--;
    }
    pthread_mutex_unlock(&self->batches_lock);
    for (size_t i = 0; i < nt; i++) {
        /* Each slice is bounded by the transfer timeout, so this wait ends. */
        int rc = mc_te_wait(taken[i].batch, -1);
        if (rc != 0 || batch_state(&taken[i]) != 1) {
            MC_ERROR("get_batch_transfer_status: batch %llu failed: %s",
                     (unsigned long long)taken[i].id, mc_error_name(rc));
            ret = -1;
        }
        mc_te_batch_free(taken[i].batch);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(taken);
    PyMem_Free(ids);
    return PyLong_FromLong(ret);
}

PyObject *mcpy_te_transfer_check_status(PyObject *obj, PyObject *args)
{
    McEngineObject *self = (McEngineObject *)obj;
    PyObject *idobj;
    uint64_t id;
    if (!PyArg_ParseTuple(args, "O:transfer_check_status", &idobj) ||
        mcpy_te_u64(idobj, "batch_id", &id) != 0)
        return NULL;
    int ret;
    Py_BEGIN_ALLOW_THREADS
    mcpy_te_batch_t done = {0};
    pthread_mutex_lock(&self->batches_lock);
    mcpy_te_batch_t *b = batch_find_locked(self, id);
    if (!b) {
        ret = -1;
    } else {
        ret = batch_state(b);
        if (ret == 0 && mc_now_ms() - b->start_ms > (uint64_t)self->timeout_ms)
            ret = -2; /* still running past the transfer timeout; the id stays live */
        if (ret == 1 || ret == -1) {
            done = *b;
            b->id = 0;
            self->batch_count--;
        }
    }
    pthread_mutex_unlock(&self->batches_lock);
    if (!b)
        MC_ERROR("transfer_check_status: batch id %llu is unknown or already collected",
                 (unsigned long long)id);
    if (done.batch)
        mc_te_batch_free(done.batch); /* a failed batch: waits for its other requests */
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(ret);
}

void mcpy_te_free_batches(McEngineObject *self)
{
    if (!self->batches)
        return;
    for (size_t i = 0; i < MCPY_TE_MAX_BATCHES; i++) {
        if (self->batches[i].id) {
            mc_te_batch_free(self->batches[i].batch);
            self->batches[i].id = 0;
        }
    }
    self->batch_count = 0;
}
