/* Fixed-order reductions of chunk partials: dense gradients and embedding-row gradients
 * (the cross-rank all-reduce is tasks/exchange.c). */
#include "core/util.h"
#include "tasks/tasks.h"

np_status np_submit_sum(const np_task_ctx *c, np_node_kind kind, int k, const np_h *parts,
                        size_t count, np_h meta, int idx, int width, np_h out, np_error *err) {
    np_h h[66];
    enum starpu_data_access_mode m[66];
    if (k < 1 || k > 64)
        return np_err(err, NP_STATUS_INTERNAL, "sum of %d partials (1..64 supported)", k);
    int n = 0;
    for (int i = 0; i < k; i++) {
        h[n] = parts[i];
        m[n++] = STARPU_R;
    }
    if (meta) {
        h[n] = meta;
        m[n++] = STARPU_R;
    }
    h[n] = out;
    m[n++] = STARPU_W;
    np_cl_sum_args a = {.k = k, .count = count, .width = meta ? width : 0, .idx = idx};
    /* the rows summed: meta's count when there is one (after the k partials) */
    np_task_ctx cc = np_task_cost(c, (uint32_t)k, meta ? k : -1, idx);
    return np_task_submit(&cc, &np_cl_sum, kind, n, h, m, &a, sizeof a, 0, err);
}
