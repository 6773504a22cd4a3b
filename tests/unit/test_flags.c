/*
 * test_flags.c — the command-line spellings src/common/flags.h accepts, the errors it gives, and
 * --help / --version / ignored-flag behaviour, against a flag table shaped like mooncake_master's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "flags.h"
#include "log.h"
#include "mooncake/errors.h"

#define GiB (1ull << 30)

/* The program's settings, holding their defaults until a parse stores into them. */
struct opts {
    int64_t rpc_port;
    int64_t offset;
    int verbose;
    int enable_http;
    uint64_t global_segment_size;
    uint64_t lease_ttl_ms;
    double eviction_ratio;
    char *offload_backend;
};

enum {
    F_RPC_PORT,
    F_OFFSET,
    F_VERBOSE,
    F_ENABLE_HTTP,
    F_SEGMENT_SIZE,
    F_LEASE_TTL,
    F_EVICTION_RATIO,
    F_OFFLOAD_BACKEND,
    F_COUNT,
};

static const char *const ignored_flags[] = {"enable_ha", "etcd_endpoints", NULL};

/* Each test gets fresh defaults and a fresh table. */
static struct opts o;
static mc_flag_t table[F_COUNT];
static char err[512];

static int setup(void **state)
{
    o = (struct opts){
        .rpc_port = 50051,
        .offset = 0,
        .verbose = 0,
        .enable_http = 1,
        .global_segment_size = 32 * GiB,
        .lease_ttl_ms = 5000,
        .eviction_ratio = 0.05,
        .offload_backend = "none",
    };
    mc_flag_t t[F_COUNT] = {
        [F_RPC_PORT] = {"rpc_port", MC_FLAG_INT, &o.rpc_port, "port of the RPC server", 1, 65535},
        [F_OFFSET] = {"offset", MC_FLAG_INT, &o.offset, "an unbounded integer"},
        [F_VERBOSE] = {"verbose", MC_FLAG_BOOL, &o.verbose, "log more"},
        [F_ENABLE_HTTP] = {"enable_http", MC_FLAG_BOOL, &o.enable_http, "serve HTTP"},
        [F_SEGMENT_SIZE] = {"global_segment_size", MC_FLAG_SIZE, &o.global_segment_size,
                            "memory contributed to the pool"},
        [F_LEASE_TTL] = {"lease_ttl", MC_FLAG_DURATION_MS, &o.lease_ttl_ms, "lease length"},
        [F_EVICTION_RATIO] = {"eviction_ratio", MC_FLAG_DOUBLE, &o.eviction_ratio,
                              "fraction evicted at once"},
        [F_OFFLOAD_BACKEND] = {"offload_backend", MC_FLAG_STRING, &o.offload_backend,
                               "where evicted objects go"},
    };
    memcpy(table, t, sizeof(table));
    err[0] = '\0';
    mc_log_set_level(MC_LOG_INFO);
    return 0;
}

static int parse_argv(int argc, char **argv)
{
    return mc_flags_parse(table, F_COUNT, ignored_flags, argc, argv, "mooncake_master",
                          "Usage: mooncake_master [flags]", err, sizeof(err));
}

#define ARGV(...) ((char *[]){"mooncake_master", __VA_ARGS__})
#define ARGC(...) ((int)(sizeof(ARGV(__VA_ARGS__)) / sizeof(char *)))
/* PARSE("--a=1", "--b") parses those arguments after the program name. */
#define PARSE(...) parse_argv(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

/* Redirects file descriptor `fd` into a temporary file until capture_end(). */
struct capture {
    int fd;
    int saved;
    FILE *tmp;
};

static void capture_begin(struct capture *c, int fd)
{
    fflush(stdout);
    fflush(stderr);
    c->fd = fd;
    c->tmp = tmpfile();
    assert_non_null(c->tmp);
    c->saved = dup(fd);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->tmp), fd) >= 0);
}

static void capture_end(struct capture *c, char *buf, size_t len)
{
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved, c->fd);
    close(c->saved);
    rewind(c->tmp);
    size_t n = fread(buf, 1, len - 1, c->tmp);
    buf[n] = '\0';
    fclose(c->tmp);
}

