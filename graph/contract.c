/* Each operation's buffer contract, written once: the buffers a task of the step graph
 * reads and writes, in the order its codelet finds them (NP_BUF(buffers, i)), with their
 * access modes (graph/step.h np_step_buffers). The engine submits exactly these
 * (runtime/engine/submit.c resolves each to its handle; np_task_submit refuses a task whose
 * buffers differ) and np_step_graph derives its edges from them. */
#include "graph/step.h"
#include "runtime/model/graph.h"

typedef struct list {
    np_step_buf *b;
    uint8_t *m;
    int n;
} list;

/* Appends buffer x with mode m; a buffer already listed gets m joined to its mode (one
 * handle appears once in a StarPU task). */
static void add(list *l, np_step_buf x, uint8_t m) {
    for (int i = 0; i < l->n; i++)
        if (l->b[i].role == x.role && l->b[i].s == x.s && l->b[i].c == x.c && l->b[i].v == x.v &&
            l->b[i].k == x.k) {
            l->m[i] |= m;
            return;
        }
    l->b[l->n] = x;
    l->m[l->n++] = m;
}

static np_step_buf B(np_buf_role r, int s) {
    return (np_step_buf){.role = (uint8_t)r, .s = (int16_t)s};
}

static np_step_buf CB(np_buf_role r, int c, int v) {
    return (np_step_buf){.role = (uint8_t)r, .c = (int16_t)c, .v = (int16_t)v};
}

/* Where the gradient of input i of layer node v goes on chunk c; role count: none. */
static np_step_buf grad_target(const np_graph_t *g, int c, int v, int i) {
    int p = g->node[v].in[i];
    switch (np_graph_grad_route(g, v, i)) {
    case NP_GRAD_NONE:
        return B(NP_B_ROLE_COUNT, 0);
    case NP_GRAD_EDGE: {
        np_step_buf e = CB(NP_B_EDGE, c, v);
        e.k = (uint8_t)i;
        return e;
    }
    default:
        return p == NP_IN_POOLED ? CB(NP_B_DP, c, 0) : CB(NP_B_DACT, c, p);
    }
}

/* A layer task: its inputs, parameters, output, saved activations and scratch; backward
 * adds the output's gradient, its inputs' gradients and its parameters' (tasks/layer.c
 * reads them by the same indices). */
static void layer(const np_step_shape *s, const np_step_node *n, int slot, list *l) {
    const np_graph_t *g = s->graph;
    const np_node *x = &g->node[n->node];
    int c = n->chunk, v = n->node, bwd = n->op == NP_OP_LAYER_BWD;
    for (int i = 0; i < x->shape.n_in; i++) {
        int p = x->in[i];
        np_step_buf in =
            p == NP_IN_DENSE
                ? (np_step_buf){.role = NP_B_DENSE_PART, .s = (int16_t)slot, .c = (int16_t)c}
            : p == NP_IN_POOLED ? CB(NP_B_P, c, 0)
                                : CB(NP_B_ACT, c, p);
        add(l, in, NP_MODE_R);
    }
    if (x->shape.n_params) add(l, CB(NP_B_PARAMS, 0, v), NP_MODE_R);
    add(l, CB(NP_B_ACT, c, v), bwd ? NP_MODE_R : NP_MODE_W);
    if (x->shape.saved) add(l, CB(NP_B_SAVED, c, v), bwd ? NP_MODE_R : NP_MODE_W);
    if (x->shape.scratch) add(l, CB(NP_B_SCRATCH, c, v), NP_MODE_SCRATCH);
    if (!bwd) return;
    add(l, CB(NP_B_DACT, c, v), NP_MODE_RW);
    for (int i = 0; i < x->shape.n_in; i++) {
        np_step_buf d = grad_target(g, c, v, i);
        if (d.role != NP_B_ROLE_COUNT) add(l, d, NP_MODE_W);
    }
    if (x->pn) add(l, CB(NP_B_GD, c, v), NP_MODE_W);
}

/* Where batch b's buffers are: its input slot, route set and embedding buffer, and batch
 * b-1's route set and embedding buffer. */
typedef struct at {
    int slot, rs, e, prs, pe;
} at;

static at at_of(const np_step_shape *s, long b) {
    return (at){.slot = (int)(b % NP_STEP_SLOTS),
                .rs = (int)(b % NP_STEP_RSETS),
                .e = (int)(b % s->pol.buffers),
                .prs = (int)((b + NP_STEP_RSETS - 1) % NP_STEP_RSETS),
                .pe = (int)((b + s->pol.buffers - 1) % s->pol.buffers)};
}

enum { R = NP_MODE_R, W = NP_MODE_W, RW = NP_MODE_RW };

