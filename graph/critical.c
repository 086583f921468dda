/* Critical-path priorities from the step graph (graph/critical.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "graph/critical.h"
#include "runtime/model/graph.h"

#define NP_CP_STEPS 6 /* the graph's steps: the last is steady (nestpipe/stepgraph.h) */

#define FLOP_US 2e4    /* 20 GFLOP/s */
#define MEM_US 1e4     /* 10 GB/s */
#define LINK_US 1250.0 /* 10 Gbit/s */
#define PEER_US 5.0    /* latency a peer */
#define TASK_US 1.0    /* the runtime's share of any task */

/* A collective of `bytes` a rank, spread over R ranks: the share that leaves, and a message
 * a peer. One rank: a copy. */
static double coll_us(double bytes, int R) {
    if (R <= 1) return bytes / MEM_US;
    return bytes * (R - 1) / R / LINK_US + PEER_US * (R - 1);
}

double np_sg_cost_us(const np_step_shape *s, const np_sg_sizes *z, const np_step_node *n) {
    const np_graph_t *g = s->graph;
    double nb = (double)z->nb, keys = nb * z->T * (z->hot > 0 ? z->hot : 1);
    double nc = nb / (s->W * s->C), kc = keys / (s->W * s->C), rows = keys * z->d * 4.0;
    const np_node *x = n->node >= 0 && n->node < g->n ? &g->node[n->node] : NULL;
    double us;
    switch (n->op) {
    case NP_OP_PREFETCH:
    case NP_OP_H2D:
        us = nb * (z->dense + z->T * (z->hot > 0 ? z->hot : 1) + 1) * 4 / MEM_US;
        break;
    case NP_OP_ROUTE:
        us = keys * 16 / MEM_US;
        break;
    case NP_OP_ROUTE_OWNER:
        us = keys * 8 / MEM_US;
        break;
    case NP_OP_A2A_KEYS:
        us = coll_us(keys * 8, s->R);
        break;
    case NP_OP_RETRIEVE:
    case NP_OP_WRITEBACK:
    case NP_OP_SYNC:
        us = rows / MEM_US;
        break;
    case NP_OP_SPARSE_UPDATE:
        us = rows * (s->state ? 2 : 1) / MEM_US;
        break;
    case NP_OP_EXCHANGE_ROWS:
    case NP_OP_ROWS_FRESH:
    case NP_OP_ROWS_SHARED:
    case NP_OP_EXCHANGE_GRADS:
        us = coll_us(rows / s->W, s->R);
        break;
    case NP_OP_POOL_FWD:
    case NP_OP_POOL_BWD:
        us = kc * z->d * 4.0 / MEM_US;
        break;
    case NP_OP_LAYER_FWD:
    case NP_OP_LAYER_BWD: {
        const np_layer_def *def = x ? np_layer_get(x->def) : NULL;
        double f = def && def->flops
                       ? def->flops(&x->hp, &x->shape, (long)nc, n->op == NP_OP_LAYER_BWD)
                       : 0;
        us = f > 0 && isfinite(f) ? f / FLOP_US
             : x                  ? nc * np_graph_width(g, n->node) * 4 / MEM_US
                                  : 0;
        break;
    }
    case NP_OP_LOSS_FWD:
    case NP_OP_LOSS_BWD:
        us = nc * 4 / MEM_US;
        break;
    case NP_OP_SUM_EDGES:
        us = nc * np_graph_width(g, n->arg) * 8.0 / MEM_US;
        break;
    case NP_OP_SUM_DENSE:
        us = x ? (double)x->pn * 4 * s->C / MEM_US : 0;
        break;
    case NP_OP_ALLREDUCE:
    {
        size_t floats = 0;
        if (x) np_sg_bucket(s, n->node, &floats);
        us = x ? coll_us(2.0 * (double)floats * 4, s->R) : 0;
    }
        break;
    case NP_OP_DENSE_UPDATE:
        us = x ? (double)x->pn * 12 / MEM_US : 0;
        break;
    default:
        us = 0;
    }
    return TASK_US + (us > 0 && isfinite(us) ? us : 0);
}

