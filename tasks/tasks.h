/* Task submission, one function per node kind of the per-batch graph: which codelet, which
 * handles, which access modes. Dependencies follow from the access modes in submission
 * order (StarPU's implicit sequential consistency); runtime/engine/ decides that order. What a task
 * gets by its kind (priority, --place, the communication worker, its byte counter) comes
 * from the kind table (runtime/core/kinds.c), read by np_task_submit.
 * Not here: which buffers a task touches (graph/contract.c) or arithmetic (codelets/). */
#ifndef NP_TASKS_TASKS_H
#define NP_TASKS_TASKS_H

#include <starpu.h>

#include "codelets/cl.h"
#include "nestpipe/nestpipe.h"
#include "runtime/trace/trace.h"

typedef starpu_data_handle_t np_h;

/* Where tasks' reports (np_cl_report) go: the engine's counters, added by the task's
 * callback. */
typedef struct np_task_sink {
    uint64_t bytes[4]; /* sent: keys (and counts), rows, row gradients, dense all-reduce */
    uint64_t synced;   /* rows copied by dual-buffer syncs */
    uint64_t segments, pooled; /* remote exchange segments routed, and those sent pooled */
    int fail;          /* a task failed: a bad key, an overflow, no memory, an MPI error */
    /* the first update that left a non-finite parameter: (batch + 1) << 20 | (node + 1),
     * node -1 for the embedding rows; 0 while every update was finite. One word, so the
     * driver reads batch and node together. */
    uint64_t nonfinite;
} np_task_sink;

/* A task's buffers as its step graph node's contract lists them (graph/contract.c), in the
 * order its codelet reads them, resolved to handles, and its node kind. The submitters
 * below take them as they are; np_task_submit refuses a task whose handles, modes or kind
 * differ from ctx->expect (the layer tasks list their own), so the graph that `nestpipe
 * graph` prints and the tests check is the graph StarPU runs. */
typedef struct np_task_bufs {
    int n;
    const starpu_data_handle_t *h;
    const enum starpu_data_access_mode *m;
    int kind; /* np_node_kind */
    const char *op; /* the step graph's name for it */
} np_task_bufs;

/* What every task of a batch shares: its place in the graph and the trace to record in. */
typedef struct np_task_ctx {
    long batch; /* step index */
    int window; /* chunk / micro-batch, -1 for batch-wide tasks */
    int rank;
    np_trace *trace;      /* NULL: no tracing; times are StarPU's clock in microseconds */
    np_task_sink *sink;   /* where reports go (tasks submitted with NP_REPORT_IN_ARGS) */
    int comm_worker;      /* worker that runs every collective (NP_KIND_EXCHANGE), -1: any */
    unsigned compute_ctx; /* scheduling context of the other tasks (0: the global one) */
    int boost;            /* added to the kind's priority: earlier windows go first */
    int node;             /* model graph node of a layer task, -1 for the others */
    int chunk;            /* the chunk (window * chunks + c) of a chunk task, -1 otherwise */
    double flops;         /* the task's floating-point operations, 0 if unknown */
    /* where each np_place_kind may run (STARPU_CPU, STARPU_CUDA; 0: wherever its codelet
     * can), from --place (runtime/engine/devices.c); NULL: anywhere. A task's place kind is its
     * node kind's (np_node_kind_def.place). */
    const uint32_t *where;
    int gpus; /* CUDA workers running (0: CPU only): h2d moves the batch to them */
    /* this task only there (STARPU_CUDA, ...), whatever its kind's place; 0: no. A
     * collective with an arch (NCCL's, on the CUDA worker) is not sent to comm_worker. */
    uint32_t arch;
    /* What decides the task's cost beyond its buffers' sizes, for its perf model's footprint
     * (np_task_footprint, codelets/footprint.c): cost_key, a hash of its shape (a layer's kind, hyper-parameters,
     * widths, rows, precision); and, when cost_meta > 0, the count at int64 cost_at of
     * its buffer cost_meta - 1 (the batch's meta: the keys or rows it really carries),
     * read when the task is ready. All 0 (np_task_cost sets them): sizes only. */
    uint32_t cost_key;
    int cost_meta;
    int cost_at;
    /* the task's priority from the step graph's critical path (graph/critical.c) when
     * has_prio, instead of its kind's fixed one plus boost */
    int has_prio, prio;
    /* traced: the task's number (np_trace_new_id; 0: np_task_submit takes one) and the
     * numbers of the tasks it reads from, the step graph's edges (graph/link.h) */
    int64_t trace_id;
    const int64_t *deps;
    int n_deps;
    const np_task_bufs *expect; /* the step graph node's buffers; NULL: unchecked */
} np_task_ctx;

