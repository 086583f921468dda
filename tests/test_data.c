/* Tests of the data module: synthetic generator (determinism, Zipf, bag sizes, teacher),
 * split rule, Criteo TSV values and errors, binary format round trip and validation.
 * Values are checked against hand-computed numbers or an independent naive re-derivation. */
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

#include "core/util.h"
#include "data/data.h"
#include "nestpipe/nestpipe.h"

/* ---------------------------------------------------------------- helpers */

static char tmpdir[256]; /* per-run scratch directory (mkdtemp), emptied at the end */

static const char *tpath(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", tmpdir, name);
    return buf;
}

static const char *fixture(const char *name, char *buf, size_t cap) {
    const char *dir = getenv("NP_TEST_DATA");
    snprintf(buf, cap, "%s/%s", dir ? dir : "tests/data", name);
    return buf;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *s) {
    write_bytes(path, s, strlen(s));
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void set(np_config *c, const char *key, const char *value) {
    np_error err = {{0}};
    np_status st = np_config_set(c, key, value, "test", &err);
    if (st) fail_msg("np_config_set %s=%s: %s", key, value, err.msg);
}

/* Small synthetic model: 5 dense features, 4 tables. */
static void syn_config(np_config *c) {
    np_config_defaults(c);
    set(c, "tables", "4");
    set(c, "rows", "1000");
    set(c, "dim", "4");
    set(c, "bottom", "5-8-4");
    set(c, "seed", "7");
}

static void criteo_config(np_config *c, const char *path) {
    char v[NP_PATH_MAX + 16];
    np_config_defaults(c); /* 26 tables, bottom 13-..., as Criteo needs */
    snprintf(v, sizeof v, "criteo:%s", path);
    set(c, "data", v);
    set(c, "rows", "1000");
    set(c, "eval-every", "0");
}

static np_source_t *open_ok(const np_config *c, np_split split) {
    np_source_t *s = NULL;
    np_error err = {{0}};
    np_status st = np_source_open(c, split, &s, &err);
    if (st) fail_msg("np_source_open: %s", err.msg);
    return s;
}

static void next_ok(np_source_t *s, long n, np_batch *b) {
    np_error err = {{0}};
    np_status st = np_source_next_batch(s, n, b, &err);
    if (st) fail_msg("np_source_next_batch(%ld): %s: %s", n, np_status_name(st), err.msg);
}

static void next_end(np_source_t *s, long n, np_batch *b) {
    np_error err = {{0}};
    assert_int_equal(np_source_next_batch(s, n, b, &err), NP_STATUS_END_OF_DATA);
}

/* Keys of bag (sample r, table t) and their count. */
static const int64_t *bag(const np_batch *b, int t, long r, uint32_t *count) {
    const uint32_t *o = b->offsets + (size_t)t * (size_t)(b->n + 1);
    *count = o[r + 1] - o[r];
    return b->keys + o[r];
}

/* Sample ra of a equals sample rb of b, field by field. */
static void assert_sample_equal(const np_batch *a, long ra, const np_batch *b, long rb) {
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

static void assert_batch_equal(const np_batch *a, const np_batch *b) {
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->first, b->first);
    assert_int_equal(a->nnz, b->nnz);
    assert_memory_equal(a->offsets, b->offsets,
                        (size_t)a->n_tables * (size_t)(a->n + 1) * sizeof(uint32_t));
    for (long r = 0; r < a->n; r++)
        assert_sample_equal(a, r, b, r);
}

/* Structural invariants every batch must satisfy. */
static void assert_batch_valid(const np_config *c, const np_batch *b) {
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
static void assert_close(double a, double b) {
    if (!(fabs(a - b) <= 1e-7 + 1e-6 * fabs(b))) fail_msg("%.9g != %.9g", a, b);
}

/* ---------------------------------------------------------------- synthetic */

/* The split of a run into batches changes nothing: 3 x 10 == 1 x 30, and first is right. */
static void test_syn_batch_split(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "hot", "3");
    set(&c, "rows", "50,1000,50,100000"); /* tables 0 and 2 share a CDF */
    np_source_t *a = open_ok(&c, NP_SPLIT_TRAIN), *b = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch big = {0}, small = {0};
    next_ok(b, 30, &big);
    assert_int_equal(big.first, 0);
    assert_batch_valid(&c, &big);
    /* eval-every 10 holds out 9, 19, 29: train record 10 is stream record 11, 20 is 22 */
    const uint64_t firsts[3] = {0, 11, 22};
    for (int k = 0; k < 3; k++) {
        next_ok(a, 10, &small);
        assert_int_equal(small.n, 10);
        assert_int_equal(small.first, firsts[k]);
        assert_batch_valid(&c, &small);
        for (long r = 0; r < 10; r++)
            assert_sample_equal(&big, 10 * k + r, &small, r);
    }
    /* dense features by hand: train record j is stream record j + j/9 */
    for (long j = 0; j < 30; j++) {
        uint64_t i = (uint64_t)(j + j / 9);
        for (int d = 0; d < 5; d++)
            assert_true(big.dense[j * 5 + d] ==
                        (float)np_rng_normal(7, NP_STREAM_SYN_DENSE, i * 5 + (uint64_t)d));
    }
    np_batch_free(&big);
    np_batch_free(&small);
    np_source_free(a);
    np_source_free(b);
}

/* Keys re-derived naively: bag size rule and a linear-scan inverse CDF. */
static void test_syn_keys_reference(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "hot", "5");
    set(&c, "zipf", "0.8");
    set(&c, "rows", "30,200,30,1");
    set(&c, "eval-every", "0");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 40, &b);
    for (long i = 0; i < 40; i++) {
        for (int t = 0; t < 4; t++) {
            uint32_t cnt;
            const int64_t *k = bag(&b, t, i, &cnt);
            double u = np_rng_uniform(7, NP_STREAM_SYN_COUNT, (uint64_t)i * 4 + (uint64_t)t);
            uint32_t want = 3 + (uint32_t)(u * 5); /* hot 5: uniform in [3, 7] */
            assert_int_equal(cnt, want);
            int64_t rows = np_config_rows(&c, t);
            for (uint32_t q = 0; q < cnt; q++) {
                double v = np_rng_uniform(7, NP_STREAM_SYN_KEY,
                                          (((uint64_t)i * 4 + (uint64_t)t) << 16) + q);
                double total = 0, acc = 0;
                for (int64_t r = 0; r < rows; r++)
                    total += pow((double)(r + 1), -0.8);
                int64_t r = 0;
                for (; r < rows; r++) {
                    acc += pow((double)(r + 1), -0.8);
                    if (acc > v * total) break;
                }
                if (r == rows) r = rows - 1;
                assert_int_equal(k[q], r);
            }
        }
    }
    np_batch_free(&b);
    np_source_free(s);
}

