/*
 * frame.h — the fixed frame header every mooncake-c connection speaks.
 *
 * Layout (24 bytes, little-endian):
 *   u32 magic "MCK1" | u16 version | u16 opcode | u64 request_id | u32 body_len | u32 flags
 * followed by `body_len` bytes of protobuf-c message. Object bytes never go through protobuf:
 * opcodes that carry data say so, and the raw bytes follow the body.
 *
 * Decoding is bounded: a bad magic, an unknown version, or a body longer than the caller's
 * maximum is rejected before anything is allocated; the caller then closes the connection.
 * Pure functions; thread-safe.
 */
#ifndef MC_WIRE_FRAME_H
#define MC_WIRE_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define MC_FRAME_MAGIC 0x314b434du /* "MCK1" read as little-endian u32 */
#define MC_FRAME_VERSION 1
#define MC_FRAME_HEADER_SIZE 24
/* Default bound on a control body; data bytes are bounded separately by the registered ranges. */
#define MC_FRAME_DEFAULT_MAX_BODY (16u << 20)

typedef struct mc_frame_header {
    uint32_t magic;
    uint16_t version;
    uint16_t opcode;
    uint64_t request_id;
    uint32_t body_len;
    uint32_t flags;
} mc_frame_header_t;

/* Writes the 24-byte encoding of `h` (magic and version filled in) into `out`. */
void mc_frame_encode(uint16_t opcode, uint64_t request_id, uint32_t body_len, uint32_t flags,
                     uint8_t out[MC_FRAME_HEADER_SIZE]);

/*
 * Decodes and validates 24 bytes. Returns 0, or MC_ERR_DESERIALIZE_FAIL for a bad magic or
 * version, or MC_ERR_BUFFER_OVERFLOW when body_len > max_body.
 */
int mc_frame_decode(const uint8_t in[MC_FRAME_HEADER_SIZE], uint32_t max_body,
                    mc_frame_header_t *out);

#endif /* MC_WIRE_FRAME_H */
