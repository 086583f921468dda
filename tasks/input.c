/* Input stages: prefetch (batch -> slot) writes the slot; h2d reads and writes it so the
 * stage sits in the dependency chain between prefetch and route (with CUDA workers: reads
 * what their tasks read, so StarPU copies it there while the previous batch computes). */
#include "tasks/tasks.h"

np_status np_submit_prefetch(const np_task_ctx *c, const np_cl_prefetch_args *a,
                             const np_task_bufs *b, np_error *err) {
    return np_task_submit(c, &np_cl_prefetch, NP_NODE_PREFETCH, b->n, b->h, b->m, a, sizeof *a,
                          NP_REPORT_IN_ARGS, err);
}

np_status np_submit_h2d(const np_task_ctx *c, const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = *c;
    if (c->gpus > 0) cc.arch = STARPU_CUDA; /* a real transfer, on a CUDA worker */
    return np_task_submit(&cc, &np_cl_h2d, NP_NODE_H2D, b->n, b->h, b->m, NULL, 0, 0, err);
}
