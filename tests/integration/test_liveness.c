/*
 * test_liveness.c — fast failure detection (src/master/liveness.h): real master and holder
 * processes, a store client in this process.
 *
 *  - A holder SIGKILLed: long before --client_ttl (60 s here) its single-replica keys answer
 *    OBJECT_NOT_FOUND, a put of such a key answers 0 and reads back the new bytes, the other
 *    holder's keys stay exact, and no put fails on the dead segment afterwards. The time from the
 *    kill to the first -704 is printed. On code without the detector the keys stay listed (gets
 *    fail with a transfer error and puts of them answer 0 storing nothing) until the TTL.
 *  - A holder SIGSTOPped while every connection to the master is reset under it (`ss -K`, so the
 *    master hears "connection closed" exactly as from a dead one): its listening socket still
 *    completes handshakes, so it is not declared gone, and after SIGCONT every key reads back
 *    exact. Nothing is dropped for a stall shorter than the TTL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster.h"
#include "mooncake/errors.h"
#include "mooncake/store.h"
#include "payload.h"
#include "proc.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NKEYS 64
#define VALUE_SIZE (64u << 10)
#define WAIT_MS 20000 /* the longest a state is waited for: well below the 60 s TTL */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

typedef struct cluster {
    mc_master_t m;
    mc_holder_t h[2];
    mc_store_t *s;
} cluster_t;

static void up(cluster_t *c)
{
    /* MC_TEST_MASTER_V=1: the master logs each probe (liveness.c) */
    const char *extra[] = {"--client_ttl=60", getenv("MC_TEST_MASTER_V") ? "--v=1" : NULL, NULL};
    assert_int_equal(mc_master_start(&c->m, 0, extra), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(mc_holder_start(&c->h[i], &c->m, "128MB", NULL, NULL, 30000), 0);
    c->s = mc_test_client(&c->m, 1, 1); /* tcp: a same-host mapping would outlive the holder */
    assert_non_null(c->s);
}

static void down(cluster_t *c)
{
    mc_store_free(c->s);
    for (int i = 0; i < 2; i++) {
        if (c->h[i].proc.pid > 0) {
            kill(c->h[i].proc.pid, SIGCONT);
            mc_proc_stop(&c->h[i].proc, SIGTERM, 10000);
        }
    }
    mc_master_stop(&c->m, SIGTERM);
}

static void key_of(int i, char *key, size_t cap)
{
    snprintf(key, cap, "live-%d", i);
}

static void put_all(cluster_t *c, uint64_t seed)
{
    uint8_t *v = malloc(VALUE_SIZE);
    char key[32];
    for (int i = 0; i < NKEYS; i++) {
        key_of(i, key, sizeof(key));
        mc_payload_fill(v, VALUE_SIZE, seed + (uint64_t)i);
        assert_int_equal(mc_test_put_retry(c->s, key, v, VALUE_SIZE, NULL, 15000), 0);
    }
    free(v);
}

/* 1 when key i reads back the value of seed + i. */
static int exact(mc_store_t *s, int i, uint64_t seed)
{
    uint8_t *want = malloc(VALUE_SIZE), *got = malloc(VALUE_SIZE);
    char key[32];
    key_of(i, key, sizeof(key));
    mc_payload_fill(want, VALUE_SIZE, seed + (uint64_t)i);
    int64_t n = mc_store_get(s, key, got, VALUE_SIZE);
    int ok = n == (int64_t)VALUE_SIZE && memcmp(got, want, VALUE_SIZE) == 0;
    free(want);
    free(got);
    return ok;
}

static void test_killed_holder_is_dropped_long_before_its_ttl(void **state)
{
    (void)state;
    cluster_t c;
    up(&c);
    put_all(&c, 100);
    pid_t victim = c.h[0].proc.pid;
    mc_cluster_untrack(victim);
    uint64_t killed = now_ms();
    assert_int_equal(kill(victim, SIGKILL), 0);
    assert_int_equal(waitpid(victim, NULL, 0), victim);
    c.h[0].proc.pid = -1;

    /* Every key settles: exact (the live holder's) or not found (the dead one's). */
    int lost[NKEYS], nlost = 0, nexact = 0;
    uint64_t first_lost = 0, settled = 0;
    char key[32];
    uint8_t *got = malloc(VALUE_SIZE);
    for (uint64_t end = now_ms() + WAIT_MS; now_ms() < end; usleep(10 * 1000)) {
        nlost = nexact = 0;
        int other = 0;
        for (int i = 0; i < NKEYS; i++) {
            key_of(i, key, sizeof(key));
            int64_t n = mc_store_get(c.s, key, got, VALUE_SIZE);
            if (n == MC_ERR_OBJECT_NOT_FOUND) {
                lost[nlost++] = i;
                if (!first_lost)
                    first_lost = now_ms();
            } else if (exact(c.s, i, 100)) {
                nexact++;
            } else {
                other++;
            }
        }
        if (other == 0 && nlost > 0) {
            settled = now_ms();
            break;
        }
    }
    free(got);
    print_message("  holder SIGKILLed: first key not found after %llu ms, all settled after "
                  "%llu ms (%d not found, %d exact; --client_ttl 60 s)\n",
                  (unsigned long long)(first_lost ? first_lost - killed : 0),
                  (unsigned long long)(settled ? settled - killed : 0), nlost, nexact);
    assert_true(settled > 0); /* not the TTL: the state was reached within WAIT_MS */
    assert_int_equal(nlost + nexact, NKEYS);
    assert_int_equal(mc_master_metric(&c.m, "master_gone_clients_total"), 1);
    assert_int_equal(mc_master_metric(&c.m, "master_expired_clients_total"), 0);

    /* A put of a lost key stores the new value (it is not "already there"). */
    uint8_t *v = malloc(VALUE_SIZE);
    for (int j = 0; j < nlost; j++) {
        key_of(lost[j], key, sizeof(key));
        mc_payload_fill(v, VALUE_SIZE, 200 + (uint64_t)lost[j]);
        assert_int_equal(mc_store_put(c.s, key, v, VALUE_SIZE, NULL), 0);
        assert_true(exact(c.s, lost[j], 200));
    }
    /* No put lands on the dead segment any more: each of these succeeds the first time. */
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "live-after-%d", i);
        mc_payload_fill(v, VALUE_SIZE, 300 + (uint64_t)i);
        assert_int_equal(mc_store_put(c.s, key, v, VALUE_SIZE, NULL), 0);
    }
    free(v);
    down(&c);
}

