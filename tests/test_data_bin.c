/* Tests of the binary data format (round trip against TSV, hand-built files, header and record
 * validation) and of batches: buffer reuse across sources, a rank's slice of a global batch. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/data/data.h"
#include "nestpipe/checkpoint.h"
#include "datautil.h"

/* ---------------------------------------------------------------- binary format */

/* A TSV of n pseudo-random lines: missing fields, negatives, mixed-case hex. */
static void write_random_tsv(const char *path, int n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t x = 12345;
    for (int l = 0; l < n; l++) {
        fprintf(f, "%d", (int)(np_mix64(x++) & 1));
        for (int j = 0; j < 13; j++) {
            uint64_t v = np_mix64(x++);
            if (v % 5 == 0)
                fputs("\t", f);
            else
                fprintf(f, "\t%lld", (long long)(v % 100000) - 500);
        }
        for (int t = 0; t < 26; t++) {
            uint64_t v = np_mix64(x++);
            if (v % 7 == 0)
                fputs("\t", f);
            else
                fprintf(f, v % 2 ? "\t%llx" : "\t%llX", (unsigned long long)(v >> (v % 40)));
        }
        fputs(l % 3 ? "\n" : "\r\n", f);
    }
    assert_int_equal(fclose(f), 0);
}

static void compare_sources(const np_config *ct, const np_config *cb, np_split split, long n,
                            long want_batches) {
    np_source_t *a = open_ok(ct, split), *b = open_ok(cb, split);
    np_batch ba = {0}, bb = {0};
    long batches = 0;
    for (;;) {
        np_error e1 = {{0}}, e2 = {{0}};
        np_status s1 = np_source_next_batch(a, n, &ba, &e1);
        np_status s2 = np_source_next_batch(b, n, &bb, &e2);
        assert_int_equal(s1, s2);
        if (s1 == NP_STATUS_END_OF_DATA) break;
        if (s1) fail_msg("%s / %s", e1.msg, e2.msg);
        assert_batch_valid(ct, &ba);
        assert_batch_equal(&ba, &bb);
        batches++;
    }
    assert_int_equal(batches, want_batches);
    np_batch_free(&ba);
    np_batch_free(&bb);
    np_source_free(a);
    np_source_free(b);
}

static void test_bin_roundtrip(void **state) {
    (void)state;
    char tsv[512], bin[512], v[600];
    write_random_tsv(tpath("rand.tsv", tsv, sizeof tsv), 103);
    long nw = -1, ns = -1;
    np_error err = {{0}};
    assert_int_equal(np_convert_criteo(tsv, tpath("rand.bin", bin, sizeof bin), 0, &nw, &ns, &err),
                     NP_OK);
    assert_int_equal(nw, 103);
    assert_int_equal(ns, 0);
    /* the records, then their index: one entry (103 records), the trailer */
    assert_int_equal(file_size(bin), 40 + 103 * (4 + 13 * 4 + 26 * 4 + 26 * 8) + 8 + 24);
    /* the header by hand */
    unsigned char h[40];
    FILE *f = fopen(bin, "rb");
    assert_non_null(f);
    assert_int_equal(fread(h, 1, 40, f), 40);
    fclose(f);
    /* clang-format off */
    const unsigned char want[40] = {
        'N', 'P', 'S', 'A', 'M', 'P', 'L', 'E', /* magic */
        1, 0, 0, 0,                             /* version */
        13, 0, 0, 0,                            /* n_dense */
        26, 0, 0, 0,                            /* n_tables */
        1, 0, 0, 0,                             /* flags: a record index follows */
        103, 0, 0, 0, 0, 0, 0, 0,               /* n_records */
        0x76, 0x0a, 0, 0, 0, 0, 0, 0,           /* n_keys = 103 * 26 = 2678 */
    };
    /* clang-format on */
    assert_memory_equal(h, want, 40);

    np_config ct, cb;
    criteo_config(&ct, tsv);
    /* a different row count per table, so every key is reduced by its own table's rows */
    char rows[512] = "";
    for (int t = 0; t < 26; t++) {
        char one[16];
        snprintf(one, sizeof one, "%s%d", t ? "," : "", 3 + 37 * t * t);
        strcat(rows, one);
    }
    set(&ct, "rows", rows);
    set(&ct, "eval-every", "3");
    set(&ct, "eval-samples", "25");
    cb = ct;
    snprintf(v, sizeof v, "bin:%s", bin);
    set(&cb, "data", v);
    compare_sources(&ct, &cb, NP_SPLIT_TRAIN, 10, 6); /* 69 train records */
    compare_sources(&ct, &cb, NP_SPLIT_EVAL, 10, 3);  /* 34 held out, capped at 25 */
    compare_sources(&ct, &cb, NP_SPLIT_TRAIN, 7, 9);

    /* the hand-checked fixture through the binary path */
    char good[512];
    assert_int_equal(
        np_convert_criteo(fixture("good.tsv", good, sizeof good), bin, 0, &nw, &ns, &err), NP_OK);
    criteo_config(&cb, bin);
    snprintf(v, sizeof v, "bin:%s", bin);
    set(&cb, "data", v);
    np_source_t *s = open_ok(&cb, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 5, &b);
    check_good_tsv(&b);
    np_batch_free(&b);
    np_source_free(s);
}

