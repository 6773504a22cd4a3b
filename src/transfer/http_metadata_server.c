/*
 * http_metadata_server.c — the HTTP metadata service (http_metadata.h): an in-memory key/value map
 * served over libmicrohttpd as GET|PUT|DELETE /metadata?key=K plus GET /health, compatible with
 * upstream Mooncake's http_metadata_server.cpp. Peers publish segment descriptors here.
 *
 * One MHD polling thread (epoll) runs every connection, so handlers never run concurrently with
 * each other; the mutex exists for mc_http_metadata_server_size() and keeps the map safe should
 * the threading model change. It is held only for a lookup/insert/erase and, on GET, one copy.
 *
 * A PUT body is accumulated per request in md_request_t and never grows past the server's
 * max_value_bytes: a declared Content-Length above it is refused before the body is read; a
 * chunked body that overflows is drained without being stored and then refused (413).
 *
 * Memory accounting (under the mutex): `held` is the bytes of every entry (struct, key, value),
 * `receiving` the capacity of every PUT body being received. held + receiving never exceeds
 * max_total_bytes: a body's room is charged before it is allocated (a declared length at the
 * header call, a chunked body as it grows), and a body that cannot be charged is refused with
 * 507 (drained first when chunked). A stored body moves from `receiving` to `held`.
 */
#include "mooncake/errors.h"
#include "mooncake/http_metadata.h"

#include "auth.h"
#include "http_guard.h"
#include "log.h"
#include "net.h"

#include <microhttpd.h>
#include <openssl/crypto.h>

#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MD_MAX_KEY_BYTES 4096
#define MD_CONNECTION_MEMORY_LIMIT (64u << 10) /* request line and headers, per connection */
#define MD_REFUSE_LOG_INTERVAL_MS 1000
#define MD_INITIAL_BUCKETS 64
#define MD_INITIAL_BODY_BYTES 4096
#define MD_RPC_META_MARKER "rpc_meta"
#define MD_METADATA_PATH "/metadata"
#define MD_HEALTH_PATH "/health"
#define MD_CHALLENGE_PATH "/metadata/auth_challenge"
#define MD_NONCES 1024        /* outstanding write challenges; the oldest is dropped first */
#define MD_NONCE_TTL_MS 30000 /* a challenge not used within this is void */

/* A write challenge issued and not used yet. */
typedef struct md_nonce {
    uint8_t nonce[MC_AUTH_NONCE_LEN];
    uint64_t issued_ms; /* 0: free or used */
} md_nonce_t;
#define MD_METRICS_PATH "/metrics"

/* One key and its value. key is not NUL-terminated text: a %00 in the query is a legal byte. */
typedef struct md_entry {
    struct md_entry *next;
    uint64_t hash;
    char *value; /* malloc'd, value_len bytes; NULL when value_len == 0 */
    size_t value_len;
    size_t key_len;
    char key[];
} md_entry_t;

/* Chained hash table. Invariant: nbuckets is a power of two and count <= nbuckets. */
typedef struct md_map {
    md_entry_t **buckets;
    size_t nbuckets;
    size_t count;
} md_map_t;

struct mc_http_metadata_server {
    struct MHD_Daemon *daemon;
    mc_http_metadata_limits_t limits; /* defaults filled in */
    mc_http_guard_t guard;            /* connection cap */
    pthread_mutex_t lock;             /* guards map and the counters below */
    md_map_t map;
    size_t held;      /* bytes of the entries in map (md_entry_cost) */
    size_t receiving; /* capacity of the PUT bodies being received */
    uint64_t refused_too_large, refused_full;
    atomic_uint_fast64_t last_refuse_log_ms;
    int port;
    mc_auth_t *auth; /* NULL: no cluster secret, writes open */
    md_nonce_t nonces[MD_NONCES];
    size_t next_nonce;
    uint64_t auth_refused;
};

/*
 * Per-request state, created on the header call and freed by md_request_completed(). Every
 * request is answered only once fully received (except a declared oversize PUT): a response
 * queued earlier makes libmicrohttpd close the connection instead of keeping it alive.
 */
