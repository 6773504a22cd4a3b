/*
 * pb_decode.h — decoding protobuf-c messages that came from the network, within a memory budget.
 *
 * protobuf-c's unpack allocates whatever the body describes before any caller can look at it:
 * 64 MiB of empty repeated strings (2 bytes each on the wire) become 32 million string
 * allocations plus the parser's per-field bookkeeping, over a gigabyte, before a handler could
 * check a count. mc_pb_decode gives unpack an allocator that charges every block it holds
 * (with malloc's per-chunk overhead; blocks the parser frees again are given back) against a
 * budget of
 *
 *     min(MC_PB_DECODE_FLOOR + MC_PB_DECODE_RATIO * body length, MC_PB_DECODE_CAP)
 *
 * and fails the allocation that would exceed it, so the decoder stops and frees what it built.
 * Legitimate requests need well under that: their batches are bounded (65 536 keys), so what a
 * short string or number costs beyond its wire size stays within the floor, and long strings
 * cost little more than their bytes.
 *
 * Replies (mc_pb_decode_reply) come from the server a client chose to call and are dense in
 * small nested messages (a reply of 65 536 keys with 16 replica descriptors each decodes to
 * between 3 and 4 times its wire size), so they get MC_PB_DECODE_FLOOR +
 * MC_PB_DECODE_REPLY_RATIO * length, capped at MC_PB_DECODE_REPLY_CAP: the largest legitimate
 * reply decodes with room to spare, a hostile one still cannot take more than the cap.
 *
 * mc_pb_count_field counts a field's occurrences on the wire without decoding, so a handler can
 * refuse a batch that is too long with a proper reply instead of decoding it.
 *
 * Every refusal for the budget is counted (process-wide, mc_pb_decode_refused) and logged at
 * most once a second. Thread-safe.
 */
#ifndef MC_WIRE_PB_DECODE_H
#define MC_WIRE_PB_DECODE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#define MC_PB_DECODE_FLOOR (16u << 20)
#define MC_PB_DECODE_RATIO 2u
#define MC_PB_DECODE_CAP (160u << 20)
#define MC_PB_DECODE_REPLY_RATIO 6u
#define MC_PB_DECODE_REPLY_CAP (512u << 20)

/* The budget for a request body / a reply body of `len` bytes (bytes of heap, malloc overhead
 * included). */
size_t mc_pb_decode_budget(size_t len);
size_t mc_pb_decode_reply_budget(size_t len);

/*
 * Unpacks body[0..len) as `desc`. 0 and *out (free it with protobuf_c_message_free_unpacked(*out,
 * NULL), or the message type's __free_unpacked with NULL), MC_ERR_DESERIALIZE_FAIL when the
 * body is malformed, MC_ERR_BUFFER_OVERFLOW when decoding it would take more memory than the
 * budget (nothing stays allocated).
 */
int mc_pb_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *body, size_t len,
                 ProtobufCMessage **out);
/* The same for a reply a client receives (the reply budget). */
int mc_pb_decode_reply(const ProtobufCMessageDescriptor *desc, const uint8_t *body, size_t len,
                       ProtobufCMessage **out);

/*
 * Occurrences of top-level field number `field` in body[0..len) (a packed repeated field counts
 * once), counting no further than max + 1. A malformed body is counted up to where it breaks
 * (the decoder refuses it anyway).
 */
size_t mc_pb_count_field(const uint8_t *body, size_t len, uint32_t field, size_t max);

/* Decodes refused for the budget in this process since it started. */
uint64_t mc_pb_decode_refused(void);

#endif /* MC_WIRE_PB_DECODE_H */
