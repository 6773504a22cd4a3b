/*
 * fault_soak.c — the store's fault soak ("reads are exact or they fail").
 *
 * Starts a real mooncake_master (short --client_ttl and --default_kv_lease_ttl, so expiry and
 * lease paths run) and N mooncake_client holders on loopback (tests/support/cluster.h), then,
 * in this process, one store client (no segment) shared by T worker threads that put, upsert,
 * put_from, upsert_from, get, get_into, get_batch, get_into_batch and remove keys of a moderate
 * key space (1/8 of it hot), 1 B .. ~1 MiB, replica_num 1 or 2. A chaos thread meanwhile
 * SIGSTOPs holders (for 0.5..2x client_ttl, and often past it so the master expires them and
 * they re-mount), SIGKILLs and restarts them, and SIGSTOPs "stalled readers": child processes
 * (this program with --reader_child) that only read and verify, so some reads stall mid-flight,
 * sometimes across a holder's expiry and re-mount.
 *
 * Every value is unique per (key, generation): the first 32 bytes are a header (magic,
 * generation, key hash, length, key id, CRC32 of the header) and every other byte comes from a
 * PRNG stream seeded by (key, generation); values shorter than the header are a prefix of the
 * stream. The value's size is a function of (key, generation) too. A read that returns success
 * is verified completely: the key's own bytes, a generation that was issued, that generation's
 * size, the whole body. Anything else is WRONG BYTES, logged with key, size, generation found and
 * issued, first differing offset and, when it can tell, where the bytes came from (another key's
 * object beginning inside, stale bytes the get did not write). Any generation ever issued is a
 * legitimate answer (puts, upserts and removes race); reads of one whose put had not returned,
 * or failed, are counted ("unacked"), not failed. Errors are fine: counted per code.
 *
 * Exit 0 only with 0 wrong bytes, at least --min_verified verified reads and (unless --calm)
 * at least one holder stop, kill and restart each (one more per minute); every child is
 * stopped and reaped on every path (the cluster registry, an atexit hook and a SIGABRT hook).
 *
 *   fault_soak [--duration=40] [--threads=8] [--holders=3] [--seed=N] [--value_size=1-1048576]
 *              [--lease_ms=1000] [--json=PATH] ...   (--help lists all; MC_SOAK_SECONDS sets the
 *              default duration)
 */
#include "mooncake/errors.h"
#include "mooncake/store.h"
#include "cluster.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SOAK_MAGIC 0x4b534f4du /* "MOSK" little-endian */
#define SOAK_HEADER_SIZE 32
#define SOAK_MAX_HOLDERS 16
#define SOAK_MAX_THREADS 64
#define SOAK_MAX_BATCH 4
#define SOAK_MAX_CODES 24
#define SOAK_WRONG_LOG_LIMIT 40
#define SOAK_RECENT_GENS 64 /* generations searched when naming the source of torn bytes */
#define SOAK_MAX_READERS 8
/* A reader child does not know how many generations the writers issued: it accepts any up to
 * this bound (the header's key, length and body are still checked in full). */
#define SOAK_CHILD_GEN_BOUND 65536u

/* Exit codes. */
enum {
    SOAK_EXIT_PASS = 0,
    SOAK_EXIT_WRONG_BYTES = 1,
    SOAK_EXIT_TOO_FEW_READS = 2,
    SOAK_EXIT_SETUP = 3,
    SOAK_EXIT_HANG = 4,
    SOAK_EXIT_TOO_LITTLE_CHAOS = 5, /* fewer stops, kills or restarts than the duration calls for */
    SOAK_EXIT_USAGE = 64,
};

typedef struct soak_opts {
    double duration_s;
    int threads, holders, readers, keys, client_ttl_s, lease_ms, transfer_timeout_s, no_shm,
        verbose, calm;
    const char *reader_child; /* set in a stalled-reader child: the master's address */
    uint64_t seed;
    size_t vmin, vmax;
    uint64_t min_verified;
    char segment[32];
    const char *json;
    const char *log; /* --log: where the processes' stderr goes (NULL: inherited) */
} soak_opts_t;

/* One key: its name, and the fate of each generation written to it (guarded by mu). */
enum { GEN_IN_FLIGHT = 0, GEN_ACKED = 1, GEN_FAILED = 2 };

typedef struct soak_key {
    char name[64];
    uint64_t hash;
    pthread_mutex_t mu;
    uint32_t issued; /* generations 1..issued have been handed to a writer */
    uint8_t *fate;   /* fate[g] for g in 1..issued */
    uint32_t cap;
} soak_key_t;

typedef enum soak_op {
    OP_PUT,
    OP_UPSERT,
    OP_PUT_FROM,
    OP_UPSERT_FROM,
    OP_GET,
    OP_GET_INTO,
    OP_GET_BATCH,
    OP_GET_INTO_BATCH,
    OP_REMOVE,
    OP_COUNT
} soak_op_t;

static const char *const op_names[OP_COUNT] = {"put",   "upsert",   "put_from",  "upsert_from",
                                               "get",   "get_into", "get_batch", "get_into_batch",
                                               "remove"};
/* Relative frequency of each op. */
static const int op_weights[OP_COUNT] = {14, 10, 6, 5, 20, 14, 10, 8, 13};

typedef struct soak_code_count {
    int code;
    uint64_t n;
} soak_code_count_t;

/* Per op kind: calls, per-key results (batches count each key), outcomes. */
typedef struct soak_op_stats {
    uint64_t calls, results, ok, verified, wrong, unacked_gen, failed_gen, bytes;
    soak_code_count_t codes[SOAK_MAX_CODES];
    uint64_t other_codes;
} soak_op_stats_t;

typedef struct soak_thread {
    pthread_t tid;
    int index;
    uint64_t rng;
    uint8_t *plain;      /* unregistered: put source, get and get_batch destinations */
    uint8_t *registered; /* registered: put_from source, get_into(_batch) destinations */
    uint8_t *expect;     /* scratch for the expected bytes */
    /* What each destination slot held after its last use ([0] plain, [1] registered; slot 0
     * single-key, 1.. batch): key index + 1 and generation, 0 = unknown. Names stale bytes. */
    uint32_t prev_key[2][SOAK_MAX_BATCH + 1], prev_gen[2][SOAK_MAX_BATCH + 1];
    int cur_area, cur_slot; /* the slot being verified */
    uint32_t found_gen;     /* set by a verification that passed */
    soak_op_stats_t stats[OP_COUNT];
} soak_thread_t;

typedef enum { HOLDER_RUNNING, HOLDER_STOPPED, HOLDER_DEAD } soak_holder_state_t;

typedef struct soak_holder {
    mc_holder_t h;
    soak_holder_state_t state;
    double until; /* STOPPED: SIGCONT time; DEAD: restart time */
} soak_holder_t;

typedef struct soak_chaos_stats {
    uint64_t short_stops, long_stops, kills, restarts, restart_failures, crashes;
    uint64_t stop_failures; /* a live holder or reader that did not stop within 15 s */
} soak_chaos_stats_t;

static soak_opts_t opt;
static soak_key_t *keys;
static mc_store_t *store;
static mc_master_t master;
static soak_holder_t holders[SOAK_MAX_HOLDERS];
/* Stalled readers: child processes (this program with --reader_child) that only read and
 * verify, SIGSTOPped at random by the chaos thread so their reads stall mid-flight. */
static soak_holder_t readers[SOAK_MAX_READERS];
static uint64_t reader_stops, reader_verified, reader_wrong;
static int reader_lost;
static soak_chaos_stats_t chaos_stats;
static soak_thread_t *workers;
static atomic_int stop_flag;
static double start_time; /* now_s() when the soak began */
static atomic_int workers_running;
static atomic_uint_fast64_t wrong_logged;
/* The soak's own findings; with --log the processes' logs (stderr) go to that file instead. */
static FILE *soak_err;
/* Set by the chaos thread once chaos_too_little() is false; read by the main loop. */
static atomic_int chaos_enough;
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- PRNG, hashes, CRC ---------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t n)
{
    return n ? splitmix64(state) % n : 0;
}

