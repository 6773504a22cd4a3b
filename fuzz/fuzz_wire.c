/*
 * fuzz_wire.c — fuzz target for src/wire's decoding of everything a peer sends: the 24-byte frame
 * header (mc_frame_decode) and protobuf-c bodies under the decoding memory budget
 * (mc_pb_decode, mc_pb_decode_reply), and the wire-level field counter handlers use to refuse
 * oversized batches before decoding (mc_pb_count_field), for every message type of
 * src/wire/proto (every .proto file).
 *
 * Input: byte 0 picks the message type, byte 1 the field number to count, the next 24 bytes
 * are a frame header and the rest is the body. Checks: a header that decodes encodes back to the
 * same 24 bytes; a body that decodes as a request also decodes as a reply (the reply budget is
 * the larger); the counter never counts past its limit.
 */
#include "frame.h"
#include "fuzz_common.h"
#include "mooncake/errors.h"
#include "pb_decode.h"

#include "wire_messages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what, const ProtobufCMessageDescriptor *d)
{
    if (!ok) {
        fprintf(stderr, "fuzz_wire: %s (%s)\n", what, d ? d->name : "frame");
        abort();
    }
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len ? *len : 1);
    if (!buf)
        abort();
    check(protobuf_c_message_pack(m, buf) == *len, "packed size", m->descriptor);
    return buf;
}

static void fuzz_frame(const uint8_t *raw)
{
    mc_frame_header_t h;
    for (uint32_t max = 0; max <= (1u << 16); max += (1u << 16) / 2) {
        int rc = mc_frame_decode(raw, max, &h);
        if (rc != 0)
            continue;
        check(h.body_len <= max, "a body longer than the maximum", NULL);
        uint8_t again[MC_FRAME_HEADER_SIZE];
        mc_frame_encode(h.opcode, h.request_id, h.body_len, h.flags, again);
        check(memcmp(again, raw, sizeof(again)) == 0, "a header that does not encode back", NULL);
    }
}

static void fuzz_body(const ProtobufCMessageDescriptor *d, const uint8_t *body, size_t len)
{
    ProtobufCMessage *m = NULL, *r = NULL;
    int rc = mc_pb_decode(d, body, len, &m);
    int rrc = mc_pb_decode_reply(d, body, len, &r);
    check(rc == 0 || rc == MC_ERR_DESERIALIZE_FAIL || rc == MC_ERR_BUFFER_OVERFLOW, "a result", d);
    check(rc != 0 || rrc == 0, "a request that decodes but not as a reply", d);
    if (r)
        protobuf_c_message_free_unpacked(r, NULL);
    if (rc != 0)
        return;
    /* What protobuf-c packs a decoded message to is its business (it keeps unknown fields as it
     * read them, field number 0 included), so only the packed size is checked. */
    size_t n;
    free(pack(m, &n));
    protobuf_c_message_free_unpacked(m, NULL);
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
    mc_fuzz_in_t in = {data, size};
    const ProtobufCMessageDescriptor *d = mc_fuzz_messages[mc_fuzz_u8(&in) % MC_FUZZ_NMESSAGES];
    uint32_t field = mc_fuzz_u8(&in);
    uint8_t raw[MC_FRAME_HEADER_SIZE] = {0};
    size_t hlen;
    const uint8_t *hp = mc_fuzz_bytes(&in, sizeof(raw), &hlen);
    memcpy(raw, hp, hlen);
    fuzz_frame(raw);

    /* The body in a buffer of exactly its size: a read past it is caught. */
    uint8_t *body = malloc(in.n ? in.n : 1);
    if (!body)
        abort();
    memcpy(body, in.p, in.n);
    size_t max = field & 0x40 ? 3 : 65536;
    check(mc_pb_count_field(body, in.n, field & 0x3f, max) <= max + 1, "count past its limit", d);
    fuzz_body(d, body, in.n);
    free(body);
    return 0;
}
