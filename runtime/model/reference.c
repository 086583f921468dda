/* The reference trainer, nestpipe's oracle: one process, one thread, the whole global
 * batch at once, plain loops over the codelets/ kernels. Every engine and pipeline mode is
 * checked against it, so it stays small and obvious rather than fast. It walks the
 * model's layer graph calling the layers' CPU kernels directly: no StarPU, no MPI.
 * One step: dedup keys per table -> gather rows -> forward -> backward -> sparse update of
 * the gathered rows -> write them back -> dense SGD. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/kernels/kernels.h"
#include "runtime/core/util.h"
#include "runtime/data/data.h"
#include "runtime/model/model.h"

struct np_fwd_ws {
    long cap;                   /* samples the buffers hold */
    float *P, *dP;              /* (cap, T*d) pooled embeddings and their gradient */
    float *act[NP_MAX_NODES];   /* (cap, out) each node's output */
    float *saved[NP_MAX_NODES]; /* (cap, saved) kept by forward for backward, or NULL */
    float *dact[NP_MAX_NODES];  /* (cap, out) gradient of each node's output */
    /* (cap, in width) gradient of input slot k of node v when its producer feeds several
     * edges (summed into the producer's gradient in edge order); NULL when the producer
     * has this one edge (written into its gradient directly) or is the data */
    float *edge[NP_MAX_NODES][NP_LAYER_MAX_IN];
    float *scratch; /* (cap, largest scratch) */
};

void np_fwd_ws_free(np_fwd_ws *ws) {
    if (!ws) return;
    for (int v = 0; v < NP_MAX_NODES; v++) {
        free(ws->act[v]);
        free(ws->saved[v]);
        free(ws->dact[v]);
        for (int k = 0; k < NP_LAYER_MAX_IN; k++)
            free(ws->edge[v][k]);
    }
    free(ws->P);
    free(ws->dP);
    free(ws->scratch);
    free(ws);
}

/* Where the gradient of node v's input k goes: NULL (the data), the producer's own
 * gradient (its only edge), or the edge's buffer (several edges). */
static float *grad_target(const np_graph_t *g, np_fwd_ws *ws, int v, int k) {
    int p = g->node[v].in[k];
    switch (np_graph_grad_route(g, v, k)) {
    case NP_GRAD_NONE: return NULL;
    case NP_GRAD_EDGE: return ws->edge[v][k];
    default: return p == NP_IN_POOLED ? ws->dP : ws->dact[p];
    }
}

np_status np_fwd_ws_create(const np_model_t *m, long cap, np_fwd_ws **out, np_error *err) {
    *out = NULL;
    np_fwd_ws *ws = np_zalloc(1, sizeof *ws, "workspace", err);
    if (!ws) return NP_STATUS_NO_MEMORY;
    const np_graph_t *g = m->graph;
    ws->cap = cap;
    size_t c = (size_t)cap;
    int ok = 1, scratch = 1;
    for (int v = 0; v < g->n; v++) {
        const np_layer_shape *s = &g->node[v].shape;
        ok &= (ws->act[v] = np_alloc(c, (size_t)s->out * 4, "activations", err)) != NULL;
        ok &= (ws->dact[v] = np_alloc(c, (size_t)s->out * 4, "activation grads", err)) != NULL;
        if (s->saved)
            ok &= (ws->saved[v] = np_alloc(c, (size_t)s->saved * 4, "saved activations", err)) !=
                  NULL;
        if (s->scratch > scratch) scratch = s->scratch;
        for (int k = 0; k < s->n_in; k++)
            if (np_graph_grad_route(g, v, k) == NP_GRAD_EDGE)
                ok &= (ws->edge[v][k] = np_alloc(c, (size_t)s->in[k] * 4, "edge grads", err)) !=
                      NULL;
    }
    size_t pw = (size_t)g->pooled_w;
    ok &= (ws->P = np_alloc(c, pw * 4, "pooled embeddings", err)) != NULL;
    ok &= (ws->dP = np_alloc(c, pw * 4, "pooled grads", err)) != NULL;
    ok &= (ws->scratch = np_alloc(c, (size_t)scratch * 4, "layer scratch", err)) != NULL;
    if (!ok) {
        np_fwd_ws_free(ws);
        return NP_STATUS_NO_MEMORY;
    }
    *out = ws;
    return NP_OK;
}

