/* StarPU codelets of every op of the batch graph: one `struct starpu_codelet` each (name,
 * perf model, CPU function and, in the CUDA flavour, its CUDA twin), defined in
 * codelets/<op>.c over its kernel in codelets/kernels/, and the argument block each CPU function
 * unpacks. The layer kinds' codelets are made from the registry (tasks/layer.c). Codelets know only their buffers and these arguments; which handle
 * goes in which slot with which access mode is tasks/'s business.
 * All codelets take a variable number of buffers: the task gives the modes. */
#ifndef NP_CODELETS_CL_H
#define NP_CODELETS_CL_H

#include <stddef.h>
#include <stdint.h>
#include <starpu.h>

#include "nestpipe/nestpipe.h"

/* ---- layers: one fwd and one bwd codelet per registered kind (<kind>_fwd, <kind>_bwd),
 * made by tasks/layer.c; their CPU function builds the np_layer_io from the buffers and
 * calls the kind's kernel. Buffer indices are -1 for an absent buffer; a producer read
 * twice (a cross layer's x0 and x_l) is one buffer. */
#include "nestpipe/layer.h"
typedef struct np_cl_layer_args {
    int def;  /* registry index of the kind */
    long n;   /* rows of the chunk */
    np_precision precision; /* the run's --precision, handed to the kernel */
    np_layer_hp hp;
    np_layer_shape shape;
    int b_in[NP_LAYER_MAX_IN];    /* input k's buffer ... */
    size_t in_off[NP_LAYER_MAX_IN]; /* ... and the floats before the chunk's first row */
    int b_params;                 /* the node's own parameters (its handle of the partition) */
    size_t poff[NP_LAYER_MAX_PARAMS]; /* each tensor's offset in them */
    int b_out, b_saved, b_scratch;
    int b_dout;                   /* bwd: RW */
    int b_din[NP_LAYER_MAX_IN];   /* bwd: W, -1 when not wanted */
    int b_gd;                     /* bwd: W, the node's parameter gradients of this chunk */
    size_t goff[NP_LAYER_MAX_PARAMS]; /* each tensor's gradient offset in b_gd */
} np_cl_layer_args;

/* The batch's int64 "meta" counts (NP_META_*): codelets/kernels/xchg_plan.h. */
#include "codelets/kernels/xchg_plan.h"

/* Pooling of one chunk. Batch-wide buffers: offsets (T, nb+1) and pos
 * (nnz): the row of Rin (received rows, all tables) each key reads. */
typedef struct np_cl_emb_args {
    long nb;   /* samples in the (local) batch */
    long row0; /* first sample of the chunk */
    long n;    /* samples in the chunk */
    int T, d;
    int w;    /* the chunk's window: its rows are that window's Rin */
    int W, R; /* windows and ranks: where meta says whether pos holds -1s (NP_META_POOLED) */
    int zero; /* pool_bwd: first chunk of its window, which zeroes the window's grads */
    int L;    /* seq-len: table 0 a sequence of L slots (0: a bag like the rest) */
} np_cl_emb_args;
/* pool_fwd buffers: Rin_w R (Uq_w, d), offsets R, pos R, P W (n, S, d), meta R, where
 * S = np_slot_first(T, L) slots */
/* pool_bwd buffers: dP R (n, S, d), offsets R, pos R, meta R, grows_w RW (Uq_w, d):
 * the window's chunks accumulate into it one after another, in chunk order */
extern struct starpu_codelet np_cl_pool_fwd, np_cl_pool_bwd;

/* bce_fwd buffers: logits R (n), labels R (whole batch), loss W (one double) */
/* bce_bwd buffers: logits R (n), labels R (whole batch), dlogits W (n) */
typedef struct np_cl_bce_args {
    long row0, n;
    float scale; /* 1 / global batch */
    int output;  /* loss = output: the logits are each sample's loss (np_loss_fwd) */
} np_cl_bce_args;
extern struct starpu_codelet np_cl_bce_fwd, np_cl_bce_bwd;

/* ---- batch-wide ops */

/* sum buffers: in_0 .. in_{k-1} R, [meta R when width > 0], out W.
 * Sums the k inputs in index order (fixed, so results never depend on the schedule).
 * count = floats when width == 0, else meta[idx] * width. */
typedef struct np_cl_sum_args {
    int k;
    size_t count;
    int width;
    int idx;
} np_cl_sum_args;
extern struct starpu_codelet np_cl_sum;

