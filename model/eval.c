/* Evaluation: forward-only pass over a held-out source, mean log loss and exact AUC.
 * Not here: training or any gradient. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/model.h"

typedef struct scored {
    float score;
    float label;
} scored;

static int cmp_score(const void *a, const void *b) {
    float x = ((const scored *)a)->score, y = ((const scored *)b)->score;
    return (x > y) - (x < y);
}

/* Mann-Whitney: AUC = (sum of positive ranks - P(P+1)/2) / (P N), ranks 1-based with ties
 * given their average rank, so equal scores count one half. */
double np_auc(const float *score, const float *label, long n) {
    scored *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return NAN;
    for (long i = 0; i < n; i++)
        v[i] = (scored){score[i], label[i]};
    qsort(v, (size_t)n, sizeof *v, cmp_score);
    double rank_sum = 0, pos = 0;
    for (long i = 0; i < n;) {
        long j = i;
        while (j < n && v[j].score == v[i].score)
            j++;
        double avg_rank = 0.5 * (double)(i + 1 + j); /* mean of ranks i+1 .. j */
        for (long k = i; k < j; k++)
            if (v[k].label > 0.5f) {
                rank_sum += avg_rank;
                pos += 1;
            }
        i = j;
    }
    free(v);
    double neg = (double)n - pos;
    if (pos == 0 || neg == 0) return NAN;
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

np_status np_predict(const np_model_t *m, np_source_t *src, FILE *scores, np_eval_result *out,
                     np_error *err) {
    memset(out, 0, sizeof *out);
    out->auc = NAN;
    out->logloss = NAN;
    long piece = NP_EVAL_PIECE;
    np_fwd_ws *ws = NULL;
    np_batch b = {0};
    float *prob = NULL, *label = NULL;
    size_t cap = 0, n = 0;
    double loss = 0;
    np_status st = np_fwd_ws_create(m, piece, &ws, err);
    while (!st) {
        st = np_source_next_batch(src, piece, &b, err);
        if (st == NP_STATUS_END_OF_DATA) {
            st = NP_OK;
            break;
        }
        if (st) break;
        if ((st = np_grow((void **)&prob, &cap, n + b.n, sizeof(float), "eval scores", err))) break;
        float *nl = realloc(label, cap * sizeof(float)); /* labels grow with the scores */
        if (!nl) {
            st = np_err(err, NP_STATUS_NO_MEMORY, "out of memory storing eval labels");
            break;
        }
        label = nl;
        double ls;
        if ((st = np_reference_forward(m, ws, &b, prob + n, &ls, err))) break;
        memcpy(label + n, b.label, (size_t)b.n * sizeof(float));
        for (long i = 0; scores && i < b.n; i++)
            if (fprintf(scores, "%.9g\n", (double)prob[n + (size_t)i]) < 0) {
                st = np_err(err, NP_STATUS_IO, "predict: cannot write a score: write error");
                break;
            }
        loss += ls;
        n += (size_t)b.n;
    }
    if (!st && n > 0) {
        out->n = (long)n;
        out->logloss = loss / (double)n;
        out->auc = np_auc(prob, label, (long)n);
    }
    free(prob);
    free(label);
    np_batch_free(&b);
    np_fwd_ws_free(ws);
    return st;
}

np_status np_evaluate(const np_model_t *m, np_source_t *src, const np_config *cfg,
                      np_eval_result *out, np_error *err) {
    (void)cfg; /* the pieces no longer follow the batch size (NP_EVAL_PIECE) */
    return np_predict(m, src, NULL, out, err);
}
