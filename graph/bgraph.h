/* The step graph collected: the tasks of several steps as the walker hands them over, their
 * buffers, and the dependencies their access modes imply in submission order, each with
 * its reason (StarPU's sequential consistency: a reader waits for the buffer's last writer,
 * a writer for the readers since, or for the last writer when none read). No StarPU: the
 * graph a run would submit, to print (graph/print.c) and check (graph/check.c).
 * Not here: the schedule (graph/step.c) or the contracts (graph/contract.c). */
#ifndef NP_GRAPH_BGRAPH_H
#define NP_GRAPH_BGRAPH_H

#include "graph/link.h"
#include "graph/step.h"
#include "nestpipe/stepgraph.h"

typedef struct np_sg_node {
    np_step_node n;
    long step;      /* the driver's step whose submission made it */
    int buf0, nbuf; /* its buffers: g->buf[buf0 .. buf0 + nbuf), modes in g->mode */
} np_sg_node;

typedef struct np_sg_edge {
    int from, to;    /* node indices, from < to */
    np_step_buf buf; /* the buffer (a chunk's rows stand for their slot's) */
    int why;         /* NP_DEP_RAW, _WAR or _WAW (graph/link.h) */
} np_sg_edge;

/* Lets a test plant a wrong contract: called with each task's buffers and modes after the
 * contract's, may change them (and *n, up to NP_STEP_MAX_BUFS). */
typedef void (*np_sg_contract_hook)(const np_step_node *n, np_step_buf *buf, uint8_t *mode,
                                    int *nbuf);

struct np_step_graph {
    np_step_shape shape;
    np_graph_t *layers; /* owned when built from a config (shape.graph points here) */
    char pipeline[16], model[NP_PATH_MAX];
    long steps; /* steps 0 .. steps-1 were walked */
    np_sg_node *node;
    int n, cap;
    np_step_buf *buf;
    uint8_t *mode;
    int nbuf, cap_buf, cap_mode;
    np_sg_edge *edge;
    int nedge, cap_edge;
    np_sg_contract_hook hook;
    struct np_sg_prio *cp; /* owned: the critical path's priorities when cfg asked for them */
    np_sg_sizes sizes; /* the shape's sizes, for the nodes' costs (graph/critical.c) */
};

/* Walks steps 0 .. steps-1 of shape s with unlimited batches (the steady state from the
 * pipeline's fill on) into a new graph; hook may be NULL. */
NP_NODISCARD np_status np_sg_build(const np_step_shape *s, long steps, np_sg_contract_hook hook,
                                   np_step_graph_t **out, np_error *err);
/* The shape a run of cfg would have on the StarPU engine (with CUDA workers when cfg->gpus
 * > 0): its pipeline (split rows as the engine would turn them on), windows, chunks, ranks,
 * optimizer and exchange. */
void np_sg_shape_of(const np_config *cfg, const np_graph_t *layers, np_step_shape *s);
/* The edges into node v: g->edge[*lo .. *hi). */
void np_sg_in_edges(const np_step_graph_t *g, int v, int *lo, int *hi);
/* Nodes u and v (u < v): whether v depends on u through the edges, directly or not; data:
 * through reads of what was written only (RAW edges, the comm token's aside), so that what
 * v reads derives from what u wrote. -1: out of memory. The edges are StarPU's, so a
 * read-write access after readers has WAR edges to them and none from the buffer's writer
 * (StarPU orders it through the readers): `data` does not follow that flow and may answer 0
 * where data does flow (a check using it errs towards a violation, never past one). */
int np_sg_reaches(const np_step_graph_t *g, int u, int v, int data);
/* The node's name: "retrieve", "bwd:top1", "sum_edges:pooled". */
void np_sg_node_name(const np_step_graph_t *g, int i, char *out, size_t size);

#endif
