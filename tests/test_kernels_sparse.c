/* CMocka tests of the sparse CPU kernels (codelets/kernels/kernels.h): embedding bag forward and
 * finite-difference backward, SGD and row-wise Adagrad, row gather/scatter, key dedup. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "codelets/kernels/kernels.h"
#include "kernelutil.h"

/* ---- embedding bag */

typedef struct emb_ctx {
    const uint32_t *off;
    const int64_t *idx;
    long n;
    int d;
    double *rows; /* (U, d) */
    double *R;    /* (n, d) */
} emb_ctx;

static void emb_fwd_d(const emb_ctx *c, double *out) { /* out: (n, d) */
    for (long i = 0; i < c->n; i++)
        for (int j = 0; j < c->d; j++) {
            double acc = 0.0;
            for (uint32_t k = c->off[i]; k < c->off[i + 1]; k++)
                acc += c->rows[c->idx[k] * c->d + j];
            out[i * c->d + j] = acc;
        }
}

static double emb_loss(void *ctx) {
    emb_ctx *c = ctx;
    double out[16 * 8];
    assert_true(c->n * c->d <= 16 * 8);
    emb_fwd_d(c, out);
    return dot_d(c->R, out, (size_t)c->n * (size_t)c->d);
}

static void test_embbag(void **state) {
    (void)state;
    enum { U = 6, D = 3, N = 5, OS = 5, DS = 4 }; /* out_stride 5, dout_stride 4 > d */
    /* off is absolute: bags start at idx[2]; idx[0..2) name row 3, which no bag uses, so
     * reading them would show up as a nonzero row-3 output or gradient. Bag 0 repeats key
     * 0, bag 1 is empty, key 2 is in bags 0 and 2, bag 3 has key 1 three times. */
    const int64_t idx[] = {3, 3, 0, 2, 0, 2, 5, 1, 1, 1, 4};
    const uint32_t off[N + 1] = {2, 5, 5, 7, 10, 11};
    rng_seed(33);
    float rows[U * D], R[N * DS], out[N * OS], drows[U * D];
    fill_uniform(rows, U * D, -1, 1);
    fill_uniform(R, N * DS, -1, 1);

    double rowsd[U * D], Rd[N * D], outd[N * D], g[U * D];
    to_double(rows, rowsd, U * D);
    for (int i = 0; i < N; i++)
        to_double(R + i * DS, Rd + i * D, D);
    emb_ctx c = {off, idx, N, D, rowsd, Rd};

    const float pad = -777.0f; /* padding beyond d must survive; the empty bag is garbage */
    for (int i = 0; i < N * OS; i++)
        out[i] = pad;
    np_embbag_fwd(rows, off, idx, N, D, out, OS);
    emb_fwd_d(&c, outd);
    for (int i = 0; i < N; i++) {
        check_kernel("embbag out", out + i * OS, outd + i * D, D);
        for (int j = D; j < OS; j++)
            assert_true(out[i * OS + j] == pad);
    }
    for (int j = 0; j < D; j++)
        assert_true(out[1 * OS + j] == 0.0f); /* empty bag */
    /* A key repeated in a bag counts once per occurrence, summed in key order: bag 3 is
     * the sequential float sum row1 + row1 + row1, bit for bit. */
    for (int j = 0; j < D; j++) {
        float want = 0.0f;
        want += rows[1 * D + j];
        want += rows[1 * D + j];
        want += rows[1 * D + j];
        assert_true(out[3 * OS + j] == want);
    }

    fd_grad(emb_loss, &c, rowsd, U * D, g);
    memset(drows, 0, sizeof drows);
    np_embbag_bwd(R, DS, off, idx, N, D, drows);
    check_kernel("embbag drows", drows, g, U * D);
    for (int j = 0; j < D; j++)
        assert_true(drows[3 * D + j] == 0.0f); /* unused row */

    /* Accumulates: a second call adds the same gradient again. */
    for (int i = 0; i < U * D; i++)
        g[i] *= 2.0;
    np_embbag_bwd(R, DS, off, idx, N, D, drows);
    check_kernel("embbag drows x2", drows, g, U * D);
}

/* ---- optimizers (hand values chosen so every step is exact in float) */

static void test_sgd(void **state) {
    (void)state;
    float w[3] = {1, 2, -3};
    const float g[3] = {0.5f, -1, 2};
    const float w_want[3] = {0.875f, 2.25f, -3.5f};
    np_sgd_dense(w, g, 3, 0.25f);
    assert_memory_equal(w, w_want, sizeof w);

    float rows[2 * 3] = {1, 2, -3, 0, 0.5f, 4};
    const float gr[2 * 3] = {0.5f, -1, 2, 4, 1, -8};
    const float rows_want[2 * 3] = {0.875f, 2.25f, -3.5f, -1, 0.25f, 6};
    np_sparse_sgd(rows, gr, 2, 3, 0.25f);
    assert_memory_equal(rows, rows_want, sizeof rows);
}

