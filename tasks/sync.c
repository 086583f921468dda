/* Dual-buffer sync: after update(t), the rows batch t+1 shares with t are copied from t's
 * (updated) buffer into t+1's (retrieved before write-back(t), so stale there). RW on the
 * current buffer (graph/contract.c) orders it after retrieve(t+1) and before
 * exchange_rows(t+1). */
#include "tasks/tasks.h"

np_status np_submit_sync(const np_task_ctx *c, const np_cl_sync_args *a, const np_task_bufs *b,
                         np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 5, NP_META_UO); /* about the rows it compares */
    return np_task_submit(&cc, &np_cl_sync, NP_NODE_SYNC, b->n, b->h, b->m, a, sizeof *a,
                          NP_REPORT_IN_ARGS, err);
}
