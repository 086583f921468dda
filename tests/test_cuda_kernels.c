/* The CUDA kernels on a GPU (CUDA flavour only; exits 77, skipped, without one): every
 * launcher of codelets/cuda/cuda.h on a stream and every layer kind's CUDA slot through an
 * np_layer_io of device pointers, against the CPU twins. Exact where the kernels keep the
 * CPU's order (pooling, sum, SGD, dot, concat); GEMM_ATOL/RTOL for cuBLAS layers; the BCE
 * to BCE_* (tests/cudautil.h says why). Outputs start as garbage, so a kernel that skips an
 * element fails. test_cuda_host checks the same code on the host where there is no GPU. */
#include "cudautil.h"

#include <cuda_runtime_api.h>

#include "codelets/kernels/kernels.h"
#include "codelets/layers/layers.h"
#include "codelets/cuda/cuda.h"

static cudaStream_t stream;

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) fail_msg("%s: %s", #call, cudaGetErrorString(e_));                  \
    } while (0)

static void *up(const void *h, size_t bytes) {
    void *d = NULL;
    CK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes && h) CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
static void down(void *h, const void *d, size_t bytes) {
    CK(cudaStreamSynchronize(stream));
    CK(cudaGetLastError());
    if (bytes) CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}
#define FL(n) ((size_t)(n) * sizeof(float))

/* ---- pooling: exact; the window's grads zeroed up to the device-side count only */
static void test_pool(void **state) {
    (void)state;
    cu_pool p;
    cu_pool_make(&p, 4, 16, 300, 50, 42);
    size_t gsz = (size_t)p.U * (size_t)p.d, gcap = gsz + 100;
    float *rows_d = up(p.rows, FL(p.U * p.d));
    uint32_t *off_d = up(p.off, (size_t)p.T * (size_t)(p.nb + 1) * sizeof *p.off);
    int64_t *pos_d = up(p.pos, (size_t)(p.nnz ? p.nnz : 1) * sizeof *p.pos);
    int64_t meta[3] = {-5, p.U, -5}; /* the count sits at meta + 1 */
    int64_t *meta_d = up(meta, sizeof meta);
    float *g0 = cu_garbage(gcap), *g1 = cu_garbage(gcap);
    float *g_d = up(g0, FL(gcap));
    const long chunks[][2] = {{0, 130}, {130, 170}};
    for (int pass = 0; pass < 4; pass++) { /* bags, then table 0 a sequence (3 slots) */
        int c = pass % 2;
        p.L = pass < 2 ? 0 : 3;
        long row0 = chunks[c][0], n = chunks[c][1];
        size_t m = (size_t)n * cu_pool_slots(&p) * (size_t)p.d;
        float *P0 = cu_garbage(m), *P1 = cu_garbage(m);
        float *P_d = up(P1, FL(m));
        cu_pool_fwd_cpu(&p, row0, n, P0);
        np_cuda_pool_fwd_on(stream, rows_d, off_d, pos_d, P_d, p.nb, row0, n, p.T, p.L, p.d);
        down(P1, P_d, FL(m));
        cu_same("pool_fwd P", P1, P0, m);

        if (c == 0) memset(g0, 0, FL(gsz));
        cu_pool_bwd_cpu(&p, P0, row0, n, g0);
        np_cuda_pool_bwd_on(stream, P_d, off_d, pos_d, c == 0 ? meta_d + 1 : NULL, g_d, gcap, p.nb,
                            row0, n, p.T, p.L, p.d);
        down(g1, g_d, FL(gcap));
        cu_same("pool_bwd g (and the untouched tail)", g1, g0, gcap);
        free(P0);
        free(P1);
        cudaFree(P_d);
    }
    free(g0);
    free(g1);
    cudaFree(rows_d);
    cudaFree(off_d);
    cudaFree(pos_d);
    cudaFree(meta_d);
    cudaFree(g_d);
    cu_pool_free(&p);
}

