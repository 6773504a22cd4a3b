/*
 * write_fence.c — the receiver-side write fence: which writes may still modify this engine's
 * memory, and when the ones admitted before a change of rules are over.
 *
 * The rule a fence enforces: once a write was reported failed, or the put it served was revoked,
 * its bytes never modify memory that holds, or will be handed to, anything else. An initiator
 * gives up on its own (a timeout), so nothing it does afterwards can stop a receiver that was
 * stalled with the bytes already queued, or a same-host writer stopped in the middle of its
 * memcpy. What can: the owner of the memory refusing the write at the moment it would be
 * applied, and the store's master not reusing the memory until the owner confirms that every
 * write admitted under the old rules is over. This file keeps both halves:
 *
 *  - The rules (a fence page, struct mc_fence_page): the owner's epoch and a sorted set of
 *    refused fencing tokens (a put's allocation id, from the master). Writers are checked
 *    against them immediately before their bytes move, inside an *admission*.
 *  - Admissions and generations: every change of rules bumps the page's generation `gen`. A
 *    write is admitted under the generation it read, and stays counted there until its last
 *    byte is in place: in-process writes (the tcp server, the local path) in a ring of counters
 *    indexed by generation, same-host writers in other processes (shm) in the same kind of ring
 *    in their own slot of the page. A fence raised to generation G is complete when no admission
 * under a generation below G remains — whatever the writer's state: one stopped mid-copy keeps it
 * incomplete until it resumes and finishes, or dies (its unix socket hangs up and the owner clears
 * its slot). Generations index the rings modulo MC_FENCE_RING, so at most MC_FENCE_RING - 1 fences
 * may wait at once; another is refused until the oldest completes (its caller retries).
 *
 * Ordering (all seq_cst): a writer publishes its admission (counter g incremented), then re-reads
 * gen; only if it is still g does it read the rules and copy. The owner publishes new rules,
 * then bumps gen, then scans admissions. So a writer either saw the new rules, or is counted
 * under an old generation that the owner waits for (the classic epoch-based reclamation
 * argument, as in Linux's SRCU).
 *
 * The page is a memfd of its own, handed to same-host peers over the shm socket (index -1) and
 * mapped by them read-write (each writes only its slot). Without memfd it is anonymous memory
 * and same-host peers get no page (they use tcp, where the owner checks).
 *
 * Thread-safety: admissions are lock-free; raising fences and changing the page take fence_lock.
 */
#include "transfer_internal.h"

#include "log.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MC_FENCE_MAGIC 0x314543454e45434dull /* "MCENCEF1" little-endian, any fixed value */

size_t mc_fence_page_size(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (sizeof(mc_fence_page_t) + page - 1) / page * page;
}

int mc_fence_init(mc_transfer_engine_t *te)
{
    pthread_mutex_init(&te->fence_lock, NULL);
    te->fence_memfd = -1;
    size_t len = mc_fence_page_size();
    int fd = memfd_create("mooncake-fence", MFD_CLOEXEC);
    void *p = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        if (fd >= 0)
            close(fd);
        fd = -1;
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return MC_ERR_INTERNAL_ERROR;
        MC_WARN("fence page: no memfd (%s); same-host peers will write over tcp", strerror(errno));
    }
    te->fence = p;
    te->fence_memfd = fd;
    te->fence->magic = MC_FENCE_MAGIC;
    atomic_store(&te->fence->gen, 1);
    te->fence_done = 1;
    return 0;
}

void mc_fence_fini(mc_transfer_engine_t *te)
{
    if (te->fence)
        munmap(te->fence, mc_fence_page_size());
    if (te->fence_memfd >= 0)
        close(te->fence_memfd);
    te->fence = NULL;
    te->fence_memfd = -1;
    pthread_mutex_destroy(&te->fence_lock);
}

