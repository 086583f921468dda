/* The schedule of one step, written once (graph/step.h): which operations, in which order,
 * with which buffers and modes. The order is what makes the dependencies (each buffer's
 * readers after its last writer, its next writer after them: StarPU's sequential
 * consistency), so this file is where dual-buffer pipelining and frozen windows live
 * (docs/pipeline.md). */
#include <stdio.h>

#include "graph/step.h"
#include "runtime/model/graph.h"

static const np_step_op_def ops[NP_OP_COUNT] = {
    [NP_OP_PREFETCH] = {"prefetch", NP_NODE_PREFETCH, 1},
    [NP_OP_H2D] = {"h2d", NP_NODE_H2D, 1},
    [NP_OP_ROUTE] = {"route", NP_NODE_ROUTE, 1},
    [NP_OP_A2A_KEYS] = {"a2a_keys", NP_NODE_EXCHANGE_KEYS, 1},
    [NP_OP_ROUTE_OWNER] = {"route_owner", NP_NODE_ROUTE_OWNER, 1},
    [NP_OP_RETRIEVE] = {"retrieve", NP_NODE_RETRIEVE, 1},
    [NP_OP_SYNC] = {"sync", NP_NODE_SYNC, 1},
    [NP_OP_EXCHANGE_ROWS] = {"exchange_rows", NP_NODE_EXCHANGE_EMB, 1},
    [NP_OP_ROWS_FRESH] = {"rows_fresh", NP_NODE_EXCHANGE_EMB, 1},
    [NP_OP_ROWS_SHARED] = {"rows_shared", NP_NODE_EXCHANGE_EMB, 1},
    [NP_OP_POOL_FWD] = {"pool_fwd", NP_NODE_POOL_FWD, 1},
    [NP_OP_LAYER_FWD] = {"fwd", NP_NODE_FWD, 1},
    [NP_OP_LOSS_FWD] = {"loss_fwd", NP_NODE_LOSS_FWD, 1},
    [NP_OP_LOSS_BWD] = {"loss_bwd", NP_NODE_LOSS_BWD, 1},
    [NP_OP_SUM_EDGES] = {"sum_edges", NP_NODE_BWD, 1},
    [NP_OP_LAYER_BWD] = {"bwd", NP_NODE_BWD, 1},
    [NP_OP_POOL_BWD] = {"pool_bwd", NP_NODE_POOL_BWD, 1},
    [NP_OP_EXCHANGE_GRADS] = {"exchange_grads", NP_NODE_EXCHANGE_GRAD, 1},
    [NP_OP_SUM_DENSE] = {"sum_dense", NP_NODE_BWD, 1},
    [NP_OP_ALLREDUCE] = {"allreduce", NP_NODE_ALLREDUCE, 1},
    [NP_OP_DENSE_UPDATE] = {"dense_update", NP_NODE_DENSE_UPDATE, 1},
    [NP_OP_SPARSE_UPDATE] = {"sparse_update", NP_NODE_SPARSE_UPDATE, 1},
    [NP_OP_WRITEBACK] = {"writeback", NP_NODE_WRITEBACK, 1},
    [NP_OP_ROOM] = {"room", NP_NODE_CONTROL, 0},
    [NP_OP_PARTITION] = {"partition", NP_NODE_DATA, 0},
    [NP_OP_UNPARTITION] = {"unpartition", NP_NODE_DATA, 0},
};

const np_step_op_def *np_step_op_get(np_step_op op) {
    return (unsigned)op < NP_OP_COUNT ? &ops[op] : NULL;
}

const char *np_buf_role_name(np_buf_role r) {
    static const char *const names[] = {
        "dense",    "label", "offsets",  "keys",   "dense_part", "label_part", "uniq",  "pos",
        "sendkeys", "meta",  "recvkeys", "uniq_o", "map",        "E",          "Es",    "tables",
        "state",    "token", "sbuf",     "rbuf",   "gE",         "Rin",        "grows", "obits",
        "rbits",    "P",     "dP",       "loss",   "act",        "dact",       "saved", "scratch",
        "gd",       "edge",  "params",   "glocal", "gdense",     "gall"};
    _Static_assert(sizeof names / sizeof *names == NP_B_ROLE_COUNT, "a name per role");
    return (unsigned)r < NP_B_ROLE_COUNT ? names[r] : "?";
}

