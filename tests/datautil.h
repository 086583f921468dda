/* Helpers shared by the data tests (test_data_synthetic, test_data_criteo, test_data_bin):
 * configs, batch readers and checks, a scratch directory, the good.tsv fixture values. */
#ifndef NP_TESTS_DATAUTIL_H
#define NP_TESTS_DATAUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/util.h"
#include "runtime/data/data.h"
#include "nestpipe/nestpipe.h"

/* ---------------------------------------------------------------- helpers */

static char tmpdir[256]; /* per-run scratch directory (mkdtemp), emptied at the end */

static inline const char *tpath(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", tmpdir, name);
    return buf;
}

static inline const char *fixture(const char *name, char *buf, size_t cap) {
    const char *dir = getenv("NP_TEST_DATA");
    snprintf(buf, cap, "%s/%s", dir ? dir : "tests/data", name);
    return buf;
}

static inline void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static inline void write_text(const char *path, const char *s) {
    write_bytes(path, s, strlen(s));
}

static inline long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static inline void set(np_config *c, const char *key, const char *value) {
    np_error err = {{0}};
    np_status st = np_config_set(c, key, value, "test", &err);
    if (st) fail_msg("np_config_set %s=%s: %s", key, value, err.msg);
}

/* Small synthetic model: 5 dense features, 4 tables. */
static inline void syn_config(np_config *c) {
    np_config_defaults(c);
    set(c, "tables", "4");
    set(c, "rows", "1000");
    set(c, "dim", "4");
    set(c, "bottom", "5-8-4");
    set(c, "seed", "7");
}

static inline void criteo_config(np_config *c, const char *path) {
    char v[NP_PATH_MAX + 16];
    np_config_defaults(c); /* 26 tables, bottom 13-..., as Criteo needs */
    snprintf(v, sizeof v, "criteo:%s", path);
    set(c, "data", v);
    set(c, "rows", "1000");
    set(c, "eval-every", "0");
}

static inline np_source_t *open_ok(const np_config *c, np_split split) {
    np_source_t *s = NULL;
    np_error err = {{0}};
    np_status st = np_source_open(c, split, &s, &err);
    if (st) fail_msg("np_source_open: %s", err.msg);
    return s;
}

static inline void next_ok(np_source_t *s, long n, np_batch *b) {
    np_error err = {{0}};
    np_status st = np_source_next_batch(s, n, b, &err);
    if (st) fail_msg("np_source_next_batch(%ld): %s: %s", n, np_status_name(st), err.msg);
}

static inline void next_end(np_source_t *s, long n, np_batch *b) {
    np_error err = {{0}};
    assert_int_equal(np_source_next_batch(s, n, b, &err), NP_STATUS_END_OF_DATA);
}

/* Keys of bag (sample r, table t) and their count. */
static inline const int64_t *bag(const np_batch *b, int t, long r, uint32_t *count) {
    const uint32_t *o = b->offsets + (size_t)t * (size_t)(b->n + 1);
    *count = o[r + 1] - o[r];
    return b->keys + o[r];
}

/* Sample ra of a equals sample rb of b, field by field. */
static inline void assert_sample_equal(const np_batch *a, long ra, const np_batch *b, long rb) {
    assert_int_equal(a->n_dense, b->n_dense);
    assert_int_equal(a->n_tables, b->n_tables);
    assert_memory_equal(a->dense + ra * a->n_dense, b->dense + rb * b->n_dense,
                        (size_t)a->n_dense * sizeof(float));
    assert_true(a->label[ra] == b->label[rb]);
    for (int t = 0; t < a->n_tables; t++) {
        uint32_t ca, cb;
        const int64_t *ka = bag(a, t, ra, &ca), *kb = bag(b, t, rb, &cb);
        assert_int_equal(ca, cb);
        if (ca) assert_memory_equal(ka, kb, ca * sizeof(int64_t));
    }
}

