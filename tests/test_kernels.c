/* Tests of the dense CPU kernels (codelets/kernels/kernels.h: linear, ReLU, interaction, sigmoid +
 * BCE) against naive double code and finite-difference gradients; sparse ones: test_kernels_sparse.
 * */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <string.h>

#include "codelets/kernels/gemm.h"
#include "codelets/kernels/kernels.h"
#include "codelets/layers/layers.h"
#include "kernelutil.h"

/* The BCE loss is summed in double from the float logits by the kernel itself, so it must
 * match the naive double formula to double rounding (log1p/exp ulps times B terms). */
#define LOSS_RTOL 1e-12

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

    np_linear_fwd(x, W, b, y, B, IN, OUT, 0);
    lin_fwd_d(&c);
    check_kernel("linear y", y, yd, B * OUT);
    np_linear_fwd(x, W, b, y2, B, IN, OUT, 0);
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
    np_linear_bwd(x, W, R, dx, dW, db, B, IN, OUT, 0);
    check_kernel("linear dx", dx, gx, B * IN);
    check_kernel("linear dW", dW, gW, OUT * IN);
    check_kernel("linear db", db, gb, OUT);

    /* dx == NULL (first layer): the parameter gradients are unchanged, bit for bit. */
    np_linear_bwd(x, W, R, NULL, dW2, db2, B, IN, OUT, 0);
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
    np_linear_fwd(x, W, b, y, 2, 3, 2, 0);
    assert_memory_equal(y, y_want, sizeof y);
    np_linear_bwd(x, W, dy, dx, dW, db, 2, 3, 2, 0);
    assert_memory_equal(dx, dx_want, sizeof dx);
    assert_memory_equal(dW, dW_want, sizeof dW);
    assert_memory_equal(db, db_want, sizeof db);

    /* An empty chunk (B = 0) still overwrites dW and db, with zeros. */
    const float zeros[6] = {0};
    np_linear_bwd(x, W, dy, NULL, dW, db, 0, 3, 2, 0);
    assert_memory_equal(dW, zeros, sizeof dW);
    assert_memory_equal(db, zeros, sizeof db);
}

/* Every product path of np_gemm (dnnl_sgemm for N <= 2, matmul above; K = 0; the ReLU
 * fused or not; transposed operands) against a double-precision product, and the fused
 * ReLU against the separate kernel: the same values (a fused ReLU may give -0 for +0). */
static void test_gemm_paths(void **state) {
    (void)state;
    const long shapes[][3] = {{7, 1, 5}, {33, 2, 40}, {5, 3, 17}, {64, 16, 64}, {130, 300, 37},
                              {9, 4, 0}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        long M = shapes[t][0], N = shapes[t][1], K = shapes[t][2];
        for (unsigned flags = 0; flags < 8; flags++) {
            size_t na = (size_t)(M * K + 1), nb = (size_t)(K * N + 1), nc = (size_t)(M * N);
            float *A = malloc(na * sizeof *A), *Bm = malloc(nb * sizeof *Bm);
            float *bias = malloc((size_t)N * sizeof *bias), *C = malloc(nc * sizeof *C);
            float *C2 = malloc(nc * sizeof *C2);
            assert_non_null(A && Bm && bias && C && C2);
            for (size_t i = 0; i < na; i++)
                A[i] = (float)((int)(i * 37 % 101) - 50) / 16.0f;
            for (size_t i = 0; i < nb; i++)
                Bm[i] = (float)((int)(i * 53 % 89) - 44) / 32.0f;
            for (long j = 0; j < N; j++)
                bias[j] = (float)(j % 7) - 3.0f;
            long lda = flags & NP_GEMM_TA ? M : K, ldb = flags & NP_GEMM_TB ? K : N;
            const float *bp = flags & 4 ? bias : NULL;
            unsigned f = (flags & 3) | (flags & 4 ? NP_GEMM_RELU : 0u);
            np_gemm(f, M, N, K, A, lda, Bm, ldb, bp, C, N);
            for (long m = 0; m < M; m++)
                for (long n = 0; n < N; n++) {
                    double acc = 0;
                    for (long k = 0; k < K; k++) {
                        double a = flags & NP_GEMM_TA ? A[k * lda + m] : A[m * lda + k];
                        double b = flags & NP_GEMM_TB ? Bm[n * ldb + k] : Bm[k * ldb + n];
                        acc += a * b;
                    }
                    if (bp) acc += bp[n];
                    if ((f & NP_GEMM_RELU) && acc < 0) acc = 0;
                    assert_true(fabs(C[m * N + n] - acc) <= 1e-4 * (1 + fabs(acc)));
                }
            if (f & NP_GEMM_RELU) { /* fused == product, then the ReLU kernel */
                np_gemm(f & ~(unsigned)NP_GEMM_RELU, M, N, K, A, lda, Bm, ldb, bp, C2, N);
                np_relu_fwd(C2, C2, nc);
                for (size_t i = 0; i < nc; i++)
                    assert_true(C[i] == C2[i]);
            }
            free(A), free(Bm), free(bias), free(C), free(C2);
        }
    }
}