static np_status check_batch(const np_model_t *m, const np_fwd_ws *ws, const np_batch *b,
                             np_error *err) {
    if (b->n > ws->cap || b->n_tables != m->T || b->n_dense != np_config_dense(&m->cfg))
        return np_err(err, NP_STATUS_INTERNAL,
                      "batch shape (n=%ld, dense=%d, tables=%d) does not fit the model "
                      "(cap=%ld, dense=%d, tables=%d)",
                      b->n, b->n_dense, b->n_tables, ws->cap, np_config_dense(&m->cfg), m->T);
    np_status st = np_batch_check_seq(b, np_config_seq_slots(&m->cfg), err);
    if (st) return st;
    /* a key outside its table would read (or, backward, write) outside its rows: a
     * program's own batch is checked here as route checks the engine's */
    for (int t = 0; t < m->T; t++) {
        const uint32_t *o = b->offsets + (size_t)t * (size_t)(b->n + 1);
        for (uint32_t k = o[0]; k < o[b->n]; k++)
            if (b->keys[k] < 0 || b->keys[k] >= m->rows[t])
                return np_err(err, NP_STATUS_BAD_INPUT,
                              "batch key %lld of table %d is outside its %lld rows",
                              (long long)b->keys[k], t, (long long)m->rows[t]);
    }
    return NP_OK;
}

/* The kernel arguments of node v on the batch's n samples; backward ones too if bwd. */
static np_layer_io node_io(const np_model_t *m, np_fwd_ws *ws, const np_batch *b, int v, int bwd,
                           float *gdense) {
    const np_graph_t *g = m->graph;
    const np_node *x = &g->node[v];
    np_layer_io io = {.hp = &x->hp,
                      .shape = &x->shape,
                      .n = b->n,
                      .out = ws->act[v],
                      .saved = ws->saved[v],
                      .scratch = x->shape.scratch ? ws->scratch : NULL,
                      .precision = m->cfg.precision};
    for (int k = 0; k < x->shape.n_in; k++) {
        int p = x->in[k];
        io.in[k] = p == NP_IN_DENSE ? b->dense : p == NP_IN_POOLED ? ws->P : ws->act[p];
        if (bwd) io.din[k] = grad_target(g, ws, v, k);
    }
    for (int p = 0; p < x->shape.n_params; p++) {
        io.param[p] = m->dense + x->poff[p];
        if (bwd) io.dparam[p] = gdense + x->poff[p];
    }
    if (bwd) io.dout = ws->dact[v];
    return io;
}

/* A producer's gradient from its edges, in edge order, when it feeds several. */
static void sum_edges(const np_graph_t *g, np_fwd_ws *ws, int p, long n, float *out) {
    int ne;
    const np_edge *e = np_graph_grad_edges(g, p, &ne);
    if (ne < 2) return;
    const float *parts[NP_GRAPH_MAX_EDGES];
    for (int i = 0; i < ne; i++)
        parts[i] = ws->edge[e[i].node][e[i].slot];
    np_sum_ordered(parts, ne, (size_t)n * (size_t)np_graph_width(g, p), out);
}

/* Forward over the batch: pooling, then every node in order, then the loss. Table t's
 * bags pool rows src[t][idx[t][k]] (k absolute into the batch's key array): the tables
 * themselves with idx = keys, or gathered rows with idx = positions in the gathered set.
 * Returns the BCE sum; prob (n) optional. */
