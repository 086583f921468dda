/* The step graph collected from the walker, its dependencies derived from the access modes
 * (graph/bgraph.h), and the public constructor from a config (nestpipe/stepgraph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/config_impl.h"
#include "runtime/core/util.h"
#include "graph/bgraph.h"
#include "graph/critical.h"
#include "graph/link.h"
#include "runtime/model/graph.h"

/* ---- growing arrays */

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int add_edge(np_step_graph_t *g, int from, int to, const np_step_buf *b, int why) {
    if (from < 0 || from == to) return 0;
    if (grow((void **)&g->edge, &g->cap_edge, g->nedge + 1, sizeof *g->edge)) return -1;
    g->edge[g->nedge++] = (np_sg_edge){from, to, *b, why};
    return 0;
}

/* The linker's edges into the graph (the StarPU ones: data flow alone is implied). */
static int take_edge(void *ctx, int64_t from, int64_t to, const np_step_buf *b, int why) {
    return why == NP_DEP_FLOW ? 0 : add_edge(ctx, (int)from, (int)to, b, why);
}

typedef struct collect {
    np_step_graph_t *g;
    long step;
} collect;

static np_status take(void *ctx, const np_step_node *n, np_error *err) {
    collect *c = ctx;
    np_step_graph_t *g = c->g;
    if (!np_step_op_get(n->op)->task) return NP_OK; /* the driver's markers */
    if (grow((void **)&g->node, &g->cap, g->n + 1, sizeof *g->node) ||
        grow((void **)&g->buf, &g->cap_buf, g->nbuf + NP_STEP_MAX_BUFS, sizeof *g->buf) ||
        grow((void **)&g->mode, &g->cap_mode, g->nbuf + NP_STEP_MAX_BUFS, 1))
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory building the step graph");
    np_step_buf *b = g->buf + g->nbuf;
    uint8_t *m = g->mode + g->nbuf;
    int nb = np_step_buffers(&g->shape, n, b, m);
    if (g->hook) g->hook(n, b, m, &nb);
    g->node[g->n++] = (np_sg_node){.n = *n, .step = c->step, .buf0 = g->nbuf, .nbuf = nb};
    g->nbuf += nb;
    return NP_OK;
}

np_status np_sg_build(const np_step_shape *s, long steps, np_sg_contract_hook hook,
                      np_step_graph_t **out, np_error *err) {
    *out = NULL;
    if (steps < 1 || steps > 64)
        return np_err(err, NP_STATUS_BAD_INPUT, "step graph: %ld steps (1 to 64)", steps);
    if (s->W < 1 || s->C < 1 || s->W > 64 || s->C > 64 || s->W * s->C > 64)
        return np_err(err, NP_STATUS_BAD_INPUT, "step graph: %d windows x %d chunks (1 to 64)",
                      s->W, s->C);
    np_step_graph_t *g = np_zalloc(1, sizeof *g, "step graph", err);
    if (!g) return NP_STATUS_NO_MEMORY;
    g->shape = *s;
    g->hook = hook;
    snprintf(g->pipeline, sizeof g->pipeline, "%s", np_pipeline_name(s->pol.mode));
    np_step_cursor cur;
    np_step_cursor_init(&cur);
    np_status st = NP_OK;
    for (long t = 0; t < steps && !st; t++) {
        collect c = {g, t};
        st = np_step_walk(&g->shape, &cur, t, s->pol.ahead + 1, take, &c, err);
    }
    g->steps = steps;
    np_sg_linker *l = st ? NULL : np_sg_linker_new();
    if (!st && !l) st = np_err(err, NP_STATUS_NO_MEMORY, "out of memory linking the step graph");
    for (int i = 0; i < g->n && !st; i++)
        if (np_sg_link(l, i, g->buf + g->node[i].buf0, g->mode + g->node[i].buf0, g->node[i].nbuf,
                       take_edge, g))
            st = np_err(err, NP_STATUS_NO_MEMORY, "out of memory linking the step graph");
    np_sg_linker_free(l);
    if (st) {
        np_step_graph_free(g);
        return st;
    }
    *out = g;
    return NP_OK;
}

/* ---- queries */

/* The edges into node v are contiguous: link adds them as it reaches v. */
void np_sg_in_edges(const np_step_graph_t *g, int v, int *lo, int *hi) {
    int a = 0, b = g->nedge;
    while (a < b) { /* first edge with to >= v */
        int m = (a + b) / 2;
        if (g->edge[m].to < v)
            a = m + 1;
        else
            b = m;
    }
    *lo = a;
    while (b < g->nedge && g->edge[b].to == v)
        b++;
    *hi = b;
}

