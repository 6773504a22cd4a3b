/*
 * rdma_transport.c — the `rdma` transport, on UCX's UCP API (built with USE_RDMA=ON).
 *
 * UCX state of one engine (mc_rdma_t):
 *   - one ucp_context (features RMA + WAKEUP, mt_workers_shared: application threads map memory
 *     while the workers run);
 *   - the serving worker: its address is the descriptor's rdma_address. A progress thread drives
 *     it, sleeping on its event fd. On RDMA hardware peers' puts and gets never need it (they are
 *     one-sided), but endpoint wire-up does, and over UCX's tcp transport (no RDMA device) UCX
 *     emulates put/get with messages that this thread answers;
 *   - one initiator worker per engine worker thread (UCS_THREAD_MODE_SINGLE). Thread i alone uses
 *     worker i, its endpoints (one per peer, created from the peer's rdma_address with
 *     UCP_ERR_HANDLING_MODE_PEER and an error callback) and the rkeys unpacked for them
 *     (mc_rdma_conn_t, slot i of peer->rdma_conns). So the data path takes no lock, and a broken
 *     endpoint is torn down by the only thread that uses it.
 *
 * A new endpoint first proves the peer answers: a 1-byte get into engine-owned scratch memory.
 * Until it does the endpoint is kept, never closed, and slices fail at their request's deadline:
 * UCX 1.13 aborts a peer (assertion in ucp_request_send_state_ff) that finds the connection of
 * an endpoint closed while its wire-up reply to it is still queued, which is what closing an
 * endpoint the peer has not answered yet (a stopped peer) leads to.
 *
 * A slice: ucp_put_nbx / ucp_get_nbx (the local region's memh passed when the buffer lies in
 * registered memory), and for a write ucp_ep_flush_nbx, so a write is done only when it is
 * remotely complete. The thread progresses its worker and sleeps on the worker's event fd until
 * every request completed or the request's deadline passed; then the endpoint is force-closed,
 * which cancels its requests, and the slice returns — failed, MC_ERR_TRANSFER_FAIL — only once
 * UCX has completed every one of them, however long that takes (op_wait_released): a request
 * released earlier could still write a late get reply into the caller's buffer. A peer that
 * dies fails its endpoint (error callback) and requests; the
 * next slice to it re-reads its descriptor first (it may have restarted elsewhere) and connects
 * anew. A failure on an endpoint that had already worked is retried once that way.
 *
 * Receiver-side fence (mc_rdma_fence): the serving worker and its progress thread are replaced,
 * so nothing peers had sent to the old worker is applied after the fence returns; peers'
 * endpoints to it fail and reconnect to the new worker's address (see the function).
 *
 * Devices: UCX's automatic choice unless device_names restricts UCX_NET_DEVICES. Names are checked
 * at start-up against UCT's device list: "mlx5_0" means port 1 ("mlx5_0:1") unless a device of
 * exactly that name exists (e.g. "eth0" for UCX's tcp). Without a usable RDMA device the engine
 * runs over UCX's other transports after one warning line per process, or start-up fails when
 * MC_RDMA_REQUIRE_DEVICE=1. Note: with peer error handling UCX 1.13 does not use its
 * shared-memory transports (they cannot detect a dead peer), so without a device the bytes cross
 * UCX's tcp transport even between processes of one host; the engine's own shm transport still
 * serves same-host peers first unless shm is disabled.
 */
#include "transfer_internal.h"

#include "failpoint.h"
#include "log.h"
#include "net.h"

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Longest sleep on a worker's event fd before re-checking deadlines — and a safety net should
 * UCX ever miss a wake-up (ms). */
#define MC_RDMA_POLL_CAP_MS 100
/* A serving progress thread that did not run for this long beyond its sleep was stalled: it
 * fences instead of applying what was queued meanwhile (stalled_self_fence). Below any transfer
 * timeout worth having (seconds), above scheduling delays of a loaded host. */
#define MC_RDMA_STALL_MS 1000
/* While UCX has not returned a cancelled request, how often that is logged (ms). */
#define MC_RDMA_STUCK_LOG_MS 5000
/* Bound on a graceful endpoint close at engine destroy (ms). */
#define MC_RDMA_CLOSE_MS 1000
/* Bytes of probe scratch per worker (a cache line: workers do not share one). */
#define MC_RDMA_SCRATCH 64
/* Room for the UCX_NET_DEVICES value and for the device list in error messages. */
#define MC_RDMA_DEVICES_TEXT 1024
/*
 * Segment size of UCX's tcp transport (UCX_TCP_TX_SEG_SIZE / UCX_TCP_RX_SEG_SIZE), unless the
 * environment sets them. UCX's 8 KiB default cuts an emulated put into 8 KiB messages; 256 KiB
 * made 1 MiB puts over UCX's tcp about 3x faster here (0.6 -> 2 GB/s, loopback). Irrelevant on RDMA
 * devices, which do put/get in hardware.
 */
#define MC_RDMA_TCP_SEG_SIZE "256K"
/* Default of MC_RDMA_SPIN_US (0..1000000): see worker_spin. */
#define MC_RDMA_DEFAULT_SPIN_US 0

struct mc_rdma {
    ucp_context_h ctx;
    /*
     * The serving worker and its progress thread. server and server_efd are read by the
     * progress thread and changed only while no progress thread runs (start, stop, fence: the
     * thread is joined first), all under fence_lock, which also serializes fences.
     * NULL server: a fence could not make a new one (the descriptor then has no rdma address
     * and peers use tcp).
     */
    pthread_mutex_t fence_lock;
    ucp_worker_h server;
    int server_efd;
    int stop_fd;            /* eventfd: wakes the progress thread to stop */
    atomic_int stop_server; /* set: the progress thread stops before its next progress call */
    pthread_t progress;
    int progress_running;
    uint64_t fences; /* fences done (log lines) */
    /*
     * Self-fence (see progress_main): a progress thread that finds it did not run for longer
     * than MC_RDMA_STALL_MS (this process was stopped or starved) hands the worker to a fence
     * thread instead of applying what was queued meanwhile. Under fence_lock.
     */
    mc_transfer_engine_t *te;
    pthread_t self_fence;
    int self_fence_started; /* a self_fence thread was created and not joined yet */
    int closing;            /* mc_rdma_stop began: no new self-fence */
    /*
     * The descriptor's rdma_address: a malloc'd copy of the serving worker's address, swapped
     * by fences under addr_lock. mc_rdma_local_address hands out the pointer, which its caller
     * copies after addr_lock is released, so a replaced address is kept (retired) until
     * mc_rdma_stop rather than freed: one worker address (a few hundred bytes) per fence.
     */
    pthread_mutex_t addr_lock;
    uint8_t *server_addr;
    size_t server_addr_len;
    uint8_t **retired;
    size_t retired_count, retired_capacity;
    ucp_worker_h *workers; /* [worker_count]: worker i belongs to engine worker thread i */
    int *worker_efds;
    size_t worker_count;
    /* [worker_count * MC_RDMA_SCRATCH]: where probes land; lives until the workers are gone, as
     * a probe given up on may still complete inside UCX. */
    uint8_t *scratch;
    uint64_t spin_ns; /* MC_RDMA_SPIN_US: progress this long without progress before sleeping */
};