static void test_syn_seed(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "hot", "2");
    np_batch b1 = {0}, b2 = {0}, b3 = {0};
    np_source_t *s1 = open_ok(&c, NP_SPLIT_TRAIN), *s2 = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s1, 50, &b1);
    next_ok(s2, 50, &b2);
    assert_batch_equal(&b1, &b2);
    set(&c, "seed", "8");
    np_source_t *s3 = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s3, 50, &b3);
    int same_dense = 0, same_keys = 0;
    for (long k = 0; k < 50 * 5; k++)
        same_dense += b1.dense[k] == b3.dense[k];
    size_t m = b1.nnz < b3.nnz ? b1.nnz : b3.nnz;
    for (size_t k = 0; k < m; k++)
        same_keys += b1.keys[k] == b3.keys[k];
    assert_int_equal(same_dense, 0);
    assert_true(same_keys < (int)m); /* Zipf keys often agree, but not all of them */
    np_batch_free(&b1);
    np_batch_free(&b2);
    np_batch_free(&b3);
    np_source_free(s1);
    np_source_free(s2);
    np_source_free(s3);
}

/* Key frequencies of n_samples x 4 tables one-hot draws. */
static void key_counts(const char *zipf, const char *rows, long n_samples, long *freq,
                       long n_rows) {
    np_config c;
    syn_config(&c);
    set(&c, "zipf", zipf);
    set(&c, "rows", rows);
    set(&c, "hot", "1");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, n_samples, &b);
    assert_int_equal(b.nnz, (size_t)n_samples * 4);
    memset(freq, 0, (size_t)n_rows * sizeof(long));
    for (size_t k = 0; k < b.nnz; k++) {
        assert_true(b.keys[k] >= 0 && b.keys[k] < n_rows);
        freq[b.keys[k]]++;
    }
    np_batch_free(&b);
    np_source_free(s);
}

