/*
 * failpoint.c — named fault-injection points (failpoint.h), configured by MC_FAILPOINTS.
 */
#include "failpoint.h"

#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FP_MAX 16
#define FP_NAME_MAX 64

typedef enum fp_action { FP_STOP = 1, FP_SLEEP = 2 } fp_action_t;

typedef struct fp_entry {
    char name[FP_NAME_MAX];
    fp_action_t action;
    unsigned arg;       /* sleep: ms */
    atomic_long budget; /* stop: remaining firings, < 0 = unlimited */
} fp_entry_t;

static fp_entry_t fp_table[FP_MAX];
static size_t fp_count;
static atomic_int fp_state; /* 0 unparsed, 1 none configured, 2 some configured */
static pthread_once_t fp_once = PTHREAD_ONCE_INIT;

static void fp_parse_one(const char *item, size_t len)
{
    char buf[FP_NAME_MAX + 32];
    if (len == 0 || len >= sizeof(buf) || fp_count == FP_MAX)
        return;
    memcpy(buf, item, len);
    buf[len] = '\0';
    char *eq = strchr(buf, '=');
    if (!eq || eq == buf || (size_t)(eq - buf) >= FP_NAME_MAX)
        return;
    *eq = '\0';
    const char *act = eq + 1;
    fp_entry_t *e = &fp_table[fp_count];
    snprintf(e->name, sizeof(e->name), "%.63s", buf);
    atomic_store(&e->budget, -1);
    if (strncmp(act, "stop", 4) == 0 && (act[4] == '\0' || act[4] == ':')) {
        e->action = FP_STOP;
        if (act[4] == ':')
            atomic_store(&e->budget, strtol(act + 5, NULL, 10));
    } else if (strncmp(act, "sleep:", 6) == 0) {
        e->action = FP_SLEEP;
        e->arg = (unsigned)strtoul(act + 6, NULL, 10);
    } else {
        MC_WARN("MC_FAILPOINTS: unknown action '%s' for %s (stop, stop:N, sleep:MS)", act, buf);
        return;
    }
    fp_count++;
}

static void fp_parse(void)
{
    const char *env = getenv("MC_FAILPOINTS");
    if (env) {
        const char *p = env;
        while (*p) {
            size_t n = strcspn(p, ",");
            fp_parse_one(p, n);
            p += n;
            if (*p == ',')
                p++;
        }
    }
    atomic_store(&fp_state, fp_count ? 2 : 1);
}

int mc_failpoint(const char *name)
{
    int st = atomic_load_explicit(&fp_state, memory_order_relaxed);
    if (st == 1)
        return 0;
    if (st == 0) {
        pthread_once(&fp_once, fp_parse);
        if (atomic_load(&fp_state) != 2)
            return 0;
    }
    for (size_t i = 0; i < fp_count; i++) {
        fp_entry_t *e = &fp_table[i];
        if (strcmp(e->name, name) != 0)
            continue;
        if (e->action == FP_STOP) {
            long left = atomic_load(&e->budget);
            while (left != 0) {
                if (left < 0 || atomic_compare_exchange_weak(&e->budget, &left, left - 1))
                    break;
            }
            if (left == 0)
                return 0;
            MC_INFO("failpoint %s: stopping (SIGSTOP)", name);
            raise(SIGSTOP);
        } else {
            MC_INFO("failpoint %s: sleeping %u ms", name, e->arg);
            usleep(e->arg * 1000u);
        }
        return 1;
    }
    return 0;
}

int mc_failpoint_named(const char *prefix, const char *suffix)
{
    if (atomic_load_explicit(&fp_state, memory_order_relaxed) == 1)
        return 0;
    char name[FP_NAME_MAX];
    snprintf(name, sizeof(name), "%s.%s", prefix, suffix);
    return mc_failpoint(name);
}
