/*
 * checksum.h — CRC32C (Castagnoli, as in iSCSI and ext4), on isa-l's hardware-accelerated
 * crc32_iscsi: the store's end-to-end value checksum and the object files' checksums.
 *
 * Pure and thread-safe.
 */
#ifndef MC_COMMON_CHECKSUM_H
#define MC_COMMON_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* Standard CRC32C, chainable: crc = mc_crc32c(crc, ...), starting from 0. */
uint32_t mc_crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * Copies src[0..len) to dst (the ranges must not overlap) and returns mc_crc32c(crc, the bytes)
 * computed on the way: each chunk is checksummed right after it is copied, while it is still in
 * cache, so a copy and its checksum cost little more than the copy alone. The checksum is taken
 * of the source's chunks (of_source = 1: what a writer meant to store, even if the destination
 * is shared memory another process could change meanwhile) or of the destination's (0: what a
 * reader got).
 */
uint32_t mc_copy_crc32c(void *dst, const void *src, size_t len, uint32_t crc, int of_source);

#endif