static void test_syn_zipf(void **state) {
    (void)state;
    enum { R = 1000, S = 25000 };
    static long freq[R];
    key_counts("1.05", "1000", S, freq, R);
    double H = 0;
    for (int r = 0; r < R; r++)
        H += pow(r + 1.0, -1.05);
    const double N = 4.0 * S;
    for (int r = 1; r < R; r++)
        assert_true(freq[0] > freq[r]);
    /* selected ranks within 5 binomial standard deviations of N p_r */
    const int ranks[] = {0, 1, 2, 3, 9, 49, 99, 499};
    for (size_t k = 0; k < sizeof ranks / sizeof *ranks; k++) {
        double p = pow(ranks[k] + 1.0, -1.05) / H, want = N * p;
        double sd = sqrt(N * p * (1 - p));
        if (fabs((double)freq[ranks[k]] - want) > 5 * sd + 1)
            fail_msg("rank %d: %ld draws, expected %.1f +- %.1f", ranks[k], freq[ranks[k]], want,
                     sd);
    }
    /* frequencies fall with rank: each decade's mean frequency is below the previous one */
    double prev = INFINITY;
    for (int lo = 1; lo < R; lo *= 10) {
        double sum = 0;
        for (int r = lo - 1; r < lo * 10 - 1 && r < R; r++)
            sum += (double)freq[r];
        double mean = sum / (lo * 10 - lo < R ? lo * 10 - lo : R);
        assert_true(mean < prev);
        prev = mean;
    }
}

static void test_syn_uniform(void **state) {
    (void)state;
    enum { R = 50, S = 20000 };
    long freq[R];
    key_counts("0", "50", S, freq, R);
    const double want = 4.0 * S / R;
    double chi2 = 0;
    for (int r = 0; r < R; r++)
        chi2 += (freq[r] - want) * (freq[r] - want) / want;
    /* 49 degrees of freedom: mean 49, sd 9.9; a Zipf-like skew gives thousands */
    if (chi2 > 49 + 8 * 9.9) fail_msg("chi-square %.1f too large for a uniform draw", chi2);
}

static void test_syn_bag_sizes(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "hot", "4");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 10000, &b);
    long hist[8] = {0};
    for (int t = 0; t < 4; t++)
        for (long r = 0; r < b.n; r++) {
            uint32_t cnt;
            bag(&b, t, r, &cnt);
            assert_true(cnt >= 2 && cnt <= 6);
            hist[cnt]++;
        }
    for (int k = 2; k <= 6; k++)
        assert_true(hist[k] > 0);
    double mean = (double)b.nnz / (4.0 * b.n);
    assert_true(fabs(mean - 4.0) < 0.05); /* standard error 0.007 */
    np_source_free(s);

    /* hot 0: empty bags; hot 1: exactly one key */
    set(&c, "hot", "0");
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s, 100, &b);
    assert_int_equal(b.nnz, 0);
    assert_batch_valid(&c, &b);
    np_source_free(s);
    set(&c, "hot", "1");
    s = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(s, 100, &b);
    assert_int_equal(b.nnz, 400);
    for (int t = 0; t < 4; t++)
        for (long r = 0; r < 100; r++)
            assert_int_equal(b.offsets[t * 101 + r], t * 100 + r);
    np_source_free(s);
    np_batch_free(&b);
}

