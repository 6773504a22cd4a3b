/*
 * etcd.c — the etcd v3 client of etcd.h: every call is one HTTP POST of a JSON body to etcd's
 * gRPC gateway (/v3/kv/..., /v3/lease/...) with libcurl, answered by one JSON object (jansson).
 * Keys and values travel in standard base64 (base64.h); int64 fields
 * come back as JSON strings, and fields equal to their zero value are left out (proto3 JSON), so
 * an absent field reads as 0.
 *
 * What etcd 3.4's gateway answers (checked by hand against etcd 3.4.23):
 *   - success: HTTP 200 and {"header":{...,"revision":"N"}, ...};
 *   - an error: HTTP 4xx/5xx and {"error":"...","message":"...","code":N} (gRPC code; Unavailable
 *     and DeadlineExceeded, e.g. no leader or a lost quorum, are 503/504);
 *   - /v3/lease/keepalive is a stream: one request body gives one line
 * {"result":{"ID":..,"TTL":..}} and the answer ends with the body; an expired, revoked or unknown
 * lease answers HTTP 200 with "TTL" absent (= 0), while /v3/lease/revoke of an unknown lease is 404
 * "requested lease not found". Stream errors come as {"error":{"grpc_code":..,"message":..}}.
 *
 * Failover: endpoints are tried from the one that answered last (e->current), each once, with
 * the handle's timeout per attempt; a refused connection, a timeout and a 5xx move on to the next
 * one. A 4xx is etcd's verdict on the request and is returned at once.
 *
 * Threads: the handle's endpoint list is immutable after create; e->current is atomic; curl easy
 * handles are kept in a small pool under a mutex so that calls reuse connections, and a handle is
 * used by one call at a time. CURLOPT_NOSIGNAL: no SIGALRM from name resolution.
 *
 * Bounds: an answer is read up to ETCD_MAX_ANSWER bytes (a range without a limit over many big
 * values is the only big answer); a transaction has at most ETCD_MAX_TXN_OPS compares and as many
 * ops per branch (etcd's --max-txn-ops default); at most ETCD_MAX_ENDPOINTS endpoints.
 */
#include "etcd.h"

#include "base64.h"
#include "curl_body.h"
#include "log.h"
#include "mooncake/errors.h"

#include <curl/curl.h>
#include <jansson.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETCD_DEFAULT_TIMEOUT_MS 2000
#define ETCD_MAX_ENDPOINTS 32
#define ETCD_MAX_ENDPOINTS_LEN 8192
#define ETCD_MAX_HOST 253
#define ETCD_MAX_TXN_OPS 128
#define ETCD_MAX_ANSWER ((size_t)64 << 20) /* bytes of one answer */
#define ETCD_POOL_MAX 8                    /* idle curl handles kept */
#define ETCD_LOG_MSG_MAX 300               /* bytes of etcd's message quoted in a log line */

typedef struct etcd_endpoint {
    char url[ETCD_MAX_HOST + 32];  /* "http://host:port" */
    char name[ETCD_MAX_HOST + 16]; /* "host:port" */
} etcd_endpoint_t;

struct mc_etcd {
    etcd_endpoint_t *eps;
    size_t n;
    long timeout_ms;
    atomic_size_t current; /* index of the endpoint that answered last */
    pthread_mutex_t pool_mu;
    CURL *pool[ETCD_POOL_MAX];
    size_t npool;
};

static pthread_once_t etcd_curl_once = PTHREAD_ONCE_INIT;
static CURLcode etcd_curl_init_rc = CURLE_FAILED_INIT;