struct mc_rdma_conn {
    ucp_ep_h ep;          /* NULL: not connected */
    ucs_status_t failure; /* set by the error callback: the endpoint is dead */
    uint8_t *address;     /* the worker address ep was created from */
    size_t address_len;
    uint64_t rkey_gen; /* peer->desc_gen the rkeys were unpacked from; 0 = none */
    ucp_rkey_h *rkeys; /* [rkey_count], indexed like the descriptor's regions */
    size_t rkey_count;
    int answered;        /* the peer answered the probe on ep: it may be closed any time */
    uint64_t probe_addr; /* where the last probe read (for the one at close) */
    size_t probe_region;
    int proven;                 /* a transfer completed since connecting: a failure is retried */
    int refresh;                /* re-read the peer's descriptor before connecting again */
    uint64_t refresh_failed_ms; /* when that last failed (mc_now_ms), 0 = never */
    /* The owner's write-fence rules, asked of it (over tcp) after ep was connected; valid for
     * as long as ep lives (see conn_admit_write). */
    int rules_valid;
    mc_fence_rules_t rules;
};

/* ---- devices ---------------------------------------------------------------------------- */

typedef struct rdma_device {
    char name[UCT_DEVICE_NAME_MAX];
    int is_rdma; /* served by a transport other than tcp (rc, ud, dc, ...) */
} rdma_device_t;

typedef struct rdma_device_list {
    rdma_device_t *items;
    size_t count, capacity;
} rdma_device_list_t;

static void device_list_add(rdma_device_list_t *l, const char *name, int is_rdma)
{
    for (size_t i = 0; i < l->count; i++) {
        if (!strcmp(l->items[i].name, name)) {
            l->items[i].is_rdma |= is_rdma;
            return;
        }
    }
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? l->capacity * 2 : 8;
        rdma_device_t *n = realloc(l->items, cap * sizeof(*n));
        if (!n)
            return;
        l->items = n;
        l->capacity = cap;
    }
    snprintf(l->items[l->count].name, sizeof(l->items[0].name), "%s", name);
    l->items[l->count++].is_rdma = is_rdma;
}

/* Adds the network devices of one memory domain. */
static void list_md_devices(uct_component_h comp, const char *md_name, rdma_device_list_t *l)
{
    uct_md_config_t *cfg;
    uct_md_h md;
    if (uct_md_config_read(comp, NULL, NULL, &cfg) != UCS_OK)
        return;
    ucs_status_t st = uct_md_open(comp, md_name, cfg, &md);
    uct_config_release(cfg);
    if (st != UCS_OK)
        return;
    uct_tl_resource_desc_t *tls;
    unsigned ntls;
    if (uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
        for (unsigned i = 0; i < ntls; i++) {
            if (tls[i].dev_type == UCT_DEVICE_TYPE_NET)
                device_list_add(l, tls[i].dev_name, strcmp(tls[i].tl_name, "tcp") != 0);
        }
        uct_release_tl_resource_list(tls);
    }
    uct_md_close(md);
}

/* Every network device UCT knows on this host (what UCX_NET_DEVICES may name). */
static void list_devices(rdma_device_list_t *l)
{
    uct_component_h *comps;
    unsigned ncomps;
    if (uct_query_components(&comps, &ncomps) != UCS_OK)
        return;
    for (unsigned c = 0; c < ncomps; c++) {
        uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
        if (uct_component_query(comps[c], &attr) != UCS_OK || attr.md_resource_count == 0)
            continue;
        attr.md_resources = calloc(attr.md_resource_count, sizeof(*attr.md_resources));
        if (!attr.md_resources)
            continue;
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        if (uct_component_query(comps[c], &attr) == UCS_OK) {
            for (unsigned m = 0; m < attr.md_resource_count; m++)
                list_md_devices(comps[c], attr.md_resources[m].md_name, l);
        }
        free(attr.md_resources);
    }
    uct_release_component_list(comps);
}

static const rdma_device_t *device_find(const rdma_device_list_t *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++) {
        if (!strcmp(l->items[i].name, name))
            return &l->items[i];
    }
    return NULL;
}

/*
 * Resolves device_names ("mlx5_0,mlx5_1:2,eth0") into a UCX_NET_DEVICES value; *has_rdma tells
 * whether an RDMA device is among the chosen ones (all devices when device_names is empty).
 */
