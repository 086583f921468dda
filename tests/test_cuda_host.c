/* The CUDA kernels' own code run on the host, in both build flavours: every per-element
 * function of codelets/cuda/elem.h over whole arrays, with loops that give each flat index what the
 * kernels' grid-stride loops give a thread, against the CPU twins (bit for bit where the
 * order of operations is the CPU's); and the GEMM layers' step sequences of codelets/cuda/plan.h
 * with a column-major reference sgemm that follows cuBLAS's argument rules, against
 * np_linear_fwd/bwd and the linear and cross layers (to GEMM_ATOL/RTOL). What only a GPU
 * can check (launches, streams, cuBLAS itself, device math) is test_cuda_kernels. */
#include "cudautil.h"

#include "codelets/kernels/kernels.h"
#include "codelets/layers/layers.h"
#include "codelets/cuda/elem.h"
#include "codelets/cuda/plan.h"

/* ---- the host backend of np_gpu_ops */

static int gemm_invalid; /* calls cuBLAS would refuse (CUBLAS_STATUS_INVALID_VALUE) */

static long lmax1(long a) {
    return a > 1 ? a : 1;
}

/* cublasSgemm's column-major C (m, n) = op(A) op(B) with alpha 1, beta 0, products summed
 * in double (a reference, not the GPU's order); its argument checks. */
static void ref_sgemm(int ta, int tb, long m, long n, long k, const float *A, long lda,
                      const float *B, long ldb, float *C, long ldc) {
    if (m < 0 || n < 0 || k < 0 || lda < lmax1(ta ? k : m) || ldb < lmax1(tb ? n : k) ||
        ldc < lmax1(m)) {
        gemm_invalid++;
        return;
    }
    for (long j = 0; j < n; j++)
        for (long i = 0; i < m; i++) {
            double acc = 0.0;
            for (long l = 0; l < k; l++) {
                double a = ta ? A[l + i * lda] : A[i + l * lda];
                double b = tb ? B[j + l * ldb] : B[l + j * ldb];
                acc += a * b;
            }
            C[i + j * ldc] = (float)acc;
        }
}

static void h_gemm(void *ctx, const np_gemm_plan *p, const float *left, const float *right,
                   float *C) {
    (void)ctx;
    const float *A, *B;
    np_gemm_plan_ptrs(p, left, right, &A, &B);
    ref_sgemm(p->transa, p->transb, p->m, p->n, p->k, A, p->lda, B, p->ldb, C, p->ldc);
}
static void h_bias_act(void *ctx, float *y, const float *b, long B, int out, int relu) {
    (void)ctx;
    for (size_t e = 0; e < (size_t)B * (size_t)out; e++)
        y[e] = np_elem_bias_act(y[e], b[e % (size_t)out], relu);
}
static void h_relu_mask(void *ctx, const float *y, float *d, size_t n) {
    (void)ctx;
    for (size_t e = 0; e < n; e++)
        d[e] = np_elem_relu_mask(y[e], d[e]);
}
static void h_colsum(void *ctx, const float *dy, float *db, long B, int out) {
    (void)ctx;
    for (size_t j = 0; j < (size_t)out; j++)
        db[j] = np_elem_colsum(dy, B, out, j);
}
static void h_zero(void *ctx, float *p, size_t n) {
    (void)ctx;
    memset(p, 0, n * sizeof *p);
}
static void h_mul(void *ctx, const float *a, const float *b, float *o, size_t n) {
    (void)ctx;
    for (size_t e = 0; e < n; e++)
        o[e] = np_fmul(a[e], b[e]);
}
static void h_mul_add(void *ctx, const float *a, const float *b, const float *c, float *o,
                      size_t n) {
    (void)ctx;
    for (size_t e = 0; e < n; e++)
        o[e] = np_fadd(np_fmul(a[e], b[e]), c[e]);
}
static void h_add_to(void *ctx, float *o, const float *a, size_t n) {
    (void)ctx;
    for (size_t e = 0; e < n; e++)
        o[e] = np_fadd(o[e], a[e]);
}

