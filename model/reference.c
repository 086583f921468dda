/* The reference trainer, nestpipe's oracle: one process, one thread, the whole global
 * batch at once, plain loops over the codelets/ kernels. Every engine and pipeline mode is
 * checked against it, so it stays small and obvious rather than fast.
 * One step: dedup keys per table -> gather rows -> forward -> backward -> sparse update of
 * the gathered rows -> write them back -> dense SGD. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/kernels.h"
#include "core/util.h"
#include "model/model.h"

struct np_fwd_ws {
    long cap;                      /* samples the buffers hold */
    int T1;                        /* T + 1 vectors per sample */
    int top_in;                    /* d + T1(T1-1)/2 */
    float *act_bot[NP_MAX_LAYERS]; /* (cap, bot[i].out) post-ReLU outputs */
    float *act_top[NP_MAX_LAYERS]; /* (cap, top[i].out) post-ReLU; the last holds logits */
    float *F;                      /* (cap, T1, d) interaction inputs */
    float *Z;                      /* (cap, top_in) interaction output = top input */
    float *dZ;                     /* (cap, top_in) */
    float *dF;                     /* (cap, T1, d) */
    float *g0, *g1;                /* (cap, max width) ping-pong activation grads */
};

void np_fwd_ws_free(np_fwd_ws *ws) {
    if (!ws) return;
    for (int i = 0; i < NP_MAX_LAYERS; i++) {
        free(ws->act_bot[i]);
        free(ws->act_top[i]);
    }
    free(ws->F);
    free(ws->Z);
    free(ws->dZ);
    free(ws->dF);
    free(ws->g0);
    free(ws->g1);
    free(ws);
}

np_status np_fwd_ws_create(const np_model_t *m, long cap, np_fwd_ws **out, np_error *err) {
    *out = NULL;
    np_fwd_ws *ws = np_zalloc(1, sizeof *ws, "workspace", err);
    if (!ws) return NP_STATUS_NO_MEMORY;
    ws->cap = cap;
    ws->T1 = m->T + 1;
    ws->top_in = np_config_top_input(&m->cfg);
    size_t c = (size_t)cap;
    int maxw = ws->top_in;
    int ok = 1;
    for (int i = 0; i < m->n_bot; i++) {
        ok &= (ws->act_bot[i] = np_alloc(c, (size_t)m->bot[i].out * 4, "activations", err)) != NULL;
        if (m->bot[i].out > maxw) maxw = m->bot[i].out;
        if (m->bot[i].in > maxw) maxw = m->bot[i].in;
    }
    for (int i = 0; i < m->n_top; i++) {
        ok &= (ws->act_top[i] = np_alloc(c, (size_t)m->top[i].out * 4, "activations", err)) != NULL;
        if (m->top[i].out > maxw) maxw = m->top[i].out;
    }
    size_t fsz = (size_t)ws->T1 * (size_t)m->d;
    ok &= (ws->F = np_alloc(c, fsz * 4, "interaction inputs", err)) != NULL;
    ok &= (ws->dF = np_alloc(c, fsz * 4, "interaction grads", err)) != NULL;
    ok &= (ws->Z = np_alloc(c, (size_t)ws->top_in * 4, "interaction outputs", err)) != NULL;
    ok &= (ws->dZ = np_alloc(c, (size_t)ws->top_in * 4, "interaction grads", err)) != NULL;
    ok &= (ws->g0 = np_alloc(c, (size_t)maxw * 4, "activation grads", err)) != NULL;
    ok &= (ws->g1 = np_alloc(c, (size_t)maxw * 4, "activation grads", err)) != NULL;
    if (!ok) {
        np_fwd_ws_free(ws);
        return NP_STATUS_NO_MEMORY;
    }
    *out = ws;
    return NP_OK;
}

static np_status check_batch(const np_model_t *m, const np_fwd_ws *ws, const np_batch *b,
                             np_error *err) {
    if (b->n > ws->cap || b->n_tables != m->T || b->n_dense != m->cfg.bottom[0])
        return np_err(err, NP_STATUS_INTERNAL,
                      "batch shape (n=%ld, dense=%d, tables=%d) does not fit the model "
                      "(cap=%ld, dense=%d, tables=%d)",
                      b->n, b->n_dense, b->n_tables, ws->cap, m->cfg.bottom[0], m->T);
    return NP_OK;
}

/* Forward over the batch. Table t's bags pool rows src[t][idx[t][k]] (k absolute into
 * the batch's key array): the tables themselves with idx = keys, or gathered rows with
 * idx = positions in the gathered set. Returns the BCE sum; prob (n) optional. */