static void test_rowwise_adagrad(void **state) {
    (void)state;
    enum { U = 3, D = 4 };
    /* lr 0.5, eps 3 so that sqrt(state) + eps is 8 or 16: every value is a dyadic. */
    const float lr = 0.5f, eps = 3.0f;
    float rows[U * D] = {1, -2, 0.5f, 4, /* */
                         0, 1,  2,    3, /* */
                         7, 7,  7,    7};
    float st[U] = {0, 16, 1};
    /* Step 1: mean squares 25, 9, 0 -> state 25, 25, 1 -> sqrt + eps = 8, 8, 4. */
    const float g1[U * D] = {1, -7, 7, 1, /* */
                             3, -3, 3, 3, /* */
                             0, 0,  0, 0};
    /* Step 2: mean squares 144 and 144 -> state 169 -> sqrt + eps = 16. */
    const float g2[U * D] = {12,  -12, 12, 12, /* */
                             -12, 12,  12, 12, /* */
                             0,   0,   0,  0};
    /* rows -= 0.5 * g / 8 = g / 16, then rows -= 0.5 * g / 16 = g / 32. */
    const float rows1[U * D] = {0.9375f,  -1.5625f, 0.0625f, 3.9375f, /* */
                                -0.1875f, 1.1875f,  1.8125f, 2.8125f, /* */
                                7,        7,        7,       7};
    const float rows2[U * D] = {0.5625f, -1.1875f, -0.3125f, 3.5625f, /* */
                                0.1875f, 0.8125f,  1.4375f,  2.4375f, /* */
                                7,       7,        7,        7};
    const float st1[U] = {25, 25, 1}, st2[U] = {169, 169, 1};

    np_sparse_rowwise_adagrad(rows, st, g1, U, D, lr, eps);
    assert_memory_equal(st, st1, sizeof st);
    assert_memory_equal(rows, rows1, sizeof rows);
    np_sparse_rowwise_adagrad(rows, st, g2, U, D, lr, eps);
    assert_memory_equal(st, st2, sizeof st);
    assert_memory_equal(rows, rows2, sizeof rows);
}

/* ---- gather / scatter */

static void test_rows(void **state) {
    (void)state;
    enum { D = 3 };
    float table[4 * D] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
    const int64_t idx[3] = {2, 0, 2};
    float got[3 * D];
    const float got_want[3 * D] = {20, 21, 22, 0, 1, 2, 20, 21, 22};
    np_rows_gather(table, idx, 3, D, got);
    assert_memory_equal(got, got_want, sizeof got);

    const int64_t sidx[2] = {3, 1};
    const float in[2 * D] = {-1, -2, -3, -4, -5, -6};
    const float table_want[4 * D] = {0, 1, 2, -4, -5, -6, 20, 21, 22, -1, -2, -3};
    np_rows_scatter(in, sidx, 2, D, table);
    assert_memory_equal(table, table_want, sizeof table);
}

/* ---- dedup */

static void test_dedup_hand(void **state) {
    (void)state;
    const int64_t big = INT64_C(1) << 40;
    const int64_t keys[8] = {5, 3, 5, -2, 9, 3, 3, big};
    const int64_t uniq_want[5] = {-2, 3, 5, 9, big};
    const int64_t pos_want[8] = {2, 1, 2, 0, 3, 1, 1, 4};
    int64_t uniq[8], pos[8];
    size_t nu = 99;
    assert_int_equal(np_keys_dedup(keys, 8, uniq, &nu, pos), 0);
    assert_int_equal(nu, 5);
    assert_memory_equal(uniq, uniq_want, sizeof uniq_want);
    assert_memory_equal(pos, pos_want, sizeof pos_want);

    /* All the same key. */
    const int64_t same[4] = {7, 7, 7, 7};
    assert_int_equal(np_keys_dedup(same, 4, uniq, &nu, pos), 0);
    assert_int_equal(nu, 1);
    assert_true(uniq[0] == 7);
    for (int k = 0; k < 4; k++)
        assert_true(pos[k] == 0);

    /* n = 0: nothing read or written but the count. */
    nu = 99;
    assert_int_equal(np_keys_dedup(NULL, 0, NULL, &nu, NULL), 0);
    assert_int_equal(nu, 0);
}

/* Many keys, sign and high bytes included: checked against the defining properties
 * (uniq strictly increasing, uniq[pos[k]] == keys[k], every uniq value used). */
static void test_dedup_random(void **state) {
    (void)state;
    enum { N = 20000 };
    int64_t *keys = xcalloc(N, sizeof *keys), *uniq = xcalloc(N, sizeof *uniq);
    int64_t *pos = xcalloc(N, sizeof *pos), *uniq2 = xcalloc(N, sizeof *uniq2);
    int64_t *pos2 = xcalloc(N, sizeof *pos2);
    char *used = xcalloc(N, 1);
    rng_seed(66);
    for (int k = 0; k < N; k++) {
        int64_t v = (int64_t)(rng_u64() % 3000);
        if (k % 7 == 0) v = -v;                                /* negatives sort first */
        if (k % 11 == 0) v += INT64_C(1) << 50;                /* high digits differ */
        if (k % 13 == 0) v = INT64_MIN + (v < 0 ? -v : v) % 3; /* extremes */
        keys[k] = v;
    }
    size_t nu = 0, nu2 = 0;
    assert_int_equal(np_keys_dedup(keys, N, uniq, &nu, pos), 0);
    assert_true(nu > 1000 && nu < N);
    for (size_t u = 1; u < nu; u++)
        assert_true(uniq[u - 1] < uniq[u]);
    for (int k = 0; k < N; k++) {
        assert_true(pos[k] >= 0 && (size_t)pos[k] < nu);
        assert_true(uniq[pos[k]] == keys[k]);
        used[pos[k]] = 1;
    }
    for (size_t u = 0; u < nu; u++)
        assert_true(used[u]);

    assert_int_equal(np_keys_dedup(keys, N, uniq2, &nu2, pos2), 0);
    assert_int_equal(nu, nu2);
    assert_memory_equal(uniq, uniq2, nu * sizeof *uniq);
    assert_memory_equal(pos, pos2, N * sizeof *pos);
    free(keys);
    free(uniq);
    free(pos);
    free(uniq2);
    free(pos2);
    free(used);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embbag),          cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_rowwise_adagrad), cmocka_unit_test(test_rows),
        cmocka_unit_test(test_dedup_hand),      cmocka_unit_test(test_dedup_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
