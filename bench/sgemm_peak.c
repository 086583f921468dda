/* The machine's practical dense peak: one library's sgemm GFLOP/s on square matrices, median of
 * several runs. A bench/run.sh helper, built by it (not by CMake), once per library:
 *
 *   gcc ... sgemm_peak.c $(pkg-config --cflags --libs openblas)        OpenBLAS cblas_sgemm
 *   gcc ... -DSGEMM_PEAK_ONEDNN sgemm_peak.c -ldnnl                    oneDNN dnnl_sgemm
 *
 *   sgemm_peak [N [REPEATS]]      (defaults 2048 and 7)
 *
 * Prints one line: the GFLOP/s, then what ran (library, version, the kernel it picked), e.g.
 * "97.3 OpenBLAS 0.3.21, core Cooperlake" or "101.2 oneDNN 2.6.3, ISA avx512_core_bf16".
 * Threads: OpenBLAS follows OPENBLAS_NUM_THREADS (its core: OPENBLAS_CORETYPE), oneDNN built
 * with OpenMP (Debian's) OMP_NUM_THREADS (its ISA cap: ONEDNN_MAX_CPU_ISA).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SGEMM_PEAK_ONEDNN
#include <oneapi/dnnl/dnnl.h>

static int sgemm(long n, const float *a, const float *b, float *c) {
    /* dnnl_sgemm is row-major, as the cblas call below */
    return dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) == dnnl_success ? 0 : -1;
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
    /* the values common to oneDNN 2.x and 3.x */
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return NULL;
    }
}

static void describe(char *buf, size_t size) {
    const dnnl_version_t *v = dnnl_version();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const char *name = isa_name(isa);
    if (name)
        snprintf(buf, size, "oneDNN %d.%d.%d, ISA %s", v->major, v->minor, v->patch, name);
    else
        snprintf(buf, size, "oneDNN %d.%d.%d, ISA 0x%x", v->major, v->minor, v->patch,
                 (unsigned)isa);
}
#else
#include <cblas.h>

static int sgemm(long n, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n,
                b, (int)n, 0.0f, c, (int)n);
    return 0;
}

static void describe(char *buf, size_t size) {
    /* openblas_get_config() starts "OpenBLAS 0.3.21 DYNAMIC_ARCH ...": keep the version */
    char ver[64] = "";
    const char *cfg = openblas_get_config();
    if (cfg && strncmp(cfg, "OpenBLAS ", 9) == 0)
        sscanf(cfg + 9, "%63s", ver);
    snprintf(buf, size, "OpenBLAS%s%s, core %s", *ver ? " " : "", ver, openblas_get_corename());
}
#endif

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

    /* One untimed call: thread pool start-up, JIT and first-touch page faults are not the
     * peak. */
    if (sgemm(n, a, b, c) != 0) {
        fprintf(stderr, "sgemm_peak: the library's sgemm failed\n");
        return 1;
    }

    /* Validate before reporting (bench/README.md): a few entries against a double dot
     * product. A float sum of n terms of size <= 1 is off by at most ~n * 2^-24 * sqrt(n). */
    for (int k = 0; k < 16; k++) {
        long i = (k * 7919L) % n, j = (k * 104729L) % n;
        double ref = 0;
        for (long q = 0; q < n; q++)
            ref += (double)a[i * n + q] * (double)b[q * n + j];
        if (!(fabs(c[i * n + j] - ref) <= 1e-4 * (double)n)) {
            fprintf(stderr, "sgemm_peak: wrong result at (%ld, %ld): %g vs %g\n", i, j,
                    (double)c[i * n + j], ref);
            return 1;
        }
    }

    double flops = 2.0 * (double)n * (double)n * (double)n;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (sgemm(n, a, b, c) != 0) {
            fprintf(stderr, "sgemm_peak: the library's sgemm failed\n");
            return 1;
        }
        gf[r] = flops / (now_s() - t0) / 1e9;
    }
    qsort(gf, (size_t)reps, sizeof *gf, cmp_double);
    char what[160];
    describe(what, sizeof what);
    printf("%.1f %s\n", reps % 2 ? gf[reps / 2] : 0.5 * (gf[reps / 2 - 1] + gf[reps / 2]), what);
    free(a);
    free(b);
    free(c);
    free(gf);
    return 0;
}
