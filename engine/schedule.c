/* The per-batch schedule of the StarPU engine: stages 1-4 (prefetch, h2d, route,
 * retrieve), the dual-buffer sync, each window's row and gradient exchanges around its
 * chunks' forward/backward, the updates and the write-back, submitted in the order whose
 * access modes encode the dependencies (docs/pipeline.md); the driver's submit and wait.
 * Not here: a chunk's layer tasks (chunk.c) or buffers (engine.c). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/data.h"
#include "engine/engine_impl.h"

static np_slot *slot_of(np_sp_engine *e, long b) {
    return &e->slot[b % NP_SLOTS];
}

static np_rset *rset_of(np_sp_engine *e, long b) {
    return &e->rset[b % NP_RSETS];
}

static np_buf *E_of(np_sp_engine *e, long b) {
    return &e->E[b % e->pol.buffers];
}

static np_buf *Es_of(np_sp_engine *e, long b) {
    return &e->Es[b % e->pol.buffers];
}

/* Stages 1-4 of batch b, each a separate call so the driver can run them ahead. */
static np_status submit_prefetch(np_sp_engine *e, long b, const np_batch *src, np_error *err) {
    np_batch_args a;
    np_engine_batch_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_h h[4] = {sl->dense.h, sl->label.h, sl->offsets.h, sl->keys.h};
    np_cl_prefetch_args pa = {.src = src, .W = e->W, .cluster = e->cluster};
    return np_submit_prefetch(&a.ctx, &pa, h, err);
}

static np_status submit_h2d(np_sp_engine *e, long b, np_error *err) {
    np_batch_args a;
    np_engine_batch_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_h h[4] = {sl->dense.h, sl->label.h, sl->offsets.h, sl->keys.h};
    return np_submit_h2d(&a.ctx, h, err);
}

static np_status submit_route(np_sp_engine *e, long b, np_error *err) {
    np_batch_args a;
    np_engine_batch_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_rset *r = rset_of(e, b);
    np_status st;
    if ((st = np_submit_route(&a.ctx, &a.xa, sl->offsets.h, sl->keys.h, r->uniq.h, r->pos.h,
                              r->sendkeys.h, r->meta.h, err)) ||
        (st = np_submit_a2a_keys(&a.ctx, &a.xa, r->meta.h, r->sendkeys.h, r->recvkeys.h, e->token.h,
                                 err)))
        return st;
    return np_submit_route_owner(&a.ctx, &a.xa, r->recvkeys.h, r->meta.h, r->uniq_o.h, r->map.h,
                                 err);
}

/* Retrieve of batch b reads the table: submitted after writeback(b-2) and before
 * writeback(b-1), so rows of U_b not in U_{b-1} are fresh and the others are refreshed by
 * sync(b). */
static np_status submit_retrieve(np_sp_engine *e, long b, np_error *err) {
    np_batch_args a;
    np_engine_batch_args(e, b, &a);
    np_rset *r = rset_of(e, b);
    return np_submit_retrieve(&a.ctx, &a.wa, e->tables, r->uniq_o.h, r->meta.h, E_of(e, b)->h,
                              e->state, Es_of(e, b)->h, err);
}

/* Dual-buffer sync: rows of U_{b-1} and U_b, updated by batch b-1, copied into b's buffer. */
static np_status submit_sync(np_sp_engine *e, long b, np_error *err) {
    np_batch_args a;
    np_engine_batch_args(e, b, &a);
    np_rset *prev = rset_of(e, b - 1), *cur = rset_of(e, b);
    return np_submit_sync(&a.ctx, &a.ya, E_of(e, b - 1)->h, prev->uniq_o.h, prev->meta.h,
                          E_of(e, b)->h, cur->uniq_o.h, cur->meta.h, Es_of(e, b - 1)->h,
                          Es_of(e, b)->h, err);
}

/* The arguments of window w's tasks of batch b. */
static void window_args(np_sp_engine *e, long b, int w, np_batch_args *a) {
    np_engine_batch_args(e, b, a);
    a->ctx.window = w;
    a->xa.w = w;
}

/* Window w of batch b gets its rows. Window 0's (and with fwp window 1's) are submitted
 * before the later batches' route, so their key All2All (same comm token) does not delay
 * them. */
