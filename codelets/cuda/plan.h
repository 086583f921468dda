/* What the GEMM-based layers (linear, cross) do on the GPU, as plain C shared by the
 * device (codelets/cuda/steps.cu runs it for codelets/layers/linear.cu and codelets/layers/cross.cu) and the host check
 * tests/test_cuda_host.c: the cuBLAS arguments of every row-major product (np_gemm_plan),
 * and the layers' sequences of steps over a small table of operations (np_gpu_ops) that
 * the CUDA build fills with kernels and cuBLAS and the host test fills with loops over codelets/cuda/elem.h and a column-major reference sgemm with cuBLAS's
 * semantics. So the transposes, leading dimensions, operand order, the n == 0 cases and the
 * order of the steps are checked on a machine without a GPU.
 * Not here: the kernels themselves (codelets/cuda/elem.h, codelets/cuda/ops.cu, codelets/cuda/steps.cu). */
#ifndef NP_CUDA_PLAN_H
#define NP_CUDA_PLAN_H

#include <stddef.h>

#include "nestpipe/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One cublasSgemm call, column-major: C (m, n) = op(A) (m, k) * op(B) (k, n) with
 * alpha = 1, beta = 0 (C overwritten). trans*: 0 = CUBLAS_OP_N, 1 = CUBLAS_OP_T. a_src and
 * b_src say which operand of the row-major product is cuBLAS's A and B: 0 the left one,
 * 1 the right one. */
typedef struct np_gemm_plan {
    int transa, transb;
    long m, n, k;
    long lda, ldb, ldc;
    int a_src, b_src;
} np_gemm_plan;

/* Row-major C (M, N) = op(L) (M, K) * op(R) (K, N), L stored (M, K) or (K, M) when tl,
 * R stored (K, N) or (N, K) when tr, leading dimensions as stored. cuBLAS is column-major,
 * where a row-major (r, c) matrix reads as its transpose: so it computes
 * C^T (N, M) = op(R)^T op(L)^T, with R as its A and L as its B. */
static inline np_gemm_plan np_gemm_plan_rm(int tl, int tr, long M, long N, long K, long ldl,
                                           long ldr, long ldc) {
    np_gemm_plan p;
    p.transa = tr ? 1 : 0;
    p.transb = tl ? 1 : 0;
    p.m = N;
    p.n = M;
    p.k = K;
    p.lda = ldr;
    p.ldb = ldl;
    p.ldc = ldc;
    p.a_src = 1;
    p.b_src = 0;
    return p;
}

/* The three products of a linear layer y = x W^T + b, x (B, in), W (out, in):
 * y (B, out) = x W^T (left x, right W); dx (B, in) = dy W (left dy, right W);
 * dW (out, in) = dy^T x (left dy, right x). */
static inline np_gemm_plan np_plan_linear_y(long B, int in, int out) {
    return np_gemm_plan_rm(0, 1, B, out, in, in, in, out);
}
static inline np_gemm_plan np_plan_linear_dx(long B, int in, int out) {
    return np_gemm_plan_rm(0, 0, B, in, out, out, in, in);
}
static inline np_gemm_plan np_plan_linear_dW(long B, int in, int out) {
    return np_gemm_plan_rm(1, 0, out, in, B, out, in, in);
}

/* cuBLAS's A and B pointers of a plan, from the row-major product's left and right. */
static inline void np_gemm_plan_ptrs(const np_gemm_plan *p, const float *left, const float *right,
                                     const float **A, const float **B) {
    *A = p->a_src ? right : left;
    *B = p->b_src ? right : left;
}

/* The steps a layer is made of; ctx is the backend's (a stream and a cuBLAS handle, or
 * nothing on the host). Sizes are floats. */
typedef struct np_gpu_ops {
    void *ctx;
    /* C = the plan's product of the row-major left and right operands */
    void (*gemm)(void *ctx, const np_gemm_plan *p, const float *left, const float *right, float *C);
    /* y (B, out): y + b on every row, then ReLU when relu (np_elem_bias_act) */
    void (*bias_act)(void *ctx, float *y, const float *b, long B, int out, int relu);
    /* d = relu mask of y applied to d, in place (np_elem_relu_mask) */
    void (*relu_mask)(void *ctx, const float *y, float *d, size_t n);
    /* db (out) = column sums of dy (B, out), sample order (np_elem_colsum) */
    void (*colsum)(void *ctx, const float *dy, float *db, long B, int out);
    void (*zero)(void *ctx, float *p, size_t n);
    void (*mul)(void *ctx, const float *a, const float *b, float *o, size_t n); /* o = a*b */
    void (*mul_add)(void *ctx, const float *a, const float *b, const float *c, float *o,
                    size_t n);                                     /* o = a*b + c */
    void (*add_to)(void *ctx, float *o, const float *a, size_t n); /* o = o + a */
} np_gpu_ops;

/* np_linear_fwd: y = x W^T + b (+ ReLU) */
static inline void np_seq_linear_fwd(const np_gpu_ops *o, const float *x, const float *W,
                                     const float *b, float *y, long B, int in, int out, int relu) {
    if (B <= 0 || out <= 0) return;
    np_gemm_plan p = np_plan_linear_y(B, in, out);
    o->gemm(o->ctx, &p, x, W, y);
    o->bias_act(o->ctx, y, b, B, out, relu);
}

