/* The DLRM parameter layout (private): dense layers in one contiguous array, tables and
 * their optimizer state per table; plus the reference forward/backward workspace.
 * Not here: how batches are scheduled (graph/) or where rows live across ranks (comm/). */
#ifndef NP_MODEL_MODEL_H
#define NP_MODEL_MODEL_H

#include "core/shard.h"
#include "nestpipe/nestpipe.h"

/* One linear layer of an MLP; W and b are views into np_model.dense. */
typedef struct np_layer {
    int in, out;
    int relu;     /* 1: ReLU after this layer; 0: the last top layer (sigmoid in the loss) */
    size_t w_off; /* W (out, in) at dense + w_off */
    size_t b_off; /* b (out) at dense + b_off */
} np_layer;

struct np_model {
    np_config cfg;    /* copy of the config the model was built from */
    int n_bot, n_top; /* layer counts */
    np_layer bot[NP_MAX_LAYERS];
    np_layer top[NP_MAX_LAYERS];
    float *dense; /* (n_dense) all MLP parameters: bot W,b..., top W,b... */
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

/* Number of dense tensors (W and b per layer) and their dump names ("bottom.0.weight"). */
int np_model_n_dense_tensors(const np_model_t *m);

/* Initial value of parameter element e of tensor k (dense tensors first, then tables),
 * a pure function of the seed: any rank can initialise any shard on its own. */
float np_model_init_value(const np_config *cfg, int k, int fan_in, int fan_out, int64_t rows,
                          uint64_t e);

/* ---- reference forward/backward on one batch (model/reference.c) */

typedef struct np_fwd_ws np_fwd_ws; /* activations and gradients for up to cap_n samples */

NP_NODISCARD np_status np_fwd_ws_create(const np_model_t *m, long cap_n, np_fwd_ws **out,
                                        np_error *err);
void np_fwd_ws_free(np_fwd_ws *ws);

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

/* Reference trainer, the oracle (model/reference.c): one step on a global batch. */
typedef struct np_reference np_reference;
NP_NODISCARD np_status np_reference_create(const np_config *cfg, np_model_t *m, np_reference **out,
                                           np_error *err);
NP_NODISCARD np_status np_reference_step(np_reference *r, const np_batch *b, double *loss,
                                         np_error *err);
void np_reference_free(np_reference *r);

#endif
