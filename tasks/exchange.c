/* Exchanges of embedding rows (owner -> requester) and of their gradients (back), and the
 * all-reduce of dense gradients: collectives, so they run on the communication worker and
 * take the comm token RW, which makes every rank issue them in the same order. */
#include "tasks/tasks.h"

#define R STARPU_R
#define W STARPU_W
#define RW STARPU_RW

np_status np_submit_exchange_rows(const np_task_ctx *c, const np_cl_xchg_args *a, np_h E, np_h map,
                                  np_h meta, np_h Rin, np_h sbuf, np_h token, np_error *err) {
    np_task_ctx cc = *c;
    cc.pin = 1;
    np_h h[6] = {E, map, meta, Rin, sbuf, token};
    enum starpu_data_access_mode m[6] = {R, R, R, W, W, RW};
    return np_task_submit(&cc, &np_cl_exchange_rows, NP_NODE_EXCHANGE_EMB, NP_PRIO_CRITICAL, 6, h,
                          m, a, sizeof *a, NP_REPORT_IN_ARGS, err);
}

np_status np_submit_exchange_grads(const np_task_ctx *c, const np_cl_xchg_args *a, np_h grows,
                                   np_h map, np_h meta, np_h gE, np_h rbuf, np_h token,
                                   np_error *err) {
    np_task_ctx cc = *c;
    cc.pin = 1;
    np_h h[6] = {grows, map, meta, gE, rbuf, token};
    /* window 0 starts the sum, the others add to it */
    enum starpu_data_access_mode m[6] = {R, R, R, a->w ? RW : W, W, RW};
    return np_task_submit(&cc, &np_cl_exchange_grads, NP_NODE_EXCHANGE_GRAD, NP_PRIO_CRITICAL, 6, h,
                          m, a, sizeof *a, NP_REPORT_IN_ARGS, err);
}

np_status np_submit_allreduce(const np_task_ctx *c, const np_cl_xchg_args *a, np_h glocal,
                              np_h gdense, np_h all, np_h token, np_error *err) {
    np_task_ctx cc = *c;
    cc.pin = 1;
    np_h h[4] = {glocal, gdense, all, token};
    enum starpu_data_access_mode m[4] = {R, W, W, RW};
    return np_task_submit(&cc, &np_cl_allreduce, NP_NODE_ALLREDUCE, NP_PRIO_CRITICAL, 4, h, m, a,
                          sizeof *a, NP_REPORT_IN_ARGS, err);
}
