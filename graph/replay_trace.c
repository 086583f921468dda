/* The step graph as one rank's trace (nestpipe/stepgraph.h np_step_graph_trace), for the
 * replay at another scale without a traced run (docs/scale.md "A graph without a trace"):
 * node i is task i + 1, waiting for the source of every edge into it (StarPU's order: read
 * after write, write after reads and writes), issued by its step's call. Each node runs for
 * its cost from the shape (np_sg_cost_us; a collective its local part, a copy, the replay
 * adds the wire at the target) on the earliest free of the compute lanes, a collective on
 * the communication lane, in submission order, once its edges' sources ended and its step's
 * call was made. The call of step k comes when step k - 1's wait is over: its loss with a
 * look-ahead, everything issued so far without one (runtime/engine/schedule.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/critical.h"
#include "runtime/core/util.h"
#include "runtime/model/graph.h"
#include "runtime/trace/trace.h"

np_status np_step_graph_trace(const np_step_graph_t *g, int workers, np_trace_t **out,
                              np_error *err) {
    *out = NULL;
    if (workers < 1 || workers > 4096)
        return np_err(err, NP_STATUS_BAD_INPUT, "graph trace: %d compute workers (1 to 4096)",
                      workers);
    if (g->n < 1) return np_err(err, NP_STATUS_BAD_INPUT, "graph trace: the graph has no task");
    const np_step_shape *s = &g->shape;
    np_step_shape local = *s;
    local.R = 1; /* a collective's own part: the copy; the wire is the replay's */
    double *end = np_alloc((size_t)g->n, sizeof *end, "graph trace", err);
    double *lane = np_zalloc((size_t)workers + 1, sizeof *lane, "graph trace", err);
    double *call = np_zalloc((size_t)g->steps + 1, sizeof *call, "graph trace", err);
    double *wait = np_zalloc((size_t)g->steps + 1, sizeof *wait, "graph trace", err);
    np_trace *tr = NULL;
    np_status st = NP_STATUS_NO_MEMORY;
    if (!end || !lane || !call || !wait || (st = np_trace_create(&tr, err))) goto out;
    int all = s->pol.ahead == 0; /* sequential, fwp: the driver waits for everything */
    long at = -1;                /* the step whose call was made last */
    for (int i = 0; i < g->n; i++) {
        const np_sg_node *x = &g->node[i];
        const np_step_node *n = &x->n;
        while (at < x->step) { /* the next call: when the step before's wait is over */
            at++;
            call[at] = at ? (call[at - 1] > wait[at - 1] ? call[at - 1] : wait[at - 1]) : 0;
            if (all && at) wait[at] = wait[at - 1];
        }
        int comm = np_node_kind_is(n->kind, NP_KIND_EXCHANGE) && s->R > 1;
        int w = comm ? workers : 0;
        for (int k = 1; !comm && k < workers; k++)
            if (lane[k] < lane[w]) w = k;
        double t0 = call[x->step] > lane[w] ? call[x->step] : lane[w];
        np_trace_event ev = {.name = np_step_op_get(n->op)->name,
                             .kind = n->kind,
                             .batch = n->batch,
                             .window = n->window,
                             .worker = w,
                             .node = n->node,
                             .chunk = n->chunk,
                             .id = i + 1,
                             .issued = x->step + 1,
                             .submit_us = call[x->step]};
        int lo, hi;
        np_sg_in_edges(g, i, &lo, &hi);
        for (int e = lo; e < hi; e++) {
            int from = g->edge[e].from, dup = 0;
            if (end[from] > t0) t0 = end[from];
            for (int k = 0; k < ev.n_deps; k++)
                dup |= np_trace_dep(&ev, k) == from + 1;
            if (!dup && np_trace_add_dep(&ev, from + 1)) {
                np_trace_event_release(&ev);
                st = np_err(err, NP_STATUS_NO_MEMORY, "out of memory (graph trace)");
                goto out;
            }
        }
        ev.start_us = t0;
        ev.end_us = end[i] = t0 + np_sg_cost_us(comm ? &local : s, &g->sizes, n);
        lane[w] = end[i];
        if (n->op == NP_OP_ALLREDUCE && n->node >= 0 && s->R > 1) { /* its share of the
            * wire: what a rank sends, 2 (R - 1) / R of its bucket's floats
            * (np_replay_dense_floats) */
            size_t floats = 0;
            np_sg_bucket(s, n->node, &floats);
            ev.bytes = (uint64_t)((double)floats * sizeof(float) * 2 * (s->R - 1) / s->R);
        }
        if ((all || n->kind == NP_NODE_LOSS_FWD) && end[i] > wait[x->step]) wait[x->step] = end[i];
        int bad = np_trace_record(tr, &ev);
        np_trace_event_release(&ev);
        if (bad) {
            st = np_err(err, NP_STATUS_NO_MEMORY, "out of memory (graph trace)");
            goto out;
        }
    }
    char v[32];
    for (int k = 0; k < workers; k++) {
        snprintf(v, sizeof v, "cpu %d", k);
        np_trace_set_worker_name(tr, k, v);
    }
    if (s->R > 1) np_trace_set_worker_name(tr, workers, "comm");
    for (int k = 0; k < s->graph->n; k++)
        np_trace_set_node_name(tr, k, s->graph->node[k].name);
    np_trace_set_info(tr, "pipeline", g->pipeline);
    np_trace_set_info(tr, "projection", "step graph");
    static const char *const facts[] = {"windows", "chunks", "lookahead", "ranks", "workers"};
    int val[] = {s->W, s->C, s->pol.ahead, s->R, workers};
    for (int k = 0; k < 5; k++) {
        snprintf(v, sizeof v, "%d", val[k]);
        np_trace_set_info(tr, facts[k], v);
    }
    *out = tr;
    tr = NULL;
    st = NP_OK;
out:
    np_trace_free(tr);
    free(end);
    free(lane);
    free(call);
    free(wait);
    return st;
}