/* A hand-built file: 2 dense, 3 tables, multi-hot records with counts (0,2,1) (1,0,0) (3,1,0). */
static size_t build_bin(unsigned char *p, uint32_t version, uint32_t flags) {
    size_t at = 0;
    memcpy(p, "NPSAMPLE", 8);
    uint32_t h32[4] = {version, 2, 3, flags};
    uint64_t h64[2] = {3, 8};
    memcpy(p + 8, h32, 16);
    memcpy(p + 24, h64, 16);
    at = 40;
    const float lab[3] = {1, 0, 1};
    const float dense[3][2] = {{0.5f, -1}, {2, 3}, {0, 0.25f}};
    const uint32_t cnt[3][3] = {{0, 2, 1}, {1, 0, 0}, {3, 1, 0}};
    const uint64_t keys[8] = {12345, 7, UINT64_MAX, 42, 1, 2, 3, 1001};
    size_t kq = 0;
    for (int r = 0; r < 3; r++) {
        memcpy(p + at, &lab[r], 4), at += 4;
        memcpy(p + at, dense[r], 8), at += 8;
        memcpy(p + at, cnt[r], 12), at += 12;
        size_t nk = cnt[r][0] + cnt[r][1] + cnt[r][2];
        memcpy(p + at, keys + kq, nk * 8), at += nk * 8;
        kq += nk;
    }
    return at; /* 40 + 3 * 24 + 64 = 176 */
}

static void bin_config(np_config *c, const char *path) {
    char v[600];
    np_config_defaults(c);
    snprintf(v, sizeof v, "bin:%s", path);
    set(c, "data", v);
    set(c, "tables", "3");
    set(c, "rows", "10,100,1000");
    set(c, "dim", "4");
    set(c, "bottom", "2-4");
    set(c, "eval-every", "0");
}

/* Opening (or reading, when at_read) a file fails with exactly "PATH: tail". */
static void expect_bin_error(const np_config *c, const char *path, int at_read, np_status want_st,
                             const char *tail) {
    char want[1024];
    snprintf(want, sizeof want, "%s: %s", path, tail);
    np_source_t *s = NULL;
    np_error err = {{0}};
    np_status st = np_source_open(c, NP_SPLIT_TRAIN, &s, &err);
    if (at_read) {
        if (st) fail_msg("open: %s", err.msg);
        np_batch b = {0};
        st = np_source_next_batch(s, 3, &b, &err);
        if (st == NP_OK) st = np_source_next_batch(s, 3, &b, &err);
        np_batch_free(&b);
        np_source_free(s);
    } else {
        assert_null(s);
    }
    assert_int_equal(st, want_st);
    assert_string_equal(err.msg, want);
}

