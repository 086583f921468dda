/* ReLU forward and backward, elementwise over flat buffers; in-place use is allowed.
 * Not here: the linear layer it follows (linear.c), which fuses its forward ReLU into the
 * product. */
#include "codelets/kernels/kernels.h"

void np_relu_fwd(const float *x, float *y, size_t n) { /* x, y: (n), may alias */
    /* `x > 0` is false for NaN, so a NaN input gives 0 rather than spreading. */
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* The two shapes of the backward loop with their pointers declared apart (restrict), so
 * that the compiler vectorizes them: with dx == dy possible, it kept a scalar loop behind
 * a run-time overlap check, and the in-place call (the usual one) took it. */
NP_TARGET_CLONES static void relu_bwd_inplace(const float *restrict y, float *restrict d,
                                              size_t n) {
    for (size_t i = 0; i < n; i++)
        d[i] = y[i] > 0.0f ? d[i] : 0.0f;
}

NP_TARGET_CLONES static void relu_bwd_apart(const float *restrict y, const float *restrict dy,
                                            float *restrict dx, size_t n) {
    for (size_t i = 0; i < n; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

NP_TARGET_CLONES static void relu_bwd_colsum(const float *restrict y, float *restrict dy, long B,
                                             int out, float *restrict db) {
    for (int j = 0; j < out; j++)
        db[j] = 0.0f;
    for (long s = 0; s < B; s++) {
        const float *ys = y + (size_t)s * (size_t)out; /* (out) */
        float *ds = dy + (size_t)s * (size_t)out;       /* (out) */
        for (int j = 0; j < out; j++) {
            float v = ys[j] > 0.0f ? ds[j] : 0.0f;
            ds[j] = v;
            db[j] += v;
        }
    }
}

void np_relu_bwd_colsum(const float *y, float *dy, long B, int out, float *db) {
    /* each db[j] is 0 + v_0 + v_1 + ... in sample order, as np_linear_bwd sums them */
    relu_bwd_colsum(y, dy, B, out, db);
}

void np_relu_bwd(const float *y, const float *dy, float *dx, size_t n) { /* all (n) */
    /* The mask reads the forward OUTPUT, so callers may keep y (in place) and drop x. */
    if (dx == dy)
        relu_bwd_inplace(y, dx, n);
    else
        relu_bwd_apart(y, dy, dx, n);
}
