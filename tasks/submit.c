/* The one place that builds a StarPU task: buffers and modes (dynamic arrays past
 * STARPU_NMAXBUFS), copied arguments, priority, name, and the trace callback. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tasks/tasks.h"

typedef struct trace_info {
    np_trace *trace;
    np_trace_event ev; /* everything but the worker and times, known at submission */
    int bytes_in_args; /* the task's args start with the bytes it sent (np_cl_xchg_args) */
} trace_info;

/* Runs on the worker right after the task: StarPU's profiling info has its times. */
static void trace_callback(void *arg) {
    trace_info *ti = arg;
    struct starpu_task *task = starpu_task_get_current();
    if (task && task->profiling_info) {
        struct starpu_profiling_task_info *pi = task->profiling_info;
        ti->ev.worker = pi->workerid;
        if (ti->bytes_in_args && task->cl_arg) /* exchanges report what they sent */
            memcpy(&ti->ev.bytes, task->cl_arg, sizeof ti->ev.bytes);
        ti->ev.start_us = starpu_timing_timespec_to_us(&pi->start_time);
        ti->ev.end_us = starpu_timing_timespec_to_us(&pi->end_time);
        np_trace_record(ti->trace, &ti->ev);
    }
    free(ti);
}

np_status np_task_submit(const np_task_ctx *ctx, struct starpu_codelet *cl, np_node_kind kind,
                         int prio, int nbuf, const np_h *h,
                         const enum starpu_data_access_mode *modes, const void *args, size_t size,
                         uint64_t bytes, np_error *err) {
    struct starpu_task *task = starpu_task_create();
    if (!task) return np_err(err, NP_STATUS_NO_MEMORY, "cannot create a StarPU task");
    task->cl = cl;
    task->name = cl->name;
    task->priority = prio + ctx->boost;
    task->flops = ctx->flops;
    if (ctx->pin && ctx->comm_worker >= 0) {
        /* collectives run one at a time on the communication worker */
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
    if (ctx->trace) {
        trace_info *ti = malloc(sizeof *ti);
        if (!ti) {
            starpu_task_destroy(task);
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory building task %s", cl->name);
        }
        ti->trace = ctx->trace;
        ti->ev = (np_trace_event){.name = cl->name,
                                  .kind = kind,
                                  .batch = ctx->batch,
                                  .window = ctx->window,
                                  .node = ctx->node,
                                  .chunk = ctx->chunk,
                                  .rank = ctx->rank,
                                  .bytes = bytes};
        ti->bytes_in_args = bytes == NP_BYTES_FROM_ARGS;
        if (ti->bytes_in_args) ti->ev.bytes = 0;
        task->callback_func = trace_callback;
        task->callback_arg = ti;
    }
    int rc = starpu_task_submit(task);
    if (rc) {
        if (ctx->trace) free(task->callback_arg);
        task->callback_arg = NULL;
        starpu_task_destroy(task);
        return np_err(err, NP_STATUS_INTERNAL, "StarPU refused task %s (batch %ld): error %d",
                      cl->name, ctx->batch, rc);
    }
    return NP_OK;
}
