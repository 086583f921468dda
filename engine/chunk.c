/* One chunk of a batch as a task graph over the model's layer graph: pooling, each node's
 * forward in order, the loss, each node's backward in reverse (a node feeding several
 * edges first sums their gradients in edge order), the pooling backward; and the dense
 * reduction after the batch's last window. Buffers come from the layers' shape functions.
 * Not here: the stages around training (schedule.c) or the arithmetic (codelets/). */
#include <string.h>

#include "core/util.h"
#include "engine/engine_impl.h"

np_status np_chunk_register(np_sp_engine *e, np_chunk *k, np_error *err) {
    const np_graph_t *g = e->m->graph;
    size_t n = (size_t)k->n, f = sizeof(float);
    np_status st = np_buf_reg(&k->P, n * (size_t)g->pooled_w, f, "pooled embeddings", err);
    if (!st) st = np_buf_reg(&k->dP, n * (size_t)g->pooled_w, f, "pooled grads", err);
    if (!st) st = np_buf_reg(&k->loss, 1, sizeof(double), "chunk loss", err);
    for (int v = 0; v < g->n && !st; v++) {
        const np_node *x = &g->node[v];
        const np_layer_shape *s = &x->shape;
        st = np_buf_reg(&k->act[v], n * (size_t)s->out, f, "activations", err);
        if (!st) st = np_buf_reg(&k->dact[v], n * (size_t)s->out, f, "activation grads", err);
        if (!st && s->saved)
            st = np_buf_reg(&k->saved[v], n * (size_t)s->saved, f, "saved activations", err);
        if (!st && x->pn) st = np_buf_reg(&k->gd[v], x->pn, f, "chunk dense grads", err);
        if (!st && s->scratch) { /* no home memory: StarPU provides it per task */
            if (n * (size_t)s->scratch > UINT32_MAX)
                st = np_err(err, NP_STATUS_UNSUPPORTED,
                            "layer %s: %zu scratch floats for a chunk exceed a StarPU vector; "
                            "use more chunks",
                            x->name, n * (size_t)s->scratch);
            else
                starpu_vector_data_register(&k->scratch[v], -1, 0,
                                            (uint32_t)(n * (size_t)s->scratch), f);
        }
        for (int i = 0; i < s->n_in && !st; i++)
            if (np_graph_grad_route(g, v, i) == NP_GRAD_EDGE)
                st = np_buf_reg(&k->edge[v][i], n * (size_t)s->in[i], f, "edge grads", err);
    }
    return st;
}

void np_chunk_unregister(np_chunk *k) {
    np_buf_unreg(&k->P);
    np_buf_unreg(&k->dP);
    np_buf_unreg(&k->loss);
    for (int v = 0; v < NP_MAX_NODES; v++) {
        np_buf_unreg(&k->act[v]);
        np_buf_unreg(&k->dact[v]);
        np_buf_unreg(&k->saved[v]);
        np_buf_unreg(&k->gd[v]);
        if (k->scratch[v]) starpu_data_unregister_no_coherency(k->scratch[v]);
        k->scratch[v] = NULL;
        for (int i = 0; i < NP_LAYER_MAX_IN; i++)
            np_buf_unreg(&k->edge[v][i]);
    }
}

/* Where the gradient of node v's input i goes (as in the reference trainer). */
static np_h grad_target(const np_graph_t *g, const np_chunk *k, int v, int i) {
    int p = g->node[v].in[i];
    switch (np_graph_grad_route(g, v, i)) {
    case NP_GRAD_NONE: return NULL;
    case NP_GRAD_EDGE: return k->edge[v][i].h;
    default: return p == NP_IN_POOLED ? k->dP.h : k->dact[p].h;
    }
}

/* A producer's gradient from its edges, in edge order, when it feeds several. */
static np_status sum_edges(const np_task_ctx *ctx, const np_graph_t *g, const np_chunk *k, int p,
                           np_h out, np_error *err) {
    int ne;
    const np_edge *ed = np_graph_grad_edges(g, p, &ne);
    if (ne < 2) return NP_OK;
    np_h parts[NP_GRAPH_MAX_EDGES];
    for (int i = 0; i < ne; i++)
        parts[i] = k->edge[ed[i].node][ed[i].slot].h;
    size_t count = (size_t)k->n * (size_t)np_graph_width(g, p);
    return np_submit_sum(ctx, NP_NODE_BWD, ne, parts, count, NULL, 0, 0, out, err);
}

