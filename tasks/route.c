/* Route: dedup each table's keys of the batch (on one rank every owner is local; the
 * All2All of counts and keys joins here with MPI). */
#include "tasks/tasks.h"

np_status np_submit_route(const np_task_ctx *c, const np_cl_route_args *a, np_h offsets, np_h keys,
                          np_h uniq, np_h pos, np_h ucnt, np_error *err) {
    np_h h[5] = {offsets, keys, uniq, pos, ucnt};
    enum starpu_data_access_mode m[5] = {STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W};
    return np_task_submit(c, &np_cl_route, NP_NODE_ROUTE, NP_PRIO_BATCH, 5, h, m, a, sizeof *a, 0,
                          err);
}
