/*
 * store_rw.c — a store client process driven line by line on stdin, for integration tests that
 * stop, kill or stall a client in the middle of an operation (with MC_FAILPOINTS, failpoint.h).
 *
 *   store_rw MASTER_ADDR [PROTOCOL]      (PROTOCOL: tcp, the default, or rdma)
 *     put KEY SIZE SEED   ->  "PUT <rc>"
 *     get KEY SIZE SEED   ->  "GET <rc> <exact|WRONG@offset|->"  (rc = size read, or an error)
 *
 * Values are payload.h's: a get says whether the bytes it returned are exactly value SEED.
 * Prints "READY" once set up; exits 0 at end of input.
 */
#include "mooncake/store.h"
#include "payload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: store_rw MASTER_ADDR [tcp|rdma]  (commands on stdin: put|get KEY "
                        "SIZE SEED)\n");
        return 2;
    }
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .local_buffer_size = 1 << 20,
                             .master_server_addr = argv[1],
                             .protocol = argc == 3 ? argv[2] : "tcp"};
    mc_store_t *s;
    int rc = mc_store_setup(&cfg, &s);
    if (rc != 0) {
        fprintf(stderr, "store_rw: setup failed: %s\n", mc_error_name(rc));
        return 1;
    }
    printf("READY\n");
    fflush(stdout);
    char line[8192], op[16], key[4200];
    while (fgets(line, sizeof(line), stdin)) {
        unsigned long long size, seed;
        if (sscanf(line, "%15s %4199s %llu %llu", op, key, &size, &seed) != 4)
            continue;
        char *buf = malloc(size ? size : 1);
        if (!buf)
            return 1;
        if (strcmp(op, "put") == 0) {
            mc_payload_fill(buf, size, seed);
            printf("PUT %d\n", mc_store_put(s, key, buf, size, NULL));
        } else {
            int64_t got = mc_store_get(s, key, buf, size);
            if (got < 0) {
                printf("GET %lld -\n", (long long)got);
            } else {
                size_t off = mc_payload_diff(buf, (size_t)got, seed);
                if ((uint64_t)got == size && off == (size_t)got)
                    printf("GET %lld exact\n", (long long)got);
                else
                    printf("GET %lld WRONG@%zu\n", (long long)got, off);
            }
        }
        fflush(stdout);
        free(buf);
    }
    mc_store_free(s);
    return 0;
}
