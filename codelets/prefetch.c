/* Input codelets: prefetch copies a loaded batch into a pipeline slot; h2d makes the slot
 * resident where dense compute runs (nothing to move on CPU-only builds: a marker node
 * that keeps the stage visible in the graph and the trace). */
#include <string.h>

#include "codelets/cl.h"
#include "nestpipe/nestpipe.h"

static void prefetch_cpu(void *buffers[], void *cl_arg) {
    const np_cl_prefetch_args *a = cl_arg;
    const np_batch *b = a->src;
    memcpy(NP_BUF(buffers, 0), b->dense, (size_t)b->n * b->n_dense * sizeof(float));
    memcpy(NP_BUF(buffers, 1), b->label, (size_t)b->n * sizeof(float));
    memcpy(NP_BUF(buffers, 2), b->offsets, (size_t)b->n_tables * (b->n + 1) * sizeof(uint32_t));
    memcpy(NP_BUF(buffers, 3), b->keys, b->nnz * sizeof(int64_t));
}

static void h2d_cpu(void *buffers[], void *cl_arg) {
    (void)buffers;
    (void)cl_arg;
}

NP_CODELET(np_cl_prefetch, prefetch_cpu, "prefetch");
NP_CODELET(np_cl_h2d, h2d_cpu, "h2d");
