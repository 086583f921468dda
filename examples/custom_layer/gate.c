/* A user layer for nestpipe: the gate y = x * sigmoid(x W^T + b), elementwise, for x of
 * width D, W (D, D) and b (D): each feature is scaled by a learned function of all of them.
 * Everything nestpipe needs is in the np_layer_def at the bottom (include/nestpipe/layer.h);
 * the kernels are plain loops over row-major buffers and see nothing else. */
#include <math.h>
#include <stddef.h>

#include "gate.h"

/* Widths: output = input; forward keeps s = sigmoid(x W^T + b) (n, D) for backward, and
 * backward needs (n, D) floats of scratch for the gradient of the pre-activation. */
static np_status gate_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp; /* no hyper-parameters */
    int D = s->in[0];
    if (D > 4096) /* a limit of this example, to show how a shape function says no */
        return np_error_set(err, NP_STATUS_BAD_INPUT, "gate: width %d is over 4096", D);
    s->out = D;
    s->saved = D;
    s->scratch = D;
    s->n_params = 2;
    s->param[0] = np_param_matrix("weight", D, D);
    s->param[1] = np_param_vector("bias", D);
    return NP_OK;
}

/* y = x * s, s = sigmoid(x W^T + b). */
static void gate_fwd(const np_layer_io *io) {
    int D = io->shape->out;
    const float *W = io->param[0], *b = io->param[1]; /* (D, D), (D) */
    for (long i = 0; i < io->n; i++) {
        const float *x = io->in[0] + (size_t)i * D;
        float *s = io->saved + (size_t)i * D, *y = io->out + (size_t)i * D;
        for (int j = 0; j < D; j++) {
            float a = b[j];
            for (int k = 0; k < D; k++)
                a += x[k] * W[(size_t)j * D + k];
            s[j] = 1.0f / (1.0f + expf(-a));
            y[j] = x[j] * s[j];
        }
    }
}

/* With g = dy * x * s * (1 - s), the gradient of the pre-activation a:
 * dx = dy * s + g W, dW = g^T x, db = column sums of g. dx and the parameter gradients are
 * overwritten, as the layer contract asks; din[0] is NULL when x is the data itself. */
static void gate_bwd(const np_layer_io *io) {
    int D = io->shape->out;
    long n = io->n;
    const float *W = io->param[0];
    float *dW = io->dparam[0], *db = io->dparam[1], *g = io->scratch; /* g (n, D) */
    for (long i = 0; i < n; i++) {
        const float *x = io->in[0] + (size_t)i * D, *s = io->saved + (size_t)i * D;
        const float *dy = io->dout + (size_t)i * D;
        for (int j = 0; j < D; j++)
            g[(size_t)i * D + j] = dy[j] * x[j] * s[j] * (1.0f - s[j]);
        if (io->din[0]) {
            float *dx = io->din[0] + (size_t)i * D;
            for (int k = 0; k < D; k++) {
                float v = dy[k] * s[k];
                for (int j = 0; j < D; j++)
                    v += g[(size_t)i * D + j] * W[(size_t)j * D + k];
                dx[k] = v;
            }
        }
    }
    /* rows summed in order: the same bits in any thread, as nestpipe requires */
    for (int j = 0; j < D; j++) {
        float bj = 0;
        for (int k = 0; k < D; k++)
            dW[(size_t)j * D + k] = 0;
        for (long i = 0; i < n; i++) {
            float gij = g[(size_t)i * D + j];
            const float *x = io->in[0] + (size_t)i * D;
            bj += gij;
            for (int k = 0; k < D; k++)
                dW[(size_t)j * D + k] += gij * x[k];
        }
        db[j] = bj;
    }
}

/* For StarPU's task->flops and GFLOP/s in traces: the matrix products dominate. */
static double gate_flops(const np_layer_hp *hp, const np_layer_shape *s, long n, int backward) {
    (void)hp;
    double D = s->out, mm = 2.0 * (double)n * D * D;
    return backward ? 2.0 * mm + 6.0 * (double)n * D : mm + 6.0 * (double)n * D;
}

/* init is left NULL: the default draws W ~ N(0, sqrt(2 / (D + D))) and b ~ N(0, sqrt(1/D)).
 * The CUDA slots stay NULL: the StarPU engine runs the gate on CPU workers. */
const np_layer_def gate_layer = {.kind = "gate",
                                 .min_in = 1,
                                 .max_in = 1,
                                 .shape = gate_shape,
                                 .fwd = gate_fwd,
                                 .bwd = gate_bwd,
                                 .flops = gate_flops};