static int resolve_devices(const char *device_names, char net_devices[MC_RDMA_DEVICES_TEXT],
                           int *has_rdma)
{
    rdma_device_list_t l = {0};
    list_devices(&l);
    net_devices[0] = '\0';
    *has_rdma = 0;
    int rc = 0;
    if (!device_names || !*device_names) {
        for (size_t i = 0; i < l.count; i++)
            *has_rdma |= l.items[i].is_rdma;
        free(l.items);
        return 0;
    }
    char *copy = strdup(device_names), *save = NULL;
    if (!copy) {
        free(l.items);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (char *tok = strtok_r(copy, ", \t", &save); tok && rc == 0;
         tok = strtok_r(NULL, ", \t", &save)) {
        char with_port[UCT_DEVICE_NAME_MAX + 8];
        snprintf(with_port, sizeof(with_port), "%s:1", tok);
        const rdma_device_t *d = device_find(&l, tok);
        if (!d && !strchr(tok, ':'))
            d = device_find(&l, with_port);
        if (!d) {
            char known[MC_RDMA_DEVICES_TEXT] = "";
            for (size_t i = 0; i < l.count; i++) {
                size_t used = strlen(known);
                snprintf(known + used, sizeof(known) - used, "%s%s", used ? ", " : "",
                         l.items[i].name);
            }
            MC_ERROR("rdma: device \"%s\" (from device_names \"%s\") does not exist on this "
                     "host; devices: %s",
                     tok, device_names, known[0] ? known : "none");
            rc = MC_ERR_INVALID_PARAMS;
            break;
        }
        size_t used = strlen(net_devices);
        if ((size_t)snprintf(net_devices + used, MC_RDMA_DEVICES_TEXT - used, "%s%s",
                             used ? "," : "", d->name) >= MC_RDMA_DEVICES_TEXT - used) {
            MC_ERROR("rdma: device_names \"%s\" is too long", device_names);
            rc = MC_ERR_INVALID_PARAMS;
        }
        *has_rdma |= d->is_rdma;
    }
    if (rc == 0 && !net_devices[0]) {
        MC_ERROR("rdma: device_names \"%s\" names no device", device_names);
        rc = MC_ERR_INVALID_PARAMS;
    }
    free(copy);
    free(l.items);
    return rc;
}

/* ---- start / stop ----------------------------------------------------------------------- */

static int worker_create(ucp_context_h ctx, ucp_worker_h *w, int *efd)
{
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucs_status_t st = ucp_worker_create(ctx, &wp, w);
    if (st != UCS_OK) {
        MC_ERROR("rdma: cannot create a UCX worker: %s", ucs_status_string(st));
        *w = NULL;
        return MC_ERR_INTERNAL_ERROR;
    }
    st = ucp_worker_get_efd(*w, efd);
    if (st != UCS_OK) {
        MC_ERROR("rdma: UCX worker has no event fd: %s", ucs_status_string(st));
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

/*
 * Sleeps until worker w may have work, `stop_fd` (may be -1) is readable or max_ms passed.
 * Returns immediately when the worker cannot be armed because events are already pending.
 */
static void worker_sleep(ucp_worker_h w, int efd, int stop_fd, int max_ms)
{
    ucs_status_t st = ucp_worker_arm(w);
    if (st == UCS_ERR_BUSY)
        return;
    struct pollfd pfd[2] = {{.fd = efd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
    /* A worker that cannot be armed has no reliable events: poll it gently instead. */
    poll(pfd, stop_fd >= 0 ? 2 : 1, st == UCS_OK ? max_ms : 1);
}

/*
 * Progresses w until it has had nothing to do for r->spin_ns (0: until one idle call), or until
 * *pending (when not NULL; completions run on this thread) is 0. Over
 * UCX's tcp transport every message of an emulated put/get otherwise costs a sleep and a wake-up
 * on the worker's event fd; a short spin catches the next message while it is on its way.
 */
static void worker_spin(const mc_rdma_t *r, ucp_worker_h w, const unsigned *pending)
{
    uint64_t idle_since = 0;
    for (;;) {
        if (pending && *pending == 0)
            return;
        if (ucp_worker_progress(w)) {
            idle_since = 0;
            continue;
        }
        if (r->spin_ns == 0)
            return;
        uint64_t now = mc_now_ns();
        if (idle_since == 0)
            idle_since = now;
        else if (now - idle_since >= r->spin_ns)
            return;
    }
}

/*
 * The serving worker's thread: progresses it while it has work, then sleeps on its event fd.
 * stop_server is checked before every progress call, so once it is set the worker runs at most
 * the ucp_worker_progress already under way — its AM handlers (an emulated put copying into
 * memory, a get reply being packed) finish inside that call — and pthread_join returns only
 * after it returned. (Checked per call, not per idle spell: peers streaming puts keep the worker
 * busy indefinitely and must not hold a fence off.)
 */
static void *self_fence_main(void *p)
{
    mc_rdma_t *r = p;
    mc_rdma_fence(r->te);
    return NULL;
}

/*
 * After a stall of this process, what peers queued to the serving worker meanwhile is not
 * applied: their writes timed out and were reported failed while we could not run (a SIGSTOP,
 * a VM pause, a swap storm). So a progress thread that finds it did not run for longer than
 * this (beyond its own sleep cap) starts a fence instead of progressing: the old worker is
 * destroyed unprogressed and peers reconnect (their writes still waiting for an answer fail
 * and are retried once). 1: it did, the caller returns without progressing.
 */
static int stalled_self_fence(mc_rdma_t *r, uint64_t gap_ms)
{
    /* A fence holding fence_lock is replacing this worker already (or has just started this
     * thread): no second one. */
    if (pthread_mutex_trylock(&r->fence_lock) != 0)
        return 0;
    int started = 0;
    if (!r->closing) {
        if (r->self_fence_started)
            pthread_join(r->self_fence, NULL); /* the previous one, long finished */
        r->self_fence_started = pthread_create(&r->self_fence, NULL, self_fence_main, r) == 0;
        started = r->self_fence_started;
    }
    pthread_mutex_unlock(&r->fence_lock);
    if (started)
        MC_WARN("rdma: this process did not run for %llu ms (stopped or starved); what peers "
                "queued meanwhile is dropped, not applied: their writes were reported failed",
                (unsigned long long)gap_ms);
    return started;
}

static void *progress_main(void *p)
{
    mc_rdma_t *r = p;
    uint64_t last = mc_now_ms();
    while (!atomic_load(&r->stop_server)) {
        uint64_t now = mc_now_ms();
        if (now - last > MC_RDMA_POLL_CAP_MS + MC_RDMA_STALL_MS &&
            stalled_self_fence(r, now - last))
            return NULL; /* the fence thread joins this one and destroys the worker */
        last = now;
        if (ucp_worker_progress(r->server))
            continue;
        worker_sleep(r->server, r->server_efd, r->stop_fd, MC_RDMA_POLL_CAP_MS);
    }
    return NULL;
}

/* Starts the progress thread of r->server (the stop request of a previous one consumed). */
static int progress_start(mc_rdma_t *r)
{
    uint64_t pending;
    while (read(r->stop_fd, &pending, sizeof(pending)) == (ssize_t)sizeof(pending))
        ;
    atomic_store(&r->stop_server, 0);
    if (pthread_create(&r->progress, NULL, progress_main, r) != 0) {
        MC_ERROR("rdma: cannot start the UCX progress thread: %s", strerror(errno));
        return MC_ERR_INTERNAL_ERROR;
    }
    r->progress_running = 1;
    return 0;
}

/* Stops the progress thread and returns once it has: r->server is progressed by no one. */
static void progress_stop(mc_rdma_t *r)
{
    if (!r->progress_running)
        return;
    atomic_store(&r->stop_server, 1);
    uint64_t one = 1;
    if (write(r->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        MC_ERROR("rdma: cannot wake the UCX progress thread: %s", strerror(errno));
    pthread_join(r->progress, NULL);
    r->progress_running = 0;
}

/* Creates a serving worker: *w, its event fd and a malloc'd copy of its address (*addr, *len).
 * On failure nothing is left (*w NULL). */
static int server_create(mc_rdma_t *r, ucp_worker_h *w, int *efd, uint8_t **addr, size_t *len)
{
    *addr = NULL;
    *len = 0;
    int rc = worker_create(r->ctx, w, efd);
    ucp_address_t *ua = NULL;
    size_t ua_len = 0;
    if (rc == 0) {
        ucs_status_t st = ucp_worker_get_address(*w, &ua, &ua_len);
        if (st != UCS_OK || ua_len > MC_TE_MAX_RDMA_BLOB) {
            MC_ERROR("rdma: cannot get the UCX worker address: %s",
                     st != UCS_OK ? ucs_status_string(st) : "too long");
            if (st == UCS_OK)
                ucp_worker_release_address(*w, ua);
            rc = MC_ERR_INTERNAL_ERROR;
        }
    }
    if (rc == 0) {
        *addr = malloc(ua_len);
        if (*addr) {
            memcpy(*addr, ua, ua_len);
            *len = ua_len;
        }
        ucp_worker_release_address(*w, ua);
        rc = *addr ? 0 : MC_ERR_INTERNAL_ERROR;
    }
    if (rc != 0 && *w) {
        ucp_worker_destroy(*w);
        *w = NULL;
    }
    return rc;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && !strcmp(v, "1");
}

static atomic_int no_device_warned;

/*
 * With no device_names (and no UCX_NET_DEVICES), UCX would open its tcp transport on every
 * interface of the host, listening on each: an engine told to serve on one address must not be
 * reachable on the others. So UCX gets the RDMA devices plus the interface holding bind_host;
 * a wildcard bind_host keeps every device. 0, or a negative code from the device listing.
 */
static int restrict_to_bind_host(const char *bind_host, char net_devices[MC_RDMA_DEVICES_TEXT])
{
    char ifname[UCT_DEVICE_NAME_MAX];
    if (mc_net_is_wildcard(bind_host) || getenv("UCX_NET_DEVICES"))
        return 0;
    if (mc_net_interface_of(bind_host, ifname, sizeof(ifname)) != 0) {
        MC_WARN("rdma: no interface of this host holds %s; UCX may listen on every interface",
                bind_host);
        return 0;
    }
    rdma_device_list_t l = {0};
    list_devices(&l);
    net_devices[0] = '\0';
    for (size_t i = 0; i < l.count; i++) {
        if (!l.items[i].is_rdma && strcmp(l.items[i].name, ifname) != 0)
            continue;
        size_t used = strlen(net_devices);
        snprintf(net_devices + used, MC_RDMA_DEVICES_TEXT - used, "%s%s", used ? "," : "",
                 l.items[i].name);
    }
    free(l.items);
    return 0;
}

/* Resolves devices and creates the UCX context. */
static int context_create(mc_rdma_t *r, const char *device_names, const char *bind_host)
{
    char net_devices[MC_RDMA_DEVICES_TEXT];
    int has_rdma = 0;
    int rc = resolve_devices(device_names, net_devices, &has_rdma);
    if (rc != 0)
        return rc;
    if (!device_names || !*device_names)
        rc = restrict_to_bind_host(bind_host, net_devices);
    if (rc != 0)
        return rc;
    if (!has_rdma) {
        if (env_flag("MC_RDMA_REQUIRE_DEVICE")) {
            MC_ERROR("rdma: no RDMA device %s and MC_RDMA_REQUIRE_DEVICE=1; refusing to run "
                     "protocol rdma over UCX's tcp/shared-memory transports",
                     device_names && *device_names ? "among the device_names" : "on this host");
            return MC_ERR_NOT_SUPPORTED;
        }
        if (!atomic_exchange(&no_device_warned, 1))
            MC_WARN("rdma: no RDMA device %s; protocol rdma runs over UCX's tcp/shared-memory "
                    "transports (set MC_RDMA_REQUIRE_DEVICE=1 to make this an error)",
                    device_names && *device_names ? "among the device_names" : "on this host");
    }
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        MC_ERROR("rdma: cannot read the UCX configuration: %s", ucs_status_string(st));
        return MC_ERR_INTERNAL_ERROR;
    }
    if (net_devices[0])
        st = ucp_config_modify(cfg, "NET_DEVICES", net_devices);
    if (st == UCS_OK && !getenv("UCX_TCP_TX_SEG_SIZE"))
        st = ucp_config_modify(cfg, "TX_SEG_SIZE", MC_RDMA_TCP_SEG_SIZE);
    if (st == UCS_OK && !getenv("UCX_TCP_RX_SEG_SIZE"))
        st = ucp_config_modify(cfg, "RX_SEG_SIZE", MC_RDMA_TCP_SEG_SIZE);
    if (st == UCS_OK) {
        ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES |
                                             UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                                             UCP_PARAM_FIELD_NAME,
                               .features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP,
                               .mt_workers_shared = 1,
                               .name = "mooncake"};
        st = ucp_init(&params, cfg, &r->ctx);
    }
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        MC_ERROR("rdma: cannot initialise UCX: %s", ucs_status_string(st));
        r->ctx = NULL;
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

int mc_rdma_start(mc_transfer_engine_t *te, const char *device_names, const char *bind_host)
{
    mc_rdma_t *r = calloc(1, sizeof(*r));
    if (r)
        r->te = te;
    if (!r)
        return MC_ERR_INTERNAL_ERROR;
    pthread_mutex_init(&r->fence_lock, NULL);
    pthread_mutex_init(&r->addr_lock, NULL);
    r->server_efd = -1;
    r->stop_fd = -1;
    {
        /* Withdrawn (2026-12-01): with MC_RDMA_SPIN_US=200, ASan's run of test_transfer saw a
         * read after a stopped peer's recovery return success with other bytes. Until that is
         * understood the spin stays off whatever the environment says. */
        if (getenv("MC_RDMA_SPIN_US"))
            MC_WARN("MC_RDMA_SPIN_US is withdrawn (it lost data in a test) and ignored");
        r->spin_ns = 0;
    }
    te->rdma = r;
    int rc = context_create(r, device_names, bind_host);
    if (rc != 0)
        return rc;
    rc = server_create(r, &r->server, &r->server_efd, &r->server_addr, &r->server_addr_len);
    if (rc != 0)
        return rc;
    r->workers = calloc(te->worker_count, sizeof(*r->workers));
    r->worker_efds = calloc(te->worker_count, sizeof(*r->worker_efds));
    r->scratch = calloc(te->worker_count, MC_RDMA_SCRATCH);
    if (!r->workers || !r->worker_efds || !r->scratch)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < te->worker_count; i++) {
        r->worker_count = i + 1;
        rc = worker_create(r->ctx, &r->workers[i], &r->worker_efds[i]);
        if (rc != 0)
            return rc;
    }
    r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->stop_fd < 0) {
        MC_ERROR("rdma: cannot create the progress thread's eventfd: %s", strerror(errno));
        return MC_ERR_INTERNAL_ERROR;
    }
    return progress_start(r);
}

void mc_rdma_stop(mc_transfer_engine_t *te)
{
    mc_rdma_t *r = te->rdma;
    if (!r)
        return;
    pthread_mutex_lock(&r->fence_lock);
    r->closing = 1; /* no self-fence from now on */
    int joined = r->self_fence_started;
    pthread_t sf = r->self_fence;
    r->self_fence_started = 0;
    pthread_mutex_unlock(&r->fence_lock);
    if (joined)
        pthread_join(sf, NULL);         /* a self-fence under way finishes (it takes fence_lock) */
    pthread_mutex_lock(&r->fence_lock); /* a fence still running (misuse) finishes first */
    progress_stop(r);
    pthread_mutex_unlock(&r->fence_lock);
    if (r->stop_fd >= 0)
        close(r->stop_fd);
    for (size_t i = 0; i < r->worker_count; i++) {
        if (r->workers[i])
            ucp_worker_destroy(r->workers[i]);
    }
    free(r->workers);
    free(r->worker_efds);
    free(r->scratch);
    free(r->server_addr);
    for (size_t i = 0; i < r->retired_count; i++)
        free(r->retired[i]);
    free(r->retired);
    if (r->server)
        ucp_worker_destroy(r->server);
    /* Regions still registered are unmapped before the context goes (the registry unmaps the
     * memory itself afterwards). */
    for (size_t i = 0; i < te->registry.count; i++)
        mc_rdma_unmap(te, &te->registry.regions[i]);
    if (r->ctx)
        ucp_cleanup(r->ctx);
    pthread_mutex_destroy(&r->fence_lock);
    pthread_mutex_destroy(&r->addr_lock);
    free(r);
    te->rdma = NULL;
}

void mc_rdma_local_address(const mc_transfer_engine_t *te, const uint8_t **addr, size_t *len)
{
    mc_rdma_t *r = te->rdma;
    *addr = NULL;
    *len = 0;
    if (!r)
        return;
    pthread_mutex_lock(&r->addr_lock);
    *addr = r->server_addr;
    *len = r->server_addr_len;
    pthread_mutex_unlock(&r->addr_lock);
}

/* ---- the receiver-side fence ------------------------------------------------------------- */

/* Makes addr the descriptor's rdma_address, keeping the one it replaces (see
 * mc_rdma_t.server_addr). With fence_lock held. */
static void address_install(mc_rdma_t *r, uint8_t *addr, size_t len)
{
    pthread_mutex_lock(&r->addr_lock);
    if (r->server_addr) {
        if (r->retired_count == r->retired_capacity) {
            size_t cap = r->retired_capacity ? r->retired_capacity * 2 : 4;
            uint8_t **n = realloc(r->retired, cap * sizeof(*n));
            if (n) {
                r->retired = n;
                r->retired_capacity = cap;
            }
        }
        /* Out of memory for the list: the old address is leaked, never freed under a reader. */
        if (r->retired_count < r->retired_capacity)
            r->retired[r->retired_count++] = r->server_addr;
    }
    r->server_addr = addr;
    r->server_addr_len = len;
    pthread_mutex_unlock(&r->addr_lock);
}

/*
 * What it guarantees: once it returned, no rdma operation a peer sent to this engine before the
 * call — a put (write) waiting in the serving worker's sockets or queues, or one the peer's
 * UCX is still retrying — can modify this engine's memory, and no get queued before it is
 * answered. Peers' next transfers reconnect to the new worker.
 *
 * How: every remote access to this engine's memory goes through the serving worker. Over UCX's
 * tcp transport (no RDMA device) puts and gets are emulated with messages that the worker's
 * progress thread applies (ucp_put_handler copies a put's bytes into memory, inside
 * ucp_worker_progress); on RDMA hardware puts and gets need no CPU here, but they arrive on the
 * worker's transport endpoints (RC/DC QPs), which belong to the worker and are destroyed with
 * it. So the fence:
 *   1. creates the new worker first (its tcp interface gets a port of its own: an old
 *      endpoint cannot reach the new worker by a reused port) and makes its address the
 *      descriptor's (what mc_rdma_local_address returns, under addr_lock), so a peer that
 *      refreshes during the fence connects to the new worker — answered once its progress
 *      thread runs, a few milliseconds later — rather than to the old one;
 *   2. stops the progress thread and joins it: a handler in the middle of a copy finishes
 *      inside the ucp_worker_progress under way (progress_main checks the stop before each
 *      call), and after the join nothing progresses the old worker;
 *   3. destroys the old worker: its endpoints, uct interfaces and sockets go, so whatever
 *      peers had queued to it — in UCX's queues or the kernel's socket buffers — is dropped
 *      unapplied (closing a socket discards its unread bytes), and a peer still sending finds
 *      the connection reset;
 *   4. starts the new worker's progress thread and republishes the descriptor
 *      (mc_metadata_publish: HTTP or etcd; a P2PHANDSHAKE peer reads the new address in the
 *      handshake its failed transfer triggers).
 * Memory registrations stay: a memh and its packed rkey belong to the UCX context, not to a
 * worker (ucp_rkey_pack takes the context), and a peer unpacks rkeys per endpoint, so after it
 * reconnects it unpacks the same packed rkeys on its new endpoint (mc_rdma_transfer: a new
 * descriptor generation drops the old unpacked ones). An rkey grants nothing without a
 * transport endpoint of this engine, and the old ones are gone. The descriptor's version is not
 * changed: it is the registry's (bumped only under its write lock, which a fence must not wait
 * for while transfers hold the read lock), and peers replace their copy on every refresh
 * whatever its version.
 * Peers: a transfer on an endpoint to the old worker fails (connection reset: the endpoint's
 * error callback), closes it and is retried once after a descriptor refresh, which reconnects
 * (mc_rdma_transfer's one retry of an endpoint that had worked).
 * Not covered: transports that reach memory without the worker — UCX's shared-memory ones
 * (cma, knem, xpmem) are not used with peer error handling (see the top), and the engine's own
 * shm transport maps memfds directly (its fence is the shm transport's business).
 * Threads: callable from any thread while transfers run; fences are serialized by fence_lock;
 * this engine's initiator workers are untouched. It blocks for the join (at most one progress
 * call) plus worker creation and destruction (milliseconds) and the publish.
 * Returns 0; MC_ERR_INTERNAL_ERROR when the new worker or its progress thread could not be made
 * (the old one is destroyed all the same, so the guarantee holds; the descriptor then has no
 * rdma address and peers move bytes over tcp until a later fence succeeds) or when the
 * descriptor could not be republished (HTTP or etcd peers may keep the old address).
 */
int mc_rdma_fence(mc_transfer_engine_t *te)
{
    mc_rdma_t *r = te ? te->rdma : NULL;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->fence_lock);
    uint64_t t0 = mc_now_ms();
    ucp_worker_h w = NULL;
    int efd = -1;
    uint8_t *addr = NULL;
    size_t len = 0;
    int rc = server_create(r, &w, &efd, &addr, &len);
    address_install(r, addr, len);
    progress_stop(r);
    /* Test hook: the old worker exists (its sockets accept bytes) but nothing progresses it. */
    mc_failpoint("rdma.fence.hold");
    if (r->server)
        ucp_worker_destroy(r->server);
    r->server = w;
    r->server_efd = efd;
    if (w && progress_start(r) != 0) {
        address_install(r, NULL, 0);
        ucp_worker_destroy(w);
        r->server = NULL;
        rc = MC_ERR_INTERNAL_ERROR;
    }
    r->fences++;
    int published = mc_metadata_publish(te);
    uint64_t fences = r->fences;
    pthread_mutex_unlock(&r->fence_lock);
    if (rc != 0)
        MC_ERROR("rdma: fence %llu: the old serving worker is gone but no new one could be "
                 "started; peers reach this engine over tcp only",
                 (unsigned long long)fences);
    else
        MC_INFO("rdma: fence %llu: serving worker replaced in %llu ms; peers reconnect",
                (unsigned long long)fences, (unsigned long long)(mc_now_ms() - t0));
    return rc != 0 || published != 0 ? MC_ERR_INTERNAL_ERROR : 0;
}

/* ---- memory ----------------------------------------------------------------------------- */

int mc_rdma_map(mc_transfer_engine_t *te, mc_local_region_t *g)
{
    mc_rdma_t *r = te->rdma;
    if (!r)
        return 0;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_PROT,
        .address = (void *)(uintptr_t)g->addr,
        .length = g->length,
        .prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE |
                UCP_MEM_MAP_PROT_REMOTE_READ | UCP_MEM_MAP_PROT_REMOTE_WRITE,
    };
    ucp_mem_h memh;
    ucs_status_t st = ucp_mem_map(r->ctx, &mp, &memh);
    if (st != UCS_OK) {
        MC_ERROR("rdma: cannot register [%#llx, +%llu) with UCX: %s (is `ulimit -l` large "
                 "enough?)",
                 (unsigned long long)g->addr, (unsigned long long)g->length, ucs_status_string(st));
        return MC_ERR_INTERNAL_ERROR;
    }
    void *rkey;
    size_t rkey_len;
    st = ucp_rkey_pack(r->ctx, memh, &rkey, &rkey_len);
    if (st != UCS_OK || rkey_len > MC_TE_MAX_RDMA_BLOB) {
        MC_ERROR("rdma: cannot pack the remote key of [%#llx, +%llu): %s",
                 (unsigned long long)g->addr, (unsigned long long)g->length,
                 st != UCS_OK ? ucs_status_string(st) : "too long");
        if (st == UCS_OK)
            ucp_rkey_buffer_release(rkey);
        ucp_mem_unmap(r->ctx, memh);
        return MC_ERR_INTERNAL_ERROR;
    }
    g->rdma_memh = memh;
    g->rdma_rkey = rkey;
    g->rdma_rkey_len = rkey_len;
    return 0;
}

void mc_rdma_unmap(mc_transfer_engine_t *te, mc_local_region_t *g)
{
    mc_rdma_t *r = te->rdma;
    if (!r || !g->rdma_memh)
        return;
    ucp_rkey_buffer_release(g->rdma_rkey);
    ucp_mem_unmap(r->ctx, g->rdma_memh);
    g->rdma_memh = NULL;
    g->rdma_rkey = NULL;
    g->rdma_rkey_len = 0;
}

/* ---- requests --------------------------------------------------------------------------- */

/* The requests of one slice (put or get, flush, and a close when it is torn down). Lives on the
 * stack of the worker thread that owns the worker; callbacks run inside its progress calls. */
typedef struct rdma_op {
    unsigned pending;
    ucs_status_t status; /* first failure */
    int count;
    void *reqs[3];
} rdma_op_t;

static void op_done(void *request, ucs_status_t status, void *user_data)
{
    rdma_op_t *op = user_data;
    if (status != UCS_OK && op->status == UCS_OK)
        op->status = status;
    op->pending--;
}

static void op_track(rdma_op_t *op, ucs_status_ptr_t p)
{
    if (UCS_PTR_IS_ERR(p)) {
        if (op->status == UCS_OK)
            op->status = UCS_PTR_STATUS(p);
    } else if (p) {
        op->reqs[op->count++] = p;
        op->pending++;
    }
}

static ucp_request_param_t op_param(rdma_op_t *op)
{
    return (ucp_request_param_t){.op_attr_mask =
                                     UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                 .cb.send = op_done,
                                 .user_data = op};
}

/* Progresses worker w until op has no pending request (0) or deadline_ms passed (-1). */
static int op_wait(mc_rdma_t *r, size_t w, rdma_op_t *op, uint64_t deadline_ms)
{
    while (op->pending) {
        worker_spin(r, r->workers[w], &op->pending);
        if (!op->pending)
            break;
        uint64_t now = mc_now_ms();
        if (now >= deadline_ms)
            return -1;
        uint64_t left = deadline_ms - now;
        worker_sleep(r->workers[w], r->worker_efds[w], -1,
                     left < MC_RDMA_POLL_CAP_MS ? (int)left : MC_RDMA_POLL_CAP_MS);
    }
    return 0;
}

/*
 * Progresses worker w until every request of op has completed — its callback ran — however long
 * that takes. For requests that were cancelled (their endpoint force-closed): UCX documents that
 * ucp_ep_close_nbx with UCP_EP_CLOSE_FLAG_FORCE completes every outstanding request with
 * UCS_ERR_CANCELED, but it does so from a later ucp_worker_progress (UCX 1.13 purges them once
 * the endpoint's transport lanes are discarded, in a progress callback), and that a request
 * freed (ucp_request_free) before completing goes on running inside UCX. A get released early
 * could therefore still write into the caller's buffer after the call returned, when the peer's
 * reply arrives: so nothing is released before its callback ran. Should UCX never let go, this
 * never returns — the caller's buffer stays UCX's and so does this worker (and its engine
 * worker thread: it serves no other transfer; the registry read lock rdma_move holds keeps
 * (un)registrations waiting, and mc_te_destroy waits to join the thread) — and an error says so
 * every MC_RDMA_STUCK_LOG_MS.
 */
static void op_wait_released(mc_rdma_t *r, size_t w, rdma_op_t *op, const char *what)
{
    uint64_t start = mc_now_ms(), next_log = start + MC_RDMA_STUCK_LOG_MS;
    while (op->pending) {
        worker_spin(r, r->workers[w], &op->pending);
        if (!op->pending)
            break;
        uint64_t now = mc_now_ms();
        if (now >= next_log) {
            MC_ERROR("rdma: UCX has not released %u cancelled request(s) of %s after %llu ms; "
                     "their buffer stays in use and UCX worker %zu (engine worker thread %zu) "
                     "moves nothing else until it does",
                     op->pending, what, (unsigned long long)(now - start), w, w);
            next_log = now + MC_RDMA_STUCK_LOG_MS;
        }
        worker_sleep(r->workers[w], r->worker_efds[w], -1, MC_RDMA_POLL_CAP_MS);
    }
}

/* Returns every request of op to UCX. Only once each completed (op_wait or op_wait_released
 * returned 0), except a probe's, whose scratch outlives the workers. */
static void op_release(rdma_op_t *op)
{
    for (int i = 0; i < op->count; i++)
        ucp_request_free(op->reqs[i]);
    op->count = 0;
}

/* ---- connections ------------------------------------------------------------------------ */

static void ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    mc_rdma_conn_t *c = arg;
    if (c->ep == ep)
        c->failure = status;
}

static void conn_drop_rkeys(mc_rdma_conn_t *c)
{
    for (size_t i = 0; i < c->rkey_count; i++) {
        if (c->rkeys[i])
            ucp_rkey_destroy(c->rkeys[i]);
    }
    free(c->rkeys);
    c->rkeys = NULL;
    c->rkey_count = 0;
    c->rkey_gen = 0;
}

/*
 * Closes c's endpoint — forcibly (its requests, e.g. those of `op`, are cancelled) or after a
 * flush — and waits for the close and for op's requests, then releases them and the rkeys (only
 * now: a request in flight may still use its rkey). op may be NULL. A forced close waits until
 * UCX has completed every request of op (op_wait_released: they may touch a caller's buffer); a
 * graceful one (op NULL: no transfer of it is outstanding) waits at most MC_RDMA_CLOSE_MS.
 */
static void conn_close(mc_rdma_t *r, size_t w, mc_rdma_conn_t *c, int force, rdma_op_t *op)
{
    rdma_op_t own = {0, UCS_OK, 0, {0}};
    if (!op)
        op = &own;
    if (c->ep) {
        ucp_ep_h ep = c->ep;
        ucp_request_param_t prm = op_param(op);
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = force || c->failure != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        c->ep = NULL; /* the error callback ignores the endpoint from now on */
        op_track(op, ucp_ep_close_nbx(ep, &prm));
    }
    if (force)
        op_wait_released(r, w, op, "a transfer given up on");
    else
        op_wait(r, w, op, mc_now_ms() + MC_RDMA_CLOSE_MS);
    op_release(op);
    conn_drop_rkeys(c);
    free(c->address);
    c->address = NULL;
    c->address_len = 0;
    c->failure = UCS_OK;
    c->proven = 0;
    mc_fence_rules_free(&c->rules);
    c->rules_valid = 0;
}

/* Creates c's endpoint to the worker at `address` (c takes ownership of the buffer). */
static int conn_connect(mc_rdma_t *r, size_t w, mc_rdma_conn_t *c, uint8_t *address,
                        size_t address_len, const char *peer_name)
{
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = (const ucp_address_t *)address,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {ep_failed, c}};
    ucs_status_t st = ucp_ep_create(r->workers[w], &ep, &c->ep);
    if (st != UCS_OK) {
        MC_ERROR("rdma: cannot create a UCX endpoint to segment %s: %s", peer_name,
                 ucs_status_string(st));
        c->ep = NULL;
        free(address);
        return MC_ERR_TRANSFER_FAIL;
    }
    c->address = address;
    c->address_len = address_len;
    c->failure = UCS_OK;
    c->answered = 0;
    c->proven = 0;
    return 0;
}

