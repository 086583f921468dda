/* Dense forward/backward nodes of one chunk: linear, ReLU, pooling, interaction, loss.
 * All on the critical path of the batch, so they carry the top priority. */
#include "tasks/tasks.h"

#define R STARPU_R
#define W STARPU_W
#define RW STARPU_RW

np_status np_submit_linear_fwd(const np_task_ctx *c, const np_cl_linear_args *a, np_h x,
                               np_h params, np_h y, np_error *err) {
    np_h h[3] = {x, params, y};
    enum starpu_data_access_mode m[3] = {R, R, W};
    return np_task_submit(c, &np_cl_linear_fwd, NP_NODE_FWD, NP_PRIO_CRITICAL, 3, h, m, a,
                          sizeof *a, 0, err);
}

np_status np_submit_linear_bwd(const np_task_ctx *c, const np_cl_linear_args *a, np_h x,
                               np_h params, np_h dy, np_h gdense, np_h dx, np_error *err) {
    np_h h[5] = {x, params, dy, gdense, dx};
    enum starpu_data_access_mode m[5] = {R, R, R, RW, W};
    return np_task_submit(c, &np_cl_linear_bwd, NP_NODE_BWD, NP_PRIO_CRITICAL, dx ? 5 : 4, h, m, a,
                          sizeof *a, 0, err);
}

np_status np_submit_relu_fwd(const np_task_ctx *c, size_t n, np_h y, np_error *err) {
    enum starpu_data_access_mode m[1] = {RW};
    np_cl_relu_args a = {.n = n};
    return np_task_submit(c, &np_cl_relu_fwd, NP_NODE_FWD, NP_PRIO_CRITICAL, 1, &y, m, &a, sizeof a,
                          0, err);
}

np_status np_submit_relu_bwd(const np_task_ctx *c, size_t n, np_h y, np_h dy, np_error *err) {
    np_h h[2] = {y, dy};
    enum starpu_data_access_mode m[2] = {R, RW};
    np_cl_relu_args a = {.n = n};
    return np_task_submit(c, &np_cl_relu_bwd, NP_NODE_BWD, NP_PRIO_CRITICAL, 2, h, m, &a, sizeof a,
                          0, err);
}

np_status np_submit_pool_fwd(const np_task_ctx *c, const np_cl_emb_args *a, np_h rows, np_h offsets,
                             np_h pos, np_h P, np_error *err) {
    np_h h[4] = {rows, offsets, pos, P};
    enum starpu_data_access_mode m[4] = {R, R, R, W};
    return np_task_submit(c, &np_cl_pool_fwd, NP_NODE_FWD, NP_PRIO_CRITICAL, 4, h, m, a, sizeof *a,
                          0, err);
}

np_status np_submit_pool_bwd(const np_task_ctx *c, const np_cl_emb_args *a, np_h dP, np_h offsets,
                             np_h pos, np_h meta, np_h grows, np_error *err) {
    np_h h[5] = {dP, offsets, pos, meta, grows};
    /* the window's chunks add into one buffer, in submission (chunk) order */
    enum starpu_data_access_mode m[5] = {R, R, R, R, a->zero ? W : RW};
    return np_task_submit(c, &np_cl_pool_bwd, NP_NODE_BWD, NP_PRIO_CRITICAL, 5, h, m, a, sizeof *a,
                          0, err);
}

np_status np_submit_interact_fwd(const np_task_ctx *c, const np_cl_emb_args *a, np_h bot, np_h P,
                                 np_h F, np_h Z, np_error *err) {
    np_h h[4] = {bot, P, F, Z};
    enum starpu_data_access_mode m[4] = {R, R, W, W};
    return np_task_submit(c, &np_cl_interact_fwd, NP_NODE_FWD, NP_PRIO_CRITICAL, 4, h, m, a,
                          sizeof *a, 0, err);
}

np_status np_submit_interact_bwd(const np_task_ctx *c, const np_cl_emb_args *a, np_h F, np_h dZ,
                                 np_h dF, np_h dbot, np_h dP, np_error *err) {
    np_h h[5] = {F, dZ, dF, dbot, dP};
    enum starpu_data_access_mode m[5] = {R, R, W, W, W};
    return np_task_submit(c, &np_cl_interact_bwd, NP_NODE_BWD, NP_PRIO_CRITICAL, 5, h, m, a,
                          sizeof *a, 0, err);
}

np_status np_submit_bce(const np_task_ctx *c, const np_cl_bce_args *a, np_h logits, np_h labels,
                        np_h loss, np_h dlogits, np_error *err) {
    np_h hf[3] = {logits, labels, loss}, hb[3] = {logits, labels, dlogits};
    enum starpu_data_access_mode m[3] = {R, R, W};
    np_status st = np_task_submit(c, &np_cl_bce_fwd, NP_NODE_FWD, NP_PRIO_CRITICAL, 3, hf, m, a,
                                  sizeof *a, 0, err);
    if (st) return st;
    return np_task_submit(c, &np_cl_bce_bwd, NP_NODE_BWD, NP_PRIO_CRITICAL, 3, hb, m, a, sizeof *a,
                          0, err);
}
