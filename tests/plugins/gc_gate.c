/* A test plugin for `nestpipe check-layer` (tests/test_check_layer.sh): the gate
 * y = x * sigmoid(x W^T + b) of examples/custom_layer as kind "pgate", correct; built with
 * GC_BUGGY it is kind "pgate_bad", whose bias gradient misses the sigmoid's derivative
 * s (1 - s), so the check must name "bias" and nothing else. Built against the public
 * header only and not linked to nestpipe: np_* resolve from the process that loads it. */
#include <math.h>
#include <stddef.h>

#include "nestpipe/layer.h"

#ifdef GC_BUGGY
#define GATE_KIND "pgate_bad"
#else
#define GATE_KIND "pgate"
#endif

static np_status gate_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    (void)err;
    int D = s->in[0];
    s->out = D;
    s->saved = D;   /* s = sigmoid(x W^T + b) */
    s->scratch = D; /* g, the gradient of the pre-activation */
    s->n_params = 2;
    s->param[0] = np_param_matrix("weight", D, D);
    s->param[1] = np_param_vector("bias", D);
    return NP_OK;
}

static void gate_fwd(const np_layer_io *io) {
    int D = io->shape->out;
    const float *W = io->param[0], *b = io->param[1]; /* (D, D), (D) */
    for (long i = 0; i < io->n; i++) {
        const float *x = io->in[0] + (size_t)i * D; /* (D) */
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

/* g = dy x s (1 - s): dx = dy s + g W, dW = g^T x, db = column sums of g. */
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
        if (io->din[0])
            for (int k = 0; k < D; k++) {
                float v = dy[k] * s[k];
                for (int j = 0; j < D; j++)
                    v += g[(size_t)i * D + j] * W[(size_t)j * D + k];
                io->din[0][(size_t)i * D + k] = v;
            }
    }
    for (int j = 0; j < D; j++) {
        float bj = 0;
        for (int k = 0; k < D; k++)
            dW[(size_t)j * D + k] = 0;
        for (long i = 0; i < n; i++) {
            const float *x = io->in[0] + (size_t)i * D;
            float gij = g[(size_t)i * D + j];
#ifdef GC_BUGGY
            bj += io->dout[(size_t)i * D + j] * x[j]; /* the planted bug: no s (1 - s) */
#else
            bj += gij;
#endif
            for (int k = 0; k < D; k++)
                dW[(size_t)j * D + k] += gij * x[k];
        }
        db[j] = bj;
    }
}

static const np_layer_def gate = {.kind = GATE_KIND,
                                  .min_in = 1,
                                  .max_in = 1,
                                  .shape = gate_shape,
                                  .fwd = gate_fwd,
                                  .bwd = gate_bwd,
                                  .help = "test plugin: y = x * sigmoid(x W^T + b)"};

static np_status register_kinds(np_error *err) {
    return np_layer_register(&gate, err);
}
NP_PLUGIN_DEFINE(register_kinds)
