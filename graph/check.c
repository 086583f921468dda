/* What every pipeline guarantees, checked on the step graph's dependencies without running
 * it (nestpipe/stepgraph.h np_step_graph_check; docs/pipeline.md "What the graph
 * guarantees"). Each check walks the edges the access modes imply, so a schedule or a
 * contract that breaks a guarantee fails here before any run. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/bgraph.h"

typedef struct report {
    char *out;
    size_t size, len;
    int shown; /* violations written for the current check */
    long count;
} report;

static void say(report *r, const char *fmt, ...) {
    if (!r->out || r->len + 1 >= r->size) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->out + r->len, r->size - r->len, fmt, ap);
    va_end(ap);
    if (k > 0) r->len = r->len + (size_t)k < r->size ? r->len + (size_t)k : r->size - 1;
}

/* One violation of the current check: the first three are spelled out. */
static void violation(report *r, const np_step_graph_t *g, int i, const char *what) {
    char name[64];
    np_sg_node_name(g, i, name, sizeof name);
    const np_step_node *n = &g->node[i].n;
    if (r->shown++ < 3)
        say(r, "\n  %s (batch %ld, window %d): %s", name, n->batch, n->window, what);
    r->count++;
}

/* The current check's verdict, then its first violations. */
static void close_check(report *r, report *sub, const char *name, int promised,
                        const char *unpromised) {
    if (!promised)
        say(r, "%s: not promised (%s)%s", name, unpromised,
            sub->count ? ", and indeed:" : "; holds anyway");
    else
        say(r, "%s: %s", name, sub->count ? "VIOLATED" : "ok");
    if (sub->count) say(r, "%s%s", sub->out, sub->count > 3 ? "\n  ..." : "");
    say(r, "\n");
    if (promised) r->count += sub->count;
    sub->len = sub->count = sub->shown = 0;
    sub->out[0] = 0;
}

/* The nodes node v depends on, directly or not: mark[u] = 1. */
static void ancestors(const np_step_graph_t *g, int v, unsigned char *mark, int *stack) {
    memset(mark, 0, (size_t)g->n);
    int top = 0;
    stack[top++] = v;
    while (top) {
        int x = stack[--top], lo, hi;
        np_sg_in_edges(g, x, &lo, &hi);
        for (int e = lo; e < hi; e++) {
            int p = g->edge[e].from;
            if (!mark[p]) mark[p] = 1, stack[top++] = p;
        }
    }
}

static int is_row_exchange(np_step_op op) {
    return op == NP_OP_EXCHANGE_ROWS || op == NP_OP_ROWS_SHARED;
}

/* The first node of op and batch (and layer node, when node >= 0); -1 when none. */
static int find_node(const np_step_graph_t *g, np_step_op op, long batch, int node) {
    for (int i = 0; i < g->n; i++)
        if (g->node[i].n.op == op && g->node[i].n.batch == batch &&
            (node < 0 || g->node[i].n.node == node))
            return i;
    return -1;
}

static int find(const np_step_graph_t *g, np_step_op op, long batch) {
    return find_node(g, op, batch, -1);
}

/* Whether batch b trained in the steps walked (its loss was computed). */
static int trained(const np_step_graph_t *g, long b) {
    return b >= 0 && find(g, NP_OP_LOSS_FWD, b) >= 0;
}

/* Whether node i reads a buffer of role r. */
static int reads_role(const np_step_graph_t *g, int i, np_buf_role r) {
    const np_sg_node *x = &g->node[i];
    for (int j = 0; j < x->nbuf; j++)
        if (g->buf[x->buf0 + j].role == r && (g->mode[x->buf0 + j] & NP_MODE_R)) return 1;
    return 0;
}

/* fresh: the rows batch b trains on derive from batch b-1's sparse update: a chain of
 * reads of what the previous task wrote (write-back, the table, retrieval; or the
 * dual-buffer sync), not merely an order (a buffer's reuse would order a retrieval after
 * a write-back that does not declare its write). The split form's fresh part is exempt:
 * those rows are not batch b-1's. */
static void check_fresh(const np_step_graph_t *g, report *r) {
    for (int i = 0; i < g->n; i++) {
        const np_step_node *n = &g->node[i].n;
        if (!is_row_exchange(n->op) || n->batch < 1) continue;
        int u = find(g, NP_OP_SPARSE_UPDATE, n->batch - 1);
        if (u < 0) {
            if (trained(g, n->batch - 1))
                violation(r, g, i, "the previous batch trained without a sparse_update");
            continue;
        }
        if (u > i || np_sg_reaches(g, u, i, 1) != 1)
            violation(r, g, i, "its rows do not wait for the previous batch's sparse_update");
    }
    /* and the rows batch b-1 does not hold come from the table as batch b-2 left it:
     * retrieve(b) reads what write-back(b-2) wrote (rule 1 of docs/pipeline.md) */
    for (int i = 0; i < g->n; i++) {
        const np_step_node *n = &g->node[i].n;
        if (n->op != NP_OP_RETRIEVE || n->batch < 2) continue;
        int u = find(g, NP_OP_WRITEBACK, n->batch - 2);
        if (u < 0 && trained(g, n->batch - 2))
            violation(r, g, i, "batch b-2 trained without a write-back");
        else if (u >= 0 && (u > i || np_sg_reaches(g, u, i, 1) != 1))
            violation(r, g, i, "it does not read the table write-back wrote two batches before");
    }
}

/* frozen: window w's exchanges wait for no compute of a later window of their batch;
 * overlap (min_gap 1): window w's rows wait for no compute of window w-1 either. */
