/*
 * fuzz_oplog.c — fuzz target for the operation log as a master catching up reads it from etcd
 * (src/master/oplog.c): batch keys, the CRC32C framing of each batch value, mc.OplogBatch and
 * its entries, sequence checks, and each entry applied to a fresh master as mooncake_master
 * applies it (SET: mc_master_import of the object record, DEL: mc_master_import_del). The
 * batches come from a fake etcd (fake_etcd.h) as the answer to the catch-up's range read;
 * mc_oplog_promote reads and applies them, then the log is destroyed.
 *
 * Input: byte 0 flags; then up to four batches, each a u16-length-prefixed packed OplogBatch
 * (and, with flag 0x01, first a u16-length-prefixed etcd key for it). The target stores each
 * under its batch key (/oplog/fuzz/batches/<id, 20 digits>, ids from 1) behind the CRC32C a
 * leader writes, unless a flag says otherwise: 0x01 keys from the input, 0x02 ids from 2,
 * 0x04 a wrong CRC on the last batch, 0x08 "more" set in the answer.
 */
#include "checksum.h"
#include "etcd.h"
#include "fake_etcd.h"
#include "fuzz_common.h"
#include "journal.h"
#include "master_service.h"
#include "mooncake/errors.h"
#include "oplog.h"

#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BATCHES 4

static mc_etcd_t *etcd;

static int apply(void *arg, uint32_t type, const char *key, const uint8_t *record, size_t len)
{
    mc_master_t *m = arg;
    if (type == MC_OPLOG_SET)
        return mc_master_import(m, record, len);
    if (type == MC_OPLOG_DEL)
        return mc_master_import_del(m, key, strlen(key));
    return MC_ERR_INVALID_PARAMS;
}

static json_t *b64(const void *p, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        abort();
    int len = EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    json_t *s = json_stringn(out, (size_t)len);
    free(out);
    return s;
}

/* The range answer etcd would give for these batches. */
static void queue_answer(mc_fuzz_in_t *in)
{
    uint8_t flags = mc_fuzz_u8(in);
    json_t *kvs = json_array();
    for (int i = 0; i < MAX_BATCHES && in->n > 0; i++) {
        char key[128];
        size_t klen;
        if (flags & 0x01) {
            const uint8_t *k = mc_fuzz_chunk(in, &klen);
            klen = klen < sizeof(key) ? klen : sizeof(key);
            memcpy(key, k, klen);
        } else {
            klen = (size_t)snprintf(key, sizeof(key), "/oplog/fuzz/batches/%020" PRIu64,
                                    (uint64_t)(i + 1 + ((flags & 0x02) ? 1 : 0)));
        }
        size_t n;
        const uint8_t *batch = mc_fuzz_chunk(in, &n);
        uint8_t *value = malloc(n + 4);
        if (!value)
            abort();
        uint32_t crc = mc_crc32c(0, batch, n);
        if ((flags & 0x04) && in->n == 0)
            crc ^= 1;
        for (int k = 0; k < 4; k++)
            value[k] = (uint8_t)(crc >> (8 * k));
        memcpy(value + 4, batch, n);
        json_t *kv = json_object();
        json_object_set_new(kv, "key", b64(key, klen));
        json_object_set_new(kv, "value", b64(value, n + 4));
        json_object_set_new(kv, "create_revision", json_string("2"));
        json_object_set_new(kv, "mod_revision", json_string("2"));
        json_object_set_new(kv, "version", json_string("1"));
        json_array_append_new(kvs, kv);
        free(value);
    }
    json_t *ans = json_object();
    json_object_set_new(ans, "header", json_pack("{s:s}", "revision", "9"));
    json_object_set_new(ans, "kvs", kvs);
    json_object_set_new(ans, "more", json_boolean(flags & 0x08));
    char *text = json_dumps(ans, JSON_COMPACT);
    if (!text)
        abort();
    mc_fake_etcd_push(200, text, strlen(text));
    free(text);
    json_decref(ans);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", mc_fake_etcd_start());
    if (mc_etcd_create(endpoint, 2000, &etcd) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    mc_master_t *m = NULL;
    if (mc_master_create(NULL, &m) != 0 || mc_master_restore_hold(m) != 0)
        abort();
    mc_oplog_config_t cfg = {0};
    cfg.etcd = etcd;
    cfg.cluster_id = "fuzz";
    cfg.apply = apply;
    cfg.arg = m;
    mc_oplog_t *log = NULL;
    if (mc_oplog_create(&cfg, &log) != 0)
        abort();
    queue_answer(&in);
    if (mc_oplog_promote(log, 1) == 0)
        mc_master_import_trust_all(m);
    mc_oplog_destroy(log);
    mc_fake_etcd_clear();
    mc_master_destroy(m);
    return 0;
}
