/* The step graph into StarPU: each node the walker (graph/step.c) hands over becomes one
 * task, over the handles its contract names (graph/contract.c) resolved here, with the
 * codelet's arguments of its batch, window and chunk. The submitters take the contract's
 * buffers as they are; a layer task lists its own by name, and np_task_submit checks them
 * against the contract, so what runs is the graph `nestpipe graph` shows.
 * Not here: the order (graph/step.c), the driver's step (schedule.c) or buffers (engine.c). */
#include "runtime/core/util.h"
#include "runtime/engine/engine_impl.h"
#include "runtime/model/graph.h"

np_h np_engine_handle(const np_sp_engine *e, const np_step_buf *b) {
    const np_slot *sl = &e->slot[b->s % NP_SLOTS];
    const np_rset *r = &e->rset[b->s % NP_RSETS];
    const np_chunk *k = &e->ch[b->c];
    switch ((np_buf_role)b->role) {
    case NP_B_DENSE:
        return sl->dense.h;
    case NP_B_LABEL:
        return sl->label.h;
    case NP_B_OFFSETS:
        return sl->offsets.h;
    case NP_B_KEYS:
        return sl->keys.h;
    case NP_B_DENSE_PART:
        return sl->dense_part[b->c];
    case NP_B_LABEL_PART:
        return sl->label_part[b->c];
    case NP_B_UNIQ:
        return r->uniq.h;
    case NP_B_POS:
        return r->pos.h;
    case NP_B_SENDKEYS:
        return r->sendkeys.h;
    case NP_B_META:
        return r->meta.h;
    case NP_B_RECVKEYS:
        return r->recvkeys.h;
    case NP_B_UNIQ_O:
        return r->uniq_o.h;
    case NP_B_MAP:
        return r->map.h;
    case NP_B_E:
        return e->E[b->s].h;
    case NP_B_ES:
        return e->Es[b->s].h;
    case NP_B_TABLES:
        return e->tables;
    case NP_B_STATE:
        return e->state;
    case NP_B_TOKEN:
        return e->token.h;
    case NP_B_SBUF:
        return e->sbuf.h;
    case NP_B_RBUF:
        return e->rbuf.h;
    case NP_B_GE:
        return e->gE.h;
    case NP_B_RIN:
        return e->Rin[b->s].h;
    case NP_B_GROWS:
        return e->grows[b->s].h;
    case NP_B_OBITS:
        return e->obits[b->s].h;
    case NP_B_RBITS:
        return e->rbits[b->s].h;
    case NP_B_P:
        return k->P.h;
    case NP_B_DP:
        return k->dP.h;
    case NP_B_LOSS:
        return k->loss.h;
    case NP_B_ACT:
        return k->act[b->v].h;
    case NP_B_DACT:
        return k->dact[b->v].h;
    case NP_B_SAVED:
        return k->saved[b->v].h;
    case NP_B_SCRATCH:
        return k->scratch[b->v];
    case NP_B_GD:
        return k->gd[b->v].h;
    case NP_B_EDGE:
        return k->edge[b->v][b->k].h;
    case NP_B_PARAMS:
        return e->node_params[b->v];
    case NP_B_GLOCAL:
        return e->glocal[b->v].h;
    case NP_B_GDENSE:
        return e->gdense[b->v].h;
    case NP_B_GALL:
        return e->gall[b->v].h;
    default:
        return NULL;
    }
}

/* A layer task of chunk k: the handles by name (tasks/layer.c lists them the way
 * graph/contract.c does; np_task_submit compares the two). */