/*
 * Reads one byte at `remote` into scratch memory, bounded by wait_ms: 0 once the peer answered
 * on c's endpoint. A probe given up on is left to UCX (it may still land in the scratch).
 */
static int conn_probe(mc_rdma_t *r, size_t w, mc_rdma_conn_t *c, size_t region, uint64_t remote,
                      int wait_ms, ucs_status_t *why)
{
    rdma_op_t op = {0, UCS_OK, 0, {0}};
    ucp_request_param_t prm = op_param(&op);
    c->probe_region = region;
    c->probe_addr = remote;
    op_track(&op, ucp_get_nbx(c->ep, r->scratch + w * MC_RDMA_SCRATCH, 1, remote, c->rkeys[region],
                              &prm));
    int timed_out = op_wait(r, w, &op, mc_now_ms() + (uint64_t)wait_ms) != 0;
    op_release(&op);
    *why = timed_out ? UCS_ERR_TIMED_OUT : op.status;
    if (*why != UCS_OK)
        return MC_ERR_TRANSFER_FAIL;
    c->answered = 1;
    return 0;
}

/* What a slice needs from the peer's descriptor, copied under the peer lock. */
typedef struct rdma_target {
    uint64_t gen;
    size_t region, region_count;
    uint8_t *address; /* set when c must (re)check its endpoint against it */
    size_t address_len;
    uint8_t *rkey; /* set when c has no unpacked rkey for the region yet */
    size_t rkey_len;
} rdma_target_t;