/* c with the cost fields above set: the count at int64 `at` of buffer `meta` (-1: none). */
static inline np_task_ctx np_task_cost(const np_task_ctx *c, uint32_t key, int meta, int at) {
    np_task_ctx x = *c;
    x.cost_key = key;
    x.cost_meta = meta + 1;
    x.cost_at = at;
    return x;
}

/* Where meta says whether a pooling chunk's rows came pooled (NP_META_POOLED). */
static inline int np_meta_pooled_at(const np_cl_emb_args *a) {
    return NP_META_POOLED(a->T, a->W, a->R);
}

/* `bytes` value meaning: the task's args start with an np_cl_report the codelet fills
 * (bytes sent, rows copied, failure); the callback adds it to ctx->sink and the trace. */
#define NP_REPORT_IN_ARGS UINT64_MAX

/* Submits one task of codelet cl and node kind `kind` over nbuf handles with the given
 * modes; args (size bytes) are copied and freed by StarPU. From the kind's row of the table:
 * the priority (plus ctx->boost), where it may run (ctx->where[place]), the communication
 * worker for a collective (NP_KIND_EXCHANGE, unless ctx->arch), and the byte counter its
 * report adds to. Records the task in ctx->trace when set. */
NP_NODISCARD np_status np_task_submit(const np_task_ctx *ctx, struct starpu_codelet *cl,
                                      np_node_kind kind, int nbuf, const np_h *h,
                                      const enum starpu_data_access_mode *modes, const void *args,
                                      size_t size, uint64_t bytes, np_error *err);

/* np_task_submit for a collective's codelet (codelets/exchange.c): the task's copy of a
 * gets room after it for the bytes it moves to and from each of a->R ranks (zeroed,
 * np_cl_xchg_peers; a->peer_room says how many), and reports in its args. */
NP_NODISCARD np_status np_task_submit_xchg(const np_task_ctx *ctx, struct starpu_codelet *cl,
                                           np_node_kind kind, int nbuf, const np_h *h,
                                           const enum starpu_data_access_mode *modes,
                                           const np_cl_xchg_args *a, np_error *err);

/* ---- the submitters: which codelet, its arguments and cost, over the buffers b of the
 * node's contract (graph/contract.c says which, in which order and mode) */
