/* Embedding bag with sum pooling over rows already in memory (a table or gathered rows).
 * Not here: finding or fetching the rows (rows.c, dedup.c) or the optimizer step (optim.c). */
#include "codelets/kernels/kernels.h"

#include <string.h>

/* How many keys ahead the loops prefetch their rows: a bag's row is a random row of a table
 * or of the received rows, mostly a cache miss, and the next bags' rows are known. */
#define POOL_PREFETCH 8

/* 8 floats (GCC vector extension): element-wise IEEE adds, as the scalar loop's. */
typedef float pool_v8 __attribute__((vector_size(8 * sizeof(float))));

/* One bag. Each output element is 0 + r_0 + r_1 + ... in key order, the sum the plain loop
 * forms, so the bits do not change. With skip (a constant where inlined), a key whose index
 * is negative is left out: the engine's pooled exchange gives one row for all of a bag's
 * keys at one owner, read by the first of them (docs/pipeline.md "Rows or pooled sums").
 * With d = 16 (inlined as a constant) the sum stays in vector registers; otherwise it runs
 * in the output row. */
static inline __attribute__((always_inline)) void
bag_fwd(const float *restrict rows, const int64_t *restrict idx, uint32_t k0, uint32_t k1,
        uint32_t kend, int d, int skip, float *restrict o) {
    float acc[16];
    float *restrict s = d == 16 ? acc : o;
    for (int j = 0; j < d; j++)
        s[j] = 0.0f;
    for (uint32_t k = k0; k < k1; k++) {
        if (k + POOL_PREFETCH < kend && (!skip || idx[k + POOL_PREFETCH] >= 0))
            for (int j = 0; j < d; j += 16)
                __builtin_prefetch(rows + (size_t)idx[k + POOL_PREFETCH] * (size_t)d + j);
        if (skip && idx[k] < 0) continue; /* a pooled bag's key, in its owner's partial sum */
        const float *r = rows + (size_t)idx[k] * (size_t)d; /* (d) */
        for (int j = 0; j < d; j++)
            s[j] += r[j];
    }
    if (d == 16) memcpy(o, acc, sizeof acc);
}

/* The loops over bags, for d = 16 and any d, plain and skipping negative indices: each a
 * function of its own, so the constants reach the inlined bag. */
#define EMBBAG_FWD(name, D, SKIP)                                                                  \
    NP_TARGET_CLONES                                                                               \
    static void name(const float *rows, const uint32_t *off, const int64_t *idx, long n, int d,    \
                     float *out, long out_stride) {                                                \
        (void)d;                                                                                   \
        for (long i = 0; i < n; i++)                                                               \
            bag_fwd(rows, idx, off[i], off[i + 1], off[n], D, SKIP,                                \
                    out + (size_t)i * (size_t)out_stride);                                         \
    }
EMBBAG_FWD(embbag_fwd_16, 16, 0)
EMBBAG_FWD(embbag_fwd_any, d, 0)
EMBBAG_FWD(embbag_fwd_16_skip, 16, 1)
EMBBAG_FWD(embbag_fwd_any_skip, d, 1)

void np_embbag_fwd(const float *rows,                            /* (U, d) */
                   const uint32_t *off,                          /* (n+1) */
                   const int64_t *idx,                           /* (nnz) */
                   long n, int d, float *out, long out_stride) { /* (n, out_stride) */
    /* Keys in bag order, so the pooled sum rounds the same way on every engine; the padding
     * of an out row is left alone. */
    (d == 16 ? embbag_fwd_16 : embbag_fwd_any)(rows, off, idx, n, d, out, out_stride);
}

void np_embbag_fwd_skip(const float *rows, const uint32_t *off, const int64_t *idx, long n,
                        int d, float *out, long out_stride) {
    (d == 16 ? embbag_fwd_16_skip : embbag_fwd_any_skip)(rows, off, idx, n, d, out, out_stride);
}

