/*
 * pb_decode.c — budgeted protobuf-c decoding of network input (pb_decode.h).
 *
 * The budget allocator hands out plain malloc memory, so a decoded message is freed with the
 * default allocator (NULL) like any other; only unpack itself sees the budget. Charges are never
 * given back on free: the parser frees its scratch slabs before it allocates the message's
 * arrays, and counting both is the conservative choice.
 */
#include "pb_decode.h"

#include "log.h"
#include "mooncake/errors.h"

#include <stdatomic.h>
#include <stdlib.h>

#define PB_CHUNK_OVERHEAD 16u /* glibc malloc: chunk header, and rounding to 16 bytes */
#define PB_REFUSE_LOG_INTERVAL_MS 1000

typedef struct pb_budget {
    ProtobufCAllocator allocator;
    size_t left;
    int exceeded;
} pb_budget_t;

static atomic_uint_fast64_t refused;
static atomic_uint_fast64_t refused_logged_ms;

size_t mc_pb_decode_budget(size_t len)
{
    size_t cap = MC_PB_DECODE_CAP;
    if (len > (cap - MC_PB_DECODE_FLOOR) / MC_PB_DECODE_RATIO)
        return cap;
    return MC_PB_DECODE_FLOOR + MC_PB_DECODE_RATIO * len;
}

static void *pb_budget_alloc(void *data, size_t size)
{
    pb_budget_t *b = data;
    size_t cost = ((size + 15u) & ~(size_t)15u) + PB_CHUNK_OVERHEAD;
    if (size > b->left || cost > b->left) {
        b->exceeded = 1;
        return NULL;
    }
    void *p = malloc(size);
    if (p)
        b->left -= cost;
    return p;
}

static void pb_budget_free(void *data, void *p)
{
    free(p);
}

int mc_pb_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *body, size_t len,
                 ProtobufCMessage **out)
{
    pb_budget_t b = {{pb_budget_alloc, pb_budget_free, NULL}, mc_pb_decode_budget(len), 0};
    b.allocator.allocator_data = &b;
    *out = protobuf_c_message_unpack(desc, &b.allocator, len, body);
    if (*out)
        return 0;
    if (!b.exceeded)
        return MC_ERR_DESERIALIZE_FAIL;
    atomic_fetch_add(&refused, 1);
    if (mc_log_ratelimit(&refused_logged_ms, PB_REFUSE_LOG_INTERVAL_MS))
        MC_WARN("refused to decode a %s of %zu bytes: it needs more than its %zu-byte memory "
                "budget (%llu such refusals so far)",
                desc->name, len, mc_pb_decode_budget(len),
                (unsigned long long)atomic_load(&refused));
    return MC_ERR_BUFFER_OVERFLOW;
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
