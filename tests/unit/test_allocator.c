/*
 * test_allocator.c — the per-segment offset allocator (src/master/allocator.h): extents stay inside
 * the segment, aligned, never overlap, coalesce completely, and a free extent large enough is
 * always found; checked against a shadow model under heavy random churn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "mooncake/errors.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

static uint64_t round64(uint64_t n)
{
    return (n + MC_ALLOC_ALIGN - 1) / MC_ALLOC_ALIGN * MC_ALLOC_ALIGN;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static mc_alloc_t *create(uint64_t base, uint64_t size)
{
    mc_alloc_t *a = NULL;
    assert_int_equal(mc_alloc_create(base, size, &a), 0);
    assert_non_null(a);
    return a;
}

static void test_whole_segment_is_one_exact_fit(void **state)
{
    mc_alloc_t *a = create(0x7f0000000000ull, 1 * GiB);
    uint64_t addr;
    uint32_t h, h2;
    assert_int_equal(mc_alloc_capacity(a), 1 * GiB);
    assert_int_equal(mc_alloc_largest_free(a), 1 * GiB);
    assert_int_equal(mc_alloc_alloc(a, 1 * GiB, NULL, &addr, &h), 0);
    assert_int_equal(addr, 0x7f0000000000ull);
    assert_int_equal(mc_alloc_used(a), 1 * GiB);
    assert_int_equal(mc_alloc_largest_free(a), 0);
    assert_int_equal(mc_alloc_alloc(a, 1, NULL, &addr, &h2), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_alloc_free(a, h), 0);
    assert_int_equal(mc_alloc_free_extent_count(a), 1);
    /* An odd-sized exact fit: everything but one unit, then the last unit. */
    assert_int_equal(mc_alloc_alloc(a, 1 * GiB - 64, NULL, &addr, &h), 0);
    assert_int_equal(mc_alloc_alloc(a, 64, NULL, &addr, &h2), 0);
    assert_int_equal(addr, 0x7f0000000000ull + 1 * GiB - 64);
    assert_int_equal(mc_alloc_check(a), 0);
    mc_alloc_destroy(a);
}

static void test_alignment_rounding_and_unaligned_base(void **state)
{
    /* [0x1003, 0x1003 + 10000): usable is [0x1040, 0x3700) = 9920 bytes. */
    mc_alloc_t *a = create(0x1003, 10000);
    assert_int_equal(mc_alloc_capacity(a), (0x3700 - 0x1040));
    uint64_t sizes[] = {1, 63, 64, 65, 1000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t addr;
        uint32_t h;
        assert_int_equal(mc_alloc_alloc(a, sizes[i], NULL, &addr, &h), 0);
        assert_int_equal(addr % MC_ALLOC_ALIGN, 0);
        assert_true(addr >= 0x1040 && addr + round64(sizes[i]) <= 0x3700);
        assert_int_equal(mc_alloc_extent_size(a, h), round64(sizes[i]));
        assert_int_equal(mc_alloc_extent_addr(a, h), addr);
    }
    assert_int_equal(mc_alloc_used(a), 64 + 64 + 64 + 128 + 1024);
    mc_alloc_destroy(a);

    /* A range smaller than one aligned unit holds nothing. */
    a = create(0x1001, 100);
    uint64_t addr;
    uint32_t h;
    assert_int_equal(mc_alloc_capacity(a), 0);
    assert_int_equal(mc_alloc_alloc(a, 1, NULL, &addr, &h), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_alloc_check(a), 0);
    mc_alloc_destroy(a);
}

static void test_bad_arguments_are_refused(void **state)
{
    mc_alloc_t *a = NULL;
    assert_int_equal(mc_alloc_create(UINT64_MAX - 10, 100, &a), MC_ERR_INVALID_PARAMS);
    assert_null(a);
    a = create(0, 1 * MiB);
    uint64_t addr;
    uint32_t h;
    assert_int_equal(mc_alloc_alloc(a, 0, NULL, &addr, &h), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_alloc_alloc(a, 2 * MiB, NULL, &addr, &h), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_alloc_free(a, 12345), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_alloc_alloc(a, 100, NULL, &addr, &h), 0);
    assert_int_equal(mc_alloc_free(a, h), 0);
    assert_int_equal(mc_alloc_free(a, h), MC_ERR_INVALID_PARAMS); /* double free */
    assert_int_equal(mc_alloc_used(a), 0);
    assert_int_equal(mc_alloc_check(a), 0);
    mc_alloc_destroy(a);
}

