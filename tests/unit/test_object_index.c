/*
 * test_object_index.c — the master's key -> object map (src/master/object_index.h): the
 * resumable scan that remove_all and remove_by_regex walk a slice at a time with the lock
 * released, while the map grows, shrinks and changes between slices.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "object_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_STABLE 5000
#define N_CHURN 20000

typedef struct seen {
    unsigned *count; /* per stable key: times handed out */
    size_t calls;
} seen_t;

static mc_object_t *make(const char *prefix, int i)
{
    char key[32];
    int len = snprintf(key, sizeof(key), "%s%d", prefix, i);
    mc_object_t *o = mc_object_new(key, (size_t)len, 1);
    assert_non_null(o);
    return o;
}

static void count_stable(void *arg, mc_object_t *o)
{
    seen_t *s = arg;
    const char *k = mc_object_key(o);
    if (strncmp(k, "stable/", 7) == 0)
        s->count[atoi(k + 7)]++;
}

/* Scans the map in steps while `churn` objects are inserted (growing the table past several
 * doublings) and then removed (shrinking it); every stable object must be handed out. */
static void test_scan_hands_out_every_stable_record_across_grow_and_shrink(void **state)
{
    mc_index_t idx;
    mc_index_init(&idx);
    for (int i = 0; i < N_STABLE; i++)
        assert_int_equal(mc_index_insert(&idx, make("stable/", i)), 0);
    mc_object_t **churn = calloc(N_CHURN, sizeof(*churn));
    assert_non_null(churn);
    seen_t s = {calloc(N_STABLE, sizeof(unsigned)), 0};
    assert_non_null(s.count);

    size_t cursor = 0;
    int inserted = 0, removed = 0;
    do {
        cursor = mc_index_scan(&idx, cursor, count_stable, &s);
        s.calls++;
        /* Between calls: grow first, then shrink back below the start. */
        for (int j = 0; j < 8 && inserted < N_CHURN; j++, inserted++) {
            churn[inserted] = make("churn/", inserted);
            assert_int_equal(mc_index_insert(&idx, churn[inserted]), 0);
        }
        if (inserted == N_CHURN) {
            for (int j = 0; j < 64 && removed < N_CHURN; j++, removed++) {
                mc_index_remove(&idx, churn[removed]);
                mc_object_free(churn[removed]);
            }
        }
    } while (cursor != 0);

    for (int i = 0; i < N_STABLE; i++) {
        if (s.count[i] == 0)
            fail_msg("stable/%d was never handed out (%zu scan calls)", i, s.calls);
    }
    size_t cursor2 = 0;
    mc_object_t *o;
    while ((o = mc_index_next(&idx, &cursor2)) != NULL)
        mc_object_free(o);
    mc_index_fini(&idx);
    free(s.count);
    free(churn);
}

/* On a map that does not change, each record is handed out exactly once. */
static void test_scan_of_a_quiet_map_hands_out_each_record_once(void **state)
{
    mc_index_t idx;
    mc_index_init(&idx);
    assert_int_equal(mc_index_scan(&idx, 0, count_stable, NULL), 0); /* empty: done at once */
    for (int i = 0; i < N_STABLE; i++)
        assert_int_equal(mc_index_insert(&idx, make("stable/", i)), 0);
    seen_t s = {calloc(N_STABLE, sizeof(unsigned)), 0};
    assert_non_null(s.count);
    size_t cursor = 0;
    do
        cursor = mc_index_scan(&idx, cursor, count_stable, &s);
    while (cursor != 0);
    for (int i = 0; i < N_STABLE; i++)
        assert_int_equal(s.count[i], 1);
    size_t c = 0;
    mc_object_t *o;
    while ((o = mc_index_next(&idx, &c)) != NULL)
        mc_object_free(o);
    mc_index_fini(&idx);
    free(s.count);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_of_a_quiet_map_hands_out_each_record_once),
        cmocka_unit_test(test_scan_hands_out_every_stable_record_across_grow_and_shrink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
