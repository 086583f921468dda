/* The StarPU engine's private state, shared by its files in runtime/engine/: engine.c (life
 * cycle), buffers.c (registered buffers), chunk.c (a chunk's buffers), submit.c (step graph
 * nodes into tasks), schedule.c (the driver's step) and trace_merge.c.
 * Not in the library's API: np_trainer_t drives the engine (runtime/engine/engine.h). */
#ifndef NP_ENGINE_ENGINE_IMPL_H
#define NP_ENGINE_ENGINE_IMPL_H

#include "runtime/comm/comm.h"
#include "runtime/engine/devices.h"
#include "runtime/engine/engine.h"
#include "graph/critical.h"
#include "graph/link.h"
#include "graph/pipeline.h"
#include "graph/step.h"
#include "runtime/model/model.h"
#include "tasks/tasks.h"

/* A registered buffer: the handle and the memory behind it. */
typedef struct np_buf {
    np_h h;
    void *mem;
    size_t count, elem; /* registered size */
} np_buf;

/* Registers count elements of elem bytes (at least one), zeroed. */
NP_NODISCARD np_status np_buf_reg(np_buf *b, size_t count, size_t elem, const char *what,
                                  np_error *err);
/* Unregisters and frees; a zeroed np_buf is a no-op. */
void np_buf_unreg(np_buf *b);
/* Re-registers b with room for count elements, KEEPING its contents: batches already
 * routed or retrieved stay valid. Only when no task is in flight. */
NP_NODISCARD np_status np_buf_grow(np_buf *b, size_t count, size_t elem, const char *what,
                                   np_error *err);

/* Batches in flight: t trains while t+1 is retrieved, t+2 routed, t+3 made resident and
 * t+4 prefetched (DBP). Buffers of a stage are indexed by batch modulo these. */
#define NP_SLOTS NP_XCHG_SLOTS /* input slots: batches t .. t+4 (codelets/kernels/xchg_plan.h) */
#define NP_RSETS NP_XCHG_RSETS /* route sets: batches t .. t+2 */

/* One input slot: a batch as the data source gave it. The chunks read their rows of the
 * dense features and labels through sub-handles (a read-only partition submitted for the
 * training batch and undone before the slot is written again), so a device worker would
 * move only its chunk's rows. */
typedef struct np_slot {
    np_buf dense;   /* (nb, n_dense) */
    np_buf label;   /* (nb) */
    np_buf offsets; /* (T, nb+1) uint32 */
    np_buf keys;    /* (cap_nnz) int64 */
    np_h dense_part[64]; /* (W*C) chunk c's rows of dense, (n_c, n_dense) */
    np_h label_part[64]; /* (W*C) chunk c's labels, (n_c) */
    int planned;         /* the partitions are planned */
} np_slot;

/* What route computes for one batch, read until its write-back. */
typedef struct np_rset {
    np_buf uniq;     /* (cap_nnz) int64 distinct keys per table, table after table */
    np_buf pos;      /* (cap_nnz) int64 row of Rin each key reads */
    np_buf sendkeys; /* (cap_nnz) int64 owner-local rows, grouped by owner */
    np_buf meta;     /* (NP_META_SIZE) int64 counts */
    np_buf recvkeys; /* (cap_recv) int64 requested local rows, by requester */
    np_buf uniq_o;   /* (cap_recv) int64 distinct local rows per table (sorted) */
    np_buf map;      /* (cap_recv) int64 E row of each received key */
} np_rset;

/* Buffers of one row chunk of the batch (rows [row0, row0+n) of window w), sized from
 * the layers' shape functions. */
typedef struct np_chunk {
    long row0, n;
    int w;
    np_buf P, dP;                 /* (n, T*d) pooled embeddings and their gradient */
    np_buf act[NP_MAX_NODES];     /* (n, out) each node's output */
    np_buf dact[NP_MAX_NODES];    /* (n, out) its gradient */
    np_buf saved[NP_MAX_NODES];   /* (n, saved) or none */
    np_h scratch[NP_MAX_NODES];   /* (n, scratch) STARPU_SCRATCH, NULL when none */
    np_buf gd[NP_MAX_NODES];      /* (pn) the node's parameter gradients from this chunk */
    /* (n, in width) gradient of input k of node v when its producer feeds several edges */
    np_buf edge[NP_MAX_NODES][NP_LAYER_MAX_IN];
    np_buf loss; /* (1) double: BCE sum of the chunk */
} np_chunk;

