/* Fixed-order sum of k buffers (chunk partial gradients -> one gradient) and its codelet.
 * The order is the buffers' index order, never completion order, so the result is the
 * same bits whatever the scheduler or the number of workers. */
#include <string.h>

#include "codelets/cl.h"
#include "codelets/kernels.h"

void np_sum_ordered(const float *const *in, int k, size_t count, float *out) {
    memcpy(out, in[0], count * sizeof(float));
    for (int i = 1; i < k; i++)
        for (size_t j = 0; j < count; j++)
            out[j] += in[i][j];
}

static void sum_cpu(void *buffers[], void *cl_arg) {
    const np_cl_sum_args *a = cl_arg;
    const float *in[64];
    size_t count = a->count;
    for (int i = 0; i < a->k; i++)
        in[i] = NP_BUF(buffers, i);
    int next = a->k;
    if (a->width > 0) {
        const int64_t *meta = NP_BUF(buffers, next++);
        count = (size_t)meta[a->idx] * (size_t)a->width;
    }
    np_sum_ordered(in, a->k, count, NP_BUF(buffers, next));
}

NP_CODELET_CUDA(np_cl_sum, sum_cpu, np_cuda_sum, "sum");
