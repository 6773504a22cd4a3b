/*
 * frame.c — encode and validate the fixed frame header (frame.h).
 */
#include "frame.h"

#include "mooncake/errors.h"

#include <string.h>

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void mc_frame_encode(uint16_t opcode, uint64_t request_id, uint32_t body_len, uint32_t flags,
                     uint8_t out[MC_FRAME_HEADER_SIZE])
{
    put_u32(out, MC_FRAME_MAGIC);
    put_u16(out + 4, MC_FRAME_VERSION);
    put_u16(out + 6, opcode);
    put_u64(out + 8, request_id);
    put_u32(out + 16, body_len);
    put_u32(out + 20, flags);
}

int mc_frame_decode(const uint8_t in[MC_FRAME_HEADER_SIZE], uint32_t max_body,
                    mc_frame_header_t *out)
{
    mc_frame_header_t h;
    h.magic = get_u32(in);
    h.version = get_u16(in + 4);
    h.opcode = get_u16(in + 6);
    h.request_id = get_u64(in + 8);
    h.body_len = get_u32(in + 16);
    h.flags = get_u32(in + 20);
    if (h.magic != MC_FRAME_MAGIC || h.version != MC_FRAME_VERSION)
        return MC_ERR_DESERIALIZE_FAIL;
    if (h.body_len > max_body)
        return MC_ERR_BUFFER_OVERFLOW;
    *out = h;
    return 0;
}
