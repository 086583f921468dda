/* Dual-buffer sync: after update(t), the rows batch t+1 shares with t are copied from t's
 * (updated) buffer into t+1's (retrieved before write-back(t), so stale there). RW on the
 * current buffer orders it after retrieve(t+1) and before exchange_rows(t+1). */
#include "tasks/tasks.h"

np_status np_submit_sync(const np_task_ctx *c, const np_cl_sync_args *a, np_h E_prev,
                         np_h uniq_prev, np_h meta_prev, np_h E_cur, np_h uniq_cur, np_h meta_cur,
                         np_h Es_prev, np_h Es_cur, np_error *err) {
    np_h h[8] = {E_prev, uniq_prev, meta_prev, E_cur, uniq_cur, meta_cur, Es_prev, Es_cur};
    enum starpu_data_access_mode m[8] = {STARPU_R, STARPU_R, STARPU_R, STARPU_RW,
                                         STARPU_R, STARPU_R, STARPU_R, STARPU_RW};
    np_task_ctx cc = np_task_cost(c, 0, 5, NP_META_UO); /* about the rows it compares */
    return np_task_submit(&cc, &np_cl_sync, NP_NODE_SYNC, a->with_state ? 8 : 6, h, m, a, sizeof *a,
                          NP_REPORT_IN_ARGS, err);
}
