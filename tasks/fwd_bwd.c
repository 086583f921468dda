/* The pooling and loss nodes of one chunk (the layers are tasks/layer.c's): kinds pool_fwd,
 * pool_bwd, loss_fwd and loss_bwd, dense compute on the critical path of the batch. */
#include "tasks/tasks.h"

np_status np_submit_pool_fwd(const np_task_ctx *c, const np_cl_emb_args *a, const np_task_bufs *b,
                             np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 4, np_meta_pooled_at(a)); /* pooled rows? */
    return np_task_submit(&cc, &np_cl_pool_fwd, NP_NODE_POOL_FWD, b->n, b->h, b->m, a, sizeof *a,
                          0, err);
}

/* the window's chunks add into one buffer, in submission (chunk) order: its first writes */
np_status np_submit_pool_bwd(const np_task_ctx *c, const np_cl_emb_args *a, const np_task_bufs *b,
                             np_error *err) {
    np_task_ctx cc = np_task_cost(c, (uint32_t)a->zero, 3, np_meta_pooled_at(a));
    return np_task_submit(&cc, &np_cl_pool_bwd, NP_NODE_POOL_BWD, b->n, b->h, b->m, a, sizeof *a,
                          0, err);
}

np_status np_submit_loss_fwd(const np_task_ctx *c, const np_cl_bce_args *a, const np_task_bufs *b,
                             np_error *err) {
    return np_task_submit(c, &np_cl_bce_fwd, NP_NODE_LOSS_FWD, b->n, b->h, b->m, a, sizeof *a, 0,
                          err);
}

np_status np_submit_loss_bwd(const np_task_ctx *c, const np_cl_bce_args *a, const np_task_bufs *b,
                             np_error *err) {
    return np_task_submit(c, &np_cl_bce_bwd, NP_NODE_LOSS_BWD, b->n, b->h, b->m, a, sizeof *a, 0,
                          err);
}
