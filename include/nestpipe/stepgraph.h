/* The batch graph as data (graph/): the tasks one training step submits to StarPU, with their
 * buffers, access modes and the dependencies those imply, built from a config without
 * running anything. `nestpipe graph` prints it; its checks state what every pipeline
 * promises (docs/pipeline.md "The step graph").
 *
 *     np_step_graph_t *g;
 *     if (!np_step_graph_create(&cfg, 8, &g, &err)) {          // steps 0 .. 7
 *         np_step_graph_write(g, 6, NP_STEP_GRAPH_DOT, stdout, &err);   // step 6, DOT
 *         char why[4096];
 *         int bad = np_step_graph_check(g, why, sizeof why);   // 0: every promise holds
 *         np_step_graph_free(g);
 *     }
 */
#ifndef NESTPIPE_STEPGRAPH_H
#define NESTPIPE_STEPGRAPH_H

#include <stdio.h>

#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct np_step_graph np_step_graph_t;

typedef enum np_step_graph_format {
    NP_STEP_GRAPH_TEXT, /* one line a task: its place, buffers and what it waits for */
    NP_STEP_GRAPH_DOT,  /* Graphviz: windows as clusters, dual-buffer and frozen-window edges
                           coloured */
    NP_STEP_GRAPH_JSON, /* {"nodes": [...], "edges": [...]} */
} np_step_graph_format;

/* The graph of steps 0 .. steps-1 (1 to 64) of a run of cfg, with as many batches as the
 * pipeline looks ahead at every step (the steady state once it is full: step 5 on). The
 * layer graph comes from cfg's model or model file (plugins loaded as for training). */
NP_NODISCARD NP_API np_status np_step_graph_create(const np_config *cfg, long steps,
                                                   np_step_graph_t **out, np_error *err);
NP_API void np_step_graph_free(np_step_graph_t *g);
/* Tasks step `step` submits (-1: all steps). */
NP_API long np_step_graph_tasks(const np_step_graph_t *g, long step);
/* Step `step` (0 .. steps-1) in format f; its dependencies on earlier steps' tasks are
 * listed with them. */
NP_NODISCARD NP_API np_status np_step_graph_write(const np_step_graph_t *g, long step,
                                                  np_step_graph_format f, FILE *out, np_error *err);
/* Checks the invariants (docs/pipeline.md "What the graph guarantees") over every step:
 * fresh rows (a batch's rows reach its windows only after the previous batch's updates,
 * unless the pipeline is async), frozen windows (a window's exchanges wait for no later
 * window's compute), overlap (fwp, nestpipe: window w's rows do not wait for window w-1's
 * compute), dense isolation (a node's update waits for that node's gradient only) and
 * batch isolation (no batch reads another's data but through the tables, the embedding
 * buffers' sync, the dense parameters and the previous batch's key set). Writes one line
 * per invariant ("ok" or its first violations) into report; returns the violations. */
NP_API int np_step_graph_check(const np_step_graph_t *g, char *report, size_t size);
/* The graph as one rank's trace, for np_replay (nestpipe/scale.h) at any rank count
 * without a traced run (docs/scale.md "A graph without a trace"): each node a task waiting
 * for its edges' sources (its deps: every edge, the writes after reads and writes too, not
 * only data flow) and its step's call, run for its cost from the shape (a
 * collective its local part) on the earliest free of `workers` compute lanes, collectives
 * on a communication lane; the run's facts (pipeline, windows, chunks, lookahead, ranks). */
NP_NODISCARD NP_API np_status np_step_graph_trace(const np_step_graph_t *g, int workers,
                                                  np_trace_t **out, np_error *err);

#ifdef __cplusplus
}
#endif
#endif