static inline void assert_batch_equal(const np_batch *a, const np_batch *b) {
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->first, b->first);
    assert_int_equal(a->nnz, b->nnz);
    assert_memory_equal(a->offsets, b->offsets,
                        (size_t)a->n_tables * (size_t)(a->n + 1) * sizeof(uint32_t));
    for (long r = 0; r < a->n; r++)
        assert_sample_equal(a, r, b, r);
}

/* Structural invariants every batch must satisfy. */
static inline void assert_batch_valid(const np_config *c, const np_batch *b) {
    for (int t = 0; t < b->n_tables; t++) {
        const uint32_t *o = b->offsets + (size_t)t * (size_t)(b->n + 1);
        if (t == 0) assert_int_equal(o[0], 0);
        for (long r = 0; r < b->n; r++)
            assert_true(o[r] <= o[r + 1]);
        if (t == b->n_tables - 1) assert_int_equal(o[b->n], b->nnz);
        for (uint32_t q = o[0]; q < o[b->n]; q++)
            assert_true(b->keys[q] >= 0 && b->keys[q] < np_config_rows(c, t));
    }
    for (long r = 0; r < b->n; r++)
        assert_true(b->label[r] == 0.0f || b->label[r] == 1.0f);
}

/* |a - b| <= atol + rtol |b|. The data path rounds double to float once: rtol 1e-6. */
static inline void assert_close(double a, double b) {
    if (!(fabs(a - b) <= 1e-7 + 1e-6 * fabs(b))) fail_msg("%.9g != %.9g", a, b);
}

/* ---------------------------------------------------------------- scratch directory */

static inline int setup(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/np_test_data.XXXXXX", base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static inline int teardown(void **state) {
    (void)state;
    DIR *d = opendir(tmpdir);
    if (!d) return -1;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            remove(tpath(e->d_name, p, sizeof p));
    closedir(d);
    return rmdir(tmpdir);
}

/* ---------------------------------------------------------------- tests/data/good.tsv */

/* log1p of the integers in tests/data/good.tsv, as double */
#define L1 0.6931471805599453
#define L2 1.0986122886681096
#define L3 1.3862943611198906
#define L7 2.0794415416798357
#define L10 2.3978952727983707
#define L100 4.61512051684126
#define LMAX 43.66827237527655 /* log1p(2^63 - 1) */

static inline void check_good_tsv(const np_batch *b) {
    /* line 1: ints 0,"",-5,1,2^63-1,"",3,"","",10,"","",2 */
    const double d0[13] = {0, 0, 0, L1, LMAX, 0, L3, 0, 0, L10, 0, 0, L2};
    const double d2[13] = {L1, L1, L1, L1, L1, L1, L1, L1, L1, L1, L1, L1, L1};
    const double d3[13] = {0, L100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const double d4[13] = {L7, L7, L7, L7, L7, L7, L7, L7, L7, L7, L7, L7, L7};
    const double *dd[5] = {d0, NULL, d2, d3, d4};
    const float lab[5] = {1, 0, 1, 0, 1};
    for (long r = 0; r < 5; r++) {
        assert_true(b->label[r] == lab[r]);
        for (int j = 0; j < 13; j++)
            assert_close(b->dense[r * 13 + j], dd[r] ? dd[r][j] : 0);
    }
    /* keys: hex % 1000; line 1: 68fd1e64 = 1761418852, FFFFFFFFFFFFFFFF = 2^64-1,
     * 0, a, 3B, then missing, ffffffff = 4294967295 */
    int64_t k0[26] = {852, 0, 615, 0, 10, 59};
    k0[25] = 295;
    int64_t k2[26], k3[26] = {345}, k4[26]; /* abcdef0123456789 % 1000 = 345 */
    for (int t = 0; t < 26; t++)
        k2[t] = t + 1, k4[t] = 123;
    const int64_t *kk[5] = {k0, NULL, k2, k3, k4};
    for (int t = 0; t < 26; t++)
        for (long r = 0; r < 5; r++) {
            uint32_t cnt;
            const int64_t *k = bag(b, t, r, &cnt);
            assert_int_equal(cnt, 1);
            assert_int_equal(k[0], kk[r] ? kk[r][t] : 0);
        }
}

#endif