np_status np_chunk_submit(np_sp_engine *e, np_task_ctx *ctx, np_chunk *k, const np_slot *sl,
                          const np_rset *rs, np_error *err) {
    const np_model_t *m = e->m;
    const np_graph_t *g = m->graph;
    np_status st = NP_OK;
    np_cl_emb_args ea = {.nb = e->nb,
                         .row0 = k->row0,
                         .n = k->n,
                         .T = m->T,
                         .d = m->d,
                         .w = k->w,
                         .W = e->W,
                         .R = e->R,
                         .zero = k == &e->ch[k->w * e->C],
                         .L = np_config_seq_slots(&m->cfg)};
    np_task_ctx c = *ctx;
    int ci = (int)(k - e->ch);
    c.chunk = ci;
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((st = (call))) return st;                                                              \
    } while (0)
    TRY(np_submit_pool_fwd(&c, &ea, e->Rin[k->w].h, sl->offsets.h, rs->pos.h, k->P.h, rs->meta.h,
                           err));
    np_cl_layer_args a[NP_MAX_NODES];
    np_layer_handles h[NP_MAX_NODES];
    for (int v = 0; v < g->n; v++) {
        const np_node *x = &g->node[v];
        a[v] = (np_cl_layer_args){.def = x->def,
                                  .n = k->n,
                                  .precision = e->cfg.precision,
                                  .hp = x->hp,
                                  .shape = x->shape};
        h[v] = (np_layer_handles){.params = e->node_params[v],
                                  .out = k->act[v].h,
                                  .saved = k->saved[v].h,
                                  .scratch = k->scratch[v],
                                  .dout = k->dact[v].h,
                                  .gd = k->gd[v].h};
        for (int p = 0; p < x->shape.n_params; p++) /* offsets in the node's own block */
            a[v].poff[p] = a[v].goff[p] = x->poff[p] - x->p0;
        for (int i = 0; i < x->shape.n_in; i++) {
            int p = x->in[i];
            h[v].in[i] = p == NP_IN_DENSE    ? sl->dense_part[ci]
                         : p == NP_IN_POOLED ? k->P.h
                                             : k->act[p].h;
            h[v].din[i] = grad_target(g, k, v, i);
        }
        c.node = v;
        TRY(np_submit_layer(&c, 0, &a[v], &h[v], err));
    }
    c.node = -1;
    /* the loss is the mean over the GLOBAL batch: every rank scales by 1/G */
    np_cl_bce_args ba = {.row0 = 0,
                         .n = k->n,
                         .scale = 1.0f / (float)e->cfg.batch,
                         .output = np_config_loss(&e->cfg) == NP_LOSS_OUTPUT};
    TRY(np_submit_bce(&c, &ba, k->act[g->output].h, sl->label_part[ci], k->loss.h, k->dact[g->output].h,
                      err));
    for (int v = g->n - 1; v >= 0; v--) {
        c.node = v;
        TRY(sum_edges(&c, g, k, v, k->dact[v].h, err));
        TRY(np_submit_layer(&c, 1, &a[v], &h[v], err));
    }
    c.node = -1;
    TRY(sum_edges(&c, g, k, NP_IN_POOLED, k->dP.h, err));
    /* embedding-row gradients of this chunk, added to its window's */
    TRY(np_submit_pool_bwd(&c, &ea, k->dP.h, sl->offsets.h, rs->pos.h, rs->meta.h,
                           e->grows[k->w].h, err));
#undef TRY
    return NP_OK;
}

np_status np_dense_reduce_submit(np_sp_engine *e, long b, int w, np_error *err) {
    const np_graph_t *g = e->m->graph;
    np_batch_args a;
    np_engine_batch_args(e, b, &a);
    np_h parts[64];
    int K = e->W * e->C, sent = 0;
    int first_reader = g->pooled_out[0].node; /* the pooled embeddings' first consumer */
    np_status st;
    for (int v = g->n - 1; v >= 0; v--) {
        const np_node *x = &g->node[v];
        if (!x->pn) continue;
        if (!sent && v < first_reader) {
            if ((st = np_exchange_grads_submit(e, b, w, err))) return st;
            sent = 1;
        }
        a.ctx.window = -1;
        a.ctx.node = v;
        a.xa.n = x->pn;
        for (int k = 0; k < K; k++)
            parts[k] = e->ch[k].gd[v].h;
        /* one rank: the chunk sum is the gradient; nothing to all-reduce, nothing to copy */
        np_h sum_to = e->R > 1 ? e->glocal[v].h : e->gdense[v].h;
        if ((st = np_submit_sum(&a.ctx, NP_NODE_BWD, K, parts, x->pn, NULL, 0, 0, sum_to, err)) ||
            (e->R > 1 && (st = np_submit_allreduce(&a.ctx, &a.xa, e->glocal[v].h, e->gdense[v].h,
                                                   e->gall[v].h, e->token.h, err))))
            return st;
    }
    a.ctx.node = -1;
    if (!sent && (st = np_exchange_grads_submit(e, b, w, err))) return st;
    for (int v = 0; v < g->n; v++) {
        const np_node *x = &g->node[v];
        if (!x->pn) continue;
        a.ctx.node = v;
        a.da.n = x->pn;
        a.da.off = 0; /* the node's own handle */
        if ((st = np_submit_dense_update(&a.ctx, &a.da, e->node_params[v], e->gdense[v].h, err)))
            return st;
    }
    return NP_OK;
}
