/* Embedding bag with sum pooling over rows already in memory (a table or gathered rows).
 * Not here: finding or fetching the rows (rows.c, dedup.c) or the optimizer step (optim.c). */
#include "codelets/kernels.h"

#include <string.h>

void np_embbag_fwd(const float *rows,                            /* (U, d) */
                   const uint32_t *off,                          /* (n+1) */
                   const int64_t *idx,                           /* (nnz) */
                   long n, int d, float *out, long out_stride) { /* (n, out_stride) */
    for (long i = 0; i < n; i++) {
        float *o = out + (size_t)i * (size_t)out_stride; /* (d); the padding is left alone */
        memset(o, 0, (size_t)d * sizeof *o);
        /* Keys in bag order, so the pooled sum rounds the same way on every engine. */
        for (uint32_t k = off[i]; k < off[i + 1]; k++) {
            const float *r = rows + (size_t)idx[k] * (size_t)d; /* (d) */
            for (int j = 0; j < d; j++)
                o[j] += r[j];
        }
    }
}

void np_embbag_bwd(const float *dout, long dout_stride, /* (n, dout_stride) */
                   const uint32_t *off, const int64_t *idx, long n, int d,
                   float *drows) { /* (U, d), accumulated into */
    /* Bag then key order: a row hit several times sums its gradients in a fixed order. */
    for (long i = 0; i < n; i++) {
        const float *g = dout + (size_t)i * (size_t)dout_stride; /* (d) */
        for (uint32_t k = off[i]; k < off[i + 1]; k++) {
            float *dr = drows + (size_t)idx[k] * (size_t)d; /* (d) */
            for (int j = 0; j < d; j++)
                dr[j] += g[j];
        }
    }
}
