/*
 * fake_etcd.c — the queued-answer HTTP server of fake_etcd.h, on libmicrohttpd.
 */
#include "fake_etcd.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_ANSWERS 16

typedef struct answer {
    unsigned status;
    char *body;
    size_t len;
} answer_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static answer_t queue[FAKE_MAX_ANSWERS];
static size_t head, count;
static struct MHD_Daemon *daemon_;

void mc_fake_etcd_push(unsigned status, const void *body, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    if (len)
        memcpy(copy, body, len);
    pthread_mutex_lock(&lock);
    if (count == FAKE_MAX_ANSWERS) {
        free(copy);
    } else {
        queue[(head + count) % FAKE_MAX_ANSWERS] = (answer_t){status, copy, len};
        count++;
    }
    pthread_mutex_unlock(&lock);
}

void mc_fake_etcd_clear(void)
{
    pthread_mutex_lock(&lock);
    while (count > 0) {
        free(queue[head].body);
        head = (head + 1) % FAKE_MAX_ANSWERS;
        count--;
    }
    pthread_mutex_unlock(&lock);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    (void)upload_data;
    if (!*req_cls) { /* headers: accept the body */
        *req_cls = conn;
        return MHD_YES;
    }
    if (*upload_data_size) { /* the request is not looked at */
        *upload_data_size = 0;
        return MHD_YES;
    }
    answer_t a = {200, NULL, 0};
    pthread_mutex_lock(&lock);
    if (count > 0) {
        a = queue[head];
        head = (head + 1) % FAKE_MAX_ANSWERS;
        count--;
    }
    pthread_mutex_unlock(&lock);
    if (!a.body) {
        a.body = strdup("{}");
        a.len = 2;
    }
    if (a.status < 100 || a.status > 599)
        a.status = 200;
    struct MHD_Response *r = MHD_create_response_from_buffer(a.len, a.body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(a.body);
        return MHD_NO;
    }
    enum MHD_Result rc = MHD_queue_response(conn, a.status, r);
    MHD_destroy_response(r);
    return rc;
}

int mc_fake_etcd_start(void)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    daemon_ =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, handle,
                         NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_END);
    if (!daemon_)
        abort();
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    if (!info)
        abort();
    return info->port;
}
