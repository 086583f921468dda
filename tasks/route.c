/* Route: the requester dedups and buckets its keys by owner (route), the two-phase All2All
 * sends counts then keys (exchange_keys, a collective), and each owner dedups what it was
 * asked for across requesters (route_owner). */
#include "tasks/tasks.h"

#define R STARPU_R
#define W STARPU_W
#define RW STARPU_RW

np_status np_submit_route(const np_task_ctx *c, const np_cl_xchg_args *a, np_h offsets, np_h keys,
                          np_h uniq, np_h pos, np_h sendkeys, np_h meta, np_error *err) {
    np_h h[6] = {offsets, keys, uniq, pos, sendkeys, meta};
    enum starpu_data_access_mode m[6] = {R, R, W, W, W, RW};
    return np_task_submit(c, &np_cl_route, NP_NODE_ROUTE, 6, h, m, a, sizeof *a, NP_REPORT_IN_ARGS,
                          err);
}

np_status np_submit_a2a_keys(const np_task_ctx *c, const np_cl_xchg_args *a, np_h meta,
                             np_h sendkeys, np_h recvkeys, np_h token, np_error *err) {
    np_h h[4] = {meta, sendkeys, recvkeys, token};
    enum starpu_data_access_mode m[4] = {RW, R, W, RW};
    np_task_ctx cc = np_task_cost(c, 0, 0, NP_META_UQ); /* about the keys it sends */
    return np_task_submit_xchg(&cc, &np_cl_a2a_keys, NP_NODE_EXCHANGE_KEYS, 4, h, m, a, err);
}

np_status np_submit_route_owner(const np_task_ctx *c, const np_cl_xchg_args *a, np_h recvkeys,
                                np_h meta, np_h uniq_o, np_h map, np_error *err) {
    np_h h[4] = {recvkeys, meta, uniq_o, map};
    enum starpu_data_access_mode m[4] = {R, RW, W, W};
    np_task_ctx cc = np_task_cost(c, 0, 1, NP_META_NRECV); /* the keys it received */
    return np_task_submit(&cc, &np_cl_route_owner, NP_NODE_ROUTE_OWNER, 4, h, m, a, sizeof *a,
                          NP_REPORT_IN_ARGS, err);
}
