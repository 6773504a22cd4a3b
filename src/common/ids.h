/*
 * ids.h — random bytes and the random identifiers built from them: client ids, segment ids,
 * task ids (RFC 4122 version-4 UUIDs in text form).
 *
 * Randomness comes from the kernel's getrandom(2), which is cryptographically strong and needs no
 * file descriptor (so it works under a full fd table and in a chroot without /dev). It blocks
 * only before the kernel's pool is first initialised, early at boot. Never rand(): ids from two
 * processes started in the same nanosecond must still differ.
 *
 * Every function is thread-safe and keeps no state.
 */
#ifndef MC_COMMON_IDS_H
#define MC_COMMON_IDS_H

#include <stddef.h>
#include <stdint.h>

/* Length of a text UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", without its NUL. */
#define MC_UUID_TEXT_LEN 36

/*
 * Fills buf[0..n) with random bytes, retrying interrupted calls and short reads.
 * 0, or MC_ERR_INTERNAL_ERROR when the kernel has no randomness to give (getrandom unsupported);
 * buf's contents are then unspecified.
 */
int mc_random_bytes(void *buf, size_t n);

/* *out = a random 64-bit value. 0 or MC_ERR_INTERNAL_ERROR, as mc_random_bytes. */
int mc_random_u64(uint64_t *out);

/*
 * Writes a random (version 4, RFC 4122 variant) UUID as 36 lowercase hex-and-dash characters
 * plus a NUL into out, the form /proc/sys/kernel/random/uuid gives. 0, or MC_ERR_INTERNAL_ERROR
 * (out is then "").
 */
int mc_uuid_v4(char out[MC_UUID_TEXT_LEN + 1]);

#endif /* MC_COMMON_IDS_H */
