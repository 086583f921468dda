/* Input stages: prefetch (batch -> slot) writes the slot; h2d reads and writes it so the
 * stage sits in the dependency chain between prefetch and route. */
#include "tasks/tasks.h"

np_status np_submit_prefetch(const np_task_ctx *c, const np_cl_prefetch_args *a,
                             const np_h slot[4], np_error *err) {
    enum starpu_data_access_mode m[4] = {STARPU_W, STARPU_W, STARPU_W, STARPU_W};
    return np_task_submit(c, &np_cl_prefetch, NP_NODE_PREFETCH, 4, slot, m, a, sizeof *a,
                          NP_REPORT_IN_ARGS, err);
}

np_status np_submit_h2d(const np_task_ctx *c, const np_h slot[4], np_error *err) {
    enum starpu_data_access_mode m[4] = {STARPU_RW, STARPU_RW, STARPU_RW, STARPU_RW};
    if (c->gpus > 0) {
        /* a real transfer: the task runs on a CUDA worker and reads what the device's nodes
         * read (dense rows, labels, bag offsets), so StarPU copies them there while the
         * previous batch computes; the keys stay on the host for route */
        np_task_ctx cc = *c;
        cc.arch = STARPU_CUDA;
        enum starpu_data_access_mode r[3] = {STARPU_R, STARPU_R, STARPU_R};
        return np_task_submit(&cc, &np_cl_h2d, NP_NODE_H2D, 3, slot, r, NULL, 0, 0, err);
    }
    return np_task_submit(c, &np_cl_h2d, NP_NODE_H2D, 4, slot, m, NULL, 0, 0, err);
}
