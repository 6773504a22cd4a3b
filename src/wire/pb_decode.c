/*
 * pb_decode.c — budgeted protobuf-c decoding of network input (pb_decode.h).
 *
 * The budget allocator hands out plain malloc memory, so a decoded message is freed with the
 * default allocator (NULL) like any other; only unpack itself sees the budget. It charges what
 * is live: each block costs its usable size plus malloc's chunk header (malloc_usable_size), and
 * the parser's scratch blocks, freed during unpack, are given back when freed.
 */
#include "pb_decode.h"

#include "log.h"
#include "mooncake/errors.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>

#define PB_CHUNK_OVERHEAD 16u /* glibc malloc: the chunk header beside the usable size */
#define PB_REFUSE_LOG_INTERVAL_MS 1000

typedef struct pb_budget {
    ProtobufCAllocator allocator;
    size_t left;
    int exceeded;
} pb_budget_t;

static atomic_uint_fast64_t refused;
static atomic_uint_fast64_t refused_logged_ms;

/* min(floor + ratio * len, cap), without overflow. */
static size_t pb_budget(size_t len, size_t ratio, size_t cap)
{
    if (len > (cap - MC_PB_DECODE_FLOOR) / ratio)
        return cap;
    return MC_PB_DECODE_FLOOR + ratio * len;
}

size_t mc_pb_decode_budget(size_t len)
{
    return pb_budget(len, MC_PB_DECODE_RATIO, MC_PB_DECODE_CAP);
}

size_t mc_pb_decode_reply_budget(size_t len)
{
    return pb_budget(len, MC_PB_DECODE_REPLY_RATIO, MC_PB_DECODE_REPLY_CAP);
}

static void *pb_budget_alloc(void *data, size_t size)
{
    pb_budget_t *b = data;
    if (size > b->left) { /* cannot fit, whatever malloc rounds it to */
        b->exceeded = 1;
        return NULL;
    }
    void *p = malloc(size);
    if (!p)
        return NULL;
    size_t cost = malloc_usable_size(p) + PB_CHUNK_OVERHEAD;
    if (cost > b->left) {
        free(p);
        b->exceeded = 1;
        return NULL;
    }
    b->left -= cost;
    return p;
}

static void pb_budget_free(void *data, void *p)
{
    pb_budget_t *b = data;
    if (p)
        b->left += malloc_usable_size(p) + PB_CHUNK_OVERHEAD;
    free(p);
}

/* Unpacks within `budget` bytes (see mc_pb_decode). */
static int pb_decode_within(const ProtobufCMessageDescriptor *desc, const uint8_t *body, size_t len,
                            size_t budget, ProtobufCMessage **out)
{
    pb_budget_t b = {{pb_budget_alloc, pb_budget_free, NULL}, budget, 0};
    b.allocator.allocator_data = &b;
    *out = protobuf_c_message_unpack(desc, &b.allocator, len, body);
    if (*out)
        return 0;
    if (!b.exceeded)
        return MC_ERR_DESERIALIZE_FAIL;
    uint64_t n = atomic_fetch_add(&refused, 1) + 1;
    if (mc_log_ratelimit(&refused_logged_ms, PB_REFUSE_LOG_INTERVAL_MS))
        MC_WARN("refused to decode a %s of %zu bytes: it needs more than its %zu-byte memory "
                "budget (%llu such refusals so far)",
                desc->name, len, budget, (unsigned long long)n);
    return MC_ERR_BUFFER_OVERFLOW;
}

int mc_pb_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *body, size_t len,
                 ProtobufCMessage **out)
{
    return pb_decode_within(desc, body, len, mc_pb_decode_budget(len), out);
}

int mc_pb_decode_reply(const ProtobufCMessageDescriptor *desc, const uint8_t *body, size_t len,
                       ProtobufCMessage **out)
{
    return pb_decode_within(desc, body, len, mc_pb_decode_reply_budget(len), out);
}

/* Reads a varint at *at; 0 when the body ends inside it or it is longer than 10 bytes. */
static int pb_varint(const uint8_t *p, size_t len, size_t *at, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 70 && *at < len; shift += 7) {
        uint8_t byte = p[(*at)++];
        *v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return 1;
    }
    return 0;
}

/* Skips the value of a field of wire type `type` at *at; 0 when the body is malformed there. */
static int pb_skip(const uint8_t *p, size_t len, size_t *at, unsigned type)
{
    uint64_t v;
    switch (type) {
    case 0: /* varint */
        return pb_varint(p, len, at, &v);
    case 1: /* 64-bit */
        v = 8;
        break;
    case 2: /* length-delimited */
        if (!pb_varint(p, len, at, &v))
            return 0;
        break;
    case 5: /* 32-bit */
        v = 4;
        break;
    default: /* groups and invalid wire types: protobuf-c refuses the body */
        return 0;
    }
    if (v > len - *at)
        return 0;
    *at += (size_t)v;
    return 1;
}

size_t mc_pb_count_field(const uint8_t *body, size_t len, uint32_t field, size_t max)
{
    size_t n = 0, at = 0;
    while (at < len && n <= max) {
        uint64_t tag;
        if (!pb_varint(body, len, &at, &tag) || !pb_skip(body, len, &at, (unsigned)(tag & 7)))
            break;
        if ((tag >> 3) == field)
            n++;
    }
    return n;
}

uint64_t mc_pb_decode_refused(void)
{
    return atomic_load(&refused);
}