/* np_linear_bwd: dx = dy W (dx may be NULL), dW = dy^T x, db = column sums of dy, all
 * OVERWRITTEN; an empty chunk leaves zeros in dW and db. */
static inline void np_seq_linear_bwd(const np_gpu_ops *o, const float *x, const float *W,
                                     const float *dy, float *dx, float *dW, float *db, long B,
                                     int in, int out) {
    if (out <= 0) return;
    if (B <= 0) {
        o->zero(o->ctx, dW, (size_t)out * (size_t)in);
        o->zero(o->ctx, db, (size_t)out);
        return;
    }
    if (dx) {
        np_gemm_plan p = np_plan_linear_dx(B, in, out);
        o->gemm(o->ctx, &p, dy, W, dx);
    }
    np_gemm_plan p = np_plan_linear_dW(B, in, out);
    o->gemm(o->ctx, &p, dy, x, dW);
    o->colsum(o->ctx, dy, db, B, out);
}

/* The "linear" layer (codelets/layers/linear.c): i[0] output width, i[1] ReLU */
static inline void np_seq_linear_layer_fwd(const np_gpu_ops *o, const np_layer_io *io) {
    np_seq_linear_fwd(o, io->in[0], io->param[0], io->param[1], io->out, io->n, io->shape->in[0],
                      io->shape->out, io->hp->i[1] != 0);
}
static inline void np_seq_linear_layer_bwd(const np_gpu_ops *o, const np_layer_io *io) {
    int in = io->shape->in[0], out = io->shape->out;
    if (io->hp->i[1] && io->n > 0)
        o->relu_mask(o->ctx, io->out, io->dout, (size_t)io->n * (size_t)out);
    np_seq_linear_bwd(o, io->in[0], io->param[0], io->dout, io->din[0], io->dparam[0],
                      io->dparam[1], io->n, in, out);
}

/* The "cross" layer (codelets/layers/cross.c): u = W x_l + b (or U (V x_l) + b with rank
 * r = i[0] > 0, h = x_l V^T saved after u), out = x0 * u + x_l. */
static inline void np_seq_cross_fwd(const np_gpu_ops *o, const np_layer_io *io) {
    long n = io->n;
    int D = io->shape->out, r = io->hp->i[0];
    if (n <= 0) return;
    const float *x0 = io->in[0], *xl = io->in[1];
    float *u = io->saved; /* (n, D) */
    if (r == 0) {
        np_seq_linear_fwd(o, xl, io->param[0], io->param[1], u, n, D, D, 0);
    } else {
        float *h = io->saved + (size_t)n * (size_t)D; /* (n, r) = x_l V^T */
        np_gemm_plan p = np_plan_linear_y(n, D, r);
        o->gemm(o->ctx, &p, xl, io->param[1], h);
        np_seq_linear_fwd(o, h, io->param[0], io->param[2], u, n, r, D, 0);
    }
    o->mul_add(o->ctx, x0, u, xl, io->out, (size_t)n * (size_t)D);
}

static inline void np_seq_cross_bwd(const np_gpu_ops *o, const np_layer_io *io) {
    long n = io->n;
    int D = io->shape->out, r = io->hp->i[0];
    size_t nD = (size_t)(n > 0 ? n : 0) * (size_t)D;
    if (n <= 0) { /* OVERWRITTEN: zeros for an empty chunk */
        for (int p = 0; p < io->shape->n_params; p++)
            o->zero(o->ctx, io->dparam[p],
                    (size_t)io->shape->param[p].dims[0] *
                        (size_t)(io->shape->param[p].ndim == 2 ? io->shape->param[p].dims[1] : 1));
        return;
    }
    const float *x0 = io->in[0], *xl = io->in[1], *u = io->saved, *dy = io->dout;
    float *du = io->scratch; /* (n, D) */
    o->mul(o->ctx, dy, x0, du, nD);
    if (io->din[0]) o->mul(o->ctx, dy, u, io->din[0], nD);
    float *dxl = io->din[1];
    if (r == 0) {
        np_seq_linear_bwd(o, xl, io->param[0], du, dxl, io->dparam[0], io->dparam[1], n, D, D);
    } else {
        const float *h = io->saved + nD;
        float *dh = io->scratch + nD; /* (n, r) */
        /* u = h U^T + b: dh = du U, dU = du^T h, db; then h = x_l V^T: dV = dh^T x_l,
         * dx_l = dh V */
        np_seq_linear_bwd(o, h, io->param[0], du, dh, io->dparam[0], io->dparam[2], n, r, D);
        np_gemm_plan pv = np_plan_linear_dW(n, D, r);
        o->gemm(o->ctx, &pv, dh, xl, io->dparam[1]);
        if (dxl) {
            np_gemm_plan px = np_plan_linear_dx(n, D, r);
            o->gemm(o->ctx, &px, dh, io->param[1], dxl);
        }
    }
    if (dxl) o->add_to(o->ctx, dxl, dy, nD); /* x_l also passes straight through */
}

#ifdef __cplusplus
}
#endif
#endif
