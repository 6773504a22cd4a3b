/*
 * fuzz_offload_files.c — fuzz target for what the offload backends read back from disk
 * (src/storage/fs_adapter.c over the posix adapter, src/client/offload_backend.c): directory
 * entries of the 256 hash directories, .probe and the root (object names, temporary and probe
 * names), object file headers and values, the "<version>/<key>" names of disk replicas, and the
 * cluster marker. The restart scan (mc_fs_scan, mc_offload_backend_scan), reads of what it
 * reports (mc_fs_read, mc_fs_stat, mc_offload_backend_read), the cleaning of dead writers'
 * temporaries (mc_fs_clean_temps) and the reading of the marker at open are run over files the
 * input plants in a scratch root.
 *
 * Input: byte 0 bit 0: the first file's contents are instead the text of the cluster marker
 * (written as the marker object, then a backend is opened on the root, which reads it, and the
 * marker is put back); then up to four files,
 * each u16 directory (mod 258: 0..255 hash directories, 256 .probe, 257 the root), u8 flags, a
 * u16-length-prefixed name ('/' and NUL become '_') and u16-length-prefixed contents. Flag 0x01
 * stores the header CRC a writer would have written, 0x02 the value CRC, so mutated headers
 * reach the checks behind them. Every planted file is removed after the input.
 */
#include "checksum.h"
#include "fuzz_common.h"
#include "mooncake/errors.h"
#include "mooncake/fs_adapter.h"
#include "object_layout.h"
#include "offload_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 4
#define MAX_READ (1u << 20)
#define MARKER_KEY "mooncake.cluster" /* offload_backend.h: the marker's adapter object */

static const char *root;
static mc_fs_adapter_t *fs;
static mc_offload_backend_t *backend;
static mc_offload_env_t env;
static uint8_t marker[1024];
static uint64_t marker_len;

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The checksums object_layout.h puts in a header, so that a fuzzed header passes them. */
static void fix_crcs(uint8_t *p, size_t len, int header, int value)
{
    if (len < MC_OBJ_HEADER_FIXED)
        return;
    uint32_t key_len = le32(p + 24);
    uint64_t value_size = (uint64_t)le32(p + 16) | (uint64_t)le32(p + 20) << 32;
    if (key_len > len - MC_OBJ_HEADER_FIXED)
        return;
    size_t hlen = mc_obj_header_len(key_len, value_size);
    if (value && hlen <= len && value_size <= len - hlen)
        put32(p + 28, mc_crc32c(0, p + hlen, (size_t)value_size));
    if (header)
        put32(p + 32, mc_crc32c(mc_crc32c(0, p, 32), p + 36, 4 + key_len));
}

static int read_object(const mc_fs_object_info_t *obj, void *arg)
{
    (void)arg;
    uint64_t size = 0;
    mc_fs_stat(fs, obj->key, &size);
    if (obj->value_size > MAX_READ)
        return 0;
    void *buf = malloc(obj->value_size ? obj->value_size : 1);
    if (!buf)
        abort();
    if (mc_fs_read(fs, obj->key, buf, obj->value_size) == 0 &&
        mc_crc32c(0, buf, obj->value_size) != obj->value_crc) {
        fprintf(stderr, "fuzz_offload_files: a read that passed with another CRC\n");
        abort();
    }
    free(buf);
    return 0;
}

static int read_replica(const char *key, uint64_t version, uint64_t size, uint32_t crc, void *arg)
{
    (void)crc;
    (void)arg;
    if (size > MAX_READ)
        return 0;
    void *buf = malloc(size ? size : 1);
    if (!buf)
        abort();
    mc_offload_backend_read(backend, key, version, buf, size);
    free(buf);
    return 0;
}

static void plant(mc_fuzz_in_t *in, char paths[MAX_FILES][4400], size_t *nfiles, int as_marker)
{
    unsigned dir = mc_fuzz_u16(in) % (MC_OBJ_PROBE_DIR + 2);
    uint8_t flags = mc_fuzz_u8(in);
    size_t nlen, clen;
    const uint8_t *n = mc_fuzz_chunk(in, &nlen);
    const uint8_t *c = mc_fuzz_chunk(in, &clen);
    if (as_marker) {
        mc_fs_write(fs, MARKER_KEY, c, clen);
        mc_offload_backend_t *b = NULL;
        char err[512];
        if (mc_offload_backend_open(&env, MC_OFFLOAD_LOCAL, root, &b, err, sizeof(err)) == 0)
            mc_offload_backend_close(b);
        mc_fs_write(fs, MARKER_KEY, marker, marker_len);
        return;
    }
    char name[256];
    nlen = nlen < sizeof(name) - 1 ? nlen : sizeof(name) - 1;
    for (size_t i = 0; i < nlen; i++)
        name[i] = n[i] == '/' || n[i] == '\0' ? '_' : (char)n[i];
    name[nlen] = '\0';
    if (nlen == 0 || !strcmp(name, ".") || !strcmp(name, ".."))
        snprintf(name, sizeof(name), "x");
    char sub[8] = "";
    if (dir < MC_OBJ_PROBE_DIR + 1)
        mc_obj_dir_name(dir, sub);
    char *path = paths[*nfiles];
    snprintf(path, 4400, "%s/%s%s%s", root, sub, sub[0] ? "/" : "", name);
    uint8_t *body = malloc(clen ? clen : 1);
    if (!body)
        abort();
    memcpy(body, c, clen);
    fix_crcs(body, clen, flags & 1, flags & 2);
    if (mc_fuzz_write_file(path, body, clen) == 0)
        (*nfiles)++;
    free(body);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    root = mc_fuzz_tempdir("offload");
    env.backend = MC_OFFLOAD_LOCAL;
    env.io_threads = 1;
    char err[512];
    if (mc_offload_backend_open(&env, MC_OFFLOAD_LOCAL, root, &backend, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_offload_files: %s\n", err);
        abort();
    }
    mc_fs_config_t cfg;
    mc_fs_config_init(&cfg);
    cfg.root_dir = root;
    cfg.io_threads = 1;
    if (mc_fs_adapter_open(&cfg, &fs) != 0 || mc_fs_stat(fs, MARKER_KEY, &marker_len) != 0 ||
        marker_len > sizeof(marker) || mc_fs_read(fs, MARKER_KEY, marker, marker_len) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    int with_marker = mc_fuzz_u8(&in) & 1;
    static char paths[MAX_FILES][4400];
    size_t nfiles = 0;
    for (int i = 0; i < MAX_FILES && in.n > 0; i++)
        plant(&in, paths, &nfiles, with_marker && i == 0);
    mc_fs_scan(fs, read_object, NULL);
    mc_offload_backend_scan(backend, read_replica, NULL);
    uint64_t removed = 0, kept = 0;
    mc_fs_clean_temps(fs, &removed, &kept);
    for (size_t i = 0; i < nfiles; i++)
        unlink(paths[i]);
    return 0;
}