/* ---- BCE */
static void test_bce(void **state) {
    (void)state;
    enum { N = 3000 };
    float *z = malloc(FL(N)), *y = malloc(FL(N)), *dz0 = malloc(FL(N)), *dz1 = cu_garbage(N);
    assert_non_null(z && y && dz0);
    cu_bce_data(z, y, N, 7);
    float *z_d = up(z, FL(N)), *y_d = up(y, FL(N)), *dz_d = up(dz1, FL(N));
    double *loss_d = up(NULL, sizeof(double)), loss;
    for (long n = 0; n <= N; n += N) { /* an empty chunk's loss is 0 */
        np_cuda_bce_fwd_on(stream, z_d, y_d, loss_d, n, 0);
        down(&loss, loss_d, sizeof loss);
        double ref = np_sigmoid_bce_fwd(z, y, NULL, n);
        if (!(fabs(loss - ref) <= BCE_LOSS_RTOL * fabs(ref)))
            fail_msg("bce loss of %ld: got %.17g want %.17g", n, loss, ref);
    }
    np_sigmoid_bce_bwd(z, y, 1.0f / 4096.0f, dz0, N);
    np_cuda_bce_bwd_on(stream, z_d, y_d, 1.0f / 4096.0f, dz_d, N, 0);
    down(dz1, dz_d, FL(N));
    cu_close("bce dz", dz1, dz0, N, BCE_GRAD_ATOL, BCE_GRAD_RTOL);
    /* loss = output: the sum of z in sample order, and dz = scale, exactly */
    np_cuda_bce_fwd_on(stream, z_d, y_d, loss_d, N, 1);
    down(&loss, loss_d, sizeof loss);
    if (loss != np_loss_fwd(1, z, y, NULL, N)) fail_msg("output loss: got %.17g", loss);
    np_cuda_bce_bwd_on(stream, z_d, y_d, 1.0f / 4096.0f, dz_d, N, 1);
    down(dz1, dz_d, FL(N));
    np_loss_bwd(1, z, y, 1.0f / 4096.0f, dz0, N);
    cu_same("output dz", dz1, dz0, N);
    free(z);
    free(y);
    free(dz0);
    free(dz1);
    cudaFree(z_d);
    cudaFree(y_d);
    cudaFree(dz_d);
    cudaFree(loss_d);
}

/* ---- sum: a host count, and a device-side row count * width bounded by the capacity */
static void test_sum(void **state) {
    (void)state;
    enum { K = 4, C = 5000 };
    uint64_t seed = 9;
    const float *in[K], *in_d[K];
    float *bufs[K];
    for (int i = 0; i < K; i++) {
        in[i] = bufs[i] = cu_rand(C, &seed);
        in_d[i] = up(in[i], FL(C));
    }
    float *o0 = cu_garbage(C), *o1 = cu_garbage(C), *o_d = up(o1, FL(C));
    np_sum_ordered(in, K, C, o0);
    np_cuda_sum_on(stream, in_d, K, C, NULL, 0, o_d, C);
    down(o1, o_d, FL(C));
    cu_same("sum", o1, o0, C);

    int64_t rows = 311; /* 311 * 8 = 2488 floats summed, the rest untouched */
    int64_t *rows_d = up(&rows, sizeof rows);
    float *o2 = cu_garbage(C), *o3 = cu_garbage(C);
    CK(cudaMemcpy(o_d, o2, FL(C), cudaMemcpyHostToDevice));
    np_sum_ordered(in, 2, (size_t)rows * 8, o2);
    np_cuda_sum_on(stream, in_d, 2, 0, rows_d, 8, o_d, C);
    down(o3, o_d, FL(C));
    cu_same("sum (device count)", o3, o2, C);
    for (int i = 0; i < K; i++) {
        free(bufs[i]);
        cudaFree((void *)in_d[i]);
    }
    free(o0);
    free(o1);
    free(o2);
    free(o3);
    cudaFree(o_d);
    cudaFree(rows_d);
}

