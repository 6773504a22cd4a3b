/*
 * fuzz_etcd.c — fuzz target for the etcd v3 client's decoding of what etcd answers
 * (src/common/etcd.c: JSON gateway answers, base64 keys and values, int64 fields, error
 * messages, transaction responses) and for the elected master's key as clients read it
 * (src/common/master_view.c, mc_master_view_read). A fake etcd (fake_etcd.h) answers each
 * request with the next answer from the input.
 *
 * Input: byte 0 picks the call (get, range, put, delete, delete_prefix, lease grant, keep-alive,
 * revoke, txn with GET ops, create_if_absent, master view read); then up to four answers, each
 * a u16 HTTP status (below 200: 200; else mapped into 200..599) and a u16-length-prefixed body.
 * Checks: what a call returns is well-formed (keys and values NUL-terminated at their lengths).
 */
#include "etcd.h"
#include "fake_etcd.h"
#include "fuzz_common.h"
#include "master_view.h"
#include "mooncake/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ANSWERS 4

static mc_etcd_t *etcd;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_etcd: %s\n", what);
        abort();
    }
}

static void check_kvs(const mc_etcd_kv_t *kvs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        check(kvs[i].key && kvs[i].value, "a key-value without its strings");
        check(kvs[i].value[kvs[i].value_len] == '\0', "a value not NUL-terminated");
        (void)strlen(kvs[i].key);
    }
}

static void call(int op)
{
    mc_etcd_kv_t kv, *kvs = NULL;
    size_t n = 0;
    int more = 0, ok = 0;
    int64_t rev = 0, id = 0, ttl = 0;
    char leader[256];
    switch (op) {
    case 0:
        if (mc_etcd_get(etcd, "mooncake/key", &kv, &rev) == 0) {
            check_kvs(&kv, 1);
            mc_etcd_kv_free(&kv, 1, 0);
        }
        break;
    case 1:
        if (mc_etcd_range(etcd, "/oplog/fuzz/batches/", NULL, 64, &kvs, &n, &more, &rev) == 0) {
            check_kvs(kvs, n);
            mc_etcd_kv_free(kvs, n, 1);
        }
        break;
    case 2:
        mc_etcd_put(etcd, "mooncake/key", "value", 5, 7, &rev);
        break;
    case 3:
        mc_etcd_delete(etcd, "a", "b", &id);
        break;
    case 4:
        mc_etcd_delete_prefix(etcd, "mooncake/", &id);
        break;
    case 5:
        mc_etcd_lease_grant(etcd, 5, &id, &ttl);
        break;
    case 6:
        mc_etcd_lease_keepalive(etcd, 1234, &ttl);
        break;
    case 7:
        mc_etcd_lease_revoke(etcd, 1234);
        break;
    case 8: {
        mc_etcd_cmp_t cmp = {.key = "k", .target = MC_ETCD_CMP_VALUE, .value = "v", .value_len = 1};
        mc_etcd_op_t then[2] = {{.kind = MC_ETCD_OP_GET, .key = "k"},
                                {.kind = MC_ETCD_OP_PUT, .key = "k", .value = "w", .value_len = 1}};
        mc_etcd_op_t els = {.kind = MC_ETCD_OP_GET, .key = "j"};
        if (mc_etcd_txn(etcd, &cmp, 1, then, 2, &els, 1, &ok, &kvs, &n, &rev) == 0) {
            check_kvs(kvs, n);
            mc_etcd_kv_free(kvs, n, 1);
        }
        break;
    }
    case 9:
        if (mc_etcd_create_if_absent(etcd, "election", "me:1", 4, 9, &ok, &kv) == 0) {
            check_kvs(&kv, 1);
            mc_etcd_kv_free(&kv, 1, 0);
        }
        break;
    default:
        if (mc_master_view_read(etcd, "fuzz", leader, sizeof(leader), &rev) == 0)
            check(strlen(leader) < sizeof(leader), "a leader address");
        break;
    }
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
    int op = mc_fuzz_u8(&in) % 11;
    for (int i = 0; i < MAX_ANSWERS && in.n > 0; i++) {
        /* 200..599: a 1xx status only makes curl wait for the final answer until its timeout */
        unsigned status = mc_fuzz_u16(&in);
        status = status < 200 ? 200 : 200 + status % 400;
        size_t len;
        const uint8_t *body = mc_fuzz_chunk(&in, &len);
        mc_fake_etcd_push(status, body, len);
    }
    call(op);
    mc_fake_etcd_clear();
    return 0;
}