/* A product runs on one OpenMP thread and leaves the caller's thread count as it was. */
static void test_gemm_keeps_omp_threads(void **state) {
    (void)state;
    float A[6] = {1, 2, 3, 4, 5, 6}, B[12] = {1, 0, 0, 1, 1, 1, 0, 0, 2, 2, 2, 2}, C[8];
    omp_set_num_threads(3);
    np_gemm(0, 2, 4, 3, A, 3, B, 4, NULL, C, 4);
    assert_int_equal(omp_get_max_threads(), 3);
    const float want[8] = {1 + 2 + 6, 0 + 2 + 6, 0 + 0 + 6, 1 + 0 + 6, 4 + 5 + 12, 5 + 12, 12, 4 + 12};
    assert_memory_equal(C, want, sizeof C);
    omp_set_num_threads(1);
}

/* bf16 rounding by hand: to nearest, ties to even, NaN stays NaN, infinities stay. */
static void test_bf16_round(void **state) {
    (void)state;
    const uint32_t in[] = {0x3F800000u, 0x3F808000u, 0x3F818000u, 0x3F80C000u, 0x3F807FFFu,
                           0x7F800000u, 0xFF800000u, 0x7FC00001u, 0x7F800001u, 0x80000000u,
                           0x7F7FFFFFu};
    const uint16_t want[] = {0x3F80, 0x3F80 /* tie: even */, 0x3F82 /* tie: even */, 0x3F81,
                             0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x7FC0, 0x8000,
                             0x7F80 /* FLT_MAX rounds up to inf */};
    float x[11];
    uint16_t y[11];
    memcpy(x, in, sizeof x);
    np_to_bf16(x, y, 11);
    assert_memory_equal(y, want, sizeof y);
}

/* A bf16 product is the fp32 sum of the bf16-rounded inputs' exact products: checked
 * against double sums of the rounded inputs, narrow outputs and transposes included. */
