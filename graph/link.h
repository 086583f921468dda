/* The dependencies of a step's tasks as they come, from their buffers and access modes in
 * submission order (StarPU's sequential consistency: a reader waits for the buffer's last
 * writer, a writer for the readers since, or for the last writer when none read). One
 * linker serves the step graph (graph/bgraph.c, all of its edges) and the running engine
 * (runtime/engine/submit.c: the trace's data-flow edges), so the trace draws the edges the
 * graph declares, not ones rebuilt from StarPU's handles.
 * Not here: the buffers of a node (graph/contract.c) or the graph's storage (bgraph.c). */
#ifndef NP_GRAPH_LINK_H
#define NP_GRAPH_LINK_H

#include <stdint.h>

#include "graph/step.h"

/* Why a dependency exists. FLOW: the node reads what the buffer's last writer wrote, but
 * StarPU orders it after the readers since (a read-write after reads: WAR edges), so the
 * edge is data flow only, implied by those. */
enum { NP_DEP_RAW = 1, NP_DEP_WAR = 2, NP_DEP_WAW = 3, NP_DEP_FLOW = 4 };

typedef struct np_sg_linker np_sg_linker;

/* Called for each edge into node `to`, from an earlier node; 0, or -1 to stop (out of
 * memory). */
typedef int (*np_sg_edge_fn)(void *ctx, int64_t from, int64_t to, const np_step_buf *b, int why);

np_sg_linker *np_sg_linker_new(void); /* NULL: out of memory */
void np_sg_linker_free(np_sg_linker *l);
/* Node `id` (larger than every id before; ids are the caller's: node indices, trace ids)
 * with nb buffers and their modes: fn for each of its edges, then its mark on the buffers.
 * A chunk's rows of an input slot are the slot's rows (a read-only partition); scratch
 * buffers have none. 0, or -1: out of memory or fn's -1. */
int np_sg_link(np_sg_linker *l, int64_t id, const np_step_buf *b, const uint8_t *mode, int nb,
               np_sg_edge_fn fn, void *ctx);
/* The producers of node `id` (the last writer of each buffer it reads, each once), at most
 * max of them into out; returns their count, or -1 out of memory. */
int np_sg_link_producers(np_sg_linker *l, int64_t id, const np_step_buf *b, const uint8_t *mode,
                         int nb, int64_t *out, int max);

#endif