static void etcd_curl_global_init(void)
{
    etcd_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- endpoints ---- */

static int etcd_host_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_' || c == ':' || c == '[' ||
           c == ']';
}

/* One endpoint "host:port" or "http://host:port" (s[0..len)), into ep; 0 or INVALID_PARAMS. */
static int etcd_parse_endpoint(const char *s, size_t len, etcd_endpoint_t *ep)
{
    while (len > 0 && isspace((unsigned char)*s)) {
        s++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        len--;
    if (len >= 7 && strncmp(s, "http://", 7) == 0) {
        s += 7;
        len -= 7;
    }
    while (len > 0 && s[len - 1] == '/')
        len--;
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++) {
        if (!etcd_host_char_ok(s[i]))
            return MC_ERR_INVALID_PARAMS;
        if (s[i] == ':')
            colon = s + i;
    }
    if (!colon || colon == s || (size_t)(colon - s) > ETCD_MAX_HOST)
        return MC_ERR_INVALID_PARAMS;
    size_t hostlen = (size_t)(colon - s);
    size_t portlen = len - hostlen - 1;
    if (portlen == 0 || portlen > 5)
        return MC_ERR_INVALID_PARAMS;
    long port = 0;
    for (size_t i = 0; i < portlen; i++) {
        if (!isdigit((unsigned char)colon[1 + i]))
            return MC_ERR_INVALID_PARAMS;
        port = port * 10 + (colon[1 + i] - '0');
    }
    if (port < 1 || port > 65535)
        return MC_ERR_INVALID_PARAMS;
    snprintf(ep->name, sizeof(ep->name), "%.*s:%ld", (int)hostlen, s, port);
    snprintf(ep->url, sizeof(ep->url), "http://%s", ep->name);
    return 0;
}

static int etcd_parse_endpoints(const char *list, etcd_endpoint_t **out, size_t *n)
{
    size_t total = strnlen(list, ETCD_MAX_ENDPOINTS_LEN + 1);
    if (total > ETCD_MAX_ENDPOINTS_LEN)
        return MC_ERR_INVALID_PARAMS;
    if (strncmp(list, "etcd://", 7) == 0)
        list += 7;
    etcd_endpoint_t *eps = calloc(ETCD_MAX_ENDPOINTS, sizeof(*eps));
    if (!eps)
        return MC_ERR_INTERNAL_ERROR;
    size_t count = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ";,");
        if (count == ETCD_MAX_ENDPOINTS || etcd_parse_endpoint(p, len, &eps[count]) != 0) {
            free(eps);
            return MC_ERR_INVALID_PARAMS;
        }
        count++;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *out = eps;
    *n = count;
    return 0;
}

int mc_etcd_create(const char *endpoints, int timeout_ms, mc_etcd_t **out)
{
    if (!endpoints || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    pthread_once(&etcd_curl_once, etcd_curl_global_init);
    if (etcd_curl_init_rc != CURLE_OK) {
        MC_ERROR("etcd: curl_global_init failed: %s", curl_easy_strerror(etcd_curl_init_rc));
        return MC_ERR_INTERNAL_ERROR;
    }
    mc_etcd_t *e = calloc(1, sizeof(*e));
    if (!e)
        return MC_ERR_INTERNAL_ERROR;
    int rc = etcd_parse_endpoints(endpoints, &e->eps, &e->n);
    if (rc != 0) {
        MC_ERROR("etcd: bad endpoint list '%.200s' (want host:port[;host:port...])", endpoints);
        free(e);
        return rc;
    }
    e->timeout_ms = timeout_ms > 0 ? timeout_ms : ETCD_DEFAULT_TIMEOUT_MS;
    atomic_init(&e->current, 0);
    pthread_mutex_init(&e->pool_mu, NULL);
    *out = e;
    return 0;
}

void mc_etcd_destroy(mc_etcd_t *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->npool; i++)
        curl_easy_cleanup(e->pool[i]);
    pthread_mutex_destroy(&e->pool_mu);
    free(e->eps);
    free(e);
}

const char *mc_etcd_current_endpoint(mc_etcd_t *e)
{
    if (!e)
        return "";
    return e->eps[atomic_load(&e->current) % e->n].name;
}

void mc_etcd_kv_free(mc_etcd_kv_t *kvs, size_t n, int free_array)
{
    if (!kvs)
        return;
    for (size_t i = 0; i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].value);
        kvs[i].key = NULL;
        kvs[i].value = NULL;
    }
    if (free_array)
        free(kvs);
}

/* ---- base64 and JSON helpers ---- */

/* base64 of data[0..len) as a JSON string; NULL on memory. */
static json_t *etcd_b64(const void *data, size_t len)
{
    size_t n;
    char *text = mc_base64_encode(data, len, &n);
    if (!text)
        return NULL;
    json_t *s = json_stringn(text, n);
    free(text);
    return s;
}