static void test_gemm_bf16(void **state) {
    (void)state;
    const char *isa;
    if (!np_gemm_bf16_supported(&isa)) {
        print_message("skipped: no avx512_bf16 (oneDNN runs %s)\n", isa);
        return;
    }
    const long shapes[][3] = {{7, 1, 5}, {33, 2, 40}, {64, 16, 64}, {130, 300, 37}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        long M = shapes[t][0], N = shapes[t][1], K = shapes[t][2];
        for (unsigned tr = 0; tr < 4; tr++) {
            size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);
            float *A = malloc(na * sizeof *A), *Bm = malloc(nb * sizeof *Bm);
            float *C = malloc(nc * sizeof *C);
            uint16_t *Ah = malloc(na * sizeof *Ah), *Bh = malloc(nb * sizeof *Bh);
            assert_non_null(A && Bm && C && Ah && Bh);
            for (size_t i = 0; i < na; i++)
                A[i] = (float)sin(0.37 * (double)i) * 1.7f;
            for (size_t i = 0; i < nb; i++)
                Bm[i] = (float)cos(0.53 * (double)i) * 0.9f;
            np_to_bf16(A, Ah, na);
            np_to_bf16(Bm, Bh, nb);
            long lda = tr & NP_GEMM_TA ? M : K, ldb = tr & NP_GEMM_TB ? K : N;
            np_gemm(tr | NP_GEMM_BF16, M, N, K, A, lda, Bm, ldb, NULL, C, N);
            double worst = 0;
            for (long m = 0; m < M; m++)
                for (long n = 0; n < N; n++) {
                    double acc = 0, mag = 0;
                    for (long k = 0; k < K; k++) {
                        uint32_t ua = (uint32_t)(tr & NP_GEMM_TA ? Ah[k * lda + m] : Ah[m * lda + k]) << 16;
                        uint32_t ub = (uint32_t)(tr & NP_GEMM_TB ? Bh[n * ldb + k] : Bh[k * ldb + n]) << 16;
                        float fa, fb;
                        memcpy(&fa, &ua, 4);
                        memcpy(&fb, &ub, 4);
                        acc += (double)fa * fb;
                        mag += fabs((double)fa * fb);
                    }
                    /* fp32 accumulation: at most K roundings of the running sum */
                    double e = fabs(C[m * N + n] - acc) / (mag * (double)K * 6e-8 + 1e-30);
                    if (e > worst) worst = e;
                }
            assert_true(worst <= 1.0);
            free(A), free(Bm), free(C), free(Ah), free(Bh);
        }
    }
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

    /* Fused with the bias gradient: the mask's bits, and the column sums np_linear_bwd forms
     * (0 + v_0 + v_1 + ... sample by sample), over 5 samples of 8. */
    enum { B = 5, OUT = N / B };
    float db[OUT], want[OUT] = {0};
    memcpy(buf, R, sizeof buf);
    np_relu_bwd_colsum(y, buf, B, OUT, db);
    assert_memory_equal(buf, dx, sizeof dx);
    for (int s = 0; s < B; s++)
        for (int j = 0; j < OUT; j++)
            want[j] += dx[s * OUT + j];
    assert_memory_equal(db, want, sizeof db);
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

/* The blocked (16 samples a block) interaction kernels give the per-sample kernels'
 * bits exactly: every shape, a partial last block, and the vector width this process runs
 * (the widest the CPU has, or NP_LANES's: tests/CMakeLists.txt runs each). */
static void test_interact_blocked_bits(void **state) {
    (void)state;
    const int shapes[][3] = {{37, 27, 16}, {16, 2, 3}, {5, 4, 7}, {33, 9, 1}}; /* B, T1, d */
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        int B = shapes[c][0], T1 = shapes[c][1], d = shapes[c][2];
        size_t fsz = (size_t)T1 * d, W = (size_t)d + (size_t)T1 * (T1 - 1) / 2;
        float *F = malloc(B * fsz * 4), *g = malloc(B * W * 4), *o1 = malloc(B * W * 4);
        float *o2 = malloc(B * W * 4), *d1 = malloc(B * fsz * 4), *d2 = malloc(B * fsz * 4);
        float *ws = malloc(np_interact_ws_floats(T1, d) * 4);
        fill_uniform(F, B * fsz, -1, 1);
        fill_uniform(g, B * W, -1, 1);
        np_interact_fwd(F, B, T1, d, o1);
        np_interact_fwd_blk(F, B, T1, d, o2, ws);
        assert_memory_equal(o1, o2, B * W * 4);
        np_interact_bwd(F, g, B, T1, d, d1);
        np_interact_bwd_blk(F, g, B, T1, d, d2, ws);
        assert_memory_equal(d1, d2, B * fsz * 4);
        free(F), free(g), free(o1), free(o2), free(d1), free(d2), free(ws);
    }
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_linear_hand),
        cmocka_unit_test(test_gemm_paths),
        cmocka_unit_test(test_bf16_round),
        cmocka_unit_test(test_gemm_keeps_omp_threads),
        cmocka_unit_test(test_gemm_bf16),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_interact_t1),
        cmocka_unit_test(test_interact_t2),
        cmocka_unit_test(test_interact_t4),
        cmocka_unit_test(test_interact_layout),
        cmocka_unit_test(test_interact_blocked_bits),
        cmocka_unit_test(test_bce),
        cmocka_unit_test(test_bce_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
