/*
 * store_client_segments.c — the real client's segments at the master: the mount, re-mount and
 * unmount calls (the segment of setup, and for a re-mount every run-time one), the epoch they
 * give the Transfer Engine, and the segments mounted at run time (mc_store_allocate_and_mount_
 * segment, mc_store_mount_file_segment: mc_run_segment_t), unmounted at once or after a grace
 * period, whose freed addresses stay reserved for a while (mc_segment_hole_t). Also the ids this
 * client gives itself and its segments.
 */
#include "store_client_internal.h"

#include "clock.h"
#include "ids.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* How long an unmounted segment's addresses stay reserved: the transfer timeout (30 s) plus a
 * margin, which also covers the default read lease (10 s). */
#define MC_SEGMENT_HOLE_MS 35000
/* upstream's allocate_and_mount_segment rounds sizes up to its slab size (cachelib 4 MiB) */
#define MC_RUN_SEGMENT_ALIGN (4ull << 20)

/* Distinguishes this process's ids from each other when the kernel gives no randomness. */
static atomic_uint_fast64_t fallback_seq;

/* A client or segment id: a random UUID, or (no randomness) pid, sequence and clock. */
void mc_real_make_uuid(char out[40])
{
    _Static_assert(40 > MC_UUID_TEXT_LEN, "room for a UUID");
    if (mc_uuid_v4(out) != 0)
        snprintf(out, 40, "%08x-%04x-%llx", (unsigned)getpid(),
                 (unsigned)(atomic_fetch_add(&fallback_seq, 1) & 0xffff),
                 (unsigned long long)mc_now_ns());
}

/* Gives the engine the master's epoch for this client's segments, unless it already has it
 * (mc_te_set_epoch waits for older transfers: not for nothing). */
int mc_real_set_epoch(mc_real_client_t *s, uint64_t epoch)
{
    if (epoch == s->epoch)
        return 0;
    int rc = mc_te_set_epoch(s->te, epoch);
    if (rc == 0) /* else asked again next time: its fence did not complete */
        s->epoch = epoch;
    return rc;
}

/* Fills one wire segment. */
void mc_real_fill_segment(mc_real_client_t *s, Mc__Segment *seg, const char *id, void *base,
                          uint64_t size)
{
    seg->id = (char *)id;
    seg->name = (char *)mc_te_local_segment_name(s->te);
    seg->base_address = (uint64_t)(uintptr_t)base;
    seg->size = size;
    seg->protocol = (char *)mc_te_protocol(s->te);
}

/*
 * Mount, re-mount or unmount at the master: the segment of setup, plus, for a re-mount, every
 * run-time segment that is mounted (not draining). Caller holds segs_lock when run-time segments
 * may exist (the ping thread and close do).
 */
