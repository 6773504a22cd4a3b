/*
 * fuzz_snapshot.c — fuzz target for the master's snapshots on disk (src/master/snapshot.c) and
 * the object records in them (src/master/journal.c, mc.ObjectRecord): manifest.txt, the framing
 * of records.bin and each record, through mc_master_snapshot_restore into a fresh master, then
 * what a restored record meets next: the re-mount of its segment by its owner (revival into
 * the allocator, or verification when the snapshot was not clean: fetch and confirm) and the
 * export of the master's records (which must import again).
 *
 * Input: byte 0 flags, then u64 seq, u32 object count, and for the raw-manifest form a
 * u16-length manifest body; the rest is records.bin as is. The target writes the snapshot
 * directory <root>/20260101_000000_000/ with a manifest whose checksums are right (so that the
 * records are reached) unless a flag says otherwise:
 *   0x01 clean   0x02 the manifest body comes from the input   0x04 a wrong records.bin size
 *   0x08 a wrong records.bin CRC   0x10 a wrong manifest CRC
 */
#include "checksum.h"
#include "fuzz_common.h"
#include "journal.h"
#include "master_service.h"
#include "mooncake/errors.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SNAP_NAME "20260101_000000_000"
#define VERIFY_PAGE 64

static const char *root;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_snapshot: %s\n", what);
        abort();
    }
}

static void write_snapshot(mc_fuzz_in_t *in)
{
    uint8_t flags = mc_fuzz_u8(in);
    uint64_t seq = mc_fuzz_u64(in);
    uint32_t objects = mc_fuzz_u32(in);
    char body[1200];
    size_t body_len = 0;
    if (flags & 0x02) {
        size_t n;
        const uint8_t *p = mc_fuzz_chunk(in, &n);
        body_len = n < 1000 ? n : 1000;
        memcpy(body, p, body_len);
    }
    const uint8_t *records = in->p;
    size_t records_len = in->n;
    if (!(flags & 0x02)) {
        uint64_t bytes = flags & 0x04 ? records_len + 1 : records_len;
        uint32_t crc = mc_crc32c(0, records, records_len) ^ (flags & 0x08 ? 1u : 0u);
        int n = snprintf(body, sizeof(body),
                         "mooncake-c-snapshot 1\nseq %" PRIu64 "\nclean %d\nobjects %" PRIu32
                         "\nrecords.bin %" PRIu64 " %08x\n",
                         seq, flags & 1, objects, bytes, crc);
        body_len = (size_t)n;
    }
    uint32_t mcrc = mc_crc32c(0, body, body_len) ^ (flags & 0x10 ? 1u : 0u);
    body_len += (size_t)snprintf(body + body_len, sizeof(body) - body_len, "manifest %08x\n", mcrc);
    char path[4400];
    snprintf(path, sizeof(path), "%s/" SNAP_NAME, root);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/" SNAP_NAME "/manifest.txt", root);
    if (mc_fuzz_write_file(path, body, body_len) != 0)
        abort();
    snprintf(path, sizeof(path), "%s/" SNAP_NAME "/records.bin", root);
    if (mc_fuzz_write_file(path, records, records_len) != 0)
        abort();
}

static int reimport(void *arg, const uint8_t *record, size_t len)
{
    check(mc_master_import(arg, record, len) == 0, "an exported record does not import");
    return 0;
}

/* The owner of seg-<i> re-mounts it, then verifies what it holds back, confirming every other
 * extent. */
static void remount(mc_master_t *m, int i)
{
    char client[16];
    mc_segment_info_t seg = {0};
    snprintf(client, sizeof(client), "c%d", i);
    snprintf(seg.id, sizeof(seg.id), "seg-%d", i);
    snprintf(seg.name, sizeof(seg.name), "127.0.0.1:%d", 17000 + i);
    seg.base = 0x10000000ull << i;
    seg.size = 1ull << 28;
    snprintf(seg.protocol, sizeof(seg.protocol), "tcp");
    if (mc_master_mount_segment(m, client, &seg) != 0)
        return;
    mc_restore_extent_t ext[VERIFY_PAGE];
    uint64_t ids[VERIFY_PAGE], from = 0;
    uint8_t ok[VERIFY_PAGE];
    for (int page = 0; page < 4; page++) {
        size_t n = 0;
        uint64_t next = 0;
        if (mc_master_restore_verify_fetch(m, client, seg.id, from, ext, VERIFY_PAGE, &n, &next) !=
            0)
            break;
        for (size_t k = 0; k < n; k++) {
            check(ext[k].address >= seg.base && ext[k].address - seg.base < seg.size,
                  "an extent to verify outside its segment");
            ids[k] = ext[k].id;
            ok[k] = (uint8_t)(k & 1);
        }
        size_t confirmed = 0;
        mc_master_restore_verify_confirm(m, client, seg.id, ids, ok, n, &confirmed);
        if (next == 0)
            break;
        from = next;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    root = mc_fuzz_tempdir("snapshot");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    write_snapshot(&in);
    mc_master_t *m = NULL;
    if (mc_master_create(NULL, &m) != 0)
        abort();
    uint64_t seq = 0;
    if (mc_master_snapshot_restore(m, root, &seq) == 0) {
        mc_restore_stats_t st;
        mc_master_restore_stats(m, &st);
        remount(m, 0);
        remount(m, 1);
        mc_master_t *scratch = NULL;
        if (mc_master_create(NULL, &scratch) != 0)
            abort();
        uint64_t start = 0;
        mc_master_export(m, &start, reimport, scratch);
        mc_master_restore_stats(m, &st);
        mc_master_destroy(scratch);
    }
    mc_master_destroy(m);
    mc_fuzz_rmtree(root, 0);
    return 0;
}