/* Decodes the base64 string s into a malloc'd buffer of *len bytes plus a NUL; NULL on a bad
 * string or memory. An absent (NULL) s decodes to "". */
static uint8_t *etcd_unb64(const json_t *s, size_t *len)
{
    const char *in = s ? json_string_value(s) : "";
    if (!in)
        return NULL;
    uint8_t *out;
    return mc_base64_decode(in, s ? json_string_length(s) : 0, &out, len) == 0 ? out : NULL;
}

/* An int64 field that etcd writes as a string (or, leniently, a number); 0 when absent. */
static int64_t etcd_i64(const json_t *obj, const char *field)
{
    const json_t *v = json_object_get(obj, field);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_string(v))
        return (int64_t)strtoll(json_string_value(v), NULL, 10);
    return 0;
}

static json_t *etcd_i64_json(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return json_string(buf);
}

/* A key must be 1..MC_ETCD_MAX_KEY bytes: INVALID_PARAMS otherwise (NULL too). */
static int etcd_check_key(const char *key)
{
    if (!key || key[0] == '\0' || strnlen(key, MC_ETCD_MAX_KEY + 1) > MC_ETCD_MAX_KEY)
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

static int etcd_check_value(const void *value, size_t len)
{
    if ((!value && len) || len > MC_ETCD_MAX_VALUE)
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

/* The end of the range of every key with `prefix` (etcd's clientv3.GetPrefixRangeEnd): the prefix
 * with its last byte below 0xff incremented and the rest dropped; "\0" (every key) when there is
 * none. Writes the bytes to out (cap MC_ETCD_MAX_KEY + 1) and returns their count. */
static size_t etcd_prefix_end(const char *prefix, char *out)
{
    size_t len = strlen(prefix);
    memcpy(out, prefix, len);
    while (len > 0) {
        if ((unsigned char)out[len - 1] < 0xff) {
            out[len - 1] = (char)((unsigned char)out[len - 1] + 1);
            return len;
        }
        len--;
    }
    out[0] = '\0';
    return 1;
}

/* Fills kv from one etcd KeyValue object; 0, MC_ERR_ETCD_OPERATION_ERROR on bad base64, or
 * MC_ERR_INTERNAL_ERROR. */
static int etcd_kv_from_json(const json_t *o, mc_etcd_kv_t *kv)
{
    memset(kv, 0, sizeof(*kv));
    size_t klen = 0;
    kv->key = (char *)etcd_unb64(json_object_get(o, "key"), &klen);
    kv->value = etcd_unb64(json_object_get(o, "value"), &kv->value_len);
    if (!kv->key || !kv->value) {
        mc_etcd_kv_free(kv, 1, 0);
        return MC_ERR_ETCD_OPERATION_ERROR;
    }
    kv->create_revision = etcd_i64(o, "create_revision");
    kv->mod_revision = etcd_i64(o, "mod_revision");
    kv->version = etcd_i64(o, "version");
    kv->lease = etcd_i64(o, "lease");
    return 0;
}

/* Appends the "kvs" of a range answer to (*kvs, *n); 0 or an error (the array stays valid). */
static int etcd_append_kvs(const json_t *range, mc_etcd_kv_t **kvs, size_t *n)
{
    const json_t *arr = json_object_get(range, "kvs");
    size_t add = json_array_size(arr);
    if (add == 0)
        return 0;
    mc_etcd_kv_t *grown = realloc(*kvs, (*n + add) * sizeof(**kvs));
    if (!grown)
        return MC_ERR_INTERNAL_ERROR;
    *kvs = grown;
    for (size_t i = 0; i < add; i++) {
        int rc = etcd_kv_from_json(json_array_get(arr, i), &grown[*n]);
        if (rc != 0)
            return rc;
        (*n)++;
    }
    return 0;
}

/* ---- HTTP ---- */

static CURL *etcd_handle_get(mc_etcd_t *e)
{
    CURL *c = NULL;
    pthread_mutex_lock(&e->pool_mu);
    if (e->npool > 0)
        c = e->pool[--e->npool];
    pthread_mutex_unlock(&e->pool_mu);
    if (c) {
        curl_easy_reset(c); /* keeps its live connections */
        return c;
    }
    return curl_easy_init();
}

static void etcd_handle_put(mc_etcd_t *e, CURL *c)
{
    pthread_mutex_lock(&e->pool_mu);
    if (e->npool < ETCD_POOL_MAX) {
        e->pool[e->npool++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&e->pool_mu);
    if (c)
        curl_easy_cleanup(c);
}

/* etcd's error message in an answer: "message"/"error" as a string, or a stream's
 * {"error":{"message":..}}; NULL when the answer carries none. */
static const char *etcd_answer_error(const json_t *ans)
{
    const json_t *err = json_object_get(ans, "error");
    if (json_is_object(err))
        err = json_object_get(err, "message");
    const json_t *msg = json_object_get(ans, "message");
    if (json_is_string(msg))
        return json_string_value(msg);
    if (json_is_string(err))
        return json_string_value(err);
    if (err)
        return "(error without a message)";
    return NULL;
}

/* One attempt's outcome: DONE (an answer to return, *ans set or rc an error), or NEXT (try the
 * next endpoint: no connection, a timeout, a 5xx, an unreadable answer). */
enum { ETCD_ATTEMPT_DONE = 0, ETCD_ATTEMPT_NEXT = 1 };

static int etcd_attempt(mc_etcd_t *e, size_t idx, const char *path, const char *body,
                        size_t body_len, json_t **ans, int *rc, long *status_out, char *why,
                        size_t why_cap)
{
    const etcd_endpoint_t *ep = &e->eps[idx];
    CURL *c = etcd_handle_get(e);
    if (!c) {
        *rc = MC_ERR_INTERNAL_ERROR;
        return ETCD_ATTEMPT_DONE;
    }
    char url[sizeof(ep->url) + 64];
    snprintf(url, sizeof(url), "%s%s", ep->url, path);
    char errbuf[CURL_ERROR_SIZE] = "";
    mc_curl_body_t b = {.max = ETCD_MAX_ANSWER};
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = hdrs ? curl_slist_append(hdrs, "Expect:") : NULL;
    if (!h2) {
        curl_slist_free_all(hdrs);
        etcd_handle_put(e, c);
        *rc = MC_ERR_INTERNAL_ERROR;
        return ETCD_ATTEMPT_DONE;
    }
    hdrs = h2;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* etcd is reached directly, never via *_proxy */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, e->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mc_curl_body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    etcd_handle_put(e, c);
    *status_out = status;

    int verdict = ETCD_ATTEMPT_NEXT;
    if (b.overflow) {
        snprintf(why, why_cap, "answer larger than %zu bytes", ETCD_MAX_ANSWER);
        *rc = MC_ERR_ETCD_OPERATION_ERROR;
        verdict = ETCD_ATTEMPT_DONE;
    } else if (cc != CURLE_OK) {
        snprintf(why, why_cap, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
    } else {
        json_error_t jerr;
        json_t *j = b.data ? json_loadb(b.data, b.len, 0, &jerr) : NULL;
        const char *msg = j ? etcd_answer_error(j) : NULL;
        if (!json_is_object(j)) {
            snprintf(why, why_cap, "HTTP %ld, unreadable answer", status);
        } else if (status >= 500) {
            snprintf(why, why_cap, "HTTP %ld: %.*s", status, ETCD_LOG_MSG_MAX, msg ? msg : "");
        } else if (status != 200 || msg) {
            snprintf(why, why_cap, "HTTP %ld: %.*s", status, ETCD_LOG_MSG_MAX,
                     msg ? msg : "(no message)");
            *rc = MC_ERR_ETCD_OPERATION_ERROR;
            verdict = ETCD_ATTEMPT_DONE;
        } else {
            *ans = j;
            j = NULL;
            *rc = 0;
            verdict = ETCD_ATTEMPT_DONE;
        }
        json_decref(j);
    }
    free(b.data);
    return verdict;
}

/*
 * POSTs req (consumed) to path on the endpoints in failover order; *ans = the answer object
 * (caller decrefs) on 0. MC_ERR_ETCD_OPERATION_ERROR when no endpoint answered or etcd refused;
 * *http_status (may be NULL) = the status of the last answer (0: none).
 */
static int etcd_call_status(mc_etcd_t *e, const char *path, json_t *req, json_t **ans,
                            long *http_status)
{
    long status = 0;
    if (http_status)
        *http_status = 0;
    *ans = NULL;
    if (!req)
        return MC_ERR_INTERNAL_ERROR;
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body)
        return MC_ERR_INTERNAL_ERROR;
    size_t body_len = strlen(body);
    size_t start = atomic_load(&e->current) % e->n;
    char why[ETCD_LOG_MSG_MAX + 64] = "";
    int rc = MC_ERR_ETCD_OPERATION_ERROR;
    for (size_t k = 0; k < e->n; k++) {
        size_t idx = (start + k) % e->n;
        why[0] = '\0';
        int v = etcd_attempt(e, idx, path, body, body_len, ans, &rc, &status, why, sizeof(why));
        if (http_status)
            *http_status = status;
        if (v == ETCD_ATTEMPT_DONE) {
            if (rc == 0) {
                if (idx != start)
                    atomic_store(&e->current, idx);
            } else if (why[0] && !(http_status && status == 404)) {
                MC_WARN("etcd %s %s: %s", e->eps[idx].name, path, why);
            }
            free(body);
            return rc;
        }
        MC_WARN("etcd %s %s: %s%s", e->eps[idx].name, path, why,
                k + 1 < e->n ? "; trying the next endpoint" : "");
    }
    free(body);
    MC_ERROR("etcd %s: no endpoint of %zu answered", path, e->n);
    return MC_ERR_ETCD_OPERATION_ERROR;
}

static int etcd_call(mc_etcd_t *e, const char *path, json_t *req, json_t **ans)
{
    return etcd_call_status(e, path, req, ans, NULL);
}

/* ---- kv ---- */

int mc_etcd_get(mc_etcd_t *e, const char *key, mc_etcd_kv_t *out, int64_t *revision)
{
    if (!e || !out || etcd_check_key(key) != 0)
        return MC_ERR_INVALID_PARAMS;
    memset(out, 0, sizeof(*out));
    json_t *req = json_object();
    if (req)
        json_object_set_new(req, "key", etcd_b64(key, strlen(key)));
    json_t *ans;
    int rc = etcd_call(e, "/v3/kv/range", req, &ans);
    if (rc != 0)
        return rc;
    if (revision)
        *revision = etcd_i64(json_object_get(ans, "header"), "revision");
    const json_t *arr = json_object_get(ans, "kvs");
    if (json_array_size(arr) == 0)
        rc = MC_ERR_ETCD_KEY_NOT_EXIST;
    else
        rc = etcd_kv_from_json(json_array_get(arr, 0), out);
    json_decref(ans);
    return rc;
}

int mc_etcd_range(mc_etcd_t *e, const char *from, const char *to, size_t limit, mc_etcd_kv_t **kvs,
                  size_t *n, int *more, int64_t *revision)
{
    if (!e || !from || !kvs || !n || strlen(from) > MC_ETCD_MAX_KEY ||
        (to && strlen(to) > MC_ETCD_MAX_KEY))
        return MC_ERR_INVALID_PARAMS;
    *kvs = NULL;
    *n = 0;
    if (more)
        *more = 0;
    char end[MC_ETCD_MAX_KEY + 1];
    json_t *req = json_object();
    if (!req)
        return MC_ERR_INTERNAL_ERROR;
    if (from[0] == '\0') {
        /* from the first key: key "\0" (etcd refuses an empty key); to NULL: every key */
        json_object_set_new(req, "key", etcd_b64("", 1));
        if (to)
            json_object_set_new(req, "range_end", etcd_b64(to, strlen(to)));
        else
            json_object_set_new(req, "range_end", etcd_b64("", 1));
    } else {
        json_object_set_new(req, "key", etcd_b64(from, strlen(from)));
        if (to)
            json_object_set_new(req, "range_end", etcd_b64(to, strlen(to)));
        else
            json_object_set_new(req, "range_end", etcd_b64(end, etcd_prefix_end(from, end)));
    }
    if (limit > 0)
        json_object_set_new(req, "limit", etcd_i64_json((int64_t)limit));
    json_t *ans;
    int rc = etcd_call(e, "/v3/kv/range", req, &ans);
    if (rc != 0)
        return rc;
    if (revision)
        *revision = etcd_i64(json_object_get(ans, "header"), "revision");
    if (more)
        *more = json_is_true(json_object_get(ans, "more"));
    rc = etcd_append_kvs(ans, kvs, n);
    json_decref(ans);
    if (rc != 0) {
        mc_etcd_kv_free(*kvs, *n, 1);
        *kvs = NULL;
        *n = 0;
    }
    return rc;
}

int mc_etcd_put(mc_etcd_t *e, const char *key, const void *value, size_t len, int64_t lease,
                int64_t *revision)
{
    if (!e || etcd_check_key(key) != 0 || etcd_check_value(value, len) != 0 || lease < 0)
        return MC_ERR_INVALID_PARAMS;
    json_t *req = json_object();
    if (req) {
        json_object_set_new(req, "key", etcd_b64(key, strlen(key)));
        json_object_set_new(req, "value", etcd_b64(value ? value : "", len));
        if (lease)
            json_object_set_new(req, "lease", etcd_i64_json(lease));
    }
    json_t *ans;
    int rc = etcd_call(e, "/v3/kv/put", req, &ans);
    if (rc != 0)
        return rc;
    if (revision)
        *revision = etcd_i64(json_object_get(ans, "header"), "revision");
    json_decref(ans);
    return 0;
}

static int etcd_deleterange(mc_etcd_t *e, const char *key, const void *end, size_t end_len,
                            int64_t *deleted)
{
    json_t *req = json_object();
    if (req) {
        json_object_set_new(req, "key", etcd_b64(key, strlen(key)));
        if (end)
            json_object_set_new(req, "range_end", etcd_b64(end, end_len));
    }
    json_t *ans;
    int rc = etcd_call(e, "/v3/kv/deleterange", req, &ans);
    if (rc != 0)
        return rc;
    if (deleted)
        *deleted = etcd_i64(ans, "deleted");
    json_decref(ans);
    return 0;
}

int mc_etcd_delete(mc_etcd_t *e, const char *key, const char *to, int64_t *deleted)
{
    if (!e || etcd_check_key(key) != 0 || (to && etcd_check_key(to) != 0))
        return MC_ERR_INVALID_PARAMS;
    return etcd_deleterange(e, key, to, to ? strlen(to) : 0, deleted);
}

/* An empty prefix (every key in etcd) is refused: INVALID_PARAMS. */
int mc_etcd_delete_prefix(mc_etcd_t *e, const char *prefix, int64_t *deleted)
{
    if (!e || etcd_check_key(prefix) != 0)
        return MC_ERR_INVALID_PARAMS;
    char end[MC_ETCD_MAX_KEY + 1];
    size_t end_len = etcd_prefix_end(prefix, end);
    return etcd_deleterange(e, prefix, end, end_len, deleted);
}

/* ---- leases ---- */

int mc_etcd_lease_grant(mc_etcd_t *e, int64_t ttl_s, int64_t *lease_id, int64_t *granted_ttl_s)
{
    if (!e || !lease_id || ttl_s <= 0)
        return MC_ERR_INVALID_PARAMS;
    json_t *req = json_object();
    if (req)
        json_object_set_new(req, "TTL", etcd_i64_json(ttl_s));
    json_t *ans;
    int rc = etcd_call(e, "/v3/lease/grant", req, &ans);
    if (rc != 0)
        return rc;
    *lease_id = etcd_i64(ans, "ID");
    if (granted_ttl_s)
        *granted_ttl_s = etcd_i64(ans, "TTL");
    json_decref(ans);
    if (*lease_id == 0) {
        MC_ERROR("etcd lease grant: the answer has no lease ID");
        return MC_ERR_ETCD_OPERATION_ERROR;
    }
    return 0;
}

int mc_etcd_lease_keepalive(mc_etcd_t *e, int64_t lease_id, int64_t *ttl_left_s)
{
    if (!e || !ttl_left_s || lease_id == 0)
        return MC_ERR_INVALID_PARAMS;
    json_t *req = json_object();
    if (req)
        json_object_set_new(req, "ID", etcd_i64_json(lease_id));
    json_t *ans;
    int rc = etcd_call(e, "/v3/lease/keepalive", req, &ans);
    if (rc != 0)
        return rc;
    /* One stream message {"result":{...}}; TTL absent when the lease no longer exists. */
    const json_t *res = json_object_get(ans, "result");
    if (!json_is_object(res)) {
        json_decref(ans);
        MC_ERROR("etcd lease keepalive: the answer has no result");
        return MC_ERR_ETCD_OPERATION_ERROR;
    }
    int64_t ttl = etcd_i64(res, "TTL");
    *ttl_left_s = ttl > 0 ? ttl : 0;
    json_decref(ans);
    return 0;
}

/* A lease etcd no longer knows (expired, or revoked before) is not an error: its keys are gone.
 * etcd answers that revoke 404 "requested lease not found". */
int mc_etcd_lease_revoke(mc_etcd_t *e, int64_t lease_id)
{
    if (!e || lease_id == 0)
        return MC_ERR_INVALID_PARAMS;
    json_t *req = json_object();
    if (req)
        json_object_set_new(req, "ID", etcd_i64_json(lease_id));
    json_t *ans;
    long status = 0;
    int rc = etcd_call_status(e, "/v3/lease/revoke", req, &ans, &status);
    if (rc != 0)
        return status == 404 ? 0 : rc;
    json_decref(ans);
    return 0;
}

/* ---- transactions ---- */

static const char *const etcd_cmp_target_names[] = {"CREATE", "MOD", "VERSION", "VALUE"};
static const char *const etcd_cmp_target_fields[] = {"create_revision", "mod_revision", "version",
                                                     "value"};
static const char *const etcd_cmp_result_names[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};

static json_t *etcd_cmp_json(const mc_etcd_cmp_t *c)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "key", etcd_b64(c->key, strlen(c->key)));
    json_object_set_new(o, "target", json_string(etcd_cmp_target_names[c->target]));
    json_object_set_new(o, "result", json_string(etcd_cmp_result_names[c->result]));
    if (c->target == MC_ETCD_CMP_VALUE)
        json_object_set_new(o, "value", etcd_b64(c->value ? c->value : "", c->value_len));
    else
        json_object_set_new(o, etcd_cmp_target_fields[c->target], etcd_i64_json(c->number));
    return o;
}

static json_t *etcd_op_json(const mc_etcd_op_t *op)
{
    json_t *inner = json_object();
    json_t *o = json_object();
    if (!inner || !o) {
        json_decref(inner);
        json_decref(o);
        return NULL;
    }
    json_object_set_new(inner, "key", etcd_b64(op->key, strlen(op->key)));
    const char *name = "request_range";
    if (op->kind == MC_ETCD_OP_PUT) {
        name = "request_put";
        json_object_set_new(inner, "value", etcd_b64(op->value ? op->value : "", op->value_len));
        if (op->lease)
            json_object_set_new(inner, "lease", etcd_i64_json(op->lease));
    } else if (op->kind == MC_ETCD_OP_DELETE) {
        name = "request_delete_range";
        if (op->to)
            json_object_set_new(inner, "range_end", etcd_b64(op->to, strlen(op->to)));
    }
    json_object_set_new(o, name, inner);
    return o;
}

static int etcd_check_ops(const mc_etcd_op_t *ops, size_t n)
{
    if (n > ETCD_MAX_TXN_OPS || (n && !ops))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        const mc_etcd_op_t *op = &ops[i];
        if ((unsigned)op->kind > MC_ETCD_OP_GET || etcd_check_key(op->key) != 0 || op->lease < 0)
            return MC_ERR_INVALID_PARAMS;
        if (op->kind == MC_ETCD_OP_PUT && etcd_check_value(op->value, op->value_len) != 0)
            return MC_ERR_INVALID_PARAMS;
        if (op->kind == MC_ETCD_OP_DELETE && op->to && etcd_check_key(op->to) != 0)
            return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

static int etcd_check_cmps(const mc_etcd_cmp_t *cmps, size_t n)
{
    if (n > ETCD_MAX_TXN_OPS || (n && !cmps))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        const mc_etcd_cmp_t *c = &cmps[i];
        if ((unsigned)c->target > MC_ETCD_CMP_VALUE || (unsigned)c->result > MC_ETCD_NOT_EQUAL ||
            etcd_check_key(c->key) != 0)
            return MC_ERR_INVALID_PARAMS;
        if (c->target == MC_ETCD_CMP_VALUE && etcd_check_value(c->value, c->value_len) != 0)
            return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

static json_t *etcd_ops_json(const mc_etcd_op_t *ops, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        if (json_array_append_new(arr, etcd_op_json(&ops[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int mc_etcd_txn(mc_etcd_t *e, const mc_etcd_cmp_t *cmps, size_t ncmp, const mc_etcd_op_t *then,
                size_t nthen, const mc_etcd_op_t *els, size_t nels, int *succeeded,
                mc_etcd_kv_t **kvs, size_t *nkvs, int64_t *revision)
{
    if (!e || !succeeded || (kvs && !nkvs) || etcd_check_cmps(cmps, ncmp) != 0 ||
        etcd_check_ops(then, nthen) != 0 || etcd_check_ops(els, nels) != 0)
        return MC_ERR_INVALID_PARAMS;
    *succeeded = 0;
    if (kvs) {
        *kvs = NULL;
        *nkvs = 0;
    }
    json_t *req = json_object();
    json_t *carr = json_array();
    for (size_t i = 0; carr && i < ncmp; i++) {
        if (json_array_append_new(carr, etcd_cmp_json(&cmps[i])) != 0) {
            json_decref(carr);
            carr = NULL;
        }
    }
    json_t *tarr = etcd_ops_json(then, nthen);
    json_t *farr = etcd_ops_json(els, nels);
    if (!req || !carr || !tarr || !farr) {
        json_decref(req);
        json_decref(carr);
        json_decref(tarr);
        json_decref(farr);
        return MC_ERR_INTERNAL_ERROR;
    }
    json_object_set_new(req, "compare", carr);
    json_object_set_new(req, "success", tarr);
    json_object_set_new(req, "failure", farr);
    json_t *ans;
    int rc = etcd_call(e, "/v3/kv/txn", req, &ans);
    if (rc != 0)
        return rc;
    *succeeded = json_is_true(json_object_get(ans, "succeeded"));
    if (revision)
        *revision = etcd_i64(json_object_get(ans, "header"), "revision");
    if (kvs) {
        const json_t *resps = json_object_get(ans, "responses");
        for (size_t i = 0; rc == 0 && i < json_array_size(resps); i++) {
            const json_t *range = json_object_get(json_array_get(resps, i), "response_range");
            if (range)
                rc = etcd_append_kvs(range, kvs, nkvs);
        }
        if (rc != 0) {
            mc_etcd_kv_free(*kvs, *nkvs, 1);
            *kvs = NULL;
            *nkvs = 0;
        }
    }
    json_decref(ans);
    return rc;
}

int mc_etcd_create_if_absent(mc_etcd_t *e, const char *key, const void *value, size_t len,
                             int64_t lease, int *created, mc_etcd_kv_t *current)
{
    if (!e || !created || etcd_check_key(key) != 0 || etcd_check_value(value, len) != 0)
        return MC_ERR_INVALID_PARAMS;
    *created = 0;
    if (current)
        memset(current, 0, sizeof(*current));
    mc_etcd_cmp_t cmp = {.key = key, .target = MC_ETCD_CMP_CREATE, .result = MC_ETCD_EQUAL};
    mc_etcd_op_t then[2] = {
        {.kind = MC_ETCD_OP_PUT, .key = key, .value = value, .value_len = len, .lease = lease},
        {.kind = MC_ETCD_OP_GET, .key = key},
    };
    mc_etcd_op_t els = {.kind = MC_ETCD_OP_GET, .key = key};
    mc_etcd_kv_t *kvs = NULL;
    size_t n = 0;
    int rc = mc_etcd_txn(e, &cmp, 1, then, current ? 2 : 1, &els, current ? 1 : 0, created,
                         current ? &kvs : NULL, current ? &n : NULL, NULL);
    if (rc != 0)
        return rc;
    if (current) {
        if (n == 0) { /* the GET runs in the same transaction: the key is there */
            MC_ERROR("etcd create_if_absent: the transaction's answer lacks the key");
            return MC_ERR_ETCD_OPERATION_ERROR;
        }
        *current = kvs[0];
        mc_etcd_kv_free(kvs + 1, n - 1, 0);
        free(kvs);
    }
    return 0;
}
