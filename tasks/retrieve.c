/* Retrieve (table rows -> the batch's embedding buffer) and write-back (buffer -> table).
 * The table is R for retrieve and RW for write-back (graph/contract.c): that pair of modes
 * is what orders retrieve(t+1) after writeback(t). Optimizer state travels with its rows. */
#include "tasks/tasks.h"

np_status np_submit_retrieve(const np_task_ctx *c, const np_cl_rows_args *a, const np_task_bufs *b,
                             np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_UO); /* the rows it serves */
    return np_task_submit(&cc, &np_cl_gather, NP_NODE_RETRIEVE, b->n, b->h, b->m, a, sizeof *a, 0,
                          err);
}

np_status np_submit_writeback(const np_task_ctx *c, const np_cl_rows_args *a, const np_task_bufs *b,
                              np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_UO);
    return np_task_submit(&cc, &np_cl_scatter, NP_NODE_WRITEBACK, b->n, b->h, b->m, a, sizeof *a, 0,
                          err);
}
