/* Optimizer nodes: the sparse update of the batch's embedding buffer (RW) and the dense
 * update of the replicated parameters (RW, so the next batch's forward waits for it). */
#include "tasks/tasks.h"

np_status np_submit_sparse_update(const np_task_ctx *c, const np_cl_sparse_args *a,
                                  const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_UO); /* the rows it updates */
    return np_task_submit(&cc, &np_cl_sparse_update, NP_NODE_SPARSE_UPDATE, b->n, b->h, b->m, a,
                          sizeof *a, NP_REPORT_IN_ARGS, err);
}

np_status np_submit_dense_update(const np_task_ctx *c, const np_cl_dense_args *a,
                                 const np_task_bufs *b, np_error *err) {
    return np_task_submit(c, &np_cl_dense_update, NP_NODE_DENSE_UPDATE, b->n, b->h, b->m, a,
                          sizeof *a, NP_REPORT_IN_ARGS, err);
}