int np_sg_bottom_levels(const np_step_graph_t *g, long step, const double *cost, double *bl) {
    for (int i = 0; i < g->n; i++)
        bl[i] = 0;
    /* in reverse submission order: every successor comes later; a node's in-edges raise
     * its producers' longest path after them */
    double *after = calloc(g->n > 0 ? (size_t)g->n : 1, sizeof *after);
    if (!after) return -1;
    for (int v = g->n; v-- > 0;) {
        if (g->node[v].step != step) continue;
        bl[v] = cost[v] + after[v];
        int lo, hi;
        np_sg_in_edges(g, v, &lo, &hi);
        for (int e = lo; e < hi; e++) {
            int u = g->edge[e].from;
            if (g->node[u].step == step && bl[v] > after[u]) after[u] = bl[v];
        }
    }
    free(after);
    return 0;
}

/* ---- the priority table: by node's place, open addressing */

typedef struct prio_slot {
    uint64_t key; /* 0: empty */
    int prio;
} prio_slot;

struct np_sg_prio {
    np_step_shape shape;
    prio_slot *slot;
    size_t cap;
};

static uint64_t place_key(const np_step_node *n, long t) {
    uint64_t v[6] = {(uint64_t)n->op,
                     (uint64_t)(uint32_t)n->window,
                     (uint64_t)(uint32_t)n->chunk,
                     (uint64_t)(uint32_t)n->node,
                     (uint64_t)(uint32_t)n->arg,
                     (uint64_t)(n->batch - t)};
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 6; i++) {
        h ^= v[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

np_status np_sg_prio_create(const np_step_shape *s, const np_sg_sizes *z, np_sg_prio **out,
                            np_error *err) {
    *out = NULL;
    np_step_graph_t *g = NULL;
    np_status st = np_sg_build(s, NP_CP_STEPS, NULL, &g, err);
    if (st) return st;
    np_sg_prio *p = np_zalloc(1, sizeof *p, "critical-path priorities", err);
    double *cost = np_alloc((size_t)g->n + 1, sizeof *cost, "critical-path priorities", err);
    double *bl = np_alloc((size_t)g->n + 1, sizeof *bl, "critical-path priorities", err);
    size_t cap = 64;
    while (cap < 2 * (size_t)g->n + 2)
        cap *= 2;
    if (p) p->slot = np_zalloc(cap, sizeof *p->slot, "critical-path priorities", err);
    if (!p || !cost || !bl || !p->slot) {
        st = NP_STATUS_NO_MEMORY;
        goto out;
    }
    p->shape = *s;
    p->cap = cap;
    long last = NP_CP_STEPS - 1;
    double top = 0;
    for (int i = 0; i < g->n; i++)
        cost[i] = np_sg_cost_us(s, z, &g->node[i].n);
    if (np_sg_bottom_levels(g, last, cost, bl)) {
        st = np_err(err, NP_STATUS_NO_MEMORY, "out of memory (critical-path priorities)");
        goto out;
    }
    for (int i = 0; i < g->n; i++)
        if (bl[i] > top) top = bl[i];
    for (int i = 0; i < g->n; i++) {
        if (g->node[i].step != last) continue;
        int pr = top > 0 ? (int)lround(NP_CP_TOP * bl[i] / top) : 0;
        uint64_t key = place_key(&g->node[i].n, last);
        size_t j = key & (cap - 1);
        while (p->slot[j].key && p->slot[j].key != key)
            j = (j + 1) & (cap - 1);
        if (!p->slot[j].key || pr > p->slot[j].prio) /* a place twice: the higher */
            p->slot[j] = (prio_slot){key, pr};
    }
    *out = p;
    p = NULL;
out:
    np_sg_prio_free(p);
    free(cost);
    free(bl);
    np_step_graph_free(g);
    return st;
}

void np_sg_prio_free(np_sg_prio *p) {
    if (!p) return;
    free(p->slot);
    free(p);
}

int np_sg_prio_of(const np_sg_prio *p, const np_step_node *n, long t) {
    uint64_t key = place_key(n, t);
    for (size_t j = key & (p->cap - 1);; j = (j + 1) & (p->cap - 1)) {
        if (!p->slot[j].key) return -1;
        if (p->slot[j].key == key) return p->slot[j].prio;
    }
}

int np_sg_prio_fits(const np_sg_prio *p, const np_step_shape *s) {
    const np_step_shape *a = &p->shape;
    return !memcmp(&a->pol, &s->pol, sizeof a->pol) && a->W == s->W && a->C == s->C &&
           a->R == s->R && a->graph == s->graph && a->state == s->state && a->nccl == s->nccl &&
           a->gpus == s->gpus && a->bucket == s->bucket;
}
