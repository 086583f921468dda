/* Next-item prediction with a sampled softmax, the objective of a generative sequence
 * recommender (docs/model.md "The HSTU model"): a loss kind, the output node of a model
 * trained with loss = output. Inputs: Y (L, d) the sequence model's output, X (L, d) the
 * history's item embeddings (right-padded: a padding position's embedding is all zeros,
 * as the sequence pooling writes it), N (K, d) the sample's K negative items' embeddings.
 * Position p predicts item p+1 against the negatives:
 *   s_p0 = Y_p . X_{p+1},  s_pj = Y_p . N_j,  loss_p = logsumexp_j(s_pj) - s_p0
 * over the positions whose next item is there (X_{p+1} not all zeros). Output: one float
 * a sample, the sum of its loss_p divided by L (a constant, so every split of the batch
 * adds the same terms). The item embeddings are tied: X and N are the table's own rows, so
 * their gradients reach the item table twice, as input and as target.
 * Hyper-parameter: i[0] = len (L); d = width of Y / L, K = width of N / d. */
#include <math.h>
#include <string.h>

#include "runtime/core/util.h"
#include "codelets/kernels/gemm.h"
#include "codelets/layers/layers.h"

static np_status nextitem_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    int L = hp->i[0];
    if (L < 2) return np_err(err, NP_STATUS_BAD_INPUT, "len %d: a sequence predicts from len >= 2", L);
    if (s->n_in != 3 || s->in[0] % L || s->in[1] != s->in[0])
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "nextitem takes the sequence model's output and the history, both len (%d) "
                      "positions of one width, then the negatives; got widths %d and %d",
                      L, s->in[0], s->n_in > 1 ? s->in[1] : 0);
    int d = s->in[0] / L;
    if (s->in[2] % d)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "the negatives' width %d is not a whole number of %d-wide items", s->in[2], d);
    int K = s->in[2] / d;
    s->out = 1;
    s->saved = 0;
    s->scratch = L * (K + 1); /* the scores of each position, then their gradients */
    s->n_params = 0;
    return NP_OK;
}

static int any_nonzero(const float *x, int d) {
    for (int j = 0; j < d; j++)
        if (x[j] != 0.0f) return 1;
    return 0;
}

static float dot(const float *a, const float *b, int d) {
    float s = 0.0f;
    for (int j = 0; j < d; j++)
        s += a[j] * b[j];
    return s;
}

/* Scores of sample s into S (L, K+1): column 0 the positive, 1..K the negatives; rows whose
 * next item is padding are marked by a positive score of NAN. Turns each valid row into
 * its softmax when soft, and returns the sample's loss. */
static float scores(const np_layer_io *io, long s, int L, int d, int K, float *S, int soft) {
    const float *Y = io->in[0] + (size_t)s * L * d, *X = io->in[1] + (size_t)s * L * d;
    const float *N = io->in[2] + (size_t)s * K * d;
    int w = K + 1;
    /* the negatives' scores of every position in one product: (L, d) x (K, d)^T */
    np_gemm(NP_GEMM_TB, L, K, d, Y, d, N, d, NULL, S + 1, w);
    double loss = 0.0;
    for (int p = 0; p < L; p++) {
        float *Sp = S + (size_t)p * w;
        if (p + 1 >= L || !any_nonzero(X + (size_t)(p + 1) * d, d)) {
            Sp[0] = NAN;
            continue;
        }
        Sp[0] = dot(Y + (size_t)p * d, X + (size_t)(p + 1) * d, d);
        float mx = Sp[0];
        for (int j = 1; j < w; j++)
            mx = Sp[j] > mx ? Sp[j] : mx;
        float z = 0.0f;
        for (int j = 0; j < w; j++)
            z += expf(Sp[j] - mx);
        loss += (double)(mx + logf(z) - Sp[0]);
        if (soft)
            for (int j = 0; j < w; j++)
                Sp[j] = expf(Sp[j] - mx) / z;
    }
    return (float)(loss / L);
}

static void nextitem_fwd(const np_layer_io *io) {
    int L = io->hp->i[0], d = io->shape->in[0] / L, K = io->shape->in[2] / d;
    for (long s = 0; s < io->n; s++)
        io->out[s] = scores(io, s, L, d, K, io->scratch + (size_t)s * L * (K + 1), 0);
}

static void nextitem_bwd(const np_layer_io *io) {
    int L = io->hp->i[0], d = io->shape->in[0] / L, K = io->shape->in[2] / d, w = K + 1;
    for (int k = 0; k < 3; k++)
        if (io->din[k]) memset(io->din[k], 0, (size_t)io->n * io->shape->in[k] * sizeof(float));
    for (long s = 0; s < io->n; s++) {
        float *S = io->scratch + (size_t)s * L * w;
        scores(io, s, L, d, K, S, 1);
        float g = io->dout[s] / (float)L;
        /* dS = g (softmax - onehot(0)) on valid rows, 0 on the others */
        for (int p = 0; p < L; p++) {
            float *Sp = S + (size_t)p * w;
            if (isnan(Sp[0])) {
                memset(Sp, 0, (size_t)w * sizeof *Sp);
                continue;
            }
            Sp[0] -= 1.0f;
            for (int j = 0; j < w; j++)
                Sp[j] *= g;
        }
        const float *Y = io->in[0] + (size_t)s * L * d, *X = io->in[1] + (size_t)s * L * d;
        const float *N = io->in[2] + (size_t)s * K * d;
        float *dY = io->din[0] ? io->din[0] + (size_t)s * L * d : NULL;
        float *dX = io->din[1] ? io->din[1] + (size_t)s * L * d : NULL;
        float *dN = io->din[2] ? io->din[2] + (size_t)s * K * d : NULL;
        /* dY = dS_neg N + dS_pos X_{p+1}; dN = dS_neg^T Y; dX_{p+1} = dS_pos Y_p */
        if (dY) np_gemm(0, L, d, K, S + 1, w, N, d, NULL, dY, d);
        if (dN) np_gemm(NP_GEMM_TA, K, d, L, S + 1, w, Y, d, NULL, dN, d);
        for (int p = 0; p + 1 < L; p++) {
            float gp = S[(size_t)p * w];
            if (gp == 0.0f) continue;
            for (int j = 0; j < d; j++) {
                if (dY) dY[(size_t)p * d + j] += gp * X[(size_t)(p + 1) * d + j];
                if (dX) dX[(size_t)(p + 1) * d + j] += gp * Y[(size_t)p * d + j];
            }
        }
    }
}

static double nextitem_flops(const np_layer_hp *hp, const np_layer_shape *s, long n, int bwd) {
    double L = hp->i[0], d = s->in[0] / L, K = s->in[2] / d;
    double f = (double)n * L * (K + 1) * (2.0 * d + 4.0);
    return bwd ? 3.0 * f : f;
}

const np_layer_def np_layer_nextitem = {
    .kind = "nextitem",
    .min_in = 3,
    .max_in = 3,
    .shape = nextitem_shape,
    .fwd = nextitem_fwd,
    .bwd = nextitem_bwd,
    .flops = nextitem_flops,
    .hp_int = {"len"},
    .help = "next-item sampled softmax loss over a sequence model's output, the history "
            "and K negatives (loss = output)",
};
