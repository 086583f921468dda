/* The one place that builds a StarPU task: buffers and modes (dynamic arrays past
 * STARPU_NMAXBUFS), copied arguments, name, flops, what its node kind's row of the table
 * (runtime/core/kinds.c) says (priority, placement, the communication worker, the byte counter),
 * and the callback that takes what the task reports (np_cl_report) into the engine's
 * counters and the trace. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "tasks/tasks.h"

typedef struct task_info {
    np_cl_cost cost;    /* FIRST field: what the footprint (codelets/footprint.c) reads */
    np_trace *trace;    /* NULL: not traced */
    np_task_sink *sink; /* NULL: the task reports nothing */
    np_trace_event ev; /* everything but the worker and times, known at submission */
} task_info;




/* A collective task's time split (np_trace_event's colls to peer) from what its collectives
 * reported: before the first, inside them, after the last; clamped into the task's span. */
static void split_time(const np_cl_report *rep, np_trace_event *ev) {
    double t0 = ev->start_us, t1 = ev->end_us;
    double first = rep->comm_first < t0 ? t0 : rep->comm_first > t1 ? t1 : rep->comm_first;
    double last = rep->comm_last < first ? first : rep->comm_last > t1 ? t1 : rep->comm_last;
    ev->colls = rep->colls;
    ev->pack_us = first - t0;
    ev->unpack_us = t1 - last;
    ev->comm_us = rep->comm_us < last - first ? rep->comm_us : last - first;
    ev->post_us = rep->post_us < ev->comm_us ? rep->post_us : ev->comm_us;
    ev->pace_us = rep->pace_us < ev->comm_us - ev->post_us ? rep->pace_us : ev->comm_us - ev->post_us;
    if (rep->npeer && rep->peer_off) {
        ev->npeer = rep->npeer;
        ev->peer = (uint64_t *)((const char *)rep + rep->peer_off); /* copied by the record */
    }
}

/* Runs on the worker right after the task: adds what the task reported (the first field
 * of its arguments) to the engine's counters, and records it with StarPU's profiling
 * times in the trace. Callbacks of several workers run at once: atomics. */