static double rng_unit(uint64_t *state)
{
    return (double)(splitmix64(state) >> 11) / (double)(1ull << 53);
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static uint32_t crc32_bytes(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* ---- values --------------------------------------------------------------------------------- */

typedef struct soak_header {
    uint32_t magic;
    uint32_t gen;
    uint64_t key_hash;
    uint64_t length;
    uint32_t key_id;
    uint32_t crc; /* CRC32 of the 28 bytes before it */
} soak_header_t;

_Static_assert(sizeof(soak_header_t) == SOAK_HEADER_SIZE, "header is 32 bytes");

static uint64_t value_seed(const soak_key_t *k, uint32_t gen)
{
    uint64_t s = k->hash ^ ((uint64_t)gen * 0xD1B54A32D192ED03ull) ^ opt.seed;
    return splitmix64(&s);
}

static size_t clamp_size(uint64_t v)
{
    return v < opt.vmin ? opt.vmin : v > opt.vmax ? opt.vmax : (size_t)v;
}

/* The size of generation gen of key k: mostly small, some up to vmax. */
static size_t value_size(const soak_key_t *k, uint32_t gen)
{
    uint64_t s = value_seed(k, gen) ^ 0x5A5A5A5A5A5A5A5Aull;
    uint64_t pick = rng_below(&s, 100);
    if (pick < 5)
        return clamp_size(1 + rng_below(&s, SOAK_HEADER_SIZE - 1));
    if (pick < 65)
        return clamp_size(SOAK_HEADER_SIZE + rng_below(&s, 4096 - SOAK_HEADER_SIZE));
    if (pick < 90)
        return clamp_size(4096 + rng_below(&s, 60 * 1024));
    uint64_t lo = 64 * 1024 < opt.vmax ? 64 * 1024 : opt.vmin;
    return clamp_size(lo + rng_below(&s, opt.vmax - lo + 1));
}

/* The PRNG stream of (k, gen), bytes [0, len). */
static void fill_stream(const soak_key_t *k, uint32_t gen, uint8_t *buf, size_t len)
{
    uint64_t s = value_seed(k, gen);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = splitmix64(&s);
        memcpy(buf + i, &w, 8);
    }
    if (i < len) {
        uint64_t w = splitmix64(&s);
        memcpy(buf + i, &w, len - i);
    }
}

static void make_header(const soak_key_t *k, uint32_t gen, size_t len, soak_header_t *h)
{
    h->magic = SOAK_MAGIC;
    h->gen = gen;
    h->key_hash = k->hash;
    h->length = len;
    h->key_id = (uint32_t)(k - keys);
    h->crc = crc32_bytes(h, offsetof(soak_header_t, crc));
}

/* The whole value of generation gen of key k; returns its size. */
static size_t make_value(const soak_key_t *k, uint32_t gen, uint8_t *buf)
{
    size_t len = value_size(k, gen);
    fill_stream(k, gen, buf, len);
    if (len >= SOAK_HEADER_SIZE) {
        soak_header_t h;
        make_header(k, gen, len, &h);
        memcpy(buf, &h, sizeof(h));
    }
    return len;
}

/* ---- key bookkeeping ------------------------------------------------------------------------ */

static uint32_t key_issue(soak_key_t *k)
{
    pthread_mutex_lock(&k->mu);
    uint32_t gen = ++k->issued;
    if (gen >= k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 64;
        uint8_t *fate = realloc(k->fate, cap);
        if (!fate) {
            fprintf(soak_err, "fault_soak: out of memory\n");
            abort();
        }
        memset(fate + k->cap, GEN_IN_FLIGHT, cap - k->cap);
        k->fate = fate;
        k->cap = cap;
    }
    k->fate[gen] = GEN_IN_FLIGHT;
    pthread_mutex_unlock(&k->mu);
    return gen;
}

static void key_settle(soak_key_t *k, uint32_t gen, int acked)
{
    pthread_mutex_lock(&k->mu);
    k->fate[gen] = acked ? GEN_ACKED : GEN_FAILED;
    pthread_mutex_unlock(&k->mu);
}

static uint32_t key_issued(soak_key_t *k)
{
    if (opt.reader_child)
        return SOAK_CHILD_GEN_BOUND;
    pthread_mutex_lock(&k->mu);
    uint32_t n = k->issued;
    pthread_mutex_unlock(&k->mu);
    return n;
}

static int key_fate(soak_key_t *k, uint32_t gen)
{
    if (opt.reader_child)
        return GEN_ACKED;
    pthread_mutex_lock(&k->mu);
    int f = gen >= 1 && gen <= k->issued ? k->fate[gen] : -1;
    pthread_mutex_unlock(&k->mu);
    return f;
}

/* ---- verification --------------------------------------------------------------------------- */

static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t len)
{
    size_t i = 0;
    while (i + 8 <= len && memcmp(a + i, b + i, 8) == 0)
        i += 8;
    while (i < len && a[i] == b[i])
        i++;
    return i;
}

/* Names the generation of key k whose stream holds got[off..off+8) at that offset, if any. */
static uint32_t source_gen(soak_key_t *k, uint32_t issued, const uint8_t *got, size_t len,
                           size_t off, uint8_t *scratch)
{
    size_t n = len - off < 8 ? len - off : 8;
    uint32_t lo = issued > SOAK_RECENT_GENS ? issued - SOAK_RECENT_GENS : 1;
    for (uint32_t g = issued; g >= lo && g > 0; g--) {
        if (value_size(k, g) < off + n)
            continue;
        make_value(k, g, scratch);
        if (memcmp(scratch + off, got + off, n) == 0)
            return g;
    }
    return 0;
}

static void report_wrong(soak_thread_t *t, soak_op_t op, const soak_key_t *k, size_t len,
                         const char *fmt, ...)
{
    if (atomic_fetch_add(&wrong_logged, 1) >= SOAK_WRONG_LOG_LIMIT)
        return;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    fprintf(soak_err, "fault_soak: t=%.1fs WRONG BYTES thread %d %s key %s size %zu: %s\n",
            now_s() - start_time, t->index, op_names[op], k->name, len, why);
}

typedef enum { VERIFY_OK, VERIFY_OK_UNACKED, VERIFY_OK_FAILED, VERIFY_WRONG } soak_verdict_t;

static soak_verdict_t verdict_for_gen(soak_key_t *k, uint32_t gen)
{
    int f = key_fate(k, gen);
    return f == GEN_ACKED ? VERIFY_OK : f == GEN_FAILED ? VERIFY_OK_FAILED : VERIFY_OK_UNACKED;
}

/* A value shorter than the header: the stream of some generation of this key with that size. */
static soak_verdict_t verify_small(soak_thread_t *t, soak_op_t op, soak_key_t *k,
                                   const uint8_t *got, size_t len)
{
    uint32_t issued = key_issued(k);
    uint32_t nearest = 0;
    for (uint32_t g = issued; g > 0; g--) {
        if (value_size(k, g) != len)
            continue;
        fill_stream(k, g, t->expect, len);
        if (memcmp(t->expect, got, len) == 0) {
            t->found_gen = g;
            return verdict_for_gen(k, g);
        }
        if (!nearest)
            nearest = g;
    }
    size_t off = 0;
    if (nearest) {
        fill_stream(k, nearest, t->expect, len);
        off = first_diff(t->expect, got, len);
    }
    report_wrong(t, op, k, len,
                 "short value matches no generation (issued %u; latest of this size %u differs "
                 "at offset %zu)",
                 issued, nearest, off);
    return VERIFY_WRONG;
}

static soak_key_t *key_by_header(const soak_header_t *h)
{
    if (h->key_id < (uint32_t)opt.keys && keys[h->key_id].hash == h->key_hash)
        return &keys[h->key_id];
    return NULL;
}

