/* StarPU codelets of the optimizer steps: the sparse update of the owner's gathered rows
 * and the dense update of one node's parameters. The arithmetic is codelets/kernels/optim.c's. */
#include "codelets/cl.h"
#include "codelets/kernels/kernels.h"

static void sparse_update_cpu(void *buffers[], void *cl_arg) {
    np_cl_sparse_args *a = cl_arg;
    float *E = NP_BUF(buffers, 0);
    const float *g = NP_BUF(buffers, 1);
    const int64_t *meta = NP_BUF(buffers, 2);
    long U = (long)meta[NP_META_UO];
    if (a->adagrad)
        np_sparse_rowwise_adagrad(E, NP_BUF(buffers, 3), g, U, a->d, a->lr, a->eps);
    else
        np_sparse_sgd(E, g, U, a->d, a->lr);
    if (!np_all_finite(E, (size_t)U * (size_t)a->d)) a->out.nonfinite = 1;
}

static void dense_update_cpu(void *buffers[], void *cl_arg) {
    np_cl_dense_args *a = cl_arg;
    float *w = (float *)NP_BUF(buffers, 0) + a->off; /* (n) this layer's parameters */
    np_sgd_dense(w, NP_BUF(buffers, 1), a->n, a->lr);
    if (!np_all_finite(w, a->n)) a->out.nonfinite = 1;
}

NP_CODELET(np_cl_sparse_update, sparse_update_cpu, "sparse_update");
NP_CODELET_CUDA(np_cl_dense_update, dense_update_cpu, np_cuda_dense_update, "dense_update");
