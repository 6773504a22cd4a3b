/*
 * parse.c — sizes, durations, booleans and numbers as people type them (see parse.h).
 *
 * Every parser trims surrounding whitespace, then reads the text itself rather than trusting
 * strtod/strtoull, so "0x10", "inf", " -5" wrapping to 2^64-5 and locale decimal commas never sneak
 * through. Sizes and durations share one engine: a decimal number followed by an optional unit
 * from a table, computed in exact integer arithmetic so "32 GB" is exactly 34359738368 and
 * "1.5g" exactly 1610612736. Exponent notation ("1e3") is rejected for sizes and durations, where a
 * typo is likelier than a real exponent; mc_parse_double accepts it.
 *
 * Error messages read `invalid <what> "<text>": <reason>` with the text echoed verbatim;
 * flags.c relies on that shape to reuse the reason in its own messages.
 */
#include "parse.h"

#include "errbuf.h"
#include "mooncake/errors.h"
#include "net.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <time.h>
#include <stdatomic.h>

/* [*begin, *end) becomes `text` without leading and trailing whitespace. */
static void trim(const char *text, const char **begin, const char **end)
{
    const char *b = text;
    const char *e = text + strlen(text);
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    *begin = b;
    *end = e;
}

/* A unit word and how many base units (bytes or milliseconds) it stands for. */
struct unit {
    const char *name;
    uint64_t scale;
};

static const struct unit size_units[] = {
    {"b", 1},
    {"k", 1ull << 10},
    {"kb", 1ull << 10},
    {"kib", 1ull << 10},
    {"m", 1ull << 20},
    {"mb", 1ull << 20},
    {"mib", 1ull << 20},
    {"g", 1ull << 30},
    {"gb", 1ull << 30},
    {"gib", 1ull << 30},
    {"t", 1ull << 40},
    {"tb", 1ull << 40},
    {"tib", 1ull << 40},
};

static const struct unit duration_units[] = {
    {"ms", 1},
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 60 * 60 * 1000},
};

/* What a scaled quantity is called in messages, and its unit table. */
struct quantity {
    const char *what;      /* "size" */
    const char *plural;    /* "sizes" */
    const char *hint;      /* appended to most reasons */
    const char *unit_list; /* for "unknown unit" */
    const struct unit *units;
    size_t nunits;
};

static const struct quantity size_quantity = {
    .what = "size",
    .plural = "sizes",
    .hint = "use bytes or a unit like 16MB",
    .unit_list = "B, K/KB/KiB, M/MB/MiB, G/GB/GiB or T/TB/TiB (1024-based)",
    .units = size_units,
    .nunits = sizeof(size_units) / sizeof(size_units[0]),
};

static const struct quantity duration_quantity = {
    .what = "duration",
    .plural = "durations",
    .hint = "use milliseconds or a suffix like 500ms, 10s, 1m, 1h",
    .unit_list = "ms, s, m or h",
    .units = duration_units,
    .nunits = sizeof(duration_units) / sizeof(duration_units[0]),
};

static const struct unit *find_unit(const struct quantity *q, const char *u, size_t len)
{
    for (size_t i = 0; i < q->nunits; i++) {
        if (strlen(q->units[i].name) == len && strncasecmp(q->units[i].name, u, len) == 0)
            return &q->units[i];
    }
    return NULL;
}

/*
 * floor(0.<digits> * scale), exactly, by Horner's rule from the last digit:
 *   y = floor((digit * scale + y) / 10)
 * keeps y < scale (so nothing overflows), and dropping the fractional part of y at each step never
 * changes a later floor.
 */
static uint64_t scaled_fraction(const char *digits, size_t ndigits, uint64_t scale)
{
    uint64_t y = 0;
    for (size_t i = ndigits; i > 0; i--)
        y = ((uint64_t)(digits[i - 1] - '0') * scale + y) / 10;
    return y;
}

/*
 * The shared engine of mc_parse_size and mc_parse_duration_ms: <digits>[.<digits>] [space] [unit],
 * at most INT64_MAX base units; a fraction of a base unit is dropped.
 */