static void target_free(rdma_target_t *t)
{
    free(t->address);
    free(t->rkey);
    t->address = NULL;
    t->rkey = NULL;
}

static uint8_t *copy_blob(const uint8_t *src, size_t len)
{
    uint8_t *p = malloc(len);
    if (p)
        memcpy(p, src, len);
    return p;
}

/* 0, MC_TRANSPORT_DECLINED when rdma cannot reach the range (tcp peer, region without rkey), or
 * an error. */
static int target_snapshot(mc_peer_t *peer, const mc_rdma_conn_t *c, uint64_t remote, uint64_t len,
                           rdma_target_t *t)
{
    memset(t, 0, sizeof(*t));
    int rc = MC_TRANSPORT_DECLINED;
    pthread_mutex_lock(&peer->lock);
    const mc_segment_desc_t *d = &peer->desc;
    const mc_remote_region_t *g = mc_desc_find(d, remote, len);
    if (g && g->rkey_len && d->rdma_address_len) {
        rc = 0;
        t->gen = peer->desc_gen;
        t->region = (size_t)(g - d->regions);
        t->region_count = d->count;
        int same_gen = c->rkey_gen == t->gen && c->rkey_count == t->region_count;
        if (!c->ep || !same_gen) {
            t->address = copy_blob(d->rdma_address, d->rdma_address_len);
            t->address_len = d->rdma_address_len;
            rc = t->address ? 0 : MC_ERR_INTERNAL_ERROR;
        }
        if (rc == 0 && (!same_gen || !c->rkeys[t->region])) {
            t->rkey = copy_blob(g->rkey, g->rkey_len);
            t->rkey_len = g->rkey_len;
            rc = t->rkey ? 0 : MC_ERR_INTERNAL_ERROR;
        }
    }
    pthread_mutex_unlock(&peer->lock);
    if (rc < 0)
        target_free(t);
    return rc;
}

