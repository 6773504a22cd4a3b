/*
 * store_writer.c — a store client process for the integration tests that puts one large value
 * and can be killed in the middle of it.
 *
 *   store_writer MASTER_ADDR KEY SIZE
 *
 * Prints "PUTTING" just before the put starts, then "DONE <rc>".
 */
#include "mooncake/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: store_writer MASTER_ADDR KEY SIZE\n");
        return 2;
    }
    size_t size = strtoull(argv[3], NULL, 10);
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .local_buffer_size = 1 << 20,
                             .master_server_addr = argv[1]};
    mc_store_t *s;
    if (mc_store_setup(&cfg, &s) != 0)
        return 1;
    char *v = malloc(size);
    memset(v, 0xAB, size);
    printf("PUTTING\n");
    fflush(stdout);
    int rc = mc_store_put(s, argv[2], v, size, NULL);
    printf("DONE %d\n", rc);
    mc_store_free(s);
    free(v);
    return rc == 0 ? 0 : 1;
}
