/* The model (private): its layer graph, the dense parameters of every node in one
 * contiguous array (node order, tensor order), this rank's shard of the tables and their
 * optimizer state; plus the reference forward/backward workspace.
 * Not here: how batches are scheduled (runtime/engine/) or where rows live across ranks (runtime/comm/). */
#ifndef NP_MODEL_MODEL_H
#define NP_MODEL_MODEL_H

#include "runtime/core/shard.h"
#include "runtime/model/graph.h"
#include "nestpipe/nestpipe.h"

struct np_model {
    np_config cfg;    /* copy of the config the model was built from */
    np_graph_t *graph; /* finalized: parameter offsets and gradient edges laid out */
    float *dense;      /* (n_dense) every node's tensors: node order, tensor order */
    size_t n_dense;
    int T, d;            /* tables, embedding dim */
    int64_t *rows;       /* (T) rows per table */
    int64_t *local_rows; /* (T) rows of table t held here (= rows[t] on one rank) */
    int64_t *row_base;   /* (T+1) first local row of table t in table_mem; [T] = total */
    float *table_mem;    /* (row_base[T], d) this rank's shard of all tables, table after table */
    float *state_mem;    /* (row_base[T]) row-wise Adagrad accumulators; NULL for SGD */
    float **table;       /* T views into table_mem: (local_rows[t], d) */
    float **state;       /* T views into state_mem: (local_rows[t]); NULL for SGD */
};

/* Number of dense tensors (over all nodes); dumps name them "<node>.<tensor>". */
int np_model_n_dense_tensors(const np_model_t *m);

/* Initial value of element e of embedding table t: U(-sqrt(1/rows), sqrt(1/rows)) from RNG
 * stream NP_STREAM_PARAM + (dense tensors) + t, a pure function of the seed: any rank can
 * initialise any shard on its own. */
float np_model_table_init(const np_model_t *m, int t, uint64_t e);

/* ---- reference forward/backward on one batch (runtime/model/reference.c) */

typedef struct np_fwd_ws np_fwd_ws; /* activations and gradients for up to cap_n samples */

NP_NODISCARD np_status np_fwd_ws_create(const np_model_t *m, long cap_n, np_fwd_ws **out,
                                        np_error *err);
void np_fwd_ws_free(np_fwd_ws *ws);
/* After np_reference_forward: the (n, width) values of a graph input or node (NP_IN_POOLED:
 * the pooled embeddings; NP_IN_DENSE is the batch's own). */
const float *np_fwd_ws_values(const np_fwd_ws *ws, int node);

/* ---- next-item ranking (runtime/model/eval.c), for a model whose output is a nextitem loss */
/* Each sequence of b with a history of 2..L items (table 0's bag after its K negatives):
 * its vector Y[s, len-2] (Y: (n, L*d)) into user and its last item into target, in sample
 * order. Returns how many. */
long np_rank_select(const float *Y, const np_batch *b, int L, int K, int d, float *user,
                    int64_t *target);
/* rank[u] = 1 + the items of E (items, d) whose dot product with user u beats its target's
 * strictly; tscore (nu) gets the target's score; scores holds nu x 1024 floats. */
void np_rank_items(const float *user, long nu, int d, const float *E, int64_t items,
                   const int64_t *target, float *tscore, float *scores, long *rank);

/* Forward pass; writes the probability of every sample to prob (n) if non-NULL and returns
 * the SUM of the BCE over the batch in *loss_sum. The tables are read directly. */
NP_NODISCARD np_status np_reference_forward(const np_model_t *m, np_fwd_ws *ws, const np_batch *b,
                                            float *prob, double *loss_sum, np_error *err);

/* Gradients of (loss_sum * scale) w.r.t. every parameter, after np_reference_forward on
 * the same batch: dense grads to gdense (n_dense), table grads as dense tables
 * gtable[t] (rows[t], d). For the gradient checks; the trainer uses the sparse path. */
NP_NODISCARD np_status np_reference_backward_full(const np_model_t *m, np_fwd_ws *ws,
                                                  const np_batch *b, float scale, float *gdense,
                                                  float **gtable, np_error *err);

/* Reference trainer, the oracle (runtime/model/reference.c): one step on a global batch. */
/* The error of a run whose update of `step` (1-based) left a NaN or inf in `what` (a tensor
 * or layer name): NP_STATUS_BAD_INPUT, like a loss that is not finite. */
NP_NODISCARD np_status np_model_diverged(const np_model_t *m, long step, const char *what,
                                         np_error *err);

typedef struct np_reference np_reference;
NP_NODISCARD np_status np_reference_create(const np_config *cfg, np_model_t *m, np_reference **out,
                                           np_error *err);
NP_NODISCARD np_status np_reference_step(np_reference *r, const np_batch *b, double *loss,
                                         np_error *err);
void np_reference_free(np_reference *r);

#endif
