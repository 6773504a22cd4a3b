/*
 * transports.c — the table of the Transfer Engine's transports (mc_transport_ops_t). The only
 * place that names them: the engine, the metadata and the fence walk these arrays.
 *
 * Dispatch order is behaviour: a request to the engine's own segment is a memcpy (local); a
 * same-host peer's shared memory wins over the network (shm); rdma takes a peer whose
 * descriptor has a UCX worker address, when this engine runs protocol rdma; tcp takes the rest.
 * Start order is what each start needs: tcp serves handshakes that describe rdma's worker
 * address, and shm names its socket after tcp's port. local has nothing to start.
 */
#include "transfer_internal.h"

const mc_transport_ops_t *const mc_transports[] = {
    &mc_local_transport, &mc_shm_transport,
#ifdef MC_HAVE_RDMA
    &mc_rdma_transport,
#endif
    &mc_tcp_transport,   NULL,
};

const mc_transport_ops_t *const mc_transport_start_order[] = {
#ifdef MC_HAVE_RDMA
    &mc_rdma_transport,
#endif
    &mc_tcp_transport,
    &mc_shm_transport,
    NULL,
};
