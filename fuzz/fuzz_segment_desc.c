/*
 * fuzz_segment_desc.c — fuzz target for Transfer Engine segment descriptors as peers and the
 * metadata services hand them over (src/transfer/segment_metadata.c): the protobuf SegmentDesc
 * of a handshake reply (mc_desc_unpack) and the JSON text stored in the HTTP or etcd metadata
 * service (mc_desc_from_json).
 *
 * Input: byte 0 bit 0 picks the decoder; the rest is the descriptor. A descriptor that decodes
 * is used as the engine uses one: every region is looked up (mc_desc_find, also with ranges
 * that overflow), then it is encoded both ways and each encoding must decode to the same
 * descriptor.
 */
#include "fuzz_common.h"
#include "transfer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_segment_desc: %s\n", what);
        abort();
    }
}

static int same(const mc_segment_desc_t *a, const mc_segment_desc_t *b)
{
    if (strcmp(a->name, b->name) || strcmp(a->protocol, b->protocol) ||
        strcmp(a->host_id, b->host_id) || strcmp(a->shm_socket, b->shm_socket) ||
        a->version != b->version || a->count != b->count ||
        a->rdma_address_len != b->rdma_address_len ||
        (a->rdma_address_len && memcmp(a->rdma_address, b->rdma_address, a->rdma_address_len)))
        return 0;
    for (size_t i = 0; i < a->count; i++) {
        const mc_remote_region_t *x = &a->regions[i], *y = &b->regions[i];
        if (x->addr != y->addr || x->length != y->length || x->shm_index != y->shm_index ||
            x->rkey_len != y->rkey_len || (x->rkey_len && memcmp(x->rkey, y->rkey, x->rkey_len)))
            return 0;
    }
    return 1;
}

static void use(const mc_segment_desc_t *d, int from_json)
{
    for (size_t i = 0; i < d->count; i++) {
        const mc_remote_region_t *g = &d->regions[i];
        const mc_remote_region_t *f = mc_desc_find(d, g->addr, g->length);
        check(!f || (g->addr >= f->addr && g->addr - f->addr <= f->length), "a region found");
        mc_desc_find(d, g->addr + g->length, 1);
        mc_desc_find(d, UINT64_MAX - 1, 2);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    mc_segment_desc_t back;
    /* A pack of a descriptor with rkeys but no rdma address leaves the rkeys out (a tcp peer has
     * none), so that round trip is exact only for descriptors as engines build them. */
    int has_rkeys = 0;
    for (size_t i = 0; i < d->count; i++)
        has_rkeys |= d->regions[i].rkey_len != 0;
    if (mc_desc_pack(d, &buf, &len) == 0) {
        check(mc_desc_unpack(buf, len, &back) == 0, "a packed descriptor does not unpack");
        check(!(d->rdma_address_len || !has_rkeys) || same(d, &back),
              "a packed descriptor unpacks differently");
        mc_desc_free(&back);
    }
    free(buf);
    char *json = NULL;
    if (mc_desc_to_json(d, &json) == 0) {
        int rc = mc_desc_from_json(json, strlen(json), &back);
        /* JSON integers are signed 64-bit: an address at or above 2^63 does not round-trip, and
         * the decoder refuses such text only when it came from JSON in the first place. */
        if (rc == 0) {
            check(!from_json || same(d, &back), "a JSON descriptor decodes differently");
            mc_desc_free(&back);
        }
        free(json);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int json = data[0] & 1;
    /* The bytes in a buffer of exactly their size: a read past them is caught. */
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        abort();
    memcpy(buf, data + 1, n);
    mc_segment_desc_t d;
    int rc = json ? mc_desc_from_json((const char *)buf, n, &d) : mc_desc_unpack(buf, n, &d);
    if (rc == 0) {
        use(&d, json);
        mc_desc_free(&d);
    }
    free(buf);
    return 0;
}