static const np_gpu_ops host_ops = {NULL,   h_gemm, h_bias_act, h_relu_mask, h_colsum,
                                    h_zero, h_mul,  h_mul_add,  h_add_to};

static const np_layer_hp hp0; /* all zero */

/* ---- pooling: exact */

static void test_pool(void **state) {
    (void)state;
    cu_pool p;
    cu_pool_make(&p, 3, 5, 12, 7, 42);
    const long chunks[][2] = {{0, 5}, {5, 7}}; /* (row0, n): the window's two chunks */
    size_t gsz = (size_t)p.U * (size_t)p.d;
    float *g0 = cu_garbage(gsz), *g1 = cu_garbage(gsz);
    /* pass 1: some keys at -1, as the pooled exchange leaves a bag's later keys at an
     * owner (docs/pipeline.md "Rows or pooled sums"): both sides skip them */
    /* passes 2 and 3: table 0 a sequence of 3 slots (bags of up to 4 keys: the 4th is not
     * read), the -1s kept */
    for (int pass = 0; pass < 4; pass++)
    for (int c = 0; c < 2; c++) {
        p.L = pass >= 2 ? 3 : 0;
        if (pass == 1 && c == 0)
            for (uint32_t k = 0; k < p.nnz; k++)
                if (k % 3 == 1) p.pos[k] = -1;
        long row0 = chunks[c][0], n = chunks[c][1];
        size_t m = (size_t)n * cu_pool_slots(&p) * (size_t)p.d;
        float *P0 = cu_garbage(m), *P1 = cu_garbage(m);
        cu_pool_fwd_cpu(&p, row0, n, P0);
        for (size_t e = 0; e < m; e++) /* k_pool_fwd */
            np_elem_pool_fwd(p.rows, p.off, p.pos, p.nb, row0, p.T, p.L, p.d, P1, e);
        cu_same("pool_fwd P", P1, P0, m);

        /* backward of P as dP into the window's grads, zeroed by the first chunk */
        if (c == 0) memset(g0, 0, gsz * sizeof *g0);
        cu_pool_bwd_cpu(&p, P0, row0, n, g0);
        if (c == 0)
            for (size_t e = 0; e < gsz; e++) /* k_zero_counted */
                g1[e] = 0.0f;
        for (size_t e = 0; e < (size_t)p.T * (size_t)p.d; e++) /* k_pool_bwd */
            np_elem_pool_bwd(P0, p.off, p.pos, p.nb, row0, n, p.T, p.L, p.d, g1, e);
        cu_same("pool_bwd g", g1, g0, gsz);
        free(P0);
        free(P1);
    }
    free(g0);
    free(g1);
    cu_pool_free(&p);
}

/* ---- BCE, sum, SGD: exact (the host's libm on both sides) */

static void test_bce(void **state) {
    (void)state;
    enum { N = 257 };
    float z[N], y[N], dz0[N], dz1[N];
    cu_bce_data(z, y, N, 7);
    z[0] = 0.0f;
    z[1] = -0.0f;
    z[2] = 88.0f;
    z[3] = -104.0f;
    double sum = 0.0; /* k_bce_fwd: one thread, sample order */
    for (int s = 0; s < N; s++)
        sum = np_dadd(sum, np_elem_bce(z[s], y[s]));
    double ref = np_sigmoid_bce_fwd(z, y, NULL, N);
    assert_memory_equal(&sum, &ref, sizeof sum);
    np_sigmoid_bce_bwd(z, y, 1.0f / 3000.0f, dz0, N);
    for (int s = 0; s < N; s++) /* k_bce_bwd */
        dz1[s] = np_elem_bce_grad(z[s], y[s], 1.0f / 3000.0f);
    cu_same("bce dz", dz1, dz0, N);
}

