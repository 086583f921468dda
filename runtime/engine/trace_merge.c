/* Traces of a StarPU run: every rank's task records, times from the common origin, merged
 * on rank 0 over the control channel and written there as one Chrome trace.
 * Not here: recording (tasks/submit.c) or the formats (runtime/trace/). */
#include <limits.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/engine/engine_impl.h"

/* ---------------------------------------------------------------- traces */

/* An event on the wire between ranks: the name travels as text (pointers do not). */
typedef struct wire_event {
    char name[32];
    int32_t kind, window, rank, worker, node, chunk;
    int64_t batch;
    double start_us, end_us;
    uint64_t bytes;
    int64_t id, n_deps, dep[NP_TRACE_MAX_DEPS];
    int64_t segments, pooled;
    double pred_us, submit_us, ready_us;
    int64_t issued;
    double flops, pack_us, comm_us, unpack_us, post_us, pace_us;
    uint64_t keys, uniq;
    int64_t colls, npeer; /* in the second gather: its 2 npeer peer counts, then its
                             producers past NP_TRACE_MAX_DEPS (n_deps - NP_TRACE_MAX_DEPS) */
} wire_event;

/* What an event puts in the second gather. */
static int64_t extra_of(int64_t npeer, int64_t n_deps) {
    return 2 * npeer + (n_deps > NP_TRACE_MAX_DEPS ? n_deps - NP_TRACE_MAX_DEPS : 0);
}

/* Maps a task name received from another rank to this process's codelet name string, which
 * outlives the trace (every rank runs the same codelets). */
static const char *codelet_name(const char *name) {
    static struct starpu_codelet *all[] = {
        &np_cl_pool_fwd,     &np_cl_pool_bwd,
        &np_cl_bce_fwd,      &np_cl_bce_bwd,     &np_cl_sum,           &np_cl_route,
        &np_cl_a2a_keys,     &np_cl_route_owner, &np_cl_exchange_rows, &np_cl_exchange_grads,
        &np_cl_allreduce,    &np_cl_gather,      &np_cl_scatter,       &np_cl_sparse_update,
        &np_cl_dense_update, &np_cl_prefetch,    &np_cl_h2d,           &np_cl_sync,
        &np_cl_rows_fresh,   &np_cl_rows_shared};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!strcmp(all[i]->name, name)) return all[i]->name;
    if (!strcmp(name, "data")) return "data"; /* the driver's own work */
    if (!strcmp(name, "agree_sizes")) return "agree_sizes";
    return np_layer_codelet_name(name);
}

/* An event of this rank as it travels: times from the common origin t0. Not its peers
 * or extra producers (the second gather). */
static void to_wire(const np_trace_event *ev, int me, double t0, wire_event *w) {
    w->flops = ev->flops;
    w->keys = ev->keys;
    w->uniq = ev->uniq;
    w->colls = ev->colls;
    w->pack_us = ev->pack_us;
    w->comm_us = ev->comm_us;
    w->unpack_us = ev->unpack_us;
    w->post_us = ev->post_us;
    w->pace_us = ev->pace_us;
    w->npeer = ev->npeer;
    snprintf(w->name, sizeof w->name, "%s", ev->name ? ev->name : "?");
    w->kind = (int32_t)ev->kind;
    w->window = ev->window;
    w->node = ev->node;
    w->chunk = ev->chunk;
    w->rank = me;
    w->worker = ev->worker;
    w->batch = ev->batch;
    w->start_us = ev->start_us - t0;
    w->end_us = ev->end_us - t0;
    w->bytes = ev->bytes;
    w->id = ev->id;
    w->segments = ev->segments;
    w->pooled = ev->pooled;
    w->pred_us = ev->pred_us;
    w->submit_us = ev->issued ? ev->submit_us - t0 : 0;
    w->ready_us = ev->ready_us > 0 ? ev->ready_us - t0 : 0;
    w->issued = ev->issued;
    w->n_deps = ev->n_deps;
    memcpy(w->dep, ev->dep, sizeof w->dep);
}

/* A travelled event back, its name the codelet's own string; peers and extra producers
 * left to the caller. */
