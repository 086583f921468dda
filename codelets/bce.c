/* StarPU codelets of the loss: sigmoid + BCE of one chunk (or, with loss = output, the
 * output itself), forward and backward. The arithmetic is codelets/kernels/bce.c's. */
#include "codelets/cl.h"
#include "codelets/kernels/kernels.h"

static void bce_fwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_bce_args *a = cl_arg;
    const float *y = NP_BUF(buffers, 1);
    double *loss = NP_BUF(buffers, 2);
    *loss = np_loss_fwd(a->output, NP_BUF(buffers, 0), y + a->row0, NULL, a->n);
}

static void bce_bwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_bce_args *a = cl_arg;
    const float *y = NP_BUF(buffers, 1);
    np_loss_bwd(a->output, NP_BUF(buffers, 0), y + a->row0, a->scale, NP_BUF(buffers, 2), a->n);
}

NP_CODELET_CUDA(np_cl_bce_fwd, bce_fwd_cpu, np_cuda_bce_fwd, "bce_fwd");
NP_CODELET_CUDA(np_cl_bce_bwd, bce_bwd_cpu, np_cuda_bce_bwd, "bce_bwd");