static void check_windows(const np_step_graph_t *g, report *r, int overlap) {
    if (g->n == 0) return;
    unsigned char *mark = malloc((size_t)g->n);
    int *stack = malloc((size_t)g->n * sizeof *stack);
    if (!mark || !stack) {
        say(r, "  (out of memory)");
        r->count++;
        free(mark);
        free(stack);
        return;
    }
    for (int i = 0; i < g->n; i++) {
        const np_step_node *n = &g->node[i].n;
        int exchange = n->kind == NP_NODE_EXCHANGE_EMB || n->kind == NP_NODE_EXCHANGE_GRAD;
        if (!exchange || n->window < 0 ||
            (overlap && (n->kind != NP_NODE_EXCHANGE_EMB || n->window < 1)))
            continue;
        int from = overlap ? n->window - 1 : n->window + 1; /* compute of windows >= from */
        ancestors(g, i, mark, stack);
        for (int p = 0; p < g->n; p++) {
            const np_step_node *x = &g->node[p].n;
            if (mark[p] && x->batch == n->batch && x->window >= from &&
                np_node_kind_is(x->kind, NP_KIND_COMPUTE)) {
                char why[192], name[64];
                np_sg_node_name(g, p, name, sizeof name);
                snprintf(why, sizeof why, "waits for %s of window %d", name, x->window);
                violation(r, g, i, why);
                break;
            }
        }
    }
    free(mark);
    free(stack);
}

/* fresh parameters: every layer task of batch b that reads node v's dense parameters reads
 * what batch b-1's dense update of v wrote (never stale; the update's own batch computed
 * before it). */
static void check_params(const np_step_graph_t *g, report *r) {
    for (int i = 0; i < g->n; i++) {
        const np_step_node *n = &g->node[i].n;
        if ((n->op != NP_OP_LAYER_FWD && n->op != NP_OP_LAYER_BWD) || !trained(g, n->batch - 1) ||
            !reads_role(g, i, NP_B_PARAMS))
            continue;
        int u = find_node(g, NP_OP_DENSE_UPDATE, n->batch - 1, n->node);
        if (u < 0)
            violation(r, g, i, "the previous batch trained its parameters without a dense_update");
        else if (u > i || np_sg_reaches(g, u, i, 1) != 1)
            violation(r, g, i, "it does not read the parameters the previous batch's update wrote");
    }
}

/* dense isolation: node v's update depends directly on node v's tasks only, and on the
 * all-reduce of the bucket that holds v (graph/step.h np_sg_bucket). */
static void check_dense(const np_step_graph_t *g, report *r) {
    for (int e = 0; e < g->nedge; e++) {
        const np_step_node *to = &g->node[g->edge[e].to].n, *from = &g->node[g->edge[e].from].n;
        int bucket = from->op == NP_OP_ALLREDUCE && from->node >= to->node && from->arg <= to->node;
        if (to->op == NP_OP_DENSE_UPDATE && from->node != to->node && !bucket) {
            char why[192], name[64];
            np_sg_node_name(g, g->edge[e].from, name, sizeof name);
            snprintf(why, sizeof why, "waits for %s (batch %ld)", name, from->batch);
            violation(r, g, g->edge[e].to, why);
        }
    }
}

/* batch isolation: a task reads what another batch wrote only through the tables and their
 * state and the dense parameters (what any earlier batch left), or through what only the
 * sync and the split exchange's fresh part carry over from the batch just before: its
 * embedding buffers, key set and routing counts. Never what a later batch wrote. The comm
 * token orders collectives, holding no data. */
static void check_batches(const np_step_graph_t *g, report *r) {
    for (int e = 0; e < g->nedge; e++) {
        const np_sg_edge *x = &g->edge[e];
        const np_step_node *to = &g->node[x->to].n, *from = &g->node[x->from].n;
        if (x->why != NP_DEP_RAW || from->batch == to->batch || x->buf.role == NP_B_TOKEN) continue;
        int ok = 0;
        switch ((np_buf_role)x->buf.role) {
        case NP_B_TABLES:
        case NP_B_STATE:
        case NP_B_PARAMS:
            ok = from->batch < to->batch;
            break;
        case NP_B_E:
        case NP_B_ES:
        case NP_B_UNIQ_O:
        case NP_B_META:
            ok = from->batch == to->batch - 1 &&
                 (to->op == NP_OP_SYNC || to->op == NP_OP_ROWS_FRESH);
            break;
        default:
            break;
        }
        if (!ok) {
            char why[192], name[64], buf[48];
            np_sg_node_name(g, x->from, name, sizeof name);
            np_step_buf_name(&x->buf, buf, sizeof buf);
            snprintf(why, sizeof why, "reads %s that %s of batch %ld wrote", buf, name,
                     from->batch);
            violation(r, g, x->to, why);
        }
    }
}

int np_step_graph_check(const np_step_graph_t *g, char *out, size_t size) {
    report r = {.out = out, .size = size};
    char lines[2048] = "";
    report sub = {.out = lines, .size = sizeof lines};
    if (out && size) out[0] = 0;
    unsigned pr = g->shape.pol.promise;
    check_fresh(g, &sub);
    close_check(&r, &sub, "fresh rows", !!(pr & NP_PROMISE_FRESH), "async trains on stale rows");
    check_windows(g, &sub, 0);
    close_check(&r, &sub, "frozen windows", 1, "");
    check_windows(g, &sub, 1);
    close_check(&r, &sub, "window overlap", !!(pr & NP_PROMISE_OVERLAP),
                "the windows run one after another");
    check_params(g, &sub);
    close_check(&r, &sub, "fresh parameters", 1, "");
    check_dense(g, &sub);
    close_check(&r, &sub, "dense isolation", 1, "");
    check_batches(g, &sub);
    close_check(&r, &sub, "batch isolation", 1, "");
    return r.count > 0x7fffffffL ? 0x7fffffff : (int)r.count;
}
