/* Route: the requester dedups and buckets its keys by owner (route), the two-phase All2All
 * sends counts then keys (exchange_keys, a collective), and each owner dedups what it was
 * asked for across requesters (route_owner). */
#include "tasks/tasks.h"

np_status np_submit_route(const np_task_ctx *c, const np_cl_xchg_args *a, const np_task_bufs *b,
                          np_error *err) {
    return np_task_submit(c, &np_cl_route, NP_NODE_ROUTE, b->n, b->h, b->m, a, sizeof *a,
                          NP_REPORT_IN_ARGS, err);
}

np_status np_submit_a2a_keys(const np_task_ctx *c, const np_cl_xchg_args *a, const np_task_bufs *b,
                             np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 0, NP_META_UQ); /* about the keys it sends */
    return np_task_submit_xchg(&cc, &np_cl_a2a_keys, NP_NODE_EXCHANGE_KEYS, b->n, b->h, b->m, a,
                               err);
}

np_status np_submit_route_owner(const np_task_ctx *c, const np_cl_xchg_args *a,
                                const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 1, NP_META_NRECV); /* the keys it received */
    return np_task_submit(&cc, &np_cl_route_owner, NP_NODE_ROUTE_OWNER, b->n, b->h, b->m, a,
                          sizeof *a, NP_REPORT_IN_ARGS, err);
}
