/*
 * make_corpus.c — writes the seed corpora of the fuzz targets (fuzz/corpus/<name>/) with the
 * production encoders: frames (mc_frame_encode), protobuf-c packers of src/wire/proto, segment
 * descriptors (mc_desc_pack, mc_desc_to_json), object headers and names (object_layout.h),
 * object records exported by a real master (mc_master_export). The tensor seeds come from
 * tensor.py's own packers (make_tensor_corpus.py). Each seed follows the input layout its
 * target's opening comment describes.
 *
 *   cmake --build build-fuzz --target fuzz_make_corpus
 *   build-fuzz/fuzz/fuzz_make_corpus fuzz/corpus
 *
 * Not a test: the seeds are checked in, and this program is how they were made.
 */
#include "frame.h"
#include "journal.h"
#include "master_service.h"
#include "mooncake/errors.h"
#include "object_layout.h"
#include "real_client_service.h"
#include "rpc.h"
#include "transfer_internal.h"
#include "wire_messages.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TE_REGION 0x500000000000ull /* fuzz_te_server.c's FUZZ_REGION */

/* ---- a growing byte buffer ------------------------------------------------------------------ */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf_t;

static void put(buf_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_u8(buf_t *b, uint8_t v)
{
    put(b, &v, 1);
}

static void put_le(buf_t *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        put_u8(b, (uint8_t)(v >> (8 * i)));
}

static void put_str(buf_t *b, const char *s)
{
    put(b, s, strlen(s));
}

/* u16 length prefix then the bytes (mc_fuzz_chunk). */
static void put_chunk(buf_t *b, const void *p, size_t n)
{
    put_le(b, n, 2);
    put(b, p, n);
}

static void put_msg(buf_t *b, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *tmp = malloc(n ? n : 1);
    if (!tmp)
        abort();
    protobuf_c_message_pack(m, tmp);
    put(b, tmp, n);
    free(tmp);
}

/* One frame: header then the packed message (NULL: an empty body). */
static void put_frame(buf_t *b, uint16_t opcode, uint64_t id, const ProtobufCMessage *m)
{
    buf_t body = {0};
    if (m)
        put_msg(&body, m);
    uint8_t h[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(opcode, id, (uint32_t)body.n, 0, h);
    put(b, h, sizeof(h));
    put(b, body.p, body.n);
    free(body.p);
}

static const char *out_root;

/* Writes b to <root>/<target>/<name> and resets it. */
static void emit(const char *target, const char *name, buf_t *b)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", out_root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        abort();
    snprintf(path, sizeof(path), "%s/%s/%s", out_root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->p ? (void *)b->p : (void *)"", 1, b->n, f) != b->n || fclose(f) != 0) {
        fprintf(stderr, "make_corpus: cannot write %s\n", path);
        exit(1);
    }
    b->n = 0;
}

static void emit_text(const char *target, const char *name, uint8_t mode, const char *text,
                      size_t len)
{
    buf_t b = {0};
    put_u8(&b, mode);
    put(&b, text, len);
    emit(target, name, &b);
    free(b.p);
}

static size_t message_index(const ProtobufCMessageDescriptor *d)
{
    for (size_t i = 0; i < MC_FUZZ_NMESSAGES; i++)
        if (mc_fuzz_messages[i] == d)
            return i;
    abort();
}

/* ---- messages shared by several corpora --------------------------------------------------- */

static Mc__KeysRequest keys_request(const char *client, char **keys, size_t n, uint64_t *sizes)
{
    Mc__KeysRequest r = MC__KEYS_REQUEST__INIT;
    r.client_id = (char *)client;
    r.keys = keys;
    r.n_keys = n;
    if (sizes) {
        r.sizes = sizes;
        r.n_sizes = n;
    }
    return r;
}

/* ---- parse --------------------------------------------------------------------------------- */