/*
 * Makes c connected to the target's worker, with the target region's rkey unpacked and the peer
 * known to answer (probed at `remote` within timeout_ms).
 */
static int conn_prepare(mc_rdma_t *r, size_t w, mc_rdma_conn_t *c, rdma_target_t *t,
                        const char *peer_name, uint64_t remote, int timeout_ms, ucp_rkey_h *rkey,
                        ucs_status_t *why)
{
    if (t->address && c->ep &&
        (c->address_len != t->address_len || memcmp(c->address, t->address, t->address_len)))
        conn_close(r, w, c, 1, NULL); /* the peer restarted: another worker */
    if (!c->ep) {
        int rc = conn_connect(r, w, c, t->address, t->address_len, peer_name);
        t->address = NULL; /* now c's (or freed) */
        if (rc != 0)
            return rc;
    }
    if (c->rkey_gen != t->gen || c->rkey_count != t->region_count) {
        conn_drop_rkeys(c);
        c->rkeys = calloc(t->region_count, sizeof(*c->rkeys));
        if (!c->rkeys)
            return MC_ERR_INTERNAL_ERROR;
        c->rkey_count = t->region_count;
        c->rkey_gen = t->gen;
    }
    if (!c->rkeys[t->region]) {
        assert(t->rkey);
        ucs_status_t st = ucp_ep_rkey_unpack(c->ep, t->rkey, &c->rkeys[t->region]);
        if (st != UCS_OK) {
            MC_ERROR("rdma: cannot unpack the remote key of a region of segment %s: %s", peer_name,
                     ucs_status_string(st));
            c->rkeys[t->region] = NULL;
            return MC_ERR_TRANSFER_FAIL;
        }
    }
    *rkey = c->rkeys[t->region];
    return c->answered ? 0 : conn_probe(r, w, c, t->region, remote, timeout_ms, why);
}