static int count_lines_containing(const char *text, const char *needle)
{
    int n = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *hit = strstr(line, needle);
        if (hit && hit < line + len)
            n++;
        line += len + (nl ? 1 : 0);
    }
    return n;
}

/* ---- accepted spellings ---- */

static void test_flags_no_arguments_keep_defaults(void **state)
{
    char *argv[] = {"mooncake_master"};
    assert_int_equal(parse_argv(1, argv), 0);
    assert_int_equal(o.rpc_port, 50051);
    assert_int_equal(o.global_segment_size, 32 * GiB);
    assert_string_equal(o.offload_backend, "none");
    for (int i = 0; i < F_COUNT; i++)
        assert_int_equal(table[i].is_set, 0);
}

static void test_flags_double_dash_with_equals(void **state)
{
    assert_int_equal(PARSE("--rpc_port=8080"), 0);
    assert_int_equal(o.rpc_port, 8080);
}

static void test_flags_double_dash_with_separate_value(void **state)
{
    assert_int_equal(PARSE("--rpc_port", "8080"), 0);
    assert_int_equal(o.rpc_port, 8080);
}

static void test_flags_single_dash_with_equals(void **state)
{
    assert_int_equal(PARSE("-rpc_port=8080"), 0);
    assert_int_equal(o.rpc_port, 8080);
}

static void test_flags_single_dash_with_separate_value(void **state)
{
    assert_int_equal(PARSE("-rpc_port", "8080"), 0);
    assert_int_equal(o.rpc_port, 8080);
}

static void test_flags_hyphens_and_underscores_are_interchangeable(void **state)
{
    assert_int_equal(PARSE("--offload-backend=daos", "--global-segment_size", "1GB", "-rpc-port=9"),
                     0);
    assert_string_equal(o.offload_backend, "daos");
    assert_int_equal(o.global_segment_size, GiB);
    assert_int_equal(o.rpc_port, 9);
}

static void test_flags_size_flag_reads_human_sizes(void **state)
{
    assert_int_equal(PARSE("--global_segment_size", "16 GB"), 0);
    assert_int_equal(o.global_segment_size, 16 * GiB);
    assert_int_equal(PARSE("--global_segment_size=1.5g"), 0);
    assert_int_equal(o.global_segment_size, 1610612736ull);
}

static void test_flags_duration_flag_reads_suffixes(void **state)
{
    assert_int_equal(PARSE("--lease_ttl=10s"), 0);
    assert_int_equal(o.lease_ttl_ms, 10000);
    assert_int_equal(PARSE("--lease_ttl", "250"), 0);
    assert_int_equal(o.lease_ttl_ms, 250);
}

static void test_flags_double_flag(void **state)
{
    assert_int_equal(PARSE("--eviction_ratio=0.2"), 0);
    assert_true(o.eviction_ratio == 0.2);
}

static void test_flags_negative_number_is_a_separate_value(void **state)
{
    assert_int_equal(PARSE("--offset", "-5", "--eviction_ratio", "-0.5"), 0);
    assert_int_equal(o.offset, -5);
    assert_true(o.eviction_ratio == -0.5);
}

static void test_flags_unbounded_int_accepts_any_int64(void **state)
{
    assert_int_equal(PARSE("--offset=-9223372036854775808"), 0);
    assert_true(o.offset == INT64_MIN);
}

static void test_flags_string_points_into_argv(void **state)
{
    char **argv = ARGV("--offload_backend", "daos", "--offload_backend=fs");
    assert_int_equal(parse_argv(4, argv), 0);
    assert_ptr_equal(o.offload_backend, argv[3] + strlen("--offload_backend="));
    assert_int_equal(parse_argv(3, argv), 0);
    assert_ptr_equal(o.offload_backend, argv[2]);
}

static void test_flags_value_starting_with_dash_needs_equals(void **state)
{
    assert_int_equal(PARSE("--offload_backend=-weird"), 0);
    assert_string_equal(o.offload_backend, "-weird");
}

static void test_flags_last_occurrence_wins(void **state)
{
    assert_int_equal(PARSE("--rpc_port=1", "--rpc_port=2"), 0);
    assert_int_equal(o.rpc_port, 2);
}

