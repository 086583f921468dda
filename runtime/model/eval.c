/* Evaluation: forward-only pass over a held-out source, mean log loss and exact AUC; for a
 * generative sequence model (output kind nextitem), HR@10 and NDCG@10 over the full item
 * table. Not here: training or any gradient. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "codelets/kernels/gemm.h"
#include "runtime/model/model.h"

/* ---- next-item ranking: each sequence's last item, predicted by the sequence model's
 * output at the position before it, ranked by dot product against every row of table 0
 * (rank 1 + the items scoring strictly higher; the history is not excluded) */

#define RANK_BLOCK 1024 /* items scored per product: np_rank_items' scores hold nu x this */

typedef struct ranker {
    int node;          /* the nextitem output node, -1 when the model has none */
    int L, K, d;       /* history slots, negatives, width */
    float *user;       /* (piece, d) each ranked sequence's vector */
    int64_t *target;   /* (piece) its last item */
    float *tscore;     /* (piece) the target's score */
    long *higher;      /* (piece) each one's rank */
    float *scores;     /* (piece, RANK_BLOCK) */
    double hits, ndcg; /* sums over the ranked sequences */
    long ranked;
} ranker;

static np_status ranker_init(ranker *r, const np_model_t *m, long piece, np_error *err) {
    memset(r, 0, sizeof *r);
    const np_graph_t *g = m->graph;
    r->node = -1;
    if (g->output < 0 || strcmp(np_node_def(&g->node[g->output])->kind, "nextitem") ||
        np_config_seq_slots(&m->cfg) == 0 || m->local_rows[0] != m->rows[0])
        return NP_OK;
    /* ranked only when the loss reads what the ranking assumes: its history is table 0's
     * sequence after the K negatives, len seq-len positions of dim */
    const np_node *x = &g->node[g->output], *h = x->in[1] >= 0 ? &g->node[x->in[1]] : NULL;
    int L = m->cfg.seq_len, K = m->cfg.seq_negatives, d = m->d;
    if (x->hp.i[0] != L || x->shape.in[0] != L * d || !h ||
        strcmp(np_node_def(h)->kind, "slice") || h->in[0] != NP_IN_POOLED ||
        h->hp.i[0] != K * d || h->hp.i[1] != (K + L) * d)
        return NP_OK;
    r->node = g->output;
    r->L = L;
    r->K = K;
    r->d = d;
    if (!(r->user = np_alloc((size_t)piece * (size_t)r->d, sizeof(float), "eval users", err)) ||
        !(r->target = np_alloc((size_t)piece, sizeof(int64_t), "eval targets", err)) ||
        !(r->tscore = np_alloc((size_t)piece, sizeof(float), "eval target scores", err)) ||
        !(r->higher = np_alloc((size_t)piece, sizeof(long), "eval ranks", err)) ||
        !(r->scores = np_alloc((size_t)piece * RANK_BLOCK, sizeof(float), "eval scores", err)))
        return NP_STATUS_NO_MEMORY;
    return NP_OK;
}

static void ranker_free(ranker *r) {
    free(r->user);
    free(r->target);
    free(r->tscore);
    free(r->higher);
    free(r->scores);
}

long np_rank_select(const float *Y, const np_batch *b, int L, int K, int d, float *user,
                    int64_t *target) {
    long nu = 0;
    for (long s = 0; s < b->n; s++) {
        long len = (long)(b->offsets[s + 1] - b->offsets[s]) - K; /* the history */
        if (len < 2 || len > L) continue;
        const int64_t *keys = b->keys + b->offsets[s] + K;
        memcpy(user + (size_t)nu * d, Y + ((size_t)s * L + (size_t)(len - 2)) * d,
               (size_t)d * sizeof(float));
        target[nu++] = keys[len - 1];
    }
    return nu;
}

void np_rank_items(const float *user, long nu, int d, const float *E, int64_t items,
                   const int64_t *target, float *tscore, float *scores, long *rank) {
    for (long u = 0; u < nu; u++) {
        tscore[u] = NAN;
        rank[u] = 1;
    }
    /* the target's score from its own block first, then every block's count above it */
    for (int pass = 0; pass < 2; pass++)
        for (int64_t lo = 0; lo < items; lo += RANK_BLOCK) {
            long nb = (long)(items - lo < RANK_BLOCK ? items - lo : RANK_BLOCK);
            int wanted = pass == 1;
            for (long u = 0; u < nu && !wanted; u++)
                wanted = target[u] >= lo && target[u] < lo + nb;
            if (!wanted) continue;
            np_gemm(NP_GEMM_TB, nu, nb, d, user, d, E + (size_t)lo * d, d, NULL, scores, nb);
            for (long u = 0; u < nu; u++) {
                const float *su = scores + (size_t)u * nb;
                if (pass == 0) {
                    if (target[u] >= lo && target[u] < lo + nb) tscore[u] = su[target[u] - lo];
                    continue;
                }
                for (long j = 0; j < nb; j++)
                    rank[u] += su[j] > tscore[u];
            }
        }
}

/* Ranks the last item of every sequence of batch b (forward done into ws). */
static void ranker_add(ranker *r, const np_model_t *m, const np_fwd_ws *ws, const np_batch *b) {
    const np_node *x = &m->graph->node[r->node];
    long nu = np_rank_select(np_fwd_ws_values(ws, x->in[0]), b, r->L, r->K, r->d, r->user,
                             r->target);
    if (!nu) return;
    np_rank_items(r->user, nu, r->d, m->table[0], m->rows[0], r->target, r->tscore, r->scores,
                  r->higher);
    for (long u = 0; u < nu; u++) {
        long rank = r->higher[u];
        if (rank <= 10) {
            r->hits += 1.0;
            r->ndcg += 1.0 / log2((double)rank + 1.0);
        }
    }
    r->ranked += nu;
}

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
    out->hr10 = out->ndcg10 = NAN;
    long piece = NP_EVAL_PIECE;
    ranker rk;
    np_fwd_ws *ws = NULL;
    np_batch b = {0};
    float *prob = NULL, *label = NULL;
    size_t cap = 0, n = 0;
    double loss = 0;
    np_status st = ranker_init(&rk, m, piece, err);
    if (!st) st = np_fwd_ws_create(m, piece, &ws, err);
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
        if (rk.node >= 0) ranker_add(&rk, m, ws, &b);
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
        if (np_config_loss(&m->cfg) != NP_LOSS_OUTPUT) out->auc = np_auc(prob, label, (long)n);
    }
    if (!st && rk.ranked > 0) {
        out->ranked = rk.ranked;
        out->hr10 = rk.hits / (double)rk.ranked;
        out->ndcg10 = rk.ndcg / (double)rk.ranked;
    }
    ranker_free(&rk);
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
