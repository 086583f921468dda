/* The machine's practical dense peak: OpenBLAS sgemm GFLOP/s on square matrices, median of
 * several runs, printed as one number. A bench/run.sh helper, built by it (not by CMake).
 *
 *   sgemm_peak [N [REPEATS]]      (defaults 2048 and 7; threads from OPENBLAS_NUM_THREADS)
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2048;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (n < 16 || n > 16384 || reps < 1 || reps > 1000 || argc > 3) {
        fprintf(stderr, "usage: sgemm_peak [N (16..16384, default 2048) [REPEATS (default 7)]]\n");
        return 2;
    }
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    double *gf = malloc((size_t)reps * sizeof *gf);
    if (!a || !b || !c || !gf) {
        fprintf(stderr, "sgemm_peak: out of memory for N = %ld\n", n);
        return 1;
    }
    /* Values in [-1, 1) from a fixed LCG: no denormals, no zeros that a kernel could skip. */
    unsigned long s = 12345;
    for (size_t i = 0; i < nn; i++) {
        s = s * 6364136223846793005UL + 1442695040888963407UL;
        a[i] = (float)((double)(s >> 40) / (double)(1UL << 24) * 2.0 - 1.0);
        s = s * 6364136223846793005UL + 1442695040888963407UL;
        b[i] = (float)((double)(s >> 40) / (double)(1UL << 24) * 2.0 - 1.0);
    }

    /* One untimed call: thread pool start-up and first-touch page faults are not the peak. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n,
                b, (int)n, 0.0f, c, (int)n);

    /* Validate before reporting (bench/README.md): a few entries against a double dot
     * product. A float sum of n terms of size <= 1 is off by at most ~n * 2^-24 * sqrt(n). */
    for (int k = 0; k < 16; k++) {
        long i = (k * 7919L) % n, j = (k * 104729L) % n;
        double ref = 0;
        for (long q = 0; q < n; q++)
            ref += (double)a[i * n + q] * (double)b[q * n + j];
        if (fabs(c[i * n + j] - ref) > 1e-4 * (double)n) {
            fprintf(stderr, "sgemm_peak: wrong result at (%ld, %ld): %g vs %g\n", i, j,
                    (double)c[i * n + j], ref);
            return 1;
        }
    }

    double flops = 2.0 * (double)n * (double)n * (double)n;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a,
                    (int)n, b, (int)n, 0.0f, c, (int)n);
        gf[r] = flops / (now_s() - t0) / 1e9;
    }
    qsort(gf, (size_t)reps, sizeof *gf, cmp_double);
    printf("%.1f\n", reps % 2 ? gf[reps / 2] : 0.5 * (gf[reps / 2 - 1] + gf[reps / 2]));
    free(a);
    free(b);
    free(c);
    free(gf);
    return 0;
}