/* The input, routing and exchange operations. */
static void early_buffers(const np_step_shape *s, const np_step_node *n, list *lp) {
    list l = *lp;
    at a = at_of(s, n->batch);
    int slot = a.slot, rs = a.rs, e = a.e, prs = a.prs, pe = a.pe, w = n->window;
    switch (n->op) {
    case NP_OP_PREFETCH:
        for (int r = NP_B_DENSE; r <= NP_B_KEYS; r++)
            add(&l, B(r, slot), W);
        break;
    case NP_OP_H2D: /* with CUDA workers: a real transfer of what their tasks read */
        for (int r = NP_B_DENSE; r <= (s->gpus ? NP_B_OFFSETS : NP_B_KEYS); r++)
            add(&l, B(r, slot), s->gpus ? R : RW);
        break;
    case NP_OP_ROUTE:
        add(&l, B(NP_B_OFFSETS, slot), R);
        add(&l, B(NP_B_KEYS, slot), R);
        add(&l, B(NP_B_UNIQ, rs), W);
        add(&l, B(NP_B_POS, rs), W);
        add(&l, B(NP_B_SENDKEYS, rs), W);
        add(&l, B(NP_B_META, rs), RW);
        break;
    case NP_OP_A2A_KEYS:
        add(&l, B(NP_B_META, rs), RW);
        add(&l, B(NP_B_SENDKEYS, rs), R);
        add(&l, B(NP_B_RECVKEYS, rs), W);
        add(&l, B(NP_B_TOKEN, 0), RW);
        break;
    case NP_OP_ROUTE_OWNER:
        add(&l, B(NP_B_RECVKEYS, rs), R);
        add(&l, B(NP_B_META, rs), RW);
        add(&l, B(NP_B_UNIQ_O, rs), W);
        add(&l, B(NP_B_MAP, rs), W);
        break;
    case NP_OP_RETRIEVE:
        add(&l, B(NP_B_TABLES, 0), R);
        add(&l, B(NP_B_UNIQ_O, rs), R);
        add(&l, B(NP_B_META, rs), R);
        add(&l, B(NP_B_E, e), W);
        if (s->state) add(&l, B(NP_B_STATE, 0), R), add(&l, B(NP_B_ES, e), W);
        break;
    case NP_OP_SYNC: /* rows of U_{b-1} and U_b, updated by b-1, into b's buffer */
        add(&l, B(NP_B_E, pe), R);
        add(&l, B(NP_B_UNIQ_O, prs), R);
        add(&l, B(NP_B_META, prs), R);
        add(&l, B(NP_B_E, e), RW);
        add(&l, B(NP_B_UNIQ_O, rs), R);
        add(&l, B(NP_B_META, rs), R);
        if (s->state) add(&l, B(NP_B_ES, pe), R), add(&l, B(NP_B_ES, e), RW);
        break;
    case NP_OP_EXCHANGE_ROWS:
    case NP_OP_ROWS_FRESH:
    case NP_OP_ROWS_SHARED: {
        int shared = n->op == NP_OP_ROWS_SHARED;
        add(&l, B(NP_B_E, e), R);
        add(&l, B(NP_B_MAP, rs), R);
        add(&l, B(NP_B_META, rs), R);
        add(&l, B(NP_B_RIN, w), shared ? RW : W); /* shared: the fresh rows stay */
        add(&l, B(NP_B_SBUF, 0), W);
        add(&l, B(NP_B_TOKEN, 0), RW);
        if (n->op == NP_OP_ROWS_FRESH) {
            add(&l, B(NP_B_OBITS, w), W);
            add(&l, B(NP_B_RBITS, w), W);
            add(&l, B(NP_B_UNIQ_O, prs), R);
            add(&l, B(NP_B_META, prs), R);
            add(&l, B(NP_B_UNIQ_O, rs), R);
        } else if (shared) {
            add(&l, B(NP_B_OBITS, w), R);
            add(&l, B(NP_B_RBITS, w), R);
            add(&l, B(NP_B_RBUF, 0), W);
        }
        /* the owner's received keys say where a pooled segment's rows start; NCCL's
         * codelets move rows only */
        if (n->op != NP_OP_EXCHANGE_ROWS || !s->nccl) add(&l, B(NP_B_RECVKEYS, rs), R);
        break;
    }
    case NP_OP_EXCHANGE_GRADS: /* window 0 starts the owner's sum, the others add to it */
        add(&l, B(NP_B_GROWS, w), R);
        add(&l, B(NP_B_MAP, rs), R);
        add(&l, B(NP_B_META, rs), R);
        add(&l, B(NP_B_GE, 0), w ? RW : W);
        add(&l, B(NP_B_RBUF, 0), W);
        add(&l, B(NP_B_TOKEN, 0), RW);
        if (!s->nccl) add(&l, B(NP_B_RECVKEYS, rs), R);
        break;
    default:
        break;
    }
    *lp = l;
}

