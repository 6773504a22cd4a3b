/*
 * store_client_restore.c — re-mount verification of restored extents (the master's side is in
 * src/master/restore.c; RPCs RestoreVerifyFetch and RestoreVerifyConfirm).
 *
 * After a re-mount, a master restored from a snapshot that was not clean holds back the replicas
 * it restored on our segments until we confirm that our memory still holds their bytes: for each
 * extent it names (inside one of our segments), the CRC32C of our own memory must equal the
 * checksum its writer recorded. Runs on the ping thread, which alone unmaps run-time segments.
 */
#include "store_client_internal.h"

#include "checksum.h"
#include "log.h"
#include "snapshot.pb-c.h"

#include <stdio.h>
#include <stdlib.h>

#define RESTORE_VERIFY_PAGES_MAX 100000 /* bound on fetches per segment and re-mount */

typedef struct verify_range {
    char id[MC_STORE_SEGMENT_ID_MAX];
    uintptr_t base;
    uint64_t size;
} verify_range_t;

static int verify_in_range(const verify_range_t *r, uint64_t address, uint64_t size)
{
    return address >= r->base && size <= r->size && address - r->base <= r->size - size;
}

static void restore_verify_segment(mc_real_client_t *s, const verify_range_t *r)
{
    uint64_t from = 0;
    size_t pages = 0, good = 0, bad = 0;
    do {
        Mc__RestoreVerifyRequest req = MC__RESTORE_VERIFY_REQUEST__INIT;
        req.client_id = s->client_id;
        req.segment_id = (char *)r->id;
        req.from = from;
        Mc__RestoreVerifyResponse *resp = NULL;
        if (mc_rpc_call_pb(s->rpc, MC_RPC_RESTORE_VERIFY_FETCH, &req.base,
                           &mc__restore_verify_response__descriptor,
                           (ProtobufCMessage **)&resp) != 0)
            return; /* an older master, or unreachable: nothing is made visible unconfirmed */
        if (resp->code != 0 || resp->n_extents == 0) {
            from = resp->code == 0 ? resp->next : 0;
            mc__restore_verify_response__free_unpacked(resp, NULL);
            continue;
        }
        size_t n = resp->n_extents;
        uint64_t *ids = calloc(n, sizeof(*ids));
        protobuf_c_boolean *ok = calloc(n, sizeof(*ok));
        for (size_t i = 0; ids && ok && i < n; i++) {
            const Mc__RestoreExtent *x = resp->extents[i];
            ids[i] = x->id;
            ok[i] = verify_in_range(r, x->address, x->size) &&
                    mc_crc32c(0, (const void *)(uintptr_t)x->address, x->size) == x->checksum;
            good += ok[i] != 0;
            bad += ok[i] == 0;
        }
        from = resp->next;
        mc__restore_verify_response__free_unpacked(resp, NULL);
        if (ids && ok) {
            Mc__RestoreVerifyRequest conf = MC__RESTORE_VERIFY_REQUEST__INIT;
            conf.client_id = s->client_id;
            conf.segment_id = (char *)r->id;
            conf.n_ids = n;
            conf.ids = ids;
            conf.n_ok = n;
            conf.ok = ok;
            Mc__RestoreVerifyResponse *cresp = NULL;
            if (mc_rpc_call_pb(s->rpc, MC_RPC_RESTORE_VERIFY_CONFIRM, &conf.base,
                               &mc__restore_verify_response__descriptor,
                               (ProtobufCMessage **)&cresp) == 0)
                mc__restore_verify_response__free_unpacked(cresp, NULL);
        }
        free(ids);
        free(ok);
    } while (from != 0 && ++pages < RESTORE_VERIFY_PAGES_MAX);
    if (good || bad)
        MC_INFO("segment %s: %zu restored extents verified, %zu did not match (dropped)", r->id,
                good, bad);
}

void mc_real_restore_verify(mc_real_client_t *s)
{
    pthread_mutex_lock(&s->segs_lock);
    size_t cap = 1 + s->run_seg_count, n = 0;
    verify_range_t *v = calloc(cap, sizeof(*v));
    if (v && s->segment && s->segment_id[0]) {
        snprintf(v[n].id, sizeof(v[n].id), "%s", s->segment_id);
        v[n].base = (uintptr_t)s->segment;
        v[n++].size = s->global_segment_size;
    }
    for (size_t i = 0; v && i < s->run_seg_count; i++) {
        if (s->run_segs[i].drain_until)
            continue;
        snprintf(v[n].id, sizeof(v[n].id), "%s", s->run_segs[i].id);
        v[n].base = (uintptr_t)s->run_segs[i].base;
        v[n++].size = s->run_segs[i].size;
    }
    pthread_mutex_unlock(&s->segs_lock);
    for (size_t i = 0; i < n; i++)
        restore_verify_segment(s, &v[i]);
    free(v);
}