static void test_sum(void **state) {
    (void)state;
    enum { K = 5, C = 333 };
    uint64_t seed = 9;
    np_sum_in in;
    memset(&in, 0, sizeof in);
    float *buf[K];
    for (int i = 0; i < K; i++)
        in.p[i] = buf[i] = cu_rand(C, &seed);
    float o0[C], o1[C];
    for (int k = 1; k <= K; k++) {
        np_sum_ordered(in.p, k, C, o0);
        for (size_t e = 0; e < C; e++) /* k_sum */
            o1[e] = np_elem_sum(&in, k, e);
        cu_same("sum", o1, o0, C);
    }
    for (int i = 0; i < K; i++)
        free(buf[i]);
}

static void test_sgd(void **state) {
    (void)state;
    enum { N = 100 };
    uint64_t seed = 3;
    float *w0 = cu_rand(N, &seed), *g = cu_rand(N, &seed), w1[N];
    memcpy(w1, w0, sizeof w1);
    for (int round = 0; round < 3; round++) {
        if (round == 1) g[17] = INFINITY; /* the update leaves an inf */
        if (round == 2) g[40] = NAN;
        np_sgd_dense(w0, g, N, 0.05f);
        int bad0 = !np_all_finite(w0, N), bad1 = 0;
        for (size_t e = 0; e < N; e++) /* k_sgd */
            bad1 |= np_elem_sgd(w1, g, 0.05f, e);
        assert_int_equal(bad1, bad0);
        assert_int_equal(bad1, round > 0);
        for (int i = 0; i < N; i++) /* NaN != NaN: compare bits */
            assert_memory_equal(&w1[i], &w0[i], sizeof(float));
    }
    free(w0);
    free(g);
}

/* ---- dot and concat: exact against the layers' CPU kernels */

static np_parts rig_parts(cu_rig *r, int b, int bwd) {
    np_parts P;
    memset(&P, 0, sizeof P);
    P.n = r->s.n_in;
    for (int k = 0; k < P.n; k++) {
        P.base[k] = r->in[k];
        P.dbase[k] = bwd ? r->din[b][k] : NULL;
        P.w[k] = r->s.in[k];
        P.c0[k + 1] = P.c0[k] + P.w[k];
    }
    return P;
}

static void emu_dot(cu_rig *r, int bwd) {
    np_parts P = rig_parts(r, 1, bwd);
    int d = r->s.in[0], T1 = (int)(P.c0[P.n] / d);
    if (!bwd)
        for (size_t e = 0; e < (size_t)r->n * (size_t)r->s.out; e++) /* k_dot_fwd */
            np_elem_dot_fwd(&P, T1, d, r->out[1], e);
    else
        for (size_t e = 0; e < (size_t)r->n * (size_t)P.c0[P.n]; e++) /* k_dot_bwd */
            np_elem_dot_bwd(&P, r->dout[1], T1, d, e);
}

static void emu_concat(cu_rig *r, int bwd) {
    np_parts P = rig_parts(r, 1, bwd);
    for (size_t e = 0; e < (size_t)r->n * (size_t)P.c0[P.n]; e++)
        if (bwd)
            np_elem_concat_bwd(&P, r->dout[1], e);
        else
            np_elem_concat_fwd(&P, r->out[1], e);
}

typedef void (*emu_fn)(cu_rig *r, int bwd);

/* fwd and bwd of both sets, each compared after its pass */
static void run_rig(cu_rig *r, emu_fn emu, double atol, double rtol) {
    np_layer_io io0 = cu_rig_io(r, 0);
    r->def->fwd(&io0);
    emu(r, 0);
    cu_rig_check(r, 0, atol, rtol);
    cu_rig_dout(r);
    r->def->bwd(&io0);
    emu(r, 1);
    cu_rig_check(r, 1, atol, rtol);
}