static void from_wire(const wire_event *w, np_trace_event *ev) {
    *ev = (np_trace_event){.name = codelet_name(w->name),
                           .kind = (np_node_kind)w->kind,
                           .batch = (long)w->batch,
                           .window = w->window,
                           .node = w->node,
                           .chunk = w->chunk,
                           .rank = w->rank,
                           .worker = w->worker,
                           .start_us = w->start_us,
                           .end_us = w->end_us,
                           .bytes = w->bytes,
                           .id = w->id,
                           .submit_us = w->submit_us,
                           .ready_us = w->ready_us,
                           .issued = (long)w->issued,
                           .segments = (uint32_t)w->segments,
                           .pooled = (uint32_t)w->pooled,
                           .pred_us = isfinite(w->pred_us) && w->pred_us > 0
                                          ? w->pred_us
                                          : 0,
                           .flops = w->flops,
                           .keys = w->keys,
                           .uniq = w->uniq,
                           .colls = (uint32_t)w->colls,
                           .pack_us = w->pack_us,
                           .comm_us = w->comm_us,
                           .unpack_us = w->unpack_us,
                           .post_us = w->post_us,
                           .pace_us = w->pace_us};
}

/* Every rank's events, times relative to the common origin, merged on rank 0 (the others
 * get NULL). Collective over the control channel. */