int np_sg_reaches(const np_step_graph_t *g, int u, int v, int data) {
    if (u >= v) return u == v;
    unsigned char *seen = calloc((size_t)(v - u + 1), 1);
    int *stack = malloc((size_t)(v - u + 1) * sizeof *stack), top = 0, found = 0;
    if (!seen || !stack) {
        free(seen);
        free(stack);
        return -1;
    }
    stack[top++] = v;
    seen[v - u] = 1;
    while (top && !found) {
        int x = stack[--top], lo, hi;
        np_sg_in_edges(g, x, &lo, &hi);
        for (int e = lo; e < hi; e++) {
            int p = g->edge[e].from;
            if (data && (g->edge[e].why != NP_DEP_RAW || g->edge[e].buf.role == NP_B_TOKEN))
                continue;
            if (p < u || seen[p - u]) continue;
            if (p == u) {
                found = 1;
                break;
            }
            seen[p - u] = 1;
            stack[top++] = p;
        }
    }
    free(seen);
    free(stack);
    return found;
}

void np_sg_node_name(const np_step_graph_t *g, int i, char *out, size_t size) {
    const np_step_node *n = &g->node[i].n;
    const char *op = np_step_op_get(n->op)->name;
    const np_graph_t *lg = g->shape.graph;
    if (n->op == NP_OP_SUM_EDGES && n->arg == NP_IN_POOLED)
        snprintf(out, size, "%s:pooled", op);
    else if (n->node >= 0 && n->node < lg->n)
        snprintf(out, size, "%s:%s", op, lg->node[n->node].name);
    else
        snprintf(out, size, "%s", op);
}

long np_step_graph_tasks(const np_step_graph_t *g, long step) {
    long k = 0;
    for (int i = 0; i < g->n; i++)
        k += step < 0 || g->node[i].step == step;
    return k;
}

/* ---- from a config */

void np_sg_shape_of(const np_config *cfg, const np_graph_t *layers, np_step_shape *s) {
    int W = np_config_windows(cfg);
    *s = (np_step_shape){.pol = np_pipeline_policy_of(np_config_pipeline(cfg), W),
                         .W = W,
                         .C = cfg->chunks,
                         .R = cfg->ranks,
                         .graph = layers,
                         .state = cfg->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD,
                         .nccl = cfg->comm == NP_COMM_NCCL,
                         /* all (-1) is drawn on CPU workers: how many GPUs a run finds
                          * is the machine's; NCCL's exchange always has one */
                         .gpus = cfg->gpus > 0                ? cfg->gpus
                                 : cfg->comm == NP_COMM_NCCL ? 1
                                                             : 0,
                         .bucket = np_config_bucket_floats(cfg)};
    /* the split row exchange, where the engine turns it on (MPI across ranks) */
    if (s->pol.sync && cfg->ranks > 1 && cfg->comm != NP_COMM_NCCL)
        s->pol.split_rows = cfg->split_rows < 0 ? !s->pol.overlap_windows : cfg->split_rows;
}

np_status np_step_graph_create(const np_config *cfg, long steps, np_step_graph_t **out,
                               np_error *err) {
    *out = NULL;
    np_status st = np_config_check(cfg, err);
    if (st) return st;
#ifndef NP_HAVE_CUDA
    if (cfg->gpus > 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "gpus: %d asked for, but nestpipe was %s", cfg->gpus, np_cuda_info());
#endif
    np_graph_t *layers;
    if ((st = np_graph_from_config(cfg, &layers, err))) return st;
    if ((st = np_graph_finalize(layers, err))) {
        np_graph_free(layers);
        return st;
    }
    np_step_shape s;
    np_sg_shape_of(cfg, layers, &s);
    if ((st = np_sg_build(&s, steps, NULL, out, err))) {
        np_graph_free(layers);
        return st;
    }
    (*out)->layers = layers;
    np_sg_sizes z = {.nb = cfg->batch / cfg->ranks, .T = cfg->tables, .d = cfg->dim,
                     .hot = cfg->hot, .dense = np_config_dense(cfg)};
    (*out)->sizes = z;
    if (cfg->priorities == NP_PRIORITIES_CRITICAL) { /* those the engine would give */
        if ((st = np_sg_prio_create(&s, &z, &(*out)->cp, err))) {
            np_step_graph_free(*out);
            *out = NULL;
            return st;
        }
    }
    snprintf((*out)->model, sizeof(*out)->model, "%s",
             cfg->model_file[0] ? cfg->model_file : np_cfg_model_names[cfg->model]);
    return NP_OK;
}

void np_step_graph_free(np_step_graph_t *g) {
    if (!g) return;
    if (g->layers) np_graph_free(g->layers);
    np_sg_prio_free(g->cp);
    free(g->node);
    free(g->buf);
    free(g->mode);
    free(g->edge);
    free(g);
}