/* ---- dense SGD and its non-finite flag (synchronous) */
static void test_sgd(void **state) {
    (void)state;
    enum { N = 10000 };
    uint64_t seed = 3;
    float *w0 = cu_rand(N, &seed), *g = cu_rand(N, &seed), *w1 = cu_garbage(N);
    float *w_d = up(w0, FL(N)), *g_d = up(g, FL(N));
    for (int round = 0; round < 3; round++) {
        if (round == 1) g[N - 1] = INFINITY;
        if (round == 2) g[123] = NAN;
        CK(cudaMemcpy(g_d, g, FL(N), cudaMemcpyHostToDevice));
        np_sgd_dense(w0, g, N, 0.05f);
        int bad = np_cuda_dense_update_on(stream, w_d, g_d, N, 0.05f);
        assert_int_equal(bad, !np_all_finite(w0, N));
        assert_int_equal(bad, round > 0);
        down(w1, w_d, FL(N));
        assert_memory_equal(w1, w0, FL(N));
    }
    free(w0);
    free(g);
    free(w1);
    cudaFree(w_d);
    cudaFree(g_d);
}

/* ---- layer slots through np_layer_io with device pointers */

typedef struct dev_rig {
    float *in[NP_LAYER_MAX_IN], *param[NP_LAYER_MAX_PARAMS];
    float *out, *saved, *scratch, *dout, *din[NP_LAYER_MAX_IN], *dparam[NP_LAYER_MAX_PARAMS];
} dev_rig;

static np_layer_io dev_io(cu_rig *r, dev_rig *d) {
    np_layer_io io;
    memset(&io, 0, sizeof io);
    io.hp = &r->hp;
    io.shape = &r->s;
    io.n = r->n;
    io.out = d->out;
    io.saved = d->saved;
    io.scratch = d->scratch;
    io.dout = d->dout;
    for (int k = 0; k < r->s.n_in; k++) {
        io.in[k] = d->in[k];
        io.din[k] = d->din[k];
    }
    for (int p = 0; p < r->s.n_params; p++) {
        io.param[p] = d->param[p];
        io.dparam[p] = d->dparam[p];
    }
    return io;
}

/* fwd then bwd of the CPU kernels (set 0) and the CUDA slots (set 1), compared after each */
static void run_dev(cu_rig *r, double atol, double rtol) {
    assert_non_null(r->def->cuda_fwd);
    assert_non_null(r->def->cuda_bwd);
    size_t N = (size_t)r->n;
    dev_rig d;
    memset(&d, 0, sizeof d);
    for (int k = 0; k < r->s.n_in; k++) {
        d.in[k] = k == 1 && r->in[1] == r->in[0] ? d.in[0] : up(r->in[k], FL(N * r->s.in[k]));
        if (r->want_din[k]) d.din[k] = up(r->din[1][k], FL(N * r->s.in[k]));
    }
    for (int p = 0; p < r->s.n_params; p++) {
        d.param[p] = up(r->param[p], FL(cu_pcount(&r->s.param[p])));
        d.dparam[p] = up(r->dparam[1][p], FL(cu_pcount(&r->s.param[p])));
    }
    d.out = up(r->out[1], FL(N * r->s.out));
    d.dout = up(r->dout[1], FL(N * r->s.out));
    if (r->s.saved) d.saved = up(r->saved[1], FL(N * r->s.saved));
    if (r->s.scratch) d.scratch = up(NULL, FL(N * r->s.scratch));
    np_layer_io io0 = cu_rig_io(r, 0), io1 = dev_io(r, &d);

    r->def->fwd(&io0);
    r->def->cuda_fwd(&io1, stream);
    down(r->out[1], d.out, FL(N * r->s.out));
    if (r->s.saved) down(r->saved[1], d.saved, FL(N * r->s.saved));
    cu_rig_check(r, 0, atol, rtol);

    cu_rig_dout(r);
    CK(cudaMemcpy(d.dout, r->dout[1], FL(N * r->s.out), cudaMemcpyHostToDevice));
    r->def->bwd(&io0);
    r->def->cuda_bwd(&io1, stream);
    down(r->dout[1], d.dout, FL(N * r->s.out));
    for (int k = 0; k < r->s.n_in; k++)
        if (d.din[k]) down(r->din[1][k], d.din[k], FL(N * r->s.in[k]));
    for (int p = 0; p < r->s.n_params; p++)
        down(r->dparam[1][p], d.dparam[p], FL(cu_pcount(&r->s.param[p])));
    cu_rig_check(r, 1, atol, rtol);

    for (int k = 0; k < r->s.n_in; k++) {
        if (!(k == 1 && d.in[1] == d.in[0])) cudaFree(d.in[k]);
        cudaFree(d.din[k]);
    }
    for (int p = 0; p < r->s.n_params; p++) {
        cudaFree(d.param[p]);
        cudaFree(d.dparam[p]);
    }
    cudaFree(d.out);
    cudaFree(d.dout);
    cudaFree(d.saved);
    cudaFree(d.scratch);
}