static int parse_scaled(const struct quantity *q, const char *text, uint64_t *out, char *err,
                        size_t errlen)
{
    if (!text)
        return mc_fail(err, errlen, "invalid %s: no text given", q->what);
    if (!out)
        return mc_fail(err, errlen, "invalid %s \"%s\": nowhere to store the result", q->what,
                       text);

    const char *p, *end;
    trim(text, &p, &end);
    if (p == end)
        return mc_fail(err, errlen, "invalid %s \"%s\": empty; %s", q->what, text, q->hint);
    if (*p == '-')
        return mc_fail(err, errlen, "invalid %s \"%s\": negative %s are not allowed", q->what, text,
                       q->plural);
    if (!isdigit((unsigned char)*p))
        return mc_fail(err, errlen, "invalid %s \"%s\": not a number; %s", q->what, text, q->hint);

    uint64_t whole = 0;
    int too_large = 0;
    for (; p < end && isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > ((uint64_t)INT64_MAX - d) / 10)
            too_large = 1;
        else
            whole = whole * 10 + d;
    }

    const char *frac = NULL;
    size_t nfrac = 0;
    if (p < end && *p == '.') {
        frac = ++p;
        while (p < end && isdigit((unsigned char)*p))
            p++;
        nfrac = (size_t)(p - frac);
        if (nfrac == 0)
            return mc_fail(err, errlen, "invalid %s \"%s\": not a number; %s", q->what, text,
                           q->hint);
    }

    while (p < end && isspace((unsigned char)*p))
        p++;
    if (p < end && *p == '%')
        return mc_fail(err, errlen, "invalid %s \"%s\": percentages are not %s; %s", q->what, text,
                       q->plural, q->hint);
    if (p + 1 < end && (*p == 'e' || *p == 'E') &&
        (isdigit((unsigned char)p[1]) || p[1] == '+' || p[1] == '-'))
        return mc_fail(err, errlen, "invalid %s \"%s\": exponent notation is not supported; %s",
                       q->what, text, q->hint);

    uint64_t scale = 1;
    if (p < end) {
        const char *u = p;
        while (p < end && isalpha((unsigned char)*p))
            p++;
        const struct unit *unit = find_unit(q, u, (size_t)(p - u));
        if (p < end) {
            /* Point at what follows a real unit ("16MB!" -> "!"), else at the whole tail. */
            const char *junk = unit ? p : u;
            while (isspace((unsigned char)*junk))
                junk++;
            return mc_fail(err, errlen,
                           "invalid %s \"%s\": unexpected text \"%.*s\" after the number; %s",
                           q->what, text, (int)(end - junk), junk, q->hint);
        }
        if (!unit)
            return mc_fail(err, errlen, "invalid %s \"%s\": unknown unit \"%.*s\"; use %s", q->what,
                           text, (int)(p - u), u, q->unit_list);
        scale = unit->scale;
    }

    uint64_t value = 0;
    if (!too_large && whole <= (uint64_t)INT64_MAX / scale) {
        value = whole * scale;
        uint64_t part = frac ? scaled_fraction(frac, nfrac, scale) : 0;
        if (value > (uint64_t)INT64_MAX - part)
            too_large = 1;
        else
            value += part;
    } else {
        too_large = 1;
    }
    if (too_large)
        return mc_fail(err, errlen,
                       "invalid %s \"%s\": too large; the maximum is 2^63-1 (%" PRId64 ")", q->what,
                       text, INT64_MAX);
    *out = value;
    return 0;
}

int mc_parse_size(const char *text, uint64_t *bytes, char *err, size_t errlen)
{
    return parse_scaled(&size_quantity, text, bytes, err, errlen);
}

int mc_parse_duration_ms(const char *text, uint64_t *ms, char *err, size_t errlen)
{
    return parse_scaled(&duration_quantity, text, ms, err, errlen);
}

int mc_parse_bool(const char *text, int *value, char *err, size_t errlen)
{
    static const char *const truths[] = {"1", "true", "yes", "on"};
    static const char *const lies[] = {"0", "false", "no", "off"};

    if (!text)
        return mc_fail(err, errlen, "invalid boolean: no text given");
    if (!value)
        return mc_fail(err, errlen, "invalid boolean \"%s\": nowhere to store the result", text);

    const char *b, *e;
    trim(text, &b, &e);
    size_t len = (size_t)(e - b);
    for (size_t i = 0; i < sizeof(truths) / sizeof(truths[0]); i++) {
        if (strlen(truths[i]) == len && strncasecmp(truths[i], b, len) == 0) {
            *value = 1;
            return 0;
        }
        if (strlen(lies[i]) == len && strncasecmp(lies[i], b, len) == 0) {
            *value = 0;
            return 0;
        }
    }
    return mc_fail(err, errlen,
                   "invalid boolean \"%s\": not a boolean; use true|false, 1|0, yes|no or on|off",
                   text);
}