static double forward_core(const np_model_t *m, np_fwd_ws *ws, const np_batch *b,
                           const float *const *src, const int64_t *const *idx, float *prob) {
    long n = b->n;
    int d = m->d, T1 = ws->T1;
    const float *x = b->dense;
    for (int i = 0; i < m->n_bot; i++) {
        const np_layer *L = &m->bot[i];
        np_linear_fwd(x, m->dense + L->w_off, m->dense + L->b_off, ws->act_bot[i], n, L->in,
                      L->out);
        np_relu_fwd(ws->act_bot[i], ws->act_bot[i], (size_t)n * L->out);
        x = ws->act_bot[i];
    }
    for (long s = 0; s < n; s++)
        memcpy(ws->F + (size_t)s * T1 * d, x + (size_t)s * d, d * 4);
    for (int t = 0; t < m->T; t++)
        np_embbag_fwd(src[t], b->offsets + (size_t)t * (n + 1), idx[t], n, d,
                      ws->F + (size_t)(1 + t) * d, (long)T1 * d);
    np_interact_fwd(ws->F, n, T1, d, ws->Z);
    x = ws->Z;
    for (int i = 0; i < m->n_top; i++) {
        const np_layer *L = &m->top[i];
        np_linear_fwd(x, m->dense + L->w_off, m->dense + L->b_off, ws->act_top[i], n, L->in,
                      L->out);
        if (L->relu) np_relu_fwd(ws->act_top[i], ws->act_top[i], (size_t)n * L->out);
        x = ws->act_top[i];
    }
    return np_sigmoid_bce_fwd(x, b->label, prob, n);
}

/* Backward of (BCE sum * scale): dense grads overwrite gdense (n_dense); table t's row
 * grads ACCUMULATE into drows[t] at rows idx[t][k] (as in forward_core). */
static void backward_core(const np_model_t *m, np_fwd_ws *ws, const np_batch *b, float scale,
                          float *gdense, float *const *drows, const int64_t *const *idx) {
    long n = b->n;
    int d = m->d, T1 = ws->T1;
    float *dy = ws->g0, *dx = ws->g1;
    np_sigmoid_bce_bwd(ws->act_top[m->n_top - 1], b->label, scale, dy, n);
    for (int i = m->n_top - 1; i >= 0; i--) {
        const np_layer *L = &m->top[i];
        if (L->relu) np_relu_bwd(ws->act_top[i], dy, dy, (size_t)n * L->out);
        const float *x = i ? ws->act_top[i - 1] : ws->Z;
        float *dxi = i ? dx : ws->dZ;
        np_linear_bwd(x, m->dense + L->w_off, dy, dxi, gdense + L->w_off, gdense + L->b_off, n,
                      L->in, L->out);
        float *tmp = dy;
        dy = dx;
        dx = tmp;
    }
    np_interact_bwd(ws->F, ws->dZ, n, T1, d, ws->dF);
    for (int t = 0; t < m->T; t++)
        np_embbag_bwd(ws->dF + (size_t)(1 + t) * d, (long)T1 * d, b->offsets + (size_t)t * (n + 1),
                      idx[t], n, d, drows[t]);
    dy = ws->g0;
    dx = ws->g1;
    for (long s = 0; s < n; s++)
        memcpy(dy + (size_t)s * d, ws->dF + (size_t)s * T1 * d, d * 4);
    for (int i = m->n_bot - 1; i >= 0; i--) {
        const np_layer *L = &m->bot[i];
        np_relu_bwd(ws->act_bot[i], dy, dy, (size_t)n * L->out);
        const float *x = i ? ws->act_bot[i - 1] : b->dense;
        np_linear_bwd(x, m->dense + L->w_off, dy, i ? dx : NULL, gdense + L->w_off,
                      gdense + L->b_off, n, L->in, L->out);
        float *tmp = dy;
        dy = dx;
        dx = tmp;
    }
}

np_status np_reference_forward(const np_model_t *m, np_fwd_ws *ws, const np_batch *b, float *prob,
                               double *loss_sum, np_error *err) {
    np_status st = check_batch(m, ws, b, err);
    if (st) return st;
    const float *src[NP_MAX_TABLES];
    const int64_t *idx[NP_MAX_TABLES];
    for (int t = 0; t < m->T; t++) {
        src[t] = m->table[t];
        idx[t] = b->keys;
    }
    *loss_sum = forward_core(m, ws, b, src, idx, prob);
    return NP_OK;
}

np_status np_reference_backward_full(const np_model_t *m, np_fwd_ws *ws, const np_batch *b,
                                     float scale, float *gdense, float **gtable, np_error *err) {
    np_status st = check_batch(m, ws, b, err);
    if (st) return st;
    const int64_t *idx[NP_MAX_TABLES];
    for (int t = 0; t < m->T; t++) {
        idx[t] = b->keys;
        memset(gtable[t], 0, (size_t)m->rows[t] * m->d * sizeof(float));
    }
    backward_core(m, ws, b, scale, gdense, gtable, idx);
    return NP_OK;
}

/* ---------------------------------------------------------------- the trainer */

struct np_reference {
    np_model_t *m;
    np_fwd_ws *ws;
    float *gdense; /* (n_dense) */
    int64_t *uniq; /* (cap_nnz) distinct rows, table by table */
    int64_t *pos;  /* (cap_nnz) position of each batch key in its table's uniq */
    float *rows;   /* (cap_nnz, d) gathered rows */
    float *grows;  /* (cap_nnz, d) their gradients */
    float *st;     /* (cap_nnz) gathered Adagrad state */
    size_t cap_nnz;
};

