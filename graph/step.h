/* The batch graph as a value: the operations one step of the training loop submits, in
 * submission order, each with its node kind, its place (batch, window, chunk, layer node,
 * priority boost) and its buffers with their access modes. One walker (np_step_walk) holds
 * the schedule of docs/pipeline.md and hands each operation to a sink: the StarPU engine's
 * sink submits it (runtime/engine/submit.c); np_step_graph's collects it and derives the
 * dependencies the modes imply (graph/bgraph.c), without StarPU.
 * Not here: how a buffer becomes a StarPU handle (runtime/engine/) or a codelet's arithmetic. */
#ifndef NP_GRAPH_STEP_H
#define NP_GRAPH_STEP_H

#include <stdint.h>

#include "runtime/core/kinds.h"
#include "graph/pipeline.h"
#include "codelets/kernels/xchg_plan.h"
#include "nestpipe/layer.h"

/* The operations a step submits; each is one task (np_step_op_def), except the markers
 * NP_OP_ROOM (the driver grows its buffers before a prefetch) and NP_OP_PARTITION /
 * NP_OP_UNPARTITION (the training slot's rows split into the chunks' sub-buffers). */
typedef enum np_step_op {
    NP_OP_PREFETCH,
    NP_OP_H2D,
    NP_OP_ROUTE,
    NP_OP_A2A_KEYS,
    NP_OP_ROUTE_OWNER,
    NP_OP_RETRIEVE,
    NP_OP_SYNC,
    NP_OP_EXCHANGE_ROWS,
    NP_OP_ROWS_FRESH,
    NP_OP_ROWS_SHARED,
    NP_OP_POOL_FWD,
    NP_OP_LAYER_FWD,
    NP_OP_LOSS_FWD,
    NP_OP_LOSS_BWD,
    NP_OP_SUM_EDGES, /* a producer's gradient from its consumer edges */
    NP_OP_LAYER_BWD,
    NP_OP_POOL_BWD,
    NP_OP_EXCHANGE_GRADS,
    NP_OP_SUM_DENSE, /* a node's dense gradients summed over the chunks */
    NP_OP_ALLREDUCE,
    NP_OP_DENSE_UPDATE,
    NP_OP_SPARSE_UPDATE,
    NP_OP_WRITEBACK,
    NP_OP_ROOM,
    NP_OP_PARTITION,
    NP_OP_UNPARTITION,
    NP_OP_COUNT
} np_step_op;

/* The buffers a step's tasks touch, by role; the index fields say which one (np_step_buf).
 * Per batch: an input slot (batch % NP_STEP_SLOTS), a route set (batch % NP_STEP_RSETS), an
 * embedding buffer (batch % policy buffers). Per window: Rin, grows, obits, rbits. Per
 * chunk (window * chunks + c): the activations and gradients of each layer node. */
/* clang-format off */
typedef enum np_buf_role {
    /* of input slot s */
    NP_B_DENSE, NP_B_LABEL, NP_B_OFFSETS, NP_B_KEYS,
    /* of slot s, chunk c's rows */
    NP_B_DENSE_PART, NP_B_LABEL_PART,
    /* of route set s */
    NP_B_UNIQ, NP_B_POS, NP_B_SENDKEYS, NP_B_META, NP_B_RECVKEYS, NP_B_UNIQ_O, NP_B_MAP,
    /* embedding buffer s */
    NP_B_E, NP_B_ES,
    /* one of each */
    NP_B_TABLES, NP_B_STATE, NP_B_TOKEN, NP_B_SBUF, NP_B_RBUF, NP_B_GE,
    /* of window s */
    NP_B_RIN, NP_B_GROWS, NP_B_OBITS, NP_B_RBITS,
    /* of chunk c */
    NP_B_P, NP_B_DP, NP_B_LOSS,
    /* of chunk c, layer node v (EDGE: its input k) */
    NP_B_ACT, NP_B_DACT, NP_B_SAVED, NP_B_SCRATCH, NP_B_GD, NP_B_EDGE,
    /* of layer node v */
    NP_B_PARAMS, NP_B_GLOCAL, NP_B_GDENSE, NP_B_GALL,
    NP_B_ROLE_COUNT
} np_buf_role;
/* clang-format on */

typedef struct np_step_buf {
    uint8_t role; /* np_buf_role */
    uint8_t k;    /* input of an edge gradient */
    int16_t s;    /* slot, route set, embedding buffer or window; 0 when none */
    int16_t c;    /* chunk; 0 when none */
    int16_t v;    /* layer node; 0 when none */
} np_step_buf;

/* Access modes, StarPU's values (STARPU_R, STARPU_W, STARPU_RW, STARPU_SCRATCH). */
enum { NP_MODE_R = 1, NP_MODE_W = 2, NP_MODE_RW = 3, NP_MODE_SCRATCH = 4 };

