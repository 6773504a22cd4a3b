/*
 * store_client_ping.c — the real client's background threads. The ping thread pings the master
 * every second; when the master answers NEED_REMOUNT (it restarted, or this client was expired)
 * every segment is mounted again and restored extents verified; it also unmounts and frees
 * run-time segments whose grace period is over, carries the count of disk reads and checksum
 * mismatches, wakes the offload worker when tasks wait for it, and runs the owner's side of the
 * write fence. The view thread, when following an elected master, re-reads the view.
 */
#include "store_client_internal.h"

#include "clock.h"
#include "log.h"

#include <time.h>

#define MC_PING_INTERVAL_MS 1000

/*
 * Following an elected master: re-reads the view every ping period on its own thread (the ping
 * thread may be blocked on a stalled leader), so a new leader is picked up within a second and
 * the calls still waiting on the old one are cut short and retried there (rpc.h).
 */
void *mc_real_view_main(void *arg)
{
    mc_real_client_t *s = arg;
    pthread_mutex_lock(&s->ping_lock);
    while (!s->ping_stop) {
        struct timespec ts;
        mc_deadline_after_ms(&ts, CLOCK_REALTIME, MC_PING_INTERVAL_MS);
        pthread_cond_timedwait(&s->ping_cond, &s->ping_lock, &ts);
        if (s->ping_stop)
            break;
        pthread_mutex_unlock(&s->ping_lock);
        mc_rpc_client_follow(s->rpc);
        pthread_mutex_lock(&s->ping_lock);
    }
    pthread_mutex_unlock(&s->ping_lock);
    return NULL;
}

/*
 * The write fence, owner side (ping thread). A ping reply names tokens of revoked puts on our
 * segments: our engine refuses them from now on and raises a fence (mc_te_refuse_tokens);
 * once the fence completed — every write admitted before it is over, a same-host writer
 * stopped mid-copy included — the next ping confirms the batch and the master frees the
 * extents. Nothing here blocks: a fence that waits for a stopped writer leaves the extents
 * quarantined, not the ping thread stuck (its silence would expire us).
 */
static int fence_progress(mc_real_client_t *s);

static void fence_take(mc_real_client_t *s, const Mc__PingResponse *resp)
{
    if (resp->view_version != s->fence_view) { /* another master instance: its own sequences */
        s->fence_view = resp->view_version;
        s->fence_raised = s->fence_acked = s->fence_gen = 0;
    }
    if (resp->n_fence_tokens == 0 || resp->fence_upto <= s->fence_raised)
        return;
    uint64_t gen = 0;
    int rc = mc_te_refuse_tokens(s->te, resp->fence_tokens, resp->n_fence_tokens, &gen);
    if (rc != 0) { /* too many fences still waiting, or no memory: asked again next ping */
        MC_WARN("cannot refuse %zu revoked allocations yet (%s); retrying", resp->n_fence_tokens,
                mc_error_name(rc));
        return;
    }
    s->fence_raised = resp->fence_upto;
    s->fence_gen = gen;
    fence_progress(s);
}

/* Moves fence_acked up when the last raised fence completed; 1 when a confirmation is due. */
static int fence_progress(mc_real_client_t *s)
{
    if (s->fence_raised > s->fence_acked && mc_te_fence_completed(s->te) >= s->fence_gen) {
        s->fence_acked = s->fence_raised;
        return 1;
    }
    return 0;
}

void *mc_real_ping_main(void *arg)
{
    mc_real_client_t *s = arg;
    uint64_t last_ping = 0;
    pthread_mutex_lock(&s->ping_lock);
    while (!s->ping_stop) {
        /* While a write fence is pending, look at it every 10 ms and confirm it at once: its
         * extents stay out of use until then. */
        int fencing = s->fence_raised > s->fence_acked;
        struct timespec ts;
        mc_deadline_after_ms(&ts, CLOCK_REALTIME, fencing ? 10 : MC_PING_INTERVAL_MS);
        pthread_cond_timedwait(&s->ping_cond, &s->ping_lock, &ts);
        if (s->ping_stop)
            break;
        if (fencing && !fence_progress(s) && mc_now_ms() - last_ping < MC_PING_INTERVAL_MS)
            continue;
        pthread_mutex_unlock(&s->ping_lock);
        last_ping = mc_now_ms();

        Mc__PingResponse *resp = NULL;
        fence_progress(s);
        int rc = mc_master_call_ping(s->rpc, s->client_id, mc_offload_fallback_reads(s->offload),
                                     atomic_load(&s->checksum_mismatches), s->fence_acked,
                                     s->fence_view, &resp);
        if (rc != 0) {
            if (atomic_exchange(&s->master_reachable, 0))
                MC_WARN("master %s unreachable (%s); will re-mount when it is back", s->master_addr,
                        mc_error_name(rc));
            mc_rpc_client_reset(s->rpc);
        } else {
            /* A re-mount the master deferred (its range still fenced by read leases) is tried
             * again on every ping until it succeeds. */
            if (resp->client_status == 2 /* NEED_REMOUNT */ || s->remount_pending) {
                /* Until the new mount's epoch is known, no transfer naming any epoch is served,
                 * and those admitted under the old one drain first: a late write of the old
                 * mount can then never land on memory the new mount hands out. */
                pthread_mutex_lock(&s->segs_lock);
                int mrc = 0;
                /* The fence must be complete before the master may hand the memory out again:
                 * a same-host writer stopped mid-copy holds the re-mount back. */
                if (s->segment || s->run_seg_count)
                    mrc = mc_real_set_epoch(s, UINT64_MAX);
                if (mrc != 0)
                    MC_WARN("re-mount of segment %s deferred: a write admitted before it is "
                            "still copying (%s)",
                            mc_te_local_segment_name(s->te), mc_error_name(mrc));
                else
                    mrc = mc_real_segment_call(s, MC_RPC_REMOUNT_SEGMENT);
                size_t nrun = s->run_seg_count;
                pthread_mutex_unlock(&s->segs_lock);
                s->remount_pending = mrc != 0;
                /* A restarted master also lost its embedded metadata service's entries. */
                mc_te_republish(s->te);
                if (mrc == 0 && (s->segment || nrun))
                    MC_INFO("re-mounted segment %s (%s, and %zu mounted at run time) at master %s",
                            mc_te_local_segment_name(s->te), s->segment_id, nrun, s->master_addr);
                if (mrc == 0 && (s->segment || nrun))
                    mc_real_restore_verify(s); /* restored extents the master holds back */
            }
            mc_real_run_segments_tick(s);
            if (!atomic_exchange(&s->master_reachable, 1))
                MC_INFO("master %s reachable", s->master_addr);
            if (resp->offload_pending > 0)
                mc_offload_wake(s->offload);
            fence_take(s, resp);
            mc__ping_response__free_unpacked(resp, NULL);
        }
        pthread_mutex_lock(&s->ping_lock);
    }
    pthread_mutex_unlock(&s->ping_lock);
    return NULL;
}