struct np_sp_engine {
    np_config cfg;
    np_model_t *m;
    np_comm *comm;   /* NULL: one rank, no MPI */
    int R;           /* ranks */
    long nb;         /* samples per local batch (global batch / ranks) */
    np_pipeline_policy pol; /* the pipeline (graph/pipeline.h) */
    int W;           /* windows (micro-batches) per local batch: pol.windows */
    int C;           /* chunks per window; W * C chunks in all */
    int cluster;     /* 1: key-centric clustering of samples into windows */
    /* what the batch buffers hold (codelets/kernels/xchg_plan.h): the requester's keys, the owner's
     * received keys and rows, a window's rows; grown by make_room (runtime/engine/schedule.c) */
    np_xchg_caps cap;
    uint64_t buffer_bytes; /* the batch buffers' bytes at cap (np_xchg_caps_bytes) */
    uint64_t fixed_bytes;  /* those register_batch_buffers sized once: slots, counts, grads */
    np_xchg_bound_scratch bound; /* make_room's per-owner bounds of a batch */
    int64_t *owner_bound;        /* (2 R) its bounds: keys and rows to each owner */
    /* model: the dense parameters partitioned by node (a filter over one handle), so a layer
     * task reads only its node's tensors and a dense update writes only its node's */
    np_h params;                    /* (n_dense) the whole block: partitioned while the engine runs */
    np_h node_params[NP_MAX_NODES]; /* (pn) node v's parameters; NULL for a node without */
    int n_param_nodes;              /* children of the partition (nodes with parameters) */
    np_h tables, state;
    np_slot slot[NP_SLOTS];
    np_rset rset[NP_RSETS];
    /* (cap_recv, d) the embedding buffers: retrieved rows of batch b in E[b % pol.buffers]
     * (two for the dual buffer of dbp) */
    np_buf E[2];
    np_buf Es[2]; /* (cap_recv) their Adagrad state */
    /* the training batch's buffers (one batch trains at a time) */
    np_buf *Rin;       /* (W) (cap_win, d) each window's received rows */
    np_buf *grows;     /* (W) (cap_win, d) their gradients, summed over the window's chunks */
    np_buf gE;         /* (cap_recv, d) owner's summed row gradients */
    np_buf sbuf, rbuf; /* (cap_recv, d) exchange staging */
    /* the split row exchange of the first windows (docs/pipeline.md "The batch boundary"):
     * which rows of the next batch are shared, per early window: the owner's bitmaps
     * (cap_recv / 32 + R words) and the requester's (cap_win / 32 + R words) */
    np_buf obits[2], rbits[2];
    np_buf token; /* (1) the comm token: every collective takes it RW */
    /* dense gradients per node with parameters, so each node's all-reduce can start as
     * soon as the last window's backward is past it */
    np_buf glocal[NP_MAX_NODES]; /* (pn) this rank's, summed over chunks */
    np_buf gdense[NP_MAX_NODES]; /* (pn) summed over ranks */
    np_buf gall[NP_MAX_NODES];   /* all-reduce staging of the bucket node v begins
                                    (np_xchg_allreduce_room; none for other nodes) */
    np_chunk *ch;                /* (W * C) window after window */
    uint32_t part_dense[64];     /* (W * C) floats of each chunk's dense rows */
    uint32_t part_label[64];     /* (W * C) each chunk's labels */
    np_trace *trace;
    struct np_sg_prio *cp; /* key priorities = critical-path (graph/critical.c); NULL: fixed */
    struct np_sg_linker *link; /* traced: the step graph's edges as tasks come (graph/link.h) */
    np_trace *merged; /* rank 0 after np_engine_finish: every rank's events */
    double t0_us;     /* trace time origin: StarPU's clock right after a barrier of all ranks */
    int comm_worker;
    np_devices dev; /* CUDA workers and where each node kind runs (--gpus, --place) */
    struct np_backend *nccl; /* --comm nccl: the rank's NCCL communicator; NULL for mpi */
    int idle_hook; /* starpu_idle_hook_register's id; -1: workers spin when idle */
    unsigned compute_ctx;
    np_task_sink sink; /* what the tasks report: bytes sent, rows synced, a failure */
    long step;         /* the next batch to train */
    np_step_shape shape; /* the step graph's, set as each step is submitted */
    np_step_cursor cur;  /* the walker's: next batch of each early stage, split rows */
    int pending;       /* a step was submitted and not yet waited for */
};

/* Everything a batch's tasks share: its place in the graph and the codelets' arguments. */
typedef struct np_batch_args {
    np_task_ctx ctx;
    np_cl_xchg_args xa;
    np_cl_rows_args wa;
    np_cl_sparse_args sa;
    np_cl_dense_args da;
    np_cl_sync_args ya;
} np_batch_args;

void np_engine_batch_args(np_sp_engine *e, long batch, np_batch_args *b);
/* NP_OK, or the divergence error when an update task reported a NaN or inf (sink). */
NP_NODISCARD np_status np_engine_check_finite(np_sp_engine *e, np_error *err);
/* Room for what caps c say (grows only; keeps contents). Only when no task is in flight. */
NP_NODISCARD np_status np_engine_grow_nnz(np_sp_engine *e, const np_xchg_caps *c, np_error *err);

/* runtime/engine/chunk.c: a chunk's buffers from the layers' shapes, and their release */
NP_NODISCARD np_status np_chunk_register(np_sp_engine *e, np_chunk *k, np_error *err);
void np_chunk_unregister(np_chunk *k);

/* runtime/engine/submit.c: the handle of a step graph buffer; node n of the step graph as its task
 * (src: the batch a prefetch reads) */
np_h np_engine_handle(const np_sp_engine *e, const np_step_buf *b);
NP_NODISCARD np_status np_engine_submit_node(np_sp_engine *e, const np_step_node *n,
                                             const np_batch *src, np_error *err);
/* runtime/engine/schedule.c: the step graph's shape of this engine (policy, windows, ranks, model)
 * */
void np_engine_shape(const np_sp_engine *e, np_step_shape *s);

/* runtime/engine/trace_merge.c: every rank's events merged on rank 0 (collective) */
NP_NODISCARD np_status np_engine_merge_traces(np_sp_engine *e, np_trace **out, np_error *err);

#endif
