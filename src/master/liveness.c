/*
 * liveness.c — the failure detector of liveness.h: a queue of suspect clients and one thread
 * that probes their endpoints and tells the master which processes are gone.
 */
#include "liveness.h"

#include "log.h"
#include "mooncake/errors.h"
#include "net.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct mc_liveness {
    mc_master_t *master;
    pthread_t thread;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;
    int stopping;
    /* suspects, a ring: queue[(head + i) % MC_LIVENESS_QUEUE] for i < count */
    char (*queue)[MC_CLIENT_ID_MAX];
    size_t head, count;
    mc_liveness_stats_t stats;
};

typedef enum probe_result { PROBE_REFUSED, PROBE_OTHER } probe_result_t;

/* Connects to endpoint "host:port": PROBE_REFUSED only when nothing listens there. */
static probe_result_t probe(const char *endpoint)
{
    char host[MC_HOST_MAX];
    int port = 0;
    if (mc_net_split_endpoint(endpoint, 0, host, &port) != 0 || port <= 0)
        return PROBE_OTHER;
    errno = 0;
    int fd = mc_net_connect_tcp(host, port, MC_LIVENESS_CONNECT_MS);
    if (fd >= 0) {
        close(fd);
        return PROBE_OTHER;
    }
    return fd == MC_ERR_RPC_FAIL && errno == ECONNREFUSED ? PROBE_REFUSED : PROBE_OTHER;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Probes client id; 1 when it was declared gone. Runs on the detector thread, no lock held. */
static int judge(mc_liveness_t *l, const char *id)
{
    char names[MC_LIVENESS_MAX_ENDPOINTS][MC_SEGMENT_NAME_MAX];
    uint64_t last_seen = 0;
    size_t n =
        mc_master_client_endpoints(l->master, id, names, MC_LIVENESS_MAX_ENDPOINTS, &last_seen);
    if (n == 0)
        return 0; /* no segment (a plain client), unknown, or already gone: the TTL decides */
    if (n > MC_LIVENESS_MAX_ENDPOINTS)
        n = MC_LIVENESS_MAX_ENDPOINTS;
    for (int round = 0; round < MC_LIVENESS_ROUNDS; round++) {
        if (round > 0)
            sleep_ms(MC_LIVENESS_ROUND_MS);
        for (size_t i = 0; i < n; i++) {
            if (probe(names[i]) != PROBE_REFUSED) {
                /* something answered, or could not tell: alive, stopped or cut off */
                MC_VLOG(1, "liveness: client %s closed a connection; %s does not refuse: kept", id,
                        names[i]);
                return 0;
            }
        }
    }
    return mc_master_client_gone(l->master, id, last_seen) == 0;
}

static void *detector_main(void *arg)
{
    mc_liveness_t *l = arg;
    char id[MC_CLIENT_ID_MAX];
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->stopping && l->count == 0)
            pthread_cond_wait(&l->wake, &l->lock);
        if (l->stopping)
            break;
        memcpy(id, l->queue[l->head], sizeof(id));
        l->head = (l->head + 1) % MC_LIVENESS_QUEUE;
        l->count--;
        pthread_mutex_unlock(&l->lock);
        int gone = judge(l, id);
        pthread_mutex_lock(&l->lock);
        l->stats.gone += (uint64_t)gone;
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

int mc_liveness_start(mc_master_t *master, mc_liveness_t **out)
{
    if (!master || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_liveness_t *l = calloc(1, sizeof(*l));
    if (!l)
        return MC_ERR_INTERNAL_ERROR;
    l->queue = calloc(MC_LIVENESS_QUEUE, sizeof(*l->queue));
    l->master = master;
    if (!l->queue || pthread_mutex_init(&l->lock, NULL) != 0) {
        free(l->queue);
        free(l);
        return MC_ERR_INTERNAL_ERROR;
    }
    pthread_cond_init(&l->wake, NULL);
    if (pthread_create(&l->thread, NULL, detector_main, l) != 0) {
        pthread_cond_destroy(&l->wake);
        pthread_mutex_destroy(&l->lock);
        free(l->queue);
        free(l);
        return MC_ERR_INTERNAL_ERROR;
    }
    *out = l;
    return 0;
}

void mc_liveness_peer_closed(void *arg, const char *client_id)
{
    mc_liveness_t *l = arg;
    if (!l || !client_id || strlen(client_id) >= MC_CLIENT_ID_MAX)
        return;
    pthread_mutex_lock(&l->lock);
    int queued = 0;
    for (size_t i = 0; i < l->count && !queued; i++) /* one probe per suspect is enough */
        queued = strcmp(l->queue[(l->head + i) % MC_LIVENESS_QUEUE], client_id) == 0;
    if (!queued && l->count == MC_LIVENESS_QUEUE) {
        l->stats.dropped++;
    } else if (!queued) {
        strcpy(l->queue[(l->head + l->count) % MC_LIVENESS_QUEUE], client_id);
        l->count++;
        l->stats.suspects++;
        pthread_cond_signal(&l->wake);
    }
    pthread_mutex_unlock(&l->lock);
}

void mc_liveness_get_stats(mc_liveness_t *l, mc_liveness_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    *out = l->stats;
    pthread_mutex_unlock(&l->lock);
}

void mc_liveness_stop(mc_liveness_t *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    l->stopping = 1;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->wake);
    pthread_mutex_destroy(&l->lock);
    free(l->queue);
    free(l);
}
