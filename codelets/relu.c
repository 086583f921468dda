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
