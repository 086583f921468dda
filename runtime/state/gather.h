/* The logical model from its shards (runtime/state/gather.c), for --dump-params and evaluation. */
#ifndef NP_GRAPH_GATHER_H
#define NP_GRAPH_GATHER_H

#include "runtime/comm/comm.h"
#include "nestpipe/nestpipe.h"

/* Collective over all ranks of c: rank 0 gets in *full a one-rank model holding every
 * row where the single-process layout has it (dense parameters from rank 0's replica);
 * other ranks get NULL. With one rank *full is a copy. */
NP_NODISCARD np_status np_model_gather(const np_model_t *m, np_comm *c, np_model_t **full,
                                       np_error *err);

#endif