/* Where the wrong bytes from offset `off` on come from, as far as can be told. */
static void describe_foreign(soak_thread_t *t, const uint8_t *got, size_t len, size_t off,
                             const uint8_t *expected, char *out, size_t cap)
{
    size_t differ = 0, last = off;
    for (size_t i = off; expected && i < len; i++) {
        if (got[i] != expected[i]) {
            differ++;
            last = i;
        }
    }
    int n = expected ? snprintf(out, cap, "%zu of %zu bytes from there differ, the last at %zu",
                                differ, len - off, last)
                     : snprintf(out, cap, "generation unknown");
    uint32_t pk = t->prev_key[t->cur_area][t->cur_slot], pg = t->prev_gen[t->cur_area][t->cur_slot];
    if (pk && pg && n > 0 && (size_t)n < cap) {
        soak_key_t *prev = &keys[pk - 1];
        size_t plen = value_size(prev, pg), cmp = len - off < 8 ? len - off : 8;
        if (plen >= off + cmp) {
            make_value(prev, pg, t->expect);
            if (memcmp(t->expect + off, got + off, cmp) == 0)
                n += snprintf(out + n, cap - (size_t)n,
                              "; they are STALE: the buffer's previous content (%s gen %u): "
                              "the destination was not written there",
                              prev->name, pg);
        }
    }
    for (size_t x = (off + 7) & ~(size_t)7; x + SOAK_HEADER_SIZE <= len && n > 0 && (size_t)n < cap;
         x += 8) {
        soak_header_t h;
        memcpy(&h, got + x, sizeof(h));
        if (h.magic != SOAK_MAGIC || h.crc != crc32_bytes(&h, offsetof(soak_header_t, crc)))
            continue;
        soak_key_t *other = key_by_header(&h);
        n += snprintf(out + n, cap - (size_t)n,
                      "; an object of %s gen %u (length %" PRIu64 ") begins at offset %zu",
                      other ? other->name : "(unknown key)", h.gen, h.length, x);
        break;
    }
}

static soak_verdict_t verify_value(soak_thread_t *t, soak_op_t op, soak_key_t *k,
                                   const uint8_t *got, size_t len)
{
    if (len < opt.vmin || len > opt.vmax) {
        report_wrong(t, op, k, len, "length outside [%zu, %zu]", opt.vmin, opt.vmax);
        return VERIFY_WRONG;
    }
    if (len < SOAK_HEADER_SIZE)
        return verify_small(t, op, k, got, len);
    soak_header_t h;
    memcpy(&h, got, sizeof(h));
    uint32_t issued = key_issued(k);
    if (h.magic != SOAK_MAGIC || h.crc != crc32_bytes(&h, offsetof(soak_header_t, crc))) {
        char where[512];
        describe_foreign(t, got, len, 0, NULL, where, sizeof(where));
        uint32_t g = source_gen(k, issued, got, len, 0, t->expect);
        report_wrong(t, op, k, len,
                     "no valid header (magic %08x, crc %s; first 8 bytes %s gen %u of this "
                     "key's streams; issued %u): %s",
                     h.magic, h.magic == SOAK_MAGIC ? "bad" : "-", g ? "match" : "match no recent",
                     g, issued, where);
        return VERIFY_WRONG;
    }
    if (h.key_hash != k->hash || h.key_id != (uint32_t)(k - keys)) {
        soak_key_t *other = key_by_header(&h);
        report_wrong(t, op, k, len,
                     "bytes of another key: header names %s gen %u length %" PRIu64
                     " (wanted key id %u, issued %u)",
                     other ? other->name : "(unknown)", h.gen, h.length, (uint32_t)(k - keys),
                     issued);
        return VERIFY_WRONG;
    }
    if (h.gen == 0 || h.gen > issued) {
        report_wrong(t, op, k, len, "generation %u found, only 1..%u issued", h.gen, issued);
        return VERIFY_WRONG;
    }
    size_t want = value_size(k, h.gen);
    if (h.length != len || want != len) {
        report_wrong(t, op, k, len,
                     "generation %u (issued %u): header length %" PRIu64
                     ", generation's size %zu, returned %zu",
                     h.gen, issued, h.length, want, len);
        return VERIFY_WRONG;
    }
    uint8_t *expected = malloc(len);
    if (!expected) {
        fprintf(soak_err, "fault_soak: out of memory\n");
        abort();
    }
    make_value(k, h.gen, expected);
    size_t off = first_diff(expected, got, len);
    if (off < len) {
        char where[512];
        describe_foreign(t, got, len, off, expected, where, sizeof(where));
        uint32_t g = source_gen(k, issued, got, len, off, t->expect);
        report_wrong(t, op, k, len,
                     "generation %u (issued %u, %s) torn from offset %zu: %s; bytes there match "
                     "%s %u of this key",
                     h.gen, issued,
                     key_fate(k, h.gen) == GEN_ACKED ? "acked" : "put not acked (yet)", off, where,
                     g ? "generation" : "no recent generation, e.g.", g);
        free(expected);
        return VERIFY_WRONG;
    }
    free(expected);
    t->found_gen = h.gen;
    return verdict_for_gen(k, h.gen);
}

/* ---- statistics ----------------------------------------------------------------------------- */

static void add_code(soak_op_stats_t *s, int code, uint64_t n)
{
    for (int i = 0; i < SOAK_MAX_CODES; i++) {
        if (s->codes[i].n == 0 || s->codes[i].code == code) {
            s->codes[i].code = code;
            s->codes[i].n += n;
            return;
        }
    }
    s->other_codes += n;
}

static void count_code(soak_op_stats_t *s, int code)
{
    add_code(s, code, 1);
}

/* One read result: rc is the get's result for this key, buf its destination. */
static void account_read(soak_thread_t *t, soak_op_t op, soak_key_t *k, int64_t rc,
                         const uint8_t *buf, int area, int slot)
{
    soak_op_stats_t *s = &t->stats[op];
    s->results++;
    t->cur_area = area;
    t->cur_slot = slot;
    t->found_gen = 0;
    if (rc < 0) {
        count_code(s, (int)rc);
        t->prev_key[area][slot] = t->prev_gen[area][slot] = 0; /* may be partly written */
        return;
    }
    s->ok++;
    s->bytes += (uint64_t)rc;
    soak_verdict_t v = verify_value(t, op, k, buf, (size_t)rc);
    t->prev_key[area][slot] = t->found_gen ? (uint32_t)(k - keys) + 1 : 0;
    t->prev_gen[area][slot] = t->found_gen;
    switch (v) {
    case VERIFY_WRONG:
        s->wrong++;
        return;
    case VERIFY_OK_UNACKED:
        s->unacked_gen++;
        break;
    case VERIFY_OK_FAILED:
        s->failed_gen++;
        break;
    case VERIFY_OK:
        break;
    }
    s->verified++;
}

static void account_status(soak_thread_t *t, soak_op_t op, int rc, size_t bytes)
{
    soak_op_stats_t *s = &t->stats[op];
    s->results++;
    if (rc < 0) {
        count_code(s, rc);
        return;
    }
    s->ok++;
    s->bytes += bytes;
}

/* ---- workers -------------------------------------------------------------------------------- */

static soak_key_t *pick_key(soak_thread_t *t)
{
    int hot = opt.keys / 8 > 0 ? opt.keys / 8 : 1;
    if (rng_below(&t->rng, 2) == 0)
        return &keys[rng_below(&t->rng, (uint64_t)hot)];
    return &keys[rng_below(&t->rng, (uint64_t)opt.keys)];
}

/* Weight of op in the mix: a reader child only reads. */
static int op_weight(int op)
{
    int read = op == OP_GET || op == OP_GET_INTO || op == OP_GET_BATCH || op == OP_GET_INTO_BATCH;
    return opt.reader_child && !read ? 0 : op_weights[op];
}

static soak_op_t pick_op(soak_thread_t *t)
{
    int total = 0;
    for (int i = 0; i < OP_COUNT; i++)
        total += op_weight(i);
    int r = (int)rng_below(&t->rng, (uint64_t)total);
    for (int i = 0; i < OP_COUNT; i++) {
        if (r < op_weight(i))
            return (soak_op_t)i;
        r -= op_weight(i);
    }
    return OP_GET;
}

static void do_write(soak_thread_t *t, soak_op_t op)
{
    soak_key_t *k = pick_key(t);
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.replica_num = 1 + (uint32_t)rng_below(&t->rng, 2);
    uint32_t gen = key_issue(k);
    int registered = op == OP_PUT_FROM || op == OP_UPSERT_FROM;
    uint8_t *src = registered ? t->registered : t->plain;
    size_t len = make_value(k, gen, src);
    int rc;
    switch (op) {
    case OP_PUT:
        rc = mc_store_put(store, k->name, src, len, &cfg);
        break;
    case OP_UPSERT:
        rc = mc_store_upsert(store, k->name, src, len, &cfg);
        break;
    case OP_PUT_FROM:
        rc = mc_store_put_from(store, k->name, src, len, &cfg);
        break;
    default:
        rc = mc_store_upsert_from(store, k->name, src, len, &cfg);
        break;
    }
    key_settle(k, gen, rc == 0);
    t->prev_key[registered][0] = (uint32_t)(k - keys) + 1; /* the source slot holds it now */
    t->prev_gen[registered][0] = gen;
    t->stats[op].calls++;
    account_status(t, op, rc, len);
}

