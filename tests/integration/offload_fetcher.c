/*
 * offload_fetcher.c — a reader process for the offload integration tests that reads local-disk
 * replicas through their owner with the reader side of offload_server.h itself (FETCH, pull,
 * RELEASE), not through mc_store_get, so what it proves holds whatever checks a get adds on top.
 *
 *   offload_fetcher ENDPOINT MILLIS SIZE VERSION:SEED:KEY...
 *
 * ENDPOINT is the owner's read endpoint (the LOCAL_DISK descriptor's segment_name); every object
 * is SIZE bytes whose value is the test's pattern of SEED (test_offload.c fill()). After its
 * Transfer Engine is up it prints "READY", then fetches every object in turn, round after round,
 * for MILLIS ms (at least one round; 0 = exactly one), and checks each successful read byte for
 * byte. It ends with one line
 *   RESULT exact=N expired=N failed=N wrong=N
 * (expired: MC_ERR_LEASE_EXPIRED; failed: any other error; wrong: returned 0 with bytes that are
 * not the object's) and exits 0, or 3 when any read was wrong. MC_FAILPOINTS applies (e.g.
 * "offload.fetch.before_pull=stop").
 */
#include "mooncake/errors.h"
#include "mooncake/transfer_engine.h"
#include "offload_server.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct object {
    uint64_t version, seed;
    const char *key;
    uint8_t *expect;
} object_t;

/* The value of seed: the same pattern as test_offload.c fill(). */
static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int parse_object(char *arg, size_t size, object_t *o)
{
    char *c1 = strchr(arg, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
        return -1;
    o->version = strtoull(arg, NULL, 10);
    o->seed = strtoull(c1 + 1, NULL, 10);
    o->key = c2 + 1;
    o->expect = malloc(size);
    if (!o->expect)
        return -1;
    fill(o->expect, size, o->seed);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: offload_fetcher ENDPOINT MILLIS SIZE VERSION:SEED:KEY...\n");
        return 2;
    }
    const char *endpoint = argv[1];
    uint64_t millis = strtoull(argv[2], NULL, 10);
    size_t size = strtoull(argv[3], NULL, 10);
    int n = argc - 4;
    object_t *objs = calloc((size_t)n, sizeof(*objs));
    uint8_t *buf = malloc(size);
    if (!objs || !buf || size == 0)
        return 2;
    for (int i = 0; i < n; i++) {
        if (parse_object(argv[4 + i], size, &objs[i]) != 0) {
            fprintf(stderr, "offload_fetcher: bad object '%s'\n", argv[4 + i]);
            return 2;
        }
    }
    mc_transfer_engine_config_t cfg = {
        .local_server_name = "127.0.0.1:0", .metadata_server = "P2PHANDSHAKE", .protocol = "tcp"};
    mc_transfer_engine_t *te = NULL;
    mc_offload_peers_t *peers = NULL;
    if (mc_te_create(&cfg, &te) != 0 || mc_offload_peers_create(&peers) != 0) {
        fprintf(stderr, "offload_fetcher: cannot set up the reader\n");
        return 1;
    }
    printf("READY\n");
    fflush(stdout);
    uint64_t exact = 0, expired = 0, failed = 0, wrong = 0;
    uint64_t end = now_ms() + millis;
    do {
        for (int i = 0; i < n; i++) {
            memset(buf, 0, size);
            int rc = mc_offload_fetch(peers, te, endpoint, objs[i].key, objs[i].version, buf, size);
            if (rc == MC_ERR_LEASE_EXPIRED) {
                expired++;
            } else if (rc != 0) {
                failed++;
                fprintf(stderr, "offload_fetcher: %s: %s\n", objs[i].key, mc_error_name(rc));
            } else if (memcmp(buf, objs[i].expect, size) == 0) {
                exact++;
            } else {
                wrong++;
                size_t bad = 0;
                for (size_t b = 0; b < size; b++)
                    bad += buf[b] != objs[i].expect[b];
                fprintf(stderr,
                        "offload_fetcher: %s: WRONG BYTES returned as success (%zu of %zu)\n",
                        objs[i].key, bad, size);
            }
        }
    } while (now_ms() < end);
    printf("RESULT exact=%" PRIu64 " expired=%" PRIu64 " failed=%" PRIu64 " wrong=%" PRIu64 "\n",
           exact, expired, failed, wrong);
    fflush(stdout);
    mc_offload_peers_destroy(peers);
    mc_te_destroy(te);
    for (int i = 0; i < n; i++)
        free(objs[i].expect);
    free(objs);
    free(buf);
    return wrong ? 3 : 0;
}