static void test_bin_hand_built(void **state) {
    (void)state;
    unsigned char buf[256];
    char path[512];
    np_config c;
    size_t n = build_bin(buf, 1, 0);
    assert_int_equal(n, 176);
    write_bytes(tpath("hand.bin", path, sizeof path), buf, n);
    bin_config(&c, path);
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 3, &b);
    assert_int_equal(b.nnz, 8);
    /* table-major; keys % rows (10, 100, 1000): t0 {} {42} {1,2,3}, t1 {12345,7} {} {1001},
     * t2 {2^64-1} {} {} */
    const uint32_t off[3][4] = {{0, 0, 1, 4}, {4, 6, 6, 7}, {7, 8, 8, 8}};
    const int64_t keys[8] = {42 % 10,     1, 2,          3,
                             12345 % 100, 7, 1001 % 100, (int64_t)(UINT64_MAX % 1000)};
    for (int t = 0; t < 3; t++)
        for (int r = 0; r < 4; r++)
            assert_int_equal(b.offsets[t * 4 + r], off[t][r]);
    for (int k = 0; k < 8; k++)
        assert_int_equal(b.keys[k], keys[k]);
    assert_true(b.dense[1] == -1.0f && b.dense[5] == 0.25f && b.label[1] == 0.0f);
    next_end(s, 1, &b);
    np_source_free(s);
    /* the same records cut differently after a refused batch: 4 (refused), then 1, 1, 1 */
    np_batch b2 = {0};
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_end(s, 4, &b2);
    for (long r = 0; r < 3; r++) {
        next_ok(s, 1, &b2);
        assert_int_equal(b2.first, r);
        assert_sample_equal(&b, r, &b2, 0);
    }
    next_end(s, 1, &b2);
    np_batch_free(&b);
    np_batch_free(&b2);
    np_source_free(s);

    /* header problems, found at open */
    char tail[512];
    memcpy(buf, "NPSAMPLX", 8);
    write_bytes(path, buf, n);
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "not a nestpipe binary data file (bad magic)");
    n = build_bin(buf, 2, 0);
    write_bytes(path, buf, n);
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "binary format version 2 is not supported (this build reads version 1)");
    n = build_bin(buf, 1, 4);
    write_bytes(path, buf, n);
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "header flags 0x4 are not supported (this build reads flags 0 and 1)");
    n = build_bin(buf, 1, 0);
    write_bytes(path, buf, 10);
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "10 bytes, too short for the 40-byte header of a nestpipe binary data file");
    write_bytes(path, buf, n - 1);
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "file is 175 bytes but its header (3 records, 2 dense, 3 tables, 8 keys) "
                     "implies 176 bytes: the file is truncated or its header is corrupt");
    buf[n] = 0;
    write_bytes(path, buf, n + 1);
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "file is 177 bytes but its header (3 records, 2 dense, 3 tables, 8 keys) "
                     "implies 176 bytes: the file is longer than its records (extra bytes)");
    write_bytes(path, buf, n);
    set(&c, "bottom", "3-4");
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "records have 2 dense features but the model's bottom input is 3 (bottom "
                     "must start with 2)");
    set(&c, "bottom", "2-4");
    set(&c, "tables", "4");
    set(&c, "rows", "10");
    expect_bin_error(&c, path, 0, NP_STATUS_BAD_INPUT,
                     "records have 3 tables but the model has 4 (set tables to 3)");
    bin_config(&c, path);

    /* record problems, found while reading: record 1 starts at byte 40 + 24 + 24 = 88 */
    float two = 2;
    memcpy(buf + 88, &two, 4);
    write_bytes(path, buf, n);
    expect_bin_error(&c, path, 1, NP_STATUS_BAD_INPUT, "record 1 (byte 88): label 2 is not 0 or 1");
    n = build_bin(buf, 1, 0);
    uint32_t five = 5; /* record 2 (byte 120) claims 3+1+5 keys; only 4 are left */
    memcpy(buf + 120 + 12 + 8, &five, 4);
    write_bytes(path, buf, n);
    snprintf(tail, sizeof tail,
             "record 2 (byte 120): key counts exceed the header's total of 8 keys (table 2 "
             "count 5)");
    expect_bin_error(&c, path, 1, NP_STATUS_BAD_INPUT, tail);
    n = build_bin(buf, 1, 0);
    uint32_t zero = 0; /* record 2 claims 3+0+0 keys: one key's bytes are left over */
    memcpy(buf + 120 + 12 + 4, &zero, 4);
    write_bytes(path, buf, n);
    expect_bin_error(&c, path, 1, NP_STATUS_BAD_INPUT,
                     "the records hold 7 keys but the header says 8");
}

