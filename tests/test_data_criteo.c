/* Tests of the Criteo TSV reader: the hand-checked fixture's values, every parse error's exact
 * message (reader and converter), skip-bad-lines, missing and empty files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/data/data.h"
#include "testutil.h"
#include "datautil.h"

/* ---------------------------------------------------------------- Criteo TSV */

static void test_tsv_good(void **state) {
    (void)state;
    char path[512];
    np_config c;
    criteo_config(&c, fixture("good.tsv", path, sizeof path));
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 5, &b);
    assert_int_equal(b.first, 0);
    assert_int_equal(b.n_dense, 13);
    assert_int_equal(b.n_tables, 26);
    assert_int_equal(b.nnz, 5 * 26);
    assert_batch_valid(&c, &b);
    check_good_tsv(&b);
    next_end(s, 1, &b);
    np_source_free(s);

    /* a short final train batch is refused and not consumed */
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s, 4, &b);
    next_end(s, 4, &b);
    next_end(s, 2, &b);
    next_ok(s, 1, &b);
    assert_int_equal(b.first, 4);
    assert_true(b.label[0] == 1.0f);
    assert_close(b.dense[0], L7);
    next_end(s, 1, &b);
    np_source_free(s);

    /* records read for a refused batch are handed out in order by smaller requests */
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s, 2, &b);
    next_end(s, 4, &b); /* reads records 2, 3, 4 */
    next_ok(s, 2, &b);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.first, 2);
    assert_int_equal(b.nnz, 52);
    assert_close(b.dense[0], L1);
    assert_int_equal(b.keys[0], 1);   /* table 0: record 2 C1 = 1 */
    assert_int_equal(b.keys[1], 345); /* table 0: record 3 C1 = abcdef0123456789 */
    assert_int_equal(b.keys[2], 2);   /* table 1: record 2 C2 = 2 */
    next_ok(s, 1, &b);
    assert_int_equal(b.first, 4);
    assert_int_equal(b.keys[25], 123);
    next_end(s, 1, &b);
    np_source_free(s);

    /* eval-every 2: train lines 1, 3, 5 (records 0, 2, 4), eval lines 2, 4 as a partial batch */
    set(&c, "eval-every", "2");
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s, 3, &b);
    assert_int_equal(b.first, 0);
    assert_close(b.dense[1 * 13], L1);
    assert_close(b.dense[2 * 13], L7);
    np_source_free(s);
    s = open_ok(&c, NP_SPLIT_EVAL);
    next_ok(s, 4, &b);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.first, 1);
    assert_true(b.label[0] == 0.0f && b.label[1] == 0.0f);
    assert_close(b.dense[13 + 1], L100);
    next_end(s, 4, &b);
    np_source_free(s);
    np_batch_free(&b);
}

/* A line of 40 one-character fields: field f starts at column 2f + 1. */
static void base_fields(const char **f) {
    f[0] = "1";
    for (int k = 1; k <= 13; k++)
        f[k] = "1";
    for (int k = 14; k < 40; k++)
        f[k] = "a";
}

static void join(char *out, size_t cap, const char **f, int n) {
    out[0] = 0;
    for (int k = 0; k < n; k++) {
        if (k) strncat(out, "\t", cap - strlen(out) - 1);
        strncat(out, f[k], cap - strlen(out) - 1);
    }
}

typedef struct bad_case {
    int field;         /* field to replace, or -1 */
    const char *value; /* its text */
    int n_fields;      /* fields on the line (39, 40, 41, 42) or 0 for an empty line */
    const char *want;  /* message after "PATH:2:" */
} bad_case;

