/* DLRM dot interaction: the bottom output followed by the strict lower triangle of pairwise
 * dot products of the T1 feature vectors of each sample. Not here: the pooling (embbag.c). */
#include "codelets/kernels.h"

#include <stdlib.h>
#include <string.h>

/* The dots of one sample. Row i's dots with rows j < i are computed together, vector over j,
 * from the transposed rows FT (d, T1): acc[j] = ((0 + f_i0 f_j0) + f_i1 f_j1) + ... in k order,
 * exactly the sum a scalar dot loop forms, so vectorizing over j changes no bit. */
static void sample_dots(const float *f, int T1, int d, float *ft, float *acc, float *o) {
    /* f (T1, d) -> ft (d, T1) */
    for (int j = 0; j < T1; j++)
        for (int k = 0; k < d; k++)
            ft[(size_t)k * T1 + j] = f[(size_t)j * d + k];
    size_t p = 0;
    for (int i = 1; i < T1; i++) {
        const float *fi = f + (size_t)i * (size_t)d; /* (d) */
        for (int j = 0; j < i; j++)
            acc[j] = 0.0f;
        for (int k = 0; k < d; k++) {
            const float fik = fi[k], *col = ft + (size_t)k * T1; /* (T1) */
            for (int j = 0; j < i; j++)
                acc[j] += fik * col[j];
        }
        memcpy(o + p, acc, (size_t)i * sizeof *acc);
        p += (size_t)i;
    }
}

void np_interact_fwd(const float *F, long B, int T1, int d, float *out) {
    np_interact_fwd_ws(F, B, T1, d, out, NULL);
}

void np_interact_fwd_ws(const float *F,                                /* (B, T1, d) */
                        long B, int T1, int d, float *out, float *ws) { /* (B, width) */
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2;
    /* per-call scratch: the transposed sample (d, T1) and one row of dots (T1) */
    float stack_ft[4096], stack_acc[256];
    float *ft = ws ? ws : stack_ft, *acc = ws ? ws + (size_t)T1 * (size_t)d : stack_acc;
    float *heap = NULL;
    if (!ws && ((size_t)T1 * (size_t)d > 4096 || T1 > 256)) {
        heap = malloc(((size_t)T1 * (size_t)d + (size_t)T1) * sizeof *heap);
        if (!heap) { /* no scratch: fall back to plain dots, same arithmetic */
            for (long s = 0; s < B; s++) {
                const float *f = F + (size_t)s * (size_t)T1 * (size_t)d;
                float *o = out + (size_t)s * width;
                memcpy(o, f, (size_t)d * sizeof *o);
                size_t p = (size_t)d;
                for (int i = 1; i < T1; i++)
                    for (int j = 0; j < i; j++) {
                        float a = 0.0f;
                        for (int k = 0; k < d; k++)
                            a += f[(size_t)i * d + k] * f[(size_t)j * d + k];
                        o[p++] = a;
                    }
            }
            return;
        }
        ft = heap;
        acc = heap + (size_t)T1 * (size_t)d;
    }
    for (long s = 0; s < B; s++) {
        const float *f = F + (size_t)s * (size_t)T1 * (size_t)d; /* (T1, d) */
        float *o = out + (size_t)s * width;                      /* (width) */
        memcpy(o, f, (size_t)d * sizeof *o);
        sample_dots(f, T1, d, ft, acc, o + d);
    }
    free(heap);
}

void np_interact_bwd(const float *F,                     /* (B, T1, d) */
                     const float *dout,                  /* (B, d + T1*(T1-1)/2) */
                     long B, int T1, int d, float *dF) { /* (B, T1, d) */
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2;
    size_t fsz = (size_t)T1 * (size_t)d;
    for (long s = 0; s < B; s++) {
        const float *f = F + (size_t)s * fsz;      /* (T1, d) */
        const float *g = dout + (size_t)s * width; /* (width) */
        float *df = dF + (size_t)s * fsz;          /* (T1, d) */
        /* F[s,0] also passes straight through to the output, so its gradient starts there. */
        memcpy(df, g, (size_t)d * sizeof *df);
        memset(df + d, 0, (fsz - (size_t)d) * sizeof *df);
        /* Pairs in output order: each dF row sums its contributions in a fixed order. */
        size_t p = (size_t)d;
        for (int i = 1; i < T1; i++) {
            const float *fi = f + (size_t)i * (size_t)d; /* (d) */
            float *dfi = df + (size_t)i * (size_t)d;     /* (d) */
            for (int j = 0; j < i; j++) {
                float gp = g[p++];
                const float *fj = f + (size_t)j * (size_t)d; /* (d) */
                float *dfj = df + (size_t)j * (size_t)d;     /* (d) */
                for (int k = 0; k < d; k++) {
                    dfi[k] += gp * fj[k];
                    dfj[k] += gp * fi[k];
                }
            }
        }
    }
}

/* ---- the "dot" layer: its inputs, concatenated, are T1 vectors of d = width of input 0
 * per sample (DLRM: the bottom output, then the pooled tables). It keeps them as F
 * (T1, d) per sample for backward; forward transposes each sample in scratch, and backward
 * forms dF there, then splits it. */
#include "core/util.h"
#include "model/layers.h"

static np_status dot_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    int d = s->in[0], total = 0;
    for (int k = 0; k < s->n_in; k++) {
        if (s->in[k] % d)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "input %d has width %d, not a multiple of input 0's width %d", k,
                          s->in[k], d);
        total += s->in[k];
    }
    int T1 = total / d;
    s->out = d + T1 * (T1 - 1) / 2;
    s->saved = total;
    /* backward: dF (n, total); forward: one transposed sample and a row of dots,
     * T1 (d + 1) floats, which n (total + T1) covers for any n >= 1 */
    s->scratch = total + T1;
    return NP_OK;
}

static void dot_layer_fwd(const np_layer_io *io) {
    const np_layer_shape *s = io->shape;
    size_t fsz = (size_t)s->saved;
    for (long r = 0; r < io->n; r++) { /* F = [in0 || in1 || ...] */
        float *f = io->saved + (size_t)r * fsz;
        for (int k = 0; k < s->n_in; k++) {
            memcpy(f, io->in[k] + (size_t)r * (size_t)s->in[k], (size_t)s->in[k] * sizeof *f);
            f += s->in[k];
        }
    }
    np_interact_fwd_ws(io->saved, io->n, s->saved / s->in[0], s->in[0], io->out, io->scratch);
}

static void dot_layer_bwd(const np_layer_io *io) {
    const np_layer_shape *s = io->shape;
    size_t fsz = (size_t)s->saved;
    np_interact_bwd(io->saved, io->dout, io->n, s->saved / s->in[0], s->in[0], io->scratch);
    for (long r = 0; r < io->n; r++) {
        const float *df = io->scratch + (size_t)r * fsz;
        for (int k = 0; k < s->n_in; k++) {
            if (io->din[k])
                memcpy(io->din[k] + (size_t)r * (size_t)s->in[k], df, (size_t)s->in[k] * 4);
            df += s->in[k];
        }
    }
}

static double dot_flops(const np_layer_hp *hp, const np_layer_shape *s, long n, int bwd) {
    (void)hp;
    double pairs = (double)(s->out - s->in[0]);
    return (bwd ? 4.0 : 2.0) * (double)n * pairs * s->in[0];
}

const np_layer_def np_layer_dot = {.kind = "dot",
                                   .min_in = 1,
                                   .max_in = NP_LAYER_MAX_IN,
                                   .shape = dot_shape,
                                   .fwd = dot_layer_fwd,
                                   .bwd = dot_layer_bwd,
                                   .flops = dot_flops};
