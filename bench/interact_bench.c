/* Dot-interaction kernel benchmark: the per-sample kernels against the blocked ones (16
 * samples a vector register, the clone the CPU picked at run time), forward and backward,
 * on B rows of T1 vectors of d; first checks that both give the same bits. Median of 11
 * timed runs of 20 calls each. Prints markdown rows.
 * usage: interact_bench [B T1 d]   (default 256 27 16: a chunk of the default shape) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codelets/kernels/kernels.h"
#include "codelets/layers/layers.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { RUNS = 11, CALLS = 20 };

typedef struct args {
    const float *F, *g;
    float *out, *dF, *ws;
    long B;
    int T1, d;
} args;

/* Median microseconds per call of kernel k: 0 fwd, 1 fwd blocked, 2 bwd, 3 bwd blocked. */
static double time_kernel(const args *a, int k) {
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_us();
        for (int c = 0; c < CALLS; c++) {
            if (k == 0) np_interact_fwd(a->F, a->B, a->T1, a->d, a->out);
            if (k == 1) np_interact_fwd_blk(a->F, a->B, a->T1, a->d, a->out, a->ws);
            if (k == 2) np_interact_bwd(a->F, a->g, a->B, a->T1, a->d, a->dF);
            if (k == 3) np_interact_bwd_blk(a->F, a->g, a->B, a->T1, a->d, a->dF, a->ws);
        }
        t[r] = (now_us() - t0) / CALLS;
    }
    qsort(t, RUNS, sizeof *t, cmp_d);
    return t[RUNS / 2];
}

int main(int argc, char **argv) {
    long B = argc > 1 ? atol(argv[1]) : 256;
    int T1 = argc > 2 ? atoi(argv[2]) : 27, d = argc > 3 ? atoi(argv[3]) : 16;
    if (B < 1 || T1 < 1 || d < 1) {
        fprintf(stderr, "interact_bench: B, T1 and d must be >= 1\n");
        return 2;
    }
    size_t fsz = (size_t)T1 * d, W = (size_t)d + (size_t)T1 * (T1 - 1) / 2;
    float *F = malloc(B * fsz * 4), *g = malloc(B * W * 4), *o1 = malloc(B * W * 4);
    float *o2 = malloc(B * W * 4), *d1 = malloc(B * fsz * 4), *d2 = malloc(B * fsz * 4);
    float *ws = malloc(np_interact_ws_floats(T1, d) * 4);
    if (!F || !g || !o1 || !o2 || !d1 || !d2 || !ws) {
        fprintf(stderr, "interact_bench: out of memory\n");
        return 1;
    }
    srand(1);
    for (size_t i = 0; i < B * fsz; i++)
        F[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (size_t i = 0; i < B * W; i++)
        g[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    /* validate first: the blocked kernels must give the same bits */
    np_interact_fwd(F, B, T1, d, o1);
    np_interact_fwd_blk(F, B, T1, d, o2, ws);
    np_interact_bwd(F, g, B, T1, d, d1);
    np_interact_bwd_blk(F, g, B, T1, d, d2, ws);
    if (memcmp(o1, o2, B * W * 4) || memcmp(d1, d2, B * fsz * 4)) {
        fprintf(stderr, "interact_bench: the blocked kernels differ from the per-sample ones\n");
        return 1;
    }
    args a = {F, g, o1, d1, ws, B, T1, d};
    double t[4];
    for (int k = 0; k < 4; k++)
        t[k] = time_kernel(&a, k);
    double flop_f = 2.0 * B * (double)(W - d) * d, flop_b = 2 * flop_f;
    printf("| pass | per-sample us | blocked us | speedup | blocked GFLOP/s |\n|---|---:|---:|---:|---:|\n");
    printf("| forward (B %ld, T1 %d, d %d) | %.1f | %.1f | %.2fx | %.1f |\n", B, T1, d, t[0], t[1],
           t[0] / t[1], flop_f / t[1] / 1e3);
    printf("| backward | %.1f | %.1f | %.2fx | %.1f |\n", t[2], t[3], t[2] / t[3],
           flop_b / t[3] / 1e3);
    free(F), free(g), free(o1), free(o2), free(d1), free(d2), free(ws);
    return 0;
}