static void remember_cookie(void *arg, uint32_t handle, uint64_t addr, uint64_t size, void *cookie)
{
    uintptr_t *seen = arg;
    seen[seen[0]++ + 1] = (uintptr_t)cookie;
}

static void test_cookies_are_visited_in_address_order(void **state)
{
    mc_alloc_t *a = create(0, 1 * MiB);
    uint64_t addr;
    uint32_t h[4];
    for (uintptr_t i = 0; i < 4; i++)
        assert_int_equal(mc_alloc_alloc(a, 1000, (void *)(i + 1), &addr, &h[i]), 0);
    assert_int_equal(mc_alloc_free(a, h[1]), 0);
    mc_alloc_set_cookie(a, h[3], (void *)40);
    uintptr_t seen[8] = {0};
    assert_int_equal(mc_alloc_foreach_used(a, remember_cookie, seen), 3);
    assert_int_equal(seen[1], 1);
    assert_int_equal(seen[2], 3);
    assert_int_equal(seen[3], 40);
    assert_ptr_equal(mc_alloc_cookie(a, h[2]), (void *)3);
    mc_alloc_destroy(a);
}

static void test_fragmentation_then_full_coalescing(void **state)
{
    enum { N = 256 };
    mc_alloc_t *a = create(0, N * 64 * KiB);
    uint32_t h[N], big;
    uint64_t addr;
    for (int i = 0; i < N; i++)
        assert_int_equal(mc_alloc_alloc(a, 64 * KiB, NULL, &addr, &h[i]), 0);
    assert_int_equal(mc_alloc_alloc(a, 1, NULL, &addr, &big), MC_ERR_NO_AVAILABLE_HANDLE);
    for (int i = 0; i < N; i += 2)
        assert_int_equal(mc_alloc_free(a, h[i]), 0);
    /* Half the space is free, but only in 64 KiB holes. */
    assert_int_equal(mc_alloc_used(a), N / 2 * 64 * KiB);
    assert_int_equal(mc_alloc_largest_free(a), 64 * KiB);
    assert_int_equal(mc_alloc_free_extent_count(a), N / 2);
    assert_int_equal(mc_alloc_alloc(a, 64 * KiB + 1, NULL, &addr, &big),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_alloc_alloc(a, 64 * KiB, NULL, &addr, &h[0]), 0); /* a hole fits */
    assert_int_equal(mc_alloc_check(a), 0);
    /* Freeing the odd ones merges each hole with both neighbours. */
    for (int i = 1; i < N; i += 2)
        assert_int_equal(mc_alloc_free(a, h[i]), 0);
    assert_int_equal(mc_alloc_free(a, h[0]), 0);
    assert_int_equal(mc_alloc_used(a), 0);
    assert_int_equal(mc_alloc_free_extent_count(a), 1);
    assert_int_equal(mc_alloc_largest_free(a), N * 64 * KiB);
    assert_int_equal(mc_alloc_check(a), 0);
    mc_alloc_destroy(a);
}

/* Shadow model: live extents sorted by address. */
typedef struct live {
    uint64_t addr, size;
    uint32_t handle;
} live_t;