/* 1 when `token` is refused by page f (seqlock read: retried while the owner rewrites it). */
int mc_fence_token_refused(const mc_fence_page_t *f, uint64_t token)
{
    if (token == 0)
        return 0;
    for (;;) {
        uint64_t s1 = atomic_load(&f->seq);
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        int refused = token <= atomic_load_explicit(&f->floor, memory_order_relaxed);
        uint32_t n = atomic_load_explicit(&f->count, memory_order_relaxed);
        if (n > MC_TE_MAX_REFUSED_TOKENS)
            n = MC_TE_MAX_REFUSED_TOKENS; /* a torn read, retried below */
        size_t lo = 0, hi = n;
        while (!refused && lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            uint64_t v = atomic_load_explicit(&f->tokens[mid], memory_order_relaxed);
            if (v == token)
                refused = 1;
            else if (v < token)
                lo = mid + 1;
            else
                hi = mid;
        }
        atomic_thread_fence(memory_order_acquire); /* the loads above before the re-read */
        if (atomic_load(&f->seq) == s1)
            return refused;
    }
}

int mc_fence_rules_copy(const mc_fence_page_t *f, mc_fence_rules_t *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t *buf = NULL;
    size_t cap = 0;
    for (;;) {
        uint64_t s1 = atomic_load(&f->seq);
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        uint64_t floor = atomic_load_explicit(&f->floor, memory_order_relaxed);
        uint32_t n = atomic_load_explicit(&f->count, memory_order_relaxed);
        if (n > MC_TE_MAX_REFUSED_TOKENS)
            n = MC_TE_MAX_REFUSED_TOKENS; /* a torn read, retried below */
        if (n > cap) {
            free(buf);
            cap = n;
            buf = malloc(cap * sizeof(*buf));
            if (!buf)
                return MC_ERR_INTERNAL_ERROR;
        }
        for (uint32_t i = 0; i < n; i++)
            buf[i] = atomic_load_explicit(&f->tokens[i], memory_order_relaxed);
        uint64_t epoch = atomic_load(&f->epoch);
        atomic_thread_fence(memory_order_acquire); /* the loads above before the re-read */
        if (atomic_load(&f->seq) != s1)
            continue;
        out->epoch = epoch;
        out->floor = floor;
        out->n = n;
        out->tokens = n > 0 ? buf : NULL;
        if (n == 0)
            free(buf);
        return 0;
    }
}

void mc_fence_rules_free(mc_fence_rules_t *r)
{
    free(r->tokens);
    memset(r, 0, sizeof(*r));
}

int mc_fence_rules_check(const mc_fence_rules_t *r, uint64_t epoch, uint64_t token, char *why,
                         size_t why_len)
{
    if (epoch != 0 && r->epoch != 0 && epoch != r->epoch) {
        snprintf(why, why_len, "stale epoch: the write carries epoch %llu, the segment is at %llu",
                 (unsigned long long)epoch, (unsigned long long)r->epoch);
        return MC_ERR_INVALID_WRITE;
    }
    int refused = token != 0 && token <= r->floor;
    size_t lo = 0, hi = r->n;
    while (token != 0 && !refused && lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->tokens[mid] == token)
            refused = 1;
        else if (r->tokens[mid] < token)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (refused) {
        snprintf(why, why_len,
                 "fenced: the write's allocation (token %llu) was revoked; its memory may "
                 "belong to another object",
                 (unsigned long long)token);
        return MC_ERR_INVALID_WRITE;
    }
    return 0;
}

int mc_fence_check(const mc_fence_page_t *f, uint64_t epoch, uint64_t token, char *why,
                   size_t why_len)
{
    uint64_t mine = atomic_load(&f->epoch);
    if (epoch != 0 && mine != 0 && epoch != mine) {
        snprintf(why, why_len, "stale epoch: the write carries epoch %llu, the segment is at %llu",
                 (unsigned long long)epoch, (unsigned long long)mine);
        return MC_ERR_INVALID_WRITE;
    }
    if (mc_fence_token_refused(f, token)) {
        snprintf(why, why_len,
                 "fenced: the write's allocation (token %llu) was revoked; its memory may "
                 "belong to another object",
                 (unsigned long long)token);
        return MC_ERR_INVALID_WRITE;
    }
    return 0;
}

int mc_fence_admit(mc_fence_page_t *f, _Atomic uint64_t *ring, uint64_t epoch, uint64_t token,
                   uint64_t *pass, char *why, size_t why_len)
{
    uint64_t g;
    for (;;) {
        g = atomic_load(&f->gen);
        atomic_fetch_add(&ring[g % MC_FENCE_RING], 1);
        if (atomic_load(&f->gen) == g)
            break;
        atomic_fetch_sub(&ring[g % MC_FENCE_RING], 1);
    }
    int rc = mc_fence_check(f, epoch, token, why, why_len);
    if (rc != 0) {
        atomic_fetch_sub(&ring[g % MC_FENCE_RING], 1);
        return rc;
    }
    *pass = g;
    return 0;
}

