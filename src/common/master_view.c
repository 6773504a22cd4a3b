/*
 * master_view.c — the elected master's key in etcd and reading it (master_view.h).
 */
#include "master_view.h"

#include "log.h"
#include "mooncake/errors.h"
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mc_master_view_key(const char *cluster_id, char *out, size_t cap)
{
    if (!cluster_id || !out)
        return MC_ERR_INVALID_PARAMS;
    size_t n = strlen(cluster_id);
    while (n > 0 && cluster_id[n - 1] == '/')
        n--;
    if (n == 0)
        return MC_ERR_INVALID_PARAMS;
    int w = snprintf(out, cap, "mooncake-store/%.*s/master_view", (int)n, cluster_id);
    return w > 0 && (size_t)w < cap ? 0 : MC_ERR_INVALID_PARAMS;
}

int mc_master_addr_parse(const char *addr, char *endpoints, size_t cap)
{
    if (!addr)
        return 0;
    const char *sep = strstr(addr, "://");
    if (!sep)
        return 0;
    if ((size_t)(sep - addr) != 4 || strncmp(addr, "etcd", 4) != 0) {
        MC_ERROR("master address \"%s\": only etcd://<endpoints> names an elected master here "
                 "(upstream's redis:// and k8s:// backends are not built), or give host:port",
                 addr);
        return MC_ERR_INVALID_PARAMS;
    }
    const char *list = sep + 3;
    if (!*list || strlen(list) >= cap) {
        MC_ERROR("master address \"%s\": the etcd endpoint list is %s", addr,
                 *list ? "too long" : "empty");
        return MC_ERR_INVALID_PARAMS;
    }
    snprintf(endpoints, cap, "%s", list);
    return 1;
}

const char *mc_client_cluster_id(void)
{
    const char *e = getenv(MC_CLUSTER_ID_ENV);
    return e && *e ? e : MC_DEFAULT_CLUSTER_ID;
}

int mc_master_view_read(mc_etcd_t *e, const char *cluster_id, char *leader, size_t cap,
                        int64_t *view_version)
{
    char key[512];
    int rc = mc_master_view_key(cluster_id, key, sizeof(key));
    if (rc != 0)
        return rc;
    mc_etcd_kv_t kv;
    rc = mc_etcd_get(e, key, &kv, NULL);
    if (rc != 0)
        return rc;
    char host[MC_HOST_MAX];
    int port = 0;
    if (kv.value_len == 0 || kv.value_len >= cap || memchr(kv.value, 0, kv.value_len) ||
        mc_net_split_endpoint((const char *)kv.value, -1, host, &port) != 0 || port <= 0) {
        MC_WARN("etcd key %s holds \"%.*s\", not a master's host:port", key,
                (int)(kv.value_len < 128 ? kv.value_len : 128), (const char *)kv.value);
        mc_etcd_kv_free(&kv, 1, 0);
        return MC_ERR_INVALID_PARAMS;
    }
    memcpy(leader, kv.value, kv.value_len);
    leader[kv.value_len] = 0;
    if (view_version)
        *view_version = kv.create_revision;
    mc_etcd_kv_free(&kv, 1, 0);
    return 0;
}