#define NP_STEP_SLOTS NP_XCHG_SLOTS /* input slots: batches t .. t+4 */
#define NP_STEP_RSETS NP_XCHG_RSETS /* route sets: batches t .. t+2 */
/* the most buffers of one task: a sum of 64 chunks' partials, its count and its sum */
#define NP_STEP_MAX_BUFS 66

/* What decides a step's graph besides the pipeline policy. */
typedef struct np_step_shape {
    np_pipeline_policy pol;
    int W, C;                /* windows, chunks per window (W * C <= 64) */
    int R;                   /* ranks: 1 has no dense all-reduce */
    const np_graph_t *graph; /* the model's layer graph (finalized) */
    int state;               /* the sparse optimizer keeps per-row state (Adagrad) */
    int nccl;                /* the exchanges are NCCL's: rows only, no key buffer */
    int gpus;                /* CUDA workers: h2d reads the slot for them */
    long bucket;             /* dense all-reduce: layers' gradients together in buckets of
                                at least this many floats, in backward order; 0: one
                                all-reduce a layer (np_sg_bucket) */
} np_step_shape;

/* The most layers in one all-reduce bucket: its task lists two buffers a layer and two
 * more (NP_STEP_MAX_BUFS). */
#define NP_SG_BUCKET_LAYERS 32
/* The bucket of the dense all-reduce that begins at layer node v (the highest of it: the
 * walk goes backward): its lowest layer node, and in *floats (NULL-safe) its gradients'
 * floats. Buckets take layers with parameters from the last node down, each closed once
 * it holds s->bucket floats or NP_SG_BUCKET_LAYERS layers (every layer alone when
 * s->bucket is 0), the last one with what remains; v must begin one (np_sg_bucket_first). */
int np_sg_bucket(const np_step_shape *s, int v, size_t *floats);
/* 1 when layer node v begins a bucket. */
int np_sg_bucket_first(const np_step_shape *s, int v);

/* What a node's cost depends on besides the graph: the rank's batch, the tables, their
 * dimension, the keys a bag (mean) and the dense features. */
typedef struct np_sg_sizes {
    long nb;
    int T, d, hot, dense;
} np_sg_sizes;

/* One operation of a step. */
typedef struct np_step_node {
    np_step_op op;
    np_node_kind kind;
    long batch;
    int window; /* -1: batch-wide */
    int chunk;  /* window * C + c of a chunk's task, -1 otherwise */
    int node;   /* layer node of a layer task (and its gradient sums), -1 otherwise */
    int boost;  /* added to the kind's priority: a batch's earlier windows go first */
    int arg;    /* the layer node whose edges a SUM_EDGES adds (NP_IN_POOLED: pooling's);
                   an ALLREDUCE's bucket, from `node` down to this one (np_sg_bucket) */
} np_step_node;

/* Where the walker is between steps: the next batch of each early stage and the batch
 * whose fresh rows went under the previous step (split rows). Zeroed but fresh_for -1
 * before the first step (np_step_cursor_init). */
typedef struct np_step_cursor {
    long next[4]; /* prefetch, h2d, route, retrieve */
    long fresh_for;
} np_step_cursor;

void np_step_cursor_init(np_step_cursor *c);

/* Receives each operation in submission order; a non-zero status stops the walk (the
 * walker still hands over an UNPARTITION owed, then returns that status; the cursor is then
 * not the next step's, and the run that saw the error stops). */
typedef np_status (*np_step_emit)(void *ctx, const np_step_node *n, np_error *err);

/* The operations of step t, given n >= 1 batches from t on (the walker looks ahead up to
 * the policy's `ahead` of them): the early stages of the batches due, the training batch's
 * windows, updates and write-back, and the sync of batch t+1. */
NP_NODISCARD np_status np_step_walk(const np_step_shape *s, np_step_cursor *cur, long t, int n,
                                    np_step_emit emit, void *ctx, np_error *err);

/* The buffers node n touches and their modes, in the order its codelet reads them
 * (NP_BUF(buffers, i)); returns their count. A buffer met twice (a layer reading one input
 * on two slots) is listed once, its modes joined. */
int np_step_buffers(const np_step_shape *s, const np_step_node *n, np_step_buf *buf, uint8_t *mode);

/* The operation's name ("retrieve", "layer_fwd", ...), kind and whether it is a task. */
typedef struct np_step_op_def {
    const char *name;
    np_node_kind kind;
    int task; /* 0: a marker (room, partition) */
} np_step_op_def;
const np_step_op_def *np_step_op_get(np_step_op op);
/* A role's name ("E", "Rin", "act", ...). */
const char *np_buf_role_name(np_buf_role r);
/* Buffer b as text: "E[1]", "act[c3,v2]", "tables". */
void np_step_buf_name(const np_step_buf *b, char *out, size_t size);

#endif
