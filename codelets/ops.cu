// The CUDA functions of the batch-wide codelets (StarPU cuda_funcs of pool_fwd, pool_bwd,
// bce_fwd, bce_bwd, sum and dense_update: codelets/pool.c, bce.c, sum.c, update.c): each
// reads its device buffers and cl_arg as the CPU function of the same codelet does and calls
// the op's launcher (codelets/cuda/ops.cu) on the worker's stream, returning without a sync
// (STARPU_CUDA_ASYNC) but for dense_update, whose callback reads whether the step left a
// NaN or an inf. The CUDA flavour only.
#include <starpu.h>

extern "C" {
#include "codelets/cl.h"
}
#include "codelets/cuda/cuda.h"
#include "codelets/cuda/elem.h" /* NP_SUM_MAX_IN */

// Floats a vector handle's buffer holds (elements times element size).
static size_t buf_floats(void *buffer) {
    return (size_t)STARPU_VECTOR_GET_NX(buffer) * STARPU_VECTOR_GET_ELEMSIZE(buffer) /
           sizeof(float);
}

extern "C" void np_cuda_pool_fwd(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = (const np_cl_emb_args *)cl_arg;
    np_cuda_pool_fwd_on(starpu_cuda_get_local_stream(), (const float *)NP_BUF(buffers, 0),
                        (const uint32_t *)NP_BUF(buffers, 1), (const int64_t *)NP_BUF(buffers, 2),
                        (float *)NP_BUF(buffers, 3), a->nb, a->row0, a->n, a->T, a->L,
                        a->d);
}

extern "C" void np_cuda_pool_bwd(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = (const np_cl_emb_args *)cl_arg;
    const int64_t *meta = (const int64_t *)NP_BUF(buffers, 3); // device: only offset here
    np_cuda_pool_bwd_on(starpu_cuda_get_local_stream(), (const float *)NP_BUF(buffers, 0),
                        (const uint32_t *)NP_BUF(buffers, 1), (const int64_t *)NP_BUF(buffers, 2),
                        a->zero ? meta + NP_META_WUQ(a->T, a->w) : NULL,
                        (float *)NP_BUF(buffers, 4), buf_floats(buffers[4]), a->nb, a->row0, a->n,
                        a->T, a->L, a->d);
}

extern "C" void np_cuda_bce_fwd(void *buffers[], void *cl_arg) {
    const np_cl_bce_args *a = (const np_cl_bce_args *)cl_arg;
    const float *y = (const float *)NP_BUF(buffers, 1);
    np_cuda_bce_fwd_on(starpu_cuda_get_local_stream(), (const float *)NP_BUF(buffers, 0),
                       y + a->row0, (double *)NP_BUF(buffers, 2), a->n, a->output);
}

extern "C" void np_cuda_bce_bwd(void *buffers[], void *cl_arg) {
    const np_cl_bce_args *a = (const np_cl_bce_args *)cl_arg;
    const float *y = (const float *)NP_BUF(buffers, 1);
    np_cuda_bce_bwd_on(starpu_cuda_get_local_stream(), (const float *)NP_BUF(buffers, 0),
                       y + a->row0, a->scale, (float *)NP_BUF(buffers, 2), a->n, a->output);
}

extern "C" void np_cuda_sum(void *buffers[], void *cl_arg) {
    const np_cl_sum_args *a = (const np_cl_sum_args *)cl_arg;
    const float *in[NP_SUM_MAX_IN];
    for (int i = 0; i < a->k && i < NP_SUM_MAX_IN; i++)
        in[i] = (const float *)NP_BUF(buffers, i);
    int next = a->k;
    const int64_t *rows = NULL;
    if (a->width > 0) rows = (const int64_t *)NP_BUF(buffers, next++) + a->idx;
    np_cuda_sum_on(starpu_cuda_get_local_stream(), in, a->k, a->count, rows, a->width,
                   (float *)NP_BUF(buffers, next), buf_floats(buffers[next]));
}

extern "C" void np_cuda_dense_update(void *buffers[], void *cl_arg) {
    np_cl_dense_args *a = (np_cl_dense_args *)cl_arg;
    float *w = (float *)NP_BUF(buffers, 0) + a->off; // (n) this layer's parameters
    if (np_cuda_dense_update_on(starpu_cuda_get_local_stream(), w,
                                (const float *)NP_BUF(buffers, 1), a->n, a->lr))
        a->out.nonfinite = 1;
}
