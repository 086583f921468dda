/* Sum-pooling kernel benchmark: np_embbag_fwd and np_embbag_bwd over one chunk of every
 * table, the way the pool codelets call them (bags of table t written at stride T d), with
 * repeated hot rows in a window's received rows, against the plain loops below (the
 * kernels' definition), timed alternately in one process. First checks that both give the
 * same bits. Prints the median of 11 timed runs of 20 calls each per side, and a checksum of
 * the outputs.
 * usage: pool_bench [n T d hot U]   (default 512 26 16 1 30000: a chunk of the bench shape) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codelets/kernels/kernels.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

enum { RUNS = 11, CALLS = 20 };

/* The plain loops: out row i = 0 + its rows in key order; drows[idx] += dout row i in bag
 * then key order. */
static void plain_fwd(const float *rows, const uint32_t *off, const int64_t *idx, long n, int d,
                      float *out, long out_stride) {
    for (long i = 0; i < n; i++) {
        float *o = out + (size_t)i * (size_t)out_stride;
        memset(o, 0, (size_t)d * sizeof *o);
        for (uint32_t k = off[i]; k < off[i + 1]; k++)
            for (int j = 0; j < d; j++)
                o[j] += rows[(size_t)idx[k] * (size_t)d + (size_t)j];
    }
}

static void plain_bwd(const float *dout, long dout_stride, const uint32_t *off, const int64_t *idx,
                      long n, int d, float *drows) {
    for (long i = 0; i < n; i++)
        for (uint32_t k = off[i]; k < off[i + 1]; k++)
            for (int j = 0; j < d; j++)
                drows[(size_t)idx[k] * (size_t)d + (size_t)j] +=
                    dout[(size_t)i * (size_t)dout_stride + (size_t)j];
}

typedef struct job {
    const uint32_t *off;
    const int64_t *pos;
    const float *rows;
    float *P, *g;
    long n, U;
    int T, d;
} job;

/* One forward (bwd 0) or backward (bwd 1) pass over every table; plain 1: the plain loops. */
static void pass(const job *j, int bwd, int plain) {
    size_t n1 = (size_t)j->n + 1;
    long stride = (long)j->T * j->d;
    if (bwd) memset(j->g, 0, (size_t)j->U * (size_t)j->d * sizeof *j->g);
    for (int t = 0; t < j->T; t++) {
        const uint32_t *o = j->off + (size_t)t * n1;
        float *P = j->P + (size_t)t * (size_t)j->d;
        if (!bwd && plain) plain_fwd(j->rows, o, j->pos, j->n, j->d, P, stride);
        if (!bwd && !plain) np_embbag_fwd(j->rows, o, j->pos, j->n, j->d, P, stride);
        if (bwd && plain) plain_bwd(P, stride, o, j->pos, j->n, j->d, j->g);
        if (bwd && !plain) np_embbag_bwd(P, stride, o, j->pos, j->n, j->d, j->g);
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 512;
    int T = argc > 2 ? atoi(argv[2]) : 26, d = argc > 3 ? atoi(argv[3]) : 16;
    int hot = argc > 4 ? atoi(argv[4]) : 1;
    long U = argc > 5 ? atol(argv[5]) : 30000;
    if (n < 1 || T < 1 || d < 1 || hot < 1 || U < 1) {
        fprintf(stderr, "pool_bench: n, T, d, hot and U must be >= 1\n");
        return 2;
    }
    size_t nnz = (size_t)n * (size_t)T * (size_t)hot;
    uint32_t *off = malloc((size_t)T * (size_t)(n + 1) * sizeof *off);
    int64_t *pos = malloc(nnz * sizeof *pos);
    float *rows = malloc((size_t)U * (size_t)d * sizeof *rows);
    float *P = malloc((size_t)n * (size_t)T * (size_t)d * sizeof *P);
    float *g = malloc((size_t)U * (size_t)d * sizeof *g);
    if (!off || !pos || !rows || !P || !g) {
        fprintf(stderr, "pool_bench: out of memory\n");
        return 1;
    }
    for (int t = 0; t < T; t++)
        for (long i = 0; i <= n; i++)
            off[(size_t)t * (size_t)(n + 1) + (size_t)i] = (uint32_t)(((size_t)t * (size_t)n + (size_t)i) * (size_t)hot);
    for (size_t k = 0; k < nnz; k++) { /* half the keys on 1% of the rows: hot rows repeat */
        uint64_t r = next_u64();
        pos[k] = (int64_t)((r & 1) ? (r >> 1) % (uint64_t)(U / 100 + 1) : (r >> 1) % (uint64_t)U);
    }
    for (size_t i = 0; i < (size_t)U * (size_t)d; i++)
        rows[i] = (float)((int64_t)(next_u64() % 2001) - 1000) / 997.0f;
    job j = {.off = off, .pos = pos, .rows = rows, .P = P, .g = g, .n = n, .U = U, .T = T, .d = d};
    size_t np_ = (size_t)n * (size_t)T * (size_t)d, ng = (size_t)U * (size_t)d;
    float *P2 = malloc(np_ * sizeof *P2), *g2 = malloc(ng * sizeof *g2);
    if (!P2 || !g2) {
        fprintf(stderr, "pool_bench: out of memory\n");
        return 1;
    }
    pass(&j, 0, 1);
    pass(&j, 1, 1);
    memcpy(P2, P, np_ * sizeof *P);
    memcpy(g2, g, ng * sizeof *g);
    pass(&j, 0, 0);
    pass(&j, 1, 0);
    if (memcmp(P, P2, np_ * sizeof *P) || memcmp(g, g2, ng * sizeof *g)) {
        fprintf(stderr, "pool_bench: the kernels and the plain loops differ\n");
        return 1;
    }
    double t[4][RUNS]; /* plain fwd, kernel fwd, plain bwd, kernel bwd */
    for (int r = 0; r < RUNS; r++)
        for (int k = 0; k < 4; k++) {
            double t0 = now_us();
            for (int c = 0; c < CALLS; c++)
                pass(&j, k / 2, !(k % 2));
            t[k][r] = (now_us() - t0) / CALLS;
        }
    double med[4];
    for (int k = 0; k < 4; k++) {
        qsort(t[k], RUNS, sizeof t[k][0], cmp_d);
        med[k] = t[k][RUNS / 2];
    }
    uint64_t h = fnv(P, np_ * sizeof *P, 0xcbf29ce484222325ull);
    h = fnv(g, ng * sizeof *g, h);
    printf("| shape | plain fwd us | fwd us | speedup | plain bwd us | bwd us | speedup | checksum |\n"
           "|---|---:|---:|---:|---:|---:|---:|---|\n");
    printf("| n %ld, T %d, d %d, hot %d, U %ld | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | %016llx |\n",
           n, T, d, hot, U, med[0], med[1], med[0] / med[1], med[2], med[3], med[2] / med[3],
           (unsigned long long)h);
    free(P2);
    free(g2);
    free(off);
    free(pos);
    free(rows);
    free(P);
    free(g);
    return 0;
}
