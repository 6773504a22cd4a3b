/*
 * local_transport.c — the `local` transport: a request to this engine's own segment, moved in
 * the caller's thread by one memcpy under the registry read lock, after the checks the owner
 * makes on every path it serves (the epoch, the range, the write fence's admission).
 */
#include "transfer_internal.h"

#include "checksum.h"
#include "log.h"

#include <string.h>

/* The engine's own segment: epoch check and memcpy under the registry read lock. With `crc`,
 * *crc receives the CRC32C of the bytes moved (fused with the copy when the ranges are apart). */
static int transfer_local(mc_transfer_engine_t *te, const mc_transfer_req_t *req, uint32_t *crc)
{
    int refused = req->opcode == MC_TRANSFER_WRITE ? MC_ERR_INVALID_WRITE : MC_ERR_INVALID_READ;
    const char *what = req->opcode == MC_TRANSFER_WRITE ? "write" : "read";
    pthread_rwlock_rdlock(&te->registry.lock);
    uint64_t mine = atomic_load(&te->epoch);
    if (req->epoch != 0 && mine != 0 && req->epoch != mine) {
        pthread_rwlock_unlock(&te->registry.lock);
        MC_ERROR("stale epoch: %s [%#llx, +%zu) carries epoch %llu, local segment %s is at "
                 "epoch %llu",
                 what, (unsigned long long)req->target_offset, req->length,
                 (unsigned long long)req->epoch, te->name, (unsigned long long)mine);
        return refused;
    }
    const mc_local_region_t *g =
        mc_registry_find_locked(&te->registry, req->target_offset, req->length);
    uint64_t pass = 0;
    if (g && req->opcode == MC_TRANSFER_WRITE) {
        char why[256];
        if (mc_fence_admit(te->fence, te->fence_inflight, req->epoch, req->fence_token, &pass, why,
                           sizeof(why)) != 0) {
            pthread_rwlock_unlock(&te->registry.lock);
            MC_ERROR("write [%#llx, +%zu) on local segment %s refused: %s",
                     (unsigned long long)req->target_offset, req->length, te->name, why);
            return refused;
        }
    }
    if (g) {
        void *target = (void *)(uintptr_t)req->target_offset;
        void *dst = req->opcode == MC_TRANSFER_WRITE ? target : req->source;
        const void *src = req->opcode == MC_TRANSFER_WRITE ? req->source : target;
        uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
        if (crc && (d + req->length <= s || s + req->length <= d)) {
            *crc = mc_copy_crc32c(dst, src, req->length, 0, req->opcode == MC_TRANSFER_WRITE);
        } else {
            memmove(dst, src, req->length);
            if (crc) /* overlapping ranges: the bytes now at the destination */
                *crc = mc_crc32c(0, dst, req->length);
        }
        if (req->opcode == MC_TRANSFER_WRITE)
            mc_fence_release(te->fence_inflight, pass);
    }
    pthread_rwlock_unlock(&te->registry.lock);
    if (g)
        return 0;
    MC_ERROR("%s [%#llx, +%zu) is outside the registered memory of local segment %s", what,
             (unsigned long long)req->target_offset, req->length, te->name);
    return refused;
}

static int local_submit(mc_transfer_engine_t *te, mc_peer_t *peer, const mc_transfer_req_t *req,
                        uint32_t *crc)
{
    return peer->is_self ? transfer_local(te, req, crc) : MC_TRANSPORT_DECLINED;
}

const mc_transport_ops_t mc_local_transport = {
    .name = "local",
    .submit = local_submit,
};
