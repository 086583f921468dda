/* Sigmoid + binary cross-entropy on logits, in the forms that stay finite for any |z|.
 * Not here: the mean over the global batch (the caller passes scale = 1/G). */
#include "codelets/kernels/kernels.h"

#include <math.h>

/* exp() only ever sees a non-positive argument, so neither branch overflows. */
static double sigmoid(double z) {
    if (z >= 0.0) return 1.0 / (1.0 + exp(-z));
    double e = exp(z);
    return e / (1.0 + e);
}

double np_sigmoid_bce_fwd(const float *z, const float *y, float *p, long B) { /* all (B) */
    double sum = 0.0;
    for (long s = 0; s < B; s++) {
        double zs = z[s], ys = y[s];
        if (p) p[s] = (float)sigmoid(zs);
        /* -y log p - (1-y) log(1-p) rewritten so no log ever sees 0. */
        sum += fmax(zs, 0.0) - zs * ys + log1p(exp(-fabs(zs)));
    }
    return sum;
}

double np_loss_fwd(int output, const float *z, const float *y, float *p, long B) {
    if (!output) return np_sigmoid_bce_fwd(z, y, p, B);
    double sum = 0.0;
    for (long s = 0; s < B; s++) {
        if (p) p[s] = z[s];
        sum += (double)z[s];
    }
    return sum;
}

void np_loss_bwd(int output, const float *z, const float *y, float scale, float *dz, long B) {
    if (!output) {
        np_sigmoid_bce_bwd(z, y, scale, dz, B);
        return;
    }
    for (long s = 0; s < B; s++)
        dz[s] = scale;
}

void np_sigmoid_bce_bwd(const float *z, const float *y, float scale, float *dz, long B) {
    /* z, y, dz: (B). Done in double and rounded once, so dz is the correctly rounded
     * (sigmoid - y) * scale, whatever the sign or size of z. */
    for (long s = 0; s < B; s++)
        dz[s] = (float)((sigmoid(z[s]) - (double)y[s]) * (double)scale);
}
