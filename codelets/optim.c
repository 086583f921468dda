/* Optimizer steps on raw buffers: dense SGD, and SGD / row-wise Adagrad on gathered rows.
 * Not here: gathering or scattering the rows (rows.c) or reducing gradients (the caller). */
#include "codelets/kernels.h"

#include <math.h>

void np_sgd_dense(float *w, const float *g, size_t n, float lr) { /* w, g: (n) */
    for (size_t i = 0; i < n; i++)
        w[i] -= lr * g[i];
}

int np_all_finite(const float *x, size_t n) {
    /* x - x is 0 for finite x and NaN for NaN or inf: one branch-free sum the compiler
     * vectorises, then one test */
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++)
        acc += x[i] - x[i];
    return acc == 0.0f;
}

void np_sparse_sgd(float *rows, const float *g, long U, int d, float lr) { /* (U,d), (U,d) */
    np_sgd_dense(rows, g, (size_t)U * (size_t)d, lr);
}

void np_sparse_rowwise_adagrad(float *rows,    /* (U, d) */
                               float *state,   /* (U) */
                               const float *g, /* (U, d) */
                               long U, int d, float lr, float eps) {
    if (d <= 0) return;
    for (long u = 0; u < U; u++) {
        const float *gu = g + (size_t)u * (size_t)d; /* (d) */
        float *ru = rows + (size_t)u * (size_t)d;    /* (d) */
        float sq = 0.0f;
        for (int j = 0; j < d; j++)
            sq += gu[j] * gu[j];
        state[u] += sq / (float)d;
        /* One step size per row (that is what makes it row-wise); computed once so every
         * element of the row is scaled by the same rounded factor. */
        float step = lr / (sqrtf(state[u]) + eps);
        for (int j = 0; j < d; j++)
            ru[j] -= step * gu[j];
    }
}

/* ---- StarPU codelets (codelets/cl.h) */
#include "codelets/cl.h"

static void sparse_update_cpu(void *buffers[], void *cl_arg) {
    np_cl_sparse_args *a = cl_arg;
    float *E = NP_BUF(buffers, 0);
    const float *g = NP_BUF(buffers, 1);
    const int64_t *meta = NP_BUF(buffers, 2);
    long U = (long)meta[NP_META_UO];
    if (a->adagrad)
        np_sparse_rowwise_adagrad(E, NP_BUF(buffers, 3), g, U, a->d, a->lr, a->eps);
    else
        np_sparse_sgd(E, g, U, a->d, a->lr);
    if (!np_all_finite(E, (size_t)U * (size_t)a->d)) a->out.nonfinite = 1;
}

static void dense_update_cpu(void *buffers[], void *cl_arg) {
    np_cl_dense_args *a = cl_arg;
    float *w = (float *)NP_BUF(buffers, 0) + a->off; /* (n) this layer's parameters */
    np_sgd_dense(w, NP_BUF(buffers, 1), a->n, a->lr);
    if (!np_all_finite(w, a->n)) a->out.nonfinite = 1;
}

NP_CODELET(np_cl_sparse_update, sparse_update_cpu, "sparse_update");
NP_CODELET_CUDA(np_cl_dense_update, dense_update_cpu, np_cuda_dense_update, "dense_update");
