/* Exchanges of embedding rows (owner -> requester) and of their gradients (back). On one
 * rank both are a local copy; the MPI All2All replaces the codelet, not the graph. */
#include "tasks/tasks.h"

np_status np_submit_exchange(const np_task_ctx *c, np_node_kind kind, int T, int width, np_h src,
                             np_h ucnt, np_h dst, uint64_t bytes, np_error *err) {
    np_h h[3] = {src, ucnt, dst};
    enum starpu_data_access_mode m[3] = {STARPU_R, STARPU_R, STARPU_W};
    np_cl_copy_args a = {.width = width, .T = T};
    return np_task_submit(c, &np_cl_copy, kind, NP_PRIO_CRITICAL, 3, h, m, &a, sizeof a, bytes,
                          err);
}
