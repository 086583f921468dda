/* The HSTU layer (Zhai et al. 2024, "Actions Speak Louder than Words"): one block of a
 * generative sequence recommender over a sequence of L positions of width d, each sample's
 * input a padded (L, d) block stored as one row of L*d floats. Per position
 *   U, V, Q, K = split(SiLU(X W1^T + b1))                     (each d wide, H heads of d/H)
 *   A_h[p, q] = SiLU(Q_h[p] . K_h[q] + rab[h, bucket(p - q)]) / L   for q <= p, else 0
 *   O = [A_1 V_1 || ... || A_H V_H]
 *   Y = X + (LayerNorm(O) * U) W2^T + b2               (LayerNorm without gain or shift)
 * Causal attention over right-padded sequences: a real position never reads a padded one
 * (they all come later), so the layer needs no lengths; what it writes at padded positions
 * is for the loss to ignore. Hyper-parameters: i[0] = len (L), i[1] = heads (H, default 1),
 * i[2] = buckets of the relative position bias (default 32): distances below buckets/2 have
 * a bucket each, longer ones one per doubling, the last bucket takes the rest.
 * Parameters: W1 (4d, d), W2 (d, d), bias (5d: b1 then b2), rab (H * buckets).
 * The products over all positions (W1, W2) run as one GEMM on n*L rows; the attention runs
 * per sample and head on L x L blocks that backward recomputes rather than saves.
 * Not here: sequence inputs themselves (the pooled block's sequence slots, docs/model.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "codelets/kernels/gemm.h"
#include "codelets/layers/layers.h"

#define HSTU_EPS 1e-5f /* LayerNorm's epsilon */

typedef struct hstu_dims {
    long n;
    int L, d, H, dh, nb;
} hstu_dims;

static hstu_dims dims_of(const np_layer_io *io) {
    hstu_dims z = {.n = io->n, .L = io->hp->i[0], .H = io->hp->i[1] ? io->hp->i[1] : 1,
                   .nb = io->hp->i[2] ? io->hp->i[2] : 32};
    z.d = io->shape->in[0] / z.L;
    z.dh = z.d / z.H;
    return z;
}

int np_hstu_bucket(int delta, int nb) {
    int half = nb / 2;
    if (half < 1) return 0;
    if (delta < half) return delta;
    int b = half;
    for (int v = delta / half; v > 1; v >>= 1)
        b++;
    return b < nb ? b : nb - 1;
}

static np_status hstu_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    int L = hp->i[0], H = hp->i[1] ? hp->i[1] : 1, nb = hp->i[2] ? hp->i[2] : 32;
    if (L < 1)
        return np_err(err, NP_STATUS_BAD_INPUT, "len %d: set the sequence length (len >= 1)", L);
    if (H < 1 || nb < 1)
        return np_err(err, NP_STATUS_BAD_INPUT, "heads %d and buckets %d must be >= 1", H, nb);
    if (s->in[0] % L)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "input width %d is not len (%d) positions of one width", s->in[0], L);
    int d = s->in[0] / L;
    if (d % H)
        return np_err(err, NP_STATUS_BAD_INPUT, "width %d a position does not split into %d heads",
                      d, H);
    if ((long)L * L > (1L << 26) || (long)L * d > (1L << 26))
        return np_err(err, NP_STATUS_BAD_INPUT, "len %d x width %d is too large", L, d);
    s->out = s->in[0];
    s->saved = L * (5 * d + 2);  /* z1 = X W1^T + b1 (4d), O (d), LayerNorm mean and 1/sd */
    s->scratch = L * (10 * d);   /* SiLU(z1) (4d), G (d), dG (d), d SiLU(z1) (4d) */
    s->n_params = 4;
    s->param[0] = np_param_matrix("W1", 4L * d, d);
    s->param[1] = np_param_matrix("W2", d, d);
    s->param[2] = np_param_vector("bias", 5L * d);
    s->param[3] = np_param_vector("rab", (int64_t)H * nb);
    return NP_OK;
}

/* The L x L blocks of one call (k of them). Kernels have no error path: when even this
 * allocation fails, the output (n_out floats; backward: dW1 and din) is filled with NaN,
 * which the next update's finite check stops on, naming the step, rather than training on
 * garbage. */
static void blocks_failed(float *out, size_t n_out) {
    for (size_t i = 0; i < n_out; i++)
        out[i] = NAN;
}

static float *blocks(int L, int k, float *out, size_t n_out) {
    float *b = malloc((size_t)k * (size_t)L * (size_t)L * sizeof *b);
    if (!b) blocks_failed(out, n_out);
    return b;
}

static inline float sigm(float z) { return 1.0f / (1.0f + expf(-z)); }
static inline float silu(float z) { return z * sigm(z); }
static inline float dsilu(float z) {
    float s = sigm(z);
    return s * (1.0f + z * (1.0f - s));
}