static void test_flags_is_set_marks_only_given_flags(void **state)
{
    assert_int_equal(PARSE("--rpc_port=50051", "--verbose"), 0);
    assert_int_equal(table[F_RPC_PORT].is_set, 1);
    assert_int_equal(table[F_VERBOSE].is_set, 1);
    assert_int_equal(table[F_OFFSET].is_set, 0);
    assert_int_equal(table[F_SEGMENT_SIZE].is_set, 0);
}

static void test_flags_double_dash_alone_ends_flags(void **state)
{
    assert_int_equal(PARSE("--verbose", "--"), 0);
    assert_int_equal(o.verbose, 1);
}

/* ---- booleans ---- */

static void test_flags_bool_bare_sets_true(void **state)
{
    assert_int_equal(PARSE("--verbose"), 0);
    assert_int_equal(o.verbose, 1);
}

static void test_flags_bool_value_spellings(void **state)
{
    const char *yes[] = {"--verbose=true", "--verbose=1", "--verbose=yes", "-verbose=TRUE"};
    const char *no[] = {"--verbose=false", "--verbose=0", "--verbose=no", "-verbose=False"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        o.verbose = 0;
        assert_int_equal(parse_argv(2, ARGV((char *)yes[i])), 0);
        assert_int_equal(o.verbose, 1);
        o.verbose = 1;
        assert_int_equal(parse_argv(2, ARGV((char *)no[i])), 0);
        assert_int_equal(o.verbose, 0);
    }
}

static void test_flags_bool_no_prefix_sets_false(void **state)
{
    assert_int_equal(PARSE("--noenable_http"), 0);
    assert_int_equal(o.enable_http, 0);
    assert_int_equal(table[F_ENABLE_HTTP].is_set, 1);
    o.enable_http = 1;
    assert_int_equal(PARSE("-noenable-http"), 0);
    assert_int_equal(o.enable_http, 0);
}

static void test_flags_bool_does_not_consume_next_word(void **state)
{
    assert_int_equal(PARSE("--verbose", "foo"), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "\"foo\""));
    assert_int_equal(o.verbose, 0);
}

static void test_flags_bool_rejects_bad_value(void **state)
{
    assert_int_equal(PARSE("--verbose=maybe"), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "invalid value \"maybe\" for --verbose: not a boolean"));
}