static void do_get(soak_thread_t *t, soak_op_t op)
{
    soak_key_t *k = pick_key(t);
    uint8_t *dst = op == OP_GET_INTO ? t->registered : t->plain;
    memset(dst, 0xE5, SOAK_HEADER_SIZE); /* a get that writes nothing cannot pass as a value */
    int64_t rc = op == OP_GET_INTO ? mc_store_get_into(store, k->name, dst, opt.vmax)
                                   : mc_store_get(store, k->name, dst, opt.vmax);
    t->stats[op].calls++;
    account_read(t, op, k, rc, dst, op == OP_GET_INTO, 0);
}

static void do_get_batch(soak_thread_t *t, soak_op_t op)
{
    size_t n = 2 + (size_t)rng_below(&t->rng, SOAK_MAX_BATCH - 1);
    soak_key_t *ks[SOAK_MAX_BATCH];
    const char *names[SOAK_MAX_BATCH];
    void *bufs[SOAK_MAX_BATCH];
    size_t caps[SOAK_MAX_BATCH];
    int64_t results[SOAK_MAX_BATCH];
    uint8_t *base = op == OP_GET_INTO_BATCH ? t->registered : t->plain;
    for (size_t i = 0; i < n; i++) {
        ks[i] = pick_key(t);
        names[i] = ks[i]->name;
        bufs[i] = base + (i + 1) * opt.vmax; /* slot 0 is the single-key slot */
        caps[i] = opt.vmax;
        results[i] = INT64_MIN;
        memset(bufs[i], 0xE5, SOAK_HEADER_SIZE);
    }
    if (op == OP_GET_INTO_BATCH)
        mc_store_get_into_batch(store, names, bufs, caps, n, results);
    else
        mc_store_get_batch(store, names, bufs, caps, n, results);
    t->stats[op].calls++;
    for (size_t i = 0; i < n; i++) {
        if (results[i] == INT64_MIN) {
            report_wrong(t, op, ks[i], 0, "batch left results[%zu] unset", i);
            t->stats[op].results++;
            t->stats[op].wrong++;
            continue;
        }
        account_read(t, op, ks[i], results[i], bufs[i], op == OP_GET_INTO_BATCH, (int)i + 1);
    }
}

static void do_remove(soak_thread_t *t)
{
    soak_key_t *k = pick_key(t);
    int rc = mc_store_remove(store, k->name, (int)rng_below(&t->rng, 2));
    t->stats[OP_REMOVE].calls++;
    account_status(t, OP_REMOVE, rc, 0);
}

static void *worker_main(void *arg)
{
    soak_thread_t *t = arg;
    while (!atomic_load(&stop_flag)) {
        soak_op_t op = pick_op(t);
        switch (op) {
        case OP_PUT:
        case OP_UPSERT:
        case OP_PUT_FROM:
        case OP_UPSERT_FROM:
            do_write(t, op);
            break;
        case OP_GET:
        case OP_GET_INTO:
            do_get(t, op);
            break;
        case OP_GET_BATCH:
        case OP_GET_INTO_BATCH:
            do_get_batch(t, op);
            break;
        default:
            do_remove(t);
            break;
        }
    }
    pthread_mutex_lock(&done_mu);
    atomic_fetch_sub(&workers_running, 1);
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&done_mu);
    return NULL;
}

/* ---- chaos ---------------------------------------------------------------------------------- */

static int holder_start(soak_holder_t *h)
{
    static const char *const flags[] = {"--protocol=tcp", NULL};
    if (mc_holder_start(&h->h, &master, opt.segment, flags, NULL, 30000) != 0)
        return -1;
    h->state = HOLDER_RUNNING;
    return 0;
}

static int running_holders(void)
{
    int n = 0;
    for (int i = 0; i < opt.holders; i++)
        n += holders[i].state == HOLDER_RUNNING;
    return n;
}