/* ---------------------------------------------------------------- batches */

static void test_batch_reuse(void **state) {
    (void)state;
    char path[512];
    np_config cs, cc;
    syn_config(&cs);
    set(&cs, "hot", "3");
    criteo_config(&cc, fixture("good.tsv", path, sizeof path));
    np_batch b = {0};
    np_source_t *s1 = open_ok(&cs, NP_SPLIT_TRAIN), *s2 = open_ok(&cc, NP_SPLIT_TRAIN);
    next_ok(s1, 64, &b); /* 5 dense, 4 tables */
    next_ok(s2, 2, &b);  /* 13 dense, 26 tables: more per sample */
    assert_batch_valid(&cc, &b);
    next_ok(s1, 200, &b);
    assert_batch_valid(&cs, &b);
    np_error err = {{0}};
    assert_int_equal(np_source_next_batch(s1, 0, &b, &err), NP_STATUS_BAD_INPUT);
    np_batch_free(&b);
    np_batch_free(&b); /* a freed batch is zeroed: freeing again is harmless */
    np_batch_free(NULL);
    np_source_free(NULL);
    assert_int_equal(np_source_skipped(NULL), 0);
    np_source_free(s1);
    np_source_free(s2);
}

/* A rank's slice equals the same samples cut from the whole global batch, for synthetic
 * data (generated directly) and files (read whole, then cut), batch after batch. */
static void check_slices(const np_config *c) {
    const long G = 12, lo = 4, n = 4;
    np_source_t *whole = open_ok(c, NP_SPLIT_TRAIN), *part = open_ok(c, NP_SPLIT_TRAIN);
    np_batch bw = {0}, bp = {0}, cut = {0};
    np_error e = {{0}};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(np_source_next_batch(whole, G, &bw, &e), NP_OK);
        assert_int_equal(np_source_next_slice(part, G, lo, n, &bp, &e), NP_OK);
        assert_int_equal(np_batch_slice(&bw, lo, n, &cut, &e), NP_OK);
        if (c->data == NP_DATA_SYNTHETIC) /* exact stream index of sample lo */
            assert_int_equal(bp.first, np_split_index(NP_SPLIT_TRAIN, c->eval_every,
                                                      (uint64_t)k * G + (uint64_t)lo));
        cut.first = bp.first; /* a cut batch only knows its position (see np_batch_slice) */
        assert_batch_equal(&bp, &cut);
    }
    assert_int_equal(np_source_next_slice(part, G, 10, 4, &bp, &e), NP_STATUS_BAD_INPUT);
    np_batch_free(&bw);
    np_batch_free(&bp);
    np_batch_free(&cut);
    np_source_free(whole);
    np_source_free(part);
}

static void test_slices(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    check_slices(&c);
    char path[300];
    snprintf(path, sizeof path, "%s/slices.tsv", tmpdir);
    write_random_tsv(path, 60);
    criteo_config(&c, path);
    check_slices(&c);
}

/* A rank reads only its slice of a file (np_source_next_slice's own reading, docs/data.md
 * "Several ranks"): every rank's slice of every batch equals the cut of the whole batch,
 * the position after it (delivered, stream index, skipped) equals the whole read's, and
 * the data ends at the same batch; with held-out records, several passes, and a binary
 * file with its record index and without (as 0.7.1 wrote them). */
static void check_file_slices(const np_config *c, long G, long n) {
    np_source_t *whole = open_ok(c, NP_SPLIT_TRAIN);
    np_source_t **part = calloc((size_t)(G / n), sizeof *part);
    assert_non_null(part);
    for (long r = 0; r < G / n; r++)
        part[r] = open_ok(c, NP_SPLIT_TRAIN);
    np_batch bw = {0}, bp = {0}, cut = {0};
    np_error e = {{0}};
    long batches = 0;
    for (;;) {
        np_status sw = np_source_next_batch(whole, G, &bw, &e);
        for (long r = 0; r < G / n; r++) {
            np_status sp = np_source_next_slice(part[r], G, r * n, n, &bp, &e);
            if (sp != sw) fail_msg("batch %ld rank %ld: %d against %d: %s", batches, r, sp, sw, e.msg);
            if (sw) continue;
            assert_int_equal(np_batch_slice(&bw, r * n, n, &cut, &e), NP_OK);
            cut.first = bp.first;
            assert_batch_equal(&bp, &cut);
            np_data_pos a, b;
            np_source_tell(whole, &a);
            np_source_tell(part[r], &b);
            assert_int_equal(a.delivered, b.delivered);
            assert_int_equal(a.next_index, b.next_index);
            assert_int_equal(a.skipped, b.skipped);
        }
        if (sw == NP_STATUS_END_OF_DATA) break;
        assert_int_equal(sw, NP_OK);
        batches++;
    }
    assert_true(batches > 3);
    for (long r = 0; r < G / n; r++)
        np_source_free(part[r]);
    free(part);
    np_batch_free(&bw);
    np_batch_free(&bp);
    np_batch_free(&cut);
    np_source_free(whole);
}