/* The training batch's compute, its gradients' sums, the updates and the write-back. */
static void train_buffers(const np_step_shape *s, const np_step_node *n, list *lp) {
    list l = *lp;
    at a = at_of(s, n->batch);
    int slot = a.slot, rs = a.rs, e = a.e, w = n->window, c = n->chunk;
    const np_graph_t *g = s->graph;
    switch (n->op) {
    case NP_OP_POOL_FWD:
        add(&l, B(NP_B_RIN, w), R);
        add(&l, B(NP_B_OFFSETS, slot), R);
        add(&l, B(NP_B_POS, rs), R);
        add(&l, CB(NP_B_P, c, 0), W);
        add(&l, B(NP_B_META, rs), R);
        break;
    case NP_OP_LAYER_FWD:
    case NP_OP_LAYER_BWD:
        layer(s, n, slot, &l);
        break;
    case NP_OP_LOSS_FWD:
    case NP_OP_LOSS_BWD:
        add(&l, CB(NP_B_ACT, c, g->output), R);
        add(&l, (np_step_buf){.role = NP_B_LABEL_PART, .s = (int16_t)slot, .c = (int16_t)c}, R);
        add(&l, n->op == NP_OP_LOSS_FWD ? CB(NP_B_LOSS, c, 0) : CB(NP_B_DACT, c, g->output), W);
        break;
    case NP_OP_SUM_EDGES: {
        int ne;
        const np_edge *ed = np_graph_grad_edges(g, n->arg, &ne);
        for (int i = 0; i < ne; i++) {
            np_step_buf x = CB(NP_B_EDGE, c, ed[i].node);
            x.k = (uint8_t)ed[i].slot;
            add(&l, x, R);
        }
        add(&l, n->arg == NP_IN_POOLED ? CB(NP_B_DP, c, 0) : CB(NP_B_DACT, c, n->arg), W);
        break;
    }
    case NP_OP_POOL_BWD: /* the window's chunks add into one buffer, in chunk order */
        add(&l, CB(NP_B_DP, c, 0), R);
        add(&l, B(NP_B_OFFSETS, slot), R);
        add(&l, B(NP_B_POS, rs), R);
        add(&l, B(NP_B_META, rs), R);
        add(&l, B(NP_B_GROWS, w), c == w * s->C ? W : RW);
        break;
    case NP_OP_SUM_DENSE: /* one rank: the chunks' sum is the gradient */
        for (int k = 0; k < s->W * s->C; k++)
            add(&l, CB(NP_B_GD, k, n->node), R);
        add(&l, CB(s->R > 1 ? NP_B_GLOCAL : NP_B_GDENSE, 0, n->node), W);
        break;
    case NP_OP_ALLREDUCE: /* its bucket's layers, node down to arg: their gradients, their
                             sums, the bucket's staging (named by its first layer) */
        for (int u = n->node; u >= n->arg; u--)
            if (s->graph->node[u].pn) add(&l, CB(NP_B_GLOCAL, 0, u), R);
        for (int u = n->node; u >= n->arg; u--)
            if (s->graph->node[u].pn) add(&l, CB(NP_B_GDENSE, 0, u), W);
        add(&l, CB(NP_B_GALL, 0, n->node), W);
        add(&l, B(NP_B_TOKEN, 0), RW);
        break;
    case NP_OP_DENSE_UPDATE:
        add(&l, CB(NP_B_PARAMS, 0, n->node), RW);
        add(&l, CB(NP_B_GDENSE, 0, n->node), R);
        break;
    case NP_OP_SPARSE_UPDATE:
        add(&l, B(NP_B_E, e), RW);
        add(&l, B(NP_B_GE, 0), R);
        add(&l, B(NP_B_META, rs), R);
        if (s->state) add(&l, B(NP_B_ES, e), RW);
        break;
    case NP_OP_WRITEBACK:
        add(&l, B(NP_B_E, e), R);
        add(&l, B(NP_B_UNIQ_O, rs), R);
        add(&l, B(NP_B_META, rs), R);
        add(&l, B(NP_B_TABLES, 0), RW);
        if (s->state) add(&l, B(NP_B_ES, e), R), add(&l, B(NP_B_STATE, 0), RW);
        break;
    default:
        break;
    }
    *lp = l;
}

int np_step_buffers(const np_step_shape *s, const np_step_node *n, np_step_buf *buf,
                    uint8_t *mode) {
    list l = {buf, mode, 0};
    early_buffers(s, n, &l); /* each lists the operations it knows, the other none */
    train_buffers(s, n, &l);
    return l.n; /* markers (room, partition): no task, no buffers */
}
