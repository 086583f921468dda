/* Tests of the synthetic data generator (determinism, Zipf, bag sizes, huge tables, teacher
 * labels) and of the train/eval split rule, against hand values or naive re-derivations. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "runtime/data/data.h"
#include "datautil.h"

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

/* Sequences (seq-len): lengths in [2, L]; with seq-clusters the chain of docs/data.md
 * (stay 0.4, next cluster 0.4, a random one 0.2) shows in consecutive items; seq-negatives
 * K puts K items before each history, the same for a record whatever the batch it comes in,
 * and the other tables' keys are left alone. */
static void test_syn_sequences(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "seq-len", "30");
    set(&c, "seq-clusters", "10");
    set(&c, "rows", "1000");
    np_source_t *s = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    next_ok(s, 4000, &b);
    long moves = 0, stay = 0, next = 0, lens[31] = {0};
    for (long r = 0; r < b.n; r++) {
        uint32_t cnt;
        const int64_t *k = bag(&b, 0, r, &cnt);
        assert_true(cnt >= 2 && cnt <= 30);
        lens[cnt]++;
        for (uint32_t q = 1; q < cnt; q++) {
            int64_t c0 = k[q - 1] / 100, c1 = k[q] / 100; /* 10 clusters of 100 items */
            moves++;
            stay += c1 == c0;
            next += c1 == (c0 + 1) % 10;
        }
    }
    assert_true(lens[2] > 0 && lens[30] > 0);
    /* stay: 0.4 + 0.2/10; next: 0.4 + 0.2/10 (about 58,000 moves: sd 0.002) */
    assert_true(fabs((double)stay / moves - 0.42) < 0.01);
    assert_true(fabs((double)next / moves - 0.42) < 0.01);
    np_source_free(s);

    set(&c, "seq-negatives", "5");
    np_source_t *a = open_ok(&c, NP_SPLIT_TRAIN), *w = open_ok(&c, NP_SPLIT_TRAIN);
    np_batch big = {0}, part = {0};
    next_ok(w, 40, &big);
    for (long lo = 0; lo < 40; lo += 10) {
        next_ok(a, 10, &part);
        for (long r = 0; r < 10; r++) {
            uint32_t cb, cp, cq;
            const int64_t *kb = bag(&big, 0, lo + r, &cb), *kp = bag(&part, 0, r, &cp);
            const int64_t *hist = bag(&b, 0, lo + r, &cq); /* the same train record */
            assert_int_equal(cb, cp);
            assert_memory_equal(kb, kp, cb * sizeof *kb);
            assert_int_equal(cb, cq + 5); /* the history of the same record, after 5 negatives */
            assert_memory_equal(kb + 5, hist, cq * sizeof *kb);
            for (int j = 0; j < 5; j++)
                assert_true(kb[j] >= 0 && kb[j] < 1000);
            for (int t = 1; t < 4; t++) {
                const int64_t *x = bag(&big, t, lo + r, &cb), *y = bag(&b, t, lo + r, &cq);
                assert_int_equal(cb, cq);
                assert_memory_equal(x, y, cb * sizeof *x);
            }
        }
    }
    np_batch_free(&big);
    np_batch_free(&part);
    np_batch_free(&b);
    np_source_free(a);
    np_source_free(w);
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
 * Needs TEACHER_DENSE > 0 and TEACHER_KEY > 0 in runtime/data/synthetic.c, not their exact values. */
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

/* FNV-1a over a buffer, chained. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

/* Every byte of the first batches of a config, hashed. */
static uint64_t data_hash(np_config *c) {
    np_source_t *src = open_ok(c, NP_SPLIT_TRAIN);
    np_batch b = {0};
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < 3; k++) {
        next_ok(src, 500, &b);
        h = fnv(h, b.dense, sizeof(float) * (size_t)b.n * (size_t)b.n_dense);
        h = fnv(h, b.label, sizeof(float) * (size_t)b.n);
        h = fnv(h, b.offsets, sizeof(uint32_t) * (size_t)(b.n + 1) * (size_t)b.n_tables);
        h = fnv(h, b.keys, sizeof(int64_t) * b.nnz);
    }
    np_batch_free(&b);
    np_source_free(src);
    return h;
}

/* The data are pinned: these hashes are those of the generator before its caches (commit
 * 0672f89), so a faster generator that changed a label or a key fails here. One config
 * with the teacher-weight cache on (no groups, bags of several keys, mixed table sizes,
 * one of them under the cache's 8192 keys), one with it off (latent groups). */
static void test_syn_pinned(void **state) {
    (void)state;
    np_config c;
    syn_config(&c);
    set(&c, "hot", "3");
    set(&c, "rows", "50,1000,50,100000");
    uint64_t a = data_hash(&c);
    syn_config(&c);
    set(&c, "groups", "5");
    set(&c, "zipf", "0.8");
    uint64_t b = data_hash(&c);
    print_message("data hashes %016llx %016llx\n", (unsigned long long)a, (unsigned long long)b);
    assert_true(a == UINT64_C(0x3be264549689fb2d));
    assert_true(b == UINT64_C(0xdfd9bcaa7a0dfd08));
}

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syn_batch_split), cmocka_unit_test(test_syn_keys_reference),
        cmocka_unit_test(test_syn_seed),        cmocka_unit_test(test_syn_zipf),
        cmocka_unit_test(test_syn_uniform),     cmocka_unit_test(test_syn_bag_sizes),
        cmocka_unit_test(test_syn_huge_rows),   cmocka_unit_test(test_syn_labels),
        cmocka_unit_test(test_split_synthetic), cmocka_unit_test(test_syn_pinned),
        cmocka_unit_test(test_syn_sequences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
