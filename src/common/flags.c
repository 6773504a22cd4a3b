/*
 * flags.c — gflags-style command-line parsing (see flags.h).
 *
 * mc_flags_parse() walks argv twice. The first pass validates every argument and handles --help
 * and --version without storing anything; the second stores the values, sets is_set and logs the
 * ignored-flag warnings. So a failed parse leaves every *value as it was, and --help shows the
 * defaults the program put in *value no matter where --help appears on the line.
 *
 * Rules beyond flags.h:
 *   - `--name value` takes the next argument as the value unless it looks like a flag ("-x...",
 *     "--..."), in which case the value is missing; "-5" and "-0.5" are values. A value that
 *     itself starts with a letter after '-' must be written `--name=-value`.
 *   - A boolean flag never takes the next argument: `--verbose foo` leaves "foo" a positional.
 *     `--noname` takes no value.
 *   - A name in the `ignored` list takes a value by the same rule as other flags (`--n=v`, or
 *     `--n v` when v does not look like a flag; `--n` alone is fine too) and logs exactly one
 *     WARNING line per occurrence.
 *   - `--` ends flag parsing; every later argument, like any non-flag argument, is an error.
 *   - --help and --version are built in and take no value.
 */
#include "flags.h"

#include "errbuf.h"
#include "log.h"
#include "mooncake/errors.h"
#include "parse.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifndef MC_VERSION_STRING
#error "MC_VERSION_STRING must be defined by the build (CMakeLists.txt sets it)"
#endif

/* Room for one parser message; flag values longer than this are cut in messages only. */
#define FLAG_REASON_MAX 512

/* Name equality where '-' and '_' are the same character. `a` has length alen; `b` is NUL-ended. */
static int name_eq(const char *a, size_t alen, const char *b)
{
    size_t i = 0;
    for (; i < alen && b[i]; i++) {
        char ca = a[i] == '-' ? '_' : a[i];
        char cb = b[i] == '-' ? '_' : b[i];
        if (ca != cb)
            return 0;
    }
    return i == alen && b[i] == '\0';
}

static mc_flag_t *find_flag(mc_flag_t *flags, size_t nflags, const char *name, size_t len)
{
    for (size_t i = 0; i < nflags; i++) {
        if (flags[i].name && name_eq(name, len, flags[i].name))
            return &flags[i];
    }
    return NULL;
}

/* The canonical spelling of `name` in the ignored list, or NULL. */
static const char *find_ignored(const char *const *ignored, const char *name, size_t len)
{
    for (size_t i = 0; ignored && ignored[i]; i++) {
        if (name_eq(name, len, ignored[i]))
            return ignored[i];
    }
    return NULL;
}

/* "-x...", "--..." look like flags; "-5", "-.5" and "-" are values. */
static int looks_like_flag(const char *s)
{
    return s[0] == '-' && (s[1] == '-' || isalpha((unsigned char)s[1]));
}

static const char *type_name(mc_flag_type_t type)
{
    switch (type) {
    case MC_FLAG_BOOL:
        return "bool";
    case MC_FLAG_INT:
        return "int";
    case MC_FLAG_DOUBLE:
        return "double";
    case MC_FLAG_STRING:
        return "string";
    case MC_FLAG_SIZE:
        return "size";
    case MC_FLAG_DURATION_MS:
        return "duration";
    }
    return "?";
}

/* The largest of h/m/s/ms that divides `ms` exactly, so the text parses back to the same value. */
static void format_duration(uint64_t ms, char *buf, size_t len)
{
    static const struct {
        uint64_t scale;
        const char *suffix;
    } units[] = {{3600000, "h"}, {60000, "m"}, {1000, "s"}};

    for (size_t i = 0; ms != 0 && i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms % units[i].scale == 0) {
            snprintf(buf, len, "%" PRIu64 "%s", ms / units[i].scale, units[i].suffix);
            return;
        }
    }
    snprintf(buf, len, "%" PRIu64 "ms", ms);
}

static void format_value(const mc_flag_t *f, char *buf, size_t len)
{
    switch (f->type) {
    case MC_FLAG_BOOL:
        snprintf(buf, len, "%s", *(const int *)f->value ? "true" : "false");
        return;
    case MC_FLAG_INT:
        snprintf(buf, len, "%" PRId64, *(const int64_t *)f->value);
        return;
    case MC_FLAG_DOUBLE:
        snprintf(buf, len, "%g", *(const double *)f->value);
        return;
    case MC_FLAG_STRING: {
        const char *s = *(char *const *)f->value;
        snprintf(buf, len, "\"%s\"", s ? s : "");
        return;
    }
    case MC_FLAG_SIZE:
        mc_format_size(*(const uint64_t *)f->value, buf, len);
        return;
    case MC_FLAG_DURATION_MS:
        format_duration(*(const uint64_t *)f->value, buf, len);
        return;
    }
    snprintf(buf, len, "?");
}