/* Resets every TCP connection to the master's RPC port (both holders' and ours). 0 when ss did. */
static int reset_connections_to(int port)
{
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "ss -K -t dst 127.0.0.1 dport = :%d >/dev/null 2>&1", port);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_stopped_holder_whose_connection_closed_is_kept(void **state)
{
    (void)state;
    cluster_t c;
    up(&c);
    put_all(&c, 400);
    /* Both holders and this client speak to the master before the reset. */
    for (int i = 0; i < NKEYS; i++)
        assert_true(exact(c.s, i, 400));
    assert_int_equal(mc_proc_freeze(c.h[0].proc.pid, 5000), 0);
    if (reset_connections_to(c.m.rpc_port) != 0) {
        mc_proc_thaw(c.h[0].proc.pid);
        down(&c);
        skip(); /* this kernel cannot destroy sockets (ss -K): nothing to reset with */
    }
    /* Longer than the detector needs to decide (3 rounds of 100 ms), well inside the TTL. */
    usleep(1500 * 1000);
    assert_int_equal(mc_proc_is_frozen(c.h[0].proc.pid), 1);
    assert_int_equal(mc_master_metric(&c.m, "master_gone_clients_total"), 0);
    assert_int_equal(mc_proc_thaw(c.h[0].proc.pid), 0);
    for (int i = 0; i < NKEYS; i++) {
        int ok = 0;
        for (uint64_t end = now_ms() + WAIT_MS; !ok && now_ms() < end;)
            if (!(ok = exact(c.s, i, 400)))
                usleep(50 * 1000);
        assert_true(ok);
    }
    assert_int_equal(mc_master_metric(&c.m, "master_gone_clients_total"), 0);
    assert_int_equal(mc_master_metric(&c.m, "master_expired_clients_total"), 0);
    down(&c);
}

static int teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_killed_holder_is_dropped_long_before_its_ttl, teardown),
        cmocka_unit_test_teardown(test_stopped_holder_whose_connection_closed_is_kept, teardown),
    };
    if (getenv("MC_TEST_FILTER"))
        cmocka_set_test_filter(getenv("MC_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
