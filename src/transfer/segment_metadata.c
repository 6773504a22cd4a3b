/*
 * segment_metadata.c — segment descriptors and the metadata service.
 *
 * A descriptor tells a peer how to reach a segment: its endpoint, host identity (same-host peers
 * use shm), the abstract unix socket handing out shm fds, the registered ranges, and for rdma
 * engines the UCX worker address plus one packed rkey per range. It travels as protobuf in the P2P
 * handshake and as JSON in the HTTP metadata service (binary fields in base64: "rdma_address" at
 * the top, "rkey" in each buffer; absent for tcp engines), under the key
 * "mooncake/ram/<segment name>" (upstream's key layout). A lookup tries the HTTP service first
 * when one is configured and falls back to asking the endpoint itself, so peers configured with
 * HTTP metadata still reach peers that registered with P2PHANDSHAKE.
 */
#include "transfer_internal.h"

#include "base64.h"
#include "log.h"
#include "mooncake/http_metadata.h"
#include "pb_decode.h"
#include "transfer.pb-c.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MC_RAM_KEY_PREFIX "mooncake/ram/"
#define MC_RPC_META_KEY_PREFIX "mooncake/rpc_meta/"

void mc_desc_free(mc_segment_desc_t *d)
{
    for (size_t i = 0; d->regions && i < d->count; i++)
        free(d->regions[i].rkey);
    free(d->regions);
    free(d->rdma_address);
    d->regions = NULL;
    d->count = 0;
    d->rdma_address = NULL;
    d->rdma_address_len = 0;
}

/* A malloc'd copy of len bytes (len > 0), or NULL. */
static uint8_t *dup_bytes(const void *src, size_t len)
{
    uint8_t *p = malloc(len);
    if (p)
        memcpy(p, src, len);
    return p;
}

/* Sets region i's rkey to a copy of [rkey, +len); len 0 leaves it empty. */
static int set_rkey(mc_remote_region_t *g, const void *rkey, size_t len)
{
    if (len == 0)
        return 0;
    if (len > MC_TE_MAX_RDMA_BLOB)
        return MC_ERR_DESERIALIZE_FAIL;
    g->rkey = dup_bytes(rkey, len);
    if (!g->rkey)
        return MC_ERR_INTERNAL_ERROR;
    g->rkey_len = (uint32_t)len;
    return 0;
}

int mc_desc_set_address(mc_segment_desc_t *d, const void *addr, size_t len)
{
    if (len == 0)
        return 0;
    if (len > MC_TE_MAX_RDMA_BLOB)
        return MC_ERR_DESERIALIZE_FAIL;
    d->rdma_address = dup_bytes(addr, len);
    if (!d->rdma_address)
        return MC_ERR_INTERNAL_ERROR;
    d->rdma_address_len = len;
    return 0;
}

/* ---- base64 for the JSON form ------------------------------------------------------------ */

/* Decodes one padded base64 field (an empty one to NULL, length 0); MC_ERR_DESERIALIZE_FAIL on
 * malformed input or a blob over MC_TE_MAX_RDMA_BLOB. */
static int b64_decode(const char *text, uint8_t **out, size_t *out_len)
{
    size_t n = strlen(text);
    *out = NULL;
    *out_len = 0;
    if (n % 4 != 0 || n / 4 * 3 > MC_TE_MAX_RDMA_BLOB)
        return MC_ERR_DESERIALIZE_FAIL;
    if (n == 0)
        return 0;
    return mc_base64_decode(text, n, out, out_len);
}

