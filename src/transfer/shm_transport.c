/*
 * shm_transport.c — same-host transfers through shared memory.
 *
 * Segment memory allocated by mc_te_alloc_segment_memory() is a memfd mapped MAP_SHARED |
 * MAP_NORESERVE: nothing is committed until touched (the store client pre-faults its segment:
 * src/client/prefault.h), and the memory has no name in any filesystem. Transparent huge pages
 * are asked for (MADV_HUGEPAGE) when /sys/kernel/mm/transparent_hugepage/shmem_enabled is
 * "advise" or "within_size"; MC_SEGMENT_HUGETLB=1 opts in to hugetlbfs pages (MFD_HUGETLB,
 * committed at allocation) when the huge page pool has room, else ordinary pages with a warning.
 * The owner listens on an abstract unix socket; a peer on the same host (equal host id) connects,
 * the owner checks SO_PEERCRED (same uid, or root) and hands the memfd over with SCM_RIGHTS, and
 * the peer maps it and copies with one memcpy.
 *
 * The connection stays open for the peer's lifetime and carries liveness both ways: after every
 * copy the peer polls it; a hang-up means the owner died (the request fails — bytes written into
 * a dead owner's memory are not "in place"), and a byte from the owner means a region was freed
 * (the peer drops every mapping and the request is redone over tcp, where the owner checks the
 * range). When the socket cannot be reached (another network namespace, another uid) the peer
 * falls back to tcp for good.
 *
 * With a cluster secret, a new connection first runs the handshake of wire/auth.h (service
 * "shm"); a peer that cannot prove the secret is closed before any memfd is handed out.
 *
 * Owner-side protocol, per request: peer sends int32 shm_index; owner replies
 * {int32 code, uint64 addr, uint64 length} with the memfd attached when code == 0. Index -1
 * asks for the owner's fence page (write_fence.c): the reply's addr is the peer's slot in it.
 * A peer writes only with the page mapped: each write is admitted through its slot against
 * the owner's rules (epoch, refused tokens), so the owner's fences see a peer's copy in flight
 * and wait for it, even while that peer is stopped mid-copy.
 */
#include "transfer_internal.h"

#include "checksum.h"
#include "failpoint.h"
#include "log.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* The shm server thread serves every same-host peer: a handshake may not hold it longer. */
#define MC_SHM_AUTH_TIMEOUT_MS 1000

struct shm_reply {
    int32_t code;
    int32_t pad;
    uint64_t addr;
    uint64_t length;
};

/* ---- owner side ------------------------------------------------------------------------- */

/* The selected word of a sysfs choice file ("always [never] deny"), or "" when unreadable. */
static void sysfs_choice(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[256];
    if (fgets(line, sizeof(line), f)) {
        char *a = strchr(line, '[');
        char *b = a ? strchr(a, ']') : NULL;
        if (a && b && (size_t)(b - a - 1) < n) {
            memcpy(out, a + 1, (size_t)(b - a - 1));
            out[b - a - 1] = '\0';
        }
    }
    fclose(f);
}

/* A /proc/meminfo field in bytes (kB there; HugePages_Free is a count); 0 when absent. */
static uint64_t meminfo_field(const char *field)
{
    int64_t v = mc_meminfo(field);
    if (v < 0)
        return 0;
    return (uint64_t)v * (strcmp(field, "HugePages_Free") ? 1024u : 1u);
}

/*
 * Opt-in hugetlbfs segment memory (MC_SEGMENT_HUGETLB=1): a MFD_HUGETLB memfd of *length rounded
 * up to the huge page size, mapped without MAP_NORESERVE so a pool too small fails here and not
 * as a SIGBUS on some later put. -1 (logged) when not asked, not possible or refused: the caller
 * uses ordinary pages.
 */
