/*
 * object_layout.h — the "Mooncake-style object": how one key/value pair is laid out as one file,
 * shared by every FS adapter (posix, daos) and the benchmark.
 *
 * Path:   <root>/<hh>/<name>
 *         hh   = mc_obj_dir_name(mc_obj_dir_index(key)): two lowercase hex digits, the top byte
 *                of XXH3-64(key), so objects spread over 256 directories;
 *         name = mc_obj_escape_key(key): bytes outside [A-Za-z0-9._-] and a leading '.' become
 *                "%XX" (uppercase hex) — reversible with mc_obj_unescape_name(); when the escaped
 *                key is longer than MC_FS_NAME_MAX_ESCAPED the name is
 *                "<first 160 escaped bytes>~<XXH3-128(key) as 32 hex digits>" (a '~' never
 *                appears in a plain escaped name) and the key is recovered from the header.
 *         Names starting with '.' are never objects: temporaries are ".t<29 hex>" (their
 *         writer's identity, mc_obj_temp_name).
 *
 * File:   header (header_len bytes, little-endian) then the value.
 *   off  size  field
 *     0     8  magic "MCOBJ\r\n\x1a"
 *     8     2  version (1)
 *    10     2  flags (0)
 *    12     4  header_len  bytes before the value = mc_obj_header_len(key_len, value_size)
 *    16     8  value_size
 *    24     4  key_len
 *    28     4  value_crc   CRC32C (Castagnoli) of the value
 *    32     4  header_crc  CRC32C of bytes [0,32) and [36,40+key_len)
 *    36     4  reserved (0)
 *    40     …  key bytes (no terminator), then zero padding up to header_len
 * header_len is 40 + key_len, rounded up to a multiple of MC_OBJ_VALUE_ALIGN (4 KiB) when the
 * value has at least MC_OBJ_ALIGN_MIN bytes: large values then start on a page boundary of the
 * file, so page-cache copies stay page-aligned (about 20% cheaper than a value shifted by a few
 * bytes) and direct I/O stays possible; small values keep the compact form. A reader that knows
 * the key and the value size knows header_len, so one exact-size read fetches header and value.
 *
 * Transfers: an object file is one byte stream [header | value] held in two caller buffers.
 * mc_obj_build_iovs() cuts the range [off, off+len) of such a stream into `pieces` roughly equal
 * scatter-gather pieces (plus one where a piece crosses from header to value), which both
 * adapters hand to pwritev/preadv or dfs_write/dfs_read. Transfers are cut at file offsets that
 * are multiples of the transfer size, so they line up with DAOS chunks.
 *
 * Everything here is pure and thread-safe.
 */
#ifndef MC_STORAGE_OBJECT_LAYOUT_H
#define MC_STORAGE_OBJECT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "checksum.h"
#include "mooncake/fs_adapter.h"

#define MC_OBJ_MAGIC "MCOBJ\r\n\x1a"
#define MC_OBJ_MAGIC_LEN 8
#define MC_OBJ_VERSION 1
#define MC_OBJ_HEADER_FIXED 40
/* The decodable part of any header: fixed fields and the longest key. */
#define MC_OBJ_HEADER_MAX (MC_OBJ_HEADER_FIXED + MC_FS_KEY_MAX)
#define MC_OBJ_VALUE_ALIGN 4096      /* bytes; file offset of large values */
#define MC_OBJ_ALIGN_MIN (64 * 1024) /* bytes; values this large are aligned */

#define MC_OBJ_DIR_COUNT 256              /* hash directories 00..ff */
#define MC_OBJ_PROBE_DIR MC_OBJ_DIR_COUNT /* index of the health-check directory */
#define MC_OBJ_PROBE_DIR_NAME ".probe"
#define MC_OBJ_NAME_MAX 256      /* buffer size for a name incl. NUL (NAME_MAX + 1) */
#define MC_OBJ_HASHED_PREFIX 160 /* escaped bytes kept in a hashed name */
#define MC_OBJ_TEMP_PREFIX ".t"

typedef struct mc_obj_header {
    uint16_t version;
    uint32_t header_len; /* bytes before the value, padding included */
    uint64_t value_size;
    uint32_t key_len;
    uint32_t value_crc;
    const char *key; /* points into the decoded buffer; not NUL-terminated */
} mc_obj_header_t;

/* One caller buffer of the [header | value] stream. */
typedef struct mc_obj_seg {
    void *base;
    uint64_t len;
} mc_obj_seg_t;

/* mc_crc32c (standard CRC32C, chainable) is in common/checksum.h. */

/* Bytes before the value: MC_OBJ_HEADER_FIXED + key_len, padded as described above. */
size_t mc_obj_header_len(size_t key_len, uint64_t value_size);

