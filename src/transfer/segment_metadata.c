/*
 * segment_metadata.c — segment descriptors and the metadata service.
 *
 * A descriptor tells a peer how to reach a segment: its endpoint, host identity (same-host peers
 * use shm), the abstract unix socket handing out shm fds, and the registered ranges. It travels as
 * protobuf in the P2P handshake and as JSON in the HTTP metadata service, under the key
 * "mooncake/ram/<segment name>" (upstream's key layout). A lookup tries the HTTP service first
 * when one is configured and falls back to asking the endpoint itself, so peers configured with
 * HTTP metadata still reach peers that registered with P2PHANDSHAKE.
 */
#include "transfer_internal.h"

#include "log.h"
#include "mooncake/http_metadata.h"
#include "transfer.pb-c.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MC_RAM_KEY_PREFIX "mooncake/ram/"
#define MC_RPC_META_KEY_PREFIX "mooncake/rpc_meta/"

void mc_desc_free(mc_segment_desc_t *d)
{
    free(d->regions);
    d->regions = NULL;
    d->count = 0;
}

int mc_desc_build_local(mc_transfer_engine_t *te, mc_segment_desc_t *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", te->name);
    snprintf(out->protocol, sizeof(out->protocol), "%s", te->protocol);
    snprintf(out->host_id, sizeof(out->host_id), "%s", te->host_id);
    snprintf(out->shm_socket, sizeof(out->shm_socket), "%s", te->shm_socket);
    pthread_rwlock_rdlock(&te->registry.lock);
    out->version = te->registry.version;
    out->count = te->registry.count;
    out->regions = calloc(out->count ? out->count : 1, sizeof(*out->regions));
    if (!out->regions) {
        pthread_rwlock_unlock(&te->registry.lock);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (size_t i = 0; i < out->count; i++) {
        const mc_local_region_t *g = &te->registry.regions[i];
        out->regions[i] = (mc_remote_region_t){g->addr, g->length, g->shm_index};
    }
    pthread_rwlock_unlock(&te->registry.lock);
    return 0;
}

int mc_desc_pack(const mc_segment_desc_t *d, uint8_t **buf, size_t *len)
{
    Mc__SegmentDesc msg = MC__SEGMENT_DESC__INIT;
    Mc__MemoryRegion *regs = calloc(d->count ? d->count : 1, sizeof(*regs));
    Mc__MemoryRegion **ptrs = calloc(d->count ? d->count : 1, sizeof(*ptrs));
    if (!regs || !ptrs) {
        free(regs);
        free(ptrs);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (size_t i = 0; i < d->count; i++) {
        mc__memory_region__init(&regs[i]);
        regs[i].addr = d->regions[i].addr;
        regs[i].length = d->regions[i].length;
        regs[i].shm_index = d->regions[i].shm_index;
        ptrs[i] = &regs[i];
    }
    msg.name = (char *)d->name;
    msg.protocol = (char *)d->protocol;
    msg.host_id = (char *)d->host_id;
    msg.shm_socket = (char *)d->shm_socket;
    msg.version = d->version;
    msg.n_regions = d->count;
    msg.regions = ptrs;
    *len = mc__segment_desc__get_packed_size(&msg);
    *buf = malloc(*len ? *len : 1);
    if (*buf)
        mc__segment_desc__pack(&msg, *buf);
    free(regs);
    free(ptrs);
    return *buf ? 0 : MC_ERR_INTERNAL_ERROR;
}

static int copy_str(char *dst, size_t cap, const char *src)
{
    if (!src)
        src = "";
    if (strlen(src) >= cap)
        return MC_ERR_DESERIALIZE_FAIL;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

int mc_desc_unpack(const uint8_t *buf, size_t len, mc_segment_desc_t *out)
{
    memset(out, 0, sizeof(*out));
    Mc__SegmentDesc *msg = mc__segment_desc__unpack(NULL, len, buf);
    if (!msg)
        return MC_ERR_DESERIALIZE_FAIL;
    int rc = MC_ERR_DESERIALIZE_FAIL;
    if (copy_str(out->name, sizeof(out->name), msg->name) ||
        copy_str(out->protocol, sizeof(out->protocol), msg->protocol) ||
        copy_str(out->host_id, sizeof(out->host_id), msg->host_id) ||
        copy_str(out->shm_socket, sizeof(out->shm_socket), msg->shm_socket) ||
        msg->n_regions > MC_TE_MAX_REGIONS)
        goto out;
    out->version = msg->version;
    out->count = msg->n_regions;
    out->regions = calloc(out->count ? out->count : 1, sizeof(*out->regions));
    if (!out->regions) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < out->count; i++) {
        out->regions[i].addr = msg->regions[i]->addr;
        out->regions[i].length = msg->regions[i]->length;
        out->regions[i].shm_index = msg->regions[i]->shm_index;
    }
    rc = 0;
out:
    mc__segment_desc__free_unpacked(msg, NULL);
    return rc;
}

int mc_desc_to_json(const mc_segment_desc_t *d, char **json)
{
    json_t *buffers = json_array();
    for (size_t i = 0; i < d->count; i++) {
        json_array_append_new(buffers,
                              json_pack("{s:I, s:I, s:i}", "addr", (json_int_t)d->regions[i].addr,
                                        "length", (json_int_t)d->regions[i].length, "shm_index",
                                        (int)d->regions[i].shm_index));
    }
    json_t *root = json_pack("{s:s, s:s, s:s, s:s, s:I, s:o}", "name", d->name, "protocol",
                             d->protocol, "host_id", d->host_id, "shm_socket", d->shm_socket,
                             "version", (json_int_t)d->version, "buffers", buffers);
    if (!root)
        return MC_ERR_SERIALIZE_FAIL;
    *json = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return *json ? 0 : MC_ERR_SERIALIZE_FAIL;
}

int mc_desc_from_json(const char *text, size_t len, mc_segment_desc_t *out)
{
    memset(out, 0, sizeof(*out));
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root)
        return MC_ERR_DESERIALIZE_FAIL;
    const char *name, *protocol, *host_id, *shm_socket;
    json_int_t version;
    json_t *buffers;
    int rc = MC_ERR_DESERIALIZE_FAIL;
    if (json_unpack(root, "{s:s, s:s, s:s, s:s, s:I, s:o}", "name", &name, "protocol", &protocol,
                    "host_id", &host_id, "shm_socket", &shm_socket, "version", &version,
                    "buffers", &buffers) != 0 ||
        !json_is_array(buffers) || json_array_size(buffers) > MC_TE_MAX_REGIONS)
        goto out;
    if (copy_str(out->name, sizeof(out->name), name) ||
        copy_str(out->protocol, sizeof(out->protocol), protocol) ||
        copy_str(out->host_id, sizeof(out->host_id), host_id) ||
        copy_str(out->shm_socket, sizeof(out->shm_socket), shm_socket))
        goto out;
    out->version = (uint64_t)version;
    out->count = json_array_size(buffers);
    out->regions = calloc(out->count ? out->count : 1, sizeof(*out->regions));
    if (!out->regions) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < out->count; i++) {
        json_int_t addr, length;
        int shm_index;
        if (json_unpack(json_array_get(buffers, i), "{s:I, s:I, s:i}", "addr", &addr, "length",
                        &length, "shm_index", &shm_index) != 0) {
            mc_desc_free(out);
            goto out;
        }
        out->regions[i] = (mc_remote_region_t){(uint64_t)addr, (uint64_t)length, shm_index};
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

const mc_remote_region_t *mc_desc_find(const mc_segment_desc_t *d, uint64_t addr, uint64_t len)
{
    for (size_t i = 0; i < d->count; i++) {
        const mc_remote_region_t *g = &d->regions[i];
        if (addr >= g->addr && len <= g->length && addr - g->addr <= g->length - len)
            return g;
    }
    return NULL;
}

int mc_metadata_publish(mc_transfer_engine_t *te)
{
    if (!te->metadata_url[0])
        return 0;
    mc_segment_desc_t d;
    char *json = NULL, key[512], rpc[512];
    int rc = mc_desc_build_local(te, &d);
    if (rc == 0)
        rc = mc_desc_to_json(&d, &json);
    mc_desc_free(&d);
    if (rc != 0)
        return rc;
    snprintf(key, sizeof(key), MC_RAM_KEY_PREFIX "%s", te->name);
    rc = mc_http_metadata_put(te->metadata_url, key, json, strlen(json));
    free(json);
    if (rc != 0) {
        MC_ERROR("cannot publish segment %s to metadata server %s: %s", te->name,
                 te->metadata_url, mc_error_name(rc));
        return rc;
    }
    char host[MC_HOST_MAX];
    int port = 0;
    mc_net_split_endpoint(te->name, 0, host, &port);
    snprintf(key, sizeof(key), MC_RPC_META_KEY_PREFIX "%s", te->name);
    snprintf(rpc, sizeof(rpc), "{\"ip_or_host_name\":\"%s\",\"rpc_port\":%d}", host, port);
    rc = mc_http_metadata_put(te->metadata_url, key, rpc, strlen(rpc));
    if (rc != 0)
        MC_WARN("cannot publish rpc_meta of %s to %s: %s", te->name, te->metadata_url,
                mc_error_name(rc));
    return 0;
}

void mc_metadata_unpublish(mc_transfer_engine_t *te)
{
    if (!te->metadata_url[0])
        return;
    char key[512];
    snprintf(key, sizeof(key), MC_RAM_KEY_PREFIX "%s", te->name);
    mc_http_metadata_del(te->metadata_url, key);
    snprintf(key, sizeof(key), MC_RPC_META_KEY_PREFIX "%s", te->name);
    mc_http_metadata_del(te->metadata_url, key);
}

int mc_metadata_lookup(mc_transfer_engine_t *te, const char *name, mc_segment_desc_t *out)
{
    char host[MC_HOST_MAX];
    int port;
    if (mc_net_split_endpoint(name, -1, host, &port) != 0 || port <= 0) {
        MC_ERROR("segment name \"%s\" is not host:port", name);
        return MC_ERR_INVALID_PARAMS;
    }
    if (te->metadata_url[0]) {
        char key[512], *json = NULL;
        size_t len = 0;
        snprintf(key, sizeof(key), MC_RAM_KEY_PREFIX "%s", name);
        int rc = mc_http_metadata_get(te->metadata_url, key, &json, &len);
        if (rc == 0) {
            rc = mc_desc_from_json(json, len, out);
            free(json);
            if (rc == 0)
                return 0;
            MC_WARN("metadata for segment %s at %s is not a valid descriptor; asking the peer",
                    name, te->metadata_url);
        }
    }
    int rc = mc_tcp_handshake(te, host, port, out);
    if (rc != 0) {
        MC_ERROR("segment %s: not found at the metadata service and its endpoint does not "
                 "answer (%s)",
                 name, mc_error_name(rc));
        return MC_ERR_SEGMENT_NOT_FOUND;
    }
    return 0;
}