static int hugetlb_map(size_t *length, void **addr)
{
    const char *want = getenv("MC_SEGMENT_HUGETLB");
    if (!want || strcmp(want, "1") != 0)
        return -1;
    uint64_t huge = meminfo_field("Hugepagesize");
    uint64_t free_pages = meminfo_field("HugePages_Free");
    if (huge == 0 || *length > SIZE_MAX - huge) {
        MC_WARN("MC_SEGMENT_HUGETLB=1: this kernel has no huge pages; using ordinary pages");
        return -1;
    }
    size_t rounded = (size_t)((*length + huge - 1) / huge * huge);
    if (free_pages * huge < rounded) {
        MC_WARN("MC_SEGMENT_HUGETLB=1: %zu bytes needed, %llu free huge pages of %llu bytes "
                "(/proc/sys/vm/nr_hugepages); using ordinary pages",
                rounded, (unsigned long long)free_pages, (unsigned long long)huge);
        return -1;
    }
    int fd = memfd_create("mooncake_segment", MFD_CLOEXEC | MFD_HUGETLB);
    if (fd < 0 || ftruncate(fd, (off_t)rounded) != 0) {
        MC_WARN("MC_SEGMENT_HUGETLB=1: hugetlb memfd of %zu bytes: %s; using ordinary pages",
                rounded, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        MC_WARN("MC_SEGMENT_HUGETLB=1: mapping %zu bytes of huge pages: %s; using ordinary "
                "pages",
                rounded, strerror(errno));
        close(fd);
        return -1;
    }
    MC_INFO("segment memory: %zu bytes of hugetlbfs pages (%llu bytes each)", rounded,
            (unsigned long long)huge);
    *length = rounded;
    *addr = p;
    return fd;
}

int mc_shm_alloc(mc_transfer_engine_t *te, size_t length, mc_local_region_t *out)
{
    void *p = NULL;
    int fd = hugetlb_map(&length, &p);
    if (fd < 0) {
        fd = memfd_create("mooncake_segment", MFD_CLOEXEC);
        if (fd < 0) {
            MC_ERROR("memfd_create for %zu bytes of segment memory: %s", length, strerror(errno));
            return MC_ERR_INTERNAL_ERROR;
        }
        if (ftruncate(fd, (off_t)length) != 0) {
            MC_ERROR("sizing %zu bytes of segment memory: %s", length, strerror(errno));
            close(fd);
            return MC_ERR_INTERNAL_ERROR;
        }
        p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (p == MAP_FAILED) {
            MC_ERROR("mapping %zu bytes of segment memory: %s", length, strerror(errno));
            close(fd);
            return MC_ERR_INTERNAL_ERROR;
        }
        /* Transparent huge pages for shmem only when the host hands them out on request
         * ("advise"/"within_size"; "always" needs no advice, "never"/"deny" refuse it). */
        char thp[32];
        sysfs_choice("/sys/kernel/mm/transparent_hugepage/shmem_enabled", thp, sizeof(thp));
        if ((!strcmp(thp, "advise") || !strcmp(thp, "within_size")) &&
            madvise(p, length, MADV_HUGEPAGE) != 0)
            MC_WARN("MADV_HUGEPAGE on segment memory: %s", strerror(errno));
    }
    pthread_rwlock_wrlock(&te->registry.lock);
    int32_t index = te->registry.next_shm_index++;
    pthread_rwlock_unlock(&te->registry.lock);
    *out = (mc_local_region_t){(uint64_t)(uintptr_t)p, length, index, fd, 1, NULL, NULL, 0};
    return 0;
}

static void shm_serve_request(mc_transfer_engine_t *te, size_t conn, int fd)
{
    int32_t index;
    ssize_t n = recv(fd, &index, sizeof(index), MSG_WAITALL);
    if (n != (ssize_t)sizeof(index))
        return;
    struct shm_reply reply = {.code = MC_ERR_INVALID_PARAMS};
    int memfd = -1;
    if (index == -1) { /* the fence page, and this connection's slot in it */
        pthread_mutex_lock(&te->shm_lock);
        int32_t slot = te->shm_slots[conn];
        if (slot < 0)
            slot = te->shm_slots[conn] = mc_fence_slot_claim(te);
        pthread_mutex_unlock(&te->shm_lock);
        if (slot >= 0) {
            memfd = dup(te->fence_memfd);
            reply = (struct shm_reply){memfd >= 0 ? 0 : MC_ERR_INTERNAL_ERROR, 0, (uint64_t)slot,
                                       mc_fence_page_size()};
        } else {
            reply.code = MC_ERR_NO_AVAILABLE_HANDLE;
        }
        goto send;
    }
    pthread_rwlock_rdlock(&te->registry.lock);
    const mc_local_region_t *g = mc_registry_find_shm_locked(&te->registry, index);
    if (g) {
        reply = (struct shm_reply){0, 0, g->addr, g->length};
        memfd = dup(g->memfd);
        if (memfd < 0)
            reply.code = MC_ERR_INTERNAL_ERROR;
    }
    pthread_rwlock_unlock(&te->registry.lock);

send:;
    struct iovec iov = {&reply, sizeof(reply)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (memfd >= 0) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &memfd, sizeof(int));
    }
    sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (memfd >= 0)
        close(memfd);
}

