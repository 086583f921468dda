/* Key-centric sample clustering: windows are a balanced partition of the batch, the
 * volume count is exact on a hand-made batch, and clustering lowers the exchange volume on
 * Zipf data without ever raising it on a case where contiguous windows are already best. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/kernels/kernels.h"
#include "nestpipe/nestpipe.h"

static void check_partition(const long *perm, const long *bounds, long n, int W) {
    char *seen = calloc((size_t)n + 1, 1);
    assert_int_equal(bounds[0], 0);
    assert_int_equal(bounds[W], n);
    for (int w = 0; w < W; w++) {
        long size = bounds[w + 1] - bounds[w];
        assert_true(size == n / W || size == n / W + 1); /* balanced to one sample */
        for (long j = bounds[w] + 1; j < bounds[w + 1]; j++)
            assert_true(perm[j] > perm[j - 1]); /* batch order inside a window */
    }
    for (long j = 0; j < n; j++) {
        assert_true(perm[j] >= 0 && perm[j] < n);
        assert_false(seen[perm[j]]);
        seen[perm[j]] = 1;
    }
    free(seen);
}

/* 8 samples, 1 table, one key each: 0 1 0 1 0 1 0 1. Contiguous windows of 2 hold {0,1}
 * four times: volume 8; clustered windows hold {0} twice and {1} twice: volume 4. */
static void test_hand_made(void **state) {
    (void)state;
    uint32_t off[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    int64_t keys[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    long perm[8], bounds[5];
    assert_int_equal(np_cluster_windows(off, keys, 8, 1, 4, 0, perm, bounds), 0);
    check_partition(perm, bounds, 8, 4);
    assert_int_equal(np_window_volume(off, keys, 8, 1, 4, perm, bounds), 8);
    assert_int_equal(np_cluster_windows(off, keys, 8, 1, 4, 1, perm, bounds), 0);
    check_partition(perm, bounds, 8, 4);
    assert_int_equal(np_window_volume(off, keys, 8, 1, 4, perm, bounds), 4);
    /* bad arguments */
    assert_int_equal(np_cluster_windows(off, keys, 8, 1, 0, 1, perm, bounds), -1);
    assert_int_equal(np_cluster_windows(off, keys, 8, 1, 65, 1, perm, bounds), -1);
}

/* Already sorted: 0 0 1 1 2 2 3 3 in windows of 2 is optimal (volume 4); clustering must
 * not do worse. Empty bags (a second table with none) are fine. */
static void test_no_worse_when_sorted(void **state) {
    (void)state;
    uint32_t off[18] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
    int64_t keys[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    long perm[8], bounds[5];
    assert_int_equal(np_cluster_windows(off, keys, 8, 2, 4, 1, perm, bounds), 0);
    check_partition(perm, bounds, 8, 4);
    assert_int_equal(np_window_volume(off, keys, 8, 2, 4, perm, bounds), 4);
}

/* Synthetic Zipf 1.05 data, W = 8: with one table clustering cuts the volume by far (the
 * bench measures ~30% at G = 8192); with 26 independently drawn tables there is little to
 * gain, and the result is never worse than contiguous windows. Deterministic. */
static long volume(const np_batch *b, int by_keys, long *perm) {
    long bounds[9];
    assert_int_equal(
        np_cluster_windows(b->offsets, b->keys, b->n, b->n_tables, 8, by_keys, perm, bounds), 0);
    check_partition(perm, bounds, b->n, 8);
    return np_window_volume(b->offsets, b->keys, b->n, b->n_tables, 8, perm, bounds);
}

static void zipf_case(const char *tables, const char *groups, double min_cut) {
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    if (np_config_set(&c, "tables", tables, "t", &e) ||
        np_config_set(&c, "groups", groups, "t", &e) ||
        np_config_set(&c, "rows", "20000", "t", &e) || np_config_set(&c, "batch", "2048", "t", &e))
        fail_msg("%s", e.msg);
    np_source_t *src;
    np_batch b = {0};
    assert_int_equal(np_source_open(&c, NP_SPLIT_TRAIN, &src, &e), NP_OK);
    assert_int_equal(np_source_next_batch(src, 2048, &b, &e), NP_OK);
    long *perm = malloc(2048 * sizeof *perm), *perm2 = malloc(2048 * sizeof *perm2);
    long none = volume(&b, 0, perm), keyed = volume(&b, 1, perm);
    print_message("%s table(s), %s groups, W=8, 2048 samples: volume %ld contiguous, %ld "
                  "clustered (%.1f%% less)\n",
                  tables, groups, none, keyed, 100.0 * (none - keyed) / none);
    assert_true(keyed <= none);
    assert_true(none - keyed >= min_cut * none);
    assert_int_equal(volume(&b, 1, perm2), keyed);
    assert_memory_equal(perm, perm2, 2048 * sizeof *perm);
    free(perm);
    free(perm2);
    np_batch_free(&b);
    np_source_free(src);
}

static void test_zipf_one_table(void **state) {
    (void)state;
    zipf_case("1", "0", 0.15);
}

static void test_zipf_many_tables(void **state) {
    (void)state;
    zipf_case("26", "0", 0.0);
}

/* Tables correlated by latent groups: samples of a group share keys in every table, and
 * clustering finds them. */
static void test_zipf_grouped_tables(void **state) {
    (void)state;
    zipf_case("26", "16", 0.08);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_made),           cmocka_unit_test(test_no_worse_when_sorted),
        cmocka_unit_test(test_zipf_one_table),      cmocka_unit_test(test_zipf_many_tables),
        cmocka_unit_test(test_zipf_grouped_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