typedef struct md_request {
    int is_put;
    char *body; /* PUT only; other methods' bodies are discarded */
    size_t len;
    size_t cap;    /* charged to server->receiving */
    int too_large; /* the body overflowed max_value_bytes: drained, not stored */
    int no_room;   /* the body did not fit max_total_bytes: drained, not stored */
} md_request_t;

/* ---- map ---------------------------------------------------------------------------------- */

static uint64_t md_hash(const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int md_map_init(md_map_t *map)
{
    map->buckets = calloc(MD_INITIAL_BUCKETS, sizeof(*map->buckets));
    map->nbuckets = MD_INITIAL_BUCKETS;
    map->count = 0;
    return map->buckets ? 0 : MC_ERR_INTERNAL_ERROR;
}

static void md_map_free(md_map_t *map)
{
    for (size_t i = 0; i < map->nbuckets; i++) {
        md_entry_t *e = map->buckets[i];
        while (e) {
            md_entry_t *next = e->next;
            free(e->value);
            free(e);
            e = next;
        }
    }
    free(map->buckets);
    map->buckets = NULL;
    map->count = 0;
}

/* Returns the link pointing at the entry for key (so it can be unlinked), or NULL. */
static md_entry_t **md_map_find(md_map_t *map, const char *key, size_t len, uint64_t hash)
{
    md_entry_t **link = &map->buckets[hash & (map->nbuckets - 1)];
    for (; *link; link = &(*link)->next) {
        md_entry_t *e = *link;
        if (e->hash == hash && e->key_len == len && memcmp(e->key, key, len) == 0)
            return link;
    }
    return NULL;
}

/* Doubles the bucket array; on allocation failure the map simply stays denser. */
static void md_map_grow(md_map_t *map)
{
    size_t n = map->nbuckets * 2;
    md_entry_t **b = calloc(n, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < map->nbuckets; i++) {
        md_entry_t *e = map->buckets[i];
        while (e) {
            md_entry_t *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(map->buckets);
    map->buckets = b;
    map->nbuckets = n;
}

/* Inserts a new key owning `value`. Caller checked the key is absent. */
static int md_map_insert(md_map_t *map, const char *key, size_t len, uint64_t hash, char *value,
                         size_t value_len)
{
    md_entry_t *e = malloc(sizeof(*e) + len);
    if (!e)
        return MC_ERR_INTERNAL_ERROR;
    memcpy(e->key, key, len);
    e->key_len = len;
    e->hash = hash;
    e->value = value;
    e->value_len = value_len;
    if (map->count >= map->nbuckets)
        md_map_grow(map);
    md_entry_t **bucket = &map->buckets[hash & (map->nbuckets - 1)];
    e->next = *bucket;
    *bucket = e;
    map->count++;
    return 0;
}

/* ---- memory accounting (server lock held) ------------------------------------------------ */

/* Bytes an entry holds. */
static size_t md_entry_cost(size_t key_len, size_t value_len)
{
    return sizeof(md_entry_t) + key_len + value_len;
}

/* Charges `more` bytes of body room; 0, or -1 when held + receiving would pass the limit. */
static int md_charge_locked(mc_http_metadata_server_t *s, size_t more)
{
    if (more > s->limits.max_total_bytes - s->held - s->receiving)
        return -1;
    s->receiving += more;
    return 0;
}

static int md_charge(mc_http_metadata_server_t *s, size_t more)
{
    pthread_mutex_lock(&s->lock);
    int rc = md_charge_locked(s, more);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void md_uncharge(mc_http_metadata_server_t *s, size_t less)
{
    pthread_mutex_lock(&s->lock);
    s->receiving -= less;
    pthread_mutex_unlock(&s->lock);
}

/* Frees a request's body and its charge. */
static void md_request_drop_body(mc_http_metadata_server_t *s, md_request_t *req)
{
    if (req->cap)
        md_uncharge(s, req->cap);
    free(req->body);
    req->body = NULL;
    req->len = req->cap = 0;
}

/* ---- responses ---------------------------------------------------------------------------- */

/* Answers with a static text body. */
static enum MHD_Result md_respond_text(struct MHD_Connection *conn, unsigned int status,
                                       const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result md_respond_not_allowed(struct MHD_Connection *conn, const char *allow)
{
    static const char text[] = "Method not allowed";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof(text) - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, r);
    MHD_destroy_response(r);
    return ret;
}

/* Answers a refused PUT (413 or 507), counting it and logging at most once a second. */
static enum MHD_Result md_refuse(mc_http_metadata_server_t *s, struct MHD_Connection *conn,
                                 unsigned int status, const char *text, size_t bytes)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = status == MHD_HTTP_CONTENT_TOO_LARGE ? ++s->refused_too_large : ++s->refused_full;
    size_t keys = s->map.count, held = s->held;
    pthread_mutex_unlock(&s->lock);
    if (mc_log_ratelimit(&s->last_refuse_log_ms, MD_REFUSE_LOG_INTERVAL_MS))
        MC_WARN("HTTP metadata server: PUT of %zu bytes refused (%u %s; %llu such refusals); "
                "holding %zu keys, %zu bytes (limits: value %zu, keys %zu, total %zu bytes)",
                bytes, status, text, (unsigned long long)n, keys, held, s->limits.max_value_bytes,
                s->limits.max_keys, s->limits.max_total_bytes);
    return md_respond_text(conn, status, text);
}

/* ---- handlers ----------------------------------------------------------------------------- */

/* The `key` query argument, or NULL when missing or empty. */
static const char *md_request_key(struct MHD_Connection *conn, size_t *len)
{
    const char *key = NULL;
    *len = 0;
    if (MHD_lookup_connection_value_n(conn, MHD_GET_ARGUMENT_KIND, "key", 3, &key, len) != MHD_YES)
        return NULL;
    return key && *len > 0 ? key : NULL;
}

static enum MHD_Result md_handle_get(mc_http_metadata_server_t *s, struct MHD_Connection *conn,
                                     const char *key, size_t key_len)
{
    uint64_t hash = md_hash(key, key_len);
    char *copy = NULL;
    size_t len = 0;

    pthread_mutex_lock(&s->lock);
    md_entry_t **link = md_map_find(&s->map, key, key_len, hash);
    int found = link != NULL;
    if (found && (*link)->value_len > 0) {
        len = (*link)->value_len;
        copy = malloc(len);
        if (copy)
            memcpy(copy, (*link)->value, len);
    }
    pthread_mutex_unlock(&s->lock);

    if (!found)
        return md_respond_text(conn, MHD_HTTP_NOT_FOUND, "metadata not found");
    if (len > 0 && !copy)
        return md_respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");

    struct MHD_Response *r =
        len > 0 ? MHD_create_response_from_buffer(len, copy, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(copy);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result md_handle_delete(mc_http_metadata_server_t *s, struct MHD_Connection *conn,
                                        const char *key, size_t key_len)
{
    uint64_t hash = md_hash(key, key_len);
    md_entry_t *victim = NULL;

    pthread_mutex_lock(&s->lock);
    md_entry_t **link = md_map_find(&s->map, key, key_len, hash);
    if (link) {
        victim = *link;
        *link = victim->next;
        s->map.count--;
        s->held -= md_entry_cost(victim->key_len, victim->value_len);
    }
    pthread_mutex_unlock(&s->lock);

    if (!victim)
        return md_respond_text(conn, MHD_HTTP_NOT_FOUND, "metadata not found");
    free(victim->value);
    free(victim);
    return md_respond_text(conn, MHD_HTTP_OK, "metadata deleted");
}

/*
 * Stores the finished PUT body under key, taking ownership of req->body on success. A key naming
 * an rpc_meta endpoint may be rewritten only with the identical body: two processes claiming the
 * same segment name must not silently replace each other's handshake address (upstream's rule).
 * A new key beyond max_keys is refused (507); the body's charge moves from `receiving` to
 * `held`, the replaced value's bytes leave `held`.
 */
static enum MHD_Result md_handle_put_done(mc_http_metadata_server_t *s, struct MHD_Connection *conn,
                                          md_request_t *req, const char *key, size_t key_len)
{
    if (req->too_large)
        return md_refuse(s, conn, MHD_HTTP_CONTENT_TOO_LARGE, "value too large", req->len);
    if (req->no_room)
        return md_refuse(s, conn, MHD_HTTP_INSUFFICIENT_STORAGE,
                         "metadata store full: too many bytes", req->len);

    /* Give back the growth slack: stored values live as long as the server. */
    if (req->len > 0 && req->len < req->cap) {
        char *shrunk = realloc(req->body, req->len);
        if (shrunk) {
            req->body = shrunk;
            md_uncharge(s, req->cap - req->len);
            req->cap = req->len;
        }
    }
    char *body = req->len > 0 ? req->body : NULL;
    char *replaced = NULL;
    uint64_t hash = md_hash(key, key_len);
    int is_rpc_meta = memmem(key, key_len, MD_RPC_META_MARKER, strlen(MD_RPC_META_MARKER)) != NULL;
    int stored = 0, duplicate = 0, full = 0;

    pthread_mutex_lock(&s->lock);
    md_entry_t **link = md_map_find(&s->map, key, key_len, hash);
    /* The entry's own bytes come on top of the body already charged (held + receiving). */
    size_t extra = link ? 0 : md_entry_cost(key_len, 0);
    if (link) {
        md_entry_t *e = *link;
        int same = e->value_len == req->len && (req->len == 0 || !memcmp(e->value, body, req->len));
        if (is_rpc_meta && !same) {
            duplicate = 1;
        } else {
            replaced = e->value;
            s->held -= e->value_len;
            e->value = body;
            e->value_len = req->len;
            stored = 1;
        }
    } else if (s->map.count >= s->limits.max_keys) {
        full = 1;
    } else if (md_charge_locked(s, extra) != 0) {
        full = 2;
    } else {
        stored = md_map_insert(&s->map, key, key_len, hash, body, req->len) == 0;
        s->receiving -= extra;
        if (stored)
            s->held += extra;
    }
    if (stored) { /* the body is the map's now: its charge moves to `held` */
        s->receiving -= req->cap;
        s->held += req->len;
        req->cap = 0;
    }
    pthread_mutex_unlock(&s->lock);

    if (duplicate)
        return md_respond_text(conn, MHD_HTTP_BAD_REQUEST, "Duplicate rpc_meta key not allowed");
    if (full)
        return md_refuse(s, conn, MHD_HTTP_INSUFFICIENT_STORAGE,
                         full == 1 ? "metadata store full: too many keys"
                                   : "metadata store full: too many bytes",
                         req->len);
    if (!stored)
        return md_respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    if (!body)
        free(req->body); /* an empty value: the map holds NULL */
    req->body = NULL;    /* the map owns it now */
    req->len = 0;
    free(replaced);
    return md_respond_text(conn, MHD_HTTP_OK, "metadata updated");
}

/*
 * Appends one upload chunk, keeping at most max_value_bytes bytes, growth charged against
 * max_total_bytes. An overflow of either marks the request and drops what it held; the rest of
 * the body is drained.
 */
static void md_request_append(mc_http_metadata_server_t *s, md_request_t *req, const char *data,
                              size_t n)
{
    if (req->too_large || req->no_room)
        return;
    size_t max = s->limits.max_value_bytes;
    if (n > max - req->len) {
        size_t seen = req->len + n; /* for the log line: at least this much was sent */
        req->too_large = 1;
        md_request_drop_body(s, req);
        req->len = seen;
        return;
    }
    if (req->len + n > req->cap) {
        size_t cap = req->cap ? req->cap : MD_INITIAL_BODY_BYTES;
        while (cap < req->len + n)
            cap *= 2;
        if (cap > max)
            cap = max;
        if (md_charge(s, cap - req->cap) != 0) {
            req->no_room = 1;
            md_request_drop_body(s, req);
            return;
        }
        char *b = realloc(req->body, cap);
        if (!b) {
            /* Treated like an oversize body: refused, and the connection stays usable. */
            md_uncharge(s, cap - req->cap);
            req->too_large = 1;
            md_request_drop_body(s, req);
            return;
        }
        req->body = b;
        req->cap = cap;
    }
    memcpy(req->body + req->len, data, n);
    req->len += n;
}

static enum MHD_Result md_handle_health(struct MHD_Connection *conn, const char *method)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return md_respond_not_allowed(conn, "GET, HEAD");
    return md_respond_text(conn, MHD_HTTP_OK, "OK");
}

/* GET /metadata/auth_challenge: a fresh single-use nonce for one write. */
static enum MHD_Result md_handle_challenge(mc_http_metadata_server_t *s,
                                           struct MHD_Connection *conn, const char *method)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
        return md_respond_not_allowed(conn, "GET");
    if (!s->auth)
        return md_respond_text(conn, MHD_HTTP_NOT_FOUND, "this server has no cluster secret");
    uint8_t nonce[MC_AUTH_NONCE_LEN];
    if (mc_auth_random(nonce, sizeof(nonce)) != 0)
        return md_respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "no randomness");
    pthread_mutex_lock(&s->lock);
    md_nonce_t *slot = &s->nonces[s->next_nonce++ % MD_NONCES];
    memcpy(slot->nonce, nonce, sizeof(nonce));
    slot->issued_ms = mc_now_ms();
    pthread_mutex_unlock(&s->lock);
    char json[32 + 2 * MC_AUTH_NONCE_LEN], hex[2 * MC_AUTH_NONCE_LEN + 1];
    mc_auth_hex(nonce, sizeof(nonce), hex);
    snprintf(json, sizeof(json), "{\"nonce\":\"%s\"}", hex);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /metrics: the counters of mc_http_metadata_stats_t as Prometheus text. */
static enum MHD_Result md_handle_metrics(mc_http_metadata_server_t *s, struct MHD_Connection *conn)
{
    mc_http_metadata_stats_t st;
    mc_http_metadata_server_get_stats(s, &st);
    char *text = NULL;
    int n = asprintf(
        &text,
        "# HELP mooncake_http_metadata_keys Keys held.\n"
        "# TYPE mooncake_http_metadata_keys gauge\nmooncake_http_metadata_keys %llu\n"
        "# HELP mooncake_http_metadata_bytes Bytes held (keys, values, entries).\n"
        "# TYPE mooncake_http_metadata_bytes gauge\nmooncake_http_metadata_bytes %llu\n"
        "# HELP mooncake_http_metadata_receiving_bytes Bytes of PUT bodies being received.\n"
        "# TYPE mooncake_http_metadata_receiving_bytes gauge\n"
        "mooncake_http_metadata_receiving_bytes %llu\n"
        "# HELP mooncake_http_metadata_refused_too_large_total PUTs refused with 413.\n"
        "# TYPE mooncake_http_metadata_refused_too_large_total counter\n"
        "mooncake_http_metadata_refused_too_large_total %llu\n"
        "# HELP mooncake_http_metadata_refused_full_total PUTs refused with 507.\n"
        "# TYPE mooncake_http_metadata_refused_full_total counter\n"
        "mooncake_http_metadata_refused_full_total %llu\n"
        "# HELP mooncake_http_metadata_connections_active Open connections.\n"
        "# TYPE mooncake_http_metadata_connections_active gauge\n"
        "mooncake_http_metadata_connections_active %llu\n"
        "# HELP mooncake_http_metadata_connections_refused_total Connections refused over the "
        "limit.\n# TYPE mooncake_http_metadata_connections_refused_total counter\n"
        "mooncake_http_metadata_connections_refused_total %llu\n"
        "# HELP mooncake_http_metadata_requests_timed_out_total Connections closed for a request "
        "over the time bound.\n# TYPE mooncake_http_metadata_requests_timed_out_total counter\n"
        "mooncake_http_metadata_requests_timed_out_total %llu\n",
        (unsigned long long)st.keys, (unsigned long long)st.bytes,
        (unsigned long long)st.receiving_bytes, (unsigned long long)st.refused_too_large,
        (unsigned long long)st.refused_full, (unsigned long long)st.connections_active,
        (unsigned long long)st.connections_refused, (unsigned long long)st.requests_timed_out);
    if (n < 0)
        return md_respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    struct MHD_Response *r =
        MHD_create_response_from_buffer((size_t)n, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Takes the issued, unexpired nonce equal to `nonce` out of the table: 1 when it was there. */
static int md_nonce_take(mc_http_metadata_server_t *s, const uint8_t *nonce)
{
    uint64_t now = mc_now_ms();
    int found = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < MD_NONCES && !found; i++) {
        md_nonce_t *n = &s->nonces[i];
        if (n->issued_ms && now - n->issued_ms <= MD_NONCE_TTL_MS &&
            CRYPTO_memcmp(n->nonce, nonce, MC_AUTH_NONCE_LEN) == 0) {
            n->issued_ms = 0;
            found = 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

/* A write on a server with a secret: 1 when its X-Mooncake-Auth header proves it. */
static int md_write_proven(mc_http_metadata_server_t *s, struct MHD_Connection *conn,
                           const char *method, const char *key, size_t key_len,
                           const md_request_t *req)
{
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MC_AUTH_HTTP_HEADER);
    uint8_t nonce[MC_AUTH_NONCE_LEN], mac[MC_AUTH_MAC_LEN], expect[MC_AUTH_MAC_LEN];
    if (!h || strlen(h) != 2 * MC_AUTH_NONCE_LEN + 1 + 2 * MC_AUTH_MAC_LEN ||
        h[2 * MC_AUTH_NONCE_LEN] != '.' || mc_auth_unhex(h, MC_AUTH_NONCE_LEN, nonce) != 0 ||
        mc_auth_unhex(h + 2 * MC_AUTH_NONCE_LEN + 1, MC_AUTH_MAC_LEN, mac) != 0)
        return 0;
    /* The MAC first: a forged header must not burn a legitimate writer's nonce. */
    if (mc_auth_metadata_mac(s->auth, method, key, key_len, nonce, req->body, req->len, expect) !=
            0 ||
        !mc_auth_mac_equal(expect, mac))
        return 0;
    return md_nonce_take(s, nonce);
}

/* Answers a fully received request. */
static enum MHD_Result md_dispatch(mc_http_metadata_server_t *s, struct MHD_Connection *conn,
                                   const char *url, const char *method, md_request_t *req)
{
    if (strcmp(url, MD_HEALTH_PATH) == 0)
        return md_handle_health(conn, method);
    if (strcmp(url, MD_CHALLENGE_PATH) == 0)
        return md_handle_challenge(s, conn, method);
    if (strcmp(url, MD_METRICS_PATH) == 0 &&
        (!strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD)))
        return md_handle_metrics(s, conn);
    if (strcmp(url, MD_METADATA_PATH) != 0)
        return md_respond_text(conn, MHD_HTTP_NOT_FOUND, "Not found");

    int is_get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    int is_delete = !strcmp(method, MHD_HTTP_METHOD_DELETE);
    if (!is_get && !is_delete && !req->is_put)
        return md_respond_not_allowed(conn, "GET, HEAD, PUT, DELETE");

    size_t key_len;
    const char *key = md_request_key(conn, &key_len);
    if (!key)
        return md_respond_text(conn, MHD_HTTP_BAD_REQUEST, "Missing key parameter");
    if (key_len > MD_MAX_KEY_BYTES)
        return md_respond_text(conn, MHD_HTTP_BAD_REQUEST, "Key too long");

    if (is_get)
        return md_handle_get(s, conn, key, key_len);
    if (s->auth && !md_write_proven(s, conn, is_delete ? "DELETE" : "PUT", key, key_len, req)) {
        pthread_mutex_lock(&s->lock);
        s->auth_refused++;
        pthread_mutex_unlock(&s->lock);
        MC_WARN("HTTP metadata: refused a %s without a valid cluster-secret proof",
                is_delete ? "DELETE" : "PUT");
        return md_respond_text(conn, MHD_HTTP_UNAUTHORIZED,
                               "this metadata server requires the cluster secret for writes: set "
                               "the same MOONCAKE_CLUSTER_SECRET_FILE (or "
                               "MOONCAKE_CLUSTER_SECRET) on every process");
    }
    if (is_delete)
        return md_handle_delete(s, conn, key, key_len);
    return md_handle_put_done(s, conn, req, key, key_len);
}

/*
 * The header-only first call: refuses a declared oversize PUT body (413), or one the store has
 * no room for (507), before reading it; charges the room of an accepted one.
 */
static enum MHD_Result md_request_begin(mc_http_metadata_server_t *s, struct MHD_Connection *conn,
                                        const char *method, void **req_cls)
{
    int is_put = !strcmp(method, MHD_HTTP_METHOD_PUT);
    unsigned long long declared = 0;
    if (is_put) {
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        declared = cl ? strtoull(cl, NULL, 10) : 0;
        if (declared > s->limits.max_value_bytes)
            return md_refuse(s, conn, MHD_HTTP_CONTENT_TOO_LARGE, "value too large",
                             (size_t)declared);
        if (declared > 0 && md_charge(s, (size_t)declared) != 0)
            return md_refuse(s, conn, MHD_HTTP_INSUFFICIENT_STORAGE,
                             "metadata store full: too many bytes", (size_t)declared);
    }
    md_request_t *req = calloc(1, sizeof(*req));
    if (!req) {
        if (declared > 0)
            md_uncharge(s, (size_t)declared);
        return MHD_NO;
    }
    req->is_put = is_put;
    if (declared > 0) {
        req->body = malloc((size_t)declared);
        req->cap = req->body ? (size_t)declared : 0;
        if (!req->body)
            md_uncharge(s, (size_t)declared);
    }
    *req_cls = req;
    return MHD_YES;
}

/* MHD access handler: called once with the headers, then per body chunk, then once at the end. */
static enum MHD_Result md_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **req_cls)
{
    md_request_t *req = *req_cls;
    if (!req)
        return md_request_begin(cls, conn, method, req_cls);
    if (*upload_data_size > 0) {
        if (req->is_put)
            md_request_append(cls, req, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    return md_dispatch(cls, conn, url, method, req);
}

static void md_request_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                                 enum MHD_RequestTerminationCode toe)
{
    mc_http_metadata_server_t *s = cls;
    mc_http_guard_completed(&s->guard, conn, req_cls, toe);
    md_request_t *req = *req_cls;
    if (!req)
        return;
    md_request_drop_body(cls, req);
    free(req);
    *req_cls = NULL;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static int md_is_wildcard(const char *host)
{
    return !host || !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "*");
}

/* Resolves host:port to one bind address, preferring IPv4 ("localhost" binds 127.0.0.1). */
static int md_resolve(const char *host, int port, struct sockaddr_storage *addr)
{
    struct addrinfo hints;
    struct addrinfo *res = NULL;
    char portstr[16];

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%d", port);
    int rc = getaddrinfo(md_is_wildcard(host) ? "0.0.0.0" : host, portstr, &hints, &res);
    if (rc != 0 || !res) {
        MC_ERROR("HTTP metadata server: cannot resolve host '%s': %s", host,
                 rc ? gai_strerror(rc) : "no address");
        return MC_ERR_INVALID_PARAMS;
    }
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    }
    memcpy(addr, pick->ai_addr, pick->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* Fills the 0 fields of `in` (may be NULL) with the defaults. */
static void md_limits_resolve(const mc_http_metadata_limits_t *in, mc_http_metadata_limits_t *out)
{
    mc_http_metadata_limits_t zero = {0};
    if (!in)
        in = &zero;
    out->max_value_bytes = in->max_value_bytes ? in->max_value_bytes : MC_HTTP_METADATA_MAX_VALUE;
    out->max_keys = in->max_keys ? in->max_keys : MC_HTTP_METADATA_DEFAULT_MAX_KEYS;
    out->max_total_bytes =
        in->max_total_bytes ? in->max_total_bytes : MC_HTTP_METADATA_DEFAULT_MAX_TOTAL;
    out->max_connections =
        in->max_connections ? in->max_connections : MC_HTTP_METADATA_DEFAULT_MAX_CONNECTIONS;
    out->connection_timeout_s =
        in->connection_timeout_s ? in->connection_timeout_s : MC_HTTP_METADATA_DEFAULT_TIMEOUT_S;
}

int mc_http_metadata_server_start(const char *host, int port, mc_http_metadata_server_t **out)
{
    return mc_http_metadata_server_start_opts(host, port, NULL, out);
}

int mc_http_metadata_server_start_limited(const char *host, int port,
                                          const mc_http_metadata_limits_t *limits,
                                          mc_http_metadata_server_t **out)
{
    mc_http_metadata_server_options_t o = {.limits = limits};
    return mc_http_metadata_server_start_opts(host, port, &o, out);
}

int mc_http_metadata_server_start_opts(const char *host, int port,
                                       const mc_http_metadata_server_options_t *opts,
                                       mc_http_metadata_server_t **out)
{
    const mc_http_metadata_limits_t *limits = opts ? opts->limits : NULL;
    struct sockaddr_storage addr;

    if (!out || port < 0 || port > 65535)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    int rc = md_resolve(host, port, &addr);
    if (rc != 0)
        return rc;

    mc_http_metadata_server_t *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    rc = mc_auth_resolve(opts ? opts->cluster_secret : NULL,
                         opts ? opts->cluster_secret_file : NULL, &s->auth);
    if (rc != 0 || md_map_init(&s->map) != 0) {
        mc_auth_destroy(s->auth);
        free(s);
        return rc ? rc : MC_ERR_INTERNAL_ERROR;
    }
    pthread_mutex_init(&s->lock, NULL);
    md_limits_resolve(limits, &s->limits);
    /* The idle timeout is also each request's absolute bound (http_guard.h: slow trickles). */
    if (mc_http_guard_init(&s->guard, "HTTP metadata server", s->limits.max_connections,
                           (uint64_t)s->limits.connection_timeout_s * 1000u) != 0) {
        md_map_free(&s->map);
        pthread_mutex_destroy(&s->lock);
        mc_auth_destroy(s->auth);
        free(s);
        return MC_ERR_INTERNAL_ERROR;
    }

    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6)
        flags |= !strcmp(host, "::") ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    /* The logger goes first so that option errors, too, reach our log. */
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)port, mc_http_guard_accept, &s->guard, md_handle, s,
        MHD_OPTION_EXTERNAL_LOGGER, mc_http_mhd_log, (void *)"HTTP metadata", MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, md_request_completed, s,
        MHD_OPTION_CONNECTION_TIMEOUT, s->limits.connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MD_CONNECTION_MEMORY_LIMIT,
        MHD_OPTION_CONNECTION_LIMIT, MC_HTTP_GUARD_HARD_LIMIT(s->limits.max_connections),
        MHD_OPTION_NOTIFY_CONNECTION, mc_http_guard_notify, &s->guard, MHD_OPTION_END);
    if (!s->daemon) {
        MC_ERROR("HTTP metadata server: cannot listen on %s:%d", host ? host : "", port);
        mc_http_guard_destroy(&s->guard);
        md_map_free(&s->map);
        pthread_mutex_destroy(&s->lock);
        mc_auth_destroy(s->auth);
        free(s);
        return MC_ERR_INTERNAL_ERROR;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? (int)info->port : port;
    mc_auth_warn_open_listener(s->auth, "the HTTP metadata server",
                               md_is_wildcard(host) ? "" : host, s->port);
    *out = s;
    return 0;
}

int mc_http_metadata_server_port(const mc_http_metadata_server_t *server)
{
    return server->port;
}

size_t mc_http_metadata_server_size(mc_http_metadata_server_t *server)
{
    pthread_mutex_lock(&server->lock);
    size_t n = server->map.count;
    pthread_mutex_unlock(&server->lock);
    return n;
}

void mc_http_metadata_server_get_stats(mc_http_metadata_server_t *server,
                                       mc_http_metadata_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!server)
        return;
    pthread_mutex_lock(&server->lock);
    out->keys = server->map.count;
    out->bytes = server->held;
    out->receiving_bytes = server->receiving;
    out->refused_too_large = server->refused_too_large;
    out->refused_full = server->refused_full;
    pthread_mutex_unlock(&server->lock);
    out->connections_active = mc_http_guard_active(&server->guard);
    out->connections_refused = mc_http_guard_refused(&server->guard);
    out->requests_timed_out = mc_http_guard_timed_out(&server->guard);
    out->limits = server->limits;
}

void mc_http_metadata_server_stop(mc_http_metadata_server_t *server)
{
    if (!server)
        return;
    MHD_stop_daemon(server->daemon);
    mc_http_guard_destroy(&server->guard);
    md_map_free(&server->map);
    pthread_mutex_destroy(&server->lock);
    mc_auth_destroy(server->auth);
    free(server);
}
