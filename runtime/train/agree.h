/* The ranks' agreement on the configuration (runtime/train/agree.c). */
#ifndef NP_TRAIN_AGREE_H
#define NP_TRAIN_AGREE_H

#include "runtime/comm/comm.h"
#include "nestpipe/layer.h"

/* Compares cfg's keys (all but np_agree_key_is_own's), the model graph (graph, or the one
 * cfg builds) and the sizes of the files it reads across the ranks of comm. Collective:
 * every rank returns the same status; NP_STATUS_BAD_INPUT with one line per difference
 * ("ranks disagree on KEY: 'V' on ranks ...; 'W' on rank ..."). One rank: NP_OK. */
NP_NODISCARD np_status np_config_agree(np_comm *comm, const np_config *cfg,
                                       const np_graph_t *graph, np_error *err);
/* The same comparison in one process, of the configurations of R ranks (each with the graph
 * it builds): the verdict and the message np_config_agree gives such ranks. For tests and
 * the fuzzing harness. */
NP_NODISCARD np_status np_config_agree_local(const np_config *cfgs, int R, np_error *err);
/* Every rank's outcome so far: st where this rank failed, NP_STATUS_BAD_INPUT ("another
 * rank failed ...") where another did, NP_OK where none did. Collective. */
NP_NODISCARD np_status np_agree_outcome(np_comm *comm, np_status st, np_error *err);
/* 1 for a key whose value may differ between ranks (what a rank prints; rank 0's outputs). */
int np_agree_key_is_own(const char *key);

#endif
