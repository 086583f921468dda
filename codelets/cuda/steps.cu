// The step table of codelets/cuda/plan.h on a CUDA stream: cuBLAS products and small elementwise
// kernels, which the layer kinds' CUDA slots (codelets/layers/linear.cu, codelets/layers/cross.cu)
// run their step sequences on; and the cuBLAS handle for a stream. fp32 only; deterministic (no
// atomics, every sum in a fixed order; cuBLAS is reproducible run to run on one GPU model with one
// toolkit, but not bit-equal to the CPU's oneDNN).
#include <starpu.h>
#include <starpu_cublas_v2.h>
#include <string.h>

#include "codelets/cuda/cuda.h"
#include "codelets/cuda/elem.h"
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/plan.h"

// ---- the cuBLAS handle: the StarPU CUDA worker's own (bound to its stream, made by
// starpu_cublas_init()), else one per host thread, created at first use, set to stream s.
// Default math mode on both: fp32 products, no TF32.
cublasHandle_t np_cuda_blas(cudaStream_t s) {
    if (starpu_is_initialized()) {
        int id = starpu_worker_get_id();
        if (id >= 0 && starpu_worker_get_type(id) == STARPU_CUDA_WORKER) {
            cublasHandle_t h = starpu_cublas_get_local_handle();
            if (h) {
                /* the handle is the worker's, shared with user layers' CUDA slots: set
                 * what the plans rely on (host scalars, no TF32, this stream) each time */
                NP_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
                NP_CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
                NP_CUBLAS_CHECK(cublasSetStream(h, s));
                return h;
            }
        }
    }
    static thread_local cublasHandle_t own;
    if (!own) NP_CUBLAS_CHECK(cublasCreate(&own));
    NP_CUBLAS_CHECK(cublasSetMathMode(own, CUBLAS_DEFAULT_MATH));
    NP_CUBLAS_CHECK(cublasSetPointerMode(own, CUBLAS_POINTER_MODE_HOST));
    NP_CUBLAS_CHECK(cublasSetStream(own, s));
    return own;
}

// ---- elementwise kernels of the step table

__global__ void k_bias_act(float *y, const float *b, int out, int relu, size_t total) {
    NP_CUDA_FOR(e, total) y[e] = np_elem_bias_act(y[e], b[e % (size_t)out], relu);
}
__global__ void k_relu_mask(const float *y, float *d, size_t n) {
    NP_CUDA_FOR(e, n) d[e] = np_elem_relu_mask(y[e], d[e]);
}
__global__ void k_colsum(const float *dy, float *db, long B, int out) {
    NP_CUDA_FOR(j, (size_t)out) db[j] = np_elem_colsum(dy, B, out, j);
}
__global__ void k_mul(const float *a, const float *b, float *o, size_t n) {
    NP_CUDA_FOR(e, n) o[e] = np_fmul(a[e], b[e]);
}
__global__ void k_mul_add(const float *a, const float *b, const float *c, float *o, size_t n) {
    NP_CUDA_FOR(e, n) o[e] = np_fadd(np_fmul(a[e], b[e]), c[e]);
}
__global__ void k_add_to(float *o, const float *a, size_t n) {
    NP_CUDA_FOR(e, n) o[e] = np_fadd(o[e], a[e]);
}

// ---- the step table on a stream (codelets/cuda/plan.h np_gpu_ops)

typedef np_cuda_steps dev_ctx;

static int as_int(long v) {
    if (v < 0 || v > 2147483647L)
        np_cuda_die("cublasSgemm", "a dimension exceeds int", __FILE__, __LINE__);
    return (int)v;
}

static void dev_gemm(void *ctx, const np_gemm_plan *p, const float *left, const float *right,
                     float *C) {
    dev_ctx *c = (dev_ctx *)ctx;
    if (p->m <= 0 || p->n <= 0) return;
    if (p->k <= 0) { // no terms: zeros (C is contiguous, ldc = m, in every plan)
        NP_CUDA_CHECK(cudaMemsetAsync(C, 0, (size_t)p->ldc * (size_t)p->n * sizeof *C, c->s));
        return;
    }
    if (!c->h) c->h = np_cuda_blas(c->s);
    const float *A, *B;
    np_gemm_plan_ptrs(p, left, right, &A, &B);
    const float one = 1.0f, zero = 0.0f;
    NP_CUBLAS_CHECK(cublasSgemm(c->h, p->transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                                p->transb ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(p->m), as_int(p->n),
                                as_int(p->k), &one, A, as_int(p->lda), B, as_int(p->ldb), &zero, C,
                                as_int(p->ldc)));
}

static void dev_bias_act(void *ctx, float *y, const float *b, long B, int out, int relu) {
    size_t total = (size_t)B * (size_t)out;
    if (!total) return;
    k_bias_act<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, ((dev_ctx *)ctx)->s>>>(y, b, out, relu,
                                                                               total);
    NP_CUDA_LAUNCHED();
}
static void dev_relu_mask(void *ctx, const float *y, float *d, size_t n) {
    if (!n) return;
    k_relu_mask<<<np_cuda_grid(n), NP_CUDA_BLOCK, 0, ((dev_ctx *)ctx)->s>>>(y, d, n);
    NP_CUDA_LAUNCHED();
}
static void dev_colsum(void *ctx, const float *dy, float *db, long B, int out) {
    if (out <= 0) return;
    k_colsum<<<np_cuda_grid((size_t)out), NP_CUDA_BLOCK, 0, ((dev_ctx *)ctx)->s>>>(dy, db, B, out);
    NP_CUDA_LAUNCHED();
}
static void dev_zero(void *ctx, float *p, size_t n) {
    if (n) NP_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof *p, ((dev_ctx *)ctx)->s));
}
static void dev_mul(void *ctx, const float *a, const float *b, float *o, size_t n) {
    if (!n) return;
    k_mul<<<np_cuda_grid(n), NP_CUDA_BLOCK, 0, ((dev_ctx *)ctx)->s>>>(a, b, o, n);
    NP_CUDA_LAUNCHED();
}
static void dev_mul_add(void *ctx, const float *a, const float *b, const float *c, float *o,
                        size_t n) {
    if (!n) return;
    k_mul_add<<<np_cuda_grid(n), NP_CUDA_BLOCK, 0, ((dev_ctx *)ctx)->s>>>(a, b, c, o, n);
    NP_CUDA_LAUNCHED();
}
static void dev_add_to(void *ctx, float *o, const float *a, size_t n) {
    if (!n) return;
    k_add_to<<<np_cuda_grid(n), NP_CUDA_BLOCK, 0, ((dev_ctx *)ctx)->s>>>(o, a, n);
    NP_CUDA_LAUNCHED();
}

np_gpu_ops np_cuda_step_ops(np_cuda_steps *c, void *stream) {
    c->s = (cudaStream_t)stream;
    c->h = NULL;
    np_gpu_ops o;
    o.ctx = c;
    o.gemm = dev_gemm;
    o.bias_act = dev_bias_act;
    o.relu_mask = dev_relu_mask;
    o.colsum = dev_colsum;
    o.zero = dev_zero;
    o.mul = dev_mul;
    o.mul_add = dev_mul_add;
    o.add_to = dev_add_to;
    return o;
}
