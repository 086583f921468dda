/* Input codelets: prefetch copies a loaded batch into a pipeline slot, reordering its
 * samples into windows when key-centric clustering is on; h2d makes the slot resident
 * where dense compute runs. It has no work of its own: on a CUDA worker, StarPU copies
 * the buffers it reads to the device before it runs (a real transfer, overlapped with the
 * batch training); with CPU workers only it is a marker node that keeps the stage visible
 * in the graph and the trace. */
#include <stdlib.h>
#include <string.h>

#include "codelets/cl.h"
#include "codelets/kernels/kernels.h"
#include "nestpipe/nestpipe.h"

static void prefetch_cpu(void *buffers[], void *cl_arg) {
    np_cl_prefetch_args *a = cl_arg;
    const np_batch *b = a->src;
    float *dense = NP_BUF(buffers, 0), *label = NP_BUF(buffers, 1);
    uint32_t *off = NP_BUF(buffers, 2);
    int64_t *keys = NP_BUF(buffers, 3);
    if (a->cluster && a->W > 1) {
        /* window w is slots [n*w/W, n*(w+1)/W) of the reordered batch, as in route */
        long *perm = malloc(((size_t)b->n + 1) * sizeof *perm), bounds[65];
        if (!perm || np_cluster_windows(b->offsets, b->keys, b->n, b->n_tables, a->W, 1, perm,
                                        bounds)) {
            free(perm);
            a->out.fail = 1;
            return;
        }
        np_permute_samples(b->n, b->n_dense, b->n_tables, perm, b->dense, b->label, b->offsets,
                           b->keys, dense, label, off, keys);
        free(perm);
        return;
    }
    memcpy(dense, b->dense, (size_t)b->n * b->n_dense * sizeof(float));
    memcpy(label, b->label, (size_t)b->n * sizeof(float));
    memcpy(off, b->offsets, (size_t)b->n_tables * (b->n + 1) * sizeof(uint32_t));
    memcpy(keys, b->keys, b->nnz * sizeof(int64_t));
}

static void h2d_cpu(void *buffers[], void *cl_arg) {
    (void)buffers;
    (void)cl_arg;
}

/* h2d's body is empty in every flavour: its duration is StarPU's task overhead (under a
 * microsecond), and the transfer it stands for is costed by StarPU's bus model. A history
 * model of it never settles: StarPU drops a sample more than 50% from the mean and resets
 * an entry whose dropped samples outnumber its kept ones, which sub-microsecond jitter does
 * on a busy machine, so dmda kept calibrating it. A constant cost instead. */
static double h2d_cost(struct starpu_task *task, unsigned nimpl) {
    (void)task;
    (void)nimpl;
    return 1.0; /* us */
}

static struct starpu_perfmodel h2d_model = {
    .type = STARPU_COMMON, .symbol = "nestpipe.h2d", .cost_function = h2d_cost};

NP_CODELET(np_cl_prefetch, prefetch_cpu, "prefetch");
struct starpu_codelet np_cl_h2d = {.cpu_funcs = {h2d_cpu},
                                   .cpu_funcs_name = {"h2d_cpu"},
#ifdef NP_HAVE_CUDA
                                   .cuda_funcs = {h2d_cpu},
                                   .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
                                   .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                   .model = &h2d_model,
                                   .name = "h2d"};
