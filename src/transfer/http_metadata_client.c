/*
 * http_metadata_client.c — the client half of the HTTP metadata protocol (http_metadata.h):
 * GET|PUT|DELETE <url>?key=<escaped key> with libcurl, as upstream's HTTPStoragePlugin does.
 *
 * Each call uses its own easy handle, so calls are thread-safe and share nothing but
 * curl_global_init(), which runs once. Metadata traffic is a handful of requests per segment, so
 * connection reuse is not worth a shared handle and its lock. HTTP statuses map to store codes in
 * md_status_to_code() only.
 */
#include "mooncake/errors.h"
#include "mooncake/http_metadata.h"

#include "auth.h"
#include "curl_body.h"
#include "log.h"
#include "transfer_internal.h"

#include <curl/curl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MD_CLIENT_TIMEOUT_MS 5000L
#define MD_CLIENT_CONNECT_TIMEOUT_MS 2000L
/* A response body is a value (at most MC_HTTP_METADATA_MAX_VALUE) or a short message. */
#define MD_CLIENT_MAX_BODY ((size_t)MC_HTTP_METADATA_MAX_VALUE)
/* Log lines quote at most this much of a key or of the server's error message. */
#define MD_LOG_KEY_MAX 256
#define MD_LOG_BODY_MAX 200

static pthread_once_t md_curl_once = PTHREAD_ONCE_INIT;
static CURLcode md_curl_init_rc = CURLE_FAILED_INIT;

