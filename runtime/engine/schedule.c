/* The driver's step on the StarPU engine: the step graph walked (graph/step.c) with the
 * engine's sink (room for the batch before its prefetch, the training slot's partition,
 * each task through runtime/engine/submit.c), then the wait for the batch's loss.
 * Not here: the schedule itself (graph/), a task's handles (submit.c) or buffers (engine.c). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/data/data.h"
#include "runtime/comm/backend.h"
#include "runtime/engine/engine_impl.h"

/* Before batch b enters the pipeline: room for its keys on this rank, and for what the
 * ranks' batches can send it as owner, growing the buffers after draining what is in
 * flight, which keeps their contents. Each rank bounds what its batch sends every owner
 * (np_xchg_owner_bounds: keys, and the rows they name) and a reduce-scatter on the
 * control channel sums them for each owner: O(keys + R) a rank, MPI's O(log R) rounds.
 * Every rank takes part whatever failed on it before (out of memory: it sends zeros and
 * fails after), so none waits for another; each grows by its own sums. Memory per rank
 * follows what it receives, not R times its own batch (docs/engine.md "Memory and time
 * per rank"). */
static np_status make_room(np_sp_engine *e, long batch, const np_batch *b, np_error *err) {
    np_xchg_caps need = {.keys = b->nnz, .recv_keys = b->nnz, .recv = b->nnz, .stage = b->nnz};
    int oom = np_xchg_window_keys_bound(b->offsets, b->n, b->n_tables, e->W, b->nnz, &need.win);
    if (e->comm && e->R > 1) {
        double t0 = np_engine_clock_us(e);
        int64_t mine[2];
        if (np_xchg_owner_bounds(b->offsets, b->keys, b->n, b->n_tables, e->m->rows,
                                 (int)e->cfg.shard, e->R, e->W, e->m->d, (int)e->cfg.exchange,
                                 e->cfg.seq_len > 0, e->owner_bound, &e->bound))
            oom = 1; /* the bounds are zeros: the collective still runs */
        if (np_comm_reduce_scatter_i64(e->comm, NP_CHAN_CTL, e->owner_bound, mine, 2))
            return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed agreeing on batch sizes",
                          e->cfg.rank);
        /* the control channel's collective, on the driver's row */
        np_engine_trace_driver(e, NP_NODE_CONTROL, "agree_sizes", batch, t0,
                               np_engine_clock_us(e), (uint64_t)(e->R - 1) * 2 * sizeof(int64_t));
        if (oom)
            return np_err(err, NP_STATUS_NO_MEMORY,
                          "rank %d: out of memory bounding batch %ld's exchange", e->cfg.rank,
                          batch + 1);
        need.recv_keys = (size_t)mine[0];
        need.stage = (size_t)mine[1];
        /* the distinct rows: no more than it owns */
        size_t owned = (size_t)e->m->row_base[e->m->T];
        need.recv = need.stage < owned ? need.stage : owned;
        /* MPI counts are ints: keys received in one All2All, rows in one exchange */
        if (mine[0] > INT_MAX)
            return np_err(err, NP_STATUS_UNSUPPORTED,
                          "rank %d, step %ld: the ranks' batches may send this rank %lld keys in "
                          "one All2All, past MPI's count limit (2^31 - 1); use a smaller --batch "
                          "or more ranks",
                          e->cfg.rank, batch + 1, (long long)mine[0]);
    }
    if (oom) return np_err(err, NP_STATUS_NO_MEMORY, "out of memory sizing the windows");
    np_xchg_caps cap = e->cap;
    if (!np_xchg_caps_grow(&cap, &need)) return NP_OK;
    starpu_task_wait_for_all();
    return np_engine_grow_nnz(e, &cap, err);
}

/* The walker's sink: the driver's markers here, every task through runtime/engine/submit.c. */
typedef struct sink {
    np_sp_engine *e;
    long t;
    const np_batch *const *b; /* batches t, t+1, ... */
} sink;

static np_status put(void *ctx, const np_step_node *n, np_error *err) {
    sink *k = ctx;
    np_sp_engine *e = k->e;
    np_slot *sl = &e->slot[n->batch % NP_SLOTS];
    unsigned K = (unsigned)(e->W * e->C);
    switch (n->op) {
    case NP_OP_ROOM: return make_room(e, n->batch, k->b[n->batch - k->t], err);
    case NP_OP_PARTITION: /* the chunks read their rows through sub-handles */
        starpu_data_partition_readonly_submit(sl->dense.h, K, sl->dense_part);
        starpu_data_partition_readonly_submit(sl->label.h, K, sl->label_part);
        return NP_OK;
    case NP_OP_UNPARTITION: /* the slot is written again by a later prefetch */
        starpu_data_unpartition_submit(sl->dense.h, K, sl->dense_part, STARPU_MAIN_RAM);
        starpu_data_unpartition_submit(sl->label.h, K, sl->label_part, STARPU_MAIN_RAM);
        return NP_OK;
    default:
        return np_engine_submit_node(e, n, n->op == NP_OP_PREFETCH ? k->b[n->batch - k->t] : NULL,
                                     err);
    }
}