void np_reference_free(np_reference *r) {
    if (!r) return;
    np_fwd_ws_free(r->ws);
    free(r->gdense);
    free(r->uniq);
    free(r->pos);
    free(r->rows);
    free(r->grows);
    free(r->st);
    free(r);
}

np_status np_reference_create(const np_config *cfg, np_model_t *m, np_reference **out,
                              np_error *err) {
    *out = NULL;
    np_reference *r = np_zalloc(1, sizeof *r, "reference trainer", err);
    if (!r) return NP_STATUS_NO_MEMORY;
    r->m = m;
    /* the oracle is single-threaded by definition (and so reproducible on any machine) */
    openblas_set_num_threads(1);
    np_status st = np_fwd_ws_create(m, cfg->batch, &r->ws, err);
    if (!st && !(r->gdense = np_alloc(m->n_dense, sizeof(float), "dense grads", err)))
        st = NP_STATUS_NO_MEMORY;
    if (st) {
        np_reference_free(r);
        return st;
    }
    *out = r;
    return NP_OK;
}

static np_status ensure_nnz(np_reference *r, size_t nnz, np_error *err) {
    if (nnz <= r->cap_nnz) return NP_OK;
    size_t d = (size_t)r->m->d;
    free(r->uniq);
    free(r->pos);
    free(r->rows);
    free(r->grows);
    free(r->st);
    r->cap_nnz = 0;
    r->uniq = np_alloc(nnz, sizeof(int64_t), "unique keys", err);
    r->pos = np_alloc(nnz, sizeof(int64_t), "key positions", err);
    r->rows = np_alloc(nnz, d * sizeof(float), "gathered rows", err);
    r->grows = np_alloc(nnz, d * sizeof(float), "row gradients", err);
    r->st = np_alloc(nnz, sizeof(float), "gathered optimizer state", err);
    if (!r->uniq || !r->pos || !r->rows || !r->grows || !r->st) return NP_STATUS_NO_MEMORY;
    r->cap_nnz = nnz;
    return NP_OK;
}

np_status np_reference_step(np_reference *r, const np_batch *b, double *loss, np_error *err) {
    np_model_t *m = r->m;
    long n = b->n;
    int d = m->d;
    np_status st = check_batch(m, r->ws, b, err);
    if (!st) st = ensure_nnz(r, b->nnz, err);
    if (st) return st;

    /* route + retrieve: dedup each table's keys, gather the rows the batch touches */
    const float *src[NP_MAX_TABLES];
    float *gsrc[NP_MAX_TABLES];
    const int64_t *idx[NP_MAX_TABLES];
    size_t base[NP_MAX_TABLES + 1], U[NP_MAX_TABLES];
    size_t ubase = 0;
    for (int t = 0; t < m->T; t++) {
        const uint32_t *off = b->offsets + (size_t)t * (n + 1);
        base[t] = ubase;
        if (np_keys_dedup(b->keys + off[0], off[n] - off[0], r->uniq + ubase, &U[t],
                          r->pos + off[0]))
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory deduplicating keys");
        for (size_t u = 0; u < U[t]; u++)
            if (r->uniq[ubase + u] < 0 || r->uniq[ubase + u] >= m->rows[t])
                return np_err(err, NP_STATUS_INTERNAL, "key %lld out of range for table %d",
                              (long long)r->uniq[ubase + u], t);
        np_rows_gather(m->table[t], r->uniq + ubase, (long)U[t], d, r->rows + ubase * d);
        src[t] = r->rows + ubase * d;
        gsrc[t] = r->grows + ubase * d;
        idx[t] = r->pos;
        ubase += U[t];
    }
    base[m->T] = ubase;

    /* train: forward, backward of the mean loss over the global batch */
    double loss_sum = forward_core(m, r->ws, b, src, idx, NULL);
    memset(r->grows, 0, ubase * d * sizeof(float));
    backward_core(m, r->ws, b, 1.0f / (float)n, r->gdense, gsrc, idx);

    /* sparse update of the gathered rows, write-back, then the dense update */
    float lr = (float)m->cfg.lr;
    for (int t = 0; t < m->T; t++) {
        float *rows = r->rows + base[t] * d;
        const float *g = r->grows + base[t] * d;
        const int64_t *keys = r->uniq + base[t];
        if (m->cfg.sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD) {
            float *s = r->st + base[t];
            np_rows_gather(m->state[t], keys, (long)U[t], 1, s);
            np_sparse_rowwise_adagrad(rows, s, g, (long)U[t], d, lr, (float)m->cfg.adagrad_eps);
            np_rows_scatter(s, keys, (long)U[t], 1, m->state[t]);
        } else {
            np_sparse_sgd(rows, g, (long)U[t], d, lr);
        }
        np_rows_scatter(rows, keys, (long)U[t], d, m->table[t]);
    }
    np_sgd_dense(m->dense, r->gdense, m->n_dense, lr);
    *loss = loss_sum / (double)n;
    return NP_OK;
}