int mc_desc_build_local(mc_transfer_engine_t *te, mc_segment_desc_t *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", te->name);
    snprintf(out->protocol, sizeof(out->protocol), "%s", te->protocol);
    snprintf(out->host_id, sizeof(out->host_id), "%s", te->host_id);
    snprintf(out->shm_socket, sizeof(out->shm_socket), "%s", te->shm_socket);
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        if ((*t)->describe && (*t)->describe(te, out) != 0) {
            mc_desc_free(out);
            return MC_ERR_INTERNAL_ERROR;
        }
    }
    pthread_rwlock_rdlock(&te->registry.lock);
    out->version = te->registry.version;
    out->count = te->registry.count;
    out->regions = calloc(out->count ? out->count : 1, sizeof(*out->regions));
    int rc = out->regions ? 0 : MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; rc == 0 && i < out->count; i++) {
        const mc_local_region_t *g = &te->registry.regions[i];
        out->regions[i] = (mc_remote_region_t){g->addr, g->length, g->shm_index, 0, NULL};
        rc = set_rkey(&out->regions[i], g->rdma_rkey, g->rdma_rkey_len);
    }
    pthread_rwlock_unlock(&te->registry.lock);
    if (rc != 0)
        mc_desc_free(out);
    return rc;
}

int mc_desc_pack(const mc_segment_desc_t *d, uint8_t **buf, size_t *len)
{
    Mc__SegmentDesc msg = MC__SEGMENT_DESC__INIT;
    Mc__MemoryRegion *regs = calloc(d->count ? d->count : 1, sizeof(*regs));
    Mc__MemoryRegion **ptrs = calloc(d->count ? d->count : 1, sizeof(*ptrs));
    ProtobufCBinaryData *rkeys = calloc(d->count ? d->count : 1, sizeof(*rkeys));
    if (!regs || !ptrs || !rkeys) {
        free(regs);
        free(ptrs);
        free(rkeys);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (size_t i = 0; i < d->count; i++) {
        mc__memory_region__init(&regs[i]);
        regs[i].addr = d->regions[i].addr;
        regs[i].length = d->regions[i].length;
        regs[i].shm_index = d->regions[i].shm_index;
        ptrs[i] = &regs[i];
        rkeys[i] = (ProtobufCBinaryData){d->regions[i].rkey_len, d->regions[i].rkey};
    }
    msg.name = (char *)d->name;
    msg.protocol = (char *)d->protocol;
    msg.host_id = (char *)d->host_id;
    msg.shm_socket = (char *)d->shm_socket;
    msg.version = d->version;
    msg.n_regions = d->count;
    msg.regions = ptrs;
    if (d->rdma_address_len) { /* rdma engine: every region has a (possibly empty) rkey slot */
        msg.rdma_address = (ProtobufCBinaryData){d->rdma_address_len, d->rdma_address};
        msg.n_rdma_rkeys = d->count;
        msg.rdma_rkeys = rkeys;
    }
    *len = mc__segment_desc__get_packed_size(&msg);
    *buf = malloc(*len ? *len : 1);
    if (*buf)
        mc__segment_desc__pack(&msg, *buf);
    free(regs);
    free(ptrs);
    free(rkeys);
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
    Mc__SegmentDesc *msg = NULL;
    if (mc_pb_decode_reply(&mc__segment_desc__descriptor, buf, len, (ProtobufCMessage **)&msg) != 0)
        return MC_ERR_DESERIALIZE_FAIL;
    int rc = MC_ERR_DESERIALIZE_FAIL;
    if (copy_str(out->name, sizeof(out->name), msg->name) ||
        copy_str(out->protocol, sizeof(out->protocol), msg->protocol) ||
        copy_str(out->host_id, sizeof(out->host_id), msg->host_id) ||
        copy_str(out->shm_socket, sizeof(out->shm_socket), msg->shm_socket) ||
        msg->n_regions > MC_TE_MAX_REGIONS ||
        (msg->n_rdma_rkeys != 0 && msg->n_rdma_rkeys != msg->n_regions))
        goto out;
    out->version = msg->version;
    out->count = msg->n_regions;
    out->regions = calloc(out->count ? out->count : 1, sizeof(*out->regions));
    if (!out->regions) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    rc = mc_desc_set_address(out, msg->rdma_address.data, msg->rdma_address.len);
    for (size_t i = 0; rc == 0 && i < out->count; i++) {
        out->regions[i].addr = msg->regions[i]->addr;
        out->regions[i].length = msg->regions[i]->length;
        out->regions[i].shm_index = msg->regions[i]->shm_index;
        if (msg->n_rdma_rkeys)
            rc = set_rkey(&out->regions[i], msg->rdma_rkeys[i].data, msg->rdma_rkeys[i].len);
    }
out:
    if (rc != 0)
        mc_desc_free(out);
    mc__segment_desc__free_unpacked(msg, NULL);
    return rc;
}

/* Sets key to the base64 of [data, +len) unless len is 0. 0, or -1 when out of memory. */
static int json_set_b64(json_t *obj, const char *key, const uint8_t *data, size_t len)
{
    if (len == 0)
        return 0;
    char *text = mc_base64_encode(data, len, NULL);
    int rc = text ? json_object_set_new(obj, key, json_string(text)) : -1;
    free(text);
    return rc;
}

int mc_desc_to_json(const mc_segment_desc_t *d, char **json)
{
    json_t *buffers = json_array();
    int bad = buffers == NULL;
    for (size_t i = 0; !bad && i < d->count; i++) {
        const mc_remote_region_t *g = &d->regions[i];
        json_t *b = json_pack("{s:I, s:I, s:i}", "addr", (json_int_t)g->addr, "length",
                              (json_int_t)g->length, "shm_index", (int)g->shm_index);
        bad = !b || json_set_b64(b, "rkey", g->rkey, g->rkey_len) != 0 ||
              json_array_append_new(buffers, b) != 0;
    }
    json_t *root = bad ? NULL
                       : json_pack("{s:s, s:s, s:s, s:s, s:I, s:O}", "name", d->name, "protocol",
                                   d->protocol, "host_id", d->host_id, "shm_socket", d->shm_socket,
                                   "version", (json_int_t)d->version, "buffers", buffers);
    json_decref(buffers);
    if (root && json_set_b64(root, "rdma_address", d->rdma_address, d->rdma_address_len) != 0) {
        json_decref(root);
        root = NULL;
    }
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
    const char *name, *protocol, *host_id, *shm_socket, *rdma_address = "";
    json_int_t version;
    json_t *buffers;
    int rc = MC_ERR_DESERIALIZE_FAIL;
    if (json_unpack(root, "{s:s, s:s, s:s, s:s, s:I, s:o, s?s}", "name", &name, "protocol",
                    &protocol, "host_id", &host_id, "shm_socket", &shm_socket, "version", &version,
                    "buffers", &buffers, "rdma_address", &rdma_address) != 0 ||
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
    rc = b64_decode(rdma_address, &out->rdma_address, &out->rdma_address_len);
    for (size_t i = 0; rc == 0 && i < out->count; i++) {
        json_int_t addr, length;
        int shm_index;
        const char *rkey = "";
        if (json_unpack(json_array_get(buffers, i), "{s:I, s:I, s:i, s?s}", "addr", &addr, "length",
                        &length, "shm_index", &shm_index, "rkey", &rkey) != 0) {
            rc = MC_ERR_DESERIALIZE_FAIL;
            break;
        }
        out->regions[i] =
            (mc_remote_region_t){(uint64_t)addr, (uint64_t)length, shm_index, 0, NULL};
        size_t rkey_len = 0;
        rc = b64_decode(rkey, &out->regions[i].rkey, &rkey_len);
        out->regions[i].rkey_len = (uint32_t)rkey_len;
    }
    if (rc != 0)
        mc_desc_free(out);
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

/* The metadata service's put/del/get: etcd (etcd_metadata.c) or HTTP (http_metadata_client.c). */
static int md_put(mc_transfer_engine_t *te, const char *key, const char *value, size_t len)
{
    if (te->etcd_md)
        return mc_etcd_md_put(te->etcd_md, key, value, len);
    return mc_http_metadata_put_auth(te->auth, te->metadata_url, key, value, len);
}

static void md_del(mc_transfer_engine_t *te, const char *key)
{
    if (te->etcd_md)
        mc_etcd_md_del(te->etcd_md, key);
    else
        mc_http_metadata_del_auth(te->auth, te->metadata_url, key);
}

static int md_get(mc_transfer_engine_t *te, const char *key, char **value, size_t *len)
{
    if (te->etcd_md)
        return mc_etcd_md_get(te->etcd_md, key, value, len);
    return mc_http_metadata_get(te->metadata_url, key, value, len);
}

int mc_metadata_publish(mc_transfer_engine_t *te)
{
    if (!te->metadata_url[0])
        return 0;
    mc_segment_desc_t d;
    char *json = NULL, key[512], rpc[512];
    int rc = mc_desc_build_local(te, &d);
    if (rc == 0 && te->auth) {
        /* With a secret, the HTTP service (open to readers) holds no rdma address or rkeys:
         * peers get them over the authenticated tcp handshake (mc_metadata_lookup). */
        free(d.rdma_address);
        d.rdma_address = NULL;
        d.rdma_address_len = 0;
        for (size_t i = 0; i < d.count; i++) {
            free(d.regions[i].rkey);
            d.regions[i].rkey = NULL;
            d.regions[i].rkey_len = 0;
        }
    }
    if (rc == 0)
        rc = mc_desc_to_json(&d, &json);
    mc_desc_free(&d);
    if (rc != 0)
        return rc;
    snprintf(key, sizeof(key), MC_RAM_KEY_PREFIX "%s", te->name);
    rc = md_put(te, key, json, strlen(json));
    free(json);
    if (rc != 0) {
        MC_ERROR("cannot publish segment %s to metadata server %s: %s", te->name, te->metadata_url,
                 mc_error_name(rc));
        return rc;
    }
    char host[MC_HOST_MAX];
    int port = 0;
    mc_net_split_endpoint(te->name, 0, host, &port);
    snprintf(key, sizeof(key), MC_RPC_META_KEY_PREFIX "%s", te->name);
    snprintf(rpc, sizeof(rpc), "{\"ip_or_host_name\":\"%s\",\"rpc_port\":%d}", host, port);
    rc = md_put(te, key, rpc, strlen(rpc));
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
    md_del(te, key);
    snprintf(key, sizeof(key), MC_RPC_META_KEY_PREFIX "%s", te->name);
    md_del(te, key);
}

int mc_metadata_lookup(mc_transfer_engine_t *te, const char *name, mc_segment_desc_t *out,
                       uint64_t deadline_ms)
{
    char host[MC_HOST_MAX];
    int port;
    if (mc_net_split_endpoint(name, -1, host, &port) != 0 || port <= 0) {
        MC_ERROR("segment name \"%s\" is not host:port", name);
        return MC_ERR_INVALID_PARAMS;
    }
    /* With a secret, a descriptor comes only from the peer itself, over the authenticated tcp
     * handshake: the HTTP copy is readable by anyone and carries no rdma address or rkeys
     * (mc_metadata_publish). */
    if (te->metadata_url[0] && !te->auth) {
        char key[512], *json = NULL;
        size_t len = 0;
        snprintf(key, sizeof(key), MC_RAM_KEY_PREFIX "%s", name);
        int rc = md_get(te, key, &json, &len);
        if (rc == 0) {
            rc = mc_desc_from_json(json, len, out);
            free(json);
            if (rc == 0)
                return 0;
            MC_WARN("metadata for segment %s at %s is not a valid descriptor; asking the peer",
                    name, te->metadata_url);
        }
    }
    const mc_transport_ops_t *const *t = te->transports;
    while (*t && !(*t)->handshake)
        t++;
    int rc = *t ? (*t)->handshake(te, host, port, out, deadline_ms) : MC_ERR_NOT_SUPPORTED;
    if (rc != 0) {
        MC_ERROR("segment %s: not found at the metadata service and its endpoint does not "
                 "answer (%s)",
                 name, mc_error_name(rc));
        return MC_ERR_SEGMENT_NOT_FOUND;
    }
    return 0;
}