void np_step_buf_name(const np_step_buf *b, char *out, size_t size) {
    const char *n = np_buf_role_name((np_buf_role)b->role);
    switch ((np_buf_role)b->role) {
    case NP_B_TABLES:
    case NP_B_STATE:
    case NP_B_TOKEN:
    case NP_B_SBUF:
    case NP_B_RBUF:
    case NP_B_GE:
        snprintf(out, size, "%s", n);
        break;
    case NP_B_DENSE_PART:
    case NP_B_LABEL_PART:
        snprintf(out, size, "%s[%d,c%d]", n, b->s, b->c);
        break;
    case NP_B_P:
    case NP_B_DP:
    case NP_B_LOSS:
        snprintf(out, size, "%s[c%d]", n, b->c);
        break;
    case NP_B_ACT:
    case NP_B_DACT:
    case NP_B_SAVED:
    case NP_B_SCRATCH:
    case NP_B_GD:
        snprintf(out, size, "%s[c%d,v%d]", n, b->c, b->v);
        break;
    case NP_B_EDGE:
        snprintf(out, size, "%s[c%d,v%d,%d]", n, b->c, b->v, b->k);
        break;
    case NP_B_PARAMS:
    case NP_B_GLOCAL:
    case NP_B_GDENSE:
    case NP_B_GALL:
        snprintf(out, size, "%s[v%d]", n, b->v);
        break;
    default:
        snprintf(out, size, "%s[%d]", n, b->s);
    }
}

void np_step_cursor_init(np_step_cursor *c) {
    *c = (np_step_cursor){.fresh_for = -1};
}

/* ---- the walk */

typedef struct walk {
    const np_step_shape *s;
    np_step_cursor *cur;
    np_step_emit emit;
    void *ctx;
    np_error *err;
} walk;

static np_status put(walk *k, np_step_op op, long b, int w, int chunk, int node, int boost) {
    np_step_node n = {.op = op,
                      .kind = ops[op].kind,
                      .batch = b,
                      .window = w,
                      .chunk = chunk,
                      .node = node,
                      .boost = boost,
                      .arg = node};
    return k->emit(k->ctx, &n, k->err);
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        np_status st_ = (call);                                                                    \
        if (st_) return st_;                                                                       \
    } while (0)

/* Stage s (0 prefetch, 1 h2d, 2 route, 3 retrieve) of batch b. */
static np_status stage(walk *k, int s, long b) {
    switch (s) {
    case 0:
        TRY(put(k, NP_OP_ROOM, b, -1, -1, -1, 0));
        return put(k, NP_OP_PREFETCH, b, -1, -1, -1, 0);
    case 1:
        return put(k, NP_OP_H2D, b, -1, -1, -1, 0);
    case 2:
        TRY(put(k, NP_OP_ROUTE, b, -1, -1, -1, 0));
        TRY(put(k, NP_OP_A2A_KEYS, b, -1, -1, -1, 0));
        return put(k, NP_OP_ROUTE_OWNER, b, -1, -1, -1, 0);
    default:
        /* after write-back(b-2), before write-back(b-1): rows of batch b not in b-1 are
         * fresh, the others are refreshed by sync(b) */
        return put(k, NP_OP_RETRIEVE, b, -1, -1, -1, 0);
    }
}

/* A producer's gradient from its edges, in edge order, when it feeds several. */
static np_status sum_edges(walk *k, long b, int w, int ci, int p, int boost) {
    int ne;
    np_graph_grad_edges(k->s->graph, p, &ne);
    if (ne < 2) return NP_OK;
    np_step_node n = {.op = NP_OP_SUM_EDGES,
                      .kind = ops[NP_OP_SUM_EDGES].kind,
                      .batch = b,
                      .window = w,
                      .chunk = ci,
                      .node = p >= 0 ? p : -1,
                      .boost = boost,
                      .arg = p};
    return k->emit(k->ctx, &n, k->err);
}