static void test_dot(void **state) {
    (void)state;
    const long ns[] = {5, 37}; /* the CPU's per-sample and blocked (>= 16 rows) paths */
    const int w3[] = {4, 8, 4}, w1[] = {6};
    for (size_t i = 0; i < 2; i++) {
        cu_rig r;
        cu_rig_make(&r, "dot", hp0, 3, w3, ns[i], 0x5u /* input 1's unwanted */, 0, 100 + i);
        run_rig(&r, emu_dot, 0.0, 0.0);
        cu_rig_free(&r);
        cu_rig_make(&r, "dot", hp0, 1, w1, ns[i], 0x1u, 0, 200 + i);
        run_rig(&r, emu_dot, 0.0, 0.0);
        cu_rig_free(&r);
    }
    /* the pair decoding the kernels use, over many triangles */
    long p = 0;
    for (int i = 1; i < 300; i++)
        for (int j = 0; j < i; j++, p++) {
            int a, b;
            np_dot_pair(p, &a, &b);
            if (a != i || b != j) fail_msg("pair %ld: got (%d, %d), want (%d, %d)", p, a, b, i, j);
            assert_int_equal(np_dot_pair_index(i, j), p);
        }
}

static void test_concat(void **state) {
    (void)state;
    const int w[] = {3, 1, 5};
    cu_rig r;
    cu_rig_make(&r, "concat", hp0, 3, w, 9, 0x6u, 0, 5);
    run_rig(&r, emu_concat, 0.0, 0.0);
    cu_rig_free(&r);
}

/* ---- linear and cross: the step sequences of codelets/cuda/plan.h */

static void emu_linear(cu_rig *r, int bwd) {
    np_layer_io io = cu_rig_io(r, 1);
    gemm_invalid = 0;
    if (bwd)
        np_seq_linear_layer_bwd(&host_ops, &io);
    else
        np_seq_linear_layer_fwd(&host_ops, &io);
    assert_int_equal(gemm_invalid, 0);
}
static void emu_cross(cu_rig *r, int bwd) {
    np_layer_io io = cu_rig_io(r, 1);
    gemm_invalid = 0;
    if (bwd)
        np_seq_cross_bwd(&host_ops, &io);
    else
        np_seq_cross_fwd(&host_ops, &io);
    assert_int_equal(gemm_invalid, 0);
}