void mc_flags_print_help(const mc_flag_t *flags, size_t nflags, const char *usage, void *out)
{
    FILE *fp = out ? (FILE *)out : stdout;
    char def[256];

    if (usage)
        fprintf(fp, "%s\n\n", usage);
    fprintf(fp, "Flags:\n");
    for (size_t i = 0; flags && i < nflags; i++) {
        const mc_flag_t *f = &flags[i];
        if (!f->name || !f->value)
            continue;
        format_value(f, def, sizeof(def));
        if (f->type == MC_FLAG_INT && f->min < f->max)
            fprintf(fp, "  --%s (int in [%" PRId64 ", %" PRId64 "], default: %s)\n", f->name,
                    f->min, f->max, def);
        else
            fprintf(fp, "  --%s (%s, default: %s)\n", f->name, type_name(f->type), def);
        if (f->help && *f->help)
            fprintf(fp, "      %s\n", f->help);
    }
    fprintf(fp, "  --help\n      print this help and exit\n");
    fprintf(fp, "  --version\n      print the version and exit\n");
    fflush(fp);
}

mc_flag_t *mc_flags_find(mc_flag_t *flags, size_t nflags, const char *name)
{
    if (!flags || !name)
        return NULL;
    return find_flag(flags, nflags, name, strlen(name));
}

/*
 * parse.c's messages read `invalid <what> "<text>": <reason>`; returns the reason, or the whole
 * message if it does not have that shape.
 */
static const char *reason_of(const char *msg, const char *text)
{
    const char *q = strchr(msg, '"');
    if (!q)
        return msg;
    size_t n = strlen(text);
    if (strncmp(q + 1, text, n) != 0 || strncmp(q + 1 + n, "\": ", 3) != 0)
        return msg;
    return q + 1 + n + 3;
}

/* Everything one pass over argv needs. */
struct flags_ctx {
    mc_flag_t *flags;
    size_t nflags;
    const char *const *ignored;
    int argc;
    char **argv;
    const char *program;
    const char *usage;
    char *err;
    size_t errlen;
    int commit; /* 0: validate only; 1: store values, set is_set, log warnings */
};

/* Parses `text` as f's type and, when committing, stores it. */
static int set_value(struct flags_ctx *c, mc_flag_t *f, const char *text)
{
    char msg[FLAG_REASON_MAX] = "";
    int rc = 0;
    int b = 0;
    int64_t i = 0;
    double d = 0;
    uint64_t u = 0;

    switch (f->type) {
    case MC_FLAG_BOOL:
        rc = mc_parse_bool(text, &b, msg, sizeof(msg));
        break;
    case MC_FLAG_INT:
        rc = f->min < f->max ? mc_parse_int64(text, f->min, f->max, &i, msg, sizeof(msg))
                             : mc_parse_int64(text, INT64_MIN, INT64_MAX, &i, msg, sizeof(msg));
        break;
    case MC_FLAG_DOUBLE:
        rc = mc_parse_double(text, -HUGE_VAL, HUGE_VAL, &d, msg, sizeof(msg));
        break;
    case MC_FLAG_STRING:
        break;
    case MC_FLAG_SIZE:
        rc = mc_parse_size(text, &u, msg, sizeof(msg));
        break;
    case MC_FLAG_DURATION_MS:
        rc = mc_parse_duration_ms(text, &u, msg, sizeof(msg));
        break;
    }
    if (rc != 0)
        return mc_fail(c->err, c->errlen, "invalid value \"%s\" for --%s: %s", text, f->name,
                       reason_of(msg, text));
    if (!c->commit)
        return 0;

    switch (f->type) {
    case MC_FLAG_BOOL:
        *(int *)f->value = b;
        break;
    case MC_FLAG_INT:
        *(int64_t *)f->value = i;
        break;
    case MC_FLAG_DOUBLE:
        *(double *)f->value = d;
        break;
    case MC_FLAG_STRING:
        *(const char **)f->value = text;
        break;
    case MC_FLAG_SIZE:
    case MC_FLAG_DURATION_MS:
        *(uint64_t *)f->value = u;
        break;
    }
    f->is_set = 1;
    return 0;
}

static int handle_builtin(struct flags_ctx *c, const char *name, size_t len, const char *value,
                          int *handled)
{
    /* -h is the short form of --help, unless a program declares a flag named "h". */
    int is_help = name_eq(name, len, "help") ||
                  (name_eq(name, len, "h") && !mc_flags_find(c->flags, c->nflags, "h"));
    *handled = is_help || name_eq(name, len, "version");
    if (!*handled)
        return 0;
    if (value)
        return mc_fail(c->err, c->errlen, "--%.*s takes no value", (int)len, name);
    if (is_help)
        mc_flags_print_help(c->flags, c->nflags, c->usage, stdout);
    else
        printf("%s %s\n", c->program ? c->program : "", MC_VERSION_STRING);
    fflush(stdout);
    return MC_FLAGS_EXIT_OK;
}