static double forward_core(const np_model_t *m, np_fwd_ws *ws, const np_batch *b,
                           const float *const *src, const int64_t *const *idx, float *prob) {
    const np_graph_t *g = m->graph;
    long n = b->n;
    int d = m->d;
    int L = np_config_seq_slots(&m->cfg);
    for (int t = 0; t < m->T; t++) {
        float *P = ws->P + (size_t)np_slot_first(t, L) * d;
        const uint32_t *off = b->offsets + (size_t)t * (n + 1);
        if (t == 0 && L > 0)
            np_embseq_fwd(src[t], off, idx[t], n, L, d, P, (long)g->pooled_w);
        else
            np_embbag_fwd(src[t], off, idx[t], n, d, P, (long)g->pooled_w);
    }
    for (int v = 0; v < g->n; v++) {
        np_layer_io io = node_io(m, ws, b, v, 0, NULL);
        np_node_def(&g->node[v])->fwd(&io);
    }
    return np_loss_fwd(np_config_loss(&m->cfg) == NP_LOSS_OUTPUT, ws->act[g->output], b->label,
                       prob, n);
}

/* Backward of (BCE sum * scale): dense grads overwrite gdense (n_dense); table t's row
 * grads ACCUMULATE into drows[t] at rows idx[t][k] (as in forward_core). Nodes run in
 * reverse order; a node that feeds several edges first sums their gradients. */
static void backward_core(const np_model_t *m, np_fwd_ws *ws, const np_batch *b, float scale,
                          float *gdense, float *const *drows, const int64_t *const *idx) {
    const np_graph_t *g = m->graph;
    long n = b->n;
    int d = m->d;
    np_loss_bwd(np_config_loss(&m->cfg) == NP_LOSS_OUTPUT, ws->act[g->output], b->label, scale,
                ws->dact[g->output], n);
    for (int v = g->n - 1; v >= 0; v--) {
        sum_edges(g, ws, v, n, ws->dact[v]);
        np_layer_io io = node_io(m, ws, b, v, 1, gdense);
        np_node_def(&g->node[v])->bwd(&io);
    }
    sum_edges(g, ws, NP_IN_POOLED, n, ws->dP);
    int L = np_config_seq_slots(&m->cfg);
    for (int t = 0; t < m->T; t++) {
        const float *dP = ws->dP + (size_t)np_slot_first(t, L) * d;
        const uint32_t *off = b->offsets + (size_t)t * (n + 1);
        if (t == 0 && L > 0)
            np_embseq_bwd(dP, (long)g->pooled_w, off, idx[t], n, L, d, drows[t]);
        else
            np_embbag_bwd(dP, (long)g->pooled_w, off, idx[t], n, d, drows[t]);
    }
}

const float *np_fwd_ws_values(const np_fwd_ws *ws, int node) {
    return node == NP_IN_POOLED ? ws->P : node >= 0 ? ws->act[node] : NULL;
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
    long steps; /* steps taken, for messages */
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
    r->steps++;
    /* divergence stops the run here, naming the tensor, rather than ending with NaN
     * parameters: the rows just updated, then every dense tensor */
    char what[96];
    for (int t = 0; t < m->T; t++)
        if (!np_all_finite(r->rows + base[t] * d, U[t] * d)) {
            snprintf(what, sizeof what, "emb.%d", t);
            return np_model_diverged(m, r->steps, what, err);
        }
    const np_graph_t *g = m->graph;
    for (int v = 0; v < g->n; v++)
        for (int p = 0; p < g->node[v].shape.n_params; p++)
            if (!np_all_finite(m->dense + g->node[v].poff[p],
                               np_param_count(&g->node[v].shape.param[p]))) {
                snprintf(what, sizeof what, "%s.%s", g->node[v].name,
                         g->node[v].shape.param[p].name);
                return np_model_diverged(m, r->steps, what, err);
            }
    *loss = loss_sum / (double)n;
    return NP_OK;
}