static const bad_case bad_cases[] = {
    {0, "2", 40, "1: label: '2' is not 0 or 1"},
    {0, "", 40, "1: label: '' is not 0 or 1"},
    {0, "1.0", 40, "1: label: '1.0' is not 0 or 1"},
    {3, "12x", 40, "7: field I3 (integer): '12x' is not a decimal integer"},
    {13, "-", 40, "27: field I13 (integer): '-' is not a decimal integer"},
    {2, "+5", 40, "5: field I2 (integer): '+5' is not a decimal integer"},
    {1, " 1", 40, "3: field I1 (integer): ' 1' is not a decimal integer"},
    {1, "9223372036854775808", 40,
     "3: field I1 (integer): '9223372036854775808' does not fit in a signed 64-bit integer"},
    {1, "-9223372036854775809", 40,
     "3: field I1 (integer): '-9223372036854775809' does not fit in a signed 64-bit integer"},
    {20, "zz", 40, "41: field C7 (categorical): 'zz' is not a hex number of 1-16 digits"},
    {14, "0x1f", 40, "29: field C1 (categorical): '0x1f' is not a hex number of 1-16 digits"},
    {39, "11112222333344445", 40,
     "79: field C26 (categorical): '11112222333344445' is not a hex number of 1-16 digits"},
    {15, "gggggggggggggggggggggggggggggggggggggggggggggggggg", 40,
     "31: field C2 (categorical): 'gggggggggggggggggggggggggggggggggggggggg...' is not a hex "
     "number of 1-16 digits"},
    {-1, NULL, 39, "78: expected 40 tab-separated fields, found 39"},
    {-1, NULL, 41, "81: expected 40 tab-separated fields, found 41"},
    {-1, NULL, 42, "81: expected 40 tab-separated fields, found 42"},
    {-1, NULL, 0, "1: expected 40 tab-separated fields, found an empty line"},
};

static void bad_line(const bad_case *bc, char *line, size_t cap) {
    const char *f[42];
    base_fields(f);
    f[40] = "a";
    f[41] = "a";
    if (bc->field >= 0) f[bc->field] = bc->value;
    if (bc->n_fields == 0)
        line[0] = 0;
    else
        join(line, cap, f, bc->n_fields);
}

static void test_tsv_errors(void **state) {
    (void)state;
    char path[512], good[256], line[512], text[1280], want[2048], bin[512];
    const char *f[40];
    base_fields(f);
    join(good, sizeof good, f, 40);
    tpath("bad.tsv", path, sizeof path);
    tpath("bad.bin", bin, sizeof bin);
    for (size_t k = 0; k < sizeof bad_cases / sizeof *bad_cases; k++) {
        const bad_case *bc = &bad_cases[k];
        bad_line(bc, line, sizeof line);
        snprintf(text, sizeof text, "%s\n%s\r\n%s\n", good, line, good);
        write_text(path, text);
        snprintf(want, sizeof want, "%s:2:%s", path, bc->want);
        np_config c;
        criteo_config(&c, path);
        np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
        np_batch b = {0};
        np_error err = {{0}};
        assert_int_equal(np_source_next_batch(s, 2, &b, &err), NP_STATUS_BAD_INPUT);
        assert_string_equal(err.msg, want);
        /* the failure sticks: the bad line is not silently passed over */
        memset(&err, 0, sizeof err);
        assert_int_equal(np_source_next_batch(s, 1, &b, &err), NP_STATUS_BAD_INPUT);
        assert_string_equal(err.msg, want);
        np_source_free(s);
        np_batch_free(&b);
        /* converting uses the same parser, and leaves no file behind */
        long nw = -1, ns = -1;
        memset(&err, 0, sizeof err);
        assert_int_equal(np_convert_criteo(path, bin, 0, &nw, &ns, &err), NP_STATUS_BAD_INPUT);
        assert_string_equal(err.msg, want);
        assert_int_equal(nw, 1);
        assert_int_equal(ns, 0);
        assert_int_equal(access(bin, F_OK), -1);
        assert_int_equal(tu_leftovers(bin), 0);
    }
}