/* Reaps a holder that died on its own (a crash is a finding: it is logged and restarted). */
static void check_crashed(soak_holder_t *h, double now)
{
    int status;
    if (h->state == HOLDER_DEAD || waitpid(h->h.proc.pid, &status, WNOHANG) != h->h.proc.pid)
        return;
    chaos_stats.crashes++;
    if (WIFEXITED(status))
        fprintf(soak_err, "fault_soak: holder %s exited by itself with status %d\n", h->h.segment,
                WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        fprintf(soak_err, "fault_soak: holder %s died of signal %d\n", h->h.segment,
                WTERMSIG(status));
    mc_cluster_untrack(h->h.proc.pid);
    close(h->h.proc.stdin_fd);
    close(h->h.proc.stdout_fd);
    h->h.proc.pid = -1;
    h->state = HOLDER_DEAD;
    h->until = now;
}

/*
 * SIGSTOP that returns once every thread of the child is stopped (mc_proc_freeze): a holder
 * still running after kill() returned would make "stopped" a lie. 0 when stopped; -1 when the
 * child died meanwhile (check_crashed reaps it) or, counted as a failure of the soak, when a
 * live child did not stop within 15 s (it is resumed; a starved host can take seconds).
 */
static int chaos_freeze(soak_holder_t *h)
{
    if (mc_proc_freeze(h->h.proc.pid, 15000) == 0)
        return 0;
    if (mc_proc_is_frozen(h->h.proc.pid) >= 0) {
        chaos_stats.stop_failures++;
        mc_proc_thaw(h->h.proc.pid);
    }
    return -1;
}

/* The fewest stops, kills and restarts a soak of this length must have done to pass: one of
 * each from 10 s on, one more per minute (the random chaos does several per minute). */
static uint64_t chaos_minimum(void)
{
    return opt.duration_s < 10.0 ? 0 : 1 + (uint64_t)(opt.duration_s / 60.0);
}

/* Whether the chaos so far is less than a pass needs (the chaos thread's counts). */
static int chaos_too_little(void)
{
    uint64_t least = opt.reader_child || opt.calm ? 0 : chaos_minimum();
    return chaos_stats.short_stops + chaos_stats.long_stops < least || chaos_stats.kills < least ||
           chaos_stats.restarts < least || chaos_stats.stop_failures > 0;
}

static void chaos_act(soak_holder_t *h, uint64_t *rng, double now)
{
    double ttl = opt.client_ttl_s;
    uint64_t pick = rng_below(rng, 100);
    /* Past a third of the soak with no stop or no kill yet (an unlucky seed), do that one: a
     * pass must have survived every kind of fault. */
    if (now - start_time > opt.duration_s / 3.0) {
        if (chaos_stats.kills == 0)
            pick = 99;
        else if (chaos_stats.short_stops + chaos_stats.long_stops == 0)
            pick = 50;
    }
    if (pick < 70 && chaos_freeze(h) != 0)
        return;
    if (pick < 30) { /* short stall: 0.5 .. 2x client_ttl */
        h->state = HOLDER_STOPPED;
        h->until = now + ttl * (0.5 + 1.5 * rng_unit(rng));
        chaos_stats.short_stops++;
    } else if (pick < 70) { /* past the ttl: the master expires it, it re-mounts */
        h->state = HOLDER_STOPPED;
        h->until = now + ttl * 2.0 + 1.0 + 2.0 * rng_unit(rng);
        chaos_stats.long_stops++;
    } else { /* kill, restart a little later */
        mc_cluster_untrack(h->h.proc.pid);
        mc_proc_stop(&h->h.proc, SIGKILL, 5000);
        h->state = HOLDER_DEAD;
        h->until = now + 1.5 * rng_unit(rng);
        chaos_stats.kills++;
    }
    if (opt.verbose)
        fprintf(soak_err, "fault_soak: t=%.1fs chaos %s holder %s for %.1f s\n", now - start_time,
                h->state == HOLDER_STOPPED ? "SIGSTOP" : "SIGKILL", h->h.segment, h->until - now);
}

/* ---- stalled readers ------------------------------------------------------------------------ */

static int reader_start(soak_holder_t *r)
{
    char child[96], seed[40], keys_flag[32], sizes[64];
    snprintf(child, sizeof(child), "--reader_child=%s", master.addr);
    snprintf(seed, sizeof(seed), "--seed=%" PRIu64, opt.seed);
    snprintf(keys_flag, sizeof(keys_flag), "--keys=%d", opt.keys);
    snprintf(sizes, sizeof(sizes), "--value_size=%zu-%zu", opt.vmin, opt.vmax);
    char *argv[] = {
        "/proc/self/exe",     child, seed, keys_flag, sizes, "--threads=2", "--min_verified=0",
        "--duration=1000000", NULL};
    if (mc_proc_start(&r->h.proc, argv, "fault_soak reader ready", 30000) != 0)
        return -1;
    mc_cluster_track(r->h.proc.pid);
    snprintf(r->h.segment, sizeof(r->h.segment), "reader pid %d", (int)r->h.proc.pid);
    r->state = HOLDER_RUNNING;
    return 0;
}

/* A reader that died on its own is a finding (logged, not restarted: its counts are lost). */
static void check_reader(soak_holder_t *r)
{
    int status;
    if (r->state == HOLDER_DEAD || waitpid(r->h.proc.pid, &status, WNOHANG) != r->h.proc.pid)
        return;
    reader_lost++;
    if (WIFEXITED(status))
        fprintf(soak_err, "fault_soak: %s exited by itself with status %d\n", r->h.segment,
                WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        fprintf(soak_err, "fault_soak: %s died of signal %d\n", r->h.segment, WTERMSIG(status));
    mc_cluster_untrack(r->h.proc.pid);
    close(r->h.proc.stdin_fd);
    close(r->h.proc.stdout_fd);
    r->h.proc.pid = -1;
    r->state = HOLDER_DEAD;
}

/* Stalls a reader for 0.2 s .. past a holder's expiry and re-mount. */
static void chaos_stall_reader(uint64_t *rng, double now)
{
    soak_holder_t *r = &readers[rng_below(rng, (uint64_t)opt.readers)];
    if (r->state != HOLDER_RUNNING)
        return;
    double longest = 2.0 * opt.client_ttl_s + 3.0;
    if (chaos_freeze(r) != 0)
        return;
    r->state = HOLDER_STOPPED;
    r->until = now + 0.2 + (longest - 0.2) * rng_unit(rng);
    reader_stops++;
    if (opt.verbose)
        fprintf(soak_err, "fault_soak: t=%.1fs chaos SIGSTOP %s for %.1f s\n", now - start_time,
                r->h.segment, r->until - now);
}

static void readers_tick(double now)
{
    for (int i = 0; i < opt.readers; i++) {
        check_reader(&readers[i]);
        if (readers[i].state == HOLDER_STOPPED && now >= readers[i].until) {
            kill(readers[i].h.proc.pid, SIGCONT);
            readers[i].state = HOLDER_RUNNING;
        }
    }
}

/* Stops one reader and relays its report; adds its verified reads and wrong bytes. */
static void reader_finish(soak_holder_t *r, int index)
{
    if (r->state == HOLDER_DEAD)
        return;
    kill(r->h.proc.pid, SIGCONT);
    kill(r->h.proc.pid, SIGTERM);
    char text[16384];
    size_t used = 0;
    double deadline = now_s() + 4.0 * opt.transfer_timeout_s + 15.0;
    while (used < sizeof(text) - 1 && now_s() < deadline) {
        struct pollfd pfd = {.fd = r->h.proc.stdout_fd, .events = POLLIN};
        if (poll(&pfd, 1, 200) <= 0)
            continue;
        ssize_t n = read(r->h.proc.stdout_fd, text + used, sizeof(text) - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    text[used] = '\0';
    mc_cluster_untrack(r->h.proc.pid);
    int status = mc_proc_stop(&r->h.proc, SIGKILL, 1000);
    r->state = HOLDER_DEAD;
    uint64_t verified = 0, wrong = 0;
    int got = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        printf("reader %d| %s\n", index, line);
        got |= sscanf(line, "fault_soak: %" SCNu64 " verified reads, %" SCNu64 " WRONG", &verified,
                      &wrong) == 2;
    }
    if (!got || status == -1 || !WIFEXITED(status) ||
        (WEXITSTATUS(status) != SOAK_EXIT_PASS && WEXITSTATUS(status) != SOAK_EXIT_WRONG_BYTES)) {
        fprintf(soak_err, "fault_soak: reader %d ended without its report (status %d)\n", index,
                status);
        reader_lost++;
    }
    reader_verified += verified;
    reader_wrong += wrong;
}

/*
 * A reader stalled across a holder's expiry: the holder and a reader stop together; the holder
 * resumes past client_ttl (the master has expired it and freed its extents), re-mounts and takes
 * new puts; the reader resumes later still, its reads of the old extents in flight.
 */
static void chaos_expire_under_reader(uint64_t *rng, double now)
{
    soak_holder_t *r = &readers[rng_below(rng, (uint64_t)opt.readers)];
    int i = (int)rng_below(rng, (uint64_t)opt.holders);
    soak_holder_t *h = &holders[i];
    if (r->state != HOLDER_RUNNING || h->state != HOLDER_RUNNING)
        return;
    if (chaos_freeze(r) != 0)
        return;
    if (chaos_freeze(h) != 0) {
        mc_proc_thaw(r->h.proc.pid);
        return;
    }
    h->state = r->state = HOLDER_STOPPED;
    h->until = now + 2.0 * opt.client_ttl_s + 0.5 + rng_unit(rng);
    r->until = h->until + 1.5 + 2.0 * rng_unit(rng);
    chaos_stats.long_stops++;
    reader_stops++;
    if (opt.verbose)
        fprintf(soak_err,
                "fault_soak: t=%.1fs chaos SIGSTOP holder %s for %.1f s under %s (%.1f s)\n",
                now - start_time, h->h.segment, h->until - now, r->h.segment, r->until - now);
}

static void readers_chaos(uint64_t *rng, double now, double *next_stall)
{
    readers_tick(now);
    if (opt.readers == 0 || now < *next_stall)
        return;
    *next_stall = now + 0.3 + 1.2 * rng_unit(rng);
    if (running_holders() >= 2 && rng_below(rng, 100) < 30)
        chaos_expire_under_reader(rng, now);
    else
        chaos_stall_reader(rng, now);
}

static void chaos_tick(uint64_t *rng, double *next_action, double *next_stall)
{
    double now = now_s();
    readers_chaos(rng, now, next_stall);
    for (int i = 0; i < opt.holders; i++) {
        soak_holder_t *h = &holders[i];
        check_crashed(h, now);
        if (h->state == HOLDER_STOPPED && now >= h->until) {
            kill(h->h.proc.pid, SIGCONT);
            h->state = HOLDER_RUNNING;
        } else if (h->state == HOLDER_DEAD && now >= h->until) {
            if (holder_start(h) == 0) {
                chaos_stats.restarts++;
            } else {
                chaos_stats.restart_failures++;
                h->until = now + 1.0;
            }
        }
    }
    if (now < *next_action)
        return;
    *next_action = now + 0.3 + 1.2 * rng_unit(rng);
    /* Keep one holder serving (when there are two or more) so reads can succeed at all. */
    if (running_holders() < (opt.holders > 1 ? 2 : 1))
        return;
    int i = (int)rng_below(rng, (uint64_t)opt.holders);
    for (int tries = 0; tries < opt.holders && holders[i].state != HOLDER_RUNNING; tries++)
        i = (i + 1) % opt.holders;
    if (holders[i].state == HOLDER_RUNNING)
        chaos_act(&holders[i], rng, now);
}

static void *chaos_main(void *arg)
{
    uint64_t rng = opt.seed ^ 0xC4A05C4A05ull;
    double next_action = now_s() + 1.0, next_stall = now_s() + 0.5;
    pthread_mutex_lock(&done_mu);
    while (!atomic_load(&stop_flag)) {
        pthread_mutex_unlock(&done_mu);
        chaos_tick(&rng, &next_action, &next_stall);
        atomic_store(&chaos_enough, !chaos_too_little());
        pthread_mutex_lock(&done_mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!atomic_load(&stop_flag))
            pthread_cond_timedwait(&done_cv, &done_mu, &ts);
    }
    pthread_mutex_unlock(&done_mu);
    for (int i = 0; i < opt.readers; i++) {
        if (readers[i].state == HOLDER_STOPPED) {
            kill(readers[i].h.proc.pid, SIGCONT);
            readers[i].state = HOLDER_RUNNING;
        }
    }
    for (int i = 0; i < opt.holders; i++) {
        if (holders[i].state == HOLDER_STOPPED) {
            kill(holders[i].h.proc.pid, SIGCONT);
            holders[i].state = HOLDER_RUNNING;
        }
    }
    return NULL;
}

/* ---- report --------------------------------------------------------------------------------- */

static void merge_stats(soak_op_stats_t *total)
{
    memset(total, 0, sizeof(*total) * OP_COUNT);
    for (int t = 0; t < opt.threads; t++) {
        for (int o = 0; o < OP_COUNT; o++) {
            soak_op_stats_t *s = &workers[t].stats[o], *d = &total[o];
            d->calls += s->calls;
            d->results += s->results;
            d->ok += s->ok;
            d->verified += s->verified;
            d->wrong += s->wrong;
            d->unacked_gen += s->unacked_gen;
            d->failed_gen += s->failed_gen;
            d->bytes += s->bytes;
            d->other_codes += s->other_codes;
            for (int c = 0; c < SOAK_MAX_CODES && s->codes[c].n; c++)
                add_code(d, s->codes[c].code, s->codes[c].n);
        }
    }
}

static void format_codes(const soak_op_stats_t *s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < SOAK_MAX_CODES && s->codes[c].n && used < len; c++) {
        const char *name = mc_error_name(s->codes[c].code);
        used += (size_t)snprintf(buf + used, len - used, "%s%d %s:%" PRIu64, used ? ", " : "",
                                 s->codes[c].code, name ? name : "?", s->codes[c].n);
    }
    if (s->other_codes && used < len)
        snprintf(buf + used, len - used, ", other:%" PRIu64, s->other_codes);
}

static void print_table(const soak_op_stats_t *total, double elapsed)
{
    char codes[1024];
    printf("\nfault_soak: %.1f s, %d threads, %d holders, %d keys, seed %" PRIu64
           ", values %zu..%zu B\n",
           elapsed, opt.threads, opt.holders, opt.keys, opt.seed, opt.vmin, opt.vmax);
    printf("%-15s %9s %9s %9s %9s %6s %8s %10s  %s\n", "op", "calls", "results", "ok", "verified",
           "WRONG", "unacked", "MiB", "errors (code name:count)");
    for (int o = 0; o < OP_COUNT; o++) {
        const soak_op_stats_t *s = &total[o];
        if (opt.reader_child && s->calls == 0)
            continue;
        format_codes(s, codes, sizeof(codes));
        printf("%-15s %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %6" PRIu64 " %8" PRIu64
               " %10.1f  %s\n",
               op_names[o], s->calls, s->results, s->ok, s->verified, s->wrong,
               s->unacked_gen + s->failed_gen, (double)s->bytes / (1024.0 * 1024.0), codes);
    }
    if (!opt.reader_child)
        printf("chaos: %" PRIu64 " short stops, %" PRIu64 " stops past client_ttl, %" PRIu64
               " kills, %" PRIu64 " restarts (%" PRIu64 " failed), %" PRIu64
               " holder crashes, %" PRIu64 " stops that did not take\n",
               chaos_stats.short_stops, chaos_stats.long_stops, chaos_stats.kills,
               chaos_stats.restarts, chaos_stats.restart_failures, chaos_stats.crashes,
               chaos_stats.stop_failures);
    fflush(stdout);
}

static void write_json(const soak_op_stats_t *total, double elapsed, uint64_t verified,
                       uint64_t wrong, const char *result)
{
    FILE *f = fopen(opt.json, "w");
    if (!f) {
        fprintf(soak_err, "fault_soak: cannot write %s: %s\n", opt.json, strerror(errno));
        return;
    }
    fprintf(f,
            "{\"result\": \"%s\", \"elapsed_s\": %.2f, \"seed\": %" PRIu64
            ", \"threads\": %d, \"holders\": %d, \"keys\": %d, \"value_min\": %zu, "
            "\"value_max\": %zu, \"verified_reads\": %" PRIu64 ", \"wrong_bytes\": %" PRIu64
            ",\n \"chaos\": {\"short_stops\": %" PRIu64 ", \"long_stops\": %" PRIu64
            ", \"kills\": %" PRIu64 ", \"restarts\": %" PRIu64 ", \"restart_failures\": %" PRIu64
            ", \"crashes\": %" PRIu64 ", \"stop_failures\": %" PRIu64 "},\n \"ops\": {",
            result, elapsed, opt.seed, opt.threads, opt.holders, opt.keys, opt.vmin, opt.vmax,
            verified, wrong, chaos_stats.short_stops, chaos_stats.long_stops, chaos_stats.kills,
            chaos_stats.restarts, chaos_stats.restart_failures, chaos_stats.crashes,
            chaos_stats.stop_failures);
    for (int o = 0; o < OP_COUNT; o++) {
        const soak_op_stats_t *s = &total[o];
        fprintf(f,
                "%s\n  \"%s\": {\"calls\": %" PRIu64 ", \"results\": %" PRIu64 ", \"ok\": %" PRIu64
                ", \"verified\": %" PRIu64 ", \"wrong\": %" PRIu64 ", \"unacked_gen\": %" PRIu64
                ", \"failed_gen\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"errors\": {",
                o ? "," : "", op_names[o], s->calls, s->results, s->ok, s->verified, s->wrong,
                s->unacked_gen, s->failed_gen, s->bytes);
        for (int c = 0; c < SOAK_MAX_CODES && s->codes[c].n; c++)
            fprintf(f, "%s\"%d\": %" PRIu64, c ? ", " : "", s->codes[c].code, s->codes[c].n);
        fprintf(f, "}}");
    }
    fprintf(f, "}}\n");
    fclose(f);
}

/* ---- options -------------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: fault_soak [options]\n"
            "Fault soak of the store: T threads put/upsert/get/get_batch/get_into/remove unique\n"
            "per-(key, generation) values, verifying every read, while holders are SIGSTOPped,\n"
            "SIGKILLed and restarted. Exit 0: no wrong bytes and enough verified reads.\n"
            "  --duration=SECONDS      soak time (default $MC_SOAK_SECONDS, else 40); a soak\n"
            "                          short of its minimum chaos runs on, up to 3x as long\n"
            "  --threads=N             worker threads (default 8, max %d)\n"
            "  --holders=N             mooncake_client holders (default 3, max %d)\n"
            "  --readers=N             stalled-reader child processes (default 1, max %d): they\n"
            "                          only read and verify, and are SIGSTOPped at random\n"
            "  --keys=N                key space (default 256; 1/8 of it is hot)\n"
            "  --seed=N                PRNG seed (default: from the clock; printed)\n"
            "  --value_size=MIN-MAX    value sizes in bytes (default 1-1048576)\n"
            "  --segment=SIZE          holder segment (default \"64 MB\")\n"
            "  --client_ttl=SECONDS    master --client_ttl (default 2)\n"
            "  --lease_ms=MS           master --default_kv_lease_ttl (default 1000)\n"
            "  --transfer_timeout=S    MC_TRANSFER_TIMEOUT for every process (default 3)\n"
            "  --no_shm                MC_DISABLE_SHM=1: bytes cross loopback tcp\n"
            "  --min_verified=N        verified reads needed to pass (default 100)\n"
            "  --json=PATH             write a JSON summary\n"
            "  --log=PATH              the master's, holders' and store's logs go to PATH; the\n"
            "                          soak's findings stay on stderr, and a failing soak\n"
            "                          prints the log's warnings and errors and its tail\n"
            "  --verbose               log every chaos action\n"
            "  --calm                  no chaos (a baseline: the same load, no faults)\n"
            "Exit: 0 pass, 1 wrong bytes, 2 too few verified reads, 3 set-up failed,\n"
            "4 workers hung at the end (or a reader was lost), 64 usage.\n"
            "Table: results count each key of a batch; verified = reads checked byte for byte;\n"
            "unacked = verified reads of a generation whose put had not returned or failed.\n",
            SOAK_MAX_THREADS, SOAK_MAX_HOLDERS, SOAK_MAX_READERS);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-')
        return -1;
    *out = v;
    return 0;
}

static int parse_int_in(const char *s, int lo, int hi, int *out)
{
    uint64_t v;
    if (parse_u64(s, &v) != 0 || v < (uint64_t)lo || v > (uint64_t)hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_range(const char *s, size_t *lo, size_t *hi)
{
    char a[32];
    const char *dash = strchr(s, '-');
    uint64_t x, y;
    if (!dash || (size_t)(dash - s) >= sizeof(a))
        return -1;
    memcpy(a, s, (size_t)(dash - s));
    a[dash - s] = '\0';
    if (parse_u64(a, &x) || parse_u64(dash + 1, &y) || x < 1 || y < x || y > (256ull << 20))
        return -1;
    *lo = (size_t)x;
    *hi = (size_t)y;
    return 0;
}

/* Returns 0, 1 after --help, -1 on a bad option (reported). */
static int parse_options(int argc, char **argv)
{
    const char *env = getenv("MC_SOAK_SECONDS");
    opt = (soak_opts_t){.duration_s = env && atof(env) > 0 ? atof(env) : 40.0,
                        .threads = 8,
                        .holders = 3,
                        .readers = 1,
                        .keys = 256,
                        .client_ttl_s = 2,
                        .lease_ms = 1000,
                        .transfer_timeout_s = 3,
                        .seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32),
                        .vmin = 1,
                        .vmax = 1 << 20,
                        .min_verified = 100,
                        .segment = "64 MB"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        const char *v = eq ? eq + 1 : "";
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
#define IS(name) (nlen == strlen(name) && strncmp(a, name, nlen) == 0)
        int bad = 0;
        if (IS("--help") || IS("-h")) {
            usage(stdout);
            return 1;
        } else if (IS("--duration")) {
            opt.duration_s = atof(v);
            bad = opt.duration_s <= 0;
        } else if (IS("--threads")) {
            bad = parse_int_in(v, 1, SOAK_MAX_THREADS, &opt.threads);
        } else if (IS("--holders")) {
            bad = parse_int_in(v, 1, SOAK_MAX_HOLDERS, &opt.holders);
        } else if (IS("--readers")) {
            bad = parse_int_in(v, 0, SOAK_MAX_READERS, &opt.readers);
        } else if (IS("--reader_child")) {
            opt.reader_child = v;
            bad = !*v;
        } else if (IS("--keys")) {
            bad = parse_int_in(v, 1, 1 << 20, &opt.keys);
        } else if (IS("--seed")) {
            bad = parse_u64(v, &opt.seed);
        } else if (IS("--value_size")) {
            bad = parse_range(v, &opt.vmin, &opt.vmax);
        } else if (IS("--segment")) {
            bad = snprintf(opt.segment, sizeof(opt.segment), "%s", v) >= (int)sizeof(opt.segment);
        } else if (IS("--client_ttl")) {
            bad = parse_int_in(v, 1, 3600, &opt.client_ttl_s);
        } else if (IS("--lease_ms")) {
            bad = parse_int_in(v, 0, 3600000, &opt.lease_ms);
        } else if (IS("--transfer_timeout")) {
            bad = parse_int_in(v, 1, 3600, &opt.transfer_timeout_s);
        } else if (IS("--no_shm")) {
            opt.no_shm = 1;
        } else if (IS("--min_verified")) {
            bad = parse_u64(v, &opt.min_verified);
        } else if (IS("--json")) {
            opt.json = v;
            bad = !*v;
        } else if (IS("--log")) {
            opt.log = v;
            bad = !*v;
        } else if (IS("--calm")) {
            opt.calm = 1;
        } else if (IS("--verbose")) {
            opt.verbose = 1;
        } else {
            fprintf(soak_err, "fault_soak: unknown option %s (--help lists them)\n", a);
            return -1;
        }
#undef IS
        if (bad) {
            fprintf(soak_err, "fault_soak: bad value in %s\n", a);
            return -1;
        }
    }
    if (opt.reader_child) { /* a child starts no processes of its own */
        opt.holders = 0;
        opt.readers = 0;
    }
    return 0;
}

/* ---- set-up and teardown -------------------------------------------------------------------- */

static void on_abort(int sig)
{
    mc_cluster_kill_all(); /* kill and waitpid only: async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_stop_request(int sig)
{
    atomic_store(&stop_flag, 1);
}

static int setup_keys(void)
{
    keys = calloc((size_t)opt.keys, sizeof(*keys));
    if (!keys)
        return -1;
    for (int i = 0; i < opt.keys; i++) {
        snprintf(keys[i].name, sizeof(keys[i].name), "soak/%016" PRIx64 "/k%05d", opt.seed, i);
        keys[i].hash = fnv1a64(keys[i].name);
        pthread_mutex_init(&keys[i].mu, NULL);
    }
    return 0;
}

static int setup_store(void);
static void print_log_digest(void);

static int setup_cluster(void)
{
    char ttl[32], lease[48];
    snprintf(ttl, sizeof(ttl), "--client_ttl=%d", opt.client_ttl_s);
    snprintf(lease, sizeof(lease), "--default_kv_lease_ttl=%d", opt.lease_ms);
    const char *const extra[] = {ttl, lease, NULL};
    if (opt.reader_child) {
        snprintf(master.addr, sizeof(master.addr), "%s", opt.reader_child);
        return setup_store();
    }
    if (mc_master_start(&master, 0, extra) != 0) {
        fprintf(soak_err, "fault_soak: mooncake_master did not start\n");
        return -1;
    }
    for (int i = 0; i < opt.holders; i++) {
        if (holder_start(&holders[i]) != 0) {
            fprintf(soak_err, "fault_soak: holder %d did not start\n", i);
            return -1;
        }
    }
    if (setup_store() != 0)
        return -1;
    for (int i = 0; i < opt.readers; i++) {
        if (reader_start(&readers[i]) != 0) {
            fprintf(soak_err, "fault_soak: reader %d did not start\n", i);
            return -1;
        }
    }
    return 0;
}

static int setup_store(void)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .global_segment_size = 0,
                             .local_buffer_size = 128ull << 20,
                             .protocol = "tcp",
                             .master_server_addr = master.addr};
    int rc = mc_store_setup(&cfg, &store);
    if (rc != 0) {
        fprintf(soak_err, "fault_soak: mc_store_setup: %d\n", rc);
        return -1;
    }
    return 0;
}

static int setup_workers(void)
{
    size_t area = (SOAK_MAX_BATCH + 1) * opt.vmax;
    workers = calloc((size_t)opt.threads, sizeof(*workers));
    if (!workers)
        return -1;
    for (int i = 0; i < opt.threads; i++) {
        soak_thread_t *t = &workers[i];
        t->index = i;
        t->rng = opt.seed * 0x9E3779B97F4A7C15ull + (uint64_t)i + 1;
        t->plain = malloc(area);
        t->registered = malloc(area);
        t->expect = malloc(opt.vmax);
        if (!t->plain || !t->registered || !t->expect)
            return -1;
        int rc = mc_store_register_buffer(store, t->registered, area);
        if (rc != 0) {
            fprintf(soak_err, "fault_soak: mc_store_register_buffer: %d\n", rc);
            return -1;
        }
    }
    return 0;
}

/* Waits for the workers to leave their loops; 0, or -1 when they are still busy at `deadline`. */
static int wait_workers(double deadline)
{
    int rc = 0;
    pthread_mutex_lock(&done_mu);
    while (atomic_load(&workers_running) > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double left = deadline - now_s();
        if (left <= 0) {
            rc = -1;
            break;
        }
        ts.tv_sec += (time_t)left;
        ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&done_cv, &done_mu, &ts);
    }
    pthread_mutex_unlock(&done_mu);
    return rc;
}

static void stop_children(void)
{
    for (int i = 0; i < opt.holders; i++) {
        soak_holder_t *h = &holders[i];
        if (h->state == HOLDER_DEAD || h->h.proc.pid <= 0)
            continue;
        mc_cluster_untrack(h->h.proc.pid);
        kill(h->h.proc.pid, SIGCONT);
        int status = mc_proc_stop(&h->h.proc, SIGTERM, 15000);
        if (status == -1)
            fprintf(soak_err, "fault_soak: holder %s ignored SIGTERM for 15 s (killed)\n",
                    h->h.segment);
        else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
            fprintf(soak_err, "fault_soak: holder %s exited with status %d\n", h->h.segment,
                    WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
            fprintf(soak_err, "fault_soak: holder %s died of signal %d at stop\n", h->h.segment,
                    WTERMSIG(status));
        h->state = HOLDER_DEAD;
    }
    if (master.pid > 0) {
        int status = mc_master_stop(&master, SIGTERM);
        if (status == -1)
            fprintf(soak_err, "fault_soak: mooncake_master ignored SIGTERM (killed)\n");
        else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
            fprintf(soak_err, "fault_soak: mooncake_master exited with status %d\n",
                    WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
            fprintf(soak_err, "fault_soak: mooncake_master died of signal %d\n", WTERMSIG(status));
        master.pid = 0;
    }
    mc_cluster_kill_all();
}

static void free_workers(void)
{
    for (int i = 0; workers && i < opt.threads; i++) {
        if (store && workers[i].registered)
            mc_store_unregister_buffer(store, workers[i].registered);
        free(workers[i].plain);
        free(workers[i].registered);
        free(workers[i].expect);
    }
    free(workers);
    workers = NULL;
}

static void free_keys(void)
{
    for (int i = 0; keys && i < opt.keys; i++) {
        free(keys[i].fate);
        pthread_mutex_destroy(&keys[i].mu);
    }
    free(keys);
    keys = NULL;
}

static void set_child_environment(void)
{
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", opt.transfer_timeout_s);
    setenv("MC_TRANSFER_TIMEOUT", timeout, 1);
    if (opt.no_shm)
        setenv("MC_DISABLE_SHM", "1", 1);
}

/* Runs workers and chaos for the duration; returns the exit code. */
static int run_soak(void)
{
    pthread_t chaos;
    double start = start_time = now_s();
    atomic_store(&workers_running, opt.threads);
    for (int i = 0; i < opt.threads; i++)
        pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]);
    if (opt.reader_child) {
        printf("fault_soak reader ready\n");
        fflush(stdout);
    } else if (!opt.calm) {
        pthread_create(&chaos, NULL, chaos_main, NULL);
    }

    pthread_mutex_lock(&done_mu);
    /* A starved machine (a CI host, a CPU hog) can hold the chaos back; the soak then runs on,
     * up to three times its length, until the minimum chaos is done rather than pass on less. */
    while (!atomic_load(&stop_flag) &&
           (now_s() - start < opt.duration_s ||
            (!opt.reader_child && !opt.calm && !atomic_load(&chaos_enough) &&
             now_s() - start < 3.0 * opt.duration_s))) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&done_cv, &done_mu, &ts);
    }
    atomic_store(&stop_flag, 1);
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&done_mu);
    if (!opt.reader_child && !opt.calm)
        pthread_join(chaos, NULL); /* resumes every stopped holder and reader */

    /* An op in flight may wait out one transfer timeout per attempt; far more is a hang. */
    double grace = 4.0 * opt.transfer_timeout_s + 10.0;
    int hung = wait_workers(now_s() + grace) != 0;
    double elapsed = now_s() - start;
    soak_op_stats_t total[OP_COUNT];
    merge_stats(total);
    uint64_t verified = 0, wrong = 0;
    for (int o = 0; o < OP_COUNT; o++) {
        verified += total[o].verified;
        wrong += total[o].wrong;
    }
    for (int i = 0; i < opt.readers; i++)
        reader_finish(&readers[i], i);
    print_table(total, elapsed);
    if (opt.readers > 0)
        printf("stalled readers: %d, %" PRIu64 " stalls, %" PRIu64 " verified reads, %" PRIu64
               " WRONG BYTES%s\n",
               opt.readers, reader_stops, reader_verified, reader_wrong,
               reader_lost ? ", a reader's report was lost" : "");
    verified += reader_verified;
    wrong += reader_wrong;
    /* A soak that did not stop, kill and restart holders proved nothing about them. */
    uint64_t least = opt.reader_child || opt.calm ? 0 : chaos_minimum();
    int little_chaos = chaos_too_little(); /* the chaos thread has been joined */
    if (little_chaos)
        printf("fault_soak: too little chaos for %.0f s: wanted at least %" PRIu64
               " stops, kills and restarts each, and every stop to take\n",
               opt.duration_s, least);
    const char *result = wrong                         ? "wrong_bytes"
                         : hung || reader_lost         ? "hang_or_lost_reader"
                         : verified < opt.min_verified ? "too_few_reads"
                         : little_chaos                ? "too_little_chaos"
                                                       : "pass";
    printf("fault_soak: %" PRIu64 " verified reads, %" PRIu64 " WRONG BYTES: %s\n", verified, wrong,
           result);
    fflush(stdout);
    if (opt.json)
        write_json(total, elapsed, verified, wrong, result);
    if (hung) {
        fprintf(soak_err, "fault_soak: %d worker(s) still in a store call %.0f s after the end\n",
                atomic_load(&workers_running), grace);
        stop_children();
        if (opt.log)
            print_log_digest();
        _exit(wrong ? SOAK_EXIT_WRONG_BYTES : SOAK_EXIT_HANG); /* threads cannot be joined */
    }
    for (int i = 0; i < opt.threads; i++)
        pthread_join(workers[i].tid, NULL);
    return wrong                         ? SOAK_EXIT_WRONG_BYTES
           : reader_lost                 ? SOAK_EXIT_HANG
           : verified < opt.min_verified ? SOAK_EXIT_TOO_FEW_READS
           : little_chaos                ? SOAK_EXIT_TOO_LITTLE_CHAOS
                                         : SOAK_EXIT_PASS;
}