/* input stages (tasks/input.c): the batch into its slot, the slot to the CUDA workers */
NP_NODISCARD np_status np_submit_prefetch(const np_task_ctx *c, const np_cl_prefetch_args *a,
                                          const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_h2d(const np_task_ctx *c, const np_task_bufs *b, np_error *err);
/* route (tasks/route.c): requester dedup and bucketing, the two-phase All2All of counts
 * and keys (a collective), the owner's dedup */
NP_NODISCARD np_status np_submit_route(const np_task_ctx *c, const np_cl_xchg_args *a,
                                       const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_a2a_keys(const np_task_ctx *c, const np_cl_xchg_args *a,
                                          const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_route_owner(const np_task_ctx *c, const np_cl_xchg_args *a,
                                             const np_task_bufs *b, np_error *err);
/* the owner's rows (tasks/retrieve.c): table -> embedding buffer, and back */
NP_NODISCARD np_status np_submit_retrieve(const np_task_ctx *c, const np_cl_rows_args *a,
                                          const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_writeback(const np_task_ctx *c, const np_cl_rows_args *a,
                                           const np_task_bufs *b, np_error *err);
/* dual-buffer sync (tasks/sync.c) */
NP_NODISCARD np_status np_submit_sync(const np_task_ctx *c, const np_cl_sync_args *a,
                                      const np_task_bufs *b, np_error *err);
/* exchanges and the all-reduce (tasks/exchange.c): collectives, RW on the token; the
 * split form of the rows' exchange (fresh: rows the previous batch does not hold, shared:
 * the others after the sync); NCCL's codelets where the backend is on the device */
NP_NODISCARD np_status np_submit_exchange_rows(const np_task_ctx *c, const np_cl_xchg_args *a,
                                               const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_rows_fresh(const np_task_ctx *c, const np_cl_xchg_args *a,
                                            const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_rows_shared(const np_task_ctx *c, const np_cl_xchg_args *a,
                                             const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_exchange_grads(const np_task_ctx *c, const np_cl_xchg_args *a,
                                                const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_allreduce(const np_task_ctx *c, const np_cl_xchg_args *a,
                                           const np_task_bufs *b, np_error *err);
/* a chunk's pooling and its backward (tasks/fwd_bwd.c) */
NP_NODISCARD np_status np_submit_pool_fwd(const np_task_ctx *c, const np_cl_emb_args *a,
                                          const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_pool_bwd(const np_task_ctx *c, const np_cl_emb_args *a,
                                          const np_task_bufs *b, np_error *err);
/* the loss of a chunk: its sum (loss_fwd), the logits' gradient (loss_bwd) */
NP_NODISCARD np_status np_submit_loss_fwd(const np_task_ctx *c, const np_cl_bce_args *a,
                                          const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_loss_bwd(const np_task_ctx *c, const np_cl_bce_args *a,
                                          const np_task_bufs *b, np_error *err);
/* updates (tasks/update.c) */
NP_NODISCARD np_status np_submit_sparse_update(const np_task_ctx *c, const np_cl_sparse_args *a,
                                               const np_task_bufs *b, np_error *err);
NP_NODISCARD np_status np_submit_dense_update(const np_task_ctx *c, const np_cl_dense_args *a,
                                              const np_task_bufs *b, np_error *err);
/* sums (tasks/reduce.c): the b->n - 1 partials into the last buffer, `count` floats each,
 * in index order (a producer's edge gradients, a node's chunks' dense gradients) */
NP_NODISCARD np_status np_submit_sum(const np_task_ctx *c, size_t count, const np_task_bufs *b,
                                     np_error *err);

/* ---- layers of one chunk (tasks/layer.c) */
/* The handles of one layer task; in_off[k] floats skip to the chunk's rows of input k. */
typedef struct np_layer_handles {
    np_h in[NP_LAYER_MAX_IN];
    size_t in_off[NP_LAYER_MAX_IN];
    np_h params, out, saved, scratch; /* saved, scratch: NULL when the kind has none */
    np_h dout, din[NP_LAYER_MAX_IN], gd; /* bwd; din[k] NULL: not wanted; gd NULL: no params */
} np_layer_handles;
/* Makes the codelets of every registered kind; idempotent. Before the first submit. */
void np_layer_codelets_init(void);
/* Node `a->def` forward (bwd = 0) or backward over the chunk: a gives the kind, rows,
 * hyper-parameters, shape and parameter offsets; buffer indices are filled here. */
NP_NODISCARD np_status np_submit_layer(const np_task_ctx *c, int bwd, const np_cl_layer_args *a,
                                       const np_layer_handles *h, np_error *err);
/* This process's codelet name equal to `name` (a layer's or NULL), for merged traces. */
const char *np_layer_codelet_name(const char *name);

#endif
