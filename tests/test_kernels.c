/* CMocka tests of the CPU kernels (codelets/kernels.h) against naive double-precision code:
 * forward values, finite-difference gradients of every backward, and hand-computed cases.
 * Not here: whole-model gradient checks or trainer equivalence (test_model, test_train). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/kernels.h"

/* Central-difference step. Every op here is at most quadratic in any one input (linear,
 * ReLU away from its kink, embedding bags, dot products), so the double central difference
 * is exact up to roundoff ~1e-16/H = 1e-12; for the BCE the truncation term H^2/6 * |f'''|
 * is below 1e-9. So the reference gradient is good to ~1e-9 and the tolerances below only
 * have to cover the float kernels. */
#define FD_H 1e-4

/* Float kernel vs exact (double) value, for forwards and gradients alike. The inputs are
 * in [-1, 1] and every reduction here has at most 16 terms, so the float result is off by
 * at most ~16 * 2^-24 * sum|terms| <= 1.6e-5 in the worst case and ~1e-7 typically. The
 * atol covers outputs that cancel to near 0 (where a relative bound means nothing); the
 * rtol covers large values. A wrong index, missing term or transposed operand errs by
 * O(0.1..1) and fails by orders of magnitude. */
#define KERNEL_ATOL 2e-5
#define KERNEL_RTOL 1e-5

/* The BCE loss is summed in double from the float logits by the kernel itself, so it must
 * match the naive double formula to double rounding (log1p/exp ulps times B terms). */
#define LOSS_RTOL 1e-12

/* ---- test helpers */

/* xorshift64*: tiny, deterministic, independent of the library's RNG. */
static uint64_t rng_state;
static void rng_seed(uint64_t s) {
    rng_state = s ? s : 0x9E3779B97F4A7C15ULL;
}
static uint64_t rng_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}
/* Uniform in [lo, hi), rounded to float: tests feed the same values to float and double. */
static float rng_float(float lo, float hi) {
    double u = (double)(rng_u64() >> 11) * 0x1.0p-53;
    return (float)(lo + (hi - lo) * u);
}
static void fill_uniform(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++)
        a[i] = rng_float(lo, hi);
}
static void to_double(const float *a, double *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        b[i] = a[i];
}

/* Checked allocation: a test that cannot allocate fails rather than crashing. */
static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

/* |got - ref| <= atol + rtol*|ref| for all n; prints the worst element and the first few
 * failures so a broken kernel says where it is wrong. got is read with stride 1. */
static void check_close(const char *what, const float *got, const double *ref, size_t n,
                        double atol, double rtol) {
    size_t bad = 0, worst = 0;
    double worst_ratio = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        double lim = atol + rtol * fabs(ref[i]);
        if (!(err <= lim)) {
            if (bad < 5)
                fprintf(stderr, "  %s[%zu]: got %.9g want %.9g (err %.3g > %.3g)\n", what, i,
                        (double)got[i], ref[i], err, lim);
            bad++;
        }
        if (err / lim > worst_ratio || isnan(err)) {
            worst_ratio = err / lim;
            worst = i;
        }
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu out of tolerance (worst [%zu])\n", what, bad, n, worst);
    assert_int_equal(bad, 0);
}

static void check_kernel(const char *what, const float *got, const double *ref, size_t n) {
    check_close(what, got, ref, n, KERNEL_ATOL, KERNEL_RTOL);
}

/* A scalar loss of the double parameters held in ctx (L = sum R .* y(x) for the ops). */
typedef double (*loss_fn)(void *ctx);

/* Central differences of loss over the n doubles at p, into grad (n). */
static void fd_grad(loss_fn loss, void *ctx, double *p, size_t n, double *grad) {
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double lp = loss(ctx);
        p[i] = keep - FD_H;
        double lm = loss(ctx);
        p[i] = keep;
        grad[i] = (lp - lm) / (2.0 * FD_H);
    }
}

