/*
 * engine.h — internals of `mooncake.engine`, upstream Mooncake's Python Transfer Engine, built
 * into the same extension library as `mooncake._store` (python/CMakeLists.txt) and imported as
 * `mooncake._engine` (python/mooncake/engine.py loads it from that library), so that a store can
 * use an engine created from Python: both share one copy of the C Transfer Engine.
 *
 * Files:
 *   engine.c           module init, TransferEngine object, initialize, registration, managed
 *                      buffers, probes, topology, InnerTransferEngine
 *   engine_transfer.c  transfers: sync, async batches and their id table
 *
 * Thread-safety: every method may be called from many Python threads at once. The C engine
 * (`te`) is set once by initialize and destroyed only in tp_dealloc, so a method that holds a
 * reference to the object may use it with the GIL released. The tables below (registered
 * ranges, managed buffers, live batches) are guarded by their own mutexes, taken with the GIL
 * released.
 */
#ifndef MCPY_ENGINE_H
#define MCPY_ENGINE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mooncake/transfer_engine.h"

#include <pthread.h>
#include <stdint.h>

#define MCPY_ENGINE_MODULE "mooncake.engine"
/* Bound on batches submitted asynchronously and not yet collected (transfer_check_status /
 * get_batch_transfer_status): one more is refused (id 0) with an error line. */
#define MCPY_TE_MAX_BATCHES 1024
/* Bound on the requests of one batch call (list length): more is refused (-1 / id 0). */
#define MCPY_TE_MAX_BATCH_REQS (1u << 20)
/* Bound on ranges this object registered (register_memory + managed buffers), as the C engine's
 * own region limit. */
#define MCPY_TE_MAX_RANGES 4096

typedef struct mcpy_te_range {
    uint64_t addr;
    uint64_t length;
    int managed; /* 1: allocate_managed_buffer (engine-owned shm memory), 0: caller's memory */
} mcpy_te_range_t;

typedef struct mcpy_te_batch {
    uint64_t id; /* != 0 */
    mc_batch_t *batch;
    size_t n;          /* requests submitted */
    uint64_t start_ms; /* mc_now_ms() at submission */
} mcpy_te_batch_t;

typedef struct McEngineObject {
    PyObject_HEAD
    mc_transfer_engine_t *te; /* NULL until initialize succeeded; then fixed until dealloc */
    int timeout_ms;           /* MC_TRANSFER_TIMEOUT, read by the constructor */
    int initializing;         /* guarded by the GIL: one initialize at a time */
    int rpc_port;             /* port of te's segment name, -1 before initialize */

    /* Ranges registered through this object. The lock is also held across
     * write_bytes_to_buffer / read_bytes_from_buffer copies, so a range is not unregistered
     * (and freed by its owner) under a copy. */
    pthread_mutex_t ranges_lock;
    mcpy_te_range_t *ranges;
    size_t range_count;

    pthread_mutex_t batches_lock;
    mcpy_te_batch_t *batches; /* MCPY_TE_MAX_BATCHES slots, id 0 = free */
    size_t batch_count;
    uint64_t next_batch_id;
} McEngineObject;

extern PyTypeObject McEngine_Type;
extern PyTypeObject McInnerEngine_Type;

/*
 * The C engine behind an `InnerTransferEngine` object (TransferEngine.get_engine()), for
 * MooncakeDistributedStore.setup(engine=...). Returns 1 and sets *te (NULL when the engine was
 * never initialized) and *owner (a borrowed reference to the TransferEngine, which the caller
 * must keep referenced for as long as it uses *te); 0 when obj is not an InnerTransferEngine.
 * Needs the GIL.
 */
int mcpy_inner_engine(PyObject *obj, mc_transfer_engine_t **te, PyObject **owner);

/* ---- engine_transfer.c ------------------------------------------------------------------ */

PyObject *mcpy_te_transfer_sync_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_transfer_sync_read(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_transfer_sync(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_batch_sync_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_batch_sync_read(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_batch_sync(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_batch_async_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_batch_async_read(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_batch_async(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_transfer_submit_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_te_get_batch_transfer_status(PyObject *self, PyObject *args);
PyObject *mcpy_te_transfer_check_status(PyObject *self, PyObject *args);

/* Frees every live batch (waits for their requests). At dealloc, GIL released. */
void mcpy_te_free_batches(McEngineObject *self);

/* An address/length argument: a Python int (or __index__) in 0..UINT64_MAX. 0, or -1 with
 * TypeError (pybind's answer to a value that does not fit uint64/size_t). */
int mcpy_te_u64(PyObject *obj, const char *what, uint64_t *out);

#endif /* MCPY_ENGINE_H */
