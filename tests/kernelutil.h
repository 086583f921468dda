/* Helpers shared by the kernel tests (test_kernels, test_kernels_sparse): a tiny RNG,
 * tolerance checks, central-difference gradients. */
#ifndef NP_TESTS_KERNELUTIL_H
#define NP_TESTS_KERNELUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Central-difference step. Every op here is at most quadratic in any one input (linear,
 * ReLU away from its kink, embedding bags, dot products), so the double central difference
 * is exact up to roundoff ~1e-16/H = 1e-12; for the BCE the truncation term H^2/6 * |f'''|
 * is below 1e-9. So the reference gradient is good to ~1e-9 and the tolerances below only
 * have to cover the float kernels. */
#define FD_H 1e-4

/* Float kernel vs exact (double) value, for forwards and gradients alike. The inputs are
 * in [-1, 1] and every reduction here has at most 16 terms, so the float result is off by
 * at most ~16 * 2^-24 * sum|terms| <= 1.6e-5 in the worst case and ~1e-7 typically. The
 * atol covers outputs that cancel to near 0 (where a relative bound means nothing); the
 * rtol covers large values. A wrong index, missing term or transposed operand errs by
 * O(0.1..1) and fails by orders of magnitude. */
#define KERNEL_ATOL 2e-5
#define KERNEL_RTOL 1e-5

/* ---- test helpers */

/* xorshift64*: tiny, deterministic, independent of the library's RNG. */
static uint64_t rng_state;
static inline void rng_seed(uint64_t s) {
    rng_state = s ? s : 0x9E3779B97F4A7C15ULL;
}
static inline uint64_t rng_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}
/* Uniform in [lo, hi), rounded to float: tests feed the same values to float and double. */
static inline float rng_float(float lo, float hi) {
    double u = (double)(rng_u64() >> 11) * 0x1.0p-53;
    return (float)(lo + (hi - lo) * u);
}
static inline void fill_uniform(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++)
        a[i] = rng_float(lo, hi);
}
static inline void to_double(const float *a, double *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        b[i] = a[i];
}

/* Checked allocation: a test that cannot allocate fails rather than crashing. */
static inline void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

/* |got - ref| <= atol + rtol*|ref| for all n; prints the worst element and the first few
 * failures so a broken kernel says where it is wrong. got is read with stride 1. */
static inline void check_close(const char *what, const float *got, const double *ref, size_t n,
                               double atol, double rtol) {
    size_t bad = 0, worst = 0;
    double worst_ratio = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        double lim = atol + rtol * fabs(ref[i]);
        if (!(err <= lim)) {
            if (bad < 5)
                fprintf(stderr, "  %s[%zu]: got %.9g want %.9g (err %.3g > %.3g)\n", what, i,
                        (double)got[i], ref[i], err, lim);
            bad++;
        }
        if (err / lim > worst_ratio || isnan(err)) {
            worst_ratio = err / lim;
            worst = i;
        }
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu out of tolerance (worst [%zu])\n", what, bad, n, worst);
    assert_int_equal(bad, 0);
}

static inline void check_kernel(const char *what, const float *got, const double *ref, size_t n) {
    check_close(what, got, ref, n, KERNEL_ATOL, KERNEL_RTOL);
}

/* A scalar loss of the double parameters held in ctx (L = sum R .* y(x) for the ops). */
typedef double (*loss_fn)(void *ctx);

/* Central differences of loss over the n doubles at p, into grad (n). */
static inline void fd_grad(loss_fn loss, void *ctx, double *p, size_t n, double *grad) {
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double lp = loss(ctx);
        p[i] = keep - FD_H;
        double lm = loss(ctx);
        p[i] = keep;
        grad[i] = (lp - lm) / (2.0 * FD_H);
    }
}

static inline double dot_d(const double *a, const double *b, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

#endif