static const np_layer_hp hp0; /* all zero */

static void test_dot(void **state) {
    (void)state;
    const int w3[] = {16, 64, 16}, w1[] = {8};
    const long ns[] = {5, 256};
    for (size_t i = 0; i < 2; i++) {
        cu_rig r;
        cu_rig_make(&r, "dot", hp0, 3, w3, ns[i], 0x5u, 0, 100 + i);
        run_dev(&r, 0.0, 0.0);
        cu_rig_free(&r);
        cu_rig_make(&r, "dot", hp0, 1, w1, ns[i], 0x1u, 0, 200 + i);
        run_dev(&r, 0.0, 0.0);
        cu_rig_free(&r);
    }
}

static void test_concat(void **state) {
    (void)state;
    const int w[] = {13, 1, 64};
    cu_rig r;
    cu_rig_make(&r, "concat", hp0, 3, w, 300, 0x6u, 0, 5);
    run_dev(&r, 0.0, 0.0);
    cu_rig_free(&r);
}

static void test_linear(void **state) {
    (void)state;
    /* (n, in, out, relu, dx wanted) */
    const int cases[][5] = {{7, 5, 3, 0, 1}, {512, 32, 1, 1, 1}, {300, 13, 24, 1, 0},
                            {1, 9, 2, 0, 1}, {0, 4, 6, 1, 1},    {1000, 32, 32, 1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        np_layer_hp hp = hp0;
        hp.i[0] = cases[c][2];
        hp.i[1] = cases[c][3];
        cu_rig r;
        cu_rig_make(&r, "linear", hp, 1, &cases[c][1], cases[c][0], (unsigned)cases[c][4], 0,
                    300 + c);
        /* dW and db sum over the n samples: GEMM_ATOL is for K <= 32 terms, and float
         * error grows about linearly with K, so it scales with n beyond 32 */
        run_dev(&r, GEMM_ATOL * (cases[c][0] > 32 ? cases[c][0] / 32.0 : 1.0), GEMM_RTOL);
        cu_rig_free(&r);
    }
}

static void test_cross(void **state) {
    (void)state;
    /* (n, D, rank, first layer: x_l is x0, din mask) */
    const int cases[][5] = {{9, 8, 0, 0, 3},    {210, 32, 0, 1, 3}, {90, 10, 3, 0, 3},
                            {170, 32, 5, 1, 2}, {6, 7, 2, 0, 0},    {0, 6, 2, 0, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int w[2] = {cases[c][1], cases[c][1]};
        np_layer_hp hp = hp0;
        hp.i[0] = cases[c][2];
        cu_rig r;
        cu_rig_make(&r, "cross", hp, 2, w, cases[c][0], (unsigned)cases[c][4], cases[c][3],
                    400 + c);
        /* dW and db sum over the n samples: GEMM_ATOL is for K <= 32 terms, and float
         * error grows about linearly with K, so it scales with n beyond 32 */
        run_dev(&r, GEMM_ATOL * (cases[c][0] > 32 ? cases[c][0] / 32.0 : 1.0), GEMM_RTOL);
        cu_rig_free(&r);
    }
}

int main(void) {
    char what[512];
    if (np_cuda_describe(what, sizeof what) == 0) {
        printf("skipped: no CUDA device (%s)\n", what);
        return 77;
    }
    printf("%s\n", what);
    if (cudaStreamCreate(&stream) != cudaSuccess) {
        fprintf(stderr, "test_cuda_kernels: cudaStreamCreate failed\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),   cmocka_unit_test(test_bce),   cmocka_unit_test(test_sum),
        cmocka_unit_test(test_sgd),    cmocka_unit_test(test_dot),   cmocka_unit_test(test_concat),
        cmocka_unit_test(test_linear), cmocka_unit_test(test_cross),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cudaStreamDestroy(stream);
    return rc;
}
