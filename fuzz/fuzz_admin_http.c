/*
 * fuzz_admin_http.c — fuzz target for the master's admin and metrics HTTP server
 * (src/master/admin_http.c): request paths and query strings (/metrics, /metrics/summary,
 * /health, /get_all_segments, /query_key?key=..., /role, /ha_status, /leader), methods and
 * headers, behind libmicrohttpd's own parsing, against a master that holds a mounted segment and
 * a few objects (keys that are plain, not UTF-8, long, with a disk-like name), so that
 * /query_key finds them and builds its JSON answers from them.
 *
 * Input: up to four u16-length-prefixed specs for mc_fuzz_http (method, target, headers, body;
 * or raw bytes), each sent on its own connection. The server is read-only, so one master and
 * one server serve every input.
 */
#include "admin_http.h"
#include "fuzz_common.h"
#include "master_service.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REQUESTS 4

static mc_master_t *master;
static mc_admin_http_t *admin;

static void put(const char *key, uint64_t size)
{
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    mc_replica_desc_t d[4];
    size_t n = 0;
    uint32_t crc = 0x12345678;
    if (mc_master_put_start(master, "fuzz-client", key, size, &cfg, d, 4, &n) != 0 ||
        mc_master_put_end_checksum(master, "fuzz-client", key, &crc) != 0)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    if (mc_master_create(&cfg, &master) != 0)
        abort();
    mc_segment_info_t seg = {0};
    strcpy(seg.id, "0f0e0d0c-0b0a-0908-0706-050403020100");
    strcpy(seg.name, "127.0.0.1:17777");
    seg.base = 0x500000000000ull;
    seg.size = 64u << 20;
    strcpy(seg.protocol, "tcp");
    if (mc_master_mount_segment(master, "fuzz-client", &seg) != 0)
        abort();
    put("key", 4096);
    put("a/b c", 100);
    put("\xff\xfe not utf-8 \xc3", 10);
    char long_key[300];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    put(long_key, 1);
    mc_admin_http_config_t acfg = {0};
    acfg.host = "127.0.0.1";
    acfg.port = 0;
    acfg.master = master;
    acfg.settings = "fuzz settings";
    if (mc_admin_http_start(&acfg, &admin) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    int port = mc_admin_http_port(admin);
    for (int i = 0; i < MAX_REQUESTS && in.n > 0; i++) {
        size_t len;
        const uint8_t *spec = mc_fuzz_chunk(&in, &len);
        mc_fuzz_http(port, spec, len);
    }
    return 0;
}