/* `--no<name>` for a bool flag. *handled is 0 when `name` has no such reading. */
static int handle_negation(struct flags_ctx *c, const char *name, size_t len, const char *value,
                           int *handled)
{
    *handled = 0;
    if (len <= 2 || strncmp(name, "no", 2) != 0)
        return 0;
    mc_flag_t *f = find_flag(c->flags, c->nflags, name + 2, len - 2);
    if (!f)
        return 0;
    *handled = 1;
    if (f->type != MC_FLAG_BOOL)
        return mc_fail(c->err, c->errlen, "--%.*s: --%s is not a boolean flag", (int)len, name,
                       f->name);
    if (value)
        return mc_fail(c->err, c->errlen, "--%.*s takes no value; use --%s=false", (int)len, name,
                       f->name);
    if (c->commit) {
        *(int *)f->value = 0;
        f->is_set = 1;
    }
    return 0;
}

/* Handles argv[*i], advancing *i past a value it consumes. */
static int handle_flag(struct flags_ctx *c, int *i)
{
    const char *arg = c->argv[*i];
    const char *name = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const char *value = eq ? eq + 1 : NULL;
    const char *next = *i + 1 < c->argc ? c->argv[*i + 1] : NULL;
    int handled, rc;

    if (len == 0)
        return mc_fail(c->err, c->errlen, "unknown flag %s (see --help)", arg);

    rc = handle_builtin(c, name, len, value, &handled);
    if (handled)
        return rc;

    mc_flag_t *f = find_flag(c->flags, c->nflags, name, len);
    if (f) {
        if (f->type == MC_FLAG_BOOL)
            return set_value(c, f, value ? value : "true");
        if (!value) {
            if (!next || looks_like_flag(next))
                return mc_fail(c->err, c->errlen, "missing value for --%s", f->name);
            value = next;
            (*i)++;
        }
        return set_value(c, f, value);
    }

    rc = handle_negation(c, name, len, value, &handled);
    if (handled)
        return rc;

    const char *ign = find_ignored(c->ignored, name, len);
    if (ign) {
        if (!value && next && !looks_like_flag(next))
            (*i)++;
        if (c->commit)
            MC_WARN("flag --%s is accepted for compatibility and ignored", ign);
        return 0;
    }
    ign =
        len > 2 && strncmp(name, "no", 2) == 0 ? find_ignored(c->ignored, name + 2, len - 2) : NULL;
    if (ign) {
        if (c->commit)
            MC_WARN("flag --no%s is accepted for compatibility and ignored", ign);
        return 0;
    }
    return mc_fail(c->err, c->errlen, "unknown flag --%.*s (see --help)", (int)len, name);
}

static int parse_pass(struct flags_ctx *c)
{
    int flags_done = 0;
    for (int i = 1; i < c->argc; i++) {
        const char *arg = c->argv[i];
        if (!arg)
            return mc_fail(c->err, c->errlen, "argument %d is NULL", i);
        if (!flags_done && strcmp(arg, "--") == 0) {
            flags_done = 1;
            continue;
        }
        if (flags_done || arg[0] != '-' || arg[1] == '\0')
            return mc_fail(c->err, c->errlen,
                           "unexpected argument \"%s\": this program takes only flags (see --help)",
                           arg);
        int rc = handle_flag(c, &i);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A table entry the parser cannot use is the program's bug; say which. */
static int check_table(const struct flags_ctx *c)
{
    if (c->nflags > 0 && !c->flags)
        return mc_fail(c->err, c->errlen, "flag table is NULL but nflags is %zu", c->nflags);
    for (size_t i = 0; i < c->nflags; i++) {
        if (!c->flags[i].name || !c->flags[i].value)
            return mc_fail(c->err, c->errlen, "flag table entry %zu has no name or no value", i);
    }
    if (c->argc > 0 && !c->argv)
        return mc_fail(c->err, c->errlen, "argv is NULL but argc is %d", c->argc);
    return 0;
}

int mc_flags_parse(mc_flag_t *flags, size_t nflags, const char *const *ignored, int argc,
                   char **argv, const char *program, const char *usage, char *err, size_t errlen)
{
    struct flags_ctx c = {flags, nflags, ignored, argc, argv, program, usage, err, errlen, 0};

    if (err && errlen > 0)
        err[0] = '\0';
    int rc = check_table(&c);
    if (rc == 0)
        rc = parse_pass(&c);
    if (rc != 0)
        return rc;

    for (size_t i = 0; i < nflags; i++)
        flags[i].is_set = 0;
    c.commit = 1;
    rc = parse_pass(&c);
    assert(rc == 0); /* the first pass accepted exactly these arguments */
    return rc;
}