/* The L x L scores of sample s, head h: S = Q K^T + rab (q <= p), A = SiLU(S) / L, masked. */
static void scores(const hstu_dims *z, const float *uvqk, const float *rab, int h, float *S,
                   float *A) {
    int L = z->L, d = z->d, w = 4 * d;
    const float *Q = uvqk + 2 * d + h * z->dh, *K = uvqk + 3 * d + h * z->dh;
    np_gemm(NP_GEMM_TB, L, L, z->dh, Q, w, K, w, NULL, S, L);
    float inv = 1.0f / (float)L;
    for (int p = 0; p < L; p++) {
        float *Sp = S + (size_t)p * L, *Ap = A + (size_t)p * L;
        for (int q = 0; q <= p; q++) {
            Sp[q] += rab[h * z->nb + np_hstu_bucket(p - q, z->nb)];
            Ap[q] = silu(Sp[q]) * inv;
        }
        for (int q = p + 1; q < L; q++)
            Ap[q] = 0.0f;
    }
}

/* LayerNorm of O's row (d) into its mean and 1/sd. */
static void ln_stats(const float *o, int d, float *mu, float *rs) {
    float m = 0.0f, v = 0.0f;
    for (int j = 0; j < d; j++)
        m += o[j];
    m /= (float)d;
    for (int j = 0; j < d; j++)
        v += (o[j] - m) * (o[j] - m);
    *mu = m;
    *rs = 1.0f / sqrtf(v / (float)d + HSTU_EPS);
}

static void hstu_fwd(const np_layer_io *io) {
    hstu_dims z = dims_of(io);
    long rows = z.n * z.L; /* positions */
    int d = z.d, L = z.L;
    unsigned bf = np_gemm_precision(io->precision);
    const float *X = io->in[0], *W1 = io->param[0], *W2 = io->param[1], *bias = io->param[2];
    float *Z = io->saved, *O = Z + (size_t)rows * 4 * d, *st = O + (size_t)rows * d;
    float *uvqk = io->scratch, *G = uvqk + (size_t)rows * 4 * d;
    if (rows <= 0) return;
    np_linear_fwd(X, W1, bias, Z, rows, d, 4 * d, bf);
    for (size_t i = 0; i < (size_t)rows * 4 * d; i++)
        uvqk[i] = silu(Z[i]);
    float *S = blocks(L, 2, io->out, (size_t)rows * d), *A = S + (size_t)L * L;
    if (!S) return;
    for (long s = 0; s < z.n; s++)
        for (int h = 0; h < z.H; h++) {
            const float *u = uvqk + (size_t)s * L * 4 * d;
            scores(&z, u, io->param[3], h, S, A);
            np_gemm(0, L, z.dh, L, A, L, u + d + h * z.dh, 4 * d, NULL,
                    O + (size_t)s * L * d + h * z.dh, d);
        }
    free(S);
    for (long r = 0; r < rows; r++) {
        const float *o = O + (size_t)r * d, *u = uvqk + (size_t)r * 4 * d;
        float *g = G + (size_t)r * d;
        ln_stats(o, d, &st[2 * r], &st[2 * r + 1]);
        for (int j = 0; j < d; j++)
            g[j] = (o[j] - st[2 * r]) * st[2 * r + 1] * u[j];
    }
    np_linear_fwd(G, W2, bias + 4 * d, io->out, rows, d, d, bf);
    for (size_t i = 0; i < (size_t)rows * d; i++)
        io->out[i] += X[i];
}

/* Attention backward of sample s: dO (L, d) into dV, dQ, dK of duvqk, and drab. */
static void attn_bwd(const hstu_dims *z, const float *u, const float *dO, const float *rab,
                     float *du, float *drab, float *S, float *A, float *dA) {
    int L = z->L, d = z->d, w = 4 * d, dh = z->dh;
    float inv = 1.0f / (float)L;
    for (int h = 0; h < z->H; h++) {
        const float *V = u + d + h * dh, *Q = u + 2 * d + h * dh, *K = u + 3 * d + h * dh;
        const float *dOh = dO + h * dh;
        scores(z, u, rab, h, S, A);
        np_gemm(NP_GEMM_TB, L, L, dh, dOh, d, V, w, NULL, dA, L);      /* dA = dO V^T */
        np_gemm(NP_GEMM_TA, L, dh, L, A, L, dOh, d, NULL, du + d + h * dh, w); /* dV = A^T dO */
        for (int p = 0; p < L; p++) {
            float *dAp = dA + (size_t)p * L;
            const float *Sp = S + (size_t)p * L;
            for (int q = 0; q <= p; q++) {
                dAp[q] *= dsilu(Sp[q]) * inv; /* now dS */
                drab[h * z->nb + np_hstu_bucket(p - q, z->nb)] += dAp[q];
            }
            for (int q = p + 1; q < L; q++)
                dAp[q] = 0.0f;
        }
        np_gemm(0, L, dh, L, dA, L, K, w, NULL, du + 2 * d + h * dh, w);          /* dQ = dS K */
        np_gemm(NP_GEMM_TA, L, dh, L, dA, L, Q, w, NULL, du + 3 * d + h * dh, w); /* dK = dS^T Q */
    }
}

