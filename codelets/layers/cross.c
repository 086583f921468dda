/* The DCN-v2 cross layer (Wang et al. 2020): x_{l+1} = x0 * (W x_l + b) + x_l, elementwise
 * product, with a full-rank W (D, D) (i[0] = 0) or the low-rank W = U V, U (D, r) and
 * V (r, D) (i[0] = r). Inputs: x0, then x_l, both of width D (for the first layer both
 * are x0; their gradients are separate edges, summed by the graph in a fixed order).
 * Not here: how cross layers stack (runtime/model/graph.c builds DCN-v2). */
#include <string.h>

#include "runtime/core/util.h"
#include "codelets/kernels/gemm.h"
#include "codelets/kernels/kernels.h"
#include "codelets/layers/layers.h"

static np_status cross_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    int D = s->in[0], r = hp->i[0];
    if (s->n_in != 2 || s->in[1] != D)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "a cross layer takes x0 and x_l of one width; got widths %d and %d", D,
                      s->n_in > 1 ? s->in[1] : 0);
    if (r < 0 || r >= D)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "rank %d: use 0 for a full-rank W, or a rank in [1, %d)", r, D);
    s->out = D;
    if (r == 0) {
        s->n_params = 2;
        s->param[0] = np_param_matrix("weight", D, D);
        s->param[1] = np_param_vector("bias", D);
        s->saved = D;   /* u = W x_l + b */
        s->scratch = D; /* du */
    } else {
        s->n_params = 3;
        s->param[0] = np_param_matrix("U", D, r);
        s->param[1] = np_param_matrix("V", r, D);
        s->param[2] = np_param_vector("bias", D);
        s->saved = D + r;   /* u (n, D) block, then h = V x_l (n, r) block */
        s->scratch = D + r; /* du (n, D) block, then dh (n, r) block */
    }
    return NP_OK;
}

static void cross_fwd(const np_layer_io *io) {
    long n = io->n;
    int D = io->shape->out, r = io->hp->i[0];
    unsigned bf = np_gemm_precision(io->precision);
    const float *x0 = io->in[0], *xl = io->in[1];
    float *u = io->saved; /* (n, D) */
    if (r == 0) {
        np_linear_fwd(xl, io->param[0], io->param[1], u, n, D, D, bf);
    } else {
        float *h = io->saved + (size_t)n * (size_t)D; /* (n, r) = x_l V^T */
        np_gemm(NP_GEMM_TB | bf, n, r, D, xl, D, io->param[1], D, NULL, h, r);
        np_linear_fwd(h, io->param[0], io->param[2], u, n, r, D, bf);
    }
    for (size_t i = 0; i < (size_t)n * (size_t)D; i++)
        io->out[i] = x0[i] * u[i] + xl[i];
}

static void cross_bwd(const np_layer_io *io) {
    long n = io->n;
    int D = io->shape->out, r = io->hp->i[0];
    unsigned bf = np_gemm_precision(io->precision);
    size_t nD = (size_t)n * (size_t)D;
    const float *x0 = io->in[0], *xl = io->in[1], *u = io->saved, *dy = io->dout;
    float *du = io->scratch; /* (n, D) */
    for (size_t i = 0; i < nD; i++)
        du[i] = dy[i] * x0[i];
    if (io->din[0])
        for (size_t i = 0; i < nD; i++)
            io->din[0][i] = dy[i] * u[i];
    float *dxl = io->din[1];
    if (r == 0) {
        np_linear_bwd(xl, io->param[0], du, dxl, io->dparam[0], io->dparam[1], n, D, D, bf);
    } else {
        const float *h = io->saved + nD;
        float *dh = io->scratch + nD; /* (n, r) */
        /* u = h U^T + b: dh = du U, dU = du^T h, db = column sums of du */
        np_linear_bwd(h, io->param[0], du, dh, io->dparam[0], io->dparam[2], n, r, D, bf);
        /* h = x_l V^T: dV = dh^T x_l, dx_l = dh V */
        np_gemm(NP_GEMM_TA | bf, r, D, n, dh, r, xl, D, NULL, io->dparam[1], D);
        if (dxl) np_gemm(bf, n, D, r, dh, r, io->param[1], D, NULL, dxl, D);
    }
    if (dxl) /* x_l also passes straight through */
        for (size_t i = 0; i < nD; i++)
            dxl[i] += dy[i];
}

static double cross_flops(const np_layer_hp *hp, const np_layer_shape *s, long n, int bwd) {
    double D = s->out, r = hp->i[0];
    double mm = r == 0 ? 2.0 * (double)n * D * D : 4.0 * (double)n * D * r;
    return bwd ? 2.0 * mm + 4.0 * (double)n * D : mm + 3.0 * (double)n * D;
}

const np_layer_def np_layer_cross = {.kind = "cross",
                                     .min_in = 2,
                                     .max_in = 2,
                                     .shape = cross_shape,
                                     .fwd = cross_fwd,
                                     .bwd = cross_bwd,
                                     .flops = cross_flops,
                                     .hp_int = {"rank"},
                                     .help = "DCN-v2 cross layer x0 * (W x_l + b) + x_l; rank r > 0: W = U V",
#ifdef NP_HAVE_CUDA
                                     .cuda_fwd = np_cuda_cross_fwd,
                                     .cuda_bwd = np_cuda_cross_bwd,
#endif
                                     };