/* The file at path without its record index: flags 0, the trailer cut (0.7.1's layout). */
static void strip_index(const char *path, const char *out) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    long size = file_size(path);
    unsigned char *b = malloc((size_t)size);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    assert_int_equal(np_le_get32(b + 20), NP_BIN_FLAG_INDEX);
    uint64_t recs = np_le_get64(b + 24);
    long idx = (long)(8 * ((recs + NP_BIN_INDEX_STRIDE - 1) / NP_BIN_INDEX_STRIDE)) +
               NP_BIN_TRAILER_BYTES;
    np_le_put32(b + 20, 0);
    write_bytes(out, b, (size_t)(size - idx));
    free(b);
}

static void test_file_slices(void **state) {
    (void)state;
    char bin[300], old[300], tsv[300], v[340];
    np_config g, c;
    syn_config(&g);
    set(&g, "hot", "3");
    np_error e = {{0}};
    assert_int_equal(np_generate_synthetic(&g, 1100, tpath("slices.bin", bin, sizeof bin), &e),
                     NP_OK);
    strip_index(bin, tpath("slices_old.bin", old, sizeof old));
    const char *paths[2] = {bin, old};
    for (int k = 0; k < 2; k++) {
        syn_config(&c);
        snprintf(v, sizeof v, "bin:%s", paths[k]);
        set(&c, "data", v);
        set(&c, "eval-every", "0");
        check_file_slices(&c, 96, 24); /* 11 batches, the last record unread */
        set(&c, "eval-every", "7");    /* held-out records between the members */
        set(&c, "epochs", "2");        /* batches across the pass's end */
        check_file_slices(&c, 120, 40);
    }
    /* an index whose entry disagrees with the records is caught when they are read */
    FILE *f = fopen(bin, "r+b");
    assert_non_null(f);
    long at = file_size(bin) - NP_BIN_TRAILER_BYTES - 8 * 5 + 8; /* entry 1 of 5 */
    unsigned char le[8];
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    assert_int_equal(fread(le, 1, 8, f), 8);
    np_le_put64(le, np_le_get64(le) + 1); /* still in order: only reading shows it */
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    fclose(f);
    syn_config(&c);
    snprintf(v, sizeof v, "bin:%s", bin);
    set(&c, "data", v);
    set(&c, "eval-every", "0");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    assert_int_equal(np_source_next_batch(s, 300, &b, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "the record index says"));
    np_source_free(s);
    /* and by a rank that seeks into that stride (record 300): never another record */
    s = open_ok(&c, NP_SPLIT_TRAIN);
    assert_int_equal(np_source_next_slice(s, 600, 300, 100, &b, &e), NP_STATUS_BAD_INPUT);
    assert_true(strstr(e.msg, "the record index says") || strstr(e.msg, "key counts exceed"));
    np_source_free(s);
    np_batch_free(&b);
    /* a Criteo TSV: lines outside the slice counted, not parsed */
    write_random_tsv(tpath("slices2.tsv", tsv, sizeof tsv), 500);
    criteo_config(&c, tsv);
    check_file_slices(&c, 40, 10);
    set(&c, "eval-every", "9");
    set(&c, "epochs", "2");
    check_file_slices(&c, 60, 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_file_slices),
        cmocka_unit_test(test_bin_roundtrip),
        cmocka_unit_test(test_bin_hand_built),
        cmocka_unit_test(test_batch_reuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
