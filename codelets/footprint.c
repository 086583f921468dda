/* The footprint every nestpipe perf model keys its history on (NP_PERFMODEL): the sizes of
 * the task's buffers, then what its submitter put in the np_cl_cost at the head of the
 * task's callback argument (tasks/submit.c), the count of keys or rows bucketed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/cl.h"

/* NESTPIPE_FOOTPRINT=sizes keys the models on the buffers' sizes alone, as before 0.6 (for
 * bench/tune.sh's comparison; use a STARPU_HOME of its own). Read once. */
static int sizes_only(void) {
    static int v = -1;
    int x = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (x < 0) {
        const char *e = getenv("NESTPIPE_FOOTPRINT");
        x = e && !strcmp(e, "sizes");
        __atomic_store_n(&v, x, __ATOMIC_RELAXED);
    }
    return x;
}

/* The count's bucket: floor(log(count + 1) / log(1.06)). */
static uint32_t bucket(int64_t count) {
    return count <= 0 ? 0 : (uint32_t)(log1p((double)count) / log(1.06)) + 1;
}

uint32_t np_task_footprint(struct starpu_task *task) {
    uint32_t h = 0;
    for (int i = 0; i < task->nbuffers; i++)
        h = starpu_hash_crc32c_be_n(
            &(uint64_t){starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i))}, sizeof(uint64_t),
            h);
    const np_cl_cost *c = task->callback_arg;
    if (!c || c->tag != NP_CL_COST_TAG || sizes_only()) return h;
    h = starpu_hash_crc32c_be(c->key, h);
    if (c->meta > 0 && c->meta <= task->nbuffers) {
        /* the task is ready (or has run and still holds its buffers): the route that wrote
         * the count is done, and the next writer of the buffer waits for this task */
        starpu_data_handle_t m = STARPU_TASK_GET_HANDLE(task, c->meta - 1);
        const int64_t *meta = starpu_data_handle_to_pointer(m, STARPU_MAIN_RAM);
        size_t n = starpu_vector_get_nx(m);
        if (meta && c->at >= 0 && (size_t)c->at < n)
            h = starpu_hash_crc32c_be(bucket(meta[c->at]), h);
    }
    return h;
}