static np_status submit_layer(np_sp_engine *e, const np_task_ctx *ctx, const np_step_node *n,
                              np_error *err) {
    const np_graph_t *g = e->m->graph;
    const np_node *x = &g->node[n->node];
    const np_chunk *k = &e->ch[n->chunk];
    const np_slot *sl = &e->slot[n->batch % NP_SLOTS];
    int v = n->node;
    np_cl_layer_args a = {
        .def = x->def, .n = k->n, .precision = e->cfg.precision, .hp = x->hp, .shape = x->shape};
    np_layer_handles h = {.params = e->node_params[v],
                          .out = k->act[v].h,
                          .saved = k->saved[v].h,
                          .scratch = k->scratch[v],
                          .dout = k->dact[v].h,
                          .gd = k->gd[v].h};
    for (int p = 0; p < x->shape.n_params; p++) /* offsets in the node's own block */
        a.poff[p] = a.goff[p] = x->poff[p] - x->p0;
    for (int i = 0; i < x->shape.n_in; i++) {
        int p = x->in[i];
        h.in[i] = p == NP_IN_DENSE    ? sl->dense_part[n->chunk]
                  : p == NP_IN_POOLED ? k->P.h
                                      : k->act[p].h;
        switch (np_graph_grad_route(g, v, i)) {
        case NP_GRAD_NONE:
            h.din[i] = NULL;
            break;
        case NP_GRAD_EDGE:
            h.din[i] = k->edge[v][i].h;
            break;
        default:
            h.din[i] = p == NP_IN_POOLED ? k->dP.h : k->dact[p].h;
        }
    }
    return np_submit_layer(ctx, n->op == NP_OP_LAYER_BWD, &a, &h, err);
}

/* The arguments of a chunk's pooling tasks. */
static np_cl_emb_args emb_args(const np_sp_engine *e, int ci) {
    const np_chunk *k = &e->ch[ci];
    return (np_cl_emb_args){.nb = e->nb,
                            .row0 = k->row0,
                            .n = k->n,
                            .T = e->m->T,
                            .d = e->m->d,
                            .w = k->w,
                            .W = e->W,
                            .R = e->R,
                            .zero = ci == k->w * e->C, /* the window's first chunk */
                            .L = np_config_seq_slots(&e->m->cfg)};
}

/* Node n as one task over its contract's buffers b. */
static np_status submit_task(np_sp_engine *e, np_batch_args *a, const np_step_node *n,
                             const np_batch *src, const np_task_bufs *b, np_error *err) {
    const np_task_ctx *c = &a->ctx;
    const np_graph_t *g = e->m->graph;
    switch (n->op) {
    case NP_OP_PREFETCH: {
        np_cl_prefetch_args pa = {.src = src, .W = e->W, .cluster = e->cluster};
        return np_submit_prefetch(c, &pa, b, err);
    }
    case NP_OP_H2D:
        return np_submit_h2d(c, b, err);
    case NP_OP_ROUTE:
        return np_submit_route(c, &a->xa, b, err);
    case NP_OP_A2A_KEYS:
        return np_submit_a2a_keys(c, &a->xa, b, err);
    case NP_OP_ROUTE_OWNER:
        return np_submit_route_owner(c, &a->xa, b, err);
    case NP_OP_RETRIEVE:
        return np_submit_retrieve(c, &a->wa, b, err);
    case NP_OP_SYNC:
        return np_submit_sync(c, &a->ya, b, err);
    case NP_OP_EXCHANGE_ROWS:
        return np_submit_exchange_rows(c, &a->xa, b, err);
    case NP_OP_ROWS_FRESH:
        return np_submit_rows_fresh(c, &a->xa, b, err);
    case NP_OP_ROWS_SHARED:
        return np_submit_rows_shared(c, &a->xa, b, err);
    case NP_OP_EXCHANGE_GRADS:
        return np_submit_exchange_grads(c, &a->xa, b, err);
    case NP_OP_ALLREDUCE: {
        np_step_shape s;
        np_engine_shape(e, &s);
        a->xa.layers = 0;
        if (np_sg_bucket(&s, n->node, &a->xa.n) != n->arg)
            return np_err(err, NP_STATUS_INTERNAL, "all-reduce bucket from node %d", n->node);
        for (int u = n->node; u >= n->arg; u--)
            a->xa.layers += g->node[u].pn > 0;
        return np_submit_allreduce(c, &a->xa, b, err);
    }
    case NP_OP_POOL_FWD:
    case NP_OP_POOL_BWD: {
        np_cl_emb_args ea = emb_args(e, n->chunk);
        return n->op == NP_OP_POOL_FWD ? np_submit_pool_fwd(c, &ea, b, err)
                                       : np_submit_pool_bwd(c, &ea, b, err);
    }
    case NP_OP_LAYER_FWD:
    case NP_OP_LAYER_BWD:
        return submit_layer(e, c, n, err);
    case NP_OP_LOSS_FWD:
    case NP_OP_LOSS_BWD: {
        /* the loss is the mean over the GLOBAL batch: every rank scales by 1/G */
        np_cl_bce_args ba = {.row0 = 0,
                             .n = e->ch[n->chunk].n,
                             .scale = 1.0f / (float)e->cfg.batch,
                             .output = np_config_loss(&e->cfg) == NP_LOSS_OUTPUT};
        return n->op == NP_OP_LOSS_FWD ? np_submit_loss_fwd(c, &ba, b, err)
                                       : np_submit_loss_bwd(c, &ba, b, err);
    }
    case NP_OP_SUM_EDGES:
        return np_submit_sum(c, (size_t)e->ch[n->chunk].n * (size_t)np_graph_width(g, n->arg), b,
                             err);
    case NP_OP_SUM_DENSE:
        return np_submit_sum(c, g->node[n->node].pn, b, err);
    case NP_OP_DENSE_UPDATE:
        a->da.n = g->node[n->node].pn;
        a->da.off = 0; /* the node's own handle */
        return np_submit_dense_update(c, &a->da, b, err);
    case NP_OP_SPARSE_UPDATE:
        return np_submit_sparse_update(c, &a->sa, b, err);
    case NP_OP_WRITEBACK:
        return np_submit_writeback(c, &a->wa, b, err);
    default:
        return np_err(err, NP_STATUS_INTERNAL, "step graph operation %d is not a task", n->op);
    }
}

