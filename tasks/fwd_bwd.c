/* The pooling and loss nodes of one chunk (the layers are tasks/layer.c's): kinds pool_fwd,
 * pool_bwd, loss_fwd and loss_bwd, dense compute on the critical path of the batch. */
#include "tasks/tasks.h"

#define R STARPU_R
#define W STARPU_W
#define RW STARPU_RW

np_status np_submit_pool_fwd(const np_task_ctx *c, const np_cl_emb_args *a, np_h rows, np_h offsets,
                             np_h pos, np_h P, np_h meta, np_error *err) {
    np_h h[5] = {rows, offsets, pos, P, meta};
    enum starpu_data_access_mode m[5] = {R, R, R, W, R};
    np_task_ctx cc = np_task_cost(c, 0, 4, np_meta_pooled_at(a)); /* pooled rows? */
    return np_task_submit(&cc, &np_cl_pool_fwd, NP_NODE_POOL_FWD, 5, h, m, a, sizeof *a, 0, err);
}

np_status np_submit_pool_bwd(const np_task_ctx *c, const np_cl_emb_args *a, np_h dP, np_h offsets,
                             np_h pos, np_h meta, np_h grows, np_error *err) {
    np_h h[5] = {dP, offsets, pos, meta, grows};
    /* the window's chunks add into one buffer, in submission (chunk) order */
    enum starpu_data_access_mode m[5] = {R, R, R, R, a->zero ? W : RW};
    np_task_ctx cc = np_task_cost(c, (uint32_t)a->zero, 3, np_meta_pooled_at(a));
    return np_task_submit(&cc, &np_cl_pool_bwd, NP_NODE_POOL_BWD, 5, h, m, a, sizeof *a, 0, err);
}

np_status np_submit_loss(const np_task_ctx *c, int bwd, const np_cl_bce_args *a, np_h logits,
                         np_h labels, np_h out, np_error *err) {
    np_h h[3] = {logits, labels, out};
    enum starpu_data_access_mode m[3] = {R, R, W};
    return np_task_submit(c, bwd ? &np_cl_bce_bwd : &np_cl_bce_fwd,
                          bwd ? NP_NODE_LOSS_BWD : NP_NODE_LOSS_FWD, 3, h, m, a, sizeof *a, 0, err);
}