/* Sends this process's stderr, and so every child's, to opt.log; findings stay on soak_err. */
static int redirect_logs(void)
{
    int fd = open(opt.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int keep = fd >= 0 ? fcntl(2, F_DUPFD_CLOEXEC, 3) : -1;
    FILE *err = keep >= 0 ? fdopen(keep, "w") : NULL;
    if (!err || dup2(fd, 2) < 0) {
        fprintf(stderr, "fault_soak: cannot log to %s: %s\n", opt.log, strerror(errno));
        if (err)
            fclose(err);
        else if (keep >= 0)
            close(keep);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    setvbuf(err, NULL, _IOLBF, 0);
    soak_err = err;
    return 0;
}

/* After a failed soak: the log's own findings, warnings and errors (the first 60) and its last
 * 40 lines, so that a CI excerpt shows why without the whole log. */
static void print_log_digest(void)
{
    FILE *f = fopen(opt.log, "r");
    if (!f)
        return;
    enum { FIRST = 60, TAIL = 40, LINE = 400 };
    static char tail[TAIL][LINE];
    char line[LINE];
    size_t n = 0, shown = 0;
    fprintf(soak_err, "fault_soak: from %s, its findings, warnings and errors:\n", opt.log);
    while (fgets(line, sizeof(line), f)) {
        int notable = line[0] == 'W' || line[0] == 'E' || line[0] == 'F' ||
                      strncmp(line, "fault_soak:", 11) == 0 || strstr(line, "ERROR:") != NULL;
        if (notable && shown < FIRST) {
            fputs(line, soak_err);
            shown++;
        }
        snprintf(tail[n % TAIL], LINE, "%s", line);
        n++;
    }
    fclose(f);
    fprintf(soak_err, "fault_soak: the last %zu lines of %s:\n", n < TAIL ? n : (size_t)TAIL,
            opt.log);
    for (size_t i = n > TAIL ? n - TAIL : 0; i < n; i++)
        fputs(tail[i % TAIL], soak_err);
}

int main(int argc, char **argv)
{
    soak_err = stderr;
    int rc = parse_options(argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : SOAK_EXIT_USAGE;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGABRT, on_abort);
    signal(SIGINT, on_stop_request);
    signal(SIGTERM, on_stop_request);
    atexit(mc_cluster_kill_all);
    if (opt.log && !opt.reader_child && redirect_logs() != 0)
        return SOAK_EXIT_SETUP;
    set_child_environment();
    if (!opt.reader_child)
        printf("fault_soak: seed %" PRIu64
               ", %.0f s, %d threads, %d holders of %s, client_ttl %d s, "
               "lease %d ms, transfer timeout %d s, shm %s\n",
               opt.seed, opt.duration_s, opt.threads, opt.holders, opt.segment, opt.client_ttl_s,
               opt.lease_ms, opt.transfer_timeout_s, opt.no_shm ? "off" : "on");

    rc = SOAK_EXIT_SETUP;
    if (setup_keys() == 0 && setup_cluster() == 0 && setup_workers() == 0)
        rc = run_soak();
    free_workers();
    if (store) {
        mc_store_free(store);
        store = NULL;
    }
    stop_children();
    free_keys();
    if (rc != SOAK_EXIT_PASS && opt.log && !opt.reader_child) {
        print_log_digest();
        fprintf(soak_err, "fault_soak: failed with exit status %d (--help says what it means)\n",
                rc);
    }
    return rc;
}