void np_engine_shape(const np_sp_engine *e, np_step_shape *s) {
    *s = (np_step_shape){.pol = e->pol,
                         .W = e->W,
                         .C = e->C,
                         .R = e->R,
                         .graph = e->m->graph,
                         .state = e->m->cfg.sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD,
                         .nccl = e->nccl && e->nccl->ops->on_device,
                         .gpus = e->dev.ncuda,
                         .bucket = np_config_bucket_floats(&e->cfg)};
}

np_status np_engine_submit(np_sp_engine *e, const np_batch *const *b, int n, np_error *err) {
    const np_model_t *m = e->m;
    long t = e->step;
    if (n < 1) return np_err(err, NP_STATUS_INTERNAL, "step %ld: no batch given", t + 1);
    for (int i = 0; i < n; i++)
        if (b[i]->n != e->nb || b[i]->n_tables != m->T || b[i]->n_dense != np_config_dense(&m->cfg))
            return np_err(err, NP_STATUS_INTERNAL,
                          "batch shape (n=%ld, dense=%d, tables=%d) does not fit the engine "
                          "(n=%ld, dense=%d, tables=%d)",
                          b[i]->n, b[i]->n_dense, b[i]->n_tables, e->nb, np_config_dense(&m->cfg), m->T);
    for (int i = 0; i < n; i++) {
        np_status bad = np_batch_check_seq(b[i], np_config_seq_slots(&m->cfg), err);
        if (bad) return bad;
    }
    e->pending = 1;
    np_status st = NP_OK;
    if (e->trace) np_trace_set_step(e->trace, t); /* the tasks below say this call made them */
    /* the step graph (graph/step.c), each node submitted as it comes */
    np_engine_shape(e, &e->shape);
    /* critical-path priorities, from the graph of the steady step (made again if the shape
     * changed) */
    if (m->cfg.priorities == NP_PRIORITIES_CRITICAL &&
        (!e->cp || !np_sg_prio_fits(e->cp, &e->shape))) {
        np_sg_prio_free(e->cp);
        e->cp = NULL;
        np_sg_sizes z = {.nb = e->nb, .T = m->T, .d = m->d, .hot = m->cfg.hot,
                         .dense = np_config_dense(&m->cfg)};
        st = np_sg_prio_create(&e->shape, &z, &e->cp, err);
        if (!st && e->trace) { /* the trace says from when */
            char from[48];
            snprintf(from, sizeof from, "critical-path from step %ld", t + 1);
            np_trace_set_info(e->trace, "priorities", from);
        }
    }
    sink k = {e, t, b};
    if (!st) st = np_step_walk(&e->shape, &e->cur, t, n, put, &k, err);
    if (st) starpu_task_wait_for_all(); /* leave nothing half-submitted running */
    return st;
}

np_status np_engine_check_finite(np_sp_engine *e, np_error *err) {
    uint64_t v = __atomic_load_n(&e->sink.nonfinite, __ATOMIC_SEQ_CST);
    if (!v) return NP_OK;
    long batch = (long)(v >> 20) - 1;
    int node = (int)(v & 0xFFFFF) - 1;
    const np_graph_t *g = e->m->graph;
    char what[96];
    if (node >= 0 && node < g->n)
        snprintf(what, sizeof what, "%s (weight or bias)", g->node[node].name);
    else
        snprintf(what, sizeof what, "the embedding rows it updated (rank %d)", e->cfg.rank);
    return np_model_diverged(e->m, batch + 1, what, err);
}

np_status np_engine_wait(np_sp_engine *e, double *loss, np_error *err) {
    long t = e->step;
    if (!e->pending) return np_err(err, NP_STATUS_INTERNAL, "wait without a submitted step");
    e->pending = 0;
    if (!e->pol.ahead) {
        starpu_task_wait_for_all(); /* sequential: batch t+1 starts after t ends */
    } else {
        /* pipelined: wait for this batch's loss only; the rest keeps running */
        for (int c = 0; c < e->W * e->C; c++) {
            starpu_data_acquire(e->ch[c].loss.h, STARPU_R);
            starpu_data_release(e->ch[c].loss.h);
        }
    }
    if (__atomic_load_n(&e->sink.fail, __ATOMIC_SEQ_CST))
        return np_err(err, NP_STATUS_INTERNAL,
                      "rank %d, step %ld: a key was out of its table's range, memory ran out "
                      "or an exchange failed",
                      e->cfg.rank, t + 1);
    np_status st = np_engine_check_finite(e, err);
    if (st) return st;
    double sum = 0;
    for (int c = 0; c < e->W * e->C; c++)
        sum += *(double *)e->ch[c].loss.mem; /* fixed order */
    *loss = sum / (double)e->cfg.batch;      /* this rank's share of the global mean */
    e->step++;
    return NP_OK;
}

np_status np_engine_step(np_sp_engine *e, const np_batch *const *b, int n, double *loss,
                         np_error *err) {
    np_status st = np_engine_submit(e, b, n, err);
    return st ? st : np_engine_wait(e, loss, err);
}

