/* StarPU codelets of the embedding-bag pooling of one chunk over every table, forward and
 * backward. The arithmetic is codelets/kernels/embbag.c's. */
#include <string.h>

#include "codelets/cl.h"
#include "runtime/core/shard.h"
#include "codelets/kernels/kernels.h"

static void pool_fwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = cl_arg;
    const float *rows = NP_BUF(buffers, 0);   /* (Uq, d) received rows of all tables */
    const uint32_t *off = NP_BUF(buffers, 1); /* (T, nb+1) */
    const int64_t *pos = NP_BUF(buffers, 2);  /* (nnz) row of each key in rows */
    float *P = NP_BUF(buffers, 3);            /* (n, S, d) */
    const int64_t *meta = NP_BUF(buffers, 4);
    /* pos holds -1s where a pooled bag's later keys are (docs/pipeline.md "Rows or pooled
     * sums"): the skipping kernel then, the plain one else; a sequence never goes pooled */
    int skip = meta[NP_META_POOLED(a->T, a->W, a->R)] != 0;
    long stride = (long)np_slot_first(a->T, a->L) * a->d;
    for (int t = 0; t < a->T; t++) {
        const uint32_t *o = off + (size_t)t * (a->nb + 1) + a->row0;
        float *Pt = P + (size_t)np_slot_first(t, a->L) * a->d;
        if (t == 0 && a->L > 0)
            np_embseq_fwd(rows, o, pos, a->n, a->L, a->d, Pt, stride);
        else
            (skip ? np_embbag_fwd_skip : np_embbag_fwd)(rows, o, pos, a->n, a->d, Pt, stride);
    }
}

static void pool_bwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = cl_arg;
    const float *dP = NP_BUF(buffers, 0); /* (n, S, d) */
    const uint32_t *off = NP_BUF(buffers, 1);
    const int64_t *pos = NP_BUF(buffers, 2);
    const int64_t *meta = NP_BUF(buffers, 3);
    float *g = NP_BUF(buffers, 4); /* (Uq_w, d) the window's row grads, accumulated */
    if (a->zero) memset(g, 0, (size_t)meta[NP_META_WUQ(a->T, a->w)] * a->d * sizeof(float));
    int skip = meta[NP_META_POOLED(a->T, a->W, a->R)] != 0;
    long stride = (long)np_slot_first(a->T, a->L) * a->d;
    for (int t = 0; t < a->T; t++) {
        const uint32_t *o = off + (size_t)t * (a->nb + 1) + a->row0;
        const float *dPt = dP + (size_t)np_slot_first(t, a->L) * a->d;
        if (t == 0 && a->L > 0)
            np_embseq_bwd(dPt, stride, o, pos, a->n, a->L, a->d, g);
        else
            (skip ? np_embbag_bwd_skip : np_embbag_bwd)(dPt, stride, o, pos, a->n, a->d, g);
    }
}

NP_CODELET_CUDA(np_cl_pool_fwd, pool_fwd_cpu, np_cuda_pool_fwd, "pool_fwd");
NP_CODELET_CUDA(np_cl_pool_bwd, pool_bwd_cpu, np_cuda_pool_bwd, "pool_bwd");