np_status np_engine_submit_node(np_sp_engine *e, const np_step_node *n, const np_batch *src,
                                np_error *err) {
    np_batch_args a;
    np_engine_batch_args(e, n->batch, &a);
    a.ctx.window = n->window;
    a.ctx.boost = n->boost;
    a.ctx.chunk = n->chunk;
    a.ctx.node = n->node;
    if (n->window >= 0) a.xa.w = n->window;
    np_step_buf buf[NP_STEP_MAX_BUFS];
    uint8_t mode[NP_STEP_MAX_BUFS];
    np_h h[NP_STEP_MAX_BUFS];
    enum starpu_data_access_mode m[NP_STEP_MAX_BUFS];
    int nb = np_step_buffers(&e->shape, n, buf, mode);
    for (int i = 0; i < nb; i++) {
        h[i] = np_engine_handle(e, &buf[i]);
        m[i] = (enum starpu_data_access_mode)mode[i];
    }
    if (e->cp) {
        int p = np_sg_prio_of(e->cp, n, e->step);
        a.ctx.has_prio = p >= 0;
        a.ctx.prio = p;
    }
    int64_t deps[NP_STEP_MAX_BUFS];
    if (e->trace) { /* its number, and its edges as the graph declares them */
        if (!e->link) e->link = np_sg_linker_new();
        a.ctx.trace_id = np_trace_new_id(e->trace);
        a.ctx.n_deps = e->link ? np_sg_link_producers(e->link, a.ctx.trace_id, buf, mode, nb,
                                                      deps, NP_STEP_MAX_BUFS)
                               : 0;
        if (a.ctx.n_deps < 0) a.ctx.n_deps = 0; /* out of memory: the trace loses the edges */
        a.ctx.deps = deps;
    }
    np_task_bufs b = {nb, h, m, (int)n->kind, np_step_op_get(n->op)->name};
    a.ctx.expect = &b; /* what np_task_submit holds the task to (the layers list their own) */
    return submit_task(e, &a, n, src, &b, err);
}