/* Huge tables: uniform keys need no CDF; Zipf keys refuse a CDF larger than 2^28 rows. */
static void test_syn_huge_rows(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "rows", "1099511627776"); /* 2^40 */
    set(&c, "zipf", "0");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 1000, &b);
    assert_batch_valid(&c, &b);
    int64_t top = 0;
    for (size_t k = 0; k < b.nnz; k++)
        top = b.keys[k] > top ? b.keys[k] : top;
    assert_true(top > (INT64_C(1) << 39)); /* spread over the whole range */
    np_batch_free(&b);
    np_source_free(s);
    set(&c, "zipf", "1");
    np_error err = {{0}};
    s = NULL;
    assert_int_equal(np_source_open(&c, NP_SPLIT_TRAIN, &s, &err), NP_STATUS_UNSUPPORTED);
    assert_null(s);
    assert_string_equal(err.msg,
                        "synthetic data: table 0 has 1099511627776 rows; Zipf keys (zipf > "
                        "0) need an 8-byte CDF entry per row and support at most 2^28 "
                        "rows (use zipf 0 or fewer rows)");
}

/* Labels follow the hidden teacher: both its dense and its key part move the click rate.
 * Needs TEACHER_DENSE > 0 and TEACHER_KEY > 0 in data/synthetic.c, not their exact values. */
static void test_syn_labels(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "hot", "2");
    set(&c, "zipf", "0.5");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    const long N = 20000;
    next_ok(s, N, &b);
    double mean = 0, hi_d = 0, lo_d = 0, hi_k = 0, lo_k = 0;
    long n_hi_d = 0, n_lo_d = 0, n_hi_k = 0, n_lo_k = 0;
    for (long r = 0; r < N; r++) {
        double zd = 0, zk = 0;
        for (int j = 0; j < 5; j++)
            zd += np_rng_normal(7, NP_STREAM_TEACHER + NP_MAX_TABLES, (uint64_t)j) *
                  b.dense[r * 5 + j];
        for (int t = 0; t < 4; t++) {
            uint32_t cnt;
            const int64_t *k = bag(&b, t, r, &cnt);
            double m = 0;
            for (uint32_t q = 0; q < cnt; q++)
                m += np_rng_normal(7 ^ 0x5eed, NP_STREAM_TEACHER + (uint64_t)t, (uint64_t)k[q]);
            if (cnt) zk += m / cnt;
        }
        double y = b.label[r];
        mean += y;
        if (zd > 0.5) hi_d += y, n_hi_d++;
        if (zd < -0.5) lo_d += y, n_lo_d++;
        if (zk > 0.5) hi_k += y, n_hi_k++;
        if (zk < -0.5) lo_k += y, n_lo_k++;
    }
    mean /= N;
    assert_true(mean > 0.1 && mean < 0.9);
    assert_true(n_hi_d > 1000 && n_lo_d > 1000 && n_hi_k > 1000 && n_lo_k > 1000);
    double gap_d = hi_d / n_hi_d - lo_d / n_lo_d, gap_k = hi_k / n_hi_k - lo_k / n_lo_k;
    /* independent labels would give gaps of 0 +- 0.02 */
    if (gap_d < 0.1 || gap_k < 0.1)
        fail_msg("click-rate gaps: dense %.3f, keys %.3f (mean %.3f)", gap_d, gap_k, mean);
    np_batch_free(&b);
    np_source_free(s);
}

/* ---------------------------------------------------------------- split */