static void md_curl_global_init(void)
{
    md_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* "<url>?key=<escaped>" (or "&key=" when url already has a query). malloc'd; NULL on failure. */
static char *md_build_url(CURL *curl, const char *url, const char *key)
{
    char *escaped = curl_easy_escape(curl, key, (int)strlen(key));
    if (!escaped)
        return NULL;
    const char *sep = strchr(url, '?') ? "&key=" : "?key=";
    size_t n = strlen(url) + strlen(sep) + strlen(escaped) + 1;
    char *full = malloc(n);
    if (full)
        snprintf(full, n, "%s%s%s", url, sep, escaped);
    curl_free(escaped);
    return full;
}

/*
 * Sends one request. On return *status holds the HTTP status and *resp the response body
 * (caller frees resp->data). Returns 0 when an HTTP answer arrived, or MC_ERR_RPC_FAIL (logged)
 * when none did.
 */
static int md_perform(const char *method, const char *url, const char *key, const char *body,
                      size_t body_len, const char *auth_header, long *status, mc_curl_body_t *resp)
{
    *status = 0;
    pthread_once(&md_curl_once, md_curl_global_init);
    if (md_curl_init_rc != CURLE_OK) {
        MC_ERROR("HTTP metadata %s %s: curl_global_init failed: %s", method, url,
                 curl_easy_strerror(md_curl_init_rc));
        return MC_ERR_RPC_FAIL;
    }
    CURL *curl = curl_easy_init();
    if (!curl) {
        MC_ERROR("HTTP metadata %s %s: curl_easy_init failed", method, url);
        return MC_ERR_RPC_FAIL;
    }
    char *full_url = key ? md_build_url(curl, url, key) : strdup(url);
    if (!full_url) {
        MC_ERROR("HTTP metadata %s %s: cannot build the request URL", method, url);
        curl_easy_cleanup(curl);
        return MC_ERR_RPC_FAIL;
    }

    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *headers = NULL;
    curl_easy_setopt(curl, CURLOPT_URL, full_url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, MD_CLIENT_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, MD_CLIENT_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, mc_curl_body_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, resp);
    if (auth_header)
        headers = curl_slist_append(headers, auth_header);
    if (!strcmp(method, "PUT"))
        headers = curl_slist_append(headers, "Content-Type: application/json");
    if (headers)
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    if (!strcmp(method, "PUT")) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (!strcmp(method, "DELETE")) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
    }

    CURLcode cc = curl_easy_perform(curl);
    int rc = 0;
    if (cc != CURLE_OK) {
        MC_ERROR("HTTP metadata %s %s key '%.*s' failed: curl error %d: %s%s", method, url,
                 MD_LOG_KEY_MAX, key ? key : "", (int)cc,
                 errbuf[0] ? errbuf : curl_easy_strerror(cc),
                 resp->overflow ? " (response larger than the value limit)" : "");
        rc = MC_ERR_RPC_FAIL;
    } else {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    free(full_url);
    return rc;
}

/*
 * Maps an HTTP answer to a store code: 200 -> 0; 404 -> MC_ERR_OBJECT_NOT_FOUND when the call
 * treats absence as an outcome (get, del); 400 -> MC_ERR_INVALID_PARAMS; anything else ->
 * MC_ERR_RPC_FAIL. Every failure but an expected 404 is logged with the server's message.
 */
static int md_status_to_code(const char *method, const char *url, const char *key, long status,
                             const mc_curl_body_t *resp, int absent_ok)
{
    if (status == 200)
        return 0;
    if (status == 404 && absent_ok)
        return MC_ERR_OBJECT_NOT_FOUND;
    if (status == 401) {
        MC_ERROR("HTTP metadata %s %s key '%.*s' refused: %.*s", method, url, MD_LOG_KEY_MAX, key,
                 MD_LOG_BODY_MAX, resp->data ? resp->data : "");
        return MC_ERR_ILLEGAL_CLIENT;
    }
    MC_ERROR("HTTP metadata %s %s key '%.*s': HTTP %ld: %.*s", method, url, MD_LOG_KEY_MAX, key,
             status, MD_LOG_BODY_MAX, resp->data ? resp->data : "");
    return status == 400 ? MC_ERR_INVALID_PARAMS : MC_ERR_RPC_FAIL;
}

int mc_http_metadata_get(const char *url, const char *key, char **value, size_t *len)
{
    if (!url || !key || !*key || !value || !len)
        return MC_ERR_INVALID_PARAMS;
    *value = NULL;
    *len = 0;
    mc_curl_body_t resp = {.max = MD_CLIENT_MAX_BODY};
    long status;
    int rc = md_perform("GET", url, key, NULL, 0, NULL, &status, &resp);
    if (rc == 0)
        rc = md_status_to_code("GET", url, key, status, &resp, 1);
    if (rc == 0 && !resp.data) {
        resp.data = malloc(1); /* an empty value is still a NUL-terminated string */
        if (resp.data)
            resp.data[0] = '\0';
        else
            rc = MC_ERR_INTERNAL_ERROR;
    }
    if (rc == 0) {
        *value = resp.data;
        *len = resp.len;
    } else {
        free(resp.data);
    }
    return rc;
}

/*
 * With a secret: asks the server for a write nonce (GET <url path>/auth_challenge) and builds
 * the "X-Mooncake-Auth: <nonce>.<mac>" header for this write into `header`. 0, or
 * MC_ERR_ILLEGAL_CLIENT when the server has no secret (404) or refuses, MC_ERR_RPC_FAIL.
 */
static int md_sign(const mc_auth_t *a, const char *method, const char *url, const char *key,
                   const char *body, size_t body_len, char *header, size_t header_len)
{
    char challenge[1024];
    size_t base = strcspn(url, "?");
    while (base > 0 && url[base - 1] == '/')
        base--;
    if (base + sizeof("/auth_challenge") > sizeof(challenge))
        return MC_ERR_INVALID_PARAMS;
    snprintf(challenge, sizeof(challenge), "%.*s/auth_challenge", (int)base, url);
    mc_curl_body_t resp = {.max = MD_CLIENT_MAX_BODY};
    long status;
    int rc = md_perform("GET", challenge, NULL, NULL, 0, NULL, &status, &resp);
    uint8_t nonce[MC_AUTH_NONCE_LEN], mac[MC_AUTH_MAC_LEN];
    const char *hex = resp.data ? strstr(resp.data, "\"nonce\":\"") : NULL;
    if (rc == 0 && status == 404) {
        MC_ERROR("HTTP metadata server %s has no cluster secret while this process has one: "
                 "refusing to use it (set the same secret on every process)",
                 url);
        rc = MC_ERR_ILLEGAL_CLIENT;
    } else if (rc == 0 && (status != 200 || !hex || strlen(hex) < 9 + 2 * MC_AUTH_NONCE_LEN ||
                           mc_auth_unhex(hex + 9, MC_AUTH_NONCE_LEN, nonce) != 0)) {
        MC_ERROR("HTTP metadata server %s: no usable write challenge (HTTP %ld)", url, status);
        rc = MC_ERR_RPC_FAIL;
    }
    free(resp.data);
    if (rc == 0)
        rc = mc_auth_metadata_mac(a, method, key, strlen(key), nonce, body, body_len, mac);
    if (rc == 0) {
        char nhex[2 * MC_AUTH_NONCE_LEN + 1], mhex[2 * MC_AUTH_MAC_LEN + 1];
        mc_auth_hex(nonce, sizeof(nonce), nhex);
        mc_auth_hex(mac, sizeof(mac), mhex);
        snprintf(header, header_len, "%s: %s.%s", MC_AUTH_HTTP_HEADER, nhex, mhex);
    }
    return rc;
}

/* One write (PUT or DELETE), signed when the process has a secret. */
static int md_write(const mc_auth_t *a, const char *method, const char *url, const char *key,
                    const char *value, size_t len)
{
    char header[64 + 2 * (MC_AUTH_NONCE_LEN + MC_AUTH_MAC_LEN)];
    int rc = a ? md_sign(a, method, url, key, value, len, header, sizeof(header)) : 0;
    if (rc != 0)
        return rc;
    mc_curl_body_t resp = {.max = MD_CLIENT_MAX_BODY};
    long status;
    rc = md_perform(method, url, key, value, len, a ? header : NULL, &status, &resp);
    if (rc == 0)
        rc = md_status_to_code(method, url, key, status, &resp, !strcmp(method, "DELETE"));
    free(resp.data);
    return rc;
}

/* The process's secret for the public calls, from the environment, read once. */
static pthread_once_t md_env_auth_once = PTHREAD_ONCE_INIT;
static mc_auth_t *md_env_auth;

static void md_env_auth_load(void)
{
    if (mc_auth_resolve(NULL, NULL, &md_env_auth) != 0)
        md_env_auth = NULL;
}

int mc_http_metadata_put_auth(const mc_auth_t *a, const char *url, const char *key,
                              const char *value, size_t len)
{
    if (!url || !key || !*key || (!value && len > 0))
        return MC_ERR_INVALID_PARAMS;
    return md_write(a, "PUT", url, key, value, len);
}

int mc_http_metadata_del_auth(const mc_auth_t *a, const char *url, const char *key)
{
    if (!url || !key || !*key)
        return MC_ERR_INVALID_PARAMS;
    return md_write(a, "DELETE", url, key, NULL, 0);
}

int mc_http_metadata_put(const char *url, const char *key, const char *value, size_t len)
{
    pthread_once(&md_env_auth_once, md_env_auth_load);
    return mc_http_metadata_put_auth(md_env_auth, url, key, value, len);
}

int mc_http_metadata_del(const char *url, const char *key)
{
    pthread_once(&md_env_auth_once, md_env_auth_load);
    return mc_http_metadata_del_auth(md_env_auth, url, key);
}