static inline __attribute__((always_inline)) void
bag_bwd(const float *restrict g, const int64_t *restrict idx, uint32_t k0, uint32_t k1,
        uint32_t kend, int d, int skip, float *restrict drows) {
    for (uint32_t k = k0; k < k1; k++) {
        if (k + POOL_PREFETCH < kend && (!skip || idx[k + POOL_PREFETCH] >= 0))
            for (int j = 0; j < d; j += 16)
                __builtin_prefetch(drows + (size_t)idx[k + POOL_PREFETCH] * (size_t)d + j, 1);
        if (skip && idx[k] < 0) continue; /* its bag's pooled gradient goes to the owner once */
        float *dr = drows + (size_t)idx[k] * (size_t)d; /* (d) */
        if (d == 16) { /* two 8-float vectors: GCC left this loop scalar */
            for (int j = 0; j < 16; j += 8) {
                pool_v8 a, b;
                memcpy(&a, dr + j, sizeof a);
                memcpy(&b, g + j, sizeof b);
                a += b;
                memcpy(dr + j, &a, sizeof a);
            }
        } else {
            for (int j = 0; j < d; j++)
                dr[j] += g[j];
        }
    }
}

#define EMBBAG_BWD(name, D, SKIP)                                                                  \
    NP_TARGET_CLONES                                                                               \
    static void name(const float *dout, long dout_stride, const uint32_t *off, const int64_t *idx, \
                     long n, int d, float *drows) {                                                \
        (void)d;                                                                                   \
        for (long i = 0; i < n; i++)                                                               \
            bag_bwd(dout + (size_t)i * (size_t)dout_stride, idx, off[i], off[i + 1], off[n], D,    \
                    SKIP, drows);                                                                  \
    }
EMBBAG_BWD(embbag_bwd_16, 16, 0)
EMBBAG_BWD(embbag_bwd_any, d, 0)
EMBBAG_BWD(embbag_bwd_16_skip, 16, 1)
EMBBAG_BWD(embbag_bwd_any_skip, d, 1)

void np_embbag_bwd(const float *dout, long dout_stride, /* (n, dout_stride) */
                   const uint32_t *off, const int64_t *idx, long n, int d,
                   float *drows) { /* (U, d), accumulated into */
    /* Bag then key order: a row hit several times sums its gradients in a fixed order. dout
     * never overlaps drows (the pooled gradients and a table's row gradients). */
    (d == 16 ? embbag_bwd_16 : embbag_bwd_any)(dout, dout_stride, off, idx, n, d, drows);
}

void np_embbag_bwd_skip(const float *dout, long dout_stride, const uint32_t *off,
                        const int64_t *idx, long n, int d, float *drows) {
    (d == 16 ? embbag_bwd_16_skip : embbag_bwd_any_skip)(dout, dout_stride, off, idx, n, d, drows);
}

/* ---- sequences: key j of a bag fills position j of its (L, d) block */

void np_embseq_fwd(const float *rows, const uint32_t *off, const int64_t *idx, long n, int L,
                   int d, float *out, long out_stride) {
    for (long i = 0; i < n; i++) {
        float *o = out + (size_t)i * (size_t)out_stride; /* (L, d) */
        uint32_t len = off[i + 1] - off[i];
        for (int p = 0; p < L; p++) {
            float *op = o + (size_t)p * (size_t)d;
            int64_t r = (uint32_t)p < len ? idx[off[i] + (uint32_t)p] : -1;
            /* 0 + row, the sum a bag of this one key forms (so -0 reads as +0 alike) */
            for (int j = 0; j < d; j++)
                op[j] = 0.0f + (r >= 0 ? rows[(size_t)r * (size_t)d + j] : 0.0f);
        }
    }
}

void np_embseq_bwd(const float *dout, long dout_stride, const uint32_t *off, const int64_t *idx,
                   long n, int L, int d, float *drows) {
    for (long i = 0; i < n; i++) {
        uint32_t len = off[i + 1] - off[i];
        for (uint32_t p = 0; p < len && p < (uint32_t)L; p++) {
            int64_t r = idx[off[i] + p];
            if (r < 0) continue;
            const float *g = dout + (size_t)i * (size_t)dout_stride + (size_t)p * (size_t)d;
            float *dr = drows + (size_t)r * (size_t)d;
            for (int j = 0; j < d; j++)
                dr[j] += g[j];
        }
    }
}