static void test_split_synthetic(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "eval-every", "4");
    set(&c, "eval-samples", "7");
    np_source_t *tr = open_ok(&c, NP_SPLIT_TRAIN), *ev = open_ok(&c, NP_SPLIT_EVAL);
    np_batch b = {0};
    /* eval: stream records 3, 7, 11, ..., 27 in batches of 3, 3 and a partial 1 */
    const long sizes[3] = {3, 3, 1};
    long j = 0;
    for (int k = 0; k < 3; k++) {
        next_ok(ev, 3, &b);
        assert_int_equal(b.n, sizes[k]);
        assert_int_equal(b.first, 4 * j + 3);
        for (long r = 0; r < b.n; r++, j++)
            assert_true(b.dense[r * 5] ==
                        (float)np_rng_normal(7, NP_STREAM_SYN_DENSE, (uint64_t)(4 * j + 3) * 5));
    }
    next_end(ev, 3, &b);
    next_end(ev, 1, &b);
    /* train: every stream record with i % 4 != 3, in order */
    uint64_t i = 0;
    for (int k = 0; k < 6; k++) {
        next_ok(tr, 5, &b);
        assert_int_equal(b.n, 5);
        for (long r = 0; r < 5; r++, i++) {
            if (i % 4 == 3) i++;
            if (r == 0) assert_int_equal(b.first, i);
            assert_true(b.dense[r * 5] == (float)np_rng_normal(7, NP_STREAM_SYN_DENSE, i * 5));
        }
    }
    np_source_free(tr);
    np_source_free(ev);

    /* an exact multiple ends without an empty batch; eval-every 0 holds nothing out */
    set(&c, "eval-samples", "6");
    ev = open_ok(&c, NP_SPLIT_EVAL);
    next_ok(ev, 3, &b);
    next_ok(ev, 3, &b);
    next_end(ev, 3, &b);
    np_source_free(ev);
    set(&c, "eval-every", "0");
    ev = open_ok(&c, NP_SPLIT_EVAL);
    next_end(ev, 3, &b);
    np_source_free(ev);
    tr = open_ok(&c, NP_SPLIT_TRAIN);
    next_ok(tr, 10, &b);
    next_ok(tr, 10, &b);
    assert_int_equal(b.first, 10);
    np_source_free(tr);
    np_batch_free(&b);
}

/* ---------------------------------------------------------------- Criteo TSV */

/* log1p of the integers in tests/data/good.tsv, as double */
#define L1 0.6931471805599453
#define L2 1.0986122886681096
#define L3 1.3862943611198906
#define L7 2.0794415416798357
#define L10 2.3978952727983707
#define L100 4.61512051684126
#define LMAX 43.66827237527655 /* log1p(2^63 - 1) */

static void check_good_tsv(const np_batch *b) {
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
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", bin);
        assert_int_equal(access(tmp, F_OK), -1);
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
    assert_int_equal(file_size(bin), 40 + 3 * (4 + 13 * 4 + 26 * 4 + 26 * 8));
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
    assert_int_equal(file_size(bin), 40);
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
    assert_int_equal(file_size(bin), 40 + 103 * (4 + 13 * 4 + 26 * 4 + 26 * 8));
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
        0, 0, 0, 0,                             /* flags */
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
                     "header flags 0x4 are not supported (this build reads flags 0)");
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

/* ---------------------------------------------------------------- main */

static int setup(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/np_test_data.XXXXXX", base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_syn_batch_split),
        cmocka_unit_test(test_syn_keys_reference),
        cmocka_unit_test(test_syn_seed),
        cmocka_unit_test(test_syn_zipf),
        cmocka_unit_test(test_syn_uniform),
        cmocka_unit_test(test_syn_bag_sizes),
        cmocka_unit_test(test_syn_huge_rows),
        cmocka_unit_test(test_syn_labels),
        cmocka_unit_test(test_split_synthetic),
        cmocka_unit_test(test_tsv_good),
        cmocka_unit_test(test_tsv_errors),
        cmocka_unit_test(test_tsv_skip),
        cmocka_unit_test(test_missing_and_empty),
        cmocka_unit_test(test_bin_roundtrip),
        cmocka_unit_test(test_bin_hand_built),
        cmocka_unit_test(test_batch_reuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