/* ---- transfers -------------------------------------------------------------------------- */

/* One put (+ flush) or get on c, done by deadline_ms. *why gets UCX's verdict. */
static int rdma_move(mc_transfer_engine_t *te, size_t w, mc_rdma_conn_t *c, ucp_rkey_h rkey,
                     int opcode, void *local, uint64_t remote, uint64_t len, uint64_t deadline_ms,
                     ucs_status_t *why)
{
    mc_rdma_t *r = te->rdma;
    rdma_op_t op = {0, UCS_OK, 0, {0}};
    ucp_request_param_t prm = op_param(&op);
    /* A local buffer inside this engine's registered memory goes with its memh, and stays
     * registered until the request is done (registry invariant). */
    pthread_rwlock_rdlock(&te->registry.lock);
    const mc_local_region_t *lg =
        mc_registry_find_locked(&te->registry, (uint64_t)(uintptr_t)local, len);
    if (lg && lg->rdma_memh) {
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        prm.memh = lg->rdma_memh;
    }
    if (opcode == MC_TE_OP_WRITE) {
        op_track(&op, ucp_put_nbx(c->ep, local, len, remote, rkey, &prm));
        if (op.status == UCS_OK) {
            ucp_request_param_t flush = op_param(&op);
            op_track(&op, ucp_ep_flush_nbx(c->ep, &flush));
        }
    } else {
        op_track(&op, ucp_get_nbx(c->ep, local, len, remote, rkey, &prm));
    }
    if (op_wait(r, w, &op, deadline_ms) != 0) {
        op.status = UCS_ERR_TIMED_OUT;
        conn_close(r, w, c, 1, &op); /* cancels the requests: UCX lets go of `local` */
    }
    pthread_rwlock_unlock(&te->registry.lock);
    op_release(&op);
    *why = op.status;
    return op.status == UCS_OK ? 0 : MC_ERR_TRANSFER_FAIL;
}

/*
 * The owner's fence for rdma writes, which UCX applies without asking the owner: a write of
 * (epoch, token) may go on c only if the owner's rules, read after c's endpoint was connected,
 * do not refuse it. Why that suffices: the owner changes its rules only together with a fence
 * that replaces its serving worker (write_fence.c, mc_fence_raise), and the worker replaced is
 * the one c's endpoint reaches — so a refusal made after the rules were read kills c's endpoint,
 * and a write sent on it after that is dropped with the old worker, never applied; a refusal
 * made before they were read is in them. An epoch mismatch reads the rules once more (the owner
 * may have re-mounted since: its new epoch does not replace the worker). This closes the writer
 * that reconnects after the fence — one the master revoked while it was stalled, or one stalled
 * across a failover — which the worker replacement alone let through.
 * 0, MC_ERR_INVALID_WRITE (refused: nothing sent), or MC_ERR_TRANSFER_FAIL with *why (the owner
 * did not answer by the deadline).
 */
static int conn_admit_write(mc_transfer_engine_t *te, mc_peer_t *peer, mc_rdma_conn_t *c,
                            uint64_t epoch, uint64_t token, uint64_t deadline_ms, ucs_status_t *why)
{
    char reason[256];
    for (int fresh = 0;; fresh = 1) {
        if (!c->rules_valid || fresh) {
            mc_fence_rules_free(&c->rules);
            c->rules_valid = 0;
            int rc = mc_tcp_fence_rules(te, peer->host, peer->port, &c->rules, deadline_ms);
            if (rc == MC_ERR_INTERNAL_ERROR)
                return rc;
            if (rc != 0) {
                *why = mc_now_ms() >= deadline_ms ? UCS_ERR_TIMED_OUT : UCS_ERR_UNREACHABLE;
                return MC_ERR_TRANSFER_FAIL;
            }
            c->rules_valid = 1;
        }
        int rc = mc_fence_rules_check(&c->rules, epoch, token, reason, sizeof(reason));
        if (rc == 0)
            return 0;
        if (fresh || (epoch != 0 && c->rules.epoch == epoch) || epoch == 0)
            break; /* a refused token stays refused: no second look */
    }
    if (mc_peer_should_log(peer))
        MC_ERROR("rdma write to segment %s refused by its owner's fence: %s", peer->name, reason);
    return MC_ERR_INVALID_WRITE;
}

