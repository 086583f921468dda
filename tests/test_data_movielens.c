/* The MovieLens reader (runtime/data/movielens.c) and data = movielens:PATH: each user's movies in
 * time order (ties in file order), the history without its last movie then the whole one,
 * the last max_len movies of each; users with fewer than 3 ratings left out; bad lines and
 * users out of order named by path:line; the source's split holds out the second record of
 * every user. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/data/data.h"
#include "datautil.h"

static char path[64];

static void write_file(const char *text) {
    snprintf(path, sizeof path, "/tmp/np_ml_%d.dat", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_record(np_ml_reader *r, uint32_t n, const uint64_t *want) {
    uint32_t count;
    const uint64_t *keys;
    np_error e = {{0}};
    if (np_ml_next(r, &count, &keys, &e)) fail_msg("%s", e.msg);
    assert_int_equal(count, n);
    assert_memory_equal(keys, want, n * sizeof *want);
}

static void test_records(void **state) {
    (void)state;
    /* user 1: five movies out of time order, two at one time (file order kept); user 2: two
     * ratings (left out); user 7: three */
    write_file("1::10::5::300\n1::11::3::100\n1::12::4::200\n1::13::1::200\n1::14::2::400\n"
               "2::20::5::1\n2::21::5::2\n"
               "7::30::1::9\n7::31::2::8\n7::32::3::7\n");
    np_ml_reader *r;
    np_error e = {{0}};
    assert_int_equal(np_ml_open(path, 3, &r, &e), NP_OK);
    expect_record(r, 3, (const uint64_t[]){12, 13, 10});     /* 11 12 13 10 | 14: last 3 */
    expect_record(r, 3, (const uint64_t[]){13, 10, 14});
    expect_record(r, 2, (const uint64_t[]){32, 31});         /* 32 31 | 30 */
    expect_record(r, 3, (const uint64_t[]){32, 31, 30});
    uint32_t c;
    const uint64_t *k;
    assert_int_equal(np_ml_next(r, &c, &k, &e), NP_STATUS_END_OF_DATA);
    np_ml_close(r);

    /* the source: train split = first records, eval split = the held-out ones */
    np_config cfg;
    np_config_defaults(&cfg);
    char spec[96];
    snprintf(spec, sizeof spec, "movielens:%s", path);
    set(&cfg, "data", spec);
    set(&cfg, "tables", "1");
    set(&cfg, "rows", "100");
    set(&cfg, "seq-len", "3");
    np_source_t *tr = open_ok(&cfg, NP_SPLIT_TRAIN), *ev = open_ok(&cfg, NP_SPLIT_EVAL);
    np_batch b = {0};
    next_ok(tr, 2, &b);
    assert_int_equal(b.nnz, 5);
    assert_true(b.keys[0] == 12 && b.keys[2] == 10 && b.keys[3] == 32 && b.label[0] == 1.0f);
    next_ok(ev, 2, &b);
    assert_int_equal(b.nnz, 6);
    assert_true(b.keys[2] == 14 && b.keys[5] == 30);
    np_batch_free(&b);
    np_source_free(tr);
    np_source_free(ev);
    unlink(path);
}

static void expect_open_fail(const char *text, const char *frag) {
    write_file(text);
    np_ml_reader *r;
    np_error e = {{0}};
    assert_int_equal(np_ml_open(path, 5, &r, &e), NP_OK);
    uint32_t c;
    const uint64_t *k;
    np_status st;
    while (!(st = np_ml_next(r, &c, &k, &e)))
        ;
    assert_int_equal(st, NP_STATUS_BAD_INPUT);
    if (!strstr(e.msg, frag)) fail_msg("'%s' lacks '%s'", e.msg, frag);
    np_ml_close(r);
    unlink(path);
}

static void test_bad_input(void **state) {
    (void)state;
    expect_open_fail("1::10::5::300\n1::x::3::100\n", ":2: '1::x::3::100' is not UserID::MovieID");
    expect_open_fail("1::10::5::300\n1::10::5\n", ":2: ");
    expect_open_fail("1::10::5::300\n1::11::5::3\n1::12::5::4\n2::1::1::1\n1::13::1::1\n",
                     ":5: user 1 after user 2: the ratings must be grouped by user");
    np_ml_reader *r;
    np_error e = {{0}};
    assert_int_equal(np_ml_open("/nonexistent/ratings.dat", 5, &r, &e), NP_STATUS_IO);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_records),
                                       cmocka_unit_test(test_bad_input)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