int mc_real_segment_call(mc_real_client_t *s, uint16_t opcode)
{
    size_t extra = opcode == MC_RPC_REMOUNT_SEGMENT ? s->run_seg_count : 0;
    Mc__Segment *pool = calloc(1 + extra, sizeof(*pool));
    Mc__Segment **segs = calloc(1 + extra, sizeof(*segs));
    if (!pool || !segs) {
        free(pool);
        free(segs);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t n = 0;
    if (s->segment) { /* none: a pure client registers itself for liveness */
        mc__segment__init(&pool[n]);
        mc_real_fill_segment(s, &pool[n], s->segment_id, s->segment, s->global_segment_size);
        segs[n] = &pool[n];
        n++;
    }
    for (size_t i = 0; i < extra; i++) {
        const mc_run_segment_t *r = &s->run_segs[i];
        if (r->drain_until)
            continue;
        mc__segment__init(&pool[n]);
        mc_real_fill_segment(s, &pool[n], r->id, r->base, r->size);
        segs[n] = &pool[n];
        n++;
    }
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    req.client_id = s->client_id;
    req.n_segments = n;
    req.segments = segs;
    const char *name = n ? segs[0]->name : mc_te_local_segment_name(s->te);
    Mc__StatusResponse *resp;
    int rc = mc_master_call_segments(s->rpc, opcode, &req, &resp);
    free(pool);
    free(segs);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0 && opcode != MC_RPC_UNMOUNT_SEGMENT && n > 0)
        mc_real_set_epoch(s, resp->epoch); /* transfers naming an older mount are refused */
    if (rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
        MC_INFO("master defers the mount of segment %s until read leases on its previous "
                "mount's memory end; retrying",
                name);
    else if (rc != 0)
        MC_ERROR("master refused segment %s: %s %s", name, mc_error_name(rc),
                 resp->message ? resp->message : "");
    mc__status_response__free_unpacked(resp, NULL);
    return rc;
}

/* Upstream's segment id form, "<u64>-<u64>" in decimal (UuidToString). */
static void make_segment_id(char out[MC_STORE_SEGMENT_ID_MAX])
{
    uint64_t v[2] = {0, 0};
    if (mc_random_bytes(v, sizeof(v)) != 0) {
        v[0] = mc_now_ns() ^ ((uint64_t)getpid() << 32);
        v[1] = atomic_fetch_add(&fallback_seq, 1);
    }
    snprintf(out, MC_STORE_SEGMENT_ID_MAX, "%" PRIu64 "-%" PRIu64, v[0], v[1]);
}

/* Keeps [addr, +length) reserved until now + MC_SEGMENT_HOLE_MS (see mc_segment_hole_t).
 * `replace`: the range is still mapped (a file) and the reservation replaces it atomically. */
static void hole_reserve(mc_real_client_t *s, void *addr, size_t length, int replace)
{
    int flags =
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (replace ? MAP_FIXED : MAP_FIXED_NOREPLACE);
    void *p = mmap(addr, length, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED || p != addr) {
        if (p != MAP_FAILED)
            munmap(p, length);
        if (replace)
            munmap(addr, length);
        MC_WARN("cannot keep the addresses of unmounted segment memory %p (+%zu) reserved: %s",
                addr, length, strerror(errno));
        return;
    }
    if (s->hole_count == s->hole_cap) {
        size_t cap = s->hole_cap ? s->hole_cap * 2 : 4;
        mc_segment_hole_t *v = realloc(s->holes, cap * sizeof(*v));
        if (!v) {
            munmap(addr, length);
            return;
        }
        s->holes = v;
        s->hole_cap = cap;
    }
    s->holes[s->hole_count++] = (mc_segment_hole_t){addr, length, mc_now_ms() + MC_SEGMENT_HOLE_MS};
}

/* Releases the holes whose time is up (all with `all`). Caller holds segs_lock. */
static void holes_release(mc_real_client_t *s, int all)
{
    uint64_t now = mc_now_ms();
    size_t kept = 0;
    for (size_t i = 0; i < s->hole_count; i++) {
        if (all || now >= s->holes[i].until)
            munmap(s->holes[i].addr, s->holes[i].length);
        else
            s->holes[kept++] = s->holes[i];
    }
    s->hole_count = kept;
}

/* Unregisters and frees the memory of run-time segment i (already unmounted at the master) and
 * drops it from the list. Caller holds segs_lock. The engine waits for transfers in flight on
 * the memory before it lets go of it; the addresses then stay reserved as a hole. */
static void run_segment_free(mc_real_client_t *s, size_t i)
{
    mc_run_segment_t r = s->run_segs[i];
    s->run_segs[i] = s->run_segs[--s->run_seg_count];
    size_t length = r.kind == MC_RUN_SEGMENT_FILE
                        ? (size_t)((r.size + (uint64_t)sysconf(_SC_PAGESIZE) - 1) &
                                   ~((uint64_t)sysconf(_SC_PAGESIZE) - 1))
                        : (size_t)r.size;
    if (r.kind == MC_RUN_SEGMENT_ALLOCATED) {
        mc_te_free_segment_memory(s->te, r.base);
        hole_reserve(s, r.base, length, 0);
    } else {
        mc_te_unregister_memory(s->te, r.base);
        hole_reserve(s, r.base, length, 1);
    }
    MC_INFO("segment %s (%" PRIu64 " bytes at %p) unmounted and its memory released", r.id, r.size,
            r.base);
}

/* Unmounts run-time segment i at the master now (upstream's UnmountSegment: its replicas are
 * dropped first). 0 also when the master no longer knows it. Caller holds segs_lock. */
static int run_segment_unmount_now(mc_real_client_t *s, size_t i)
{
    Mc__Segment seg = MC__SEGMENT__INIT;
    Mc__Segment *segs[1] = {&seg};
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    mc_real_fill_segment(s, &seg, s->run_segs[i].id, s->run_segs[i].base, s->run_segs[i].size);
    req.client_id = s->client_id;
    req.n_segments = 1;
    req.segments = segs;
    Mc__StatusResponse *resp;
    int rc = mc_master_call_segments(s->rpc, MC_RPC_UNMOUNT_SEGMENT, &req, &resp);
    if (rc != 0)
        return rc;
    rc = resp->code == MC_ERR_SEGMENT_NOT_FOUND ? 0 : resp->code;
    mc__status_response__free_unpacked(resp, NULL);
    return rc;
}

/* Ping thread, every tick: draining segments whose grace is over are unmounted and freed. */
void mc_real_run_segments_tick(mc_real_client_t *s)
{
    pthread_mutex_lock(&s->segs_lock);
    uint64_t now = mc_now_ms();
    for (size_t i = 0; i < s->run_seg_count;) {
        const mc_run_segment_t *r = &s->run_segs[i];
        if (r->drain_until && now >= r->drain_until && run_segment_unmount_now(s, i) == 0) {
            run_segment_free(s, i); /* slot i now holds another segment */
            continue;
        }
        i++;
    }
    holes_release(s, 0);
    pthread_mutex_unlock(&s->segs_lock);
}

/* Adds memory [base, +size) as a new run-time segment mounted at the master. Caller holds
 * segs_lock; on failure the caller still owns the memory (unregistered by the caller). */
static int run_segment_mount(mc_real_client_t *s, void *base, uint64_t size,
                             mc_run_segment_kind_t kind, char *id_out)
{
    if (s->run_seg_count == s->run_seg_cap) {
        size_t cap = s->run_seg_cap ? s->run_seg_cap * 2 : 4;
        mc_run_segment_t *v = realloc(s->run_segs, cap * sizeof(*v));
        if (!v)
            return MC_ERR_INTERNAL_ERROR;
        s->run_segs = v;
        s->run_seg_cap = cap;
    }
    mc_run_segment_t *r = &s->run_segs[s->run_seg_count];
    memset(r, 0, sizeof(*r));
    make_segment_id(r->id);
    r->base = base;
    r->size = size;
    r->kind = kind;
    Mc__Segment seg = MC__SEGMENT__INIT;
    Mc__Segment *segs[1] = {&seg};
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    mc_real_fill_segment(s, &seg, r->id, base, size);
    req.client_id = s->client_id;
    req.n_segments = 1;
    req.segments = segs;
    Mc__StatusResponse *resp;
    int rc = mc_master_call_segments(s->rpc, MC_RPC_MOUNT_SEGMENT, &req, &resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0)
        mc_real_set_epoch(s, resp->epoch);
    else
        MC_ERROR("master refused segment %s of %s (%" PRIu64 " bytes): %s %s", r->id, seg.name,
                 size, mc_error_name(rc), resp->message ? resp->message : "");
    mc__status_response__free_unpacked(resp, NULL);
    if (rc != 0)
        return rc;
    s->run_seg_count++;
    snprintf(id_out, MC_STORE_SEGMENT_ID_MAX, "%s", r->id);
    return 0;
}

/* The protocol a caller asked for: "" / NULL, this engine's own, or "tcp" (upstream's default
 * argument; every engine serves tcp). */
static int protocol_ok(mc_real_client_t *s, const char *protocol)
{
    if (!protocol || !*protocol || !strcmp(protocol, "tcp") ||
        !strcmp(protocol, mc_te_protocol(s->te)))
        return 1;
    MC_ERROR("segment protocol \"%s\": this client's Transfer Engine runs \"%s\"", protocol,
             mc_te_protocol(s->te));
    return 0;
}

int mc_real_allocate_and_mount_segment(void *impl, uint64_t size, const char *protocol,
                                       char id_out[MC_STORE_SEGMENT_ID_MAX], uint64_t *allocated)
{
    mc_real_client_t *s = impl;
    if (!protocol_ok(s, protocol))
        return MC_ERR_INVALID_PARAMS;
    uint64_t aligned = (size + MC_RUN_SEGMENT_ALIGN - 1) & ~(MC_RUN_SEGMENT_ALIGN - 1);
    void *base = NULL;
    pthread_mutex_lock(&s->segs_lock);
    int rc = mc_te_alloc_segment_memory(s->te, (size_t)aligned, &base);
    if (rc == 0) {
        rc = run_segment_mount(s, base, aligned, MC_RUN_SEGMENT_ALLOCATED, id_out);
        if (rc != 0)
            mc_te_free_segment_memory(s->te, base);
    }
    pthread_mutex_unlock(&s->segs_lock);
    if (rc == 0 && allocated)
        *allocated = aligned;
    if (rc == 0)
        MC_INFO("allocated and mounted segment %s: %" PRIu64 " bytes at %p", id_out, aligned, base);
    return rc;
}

int mc_real_mount_file_segment(void *impl, const char *path, uint64_t offset, uint64_t size,
                               const char *protocol, char id_out[MC_STORE_SEGMENT_ID_MAX])
{
    mc_real_client_t *s = impl;
    if (!protocol_ok(s, protocol))
        return MC_ERR_INVALID_PARAMS;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        MC_ERROR("mount_segment: cannot open %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return MC_ERR_INVALID_PARAMS;
    }
    if (offset > (uint64_t)st.st_size || size > (uint64_t)st.st_size - offset) {
        MC_ERROR("mount_segment: [%" PRIu64 ", +%" PRIu64 ") is beyond the end of %s (%lld bytes)",
                 offset, size, path, (long long)st.st_size);
        close(fd);
        return MC_ERR_INVALID_PARAMS;
    }
    void *base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
    int err = errno;
    close(fd); /* the mapping keeps the file */
    if (base == MAP_FAILED) {
        MC_ERROR("mount_segment: cannot map %s: %s", path, strerror(err));
        return MC_ERR_INVALID_PARAMS;
    }
    pthread_mutex_lock(&s->segs_lock);
    int rc = mc_te_register_memory(s->te, base, (size_t)size);
    if (rc == 0) {
        rc = run_segment_mount(s, base, size, MC_RUN_SEGMENT_FILE, id_out);
        if (rc != 0)
            mc_te_unregister_memory(s->te, base);
    }
    pthread_mutex_unlock(&s->segs_lock);
    if (rc != 0) {
        munmap(base, (size_t)size);
        return rc;
    }
    MC_INFO("mounted segment %s: %s [%" PRIu64 ", +%" PRIu64 ") at %p", id_out, path, offset, size,
            base);
    return 0;
}

/* Unmounts the run-time segment `id` of mount_file_segment (allocated 0) or
 * allocate_and_mount_segment (allocated 1), now or after a grace period (see store.h). */
int mc_real_unmount_segment(void *impl, const char *id, uint64_t grace_ms, int allocated)
{
    mc_real_client_t *s = impl;
    mc_run_segment_kind_t kind = allocated ? MC_RUN_SEGMENT_ALLOCATED : MC_RUN_SEGMENT_FILE;
    int rc = 0;
    pthread_mutex_lock(&s->segs_lock);
    size_t i = 0;
    while (i < s->run_seg_count &&
           (strcmp(s->run_segs[i].id, id) != 0 || s->run_segs[i].kind != kind))
        i++;
    if (i == s->run_seg_count || s->run_segs[i].drain_until) {
        MC_ERROR("%s: no segment \"%.64s\" mounted by this client with %s", "unmount", id,
                 kind == MC_RUN_SEGMENT_FILE ? "mount_segment" : "allocate_and_mount_segment");
        pthread_mutex_unlock(&s->segs_lock);
        return MC_ERR_INVALID_PARAMS;
    }
    if (grace_ms == 0) {
        rc = run_segment_unmount_now(s, i);
        if (rc == 0)
            run_segment_free(s, i);
    } else {
        Mc__Segment seg = MC__SEGMENT__INIT;
        Mc__Segment *segs[1] = {&seg};
        Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
        mc_real_fill_segment(s, &seg, s->run_segs[i].id, s->run_segs[i].base, s->run_segs[i].size);
        req.client_id = s->client_id;
        req.n_segments = 1;
        req.segments = segs;
        req.grace_period_ms = grace_ms;
        Mc__StatusResponse *resp;
        rc = mc_master_call_segments(s->rpc, MC_RPC_GRACEFUL_UNMOUNT_SEGMENT, &req, &resp);
        if (rc == 0) {
            rc = resp->code;
            mc__status_response__free_unpacked(resp, NULL);
        }
        if (rc == 0) {
            uint64_t now = mc_now_ms();
            s->run_segs[i].drain_until = grace_ms > UINT64_MAX - now ? UINT64_MAX : now + grace_ms;
            MC_INFO("segment %s drains for %" PRIu64 " ms, then is unmounted and freed", id,
                    grace_ms);
        }
    }
    if (rc != 0)
        MC_ERROR("unmount of segment %s: %s", id, mc_error_name(rc));
    pthread_mutex_unlock(&s->segs_lock);
    return rc;
}

int mc_real_unmount_local_disk(void *impl, uint64_t grace_period_ms)
{
    mc_real_client_t *s = impl;
    pthread_mutex_lock(&s->segs_lock);
    int had = mc_offload_stop_worker(s->offload);
    pthread_mutex_unlock(&s->segs_lock);
    if (!had) {
        MC_WARN("unmount_local_disk: this client does not offload; nothing to drain");
        return 0;
    }
    MC_INFO("unmount_local_disk: offloading stopped, local-disk replicas dropped at the master; "
            "reads of its files are served for %" PRIu64 " ms more",
            grace_period_ms);
    uint64_t until = mc_now_ms() + grace_period_ms;
    while (mc_now_ms() < until && !atomic_load(&s->closing))
        usleep(10 * 1000);
    return 0;
}

/* close: every run-time segment is unmounted (best effort) and unregistered; file mappings are
 * unmapped after the engine lets go of them (run_segments_unmap). */
void mc_real_run_segments_unmount_all(mc_real_client_t *s)
{
    pthread_mutex_lock(&s->segs_lock);
    for (size_t i = 0; s->rpc && i < s->run_seg_count; i++) {
        int rc = run_segment_unmount_now(s, i);
        if (rc != 0)
            MC_WARN("unmounting segment %s at close: %s", s->run_segs[i].id, mc_error_name(rc));
    }
    pthread_mutex_unlock(&s->segs_lock);
}

/* close, after the master was told: the memory goes (engine memory with the engine when it is
 * destroyed, else here; file mappings here). */
void mc_real_run_segments_release(mc_real_client_t *s, int engine_destroyed)
{
    pthread_mutex_lock(&s->segs_lock);
    for (size_t i = 0; i < s->run_seg_count; i++) {
        mc_run_segment_t *r = &s->run_segs[i];
        if (r->kind == MC_RUN_SEGMENT_FILE) {
            if (!engine_destroyed)
                mc_te_unregister_memory(s->te, r->base);
            munmap(r->base, (size_t)r->size);
        } else if (!engine_destroyed) {
            mc_te_free_segment_memory(s->te, r->base);
        }
    }
    s->run_seg_count = 0;
    holes_release(s, 1);
    pthread_mutex_unlock(&s->segs_lock);
}