static void test_flags_no_prefix_takes_no_value(void **state)
{
    assert_int_equal(PARSE("--noverbose=true"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "--noverbose takes no value; use --verbose=false");
}

static void test_flags_no_prefix_on_non_bool_is_rejected(void **state)
{
    assert_int_equal(PARSE("--norpc_port"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "--norpc_port: --rpc_port is not a boolean flag");
}

/* ---- errors ---- */

static void test_flags_rejects_unknown_flag(void **state)
{
    assert_int_equal(PARSE("--foo"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "unknown flag --foo (see --help)");
}

static void test_flags_rejects_unknown_flag_with_value(void **state)
{
    assert_int_equal(PARSE("-foo=3"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "unknown flag --foo (see --help)");
}

static void test_flags_rejects_non_integer(void **state)
{
    assert_int_equal(PARSE("--rpc_port=abc"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "invalid value \"abc\" for --rpc_port: not an integer");
}

static void test_flags_rejects_int_out_of_range(void **state)
{
    assert_int_equal(PARSE("--rpc_port", "70000"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err,
                        "invalid value \"70000\" for --rpc_port: out of range; must be between 1 "
                        "and 65535");
    assert_int_equal(PARSE("--rpc_port=0"), MC_ERR_INVALID_PARAMS);
}

static void test_flags_rejects_percent_size(void **state)
{
    assert_int_equal(PARSE("--global_segment_size=50%"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "invalid value \"50%\" for --global_segment_size: percentages are "
                             "not sizes; use bytes or a unit like 16MB");
}

static void test_flags_rejects_bad_duration(void **state)
{
    assert_int_equal(PARSE("--lease_ttl=5d"), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "invalid value \"5d\" for --lease_ttl: unknown unit"));
}

static void test_flags_rejects_bad_double(void **state)
{
    assert_int_equal(PARSE("--eviction_ratio=lots"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "invalid value \"lots\" for --eviction_ratio: not a number");
}

static void test_flags_rejects_missing_value_at_end(void **state)
{
    assert_int_equal(PARSE("--rpc_port"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "missing value for --rpc_port");
}

static void test_flags_rejects_flag_where_value_expected(void **state)
{
    assert_int_equal(PARSE("--offload_backend", "--verbose"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "missing value for --offload_backend");
}

static void test_flags_rejects_positional_argument(void **state)
{
    assert_int_equal(PARSE("--verbose", "extra"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "unexpected argument \"extra\": this program takes only flags (see "
                             "--help)");
}

static void test_flags_rejects_lone_dash(void **state)
{
    assert_int_equal(PARSE("-"), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "unexpected argument \"-\""));
}

static void test_flags_after_double_dash_are_positional(void **state)
{
    assert_int_equal(PARSE("--", "--verbose"), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "unexpected argument \"--verbose\""));
    assert_int_equal(o.verbose, 0);
}

static void test_flags_empty_name_is_unknown(void **state)
{
    assert_int_equal(PARSE("--=5"), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "unknown flag"));
}

static void test_flags_failed_parse_stores_nothing(void **state)
{
    assert_int_equal(PARSE("--rpc_port=1", "--verbose", "--foo"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(o.rpc_port, 50051);
    assert_int_equal(o.verbose, 0);
    assert_int_equal(table[F_RPC_PORT].is_set, 0);
}

/* ---- ignored flags ---- */

static void test_flags_ignored_flag_warns_exactly_once(void **state)
{
    struct capture cap;
    char out[4096];
    capture_begin(&cap, STDERR_FILENO);
    int rc = PARSE("--enable_ha=true", "--rpc_port=7");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, 0);
    assert_int_equal(o.rpc_port, 7);
    assert_int_equal(count_lines_containing(out, "accepted for compatibility and ignored"), 1);
    assert_int_equal(count_lines_containing(out, "--enable_ha"), 1);
    assert_int_equal(out[0], 'W'); /* a glog WARNING line */
}

static void test_flags_ignored_flag_consumes_separate_value(void **state)
{
    struct capture cap;
    char out[4096];
    capture_begin(&cap, STDERR_FILENO);
    int rc = PARSE("--etcd-endpoints", "127.0.0.1:2379", "--rpc_port", "7");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, 0);
    assert_int_equal(o.rpc_port, 7);
    assert_int_equal(count_lines_containing(out, "ignored"), 1);
    assert_int_equal(count_lines_containing(out, "flag --etcd_endpoints is accepted"), 1);
}

static void test_flags_ignored_flag_negated(void **state)
{
    struct capture cap;
    char out[4096];
    capture_begin(&cap, STDERR_FILENO);
    int rc = PARSE("--noenable_ha", "--verbose");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, 0);
    assert_int_equal(o.verbose, 1);
    assert_int_equal(count_lines_containing(out, "flag --noenable_ha is accepted"), 1);
}

static void test_flags_ignored_flag_alone_does_not_consume_next_flag(void **state)
{
    struct capture cap;
    char out[4096];
    capture_begin(&cap, STDERR_FILENO);
    int rc = PARSE("--enable_ha", "--verbose");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, 0);
    assert_int_equal(o.verbose, 1);
}

static void test_flags_ignored_flag_is_not_warned_on_failed_parse(void **state)
{
    struct capture cap;
    char out[4096];
    capture_begin(&cap, STDERR_FILENO);
    int rc = PARSE("--enable_ha", "--foo");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, MC_ERR_INVALID_PARAMS);
    assert_int_equal(count_lines_containing(out, "ignored"), 0);
}

/* ---- --help and --version ---- */

static void test_flags_help_prints_every_flag_with_type_and_default(void **state)
{
    struct capture cap;
    char out[8192];
    capture_begin(&cap, STDOUT_FILENO);
    int rc = PARSE("--help");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, MC_FLAGS_EXIT_OK);
    assert_ptr_equal(strstr(out, "Usage: mooncake_master [flags]\n"), out);
    assert_non_null(strstr(out, "--rpc_port (int in [1, 65535], default: 50051)\n"));
    assert_non_null(strstr(out, "port of the RPC server"));
    assert_non_null(strstr(out, "--offset (int, default: 0)\n"));
    assert_non_null(strstr(out, "--verbose (bool, default: false)\n"));
    assert_non_null(strstr(out, "--enable_http (bool, default: true)\n"));
    assert_non_null(strstr(out, "--global_segment_size (size, default: 32.0 GiB)\n"));
    assert_non_null(strstr(out, "--lease_ttl (duration, default: 5s)\n"));
    assert_non_null(strstr(out, "--eviction_ratio (double, default: 0.05)\n"));
    assert_non_null(strstr(out, "--offload_backend (string, default: \"none\")\n"));
    assert_non_null(strstr(out, "where evicted objects go"));
    assert_non_null(strstr(out, "--version"));
}

static void test_flags_help_shows_defaults_not_earlier_arguments(void **state)
{
    struct capture cap;
    char out[8192];
    capture_begin(&cap, STDOUT_FILENO);
    int rc = PARSE("--rpc_port=1234", "-help");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, MC_FLAGS_EXIT_OK);
    assert_non_null(strstr(out, "default: 50051)"));
    assert_null(strstr(out, "1234"));
    assert_int_equal(o.rpc_port, 50051);
}

static void test_flags_version_prints_program_and_version(void **state)
{
    struct capture cap;
    char out[256];
    capture_begin(&cap, STDOUT_FILENO);
    int rc = PARSE("--version");
    capture_end(&cap, out, sizeof(out));
    assert_int_equal(rc, MC_FLAGS_EXIT_OK);
    assert_string_equal(out, "mooncake_master " MC_VERSION_STRING "\n");
}

static void test_flags_help_takes_no_value(void **state)
{
    assert_int_equal(PARSE("--help=1"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "--help takes no value");
}

static void test_flags_print_help_writes_to_given_stream(void **state)
{
    FILE *f = tmpfile();
    char out[8192];
    assert_non_null(f);
    mc_flags_print_help(table, F_COUNT, "Usage: x", f);
    rewind(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    assert_non_null(strstr(out, "Usage: x\n"));
    assert_non_null(strstr(out, "--lease_ttl (duration, default: 5s)"));
}

/* ---- mc_flags_find and defensive inputs ---- */

static void test_flags_find_by_canonical_or_hyphenated_name(void **state)
{
    assert_ptr_equal(mc_flags_find(table, F_COUNT, "global_segment_size"), &table[F_SEGMENT_SIZE]);
    assert_ptr_equal(mc_flags_find(table, F_COUNT, "global-segment-size"), &table[F_SEGMENT_SIZE]);
    assert_null(mc_flags_find(table, F_COUNT, "global_segment"));
    assert_null(mc_flags_find(table, F_COUNT, NULL));
    assert_null(mc_flags_find(NULL, 3, "rpc_port"));
}

static void test_flags_null_inputs_do_not_crash(void **state)
{
    char *argv[] = {"prog", "--x", NULL};
    assert_int_equal(mc_flags_parse(NULL, 0, NULL, 1, argv, "p", "u", NULL, 0), 0);
    assert_int_equal(mc_flags_parse(NULL, 0, NULL, 2, argv, "p", "u", NULL, 0),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_flags_parse(NULL, 2, NULL, 1, argv, "p", "u", err, sizeof(err)),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_flags_parse(table, F_COUNT, NULL, 2, NULL, "p", "u", err, sizeof(err)),
                     MC_ERR_INVALID_PARAMS);
    char *holey[] = {"prog", NULL};
    assert_int_equal(mc_flags_parse(table, F_COUNT, NULL, 2, holey, "p", "u", err, sizeof(err)),
                     MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "argument 1 is NULL");
    assert_int_equal(mc_flags_parse(table, F_COUNT, NULL, 0, NULL, "p", "u", err, sizeof(err)), 0);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static void test_flags_random_arguments_never_crash(void **state)
{
    /* clang-format off */
    static char *words[] = {
        "--", "-", "--rpc_port", "-rpc-port=", "--rpc_port=99999", "--verbose", "--noverbose",
        "--noverbose=1", "--verbose=", "--nooffset", "--no", "--=", "-=x", "--enable_ha",
        "--noenable_ha", "--lease_ttl", "1m", "--help", "--version", "--etcd-endpoints=", "50%",
        "16 MB", "-5", "--foo", "--global_segment_size", "x", "nan", "--eviction_ratio",
        "--offload_backend", ""};
    /* clang-format on */
    static const size_t nwords = sizeof(words) / sizeof(words[0]);
    uint64_t seed = 7;
    struct capture cap;
    char out[1 << 16];
    char problem[256] = "";

    mc_log_set_level(MC_LOG_ERROR);     /* keep the ignored-flag warnings out of the output */
    capture_begin(&cap, STDOUT_FILENO); /* --help and --version print */
    for (int n = 0; n < 20000 && !problem[0]; n++) {
        char *argv[8] = {"mooncake_master"};
        int argc = 1 + (int)(rng_next(&seed) % 7);
        for (int i = 1; i < argc; i++)
            argv[i] = words[rng_next(&seed) % nwords];
        int rc = parse_argv(argc, argv);
        if (rc != 0 && rc != MC_FLAGS_EXIT_OK && rc != MC_ERR_INVALID_PARAMS)
            snprintf(problem, sizeof(problem), "unexpected return %d", rc);
        else if (rc == MC_ERR_INVALID_PARAMS && strlen(err) == 0)
            snprintf(problem, sizeof(problem), "an error without a message");
        else if (o.rpc_port < 1 || o.rpc_port > 65535)
            snprintf(problem, sizeof(problem), "rpc_port %lld escaped its range",
                     (long long)o.rpc_port);
    }
    capture_end(&cap, out, sizeof(out));
    assert_string_equal(problem, "");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup(name, setup)
    const struct CMUnitTest tests[] = {
        T(test_flags_no_arguments_keep_defaults),
        T(test_flags_double_dash_with_equals),
        T(test_flags_double_dash_with_separate_value),
        T(test_flags_single_dash_with_equals),
        T(test_flags_single_dash_with_separate_value),
        T(test_flags_hyphens_and_underscores_are_interchangeable),
        T(test_flags_size_flag_reads_human_sizes),
        T(test_flags_duration_flag_reads_suffixes),
        T(test_flags_double_flag),
        T(test_flags_negative_number_is_a_separate_value),
        T(test_flags_unbounded_int_accepts_any_int64),
        T(test_flags_string_points_into_argv),
        T(test_flags_value_starting_with_dash_needs_equals),
        T(test_flags_last_occurrence_wins),
        T(test_flags_is_set_marks_only_given_flags),
        T(test_flags_double_dash_alone_ends_flags),
        T(test_flags_bool_bare_sets_true),
        T(test_flags_bool_value_spellings),
        T(test_flags_bool_no_prefix_sets_false),
        T(test_flags_bool_does_not_consume_next_word),
        T(test_flags_bool_rejects_bad_value),
        T(test_flags_no_prefix_takes_no_value),
        T(test_flags_no_prefix_on_non_bool_is_rejected),
        T(test_flags_rejects_unknown_flag),
        T(test_flags_rejects_unknown_flag_with_value),
        T(test_flags_rejects_non_integer),
        T(test_flags_rejects_int_out_of_range),
        T(test_flags_rejects_percent_size),
        T(test_flags_rejects_bad_duration),
        T(test_flags_rejects_bad_double),
        T(test_flags_rejects_missing_value_at_end),
        T(test_flags_rejects_flag_where_value_expected),
        T(test_flags_rejects_positional_argument),
        T(test_flags_rejects_lone_dash),
        T(test_flags_after_double_dash_are_positional),
        T(test_flags_empty_name_is_unknown),
        T(test_flags_failed_parse_stores_nothing),
        T(test_flags_ignored_flag_warns_exactly_once),
        T(test_flags_ignored_flag_consumes_separate_value),
        T(test_flags_ignored_flag_negated),
        T(test_flags_ignored_flag_alone_does_not_consume_next_flag),
        T(test_flags_ignored_flag_is_not_warned_on_failed_parse),
        T(test_flags_help_prints_every_flag_with_type_and_default),
        T(test_flags_help_shows_defaults_not_earlier_arguments),
        T(test_flags_version_prints_program_and_version),
        T(test_flags_help_takes_no_value),
        T(test_flags_print_help_writes_to_given_stream),
        T(test_flags_find_by_canonical_or_hyphenated_name),
        T(test_flags_null_inputs_do_not_crash),
        T(test_flags_random_arguments_never_crash),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