static void test_tsv_skip(void **state) {
    (void)state;
    char path[512], bin[512], good[256], bad[256], text[2048];
    const char *f[40];
    base_fields(f);
    join(good, sizeof good, f, 40);
    f[5] = "x";
    join(bad, sizeof bad, f, 40);
    /* records 0..4: good, bad, good, bad, good */
    snprintf(text, sizeof text, "%s\n%s\n%s\n%s\n%s\n", good, bad, good, bad, good);
    write_text(tpath("skip.tsv", path, sizeof path), text);
    np_config c;
    criteo_config(&c, path);
    set(&c, "skip-bad-lines", "1");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 2, &b);
    assert_int_equal(b.first, 0);
    assert_int_equal(np_source_skipped(s), 1);
    next_end(s, 2, &b); /* one good record left */
    next_ok(s, 1, &b);
    assert_int_equal(b.first, 4); /* bad lines keep their record numbers */
    assert_int_equal(np_source_skipped(s), 2);
    next_end(s, 1, &b);
    np_source_free(s);

    /* eval-every 2: the bad lines are records 1 and 3, both held out */
    set(&c, "eval-every", "2");
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s, 3, &b);
    assert_int_equal(np_source_skipped(s), 0);
    np_source_free(s);
    s = open_ok(&c, NP_SPLIT_EVAL);
    next_end(s, 3, &b);
    assert_int_equal(np_source_skipped(s), 2);
    np_source_free(s);
    np_batch_free(&b);

    long nw = -1, ns = -1;
    np_error err = {{0}};
    assert_int_equal(np_convert_criteo(path, tpath("skip.bin", bin, sizeof bin), 1, &nw, &ns, &err),
                     NP_OK);
    assert_int_equal(nw, 3);
    assert_int_equal(ns, 2);
    /* the records, then their index: one entry, the trailer */
    assert_int_equal(file_size(bin), 40 + 3 * (4 + 13 * 4 + 26 * 4 + 26 * 8) + 8 + 24);
}

static void test_missing_and_empty(void **state) {
    (void)state;
    char path[512], want[1024], bin[512];
    np_config c;
    np_source_t *s = NULL;
    np_error err = {{0}};
    tpath("no-such-file.tsv", path, sizeof path);
    snprintf(want, sizeof want, "%s: cannot open: %s", path, strerror(ENOENT));
    criteo_config(&c, path);
    assert_int_equal(np_source_open(&c, NP_SPLIT_TRAIN, &s, &err), NP_STATUS_IO);
    assert_null(s);
    assert_string_equal(err.msg, want);
    char v[600];
    snprintf(v, sizeof v, "bin:%s", path);
    set(&c, "data", v);
    assert_int_equal(np_source_open(&c, NP_SPLIT_TRAIN, &s, &err), NP_STATUS_IO);
    assert_string_equal(err.msg, want);
    long nw, ns;
    assert_int_equal(np_convert_criteo(path, tpath("x.bin", bin, sizeof bin), 0, &nw, &ns, &err),
                     NP_STATUS_IO);
    assert_string_equal(err.msg, want);

    /* an empty file has no batch; converting it gives a valid empty binary file */
    write_text(tpath("empty.tsv", path, sizeof path), "");
    criteo_config(&c, path);
    s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_end(s, 1, &b);
    np_source_free(s);
    assert_int_equal(np_convert_criteo(path, bin, 0, &nw, &ns, &err), NP_OK);
    assert_int_equal(nw, 0);
    assert_int_equal(file_size(bin), 40 + 24); /* the header, an index of no entry */
    snprintf(v, sizeof v, "bin:%s", bin);
    set(&c, "data", v);
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_end(s, 1, &b);
    np_source_free(s);
    np_batch_free(&b);

    /* Criteo data needs the Criteo shape */
    criteo_config(&c, path);
    set(&c, "tables", "4");
    assert_int_equal(np_source_open(&c, NP_SPLIT_TRAIN, &s, &err), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(err.msg, "13 dense and 26 categorical"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tsv_good),
        cmocka_unit_test(test_tsv_errors),
        cmocka_unit_test(test_tsv_skip),
        cmocka_unit_test(test_missing_and_empty),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