static np_status submit_exchange_rows(np_sp_engine *e, long b, int w, np_error *err) {
    np_batch_args a;
    window_args(e, b, w, &a);
    np_rset *r = rset_of(e, b);
    return np_submit_exchange_rows(&a.ctx, &a.xa, E_of(e, b)->h, r->map.h, r->recvkeys.h,
                                   r->meta.h, e->Rin[w].h, e->sbuf.h, e->token.h, err);
}

/* The split form (docs/pipeline.md "The batch boundary"): window w of batch b gets the
 * rows batch b-1 does not hold while b-1 still trains (they are final once retrieved), and
 * the rest after sync(b) refreshed them. */
static np_status submit_rows_fresh(np_sp_engine *e, long b, int w, np_error *err) {
    np_batch_args a;
    window_args(e, b, w, &a);
    np_rset *prev = rset_of(e, b - 1), *r = rset_of(e, b);
    return np_submit_rows_fresh(&a.ctx, &a.xa, E_of(e, b)->h, r->map.h, r->recvkeys.h, r->meta.h,
                                e->Rin[w].h, e->sbuf.h, e->token.h, e->obits[w].h,
                                e->rbits[w].h, prev->uniq_o.h, prev->meta.h, r->uniq_o.h, err);
}

static np_status submit_rows_shared(np_sp_engine *e, long b, int w, np_error *err) {
    np_batch_args a;
    window_args(e, b, w, &a);
    np_rset *r = rset_of(e, b);
    return np_submit_rows_shared(&a.ctx, &a.xa, E_of(e, b)->h, r->map.h, r->recvkeys.h, r->meta.h,
                                 e->Rin[w].h, e->sbuf.h, e->token.h, e->obits[w].h,
                                 e->rbits[w].h, e->rbuf.h, err);
}

/* Window w of batch b returns its row gradients; the owner adds them to gE. */
np_status np_exchange_grads_submit(np_sp_engine *e, long b, int w, np_error *err) {
    np_batch_args a;
    window_args(e, b, w, &a);
    np_rset *r = rset_of(e, b);
    return np_submit_exchange_grads(&a.ctx, &a.xa, e->grows[w].h, r->map.h, r->recvkeys.h,
                                    r->meta.h, e->gE.h, e->rbuf.h, e->token.h, err);
}

/* The early windows' rows of batch b, when the step opens: whole, or (split) the part the
 * previous step did not send yet. */
static np_status submit_first_rows(np_sp_engine *e, long b, np_error *err) {
    np_status st = NP_OK;
    for (int w = 0; w < e->pol.early_windows && !st; w++)
        st = e->fresh_for == b ? submit_rows_shared(e, b, w, err)
                               : submit_exchange_rows(e, b, w, err);
    return st;
}

/* The rest of stage 5: window after window, forward/backward chunk by chunk and the
 * window's gradients back; then the dense all-reduce, the updates and the write-back.
 * The comm token orders the exchanges. fwp: rows(0), rows(1), grads(0), rows(2),
 * grads(1), ...: window w+1's rows travel while w computes, and w's gradients while w+1
 * computes. Otherwise rows(w) follows grads(w-1), so windows run one after another.
 * Either way the parameters stay frozen until the updates at the end of the batch, and
 * every sum runs in the same order: the modes differ in time only. */
