/* Test helpers shared by the model and training tests: a tiny RNG, hand-built batches,
 * and the tolerance check |a-b| <= atol + rtol*|ref| (tolerances written once, with the reason). Header-only. */
#ifndef NP_TESTS_TESTUTIL_H
#define NP_TESTS_TESTUTIL_H

#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nestpipe/nestpipe.h"

static inline uint64_t tu_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static inline double tu_unif(uint64_t *s) { /* [0, 1) */
    return (double)(tu_next(s) >> 11) * 0x1.0p-53;
}

static inline int tu_close(double a, double ref, double atol, double rtol) {
    return fabs(a - ref) <= atol + rtol * fabs(ref);
}

/* A batch of n samples for cfg's shape: N(0,1)-ish dense features, bags of 0..max_bag
 * keys (so empty bags and repeated keys occur), labels 0/1. Free with np_batch_free. */
static inline np_batch tu_batch(const np_config *cfg, long n, int max_bag, uint64_t seed) {
    np_batch b = {0};
    int T = cfg->tables, nd = cfg->bottom[0];
    uint64_t s = seed | 1;
    b.n = n;
    b.n_dense = nd;
    b.n_tables = T;
    b.dense = malloc(sizeof(float) * (size_t)(n * nd));
    b.label = malloc(sizeof(float) * (size_t)n);
    b.offsets = malloc(sizeof(uint32_t) * (size_t)(T * (n + 1)));
    b.keys = malloc(sizeof(int64_t) * (size_t)(T * n * max_bag + 1));
    for (long i = 0; i < n * nd; i++)
        b.dense[i] = (float)(2.0 * tu_unif(&s) - 1.0);
    for (long i = 0; i < n; i++)
        b.label[i] = tu_unif(&s) < 0.5 ? 0.0f : 1.0f;
    size_t k = 0;
    for (int t = 0; t < T; t++) {
        int64_t rows = np_config_rows(cfg, t);
        for (long i = 0; i < n; i++) {
            b.offsets[t * (n + 1) + i] = (uint32_t)k;
            int c = (int)(tu_next(&s) % (uint64_t)(max_bag + 1));
            for (int j = 0; j < c; j++)
                b.keys[k++] = (int64_t)(tu_next(&s) % (uint64_t)rows);
        }
        b.offsets[t * (n + 1) + n] = (uint32_t)k;
    }
    b.nnz = k;
    b.cap_n = n;
    b.cap_nnz = (size_t)(T * n * max_bag + 1);
    return b;
}

/* Temporaries left beside path by an output writer (np_outfile: PATH.np-HOST-PID.XXXXXX, or
 * PATH.XXXXXX for long names), or the old fixed PATH.tmp: how many there are. */
static inline int tu_leftovers(const char *path) {
    char pat[1100];
    glob_t g;
    int n = 0;
    snprintf(pat, sizeof pat, "%s.??????", path);
    if (glob(pat, 0, NULL, &g) == 0) n += (int)g.gl_pathc;
    globfree(&g);
    snprintf(pat, sizeof pat, "%s.np-*.??????", path);
    if (glob(pat, 0, NULL, &g) == 0) n += (int)g.gl_pathc;
    globfree(&g);
    snprintf(pat, sizeof pat, "%s.tmp", path);
    if (glob(pat, 0, NULL, &g) == 0) n += (int)g.gl_pathc;
    globfree(&g);
    return n;
}

#endif