void mc_fence_release(_Atomic uint64_t *ring, uint64_t pass)
{
    atomic_fetch_sub(&ring[pass % MC_FENCE_RING], 1);
}

/* The highest G such that no admission under a generation below G remains. fence_lock held. */
static uint64_t completed_locked(mc_transfer_engine_t *te)
{
    mc_fence_page_t *f = te->fence;
    uint64_t cur = atomic_load(&f->gen), g = te->fence_done;
    while (g < cur && atomic_load(&te->fence_inflight[g % MC_FENCE_RING]) == 0) {
        int busy = 0;
        for (size_t i = 0; i < MC_FENCE_SLOTS && !busy; i++)
            busy = te->fence_slot_used[i] && atomic_load(&f->slots[i].count[g % MC_FENCE_RING]);
        if (busy)
            break;
        g++;
    }
    if (g > te->fence_done)
        te->fence_done = g;
    return te->fence_done;
}

uint64_t mc_te_fence_completed(mc_transfer_engine_t *te)
{
    if (!te || !te->fence)
        return 0;
    pthread_mutex_lock(&te->fence_lock);
    uint64_t g = completed_locked(te);
    pthread_mutex_unlock(&te->fence_lock);
    return g;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*
 * Merges tokens into the page's sorted set (fence_lock held, inside the seqlock's odd phase).
 * Beyond MC_TE_MAX_REFUSED_TOKENS the oldest (smallest) go and the floor rises over them.
 */
static int merge_tokens_locked(mc_fence_page_t *f, const uint64_t *tokens, size_t n)
{
    uint32_t have = atomic_load_explicit(&f->count, memory_order_relaxed);
    size_t total = (size_t)have + n;
    uint64_t *all = malloc((total ? total : 1) * sizeof(*all));
    if (!all)
        return MC_ERR_INTERNAL_ERROR;
    for (uint32_t i = 0; i < have; i++)
        all[i] = atomic_load_explicit(&f->tokens[i], memory_order_relaxed);
    size_t m = have;
    uint64_t floor = atomic_load_explicit(&f->floor, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] != 0 && tokens[i] > floor)
            all[m++] = tokens[i];
    }
    qsort(all, m, sizeof(*all), u64_cmp);
    size_t u = 0; /* unique */
    for (size_t i = 0; i < m; i++) {
        if (u == 0 || all[u - 1] != all[i])
            all[u++] = all[i];
    }
    size_t skip = 0;
    if (u > MC_TE_MAX_REFUSED_TOKENS) {
        skip = u - MC_TE_MAX_REFUSED_TOKENS / 2; /* keep the newest half: room for more */
        floor = all[skip - 1];
        atomic_store_explicit(&f->floor, floor, memory_order_relaxed);
        MC_WARN("more than %d revoked allocations refused: every token up to %llu is refused "
                "from now on",
                MC_TE_MAX_REFUSED_TOKENS, (unsigned long long)floor);
    }
    for (size_t i = skip; i < u; i++)
        atomic_store_explicit(&f->tokens[i - skip], all[i], memory_order_relaxed);
    atomic_store_explicit(&f->count, (uint32_t)(u - skip), memory_order_relaxed);
    free(all);
    return 0;
}

/*
 * Changes the rules (new refused tokens; the epoch too when set_epoch) and raises a fence; with
 * fence_rdma the rdma serving endpoints are replaced as well. *gen receives the generation whose
 * completion proves that no write admitted under the old rules is still moving.
 */
