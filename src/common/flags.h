/*
 * flags.h — gflags-style command-line parsing for every mooncake-c program.
 *
 * A program declares a table of mc_flag_t (name, type, where to store, default text, help) and
 * calls mc_flags_parse(). Accepted spellings, as gflags and upstream's scripts use them:
 *   --name=value   --name value   -name=value   -name value
 *   hyphens and underscores are interchangeable (--offload-backend == --offload_backend)
 *   booleans: --flag, --flag=true|false|1|0|yes|no, --noflag
 * Size flags take mc_parse_size() text ("32 GB"), duration flags mc_parse_duration_ms() text.
 *
 * `--help` prints the usage line and every flag (name, type, default, help) to stdout and makes
 * mc_flags_parse() return MC_FLAGS_EXIT_OK; `--version` prints "<program> <version>" likewise.
 * A name in the `ignored` list (flags upstream's program accepts that we do not implement) is
 * consumed with one WARNING line naming it, so users' scripts keep working. Any other unknown
 * flag, a bad value or a stray positional argument makes mc_flags_parse() return
 * MC_ERR_INVALID_PARAMS with one readable line in `err` (e.g. "unknown flag --foo").
 *
 * Not thread-safe (call it once from main before starting threads).
 */
#ifndef MC_COMMON_FLAGS_H
#define MC_COMMON_FLAGS_H

#include <stddef.h>
#include <stdint.h>

typedef enum mc_flag_type {
    MC_FLAG_BOOL,        /* int* : 0/1 */
    MC_FLAG_INT,         /* int64_t* */
    MC_FLAG_DOUBLE,      /* double* */
    MC_FLAG_STRING,      /* char** : points into argv or a strdup the parser owns; never freed */
    MC_FLAG_SIZE,        /* uint64_t* bytes */
    MC_FLAG_DURATION_MS, /* uint64_t* milliseconds */
} mc_flag_type_t;

typedef struct mc_flag {
    const char *name; /* canonical, with underscores: "global_segment_size" */
    mc_flag_type_t type;
    void *value; /* where the parsed value is stored; holds the default on entry */
    const char *help;
    int64_t min, max; /* inclusive bounds for MC_FLAG_INT when min < max; ignored otherwise */
    int is_set;       /* out: 1 when the flag appeared on the command line */
} mc_flag_t;

/* Returned by mc_flags_parse when --help or --version was handled: exit(0). */
#define MC_FLAGS_EXIT_OK 1

/*
 * Parses argv[1..argc-1] against flags[0..nflags-1]. `ignored` is a NULL-terminated list of
 * canonical names accepted and ignored with a warning (may be NULL). `usage` is the first line of
 * --help ("Usage: mooncake_master [flags]"). `program`/`version` feed --version.
 * Returns 0, MC_FLAGS_EXIT_OK, or MC_ERR_INVALID_PARAMS with `err` filled.
 */
int mc_flags_parse(mc_flag_t *flags, size_t nflags, const char *const *ignored, int argc,
                   char **argv, const char *program, const char *usage, char *err, size_t errlen);

/* Looks a flag up by canonical name (hyphens accepted). NULL when absent. */
mc_flag_t *mc_flags_find(mc_flag_t *flags, size_t nflags, const char *name);

/* Prints the --help text to `out` (a FILE*). */
void mc_flags_print_help(const mc_flag_t *flags, size_t nflags, const char *usage, void *out);

#endif /* MC_COMMON_FLAGS_H */