static void test_linear(void **state) {
    (void)state;
    /* (n, in, out, relu, dx wanted): narrow and wide outputs (the CPU's sgemm and matmul
     * paths), ReLU, the first layer (no dx), and an empty chunk (zeros in dW and db) */
    const int cases[][5] = {
        {7, 5, 3, 0, 1}, {33, 16, 1, 1, 1}, {20, 13, 24, 1, 0}, {1, 9, 2, 0, 1}, {0, 4, 6, 1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cu_rig r;
        np_layer_hp hp = hp0;
        hp.i[0] = cases[c][2];
        hp.i[1] = cases[c][3];
        cu_rig_make(&r, "linear", hp, 1, &cases[c][1], cases[c][0], (unsigned)cases[c][4], 0,
                    300 + c);
        run_rig(&r, emu_linear, GEMM_ATOL, GEMM_RTOL);
        cu_rig_free(&r);
    }
}

static void test_linear_kernels(void **state) {
    (void)state;
    /* np_linear_fwd / np_linear_bwd themselves (no ReLU, no layer) */
    enum { B = 11, IN = 9, OUT = 6 };
    uint64_t seed = 77;
    /* padded: a mutated plan below reads past the matrices, as a wrong one would */
    float *x = cu_rand(B * IN + 256, &seed), *W = cu_rand(OUT * IN + 256, &seed);
    float *b = cu_rand(OUT, &seed), *dy = cu_rand(B * OUT + 256, &seed);
    float y0[B * OUT], y1[B * OUT], dx0[B * IN], dx1[B * IN], dW0[OUT * IN], dW1[OUT * IN];
    float db0[OUT], db1[OUT];
    np_linear_fwd(x, W, b, y0, B, IN, OUT, 0);
    gemm_invalid = 0;
    np_seq_linear_fwd(&host_ops, x, W, b, y1, B, IN, OUT, 0);
    cu_close("np_linear_fwd y", y1, y0, B * OUT, GEMM_ATOL, GEMM_RTOL);
    np_linear_bwd(x, W, dy, dx0, dW0, db0, B, IN, OUT, 0);
    np_seq_linear_bwd(&host_ops, x, W, dy, dx1, dW1, db1, B, IN, OUT);
    assert_int_equal(gemm_invalid, 0);
    cu_close("np_linear_bwd dx", dx1, dx0, B * IN, GEMM_ATOL, GEMM_RTOL);
    cu_close("np_linear_bwd dW", dW1, dW0, OUT * IN, GEMM_ATOL, GEMM_RTOL);
    cu_same("np_linear_bwd db", db1, db0, OUT); /* the same column sums, same order */

    /* This check can fail: every single wrong flag, operand or dimension in a plan errs
     * far beyond the tolerance (or is refused as cuBLAS would). */
    const np_gemm_plan good[3] = {np_plan_linear_y(B, IN, OUT), np_plan_linear_dx(B, IN, OUT),
                                  np_plan_linear_dW(B, IN, OUT)};
    const float *lefts[3] = {x, dy, dy}, *rights[3] = {W, W, x}, *refs[3] = {y0, dx0, dW0};
    const size_t sizes[3] = {B * OUT, B * IN, OUT * IN};
    for (int q = 0; q < 3; q++)
        for (int mut = 0; mut < 4; mut++) {
            np_gemm_plan p = good[q];
            if (mut == 0) p.transa ^= 1;
            if (mut == 1) p.transb ^= 1;
            if (mut == 2) p.a_src ^= 1, p.b_src ^= 1;
            if (mut == 3) p.lda += 1;
            float *C = cu_garbage(sizes[q]);
            gemm_invalid = 0;
            h_gemm(NULL, &p, lefts[q], rights[q], C);
            if (q == 0) h_bias_act(NULL, C, b, B, OUT, 0);
            int caught = gemm_invalid > 0;
            if (!caught) {
                fprintf(stderr, "(plan %d, mutation %d: mismatches expected below)\n", q, mut);
                caught = cu_bad("mutated plan", C, refs[q], sizes[q], GEMM_ATOL, GEMM_RTOL) > 0;
            }
            if (!caught) fail_msg("plan %d with mutation %d went unnoticed", q, mut);
            free(C);
        }
    free(x);
    free(W);
    free(b);
    free(dy);
}

static void test_cross(void **state) {
    (void)state;
    /* (n, D, rank, first layer: x_l is x0, din mask) */
    const int cases[][5] = {{9, 8, 0, 0, 3}, {21, 12, 0, 1, 3}, {9, 10, 3, 0, 3}, {17, 16, 5, 1, 2},
                            {6, 7, 2, 0, 0}, {0, 6, 2, 0, 3},   {0, 5, 0, 0, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int w[2] = {cases[c][1], cases[c][1]};
        np_layer_hp hp = hp0;
        hp.i[0] = cases[c][2];
        cu_rig r;
        cu_rig_make(&r, "cross", hp, 2, w, cases[c][0], (unsigned)cases[c][4], cases[c][3],
                    400 + c);
        run_rig(&r, emu_cross, GEMM_ATOL, GEMM_RTOL);
        cu_rig_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),   cmocka_unit_test(test_bce),
        cmocka_unit_test(test_sum),    cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_dot),    cmocka_unit_test(test_concat),
        cmocka_unit_test(test_linear), cmocka_unit_test(test_linear_kernels),
        cmocka_unit_test(test_cross),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
