/* Linear layer kernels y = x W^T + b on the CPU: the products on oneDNN (gemm.c), with the
 * bias and an optional ReLU fused into the forward product.
 * Not here: any chunking of the batch (the caller's job). */
#include <string.h>

#include "runtime/core/util.h"
#include "codelets/kernels/gemm.h"
#include "codelets/kernels/kernels.h"
#include "codelets/layers/layers.h"

void np_linear_fwd(const float *x, /* (B, in) */
                   const float *W, /* (out, in) */
                   const float *b, /* (out) */
                   float *y,       /* (B, out) */
                   long B, int in, int out, unsigned flags) {
    if (B <= 0 || out <= 0) return;
    np_gemm(NP_GEMM_TB | (flags & (NP_GEMM_RELU | NP_GEMM_BF16)), B, out, in, x, in, W, in, b,
            y, out);
}

void np_linear_bwd(const float *x,  /* (B, in) */
                   const float *W,  /* (out, in) */
                   const float *dy, /* (B, out) */
                   float *dx,       /* (B, in) or NULL */
                   float *dW,       /* (out, in) */
                   float *db,       /* (out) */
                   long B, int in, int out, unsigned flags) {
    unsigned bf = flags & NP_GEMM_BF16;
    if (out <= 0) {
        /* No outputs: nothing flows back, but dx is still overwritten as promised. */
        if (dx && B > 0 && in > 0) memset(dx, 0, (size_t)B * (size_t)in * sizeof *dx);
        return;
    }
    /* The gradients are overwritten, so an empty chunk must leave zeros, not stale values. */
    if (B <= 0 || in <= 0) {
        if (in > 0) memset(dW, 0, (size_t)out * (size_t)in * sizeof *dW);
        if (B <= 0) {
            memset(db, 0, (size_t)out * sizeof *db);
            return;
        }
    } else {
        if (dx) np_gemm(bf, B, in, out, dy, out, W, in, NULL, dx, in);       /* dx = dy W */
        np_gemm(NP_GEMM_TA | bf, out, in, B, dy, out, x, in, NULL, dW, in); /* dW = dy^T x */
    }
    if (flags & NP_LINEAR_DB_DONE) return;
    /* Column sums sample by sample: a fixed order and a contiguous inner loop over out. */
    memset(db, 0, (size_t)out * sizeof *db);
    for (long s = 0; s < B; s++) {
        const float *dys = dy + (size_t)s * (size_t)out; /* (out) */
        for (int j = 0; j < out; j++)
            db[j] += dys[j];
    }
}

/* ---- the "linear" layer: i[0] = output width, i[1] = 1 for a ReLU after it. The ReLU
 * is fused into the product after the bias, and its backward masks dout in place. */

static np_status linear_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    if (hp->i[0] < 1)
        return np_err(err, NP_STATUS_BAD_INPUT, "output width %d must be >= 1", hp->i[0]);
    s->out = hp->i[0];
    s->n_params = 2;
    s->param[0] = np_param_matrix("weight", hp->i[0], s->in[0]);
    s->param[1] = np_param_vector("bias", hp->i[0]);
    return NP_OK;
}

static void linear_layer_fwd(const np_layer_io *io) {
    int in = io->shape->in[0], out = io->shape->out;
    np_linear_fwd(io->in[0], io->param[0], io->param[1], io->out, io->n, in, out,
                  (io->hp->i[1] ? NP_GEMM_RELU : 0u) | np_gemm_precision(io->precision));
}

static void linear_layer_bwd(const np_layer_io *io) {
    int in = io->shape->in[0], out = io->shape->out;
    unsigned flags = np_gemm_precision(io->precision);
    if (io->hp->i[1] && io->n > 0) { /* the ReLU's mask and the bias gradient in one pass */
        np_relu_bwd_colsum(io->out, io->dout, io->n, out, io->dparam[1]);
        flags |= NP_LINEAR_DB_DONE;
    }
    np_linear_bwd(io->in[0], io->param[0], io->dout, io->din[0], io->dparam[0], io->dparam[1],
                  io->n, in, out, flags);
}

static double linear_flops(const np_layer_hp *hp, const np_layer_shape *s, long n, int bwd) {
    (void)hp;
    double mm = 2.0 * (double)n * s->in[0] * s->out;
    return bwd == 1 ? 2.0 * mm : mm; /* backward: dW, and dx unless bwd == 2 */
}

const np_layer_def np_layer_linear = {.kind = "linear",
                                      .min_in = 1,
                                      .max_in = 1,
                                      .shape = linear_shape,
                                      .fwd = linear_layer_fwd,
                                      .bwd = linear_layer_bwd,
                                      .flops = linear_flops,
                                      .hp_int = {"out", "relu"},
                                      .help = "y = x W^T + b, then max(y, 0) with relu = 1",
#ifdef NP_HAVE_CUDA
                                      .cuda_fwd = np_cuda_linear_fwd,
                                      .cuda_bwd = np_cuda_linear_bwd,
#endif
                                      };
