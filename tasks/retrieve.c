/* Retrieve (table rows -> the batch's embedding buffer) and write-back (buffer -> table).
 * The table handle is R for retrieve and RW for write-back: that pair of modes is what
 * orders retrieve(t+1) after writeback(t). Optimizer state travels with its rows. */
#include "tasks/tasks.h"

np_status np_submit_retrieve(const np_task_ctx *c, const np_cl_rows_args *a, np_h tables, np_h uniq,
                             np_h meta, np_h E, np_h state, np_h Es, np_error *err) {
    np_h h[6] = {tables, uniq, meta, E, state, Es};
    enum starpu_data_access_mode m[6] = {STARPU_R, STARPU_R, STARPU_R,
                                         STARPU_W, STARPU_R, STARPU_W};
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_UO); /* the rows it serves */
    return np_task_submit(&cc, &np_cl_gather, NP_NODE_RETRIEVE, a->with_state ? 6 : 4, h, m, a,
                          sizeof *a, 0, err);
}

np_status np_submit_writeback(const np_task_ctx *c, const np_cl_rows_args *a, np_h E, np_h uniq,
                              np_h meta, np_h tables, np_h Es, np_h state, np_error *err) {
    np_h h[6] = {E, uniq, meta, tables, Es, state};
    enum starpu_data_access_mode m[6] = {STARPU_R,  STARPU_R, STARPU_R,
                                         STARPU_RW, STARPU_R, STARPU_RW};
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_UO);
    return np_task_submit(&cc, &np_cl_scatter, NP_NODE_WRITEBACK, a->with_state ? 6 : 4, h, m, a,
                          sizeof *a, 0, err);
}