/* Re-reads the peer's descriptor before reconnecting; a peer that just failed that is not asked
 * again for a second (its slices fail at once). */
static int conn_refresh(mc_transfer_engine_t *te, mc_peer_t *peer, mc_rdma_conn_t *c,
                        uint64_t deadline_ms)
{
    if (!c->refresh)
        return 0;
    uint64_t now = mc_now_ms();
    if (c->refresh_failed_ms && now - c->refresh_failed_ms < 1000)
        return MC_ERR_TRANSFER_FAIL;
    if (mc_peer_refresh(te, peer, deadline_ms) != 0) {
        c->refresh_failed_ms = now;
        return MC_ERR_TRANSFER_FAIL;
    }
    c->refresh = 0;
    c->refresh_failed_ms = 0;
    return 0;
}

int mc_rdma_transfer(mc_transfer_engine_t *te, size_t w, mc_peer_t *peer, int opcode, void *local,
                     uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token,
                     uint64_t deadline)
{
    mc_rdma_t *r = te->rdma;
    if (!r || !peer->rdma_conns)
        return MC_TRANSPORT_DECLINED;
    assert(w < r->worker_count);
    mc_rdma_conn_t *c = &peer->rdma_conns[w];
    ucs_status_t first = UCS_OK; /* what failed the first attempt, when it is retried */
    /* The request's deadline bounds the whole slice — descriptor refresh, endpoint set-up and
     * probe, the transfer, the one retry — as in the tcp transport: a request fails by its
     * deadline (plus the time to notice), never a multiple of the timeout. */
    for (int attempt = 0;; attempt++) {
        if (c->ep && c->failure != UCS_OK) { /* died since the last slice */
            conn_close(r, w, c, 1, NULL);
            c->refresh = 1;
        }
        /* A new endpoint is preceded by a descriptor refresh over tcp, bounded by the deadline:
         * ucp_ep_create to a host that vanished (no answer at all, e.g. its link cut) blocks in
         * UCX's tcp connect for the kernel's SYN retries (over two minutes), so the peer must be
         * shown reachable first. It also picks up a restarted peer's new address. */
        if (!c->ep)
            c->refresh = 1;
        ucs_status_t why = UCS_ERR_UNREACHABLE;
        int rc =
            mc_now_ms() < deadline ? conn_refresh(te, peer, c, deadline) : MC_ERR_TRANSFER_FAIL;
        if (rc == 0) {
            rdma_target_t t;
            rc = target_snapshot(peer, c, remote, len, &t);
            if (rc == MC_TRANSPORT_DECLINED)
                return MC_TRANSPORT_DECLINED; /* not an rdma range: the caller uses tcp */
            ucp_rkey_h rkey = NULL;
            uint64_t now = mc_now_ms();
            int left = now < deadline ? (int)(deadline - now) : 0;
            if (rc == 0 && left == 0) {
                rc = MC_ERR_TRANSFER_FAIL;
                why = UCS_ERR_TIMED_OUT;
            }
            if (rc == 0)
                rc = conn_prepare(r, w, c, &t, peer->name, remote, left, &rkey, &why);
            target_free(&t);
            if (rc == 0 && opcode == MC_TE_OP_WRITE)
                rc = conn_admit_write(te, peer, c, epoch, token, deadline, &why);
            if (rc == 0)
                rc = rdma_move(te, w, c, rkey, opcode, local, remote, len, deadline, &why);
            if (rc == 0) {
                c->proven = 1;
                return 0;
            }
            if (rc == MC_ERR_INTERNAL_ERROR || rc == MC_ERR_INVALID_WRITE)
                return rc;
            int retry =
                c->proven && why != UCS_ERR_TIMED_OUT && attempt == 0 && mc_now_ms() < deadline;
            if (!c->ep || c->answered || c->failure != UCS_OK) { /* see the top: never unanswered */
                conn_close(r, w, c, 1, NULL);
                c->refresh = 1;
            }
            if (retry) {
                first = why;
                continue;
            }
        }
        if (mc_peer_should_log(peer)) {
            char reason[160];
            if (why == UCS_ERR_TIMED_OUT)
                snprintf(reason, sizeof(reason),
                         "peer did not answer by the request's deadline (transfer timeout %d ms)",
                         te->timeout_ms);
            else if (why == UCS_ERR_UNREACHABLE)
                snprintf(reason, sizeof(reason), "peer unreachable%s%s",
                         first != UCS_OK ? " after: " : "",
                         first != UCS_OK ? ucs_status_string(first) : "");
            else
                snprintf(reason, sizeof(reason), "%s", ucs_status_string(why));
            MC_ERROR("rdma %s of %llu bytes at %#llx on segment %s failed: %s",
                     opcode == MC_TE_OP_WRITE ? "write" : "read", (unsigned long long)len,
                     (unsigned long long)remote, peer->name, reason);
        }
        return MC_ERR_TRANSFER_FAIL;
    }
}

/* ---- peers ------------------------------------------------------------------------------ */

int mc_rdma_peer_init(mc_transfer_engine_t *te, mc_peer_t *peer)
{
    if (!te->rdma)
        return 0;
    peer->rdma_conns = calloc(te->rdma->worker_count, sizeof(*peer->rdma_conns));
    return peer->rdma_conns ? 0 : MC_ERR_INTERNAL_ERROR;
}

void mc_rdma_peer_close(mc_transfer_engine_t *te, mc_peer_t *peer)
{
    mc_rdma_t *r = te->rdma;
    if (!r || !peer->rdma_conns)
        return;
    for (size_t w = 0; w < r->worker_count; w++) {
        mc_rdma_conn_t *c = &peer->rdma_conns[w];
        ucs_status_t why;
        /* An endpoint the peer never answered gets one last, short chance (see the top). */
        if (c->ep && !c->answered && c->failure == UCS_OK && c->probe_region < c->rkey_count &&
            c->rkeys[c->probe_region])
            conn_probe(r, w, c, c->probe_region, c->probe_addr, MC_RDMA_CLOSE_MS, &why);
        conn_close(r, w, c, 0, NULL);
    }
    free(peer->rdma_conns);
    peer->rdma_conns = NULL;
}

/* ---- the transport table's slots ---------------------------------------------------------- */

static int rdma_start(mc_transfer_engine_t *te, const mc_transport_start_args_t *args)
{
    if (strcmp(te->protocol, "rdma") != 0)
        return 0; /* a tcp engine: te->rdma stays NULL and every slot below is a no-op */
    return mc_rdma_start(te, args->config->device_names, args->bind_host);
}

/* The serving worker's address (the descriptor's rdma_address); nothing for a tcp engine. */
static int rdma_describe(mc_transfer_engine_t *te, mc_segment_desc_t *d)
{
    const uint8_t *addr;
    size_t len;
    mc_rdma_local_address(te, &addr, &len);
    return mc_desc_set_address(d, addr, len);
}

/* UCX applies puts without the fence page: the serving endpoints are replaced when asked. */
static int rdma_fence_slot(mc_transfer_engine_t *te, int tokens_refused, int replace_endpoints)
{
    (void)tokens_refused;
    return replace_endpoints ? mc_rdma_fence(te) : 0;
}

const mc_transport_ops_t mc_rdma_transport = {
    .name = "rdma",
    .start = rdma_start,
    .stop = mc_rdma_stop,
    .map = mc_rdma_map,
    .unmap = mc_rdma_unmap,
    .describe = rdma_describe,
    .peer_open = mc_rdma_peer_init,
    .peer_close = mc_rdma_peer_close,
    .transfer = mc_rdma_transfer,
    .fence = rdma_fence_slot,
};