/* One chunk over the layer graph: pooling, each node's forward in order, the loss, each
 * node's backward in reverse (a node feeding several edges first sums their gradients in
 * edge order), the pooling backward into the window's row gradients. */
static np_status chunk(walk *k, long b, int w, int ci) {
    const np_graph_t *g = k->s->graph;
    int boost = k->s->W - w;
    TRY(put(k, NP_OP_POOL_FWD, b, w, ci, -1, boost));
    for (int v = 0; v < g->n; v++)
        TRY(put(k, NP_OP_LAYER_FWD, b, w, ci, v, boost));
    TRY(put(k, NP_OP_LOSS_FWD, b, w, ci, -1, boost));
    TRY(put(k, NP_OP_LOSS_BWD, b, w, ci, -1, boost));
    for (int v = g->n - 1; v >= 0; v--) {
        TRY(sum_edges(k, b, w, ci, v, boost));
        TRY(put(k, NP_OP_LAYER_BWD, b, w, ci, v, boost));
    }
    TRY(sum_edges(k, b, w, ci, NP_IN_POOLED, boost));
    return put(k, NP_OP_POOL_BWD, b, w, ci, -1, boost);
}

/* ---- the dense all-reduce's buckets: pure functions of the layer graph and s->bucket */

int np_sg_bucket(const np_step_shape *s, int v, size_t *floats) {
    const np_graph_t *g = s->graph;
    size_t n = 0;
    int last = v, layers = 0;
    for (int u = v; u >= 0; u--) {
        if (!g->node[u].pn) continue;
        if (u != v && (s->bucket <= 0 || n >= (size_t)s->bucket || layers == NP_SG_BUCKET_LAYERS))
            break; /* v's is full */
        n += g->node[u].pn;
        last = u;
        layers++;
    }
    if (floats) *floats = n;
    return last;
}

int np_sg_bucket_first(const np_step_shape *s, int v) {
    const np_graph_t *g = s->graph;
    if (v < 0 || v >= g->n || !g->node[v].pn) return 0;
    for (int u = g->n - 1; u >= 0; u--) { /* the buckets from the top: is v one's start? */
        if (!g->node[u].pn) continue;
        if (u == v) return 1;
        u = np_sg_bucket(s, u, NULL); /* the bucket's end; the loop steps past it */
        if (u <= v) return 0;
    }
    return 0;
}

/* After the last window w: node by node in backward order, the chunks' dense gradients
 * summed and (several ranks) all-reduced, a bucket of layers at a time once its last
 * layer is summed; the last window's row gradients go once the backward is past the pooled
 * embeddings' first reader; then the updates. */
static np_status dense_reduce(walk *k, long b, int w) {
    const np_graph_t *g = k->s->graph;
    int sent = 0, first_reader = g->pooled_out[0].node, first = -1;
    for (int v = g->n - 1; v >= 0; v--) {
        if (!g->node[v].pn) continue;
        if (!sent && v < first_reader) {
            TRY(put(k, NP_OP_EXCHANGE_GRADS, b, w, -1, -1, 0));
            sent = 1;
        }
        TRY(put(k, NP_OP_SUM_DENSE, b, -1, -1, v, 0));
        if (first < 0) first = v; /* a bucket begins */
        if (k->s->R > 1 && np_sg_bucket(k->s, first, NULL) == v) {
            np_step_node n = {.op = NP_OP_ALLREDUCE,
                              .kind = ops[NP_OP_ALLREDUCE].kind,
                              .batch = b,
                              .window = -1,
                              .chunk = -1,
                              .node = first,
                              .arg = v};
            TRY(k->emit(k->ctx, &n, k->err));
        }
        if (np_sg_bucket(k->s, first, NULL) == v) first = -1;
    }
    if (!sent) TRY(put(k, NP_OP_EXCHANGE_GRADS, b, w, -1, -1, 0));
    for (int v = 0; v < g->n; v++)
        if (g->node[v].pn) TRY(put(k, NP_OP_DENSE_UPDATE, b, -1, -1, v, 0));
    return NP_OK;
}