static void hstu_bwd(const np_layer_io *io) {
    hstu_dims z = dims_of(io);
    long rows = z.n * z.L;
    int d = z.d, L = z.L;
    unsigned bf = np_gemm_precision(io->precision);
    const float *X = io->in[0], *W1 = io->param[0], *W2 = io->param[1];
    const float *Z = io->saved, *O = Z + (size_t)rows * 4 * d, *st = O + (size_t)rows * d;
    const float *dY = io->dout;
    float *uvqk = io->scratch, *G = uvqk + (size_t)rows * 4 * d, *dG = G + (size_t)rows * d;
    float *duvqk = dG + (size_t)rows * d;
    float *dW1 = io->dparam[0], *dW2 = io->dparam[1], *dbias = io->dparam[2], *drab = io->dparam[3];
    memset(drab, 0, (size_t)z.H * z.nb * sizeof *drab);
    if (rows <= 0) { /* an empty chunk: zero gradients, as promised */
        np_linear_bwd(NULL, W1, NULL, NULL, dW1, dbias, 0, d, 4 * d, 0);
        np_linear_bwd(NULL, W2, NULL, NULL, dW2, dbias + 4 * d, 0, d, d, 0);
        return;
    }
    for (size_t i = 0; i < (size_t)rows * 4 * d; i++)
        uvqk[i] = silu(Z[i]);
    for (long r = 0; r < rows; r++) {
        const float *o = O + (size_t)r * d, *u = uvqk + (size_t)r * 4 * d;
        for (int j = 0; j < d; j++)
            G[(size_t)r * d + j] = (o[j] - st[2 * r]) * st[2 * r + 1] * u[j];
    }
    /* Y = X + G W2^T + b2: dG = dY W2, dW2 = dY^T G, db2 */
    np_linear_bwd(G, W2, dY, dG, dW2, dbias + 4 * d, rows, d, d, bf);
    /* G = N * U: dU = dG * N; dN = dG * U, then LayerNorm's backward into dO (over dG) */
    for (long r = 0; r < rows; r++) {
        const float *o = O + (size_t)r * d, *u = uvqk + (size_t)r * 4 * d;
        float *g = dG + (size_t)r * d, *du = duvqk + (size_t)r * 4 * d;
        float mu = st[2 * r], rs = st[2 * r + 1], m1 = 0.0f, m2 = 0.0f;
        for (int j = 0; j < d; j++) {
            float nj = (o[j] - mu) * rs;
            du[j] = g[j] * nj;
            g[j] *= u[j];
            m1 += g[j];
            m2 += g[j] * nj;
        }
        m1 /= (float)d;
        m2 /= (float)d;
        for (int j = 0; j < d; j++)
            g[j] = rs * (g[j] - m1 - (o[j] - mu) * rs * m2);
    }
    float *S = blocks(L, 3, dW1, (size_t)4 * d * d);
    if (!S) {
        if (io->din[0]) blocks_failed(io->din[0], (size_t)rows * d);
        return;
    }
    for (long s = 0; s < z.n; s++)
        attn_bwd(&z, uvqk + (size_t)s * L * 4 * d, dG + (size_t)s * L * d, io->param[3],
                 duvqk + (size_t)s * L * 4 * d, drab, S, S + (size_t)L * L, S + 2 * (size_t)L * L);
    free(S);
    for (size_t i = 0; i < (size_t)rows * 4 * d; i++)
        duvqk[i] *= dsilu(Z[i]);
    np_linear_bwd(X, W1, duvqk, io->din[0], dW1, dbias, rows, d, 4 * d, bf);
    if (io->din[0])
        for (size_t i = 0; i < (size_t)rows * d; i++)
            io->din[0][i] += dY[i];
}

static double hstu_flops(const np_layer_hp *hp, const np_layer_shape *s, long n, int bwd) {
    double L = hp->i[0], d = s->in[0] / (double)hp->i[0], rows = (double)n * L;
    double dense = 2.0 * rows * d * 5.0 * d;    /* X W1^T and G W2^T */
    double attn = 4.0 * (double)n * L * L * d; /* Q K^T and A V, every head */
    double elem = rows * d * 24.0 + (double)n * L * L * 8.0;
    if (!bwd) return dense + attn + elem;
    return (bwd == 2 ? 1.5 : 2.0) * dense + 3.0 * attn + 2.0 * elem; /* + the recomputed scores */
}

const np_layer_def np_layer_hstu = {
    .kind = "hstu",
    .min_in = 1,
    .max_in = 1,
    .shape = hstu_shape,
    .fwd = hstu_fwd,
    .bwd = hstu_bwd,
    .flops = hstu_flops,
    .hp_int = {"len", "heads", "buckets"},
    .help = "HSTU block over len positions: causal SiLU attention with a relative bias, "
            "LayerNorm(A V) * U, W2, residual",
};