np_status np_engine_merge_traces(np_sp_engine *e, np_trace **out, np_error *err) {
    *out = NULL;
    int R = e->R, me = e->cfg.rank;
    int64_t n = (int64_t)np_trace_count(e->trace);
    int64_t *counts = calloc((size_t)R, sizeof *counts);
    wire_event *mine = calloc((size_t)n + 1, sizeof *mine), *all = NULL;
    /* the events' peer counts and extra producers, event after event */
    int64_t np_mine = 0, np_total = 0, *pcounts = calloc((size_t)R, sizeof *pcounts);
    for (int64_t i = 0; i < n; i++) {
        const np_trace_event *ev = np_trace_get(e->trace, (size_t)i);
        np_mine += extra_of(ev->npeer, ev->n_deps);
    }
    uint64_t *pmine = malloc(((size_t)np_mine + 1) * sizeof *pmine), *pall = NULL;
    np_status st = counts && mine && pcounts && pmine
                       ? NP_OK
                       : np_err(err, NP_STATUS_NO_MEMORY, "trace: no memory");
    if (!st && np_trace_dropped(e->trace))
        st = np_err(err, NP_STATUS_NO_MEMORY, "trace: %zu events lost for lack of memory",
                    np_trace_dropped(e->trace));
    for (int64_t i = 0, at = 0; !st && i < n; i++) {
        const np_trace_event *ev = np_trace_get(e->trace, (size_t)i);
        to_wire(ev, me, e->t0_us, &mine[i]);
        if (ev->npeer) memcpy(pmine + at, ev->peer, 2 * (size_t)ev->npeer * sizeof *pmine);
        at += 2 * (int64_t)ev->npeer;
        for (int k = NP_TRACE_MAX_DEPS; k < ev->n_deps; k++)
            pmine[at++] = (uint64_t)np_trace_dep(ev, k);
    }
    int64_t total = 0, bad = st != NP_OK;
    if (np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &bad, 1) ||
        (!bad && (np_comm_allgather(e->comm, NP_CHAN_CTL, &n, counts, 1, sizeof n) ||
                  np_comm_allgather(e->comm, NP_CHAN_CTL, &np_mine, pcounts, 1, sizeof n))))
        bad = 1;
    for (int r = 0; !bad && r < R; r++) {
        total += counts[r];
        np_total += pcounts[r];
    }
    /* MPI's gather counts and offsets are ints: every rank sees the same sums and refuses
     * together */
    if (!bad && (total > INT_MAX || np_total > INT_MAX)) bad = 1;
    /* rank 0 may run out of memory here: agreed before any gather */
    int64_t short_0 = 0;
    if (!bad && me == 0 && (!(all = calloc((size_t)total + 1, sizeof *all)) ||
                            !(pall = malloc(((size_t)np_total + 1) * sizeof *pall))))
        short_0 = 1;
    if (!bad && np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &short_0, 1)) bad = 1;
    if (!bad && short_0) bad = 1;
    if (!bad) { /* both on every rank, whatever the first gave, then agreed */
        int64_t g = np_comm_gatherv(e->comm, NP_CHAN_CTL, mine, n, all, counts, sizeof *all) != 0;
        g |= np_comm_gatherv(e->comm, NP_CHAN_CTL, pmine, np_mine, pall, pcounts, sizeof *pall) != 0;
        if (np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &g, 1) || g) bad = 1;
    }
    np_trace *merged = NULL;
    if (!bad && me == 0 && !(st = np_trace_create(&merged, err))) {
        np_trace_copy_names(merged, e->trace); /* the layers' names; workers follow */
        for (unsigned w = 0; w < starpu_worker_get_count(); w++) {
            char name[64];
            starpu_worker_get_name((int)w, name, sizeof name);
            np_trace_set_worker_name(merged, (int)w, name);
        }
        np_trace_set_worker_name(merged, (int)starpu_worker_get_count(), "driver");
        int lost = 0;
        for (int64_t i = 0, at = 0; i < total; i++) {
            all[i].name[sizeof all[i].name - 1] = 0;
            /* malformed counts from another rank read as none (and what follows in the
             * second gather as none too: where it starts is lost) */
            int64_t npeer = all[i].npeer, nd = all[i].n_deps;
            int fits = !lost && npeer >= 0 && npeer <= NP_TRACE_MAX_PEERS && nd >= 0 &&
                       nd <= INT32_MAX && at + extra_of(npeer, nd) <= np_total;
            lost |= !fits;
            np_trace_event ev;
            from_wire(&all[i], &ev);
            ev.npeer = fits ? (uint32_t)npeer : 0;
            ev.peer = fits && npeer ? pall + at : NULL;
            ev.n_deps = fits ? (int)nd : nd >= 0 && nd <= NP_TRACE_MAX_DEPS ? (int)nd : 0;
            ev.dep_more = fits && nd > NP_TRACE_MAX_DEPS ? (int64_t *)(pall + at + 2 * npeer) : NULL;
            if (fits) at += extra_of(npeer, nd);
            memcpy(ev.dep, all[i].dep, sizeof ev.dep);
            if (np_trace_record(merged, &ev)) {
                st = np_err(err, NP_STATUS_NO_MEMORY, "trace: no memory merging ranks");
                break;
            }
        }
    }
    free(counts);
    free(mine);
    free(all);
    free(pcounts);
    free(pmine);
    free(pall);
    if (bad && !st) st = np_err(err, NP_STATUS_INTERNAL, "rank %d: merging the trace failed", me);
    if (st) {
        np_trace_free(merged);
        return st;
    }
    *out = merged;
    return NP_OK;
}

np_status np_engine_finish(np_sp_engine *e, np_error *err) {
    starpu_task_wait_for_all();
    /* a failure reported after the last step's loss was read (callbacks run last) */
    if (__atomic_load_n(&e->sink.fail, __ATOMIC_SEQ_CST))
        return np_err(err, NP_STATUS_INTERNAL,
                      "rank %d: a key was out of its table's range, memory ran out or an "
                      "exchange failed",
                      e->cfg.rank);
    np_status fst = np_engine_check_finite(e, err); /* the last steps' updates */
    if (fst) return fst;
    /* the model back in main memory: an update that ran on a GPU left the valid copy there,
     * and the caller reads m->dense and the tables next (gather, evaluate, dump) */
    np_engine_hold(e);
    np_engine_release(e);
    if (!e->trace) return NP_OK;
    np_trace *merged = NULL; /* lost events stop every rank there (its first agreement) */
    np_status st = np_engine_merge_traces(e, &merged, err);
    if (!st && merged) st = np_trace_write_chrome(merged, e->cfg.trace, err);
    /* keep the merged trace for the metrics of a traced run (rank 0) */
    np_trace_free(e->merged);
    e->merged = merged;
    return st;
}

