/* Optimizer steps on raw buffers: dense SGD, and SGD / row-wise Adagrad on gathered rows.
 * Not here: gathering or scattering the rows (rows.c) or reducing gradients (the caller). */
#include "codelets/kernels/kernels.h"

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