static int peer_allowed(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return 0;
    return cred.uid == getuid() || cred.uid == 0;
}

static void shm_conn_remove(mc_transfer_engine_t *te, size_t i)
{
    pthread_mutex_lock(&te->shm_lock);
    close(te->shm_conns[i]);
    mc_fence_slot_free(te, te->shm_slots[i]); /* hung up: dead, or unmapped (never mid-copy) */
    --te->shm_conn_count;
    te->shm_conns[i] = te->shm_conns[te->shm_conn_count];
    te->shm_slots[i] = te->shm_slots[te->shm_conn_count];
    pthread_mutex_unlock(&te->shm_lock);
}

static void *shm_server_main(void *p)
{
    mc_transfer_engine_t *te = p;
    struct pollfd *pfds = NULL;
    size_t cap = 0;
    for (;;) {
        pthread_mutex_lock(&te->shm_lock);
        size_t n = te->shm_conn_count + 2;
        if (n > cap) {
            struct pollfd *np = realloc(pfds, n * sizeof(*np));
            if (!np) {
                pthread_mutex_unlock(&te->shm_lock);
                break;
            }
            pfds = np;
            cap = n;
        }
        pfds[0] = (struct pollfd){.fd = te->shm_wake[0], .events = POLLIN};
        pfds[1] = (struct pollfd){.fd = te->shm_listen_fd, .events = POLLIN};
        for (size_t i = 0; i < te->shm_conn_count; i++)
            pfds[i + 2] = (struct pollfd){.fd = te->shm_conns[i], .events = POLLIN};
        pthread_mutex_unlock(&te->shm_lock);

        if (poll(pfds, n, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pfds[0].revents)
            break;
        /* Serve connections from the back, so removal by swap keeps earlier indexes valid. */
        for (size_t i = n; i-- > 2;) {
            if (!pfds[i].revents)
                continue;
            if (pfds[i].revents & (POLLHUP | POLLERR)) {
                shm_conn_remove(te, i - 2);
                continue;
            }
            shm_serve_request(te, i - 2, pfds[i].fd);
        }
        if (pfds[1].revents & POLLIN) {
            int fd = accept4(te->shm_listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            if (!peer_allowed(fd)) {
                MC_WARN("refused a shared-memory peer of another user");
                close(fd);
                continue;
            }
            /* With a secret, a same-user peer must prove it too. This thread serves every shm
             * peer, so the handshake gets a short deadline. */
            if (te->auth && mc_auth_server(te->auth, fd, "shm", "a same-host peer",
                                           mc_now_ms() + MC_SHM_AUTH_TIMEOUT_MS) != 0) {
                atomic_fetch_add(&te->auth_refused, 1);
                close(fd);
                continue;
            }
            pthread_mutex_lock(&te->shm_lock);
            if (te->shm_conn_count == te->shm_conn_capacity) {
                size_t c = te->shm_conn_capacity ? te->shm_conn_capacity * 2 : 8;
                int *nc = realloc(te->shm_conns, c * sizeof(*nc));
                if (nc)
                    te->shm_conns = nc;
                int32_t *ns = nc ? realloc(te->shm_slots, c * sizeof(*ns)) : NULL;
                if (ns) {
                    te->shm_slots = ns;
                    te->shm_conn_capacity = c;
                }
            }
            if (te->shm_conn_count < te->shm_conn_capacity) {
                te->shm_slots[te->shm_conn_count] = -1;
                te->shm_conns[te->shm_conn_count++] = fd;
            } else {
                close(fd);
            }
            pthread_mutex_unlock(&te->shm_lock);
        }
    }
    free(pfds);
    return NULL;
}

static socklen_t abstract_addr(const char *name, struct sockaddr_un *sun)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    size_t len = strlen(name);
    if (len > sizeof(sun->sun_path) - 2)
        len = sizeof(sun->sun_path) - 2;
    memcpy(sun->sun_path + 1, name, len); /* sun_path[0] == '\0': abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

int mc_shm_server_start(mc_transfer_engine_t *te)
{
    te->shm_listen_fd = -1;
    te->shm_wake[0] = te->shm_wake[1] = -1;
    if (te->disable_shm)
        return 0;
    snprintf(te->shm_socket, sizeof(te->shm_socket), "mooncake_te_%u_%d_%d", (unsigned)getuid(),
             (int)getpid(), te->listen_port);
    struct sockaddr_un sun;
    socklen_t sl = abstract_addr(te->shm_socket, &sun);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sl) != 0 || listen(fd, 64) != 0 ||
        pipe2(te->shm_wake, O_CLOEXEC) != 0) {
        MC_WARN("shared-memory transport unavailable (%s); same-host peers will use tcp",
                strerror(errno));
        if (fd >= 0)
            close(fd);
        te->shm_socket[0] = '\0';
        return 0;
    }
    te->shm_listen_fd = fd;
    if (pthread_create(&te->shm_thread, NULL, shm_server_main, te) != 0) {
        close(fd);
        te->shm_listen_fd = -1;
        te->shm_socket[0] = '\0';
    }
    return 0;
}

void mc_shm_server_stop(mc_transfer_engine_t *te)
{
    if (te->shm_listen_fd < 0)
        return;
    if (write(te->shm_wake[1], "x", 1) < 0)
        MC_WARN("cannot wake the shm server thread: %s", strerror(errno));
    pthread_join(te->shm_thread, NULL);
    close(te->shm_listen_fd);
    close(te->shm_wake[0]);
    close(te->shm_wake[1]);
    te->shm_listen_fd = -1;
    for (size_t i = 0; i < te->shm_conn_count; i++) {
        close(te->shm_conns[i]);
        mc_fence_slot_free(te, te->shm_slots[i]);
    }
    free(te->shm_conns);
    free(te->shm_slots);
    te->shm_conns = NULL;
    te->shm_slots = NULL;
    te->shm_conn_count = te->shm_conn_capacity = 0;
}

void mc_shm_notify_revoke(mc_transfer_engine_t *te)
{
    pthread_mutex_lock(&te->shm_lock);
    for (size_t i = 0; i < te->shm_conn_count; i++) {
        if (send(te->shm_conns[i], "r", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
            MC_VLOG(1, "revoke notice to a shm peer: %s", strerror(errno));
    }
    pthread_mutex_unlock(&te->shm_lock);
}

/* ---- peer side -------------------------------------------------------------------------- */

/* With shm_rw held for writing. */
static void shm_reset_locked(mc_peer_t *peer, int new_state)
{
    for (size_t i = 0; i < peer->shm_map_count; i++) {
        if (peer->shm_maps[i])
            munmap(peer->shm_maps[i], peer->shm_lens[i]);
    }
    free(peer->shm_maps);
    free(peer->shm_lens);
    if (peer->shm_fence)
        munmap(peer->shm_fence, mc_fence_page_size());
    peer->shm_fence = NULL;
    peer->shm_fence_slot = -1;
    peer->shm_maps = NULL;
    peer->shm_lens = NULL;
    peer->shm_map_count = 0;
    if (peer->shm_sock >= 0)
        close(peer->shm_sock);
    peer->shm_sock = -1;
    peer->shm_state = new_state;
}

void mc_shm_peer_close(mc_peer_t *peer)
{
    pthread_rwlock_wrlock(&peer->shm_rw);
    shm_reset_locked(peer, 0);
    pthread_rwlock_unlock(&peer->shm_rw);
}

/* Sends int32 `index` on the owner's socket and receives the reply with its memfd (-1: none). */
static int shm_ask_locked(mc_peer_t *peer, int32_t index, struct shm_reply *reply, int *memfd)
{
    *memfd = -1;
    if (send(peer->shm_sock, &index, sizeof(index), MSG_NOSIGNAL) != (ssize_t)sizeof(index))
        return MC_ERR_TRANSFER_FAIL;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {reply, sizeof(*reply)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    ssize_t n = recvmsg(peer->shm_sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (c && c->cmsg_type == SCM_RIGHTS)
        memcpy(memfd, CMSG_DATA(c), sizeof(int));
    if (n != (ssize_t)sizeof(*reply) || reply->code != 0 || *memfd < 0) {
        if (*memfd >= 0)
            close(*memfd);
        *memfd = -1;
        return MC_ERR_TRANSFER_FAIL;
    }
    return 0;
}

/* With shm_rw held for writing: maps the owner's fence page and takes note of our slot. */
static int shm_map_fence_locked(mc_peer_t *peer)
{
    struct shm_reply reply;
    int memfd;
    int rc = shm_ask_locked(peer, -1, &reply, &memfd);
    if (rc != 0)
        return rc;
    if (reply.length != mc_fence_page_size() || reply.addr >= MC_FENCE_SLOTS) {
        close(memfd);
        return MC_ERR_TRANSFER_FAIL;
    }
    void *p = mmap(NULL, reply.length, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    close(memfd);
    if (p == MAP_FAILED)
        return MC_ERR_INTERNAL_ERROR;
    peer->shm_fence = p;
    peer->shm_fence_slot = (int32_t)reply.addr;
    return 0;
}

/* With shm_rw held for writing: connect to the owner, or mark shm unusable. */
static void shm_connect_locked(mc_transfer_engine_t *te, mc_peer_t *peer)
{
    char host_id[MC_HOST_MAX], sock_name[MC_TE_SHM_SOCKET_MAX];
    pthread_mutex_lock(&peer->lock);
    snprintf(host_id, sizeof(host_id), "%s", peer->desc.host_id);
    snprintf(sock_name, sizeof(sock_name), "%s", peer->desc.shm_socket);
    pthread_mutex_unlock(&peer->lock);
    if (te->disable_shm || !sock_name[0] || strcmp(host_id, te->host_id) != 0) {
        peer->shm_state = -1;
        return;
    }
    struct sockaddr_un sun;
    socklen_t sl = abstract_addr(sock_name, &sun);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sl) != 0) {
        MC_VLOG(1, "segment %s: shm socket unreachable (%s); using tcp", peer->name,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        peer->shm_state = -1;
        return;
    }
    if (mc_auth_client(te->auth, fd, "shm", peer->name, mc_now_ms() + MC_SHM_AUTH_TIMEOUT_MS) !=
        0) {
        close(fd);
        peer->shm_state = -1; /* tcp then proves the secret, or fails with the reason */
        return;
    }
    mc_net_set_timeouts(fd, te->timeout_ms);
    peer->shm_sock = fd;
    peer->shm_state = 1;
    /* No write without the owner's fence page: it is what lets the owner refuse and wait for
     * this process's copies (an owner that has none is written to over tcp). */
    if (shm_map_fence_locked(peer) != 0) {
        MC_VLOG(1, "segment %s: no fence page from its owner; using tcp", peer->name);
        shm_reset_locked(peer, -1);
    }
}

/* With shm_rw held for writing: map the owner's memfd of `index`. */
static int shm_map_locked(mc_peer_t *peer, const mc_remote_region_t *region)
{
    int32_t index = region->shm_index;
    if ((size_t)index >= peer->shm_map_count) {
        size_t count = (size_t)index + 1;
        void **maps = realloc(peer->shm_maps, count * sizeof(*maps));
        if (!maps)
            return MC_ERR_INTERNAL_ERROR;
        peer->shm_maps = maps;
        uint64_t *lens = realloc(peer->shm_lens, count * sizeof(*lens));
        if (!lens)
            return MC_ERR_INTERNAL_ERROR;
        peer->shm_lens = lens;
        for (size_t i = peer->shm_map_count; i < count; i++) {
            maps[i] = NULL;
            lens[i] = 0;
        }
        peer->shm_map_count = count;
    }
    if (peer->shm_maps[index])
        return 0;
    struct shm_reply reply;
    int memfd;
    int rc = shm_ask_locked(peer, index, &reply, &memfd);
    if (rc != 0)
        return rc;
    if (reply.addr != region->addr || reply.length != region->length) {
        close(memfd);
        return MC_ERR_TRANSFER_FAIL;
    }
    void *p =
        mmap(NULL, reply.length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
    close(memfd);
    if (p == MAP_FAILED)
        return MC_ERR_INTERNAL_ERROR;
    peer->shm_maps[index] = p;
    peer->shm_lens[index] = reply.length;
    return 0;
}

/*
 * After a copy: 0 when the owner is alive and nothing was revoked, MC_ERR_TRANSFER_FAIL when it
 * hung up, 1 when it revoked a region.
 */
static int shm_check_owner(mc_peer_t *peer)
{
    struct pollfd pfd = {.fd = peer->shm_sock, .events = POLLIN};
    if (poll(&pfd, 1, 0) <= 0)
        return 0;
    char b;
    ssize_t n = recv(peer->shm_sock, &b, 1, MSG_DONTWAIT);
    if (n == 1)
        return 1;
    return MC_ERR_TRANSFER_FAIL;
}

int mc_shm_transfer(mc_transfer_engine_t *te, mc_peer_t *peer, int opcode, void *local,
                    uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token, uint32_t *crc)
{
    mc_remote_region_t region;
    pthread_mutex_lock(&peer->lock);
    const mc_remote_region_t *g = mc_desc_find(&peer->desc, remote, len);
    if (g)
        region = *g;
    pthread_mutex_unlock(&peer->lock);
    if (!g || region.shm_index < 0)
        return MC_TRANSPORT_DECLINED;

    for (;;) {
        pthread_rwlock_rdlock(&peer->shm_rw);
        if (peer->shm_state < 0) {
            pthread_rwlock_unlock(&peer->shm_rw);
            return MC_TRANSPORT_DECLINED;
        }
        if (peer->shm_state == 1 && (size_t)region.shm_index < peer->shm_map_count &&
            peer->shm_maps[region.shm_index])
            break; /* mapped: copy with the read lock held */
        pthread_rwlock_unlock(&peer->shm_rw);

        pthread_rwlock_wrlock(&peer->shm_rw);
        if (peer->shm_state == 0)
            shm_connect_locked(te, peer);
        int rc = peer->shm_state == 1 ? shm_map_locked(peer, &region) : 0;
        if (rc != 0) {
            MC_WARN("segment %s: cannot map its shared memory (%s); using tcp", peer->name,
                    mc_error_name(rc));
            shm_reset_locked(peer, -1);
        }
        pthread_rwlock_unlock(&peer->shm_rw);
    }

    char *base = (char *)peer->shm_maps[region.shm_index] + (remote - region.addr);
    /* A write is admitted in our slot of the owner's fence page: refused there when the owner
     * refused its token or moved to another epoch, and waited for by the owner's fences until
     * the last byte is copied (so a copy stopped half-way holds the owner's fence, not the
     * memory's next occupant). */
    _Atomic uint64_t *ring = peer->shm_fence->slots[peer->shm_fence_slot].count;
    uint64_t pass = 0;
    if (opcode == MC_TE_OP_WRITE) {
        char why[256];
        if (mc_fence_admit(peer->shm_fence, ring, epoch, token, &pass, why, sizeof(why)) != 0) {
            pthread_rwlock_unlock(&peer->shm_rw);
            MC_ERROR("shared-memory write of %llu bytes at %#llx on segment %s refused: %s",
                     (unsigned long long)len, (unsigned long long)remote, peer->name, why);
            return MC_ERR_INVALID_WRITE;
        }
        mc_failpoint("shm.write.admitted");
    }
    if (crc && opcode == MC_TE_OP_WRITE)
        *crc = mc_copy_crc32c(base, local, len, 0, 1);
    else if (crc)
        *crc = mc_copy_crc32c(local, base, len, 0, 0);
    else if (opcode == MC_TE_OP_WRITE)
        memcpy(base, local, len);
    else
        memcpy(local, base, len);
    if (opcode == MC_TE_OP_WRITE)
        mc_fence_release(ring, pass);
    int alive = shm_check_owner(peer);
    pthread_rwlock_unlock(&peer->shm_rw);
    if (alive == 0)
        return 0;

    pthread_rwlock_wrlock(&peer->shm_rw);
    shm_reset_locked(peer, 0);
    pthread_rwlock_unlock(&peer->shm_rw);
    if (alive < 0) {
        MC_ERROR("segment %s: owner process went away during a shared-memory %s", peer->name,
                 opcode == MC_TE_OP_WRITE ? "write" : "read");
        return MC_ERR_TRANSFER_FAIL;
    }
    /* A region was revoked: refresh the descriptor and let the caller redo it over tcp. */
    mc_peer_refresh(te, peer, 0);
    return MC_TRANSPORT_DECLINED;
}

/* ---- the transport table's slots ---------------------------------------------------------- */

static int shm_start(mc_transfer_engine_t *te, const mc_transport_start_args_t *args)
{
    (void)args;
    return mc_shm_server_start(te); /* 0 even when unavailable: peers then use tcp */
}

/* A freed region of segment memory: same-host peers drop their mappings (caller memory, never
 * handed out, has no shm index). */
static void shm_unmap(mc_transfer_engine_t *te, mc_local_region_t *g)
{
    if (g->shm_index >= 0)
        mc_shm_notify_revoke(te);
}

static void shm_peer_close(mc_transfer_engine_t *te, mc_peer_t *peer)
{
    (void)te;
    mc_shm_peer_close(peer);
}

static int shm_submit(mc_transfer_engine_t *te, mc_peer_t *peer, const mc_transfer_req_t *req,
                      uint32_t *crc)
{
    int op = req->opcode == MC_TRANSFER_WRITE ? MC_TE_OP_WRITE : MC_TE_OP_READ;
    return mc_shm_transfer(te, peer, op, req->source, req->target_offset, req->length, req->epoch,
                           req->fence_token, crc);
}

const mc_transport_ops_t mc_shm_transport = {
    .name = "shm",
    .start = shm_start,
    .stop = mc_shm_server_stop,
    .alloc = mc_shm_alloc,
    .unmap = shm_unmap,
    .peer_close = shm_peer_close,
    .submit = shm_submit,
};