/* What a task reports back, as the FIRST field of its arguments: the codelet writes it
 * into its own copy of the arguments, and the graph's callback (tasks/submit.c) adds it to
 * the engine's counters and the trace. So codelets hold no pointer into the engine. */
typedef struct np_cl_report {
    uint64_t bytes; /* bytes this task sent */
    uint64_t count; /* rows it copied (sync) */
    uint32_t segments; /* route: (window, table, owner) segments with keys for another rank */
    uint32_t pooled;   /* route: those of them sent pooled (docs/pipeline.md "Rows or pooled sums") */
    int32_t fail;   /* 1: a bad key, an overflow, no memory or an MPI error */
    int32_t nonfinite; /* 1: an update left a NaN or inf parameter (training diverged) */
    /* what the trace records of it (docs/tracing.md "What a task records"):
     * keys, uniq: route: the batch's keys and the distinct (window, table) rows among them;
     *   route_owner: the keys received as owner and the distinct rows they name */
    uint64_t keys, uniq;
    /* its collectives (exchange.c's x_ helpers): how many, the time inside them, and
     * starpu_timing_now() (the clock of StarPU's profiling times) at the first one's start
     * and the last one's end */
    uint32_t colls;
    /* npeer > 0: the task's argument block holds, peer_off bytes from this report, 2 npeer
     * uint64: the payload bytes it sent to each rank, then those it received from each
     * (its own rank's 0) */
    uint32_t npeer, peer_off;
    double comm_us, comm_first, comm_last;
    double post_us, pace_us; /* of comm_us: posting, and the emulated link (MPI only) */
} np_cl_report;

/* Route, exchanges and the all-reduce (codelets/exchange.c). `comm` is NULL on one rank
 * without MPI: the exchanges are then local copies with the same arithmetic. */
struct np_comm;
struct np_backend;
typedef struct np_cl_xchg_args {
    np_cl_report out;      /* FIRST field: what the task reports */
    np_shard shard;        /* row- or table-wise sharding over the R ranks */
    np_exchange exchange;  /* route: how each segment travels (rows, pooled, or by bytes) */
    int seq;               /* route: table 0 is a sequence (seq-len), whose keys go as rows */
    const int64_t *rows;   /* (T) rows of each table: the model's, immutable */
    struct np_comm *comm;
    long nb; /* local batch samples */
    int T, d, R;
    int W;           /* windows per batch */
    int w;           /* exchange_rows / exchange_grads: the window moved */
    size_t cap_recv;      /* distinct rows the owner-side buffers hold (E, its gradients) */
    size_t cap_stage;     /* rows of one window the owner's staging holds */
    size_t cap_recv_keys; /* keys the owner-side key buffers hold (received keys, map) */
    size_t cap_win;       /* rows each window's Rin and grads hold */
    size_t n;        /* all-reduce: floats of its bucket */
    int layers;      /* all-reduce: layers of its bucket (their gradients, then their sums,
                        in the task's buffers; 1: as one layer's) */
    /* --comm nccl: the NCCL backend (runtime/comm/backend.h), NULL for mpi. With a device backend
     * the submitters of exchange_rows, exchange_grads and allreduce pick the _nccl
     * codelets (CUDA only); route and a2a_keys stay on the CPU and on MPI. A host backend
     * here (a test's transport) replaces MPI in the CPU codelets. */
    struct np_backend *be;
    /* ranks the task's copy of the args has room for after its end: 2 peer_room uint64,
     * the payload bytes sent to each rank, then those received from each (out.npeer's,
     * np_cl_report; tasks/exchange.c appends them, zeroed). 0: none (a test's args) */
    uint32_t peer_room;
} np_cl_xchg_args;
/* The bytes by peer that follow a task's copy of its args (peer_room ranks of them). */
static inline uint64_t *np_cl_xchg_peers(np_cl_xchg_args *a) {
    return (uint64_t *)(void *)(a + 1); /* the struct's size keeps uint64's alignment */
}
/* route buffers: offsets R, keys R, uniq W (Uq scratch), pos W, sendkeys W, meta RW.
 * Window w is the samples [nb*w/W, nb*(w+1)/W). Dedups each (window, table)'s keys,
 * buckets them by owner (owner, window, table, key order) and points pos at each key's
 * row in its window's Rin, which holds (owner, table, row) order. A pooled (window, table,
 * owner) segment sends every key of the window's bags there instead, bag after bag, and
 * gets one row per bag: pos points the bag's first key there at it and its other keys
 * there at -1, which pooling skips. Keys go as np_xchg_key_row encodes them. */