static np_status submit_train(np_sp_engine *e, long b, np_error *err) {
    np_batch_args a;
    np_engine_batch_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_rset *r = rset_of(e, b);
    np_buf *E = E_of(e, b), *Es = Es_of(e, b);
    np_status st;
    int ahead = e->pol.overlap_windows;
    unsigned K = (unsigned)(e->W * e->C);
    /* the chunks read their rows through sub-handles; the slot stays readable */
    starpu_data_partition_readonly_submit(sl->dense.h, K, sl->dense_part);
    starpu_data_partition_readonly_submit(sl->label.h, K, sl->label_part);
    st = NP_OK;
    for (int w = 0; w < e->W && !st; w++) {
        int next = w + ahead; /* the window whose rows go now, if not sent yet */
        if (next >= e->pol.early_windows && next < e->W)
            st = submit_exchange_rows(e, b, next, err);
        for (int c = 0; c < e->C && !st; c++) { /* a window's chunks run in parallel */
            a.ctx.window = w;
            a.ctx.boost = e->W - w;
            st = np_chunk_submit(e, &a.ctx, &e->ch[w * e->C + c], sl, r, err);
        }
        /* split: once every reader of the early windows' Rin is submitted, batch b+1's fresh
         * rows take the wire under b's last window, before its gradients and the dense
         * all-reduce; b+1 was retrieved this step (the sync's condition) */
        if (!st && w == e->W - 1 && e->pol.split_rows && e->next[3] > b + 1) {
            for (int v = 0; v < e->pol.early_windows && !st; v++)
                st = submit_rows_fresh(e, b + 1, v, err);
            if (!st) e->fresh_for = b + 1;
        }

        /* the last window's row gradients go inside the dense reduction */
        if (!st)
            st = w < e->W - 1 ? np_exchange_grads_submit(e, b, w, err)
                              : np_dense_reduce_submit(e, b, w, err);
    }
    /* the slot is written again by a later prefetch: undo the partition first (also when a
     * submission failed, so the slot is whole again whatever the caller does next) */
    starpu_data_unpartition_submit(sl->dense.h, K, sl->dense_part, STARPU_MAIN_RAM);
    starpu_data_unpartition_submit(sl->label.h, K, sl->label_part, STARPU_MAIN_RAM);
    if (st) return st;
    a.ctx.window = -1;
    if ((st = np_submit_sparse_update(&a.ctx, &a.sa, E->h, e->gE.h, r->meta.h, Es->h, err)) ||
        (st = np_submit_writeback(&a.ctx, &a.wa, E->h, r->uniq_o.h, r->meta.h, e->tables, Es->h,
                                  e->state, err)))
        return st;
    return NP_OK;
}

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
    if (e->cp && !np_cp_applied(e->cp)) np_cp_abandon(e->cp); /* handles change: see there */
    return np_engine_grow_nnz(e, &cap, err);
}

static np_status submit_stage(np_sp_engine *e, int s, long b, const np_batch *src, np_error *err) {
    np_status st;
    switch (s) {
    case 0:
        return (st = make_room(e, b, src, err)) ? st : submit_prefetch(e, b, src, err);
    case 1:
        return submit_h2d(e, b, err);
    case 2:
        return submit_route(e, b, err);
    default:
        return submit_retrieve(e, b, err);
    }
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
    /* critical-path priorities: the fourth step is recorded (the first ones hold the
     * pipeline's fill and the perf models' first samples) */
    if (m->cfg.priorities == NP_PRIORITIES_CRITICAL && !e->cp)
        st = np_cp_create(t + 3, &e->cp, err);
    if (e->cp) {
        int was = np_cp_applied(e->cp);
        np_cp_step(e->cp, t);
        if (!was && np_cp_applied(e->cp) && e->trace) { /* the trace says from when */
            char from[48];
            snprintf(from, sizeof from, "critical-path from step %ld", t + 1);
            np_trace_set_info(e->trace, "priorities", from);
        }
    }
    /* 1. the training batch's own early stages, if no look-ahead ran them (sequential,
     *    the first steps) */
    for (int s = 0; s < 4 && !st; s++)
        for (; e->next[s] <= t && !st; e->next[s]++)
            st = submit_stage(e, s, t, b[0], err);
    /* 2. its rows to their requesters; then the stages of the batches ahead, in docs/pipeline.md's
     *    order prefetch(t+4), h2d(t+3), route(t+2), retrieve(t+1), each never past the newest
     *    batch the driver has read. Retrieve(t+1) stays before write-back(t): the rule. */
    if (!st) st = submit_first_rows(e, t, err);
    static const int lag[4] = {4, 3, 2, 1};
    long last = t + (n - 1 < e->pol.ahead ? n - 1 : e->pol.ahead);
    for (int s = 0; s < 4 && !st; s++) {
        long upto = t + lag[s] < last ? t + lag[s] : last;
        for (; e->next[s] <= upto && !st; e->next[s]++)
            st = submit_stage(e, s, e->next[s], b[e->next[s] - t], err);
    }
    /* 3. the rest of training batch t, then (dbp) the sync of the rows t+1 shares with t:
     *    t+1 was retrieved before write-back(t) */
    if (!st) st = submit_train(e, t, err);
    if (!st && e->pol.sync && e->next[3] > t + 1) st = submit_sync(e, t + 1, err);
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