static size_t live_lower_bound(const live_t *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t random_size(void)
{
    switch (rnd() % 8) {
    case 0:
        return 1 + rnd() % 64;
    case 1:
    case 2:
    case 3:
        return 1 + rnd() % (16 * KiB);
    case 4:
    case 5:
        return 1 + rnd() % (256 * KiB);
    case 6:
        return 1 + rnd() % (2 * MiB);
    default:
        return 1 + rnd() % (8 * MiB);
    }
}

static void test_random_churn_matches_shadow_model(void **state)
{
    const uint64_t base = 0x200000000ull, size = 64 * MiB;
    enum { OPS = 300000, MAX_LIVE = 8192 };
    mc_alloc_t *a = create(base, size);
    live_t *v = malloc(MAX_LIVE * sizeof(*v));
    assert_non_null(v);
    size_t n = 0;
    uint64_t used = 0, failures = 0;
    for (int op = 0; op < OPS; op++) {
        int do_alloc = n == 0 || (n < MAX_LIVE && rnd() % 100 < 55);
        if (do_alloc) {
            uint64_t want = random_size(), addr;
            uint32_t h;
            int rc = mc_alloc_alloc(a, want, (void *)(uintptr_t)op, &addr, &h);
            if (rc != 0) {
                assert_int_equal(rc, MC_ERR_NO_AVAILABLE_HANDLE);
                /* Complete: it fails only when no free extent is large enough. */
                assert_true(mc_alloc_largest_free(a) < round64(want));
                failures++;
                continue;
            }
            uint64_t len = round64(want);
            assert_int_equal(addr % MC_ALLOC_ALIGN, 0);
            assert_true(addr >= base && addr + len <= base + size);
            size_t pos = live_lower_bound(v, n, addr);
            assert_true(pos == n || addr + len <= v[pos].addr);
            assert_true(pos == 0 || v[pos - 1].addr + v[pos - 1].size <= addr);
            memmove(&v[pos + 1], &v[pos], (n - pos) * sizeof(*v));
            v[pos] = (live_t){addr, len, h};
            n++;
            used += len;
        } else {
            size_t pos = rnd() % n;
            assert_int_equal(mc_alloc_extent_addr(a, v[pos].handle), v[pos].addr);
            assert_int_equal(mc_alloc_free(a, v[pos].handle), 0);
            used -= v[pos].size;
            memmove(&v[pos], &v[pos + 1], (n - pos - 1) * sizeof(*v));
            n--;
        }
        assert_int_equal(mc_alloc_used(a), used);
        assert_int_equal(mc_alloc_extent_count(a), n);
        if (op % 10000 == 0)
            assert_int_equal(mc_alloc_check(a), 0);
    }
    assert_true(failures > 0); /* the mix does fill the segment */
    assert_int_equal(mc_alloc_check(a), 0);
    while (n > 0) {
        size_t pos = rnd() % n;
        assert_int_equal(mc_alloc_free(a, v[pos].handle), 0);
        v[pos] = v[--n];
    }
    assert_int_equal(mc_alloc_used(a), 0);
    assert_int_equal(mc_alloc_free_extent_count(a), 1);
    assert_int_equal(mc_alloc_largest_free(a), size);
    assert_int_equal(mc_alloc_check(a), 0);
    free(v);
    mc_alloc_destroy(a);
}

static void test_large_segment_costs_small_metadata(void **state)
{
    mc_alloc_t *a = create(0x7f0000000000ull, 32 * GiB);
    assert_true(mc_alloc_metadata_bytes(a) < 8 * KiB);
    uint32_t h[1000];
    uint64_t addr;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(mc_alloc_alloc(a, 32 * MiB, NULL, &addr, &h[i]), 0);
    assert_int_equal(mc_alloc_used(a), 1000 * 32 * MiB);
    /* About one node per extent, not per page. */
    assert_true(mc_alloc_metadata_bytes(a) < 128 * KiB);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(mc_alloc_free(a, h[i]), 0);
    assert_int_equal(mc_alloc_free_extent_count(a), 1);
    mc_alloc_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_segment_is_one_exact_fit),
        cmocka_unit_test(test_alignment_rounding_and_unaligned_base),
        cmocka_unit_test(test_bad_arguments_are_refused),
        cmocka_unit_test(test_cookies_are_visited_in_address_order),
        cmocka_unit_test(test_fragmentation_then_full_coalescing),
        cmocka_unit_test(test_random_churn_matches_shadow_model),
        cmocka_unit_test(test_large_segment_costs_small_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