/* a2a_keys buffers: meta RW, sendkeys R, recvkeys W, token RW (counts, then keys) */
/* route_owner buffers: recvkeys R, meta RW, uniq_o W, map W: the owner's distinct rows per
 * table across requesters and windows, and for each received key its E row */
/* exchange_rows buffers: E R, map R, meta R, Rin_w W, sbuf W (scratch), token RW,
 * recvkeys R (read when a segment is pooled): window w's rows */
/* rows_fresh buffers: E R, map R, meta R, Rin_w W, sbuf W, token RW, obits_w W, rbits_w W,
 * uniq_o of the previous batch R, its meta R, uniq_o R, recvkeys R: window w's rows the
 * previous batch
 * does not hold, placed in Rin_w; the bitmaps of which rows are shared (owner's, then the
 * requester's, xchg_plan.h) are kept for rows_shared */
/* rows_shared buffers: E R, map R, meta R, Rin_w RW, sbuf W, token RW, obits_w R, rbits_w R,
 * rbuf W (scratch), recvkeys R: after the sync, the rest of window w's rows into Rin_w */
/* exchange_grads buffers: grows_w R, map R, meta R, gE RW, rbuf W (scratch), token RW,
 * recvkeys R (read when a segment is pooled):
 * window w's grads; gE[map[i]] += received grad i in rank order, gE zeroed by window 0:
 * each row's sum runs in (window, rank, key) order in every pipeline */
/* allreduce buffers: glocal R (n), gdense W (n), all W (R, n) scratch, token RW:
 * all-gather then a sum in rank order (R <= 2), or a reduce-scatter summing each slice in
 * rank order then an all-gather (R > 2): the same bits on every rank and in both forms */
extern struct starpu_codelet np_cl_route, np_cl_a2a_keys, np_cl_route_owner, np_cl_exchange_rows,
    np_cl_rows_fresh, np_cl_rows_shared, np_cl_exchange_grads, np_cl_allreduce;
/* The same three on a CUDA worker through the args' NCCL backend (codelets/exchange.cu), same
 * buffers and arguments: CUDA functions only, so StarPU never runs them on a CPU and
 * --comm mpi never runs the CPU ones on a GPU. Defined in the CUDA flavour only. */
#ifdef NP_HAVE_CUDA
extern struct starpu_codelet np_cl_exchange_rows_nccl, np_cl_exchange_grads_nccl,
    np_cl_allreduce_nccl;
#endif

/* sync buffers: E_prev R, uniq_prev R, meta_prev R, E_cur RW, uniq_cur R, meta_cur R,
 * [Es_prev R, Es_cur RW]: rows (and state) in both batches' owner sets are copied from the
 * previous batch's buffer (already updated) into the current one (retrieved stale). */
typedef struct np_cl_sync_args {
    np_cl_report out; /* FIRST field: out.count = rows copied */
    int T, d;
    int with_state;
} np_cl_sync_args;
extern struct starpu_codelet np_cl_sync;

/* gather buffers: tables R, uniq_o R, meta R, E W, [state R, Es W]
 * scatter buffers: E R, uniq_o R, meta R, tables RW, [Es R, state RW] */
typedef struct np_cl_rows_args {
    int T, d;
    int with_state;
    const int64_t *row_base; /* (T+1) first local row of table t in the shard, immutable */
} np_cl_rows_args;
extern struct starpu_codelet np_cl_gather, np_cl_scatter;

/* sparse_update buffers: E RW, gE R, meta R, [Es RW] */
typedef struct np_cl_sparse_args {
    np_cl_report out; /* FIRST field: out.nonfinite when the updated rows are not finite */
    int d;
    int adagrad;
    float lr, eps;
} np_cl_sparse_args;
extern struct starpu_codelet np_cl_sparse_update;

/* dense_update buffers: params RW, gdense R (one layer's: n floats from params + off) */
typedef struct np_cl_dense_args {
    np_cl_report out; /* FIRST field: out.nonfinite when the updated layer is not finite */
    size_t n;   /* floats of the layer */
    size_t off; /* where the layer starts in params */
    float lr;
} np_cl_dense_args;
extern struct starpu_codelet np_cl_dense_update;

