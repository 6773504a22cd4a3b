/*
 * fuzz_parse.c — fuzz target for the text parsers of src/common that read what users, config
 * files and environment variables give the programs: sizes (mc_parse_size), durations
 * (mc_parse_duration_ms), booleans, bounded integers and doubles, gflags-style command lines
 * (mc_flags_parse over a table with one flag of every type, plus an ignored one), master
 * addresses (mc_master_addr_parse) and "host:port" endpoints (mc_net_split_endpoint).
 *
 * Input: byte 0 picks the parser; the rest is its text (a command line is split into arguments
 * at NUL bytes). Besides crashes and UB it checks what each parser promises: a value in its
 * bounds, a size that formats back, no argument consumed twice.
 */
#include "flags.h"
#include "fuzz_common.h"
#include "master_view.h"
#include "mooncake/errors.h"
#include "net.h"
#include "parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 64

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_parse: broken promise: %s\n", what);
        abort();
    }
}

static void fuzz_scalars(int which, const char *text)
{
    char err[256];
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    int b = 0;
    char buf[64];
    switch (which) {
    case 0:
        if (mc_parse_size(text, &u, err, sizeof(err)) == 0) {
            check(u <= (uint64_t)INT64_MAX, "a size above 2^63-1");
            snprintf(buf, sizeof(buf), "%llu", (unsigned long long)u);
            uint64_t again = 0;
            check(mc_parse_size(buf, &again, NULL, 0) == 0 && again == u, "size round trip");
            mc_format_size(u, buf, sizeof(buf));
        }
        break;
    case 1:
        if (mc_parse_duration_ms(text, &u, err, sizeof(err)) == 0) {
            snprintf(buf, sizeof(buf), "%llums", (unsigned long long)u);
            uint64_t again = 0;
            check(mc_parse_duration_ms(buf, &again, NULL, 0) == 0 && again == u,
                  "duration round trip");
        }
        break;
    case 2:
        if (mc_parse_bool(text, &b, err, sizeof(err)) == 0)
            check(b == 0 || b == 1, "a boolean other than 0 or 1");
        break;
    case 3:
        if (mc_parse_int64(text, -1000, 1000000, &i, err, sizeof(err)) == 0)
            check(i >= -1000 && i <= 1000000, "an int64 out of its bounds");
        mc_parse_int64(text, INT64_MIN, INT64_MAX, &i, NULL, 0);
        break;
    case 4:
        if (mc_parse_double(text, -1.0, 1.0, &d, err, sizeof(err)) == 0)
            check(d >= -1.0 && d <= 1.0, "a double out of its bounds");
        break;
    case 5: {
        char endpoints[1024];
        mc_master_addr_parse(text, endpoints, sizeof(endpoints));
        break;
    }
    default: {
        char host[MC_HOST_MAX];
        int port = 0;
        if (mc_net_split_endpoint(text, 12345, host, &port) == 0)
            check(port >= 0 && port <= 65535 && strlen(host) < MC_HOST_MAX, "an endpoint");
        break;
    }
    }
}

static void fuzz_flags(mc_fuzz_in_t *in)
{
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = mc_fuzz_strndup((const uint8_t *)"prog", 4);
    while (in->n > 0 && argc < MAX_ARGS) {
        size_t len;
        const uint8_t *p = mc_fuzz_until(in, 0, &len);
        argv[argc++] = mc_fuzz_strndup(p, len);
    }
    argv[argc] = NULL;

    int flag_bool = 0;
    int64_t flag_int = 7;
    double flag_double = 0.5;
    const char *flag_string = "default";
    uint64_t flag_size = 1024, flag_ms = 1000;
    mc_flag_t flags[] = {
        {"enable_thing", MC_FLAG_BOOL, &flag_bool, "a boolean", 0, 0, 0},
        {"port", MC_FLAG_INT, &flag_int, "an int in [1, 65535]", 1, 65535, 0},
        {"count", MC_FLAG_INT, &flag_int, "an unbounded int", 0, 0, 0},
        {"ratio", MC_FLAG_DOUBLE, &flag_double, "a double", 0, 0, 0},
        {"name", MC_FLAG_STRING, (void *)&flag_string, "a string", 0, 0, 0},
        {"global_segment_size", MC_FLAG_SIZE, &flag_size, "a size", 0, 0, 0},
        {"client_ttl", MC_FLAG_DURATION_MS, &flag_ms, "a duration", 0, 0, 0},
    };
    static const char *const ignored[] = {"rpc_thread_num", "enable_gc", NULL};
    char err[512];
    int rc = mc_flags_parse(flags, sizeof(flags) / sizeof(flags[0]), ignored, argc, argv, "prog",
                            "Usage: prog [flags]", err, sizeof(err));
    check(rc == 0 || rc == MC_FLAGS_EXIT_OK || rc == MC_ERR_INVALID_PARAMS, "a flags result");
    if (rc == 0) {
        check(flag_bool == 0 || flag_bool == 1, "a boolean flag");
        check(flags[1].is_set == 0 || (flag_int >= 1 && flag_int <= 65535) || flags[2].is_set,
              "an int flag out of its bounds");
        check(flag_string != NULL, "a string flag");
        check(strlen(flag_string) < 1u << 20, "a string flag");
    }
    for (int i = 0; i < argc; i++)
        free(argv[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    /* --help and --version print to stdout: keep it quiet (-close_fd_mask=1 does the same). */
    if (!freopen("/dev/null", "w", stdout))
        return 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    int which = mc_fuzz_u8(&in) % 8;
    if (which == 7) {
        fuzz_flags(&in);
        return 0;
    }
    size_t len;
    const uint8_t *p = mc_fuzz_bytes(&in, in.n, &len);
    char *text = mc_fuzz_strndup(p, len);
    fuzz_scalars(which, text);
    free(text);
    return 0;
}