static void task_done(void *arg) {
    task_info *ti = arg;
    struct starpu_task *task = starpu_task_get_current();
    const np_cl_report *rep = ti->sink && task && task->cl_arg ? task->cl_arg : NULL;
    if (rep) {
        int slot = np_node_kinds[ti->ev.kind].bytes_slot; /* checked at submission */
        if (rep->fail) __atomic_store_n(&ti->sink->fail, 1, __ATOMIC_SEQ_CST);
        if (rep->nonfinite) {
            uint64_t none = 0, v = (uint64_t)(ti->ev.batch + 1) << 20 | (uint64_t)(ti->ev.node + 1);
            __atomic_compare_exchange_n(&ti->sink->nonfinite, &none, v, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
        }
        if (slot >= 0) __atomic_fetch_add(&ti->sink->bytes[slot], rep->bytes, __ATOMIC_RELAXED);
        if (rep->count) __atomic_fetch_add(&ti->sink->synced, rep->count, __ATOMIC_RELAXED);
        if (rep->segments) {
            __atomic_fetch_add(&ti->sink->segments, rep->segments, __ATOMIC_RELAXED);
            __atomic_fetch_add(&ti->sink->pooled, rep->pooled, __ATOMIC_RELAXED);
        }
        ti->ev.bytes = rep->bytes;
        ti->ev.segments = rep->segments;
        ti->ev.pooled = rep->pooled;
        ti->ev.keys = rep->keys;
        ti->ev.uniq = rep->uniq;
    }
    if (ti->trace && task && task->profiling_info) {
        struct starpu_profiling_task_info *pi = task->profiling_info;
        ti->ev.worker = pi->workerid;
        ti->ev.start_us = starpu_timing_timespec_to_us(&pi->start_time);
        ti->ev.end_us = starpu_timing_timespec_to_us(&pi->end_time);
        /* what a dm* policy predicted from the perf model (NaN or 0 otherwise) */
        ti->ev.pred_us = isfinite(task->predicted) && task->predicted > 0 ? task->predicted : 0;
        ti->ev.submit_us = starpu_timing_timespec_to_us(&pi->submit_time);
        ti->ev.ready_us = starpu_timing_timespec_to_us(&pi->push_start_time);
        if (rep && rep->colls) /* its collectives, on the profiling times' clock */
            split_time(rep, &ti->ev);
        np_trace_record(ti->trace, &ti->ev);
    }
    np_trace_event_release(&ti->ev);
    free(ti);
}

np_status np_task_submit(const np_task_ctx *ctx, struct starpu_codelet *cl, np_node_kind kind,
                         int nbuf, const np_h *h, const enum starpu_data_access_mode *modes,
                         const void *args, size_t size, uint64_t bytes, np_error *err) {
    const np_node_kind_def *kd = np_node_kind_get(kind);
    if (!kd || (kd->flags & NP_KIND_DRIVER))
        return np_err(err, NP_STATUS_INTERNAL, "task %s: node kind %d is not a task's", cl->name,
                      (int)kind);
    const np_task_bufs *x = ctx->expect;
    if (x && (x->n != nbuf || x->kind != (int)kind))
        return np_err(err, NP_STATUS_INTERNAL,
                      "task %s (batch %ld): %d buffers of kind %s, but the step graph's %s has %d "
                      "of kind %s",
                      cl->name, ctx->batch, nbuf, kd->name, x->op, x->n, np_node_kind_name(x->kind));
    for (int i = 0; x && i < nbuf; i++)
        if (x->h[i] != h[i] || x->m[i] != modes[i])
            return np_err(err, NP_STATUS_INTERNAL,
                          "task %s (batch %ld): buffer %d is not the step graph's (%s: mode %d, "
                          "not %d%s)",
                          cl->name, ctx->batch, i, x->op, (int)modes[i], (int)x->m[i],
                          x->h[i] != h[i] ? ", another handle" : "");
    struct starpu_task *task = starpu_task_create();
    if (!task) return np_err(err, NP_STATUS_NO_MEMORY, "cannot create a StarPU task");
    task->cl = cl;
    task->name = cl->name;
    task->priority = ctx->has_prio ? ctx->prio : kd->prio + ctx->boost;
    task->flops = ctx->flops;
    if (ctx->where && kd->place >= 0 && ctx->where[kd->place])
        task->where = (int32_t)ctx->where[kd->place];
    if (ctx->arch) task->where = (int32_t)ctx->arch;
    if ((kd->flags & NP_KIND_EXCHANGE) && !ctx->arch && ctx->comm_worker >= 0) {
        /* collectives run one at a time on the communication worker; one sent to a device
         * (NCCL's codelets, CUDA only) runs on that device's worker */
        task->execute_on_a_specific_worker = 1;
        task->workerid = (unsigned)ctx->comm_worker;
    } else if (ctx->compute_ctx) {
        task->sched_ctx = ctx->compute_ctx; /* the other workers */
    }
    task->nbuffers = nbuf;
    if (nbuf > STARPU_NMAXBUFS) {
        /* StarPU frees these two arrays with the task */
        task->dyn_handles = malloc((size_t)nbuf * sizeof *task->dyn_handles);
        task->dyn_modes = malloc((size_t)nbuf * sizeof *task->dyn_modes);
        if (!task->dyn_handles || !task->dyn_modes) {
            starpu_task_destroy(task);
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory building task %s", cl->name);
        }
        memcpy(task->dyn_handles, h, (size_t)nbuf * sizeof *h);
        memcpy(task->dyn_modes, modes, (size_t)nbuf * sizeof *modes);
    } else {
        for (int i = 0; i < nbuf; i++) {
            task->handles[i] = h[i];
            task->modes[i] = modes[i];
        }
    }
    if (size) {
        task->cl_arg = malloc(size);
        if (!task->cl_arg) {
            starpu_task_destroy(task);
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory building task %s", cl->name);
        }
        memcpy(task->cl_arg, args, size);
        task->cl_arg_size = size;
        task->cl_arg_free = 1;
    }
    int reports = bytes == NP_REPORT_IN_ARGS && ctx->sink && size >= sizeof(np_cl_report);
    { /* every task: its perf model's footprint reads the cost fields */
        task_info *ti = malloc(sizeof *ti);
        if (!ti) {
            starpu_task_destroy(task);
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory building task %s", cl->name);
        }
        ti->trace = ctx->trace;
        ti->sink = reports ? ctx->sink : NULL;
        ti->cost = (np_cl_cost){.tag = NP_CL_COST_TAG,
                                .key = ctx->cost_key,
                                .meta = ctx->cost_meta,
                                .at = ctx->cost_at};
        ti->ev = (np_trace_event){.name = cl->name,
                                  .kind = kind,
                                  .batch = ctx->batch,
                                  .window = ctx->window,
                                  .rank = ctx->rank,
                                  .bytes = bytes == NP_REPORT_IN_ARGS ? 0 : bytes,
                                  .node = ctx->node,
                                  .chunk = ctx->chunk,
                                  .flops = ctx->flops > 0 && isfinite(ctx->flops) ? ctx->flops : 0};
        if (ctx->trace) { /* its number and data-flow edges, for the trace's flow events */
            ti->ev.id = ctx->trace_id > 0 ? ctx->trace_id : np_trace_new_id(ctx->trace);
            for (int i = 0; i < ctx->n_deps; i++)
                (void)np_trace_add_dep(&ti->ev, ctx->deps[i]); /* out of memory: lost */
            ti->ev.issued = np_trace_get_step(ctx->trace) + 1;
        }
        task->callback_func = task_done;
        task->callback_arg = ti;
    }
    int rc = starpu_task_submit(task);
    if (rc) {
        task_info *ti = task->callback_arg;
        if (ti) np_trace_event_release(&ti->ev);
        free(task->callback_arg);
        task->callback_arg = NULL;
        starpu_task_destroy(task);
        return np_err(err, NP_STATUS_INTERNAL, "StarPU refused task %s (batch %ld): error %d",
                      cl->name, ctx->batch, rc);
    }
    return NP_OK;
}

np_status np_task_submit_xchg(const np_task_ctx *ctx, struct starpu_codelet *cl,
                              np_node_kind kind, int nbuf, const np_h *h,
                              const enum starpu_data_access_mode *modes, const np_cl_xchg_args *a,
                              np_error *err) {
    size_t R = a->R > 0 ? (size_t)a->R : 0, size = sizeof *a + 2 * R * sizeof(uint64_t);
    np_cl_xchg_args *copy = calloc(1, size);
    if (!copy) return np_err(err, NP_STATUS_NO_MEMORY, "out of memory building task %s", cl->name);
    *copy = *a;
    copy->peer_room = (uint32_t)R;
    np_status st = np_task_submit(ctx, cl, kind, nbuf, h, modes, copy, size, NP_REPORT_IN_ARGS, err);
    free(copy);
    return st;
}
