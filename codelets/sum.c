/* The StarPU codelet of the fixed-order sum of k buffers (chunk partial gradients, a fan-in's
 * edge gradients). The arithmetic is codelets/kernels/reduce.c's. */
#include "codelets/cl.h"
#include "codelets/kernels/kernels.h"

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