/* MC_OBJ_HEADER_FIXED + key_len: the bytes mc_obj_header_decode needs. */
size_t mc_obj_header_min_len(size_t key_len);

/*
 * Writes the header of (key, value_size, value_crc), padding included, into
 * out[0..mc_obj_header_len(key_len, value_size)).
 */
void mc_obj_header_encode(void *out, const char *key, size_t key_len, uint64_t value_size,
                          uint32_t value_crc);

/*
 * Parses and verifies a header at buf[0..len) (the padding need not be there). Returns 0,
 * MC_ERR_CHECKSUM_MISMATCH (bad magic, version, lengths or header CRC) or MC_ERR_FILE_READ_FAIL
 * (len shorter than 40 + key_len). h->key points into buf.
 */
int mc_obj_header_decode(const void *buf, size_t len, mc_obj_header_t *h);

/* 0..255: the hash directory of a key. */
unsigned mc_obj_dir_index(const char *key, size_t key_len);
/* "00".."ff" for 0..255, MC_OBJ_PROBE_DIR_NAME for MC_OBJ_PROBE_DIR. out: at least 8 bytes. */
void mc_obj_dir_name(unsigned index, char *out);
/* 1 when `name` is a hash directory name ("00".."ff", lowercase), and *index is set. */
int mc_obj_parse_dir_name(const char *name, unsigned *index);

/*
 * Escapes key[0..key_len) into name (capacity `cap`, MC_OBJ_NAME_MAX is always enough). Returns
 * 0 (plain name) or 1 (hashed name), or MC_ERR_INVALID_PARAMS for an empty/too long key or a
 * key containing NUL.
 */
int mc_obj_escape_key(const char *key, size_t key_len, char *name, size_t cap);

/*
 * Inverse of a plain escaped name: writes the key (NUL-terminated) into key[0..cap) and its
 * length into *key_len. Returns 0, 1 when `name` is a hashed name (the key is in the header), or
 * MC_ERR_INVALID_PARAMS when `name` is not a name mc_obj_escape_key produces.
 */
int mc_obj_unescape_name(const char *name, char *key, size_t cap, size_t *key_len);

/* 1 when a directory entry `name` may be an object (not a temporary, not "." or ".."). */
int mc_obj_is_object_name(const char *name);

/*
 * A temporary file's writer, spelt in its name so that a restart can tell a dead writer's
 * leftovers from a live writer's file in progress without a stat:
 *   ".t" <host: 8 hex> <pid: 6 hex> <ctime: 8 hex> <counter: 7 hex>   (31 bytes)
 * host   = a hash of the machine id, the boot id and the pid namespace of the writer: equal host
 *          values mean the pid can be checked in /proc here;
 * pid    = the writer's process id (< 2^22, Linux's pid_max ceiling);
 * ctime  = wall-clock seconds (low 32 bits) when the temporary was created;
 * counter= a per-process counter (low 28 bits), so names are unique within a second.
 * Probe objects of the health check are named "probe-<the same 29 hex digits>-<n>".
 */
typedef struct mc_obj_temp_id {
    uint32_t host;
    uint32_t pid;
    uint32_t ctime;
    uint32_t counter;
} mc_obj_temp_id_t;

#define MC_OBJ_TEMP_NAME_LEN 31 /* bytes, without the NUL */
#define MC_OBJ_TEMP_ID_HEX 29   /* the hex digits after ".t" */
#define MC_OBJ_PROBE_PREFIX "probe-"

/* The temporary name of `id` into out (at least MC_OBJ_TEMP_NAME_LEN + 1 bytes). */
void mc_obj_temp_name(const mc_obj_temp_id_t *id, char *out);

/*
 * 1 when `name` is a temporary name of the form above (then *id is set), or a probe object name
 * "probe-<29 hex>-..." when `probe` is nonzero; 0 otherwise (objects, other files, temporaries
 * of another format, which are left alone).
 */
int mc_obj_parse_temp_name(const char *name, int probe, mc_obj_temp_id_t *id);

/* Number of transfers for a stream of `total` bytes cut by `xfer` (0 = one transfer). */
uint64_t mc_obj_xfer_count(uint64_t total, uint64_t xfer);

/*
 * Cuts [off, off+len) of the stream segs[0..nsegs) into `pieces` pieces (0 or 1 = one), each
 * mapped onto the segments, into iov[0..max_iov). Returns the number of iovecs (at most
 * pieces + nsegs - 1), or 0 when they do not fit or the range is outside the stream.
 */
size_t mc_obj_build_iovs(const mc_obj_seg_t *segs, size_t nsegs, uint64_t off, uint64_t len,
                         unsigned pieces, struct iovec *iov, size_t max_iov);

#endif /* MC_STORAGE_OBJECT_LAYOUT_H */
