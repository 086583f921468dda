/* ReLU forward and backward, elementwise over flat buffers; in-place use is allowed.
 * Not here: the linear layer it follows (linear.c). */
#include "codelets/kernels.h"

void np_relu_fwd(const float *x, float *y, size_t n) { /* x, y: (n), may alias */
    /* `x > 0` is false for NaN, so a NaN input gives 0 rather than spreading. */
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void np_relu_bwd(const float *y, const float *dy, float *dx, size_t n) { /* all (n) */
    /* The mask reads the forward OUTPUT, so callers may keep y (in place) and drop x. */
    for (size_t i = 0; i < n; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---- StarPU codelets (codelets/cl.h) */
#include "codelets/cl.h"

static void relu_fwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_relu_args *a = cl_arg;
    float *y = NP_BUF(buffers, 0);
    np_relu_fwd(y, y, a->n);
}

static void relu_bwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_relu_args *a = cl_arg;
    float *dy = NP_BUF(buffers, 1);
    np_relu_bwd(NP_BUF(buffers, 0), dy, dy, a->n);
}

NP_CODELET(np_cl_relu_fwd, relu_fwd_cpu, "relu_fwd");
NP_CODELET(np_cl_relu_bwd, relu_bwd_cpu, "relu_bwd");