/* prefetch buffers: dense W, label W, offsets W, keys W: copies *src into the slot */
typedef struct np_cl_prefetch_args {
    np_cl_report out; /* FIRST field: out.fail when clustering runs out of memory */
    const void *src; /* const np_batch *, valid until the task ran */
    int W;           /* windows; with cluster, samples are reordered window after window */
    int cluster;     /* 1: key-centric clustering (np_cluster_windows) */
} np_cl_prefetch_args;
/* h2d buffers: the slot's handles, RW; nothing to move on CPU-only builds */
extern struct starpu_codelet np_cl_prefetch, np_cl_h2d;

/* What a task's submitter says decides its cost beyond its buffers' sizes: the FIRST field of
 * the callback argument of every task tasks/submit.c builds, tagged NP_CL_COST_TAG. key: a
 * hash of its shape (a layer's kind, hyper-parameters, widths, precision); meta > 0: the
 * count at int64 `at` of buffer meta - 1 (the keys or rows the batch really carries). */
#define NP_CL_COST_TAG 0x6e70636fu /* "npco" */
typedef struct np_cl_cost {
    uint32_t tag;
    uint32_t key;
    int meta, at;
} np_cl_cost;
/* The footprint of every nestpipe codelet's perf model (codelets/footprint.c; StarPU calls
 * it when it first needs the task's cost: dm* policies when the task is ready, calibration
 * after it ran): the sizes of its buffers, the cost's key and the count's bucket (about 6%
 * wide, so a history entry holds tasks within 6% of one another's work; docs/engine.md
 * "Perf models"). */
uint32_t np_task_footprint(struct starpu_task *task);
/* A history-based perf model keyed by np_task_footprint, in the file nestpipe.<sym> of
 * STARPU_HOME's sampling folder (its own, apart from other programs' and from the models
 * of builds before 0.6, which keyed on sizes alone). */
#define NP_PERFMODEL(sym)                                                                          \
    {.type = STARPU_HISTORY_BASED, .symbol = "nestpipe." sym, .footprint = np_task_footprint}

/* Defines codelet `var` running CPU function `fn`, with a history-based perf model whose
 * symbol is nestpipe.`sym` (`sym` is the codelet's name, shown in traces). NP_CODELET_CUDA adds a CUDA
 * function `cfn` (codelets/ops.cu) in the CUDA flavour, asynchronous on the worker's stream;
 * elsewhere it is NP_CODELET. */
#define NP_CODELET(var, fn, sym)                                                                   \
    static struct starpu_perfmodel var##_model = NP_PERFMODEL(sym);                                \
    struct starpu_codelet var = {.cpu_funcs = {fn},                                                \
                                 .cpu_funcs_name = {#fn},                                          \
                                 .nbuffers = STARPU_VARIABLE_NBUFFERS,                             \
                                 .model = &var##_model,                                            \
                                 .name = sym}
#ifdef NP_HAVE_CUDA
/* the codelets' CUDA functions (codelets/ops.cu) */
void np_cuda_pool_fwd(void *buffers[], void *cl_arg);
void np_cuda_pool_bwd(void *buffers[], void *cl_arg);
void np_cuda_bce_fwd(void *buffers[], void *cl_arg);
void np_cuda_bce_bwd(void *buffers[], void *cl_arg);
void np_cuda_sum(void *buffers[], void *cl_arg);
void np_cuda_dense_update(void *buffers[], void *cl_arg);
#define NP_CODELET_CUDA(var, fn, cfn, sym)                                                         \
    static struct starpu_perfmodel var##_model = NP_PERFMODEL(sym);                                \
    struct starpu_codelet var = {.cpu_funcs = {fn},                                                \
                                 .cpu_funcs_name = {#fn},                                          \
                                 .cuda_funcs = {cfn},                                              \
                                 .cuda_flags = {STARPU_CUDA_ASYNC},                                \
                                 .nbuffers = STARPU_VARIABLE_NBUFFERS,                             \
                                 .model = &var##_model,                                            \
                                 .name = sym}
#else
#define NP_CODELET_CUDA(var, fn, cfn, sym) NP_CODELET(var, fn, sym)
#endif

/* The data pointer of buffer i of a task (every nestpipe handle is a vector). */
#define NP_BUF(buffers, i) ((void *)STARPU_VECTOR_GET_PTR((buffers)[i]))

#endif
