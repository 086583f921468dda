/* Fixed-order reductions of chunk partials: a producer's edge gradients and a node's dense
 * gradients (the cross-rank all-reduce is tasks/exchange.c). */
#include "runtime/core/util.h"
#include "tasks/tasks.h"

np_status np_submit_sum(const np_task_ctx *c, size_t count, const np_task_bufs *b, np_error *err) {
    int k = b->n - 1;
    if (k < 1 || k > 64)
        return np_err(err, NP_STATUS_INTERNAL, "sum of %d partials (1..64 supported)", k);
    np_cl_sum_args a = {.k = k, .count = count};
    np_task_ctx cc = np_task_cost(c, (uint32_t)k, -1, 0);
    return np_task_submit(&cc, &np_cl_sum, NP_NODE_BWD, b->n, b->h, b->m, &a, sizeof a, 0, err);
}