static double dot_d(const double *a, const double *b, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

/* ---- linear */

typedef struct lin_ctx {
    long B;
    int in, out;
    double *x, *W, *b; /* (B, in), (out, in), (out) */
    double *R;         /* (B, out) */
    double *y;         /* (B, out) scratch */
} lin_ctx;

static void lin_fwd_d(lin_ctx *c) {
    for (long s = 0; s < c->B; s++)
        for (int o = 0; o < c->out; o++) {
            double acc = c->b[o];
            for (int i = 0; i < c->in; i++)
                acc += c->x[s * c->in + i] * c->W[o * c->in + i];
            c->y[s * c->out + o] = acc;
        }
}

static double lin_loss(void *ctx) {
    lin_ctx *c = ctx;
    lin_fwd_d(c);
    return dot_d(c->R, c->y, (size_t)c->B * (size_t)c->out);
}

static void test_linear(void **state) {
    (void)state;
    enum { B = 5, IN = 7, OUT = 3 };
    rng_seed(11);
    float x[B * IN], W[OUT * IN], b[OUT], R[B * OUT], y[B * OUT], y2[B * OUT];
    float dx[B * IN], dW[OUT * IN], db[OUT], dW2[OUT * IN], db2[OUT];
    fill_uniform(x, B * IN, -1, 1);
    fill_uniform(W, OUT * IN, -1, 1);
    fill_uniform(b, OUT, -1, 1);
    fill_uniform(R, B * OUT, -1, 1);

    double xd[B * IN], Wd[OUT * IN], bd[OUT], Rd[B * OUT], yd[B * OUT];
    to_double(x, xd, B * IN);
    to_double(W, Wd, OUT * IN);
    to_double(b, bd, OUT);
    to_double(R, Rd, B * OUT);
    lin_ctx c = {B, IN, OUT, xd, Wd, bd, Rd, yd};

    np_linear_fwd(x, W, b, y, B, IN, OUT);
    lin_fwd_d(&c);
    check_kernel("linear y", y, yd, B * OUT);
    np_linear_fwd(x, W, b, y2, B, IN, OUT);
    assert_memory_equal(y, y2, sizeof y); /* same inputs, same bits */

    double gx[B * IN], gW[OUT * IN], gb[OUT];
    fd_grad(lin_loss, &c, xd, B * IN, gx);
    fd_grad(lin_loss, &c, Wd, OUT * IN, gW);
    fd_grad(lin_loss, &c, bd, OUT, gb);

    /* Outputs are overwritten: pre-fill with garbage to prove it. */
    for (int i = 0; i < B * IN; i++)
        dx[i] = 1e6f;
    for (int i = 0; i < OUT * IN; i++)
        dW[i] = dW2[i] = 1e6f;
    for (int i = 0; i < OUT; i++)
        db[i] = db2[i] = 1e6f;
    np_linear_bwd(x, W, R, dx, dW, db, B, IN, OUT);
    check_kernel("linear dx", dx, gx, B * IN);
    check_kernel("linear dW", dW, gW, OUT * IN);
    check_kernel("linear db", db, gb, OUT);

    /* dx == NULL (first layer): the parameter gradients are unchanged, bit for bit. */
    np_linear_bwd(x, W, R, NULL, dW2, db2, B, IN, OUT);
    assert_memory_equal(dW, dW2, sizeof dW);
    assert_memory_equal(db, db2, sizeof db);
}

/* Hand case: y = x W^T + b with small integers (exact in float). */
static void test_linear_hand(void **state) {
    (void)state;
    const float x[2 * 3] = {1, 2, 3, -1, 0, 2}; /* (2, 3) */
    const float W[2 * 3] = {1, 0, -1, 2, 1, 1}; /* (2, 3) */
    const float b[2] = {0.5f, -1};
    const float dy[2 * 2] = {1, 2, -1, 3}; /* (2, 2) */
    const float y_want[4] = {1 - 3 + 0.5f, 2 + 2 + 3 - 1, -1 - 2 + 0.5f, -2 + 2 - 1};
    const float dx_want[6] = {1 + 4, 2, -1 + 2, -1 + 6, 3, 1 + 3};
    const float dW_want[6] = {1 + 1, 2, 3 - 2, 2 - 3, 4, 6 + 6};
    const float db_want[2] = {0, 5};
    float y[4], dx[6], dW[6], db[2];
    np_linear_fwd(x, W, b, y, 2, 3, 2);
    assert_memory_equal(y, y_want, sizeof y);
    np_linear_bwd(x, W, dy, dx, dW, db, 2, 3, 2);
    assert_memory_equal(dx, dx_want, sizeof dx);
    assert_memory_equal(dW, dW_want, sizeof dW);
    assert_memory_equal(db, db_want, sizeof db);

    /* An empty chunk (B = 0) still overwrites dW and db, with zeros. */
    const float zeros[6] = {0};
    np_linear_bwd(x, W, dy, NULL, dW, db, 0, 3, 2);
    assert_memory_equal(dW, zeros, sizeof dW);
    assert_memory_equal(db, zeros, sizeof db);
}

/* ---- relu */

typedef struct relu_ctx {
    size_t n;
    double *x, *R; /* (n), (n) */
} relu_ctx;

static double relu_loss(void *ctx) {
    relu_ctx *c = ctx;
    double L = 0.0;
    for (size_t i = 0; i < c->n; i++)
        L += c->R[i] * (c->x[i] > 0.0 ? c->x[i] : 0.0);
    return L;
}

static void test_relu(void **state) {
    (void)state;
    enum { N = 40 };
    rng_seed(22);
    float x[N], R[N], y[N], dx[N], buf[N];
    fill_uniform(x, N, -1, 1);
    /* Keep |x| >= 0.05 so x +- FD_H never crosses the kink at 0. */
    for (int i = 0; i < N; i++)
        if (fabsf(x[i]) < 0.05f) x[i] = x[i] < 0 ? x[i] - 0.05f : x[i] + 0.05f;
    fill_uniform(R, N, -1, 1);

    np_relu_fwd(x, y, N);
    int pos = 0;
    for (int i = 0; i < N; i++) {
        assert_true(y[i] == (x[i] > 0 ? x[i] : 0.0f)); /* exact: a copy or a zero */
        pos += x[i] > 0;
    }
    assert_true(pos > 0 && pos < N); /* both branches exercised */

    double xd[N], Rd[N], g[N];
    to_double(x, xd, N);
    to_double(R, Rd, N);
    relu_ctx c = {N, xd, Rd};
    fd_grad(relu_loss, &c, xd, N, g);
    np_relu_bwd(y, R, dx, N);
    check_kernel("relu dx", dx, g, N);

    /* In place, both directions. */
    memcpy(buf, x, sizeof buf);
    np_relu_fwd(buf, buf, N);
    assert_memory_equal(buf, y, sizeof y);
    memcpy(buf, R, sizeof buf);
    np_relu_bwd(y, buf, buf, N);
    assert_memory_equal(buf, dx, sizeof dx);
}

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

/* ---- interaction */

typedef struct int_ctx {
    long B;
    int T1, d;
    double *F; /* (B, T1, d) */
    double *R; /* (B, width) */
} int_ctx;

static int int_width(int T1, int d) {
    return d + T1 * (T1 - 1) / 2;
}

static void int_fwd_d(const int_ctx *c, double *out) { /* out: (B, width) */
    int w = int_width(c->T1, c->d);
    for (long s = 0; s < c->B; s++) {
        const double *f = c->F + s * c->T1 * c->d;
        double *o = out + s * w;
        for (int k = 0; k < c->d; k++)
            o[k] = f[k];
        int p = c->d;
        for (int i = 1; i < c->T1; i++)
            for (int j = 0; j < i; j++)
                o[p++] = dot_d(f + i * c->d, f + j * c->d, c->d);
    }
}

static double int_loss(void *ctx) {
    int_ctx *c = ctx;
    double out[4 * 16];
    assert_true(c->B * int_width(c->T1, c->d) <= 4 * 16);
    int_fwd_d(c, out);
    return dot_d(c->R, out, (size_t)c->B * (size_t)int_width(c->T1, c->d));
}

static void check_interact(int T1) {
    enum { B = 3, D = 5, MAXT = 4 };
    int w = int_width(T1, D);
    float F[B * MAXT * D], R[B * 16], out[B * 16], out2[B * 16], dF[B * MAXT * D];
    double Fd[B * MAXT * D], Rd[B * 16], outd[B * 16], g[B * MAXT * D];
    size_t nf = (size_t)B * T1 * D, no = (size_t)B * w;
    rng_seed(44 + (uint64_t)T1);
    fill_uniform(F, nf, -1, 1);
    fill_uniform(R, no, -1, 1);
    to_double(F, Fd, nf);
    to_double(R, Rd, no);
    int_ctx c = {B, T1, D, Fd, Rd};

    np_interact_fwd(F, B, T1, D, out);
    int_fwd_d(&c, outd);
    check_kernel("interact out", out, outd, no);
    np_interact_fwd(F, B, T1, D, out2);
    assert_memory_equal(out, out2, no * sizeof *out);

    fd_grad(int_loss, &c, Fd, nf, g);
    for (size_t i = 0; i < nf; i++)
        dF[i] = 1e6f; /* overwritten, not accumulated */
    np_interact_bwd(F, R, B, T1, D, dF);
    check_kernel("interact dF", dF, g, nf);
}

static void test_interact_t1(void **state) {
    (void)state;
    check_interact(1);
}
static void test_interact_t2(void **state) {
    (void)state;
    check_interact(2);
}
static void test_interact_t4(void **state) {
    (void)state;
    check_interact(4);
}

/* Exact layout on a tiny case: B = 2, T1 = 3, d = 2, small integers. */
static void test_interact_layout(void **state) {
    (void)state;
    const float F[2 * 3 * 2] = {1, 2, 3, 4, 5, 6, /* sample 0: F0, F1, F2 */
                                0, 1, 1, 0, 2, -1};
    /* [F0 | F1.F0, F2.F0, F2.F1] */
    const float want[2 * 5] = {1, 2, 3 + 8, 5 + 12, 15 + 24, /* */
                               0, 1, 0,     -1,     2};
    float out[10], dF[12];
    np_interact_fwd(F, 2, 3, 2, out);
    assert_memory_equal(out, want, sizeof out);

    /* dout picks one output at a time in sample 0: dF follows by hand. */
    const float dout[10] = {10, 20, 1, 0, 0,                 /* F0 direct + pair (1,0) */
                            0,  0,  0, 0, 1};                /* sample 1: pair (2,1) only */
    const float dF_want[12] = {10 + 3, 20 + 4, 1, 2,  0, 0,  /* dF0 = d + F1, dF1 = F0 */
                               0,      0,      2, -1, 1, 0}; /* dF1 = F2, dF2 = F1 */
    np_interact_bwd(F, dout, 2, 3, 2, dF);
    assert_memory_equal(dF, dF_want, sizeof dF);
}

/* ---- sigmoid + BCE */

static double bce_d(double z, double y) { /* naive form, fine for |z| <= 30 */
    double p = 1.0 / (1.0 + exp(-z));
    return -(y * log(p) + (1.0 - y) * log(1.0 - p));
}

typedef struct bce_ctx {
    long B;
    double *z, *y;
    double scale;
} bce_ctx;

static double bce_loss(void *ctx) {
    bce_ctx *c = ctx;
    double L = 0.0;
    for (long s = 0; s < c->B; s++)
        L += bce_d(c->z[s], c->y[s]);
    return L * c->scale;
}

static void test_bce(void **state) {
    (void)state;
    enum { B = 9 };
    rng_seed(55);
    float z[B], y[B], p[B], dz[B];
    const float scale = 0.37f;
    fill_uniform(z, B, -6, 6);
    for (int s = 0; s < B; s++)
        y[s] = (float)(s % 3) * 0.5f; /* 0, 0.5 (soft), 1 */

    double zd[B], yd[B], g[B], pd[B], Lref = 0.0;
    to_double(z, zd, B);
    to_double(y, yd, B);
    for (int s = 0; s < B; s++) {
        pd[s] = 1.0 / (1.0 + exp(-zd[s]));
        Lref += bce_d(zd[s], yd[s]);
    }
    double L = np_sigmoid_bce_fwd(z, y, p, B);
    assert_true(fabs(L - Lref) <= LOSS_RTOL * fabs(Lref));
    check_kernel("sigmoid p", p, pd, B);
    assert_true(np_sigmoid_bce_fwd(z, y, NULL, B) == L); /* p optional, same loss */

    bce_ctx c = {B, zd, yd, scale};
    fd_grad(bce_loss, &c, zd, B, g);
    np_sigmoid_bce_bwd(z, y, scale, dz, B);
    check_kernel("bce dz", dz, g, B);
}

/* |z| = 100: exp(100) overflows nothing in double but the naive log(1 - p) is log(0). */
static void test_bce_large(void **state) {
    (void)state;
    const float z[4] = {100, 100, -100, -100};
    const float y[4] = {1, 0, 1, 0};
    const double tiny = 3.720075976020836e-44; /* log1p(exp(-100)) = exp(-100) to 1e-44 */
    float p[4], dz[4];
    /* Right answers: 0 + tiny, 100 + tiny, 100 + tiny, 0 + tiny. */
    double L1 = np_sigmoid_bce_fwd(z, y, p, 1);
    assert_true(isfinite(L1) && fabs(L1 - tiny) <= LOSS_RTOL * tiny);
    double L = np_sigmoid_bce_fwd(z, y, p, 4);
    assert_true(isfinite(L) && L == 200.0);
    assert_true(p[0] == 1.0f && p[1] == 1.0f);
    assert_true(p[2] >= 0.0f && p[2] < 1e-40f && p[3] == p[2]);
    assert_true(np_sigmoid_bce_fwd(z + 1, y + 1, NULL, 1) == 100.0);

    /* z = 0, y = 1: log 2. */
    const float z0 = 0.0f, y1 = 1.0f;
    assert_true(fabs(np_sigmoid_bce_fwd(&z0, &y1, NULL, 1) - 0.6931471805599453) <=
                LOSS_RTOL * 0.7);

    /* Gradient (p - y) * scale: 0, scale, -scale, 0 (to float rounding). */
    const float scale = 0.25f;
    np_sigmoid_bce_bwd(z, y, scale, dz, 4);
    assert_true(dz[0] == 0.0f && dz[1] == scale && dz[2] == -scale);
    assert_true(dz[3] >= 0.0f && dz[3] < 1e-40f);
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
        cmocka_unit_test(test_linear),       cmocka_unit_test(test_linear_hand),
        cmocka_unit_test(test_relu),         cmocka_unit_test(test_embbag),
        cmocka_unit_test(test_interact_t1),  cmocka_unit_test(test_interact_t2),
        cmocka_unit_test(test_interact_t4),  cmocka_unit_test(test_interact_layout),
        cmocka_unit_test(test_bce),          cmocka_unit_test(test_bce_large),
        cmocka_unit_test(test_sgd),          cmocka_unit_test(test_rowwise_adagrad),
        cmocka_unit_test(test_rows),         cmocka_unit_test(test_dedup_hand),
        cmocka_unit_test(test_dedup_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