/* The windows of batch b, each chunk by chunk with its gradients back; fwp: rows(0),
 * rows(1), grads(0), rows(2), grads(1), ...: window w+1's rows travel while w computes and
 * w's gradients while w+1 computes; otherwise rows(w) follows grads(w-1). Either way the
 * parameters stay frozen until the updates at the end of the batch. */
static np_status windows(walk *k, long b) {
    const np_step_shape *s = k->s;
    const np_pipeline_policy *p = &s->pol;
    for (int w = 0; w < s->W; w++) {
        int next = w + p->overlap_windows; /* the window whose rows go now, if not sent yet */
        if (next >= p->early_windows && next < s->W)
            TRY(put(k, NP_OP_EXCHANGE_ROWS, b, next, -1, -1, 0));
        for (int c = 0; c < s->C; c++) /* a window's chunks run in parallel */
            TRY(chunk(k, b, w, w * s->C + c));
        /* split: once every reader of the early windows' Rin is submitted, batch b+1's
         * fresh rows take the wire under b's last window, before its gradients and the
         * dense all-reduce; b+1 was retrieved this step (the sync's condition) */
        if (w == s->W - 1 && p->split_rows && k->cur->next[3] > b + 1) {
            for (int v = 0; v < p->early_windows; v++)
                TRY(put(k, NP_OP_ROWS_FRESH, b + 1, v, -1, -1, 0));
            k->cur->fresh_for = b + 1;
        }
        /* the last window's row gradients go inside the dense reduction */
        TRY(w < s->W - 1 ? put(k, NP_OP_EXCHANGE_GRADS, b, w, -1, -1, 0) : dense_reduce(k, b, w));
    }
    return NP_OK;
}

/* Stage 5 of batch b: the windows between the slot's partition and its undoing (owed even
 * when a submission failed, so the slot is whole again), the sparse update and write-back.
 * They keep the last window's boost (1), as they always had. */
static np_status train(walk *k, long b) {
    TRY(put(k, NP_OP_PARTITION, b, -1, -1, -1, 0));
    np_status st = windows(k, b);
    np_status un = put(k, NP_OP_UNPARTITION, b, -1, -1, -1, 0);
    if (st || un) return st ? st : un;
    TRY(put(k, NP_OP_SPARSE_UPDATE, b, -1, -1, -1, 1));
    return put(k, NP_OP_WRITEBACK, b, -1, -1, -1, 1);
}

np_status np_step_walk(const np_step_shape *s, np_step_cursor *cur, long t, int n,
                       np_step_emit emit, void *ctx, np_error *err) {
    walk k = {s, cur, emit, ctx, err};
    const np_pipeline_policy *p = &s->pol;
    /* 1. the training batch's own early stages, if no look-ahead ran them (sequential,
     *    the first steps) */
    for (int g = 0; g < 4; g++)
        for (; cur->next[g] <= t; cur->next[g]++)
            TRY(stage(&k, g, t));
    /* 2. its first windows' rows: whole, or (split) the part the previous step did not
     *    send; then the stages of the batches ahead, in the order prefetch(t+4), h2d(t+3),
     *    route(t+2), retrieve(t+1), never past the newest batch given. Retrieve(t+1) stays
     *    before write-back(t): the rule. */
    for (int w = 0; w < p->early_windows; w++)
        TRY(put(&k, cur->fresh_for == t ? NP_OP_ROWS_SHARED : NP_OP_EXCHANGE_ROWS, t, w, -1, -1,
                0));
    static const int lag[4] = {4, 3, 2, 1};
    long last = t + (n - 1 < p->ahead ? n - 1 : p->ahead);
    for (int g = 0; g < 4; g++) {
        long upto = t + lag[g] < last ? t + lag[g] : last;
        for (; cur->next[g] <= upto; cur->next[g]++)
            TRY(stage(&k, g, cur->next[g]));
    }
    /* 3. the rest of batch t, then (dual buffer) the sync of the rows t+1 shares with t:
     *    t+1 was retrieved before write-back(t) */
    TRY(train(&k, t));
    if (p->sync && cur->next[3] > t + 1) TRY(put(&k, NP_OP_SYNC, t + 1, -1, -1, -1, 0));
    return NP_OK;
}
