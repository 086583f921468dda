/* Linear layer kernels y = x W^T + b on the CPU (OpenBLAS sgemm plus plain bias loops).
 * Not here: activations (relu.c) or any chunking of the batch (the caller's job). */
#include "codelets/kernels.h"

#include <cblas.h>
#include <string.h>

void np_linear_fwd(const float *x, /* (B, in) */
                   const float *W, /* (out, in) */
                   const float *b, /* (out) */
                   float *y,       /* (B, out) */
                   long B, int in, int out) {
    if (B <= 0 || out <= 0) return;
    /* sgemm rejects lda = 0, and with no inputs the layer is just its bias. */
    if (in > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)B, out, in, 1.0f, x, in, W,
                    in, 0.0f, y, out);
    else
        memset(y, 0, (size_t)B * (size_t)out * sizeof *y);
    /* Bias after the product, row by row, so every element sees the same two roundings. */
    for (long s = 0; s < B; s++) {
        float *ys = y + (size_t)s * (size_t)out; /* (out) */
        for (int j = 0; j < out; j++)
            ys[j] += b[j];
    }
}

void np_linear_bwd(const float *x,  /* (B, in) */
                   const float *W,  /* (out, in) */
                   const float *dy, /* (B, out) */
                   float *dx,       /* (B, in) or NULL */
                   float *dW,       /* (out, in) */
                   float *db,       /* (out) */
                   long B, int in, int out) {
    if (out <= 0) {
        /* No outputs: nothing flows back, but dx is still overwritten as promised. */
        if (dx && B > 0 && in > 0) memset(dx, 0, (size_t)B * (size_t)in * sizeof *dx);
        return;
    }
    /* The gradients are overwritten, so an empty chunk must leave zeros, not stale values;
     * sgemm is not asked to do that because it rejects some of these degenerate shapes. */
    if (B <= 0 || in <= 0) {
        if (in > 0) memset(dW, 0, (size_t)out * (size_t)in * sizeof *dW);
        if (B <= 0) {
            memset(db, 0, (size_t)out * sizeof *db);
            return;
        }
    } else {
        if (dx)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)B, in, out, 1.0f, dy,
                        out, W, in, 0.0f, dx, in);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, (blasint)B, 1.0f, dy, out, x,
                    in, 0.0f, dW, in);
    }
    /* Column sums sample by sample: a fixed order and a contiguous inner loop over out. */
    memset(db, 0, (size_t)out * sizeof *db);
    for (long s = 0; s < B; s++) {
        const float *dys = dy + (size_t)s * (size_t)out; /* (out) */
        for (int j = 0; j < out; j++)
            db[j] += dys[j];
    }
}

/* ---- StarPU codelets (codelets/cl.h) */
#include "codelets/cl.h"

static void linear_fwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_linear_args *a = cl_arg;
    const float *x = NP_BUF(buffers, 0), *P = NP_BUF(buffers, 1);
    float *y = NP_BUF(buffers, 2);
    np_linear_fwd(x + a->x_off, P + a->w_off, P + a->b_off, y, a->n, a->in, a->out);
}

static void linear_bwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_linear_args *a = cl_arg;
    const float *x = NP_BUF(buffers, 0), *P = NP_BUF(buffers, 1), *dy = NP_BUF(buffers, 2);
    float *g = NP_BUF(buffers, 3);
    float *dx = starpu_task_get_current()->nbuffers > 4 ? NP_BUF(buffers, 4) : NULL;
    np_linear_bwd(x + a->x_off, P + a->w_off, dy, dx, g + a->gw_off, g + a->gb_off, a->n, a->in,
                  a->out);
}

NP_CODELET(np_cl_linear_fwd, linear_fwd_cpu, "linear_fwd");
NP_CODELET(np_cl_linear_bwd, linear_bwd_cpu, "linear_bwd");