int mc_fence_raise(mc_transfer_engine_t *te, const uint64_t *tokens, size_t n, int set_epoch,
                   uint64_t epoch, int fence_rdma, uint64_t *gen)
{
    mc_fence_page_t *f = te->fence;
    pthread_mutex_lock(&te->fence_lock);
    /* The ring of in-process counters is indexed by generation: never let the current one
     * alias an incomplete one. Only a writer stuck mid-copy for MC_FENCE_RING fences hits it. */
    if (atomic_load(&f->gen) + 1 - completed_locked(te) >= MC_FENCE_RING) {
        pthread_mutex_unlock(&te->fence_lock);
        MC_WARN("fence not raised: %d fences are still waiting for a writer admitted before "
                "them (stopped mid-copy?)",
                MC_FENCE_RING);
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    int rc = 0;
    if (n > 0) {
        atomic_fetch_add(&f->seq, 1); /* odd: readers retry */
        rc = merge_tokens_locked(f, tokens, n);
        atomic_fetch_add(&f->seq, 1);
    }
    if (rc == 0 && set_epoch) {
        atomic_store(&te->epoch, epoch);
        atomic_store(&f->epoch, epoch);
    }
    uint64_t g = rc == 0 ? atomic_fetch_add(&f->gen, 1) + 1 : 0;
    pthread_mutex_unlock(&te->fence_lock);
    if (rc != 0)
        return rc;
    /* Each transport's part, last to first: tcp receives of a token refused now stop at once
     * instead of at their deadline; rdma writes are applied by UCX, not admitted here, so their
     * serving endpoints are replaced and nothing queued to them before this point lands. */
    size_t count = 0;
    while (te->transports[count])
        count++;
    int rrc = 0;
    while (count-- > 0) {
        const mc_transport_ops_t *t = te->transports[count];
        int trc = t->fence ? t->fence(te, n > 0, fence_rdma) : 0;
        if (trc != 0)
            MC_ERROR("fence: the %s serving endpoints could not be replaced (%s)", t->name,
                     mc_error_name(trc));
        if (rrc == 0)
            rrc = trc;
    }
    if (gen)
        *gen = g;
    return rrc;
}

int mc_fence_wait(mc_transfer_engine_t *te, uint64_t gen, int timeout_ms)
{
    uint64_t deadline = mc_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (unsigned spins = 0;; spins++) {
        if (mc_te_fence_completed(te) >= gen)
            return 0;
        if (mc_now_ms() >= deadline)
            return MC_ERR_TRANSFER_FAIL;
        struct timespec ts = {0, spins < 100 ? 100000L : 2000000L};
        nanosleep(&ts, NULL);
    }
}

int mc_te_refuse_tokens(mc_transfer_engine_t *te, const uint64_t *tokens, size_t n, uint64_t *gen)
{
    if (!te || (n > 0 && !tokens))
        return MC_ERR_INVALID_PARAMS;
    return mc_fence_raise(te, tokens, n, 0, 0, 1, gen);
}

int mc_te_admit_write(mc_transfer_engine_t *te, uint64_t epoch, uint64_t token, uint64_t *pass)
{
    if (!te || !te->fence || !pass)
        return MC_ERR_INVALID_PARAMS;
    char why[256];
    int rc = mc_fence_admit(te->fence, te->fence_inflight, epoch, token, pass, why, sizeof(why));
    if (rc != 0)
        MC_ERROR("write into segment %s refused: %s", te->name, why);
    return rc;
}

void mc_te_end_write(mc_transfer_engine_t *te, uint64_t pass)
{
    if (te && te->fence)
        mc_fence_release(te->fence_inflight, pass);
}

int32_t mc_fence_slot_claim(mc_transfer_engine_t *te)
{
    if (te->fence_memfd < 0)
        return -1;
    pthread_mutex_lock(&te->fence_lock);
    int32_t slot = -1;
    for (int32_t i = 0; i < MC_FENCE_SLOTS && slot < 0; i++) {
        if (!te->fence_slot_used[i]) {
            te->fence_slot_used[i] = 1;
            for (int k = 0; k < MC_FENCE_RING; k++)
                atomic_store(&te->fence->slots[i].count[k], 0);
            slot = i;
        }
    }
    pthread_mutex_unlock(&te->fence_lock);
    return slot;
}

void mc_fence_slot_free(mc_transfer_engine_t *te, int32_t slot)
{
    if (slot < 0 || slot >= MC_FENCE_SLOTS)
        return;
    pthread_mutex_lock(&te->fence_lock);
    /* The peer hung up: it died or dropped its mappings (never mid-copy: it closes its socket
     * only with its copy lock held for writing), so whatever it was admitted for is over. */
    for (int k = 0; k < MC_FENCE_RING; k++)
        atomic_store(&te->fence->slots[slot].count[k], 0);
    te->fence_slot_used[slot] = 0;
    pthread_mutex_unlock(&te->fence_lock);
}
