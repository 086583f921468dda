/* Critical-path priorities from the step graph (key priorities = critical-path;
 * docs/engine.md "Priorities"), before the first step: the graph of a steady step with each
 * node's cost from the shape (np_sg_cost_us), each node's bottom level (its cost plus the
 * longest path after it to the end of the step), scaled to 0..NP_CP_TOP. The engine gives
 * every task the priority of its node's counterpart in that step.
 * Not here: the graph (graph/bgraph.c) or where the priority goes (tasks/submit.c). */
#ifndef NP_GRAPH_CRITICAL_H
#define NP_GRAPH_CRITICAL_H

#include "graph/bgraph.h"

#define NP_CP_TOP 1000 /* the highest priority: the start of the longest path */

/* The cost model, microseconds: a layer's flops at 20 GFLOP/s; pooling, gathers, updates,
 * sums and copies their bytes at 10 GB/s; a collective its bytes at 10 Gbit/s plus 5 us a
 * peer; 1 us each for the runtime. Relative costs are all priorities need; what a machine
 * really takes is the perf models' (dm* policies) and the trace's. */
double np_sg_cost_us(const np_step_shape *s, const np_sg_sizes *z, const np_step_node *n);

/* Bottom levels of step `step`'s nodes of g, with cost[i] for node i: bl[i] (0 for other
 * steps' nodes), over the edges between that step's nodes. 0, or -1 out of memory. */
int np_sg_bottom_levels(const np_step_graph_t *g, long step, const double *cost, double *bl);

typedef struct np_sg_prio np_sg_prio;
/* The priorities of shape s's steady step (step 5 of a graph of 6). */
NP_NODISCARD np_status np_sg_prio_create(const np_step_shape *s, const np_sg_sizes *z,
                                         np_sg_prio **out, np_error *err);
void np_sg_prio_free(np_sg_prio *p);
/* Node n, submitted by step t's call: its priority, or -1 when the steady step has no
 * counterpart (same operation, window, chunk, layer node, argument and batch offset). */
int np_sg_prio_of(const np_sg_prio *p, const np_step_node *n, long t);
/* Whether p was made for shape s (the engine makes it again when the shape changes). */
int np_sg_prio_fits(const np_sg_prio *p, const np_step_shape *s);

#endif