static void corpus_parse(void)
{
    static const struct {
        uint8_t mode;
        const char *name, *text;
    } seeds[] = {
        {0, "size", "32 GB"},
        {0, "size-decimal", "1.5g"},
        {1, "duration", "500ms"},
        {1, "duration-minutes", "1m"},
        {2, "bool", "true"},
        {3, "int", "-5"},
        {4, "double", "0.5"},
        {5, "master-etcd", "etcd://h1:2379;h2:2379"},
        {5, "master-plain", "127.0.0.1:50051"},
        {6, "endpoint-v6", "[::1]:8080"},
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        emit_text("parse", seeds[i].name, seeds[i].mode, seeds[i].text, strlen(seeds[i].text));
    static const char argv[] = "--port=80\0--global-segment-size\0 16 MB\0--noenable_thing\0"
                               "-client_ttl=10s\0--rpc_thread_num=4\0--name\0x\0--ratio=0.25";
    emit_text("parse", "flags", 7, argv, sizeof(argv) - 1);
}

/* ---- wire ---------------------------------------------------------------------------------- */

static void wire_seed(const char *name, const ProtobufCMessage *m, uint8_t field)
{
    buf_t b = {0};
    put_u8(&b, (uint8_t)message_index(m->descriptor));
    put_u8(&b, field);
    put_frame(&b, 110, 42, m);
    emit("wire", name, &b);
    free(b.p);
}

static void corpus_wire(void)
{
    char *keys[] = {"alpha", "beta", "gamma"};
    uint64_t sizes[] = {4096, 1, 1 << 20};
    Mc__KeysRequest kr = keys_request("client-1", keys, 3, sizes);
    wire_seed("keys-request", &kr.base, 2);
    Mc__PingRequest ping = MC__PING_REQUEST__INIT;
    ping.client_id = "client-1";
    ping.fence_acked = 3;
    wire_seed("ping", &ping.base, 1);
    Mc__MemoryRegion reg = MC__MEMORY_REGION__INIT;
    reg.addr = 0x7f0000000000ull;
    reg.length = 1 << 20;
    Mc__MemoryRegion *regs[] = {&reg};
    Mc__SegmentDesc sd = MC__SEGMENT_DESC__INIT;
    sd.name = "127.0.0.1:17000";
    sd.protocol = "tcp";
    sd.n_regions = 1;
    sd.regions = regs;
    wire_seed("segment-desc", &sd.base, 5);
    Mc__OplogEntry e = MC__OPLOG_ENTRY__INIT;
    e.seq = 1;
    e.type = 2;
    e.key = "gone";
    Mc__OplogEntry *ents[] = {&e};
    Mc__OplogBatch ob = MC__OPLOG_BATCH__INIT;
    ob.batch_id = 1;
    ob.first_seq = 1;
    ob.n_entries = 1;
    ob.entries = ents;
    wire_seed("oplog-batch", &ob.base, 4);
    Mc__AuthHello hello = MC__AUTH_HELLO__INIT;
    uint8_t nonce[MC_AUTH_NONCE_LEN] = {1, 2, 3};
    hello.client_nonce = (ProtobufCBinaryData){sizeof(nonce), nonce};
    hello.service = "master";
    wire_seed("auth-hello", &hello.base, 1);
}

/* ---- rpc: one client's session against the master ------------------------------------------ */

static void corpus_rpc(void)
{
    buf_t b = {0};
    uint64_t id = 1;
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = "0f0e0d0c-0b0a-0908-0706-050403020100";
    seg.name = "127.0.0.1:17777";
    seg.base_address = 0x500000000000ull;
    seg.size = 64u << 20;
    seg.protocol = "tcp";
    Mc__Segment *segs[] = {&seg};
    Mc__SegmentRequest mount = MC__SEGMENT_REQUEST__INIT;
    mount.client_id = "client-1";
    mount.n_segments = 1;
    mount.segments = segs;
    put_frame(&b, MC_RPC_MOUNT_SEGMENT, id++, &mount.base);
    Mc__PingRequest ping = MC__PING_REQUEST__INIT;
    ping.client_id = "client-1";
    put_frame(&b, MC_RPC_PING, id++, &ping.base);

    char *keys[] = {"key-1", "key-2"};
    uint64_t sizes[] = {4096, 100};
    uint32_t crcs[] = {0x11111111, 0x22222222};
    Mc__ReplicateConfig rc = MC__REPLICATE_CONFIG__INIT;
    rc.replica_num = 1;
    Mc__KeysRequest put_start = keys_request("client-1", keys, 2, sizes);
    put_start.config = &rc;
    put_frame(&b, MC_RPC_PUT_START, id++, &put_start.base);
    Mc__KeysRequest put_end = keys_request("client-1", keys, 2, NULL);
    put_end.checksums = crcs;
    put_end.n_checksums = 2;
    put_frame(&b, MC_RPC_PUT_END, id++, &put_end.base);
    Mc__KeysRequest get = keys_request("client-1", keys, 2, NULL);
    put_frame(&b, MC_RPC_GET_REPLICA_LIST, id++, &get.base);
    put_frame(&b, MC_RPC_EXIST_KEY, id++, &get.base);
    uint64_t leases[] = {1, 2};
    Mc__KeysRequest release = keys_request("client-1", keys, 2, NULL);
    release.lease_ids = leases;
    release.n_lease_ids = 2;
    put_frame(&b, MC_RPC_RELEASE_LEASE, id++, &release.base);
    Mc__KeysRequest remove = keys_request("client-1", keys, 1, NULL);
    remove.force = 1;
    put_frame(&b, MC_RPC_REMOVE, id++, &remove.base);
    emit("rpc", "put-get-remove", &b);

    put_frame(&b, MC_RPC_MOUNT_SEGMENT, id++, &mount.base);
    put_frame(&b, MC_RPC_UPSERT_START, id++, &put_start.base);
    put_frame(&b, MC_RPC_UPSERT_END, id++, &put_end.base);
    Mc__KeysRequest regex = keys_request("client-1", NULL, 0, NULL);
    regex.regex = "^key-[0-9]+$";
    regex.force = 1;
    put_frame(&b, MC_RPC_REMOVE_BY_REGEX, id++, &regex.base);
    put_frame(&b, MC_RPC_REMOVE_ALL, id++, &regex.base);
    emit("rpc", "upsert-regex", &b);

    put_frame(&b, MC_RPC_MOUNT_SEGMENT, id++, &mount.base);
    put_frame(&b, MC_RPC_PUT_START, id++, &put_start.base);
    put_frame(&b, MC_RPC_PUT_END, id++, &put_end.base);
    Mc__OffloadHeartbeatRequest hb = MC__OFFLOAD_HEARTBEAT_REQUEST__INIT;
    hb.client_id = "client-1";
    hb.backend = 1;
    hb.endpoint = "127.0.0.1:17778";
    hb.offloading = 1;
    hb.healthy = 1;
    hb.capacity_bytes = 1 << 30;
    hb.max_tasks = 8;
    hb.max_deletions = 8;
    put_frame(&b, MC_RPC_OFFLOAD_HEARTBEAT, id++, &hb.base);
    Mc__OffloadResult res = MC__OFFLOAD_RESULT__INIT;
    res.task_id = 1;
    res.key = "key-1";
    res.version = 1;
    res.size = 4096;
    Mc__OffloadResult *results[] = {&res};
    Mc__NotifyOffloadRequest notify = MC__NOTIFY_OFFLOAD_REQUEST__INIT;
    notify.client_id = "client-1";
    notify.n_results = 1;
    notify.results = results;
    put_frame(&b, MC_RPC_NOTIFY_OFFLOAD_RESULT, id++, &notify.base);
    Mc__DeletionsPendingRequest dp = MC__DELETIONS_PENDING_REQUEST__INIT;
    dp.client_id = "client-1";
    dp.from_seq = 1;
    dp.to_seq = 5;
    put_frame(&b, MC_RPC_OFFLOAD_DELETIONS_PENDING, id++, &dp.base);
    Mc__PromotionTakeRequest pt = MC__PROMOTION_TAKE_REQUEST__INIT;
    pt.client_id = "client-1";
    pt.max_tasks = 1;
    put_frame(&b, MC_RPC_PROMOTION_TAKE, id++, &pt.base);
    emit("rpc", "offload", &b);

    put_frame(&b, MC_RPC_SERVICE_READY, id++, NULL);
    put_frame(&b, MC_RPC_MOUNT_SEGMENT, id++, &mount.base);
    put_frame(&b, MC_RPC_PUT_START, id++, &put_start.base);
    put_frame(&b, MC_RPC_PUT_END, id++, &put_end.base);
    char *targets[] = {"127.0.0.1:17777"};
    Mc__TaskCreateRequest tc = MC__TASK_CREATE_REQUEST__INIT;
    tc.key = "key-1";
    tc.n_targets = 1;
    tc.targets = targets;
    put_frame(&b, MC_RPC_CREATE_COPY_TASK, id++, &tc.base);
    Mc__TaskQueryRequest tq = MC__TASK_QUERY_REQUEST__INIT;
    tq.task_id = "00000000-0000-0000-0000-000000000001";
    put_frame(&b, MC_RPC_QUERY_TASK, id++, &tq.base);
    Mc__FetchTasksRequest ft = MC__FETCH_TASKS_REQUEST__INIT;
    ft.client_id = "client-1";
    ft.batch_size = 4;
    put_frame(&b, MC_RPC_FETCH_TASKS, id++, &ft.base);
    Mc__ReplicaClearRequest clear = MC__REPLICA_CLEAR_REQUEST__INIT;
    clear.client_id = "client-1";
    clear.keys = keys;
    clear.n_keys = 1;
    put_frame(&b, MC_RPC_BATCH_REPLICA_CLEAR, id++, &clear.base);
    Mc__RestoreVerifyRequest rv = MC__RESTORE_VERIFY_REQUEST__INIT;
    rv.client_id = "client-1";
    rv.segment_id = seg.id;
    put_frame(&b, MC_RPC_RESTORE_VERIFY_FETCH, id++, &rv.base);
    mount.grace_period_ms = 10;
    put_frame(&b, MC_RPC_GRACEFUL_UNMOUNT_SEGMENT, id++, &mount.base);
    put_frame(&b, MC_RPC_UNMOUNT_SEGMENT, id++, &mount.base);
    emit("rpc", "tasks-unmount", &b);
    free(b.p);
}

/* ---- segment descriptors --------------------------------------------------------------------- */

static void corpus_segment_desc(void)
{
    uint8_t rkey[] = {0xde, 0xad, 0xbe, 0xef, 0x01}, addr[] = {9, 8, 7, 6, 5, 4, 3};
    mc_remote_region_t regions[2] = {{0x7f0000000000ull, 1 << 20, 0, sizeof(rkey), rkey},
                                     {0x7f0000200000ull, 4096, -1, 0, NULL}};
    mc_segment_desc_t d = {0};
    snprintf(d.name, sizeof(d.name), "127.0.0.1:17000");
    snprintf(d.protocol, sizeof(d.protocol), "rdma");
    snprintf(d.host_id, sizeof(d.host_id), "host-a");
    snprintf(d.shm_socket, sizeof(d.shm_socket), "mooncake_te_0_1_17000");
    d.version = 7;
    d.regions = regions;
    d.count = 2;
    d.rdma_address = addr;
    d.rdma_address_len = sizeof(addr);
    uint8_t *pb;
    size_t len;
    char *json;
    if (mc_desc_pack(&d, &pb, &len) != 0 || mc_desc_to_json(&d, &json) != 0)
        abort();
    buf_t b = {0};
    put_u8(&b, 0);
    put(&b, pb, len);
    emit("segment_desc", "protobuf-rdma", &b);
    put_u8(&b, 1);
    put_str(&b, json);
    emit("segment_desc", "json-rdma", &b);
    free(pb);
    free(json);
    d.rdma_address_len = 0;
    d.count = 1;
    regions[0].rkey_len = 0;
    snprintf(d.protocol, sizeof(d.protocol), "tcp");
    if (mc_desc_pack(&d, &pb, &len) != 0 || mc_desc_to_json(&d, &json) != 0)
        abort();
    put_u8(&b, 0);
    put(&b, pb, len);
    emit("segment_desc", "protobuf-tcp", &b);
    put_u8(&b, 1);
    put_str(&b, json);
    emit("segment_desc", "json-tcp", &b);
    free(pb);
    free(json);
    free(b.p);
}

/* ---- object layout and offload files --------------------------------------------------------- */

static void object_file(buf_t *b, const char *key, const void *value, size_t size)
{
    size_t hlen = mc_obj_header_len(strlen(key), size);
    uint8_t *h = calloc(1, hlen);
    if (!h)
        abort();
    mc_obj_header_encode(h, key, strlen(key), size, mc_crc32c(0, value, size));
    put(b, h, hlen);
    put(b, value, size);
    free(h);
}

static void corpus_object_layout(void)
{
    buf_t b = {0};
    put_u8(&b, 0);
    object_file(&b, "layer0-block_17.kv", "value bytes", 11);
    emit("object_layout", "header", &b);
    char name[MC_OBJ_NAME_MAX];
    const char *key = ".hidden/key with spaces";
    mc_obj_escape_key(key, strlen(key), name, sizeof(name));
    emit_text("object_layout", "name-escaped", 1, name, strlen(name));
    emit_text("object_layout", "dir-name", 2, "a7", 2);
    mc_obj_temp_id_t id = {0x1234abcd, 4242, 1700000000, 17};
    mc_obj_temp_name(&id, name);
    emit_text("object_layout", "temp-name", 3, name, strlen(name));
    char probe[64];
    snprintf(probe, sizeof(probe), MC_OBJ_PROBE_PREFIX "%s-3", name + 2);
    emit_text("object_layout", "probe-name", 4, probe, strlen(probe));
    put_u8(&b, 5);
    put_le(&b, 100, 2);
    put_le(&b, 4000, 2);
    put_le(&b, 50, 4);
    put_le(&b, 3000, 4);
    put_le(&b, 3, 2);
    emit("object_layout", "iovs", &b);
    free(b.p);
}

static void plant(buf_t *b, unsigned dir, uint8_t flags, const char *name, const buf_t *contents)
{
    put_le(b, dir, 2);
    put_u8(b, flags);
    put_chunk(b, name, strlen(name));
    put_chunk(b, contents->p, contents->n);
}

static void corpus_offload_files(void)
{
    buf_t b = {0}, f = {0};
    char key[64], name[MC_OBJ_NAME_MAX];
    put_u8(&b, 0);
    /* a disk replica "<version>/<key>" where the adapter puts it */
    snprintf(key, sizeof(key), "%016llx/%s", 5ull, "layer0-block_17.kv");
    object_file(&f, key, "0123456789", 10);
    mc_obj_escape_key(key, strlen(key), name, sizeof(name));
    plant(&b, mc_obj_dir_index(key, strlen(key)), 0, name, &f);
    f.n = 0;
    /* a dead writer's temporary and a probe object */
    mc_obj_temp_id_t id = {0x1234abcd, 4242, 1700000000, 17};
    mc_obj_temp_name(&id, name);
    put_str(&f, "partial");
    plant(&b, 3, 0, name, &f);
    emit("offload_files", "replica-and-temp", &b);
    f.n = 0;
    put_u8(&b, 1);
    put_str(&f, "mooncake-c cluster marker v1\ncluster_id=00112233445566778899aabbccddeeff\n"
                "fs_type=posix\n");
    plant(&b, 0, 0, "marker", &f);
    emit("offload_files", "marker", &b);
    free(b.p);
    free(f.p);
}

static void corpus_offload_fetch(void)
{
    buf_t b = {0};
    Mc__FetchRequest fetch = MC__FETCH_REQUEST__INIT;
    fetch.key = "key-1";
    fetch.version = 5;
    fetch.size = 4096;
    Mc__ReleaseRequest release = MC__RELEASE_REQUEST__INIT;
    release.lease_id = 1;
    put_frame(&b, MC_RPC_OFFLOAD_FETCH, 1, &fetch.base);
    put_frame(&b, MC_RPC_OFFLOAD_RELEASE, 2, &release.base);
    emit("offload_fetch", "fetch-release", &b);
    fetch.key = "absent";
    put_frame(&b, MC_RPC_OFFLOAD_FETCH, 3, &fetch.base);
    fetch.key = "key-1";
    fetch.size = 4095;
    put_frame(&b, MC_RPC_OFFLOAD_FETCH, 4, &fetch.base);
    release.lease_id = 99;
    put_frame(&b, MC_RPC_OFFLOAD_RELEASE, 5, &release.base);
    emit("offload_fetch", "refused", &b);
    free(b.p);
}

/* ---- auth ------------------------------------------------------------------------------------ */

static void corpus_auth(void)
{
    buf_t b = {0}, body = {0};
    uint8_t nonce[MC_AUTH_NONCE_LEN], mac[MC_AUTH_MAC_LEN];
    memset(nonce, 0x5a, sizeof(nonce));
    memset(mac, 0xa5, sizeof(mac));
    Mc__AuthHello hello = MC__AUTH_HELLO__INIT;
    hello.client_nonce = (ProtobufCBinaryData){sizeof(nonce), nonce};
    hello.service = "master";
    Mc__AuthProof proof = MC__AUTH_PROOF__INIT;
    proof.client_proof = (ProtobufCBinaryData){sizeof(mac), mac};
    put_u8(&b, 0);
    put_msg(&body, &hello.base);
    put_le(&b, MC_AUTH_OP_HELLO, 2);
    put_chunk(&b, body.p, body.n);
    body.n = 0;
    put_msg(&body, &proof.base);
    put_le(&b, MC_AUTH_OP_PROOF, 2);
    put_chunk(&b, body.p, body.n);
    emit("auth", "step-hello-proof", &b);
    hello.service = "transfer";
    put_u8(&b, 1);
    put_frame(&b, MC_AUTH_OP_HELLO, 0, &hello.base);
    put_frame(&b, MC_AUTH_OP_PROOF, 0, &proof.base);
    emit("auth", "server-hello-proof", &b);
    Mc__AuthChallenge ch = MC__AUTH_CHALLENGE__INIT;
    ch.server_nonce = (ProtobufCBinaryData){sizeof(nonce), nonce};
    ch.server_proof = (ProtobufCBinaryData){sizeof(mac), mac};
    put_u8(&b, 2);
    put_frame(&b, MC_AUTH_OP_CHALLENGE, 0, &ch.base);
    emit("auth", "client-challenge", &b);
    Mc__AuthResult res = MC__AUTH_RESULT__INIT;
    res.code = MC_ERR_ILLEGAL_CLIENT;
    res.message = "this server requires the cluster secret";
    put_u8(&b, 2);
    put_frame(&b, MC_AUTH_OP_RESULT, 0, &res.base);
    emit("auth", "client-refused", &b);
    put_u8(&b, 3);
    put_msg(&b, &res.base);
    emit("auth", "refusal", &b);
    free(b.p);
    free(body.p);
}

/* ---- Transfer Engine server ------------------------------------------------------------------ */

static void te_transfer(buf_t *b, uint16_t op, uint64_t addr, uint64_t len, uint64_t epoch,
                        uint64_t token, int payload)
{
    Mc__TransferHeader th = MC__TRANSFER_HEADER__INIT;
    th.addr = addr;
    th.length = len;
    th.epoch = epoch;
    th.fence_token = token;
    put_frame(b, op, addr & 0xffff, &th.base);
    for (uint64_t i = 0; payload && i < len; i++)
        put_u8(b, (uint8_t)i);
}

static void corpus_te_server(void)
{
    buf_t b = {0};
    Mc__HandshakeRequest hs = MC__HANDSHAKE_REQUEST__INIT;
    hs.initiator = "127.0.0.1:17001";
    put_u8(&b, 0);
    put_frame(&b, MC_TE_OP_HANDSHAKE, 1, &hs.base);
    emit("te_server", "handshake", &b);
    put_u8(&b, 0);
    te_transfer(&b, MC_TE_OP_WRITE, TE_REGION + 64, 32, 5, 8, 1);
    te_transfer(&b, MC_TE_OP_READ, TE_REGION + 64, 32, 5, 0, 0);
    emit("te_server", "write-read", &b);
    put_u8(&b, 0);
    te_transfer(&b, MC_TE_OP_WRITE, TE_REGION, 16, 4, 0, 1);           /* stale epoch */
    te_transfer(&b, MC_TE_OP_WRITE, TE_REGION, 16, 5, 7, 1);           /* refused token */
    te_transfer(&b, MC_TE_OP_READ, TE_REGION + (1 << 20), 8, 0, 0, 0); /* outside */
    emit("te_server", "refused", &b);
    put_u8(&b, 1);
    put_le(&b, 0, 4);
    put_le(&b, (uint32_t)-1, 4);
    put_le(&b, 5, 4);
    emit("te_server", "shm", &b);
    free(b.p);
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

static void http_spec(buf_t *b, uint8_t method, const char *target, const char *headers,
                      const char *body)
{
    buf_t s = {0};
    put_u8(&s, method);
    put(&s, target, strlen(target) + 1);
    put(&s, headers, strlen(headers) + 1);
    put_str(&s, body);
    put_chunk(b, s.p, s.n);
    free(s.p);
}

enum { GET = 0, HEAD = 1, PUT = 2, DELETE = 3, POST = 4 };

static void corpus_http(void)
{
    buf_t b = {0};
    put_u8(&b, 0);
    http_spec(&b, PUT, "/metadata?key=mooncake%2Fram%2F127.0.0.1%3A17000", "",
              "{\"name\":\"127.0.0.1:17000\"}");
    http_spec(&b, GET, "/metadata?key=mooncake%2Fram%2F127.0.0.1%3A17000", "", "");
    http_spec(&b, DELETE, "/metadata?key=mooncake%2Fram%2F127.0.0.1%3A17000", "", "");
    emit("http_metadata", "put-get-delete", &b);
    put_u8(&b, 0);
    http_spec(&b, PUT, "/metadata?key=rpc_meta%2Fa", "", "{\"ip\":\"127.0.0.1\"}");
    http_spec(&b, PUT, "/metadata?key=rpc_meta%2Fa", "", "{\"ip\":\"127.0.0.2\"}");
    http_spec(&b, GET, "/metrics", "", "");
    http_spec(&b, GET, "/health", "", "");
    emit("http_metadata", "rpc-meta-metrics", &b);
    put_u8(&b, 1);
    http_spec(&b, GET, "/metadata/auth_challenge", "", "");
    char header[256];
    snprintf(header, sizeof(header), "X-Mooncake-Auth: %064d.%064d", 0, 0);
    http_spec(&b, PUT, "/metadata?key=k", header, "v");
    emit("http_metadata", "secret-write", &b);

    static const char *const paths[] = {"/metrics",
                                        "/metrics/summary",
                                        "/health",
                                        "/get_all_segments",
                                        "/query_key?key=key",
                                        "/query_key?key=%FF%FE%20not%20utf-8%20%C3",
                                        "/query_key",
                                        "/role",
                                        "/ha_status",
                                        "/leader"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) { /* 4 requests a seed */
        http_spec(&b, GET, paths[i], "Accept: */*", "");
        if (i % 4 == 3 || i + 1 == sizeof(paths) / sizeof(paths[0])) {
            char name[32];
            snprintf(name, sizeof(name), "paths-%zu", i / 4);
            emit("admin_http", name, &b);
        }
    }
    http_spec(&b, POST, "/query_key?key=a%2Fb+c", "Content-Type: text/plain", "body");
    http_spec(&b, 0xff, "GET /health HTTP/1.0\r\n\r\n", "", "");
    emit("admin_http", "post-and-raw", &b);

    http_spec(&b, GET, "/health", "", "");
    http_spec(&b, GET, "/metrics", "Accept: text/plain", "");
    http_spec(&b, HEAD, "/metrics/summary", "", "");
    http_spec(&b, POST, "/health", "", "x");
    emit("client_http", "paths", &b);
    free(b.p);
}

/* ---- snapshot and oplog: records a real master exports ------------------------------------- */

typedef struct records {
    buf_t framed; /* u32 length + record, as records.bin */
    buf_t first;  /* the first record alone */
    uint32_t count;
} records_t;

static int collect(void *arg, const uint8_t *record, size_t len)
{
    records_t *r = arg;
    put_le(&r->framed, len, 4);
    put(&r->framed, record, len);
    if (r->count++ == 0)
        put(&r->first, record, len);
    return 0;
}

static void export_records(records_t *r)
{
    mc_master_t *m = NULL;
    if (mc_master_create(NULL, &m) != 0)
        abort();
    mc_segment_info_t seg = {0};
    snprintf(seg.id, sizeof(seg.id), "seg-0");
    snprintf(seg.name, sizeof(seg.name), "127.0.0.1:17000");
    seg.base = 0x10000000ull;
    seg.size = 1ull << 28;
    snprintf(seg.protocol, sizeof(seg.protocol), "tcp");
    if (mc_master_mount_segment(m, "c0", &seg) != 0)
        abort();
    static const char *const keys[] = {"key-1", "key-2", "a/b c"};
    for (size_t i = 0; i < 3; i++) {
        mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
        mc_replica_desc_t d[4];
        size_t n = 0;
        uint32_t crc = 0x1000u + (uint32_t)i;
        if (mc_master_put_start(m, "c0", keys[i], 100 + 4096 * i, &cfg, d, 4, &n) != 0 ||
            mc_master_put_end_checksum(m, "c0", keys[i], &crc) != 0)
            abort();
    }
    uint64_t start = 0;
    if (mc_master_export(m, &start, collect, r) != 0 || r->count != 3)
        abort();
    mc_master_destroy(m);
}

static void corpus_snapshot_oplog(void)
{
    records_t r = {0};
    export_records(&r);
    for (int clean = 0; clean < 2; clean++) {
        buf_t b = {0};
        put_u8(&b, (uint8_t)clean);
        put_le(&b, 12, 8);
        put_le(&b, r.count, 4);
        put(&b, r.framed.p, r.framed.n);
        emit("snapshot", clean ? "clean" : "periodic", &b);
        free(b.p);
    }
    buf_t b = {0};
    put_u8(&b, 0x02);
    put_le(&b, 0, 8);
    put_le(&b, 0, 4);
    static const char manifest[] = "mooncake-c-snapshot 1\nseq 1\nclean 1\nobjects 0\n"
                                   "records.bin 0 00000000\n";
    put_chunk(&b, manifest, sizeof(manifest) - 1);
    emit("snapshot", "empty-manifest", &b);

    /* oplog: batch 1 SETs a record, batch 2 DELetes a key */
    Mc__OplogEntry set = MC__OPLOG_ENTRY__INIT;
    set.seq = 1;
    set.type = 1;
    set.key = "key-1";
    set.record = (ProtobufCBinaryData){r.first.n, r.first.p};
    Mc__OplogEntry del = MC__OPLOG_ENTRY__INIT;
    del.seq = 2;
    del.type = 2;
    del.key = "key-2";
    Mc__OplogEntry *e1[] = {&set}, *e2[] = {&del};
    Mc__OplogBatch b1 = MC__OPLOG_BATCH__INIT, b2 = MC__OPLOG_BATCH__INIT;
    b1.batch_id = 1;
    b1.view_version = 1;
    b1.first_seq = 1;
    b1.n_entries = 1;
    b1.entries = e1;
    b2.batch_id = 2;
    b2.view_version = 1;
    b2.first_seq = 2;
    b2.n_entries = 1;
    b2.entries = e2;
    buf_t m = {0};
    put_u8(&b, 0);
    put_msg(&m, &b1.base);
    put_chunk(&b, m.p, m.n);
    m.n = 0;
    put_msg(&m, &b2.base);
    put_chunk(&b, m.p, m.n);
    emit("oplog", "set-del", &b);
    free(m.p);
    free(b.p);
    free(r.framed.p);
    free(r.first.p);
}

/* ---- etcd answers ------------------------------------------------------------------------ */

static void etcd_seed(const char *name, uint8_t op, int n, ...)
{
    buf_t b = {0};
    put_u8(&b, op);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *answer = va_arg(ap, const char *);
        put_le(&b, 200, 2);
        put_chunk(&b, answer, strlen(answer));
    }
    va_end(ap);
    emit("etcd", name, &b);
    free(b.p);
}

static void corpus_etcd(void)
{
    /* "mooncake/key" = "value", "127.0.0.1:50051" in base64 */
    const char *kv = "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"bW9vbmNha2Uva2V5\","
                     "\"value\":\"dmFsdWU=\",\"create_revision\":\"3\",\"mod_revision\":\"4\","
                     "\"version\":\"2\",\"lease\":\"7\"}],\"count\":\"1\"}";
    etcd_seed("get", 0, 1, kv);
    etcd_seed("range-more", 1, 1,
              "{\"header\":{\"revision\":\"5\"},\"more\":true,\"kvs\":[{\"key\":\"YQ==\","
              "\"value\":\"\"},{\"key\":\"YWI=\",\"value\":\"AAE=\"}]}");
    etcd_seed("put", 2, 1, "{\"header\":{\"revision\":\"6\"}}");
    etcd_seed("delete", 3, 1, "{\"header\":{\"revision\":\"6\"},\"deleted\":\"2\"}");
    etcd_seed("lease-grant", 5, 1, "{\"ID\":\"7587862640941577230\",\"TTL\":\"5\"}");
    etcd_seed("keepalive", 6, 1, "{\"result\":{\"ID\":\"1234\",\"TTL\":\"5\"}}");
    etcd_seed("revoke-missing", 7, 1, "{\"error\":\"requested lease not found\",\"code\":5}");
    etcd_seed("txn", 8, 1,
              "{\"header\":{\"revision\":\"9\"},\"succeeded\":true,\"responses\":[{"
              "\"response_range\":{\"kvs\":[{\"key\":\"aw==\",\"value\":\"dg==\"}]}},"
              "{\"response_put\":{}}]}");
    etcd_seed("create-if-absent", 9, 1,
              "{\"succeeded\":false,\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":"
              "\"ZWxlY3Rpb24=\",\"value\":\"b3RoZXI6MQ==\",\"create_revision\":\"11\"}]}}]}");
    etcd_seed("master-view", 10, 1,
              "{\"kvs\":[{\"key\":\"bW9vbmNha2Utc3RvcmUvZnV6ei9tYXN0ZXJfdmlldw==\",\"value\":"
              "\"MTI3LjAuMC4xOjUwMDUx\",\"create_revision\":\"21\"}]}");
}

/* ---- dummy protocol ---------------------------------------------------------------------- */

static void corpus_dummy(void)
{
    buf_t b = {0};
    uint64_t id = 10;
    Mc__DummyRequest hello = MC__DUMMY_REQUEST__INIT;
    hello.client_id = "dummy-1";
    char *keys[] = {"key-1", "key-2"};
    Mc__DummyRange r1 = MC__DUMMY_RANGE__INIT, r2 = MC__DUMMY_RANGE__INIT;
    r1.region = 1;
    r1.size = 4096;
    r2.region = 1;
    r2.offset = 8192;
    r2.size = 100;
    Mc__DummyRange *ranges[] = {&r1, &r2};
    Mc__DummyRequest write = MC__DUMMY_REQUEST__INIT;
    write.keys = keys;
    write.n_keys = 2;
    write.ranges = ranges;
    write.n_ranges = 2;
    Mc__DummyRequest one = MC__DUMMY_REQUEST__INIT;
    one.keys = keys;
    one.n_keys = 1;
    one.flag = 4;
    put_u8(&b, 1); /* map region 1 first */
    put_frame(&b, MC_DUMMY_HELLO, id++, &hello.base);
    put_frame(&b, MC_DUMMY_PING, id++, NULL);
    put_frame(&b, MC_DUMMY_WRITE, id++, &write.base);
    put_frame(&b, MC_DUMMY_READ, id++, &write.base);
    put_frame(&b, MC_DUMMY_EXIST, id++, &write.base);
    put_frame(&b, MC_DUMMY_GET_SIZE, id++, &one.base);
    put_frame(&b, MC_DUMMY_REPLICA_DESC, id++, &one.base);
    write.force = 1;
    put_frame(&b, MC_DUMMY_REMOVE, id++, &write.base);
    emit("dummy", "write-read-remove", &b);
    Mc__DummyRequest regex = MC__DUMMY_REQUEST__INIT;
    regex.regex = "^key-";
    regex.force = 1;
    char *targets[] = {"127.0.0.1:17000"};
    Mc__DummyRequest task = MC__DUMMY_REQUEST__INIT;
    task.keys = keys;
    task.n_keys = 1;
    task.targets = targets;
    task.n_targets = 1;
    Mc__DummyRequest query = MC__DUMMY_REQUEST__INIT;
    query.task_id = "00000000-0000-0000-0000-000000000001";
    Mc__DummyRequest unmap = MC__DUMMY_REQUEST__INIT;
    unmap.ranges = ranges;
    unmap.n_ranges = 1;
    put_u8(&b, 1);
    put_frame(&b, MC_DUMMY_HEALTH, id++, NULL);
    put_frame(&b, MC_DUMMY_OFFLOAD_STATS, id++, NULL);
    put_frame(&b, MC_DUMMY_SET_OFFLOADING, id++, &one.base);
    put_frame(&b, MC_DUMMY_REMOVE_BY_REGEX, id++, &regex.base);
    put_frame(&b, MC_DUMMY_REMOVE_ALL, id++, &regex.base);
    put_frame(&b, MC_DUMMY_CREATE_TASK, id++, &task.base);
    put_frame(&b, MC_DUMMY_QUERY_TASK, id++, &query.base);
    put_frame(&b, MC_DUMMY_UNMAP, id++, &unmap.base);
    emit("dummy", "admin-calls", &b);
    free(b.p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <fuzz/corpus>\n", argv[0]);
        return 2;
    }
    out_root = argv[1];
    if (mkdir(out_root, 0755) != 0 && errno != EEXIST)
        return 1;
    corpus_parse();
    corpus_wire();
    corpus_rpc();
    corpus_segment_desc();
    corpus_object_layout();
    corpus_offload_files();
    corpus_offload_fetch();
    corpus_auth();
    corpus_te_server();
    corpus_http();
    corpus_snapshot_oplog();
    corpus_etcd();
    corpus_dummy();
    return 0;
}