int mc_parse_int64(const char *text, int64_t min, int64_t max, int64_t *value, char *err,
                   size_t errlen)
{
    if (!text)
        return mc_fail(err, errlen, "invalid integer: no text given");
    if (!value)
        return mc_fail(err, errlen, "invalid integer \"%s\": nowhere to store the result", text);

    const char *p, *end;
    trim(text, &p, &end);
    int negative = 0;
    if (p < end && (*p == '+' || *p == '-'))
        negative = *p++ == '-';
    if (p == end)
        return mc_fail(err, errlen, "invalid integer \"%s\": not an integer", text);

    /* Accumulate the magnitude; INT64_MIN's magnitude is one more than INT64_MAX's. */
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t mag = 0;
    int too_large = 0;
    for (; p < end; p++) {
        if (!isdigit((unsigned char)*p))
            return mc_fail(err, errlen, "invalid integer \"%s\": not an integer", text);
        unsigned d = (unsigned)(*p - '0');
        if (mag > (limit - d) / 10)
            too_large = 1;
        else
            mag = mag * 10 + d;
    }
    if (too_large)
        return mc_fail(err, errlen, "invalid integer \"%s\": out of range for a 64-bit integer",
                       text);

    int64_t v =
        negative ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    if (v < min || v > max)
        return mc_fail(err, errlen,
                       "invalid integer \"%s\": out of range; must be between %" PRId64
                       " and %" PRId64,
                       text, min, max);
    *value = v;
    return 0;
}

int mc_parse_double(const char *text, double min, double max, double *value, char *err,
                    size_t errlen)
{
    if (!text)
        return mc_fail(err, errlen, "invalid number: no text given");
    if (!value)
        return mc_fail(err, errlen, "invalid number \"%s\": nowhere to store the result", text);

    const char *b, *e;
    trim(text, &b, &e);
    /* strtod also reads hex floats, "inf" and "nan"; only decimal text is a number here. */
    for (const char *p = b; p < e; p++) {
        if (!isdigit((unsigned char)*p) && !strchr("+-.eE", *p))
            return mc_fail(err, errlen, "invalid number \"%s\": not a number", text);
    }
    if (b == e)
        return mc_fail(err, errlen, "invalid number \"%s\": not a number", text);

    char *stop;
    errno = 0;
    double v = strtod(b, &stop);
    if (stop != e)
        return mc_fail(err, errlen, "invalid number \"%s\": not a number", text);
    if (!isfinite(v))
        return mc_fail(err, errlen, "invalid number \"%s\": out of range for a double", text);
    if (!(v >= min && v <= max))
        return mc_fail(err, errlen,
                       "invalid number \"%s\": out of range; must be between %g and %g", text, min,
                       max);
    *value = v;
    return 0;
}

const char *mc_format_size(uint64_t bytes, char *buf, size_t buflen)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};

    if (!buf || buflen == 0)
        return buf;
    if (bytes < 1024) {
        snprintf(buf, buflen, "%" PRIu64 " B", bytes);
        return buf;
    }
    /* Pick the largest unit not above the value, moving up when rounding reaches 1024.0. */
    size_t u = 0;
    double v = (double)bytes / 1024.0;
    while (u + 1 < sizeof(units) / sizeof(units[0]) && v >= 1023.95) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, buflen, "%.1f %s", v, units[u]);
    return buf;
}

int64_t mc_meminfo(const char *field)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    char line[256];
    size_t n = strlen(field);
    int64_t v = -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long x;
        if (!strncmp(line, field, n) && line[n] == ':' && sscanf(line + n + 1, "%llu", &x) == 1) {
            v = (int64_t)x;
            break;
        }
    }
    fclose(f);
    return v;
}

#define MC_CONTENTION_CHECK_NS 100000000ull /* re-read /proc/loadavg at most this often */

int mc_cpus_contended(void)
{
    static _Atomic uint64_t checked_ns;
    static atomic_int contended;
    static long cpus;
    uint64_t now = mc_now_ns();
    uint64_t last = atomic_load(&checked_ns);
    if (now - last < MC_CONTENTION_CHECK_NS ||
        !atomic_compare_exchange_strong(&checked_ns, &last, now))
        return atomic_load(&contended); /* fresh enough, or another thread is reading */
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f = fopen("/proc/loadavg", "r");
    int busy = 0;
    if (f) {
        double l1, l5, l15;
        long running = 0, total = 0;
        /* "0.52 0.58 0.59 3/467 12345": runnable/total scheduling entities, this reader too */
        if (fscanf(f, "%lf %lf %lf %ld/%ld", &l1, &l5, &l15, &running, &total) == 5 && cpus > 0)
            busy = running > cpus;
        fclose(f);
    }
    atomic_store(&contended, busy);
    return busy;
}
