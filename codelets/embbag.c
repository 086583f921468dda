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

/* ---- StarPU codelets (codelets/cl.h): pooling of one chunk over every table */
#include <string.h>

#include "codelets/cl.h"

static void pool_fwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = cl_arg;
    const float *rows = NP_BUF(buffers, 0);   /* (Uq, d) received rows of all tables */
    const uint32_t *off = NP_BUF(buffers, 1); /* (T, nb+1) */
    const int64_t *pos = NP_BUF(buffers, 2);  /* (nnz) row of each key in rows */
    float *P = NP_BUF(buffers, 3);            /* (n, T, d) */
    for (int t = 0; t < a->T; t++)
        np_embbag_fwd(rows, off + (size_t)t * (a->nb + 1) + a->row0, pos, a->n, a->d,
                      P + (size_t)t * a->d, (long)a->T * a->d);
}

static void pool_bwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = cl_arg;
    const float *dP = NP_BUF(buffers, 0); /* (n, T, d) */
    const uint32_t *off = NP_BUF(buffers, 1);
    const int64_t *pos = NP_BUF(buffers, 2);
    const int64_t *meta = NP_BUF(buffers, 3);
    float *g = NP_BUF(buffers, 4); /* (Uq_w, d) the window's row grads, accumulated */
    if (a->zero) memset(g, 0, (size_t)meta[NP_META_WUQ(a->T, a->w)] * a->d * sizeof(float));
    for (int t = 0; t < a->T; t++)
        np_embbag_bwd(dP + (size_t)t * a->d, (long)a->T * a->d,
                      off + (size_t)t * (a->nb + 1) + a->row0, pos, a->n, a->d, g);
}

NP_CODELET_CUDA(np_cl_pool_fwd, pool_fwd_cpu, np_cuda_pool_fwd, "pool_fwd");
NP_CODELET_CUDA(np_cl_pool_bwd, pool_bwd_cpu, np_cuda_pool_bwd, "pool_bwd");
