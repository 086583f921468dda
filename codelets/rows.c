/* StarPU codelets that move whole rows: retrieve (gather), write-back (scatter) and the
 * dual-buffer sync. The copies are codelets/kernels/rows.c's. */
#include "codelets/cl.h"
#include "codelets/kernels/kernels.h"

static void gather_cpu(void *buffers[], void *cl_arg) {
    const np_cl_rows_args *a = cl_arg;
    const float *tables = NP_BUF(buffers, 0);
    const int64_t *uniq = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *E = NP_BUF(buffers, 3);
    for (int t = 0; t < a->T; t++) {
        int64_t u0 = meta[NP_META_UCNT(t)], U = meta[NP_META_UCNT(t + 1)] - u0;
        np_rows_gather(tables + (size_t)a->row_base[t] * a->d, uniq + u0, (long)U, a->d,
                       E + (size_t)u0 * a->d);
        if (a->with_state)
            np_rows_gather((const float *)NP_BUF(buffers, 4) + a->row_base[t], uniq + u0, (long)U,
                           1, (float *)NP_BUF(buffers, 5) + u0);
    }
}

static void scatter_cpu(void *buffers[], void *cl_arg) {
    const np_cl_rows_args *a = cl_arg;
    const float *E = NP_BUF(buffers, 0);
    const int64_t *uniq = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *tables = NP_BUF(buffers, 3);
    for (int t = 0; t < a->T; t++) {
        int64_t u0 = meta[NP_META_UCNT(t)], U = meta[NP_META_UCNT(t + 1)] - u0;
        np_rows_scatter(E + (size_t)u0 * a->d, uniq + u0, (long)U, a->d,
                        tables + (size_t)a->row_base[t] * a->d);
        if (a->with_state)
            np_rows_scatter((const float *)NP_BUF(buffers, 4) + u0, uniq + u0, (long)U, 1,
                            (float *)NP_BUF(buffers, 5) + a->row_base[t]);
    }
}

/* Both owner sets are sorted per table: a merge finds the shared rows. */
static void sync_cpu(void *buffers[], void *cl_arg) {
    np_cl_sync_args *a = cl_arg;
    const float *Ep = NP_BUF(buffers, 0);
    const int64_t *up = NP_BUF(buffers, 1), *mp = NP_BUF(buffers, 2);
    float *Ec = NP_BUF(buffers, 3);
    const int64_t *uc = NP_BUF(buffers, 4), *mc = NP_BUF(buffers, 5);
    const float *Sp = a->with_state ? NP_BUF(buffers, 6) : NULL;
    float *Sc = a->with_state ? NP_BUF(buffers, 7) : NULL;
    size_t d = (size_t)a->d;
    uint64_t n = 0;
    for (int t = 0; t < a->T; t++) {
        int64_t i = mp[NP_META_UCNT(t)], ie = mp[NP_META_UCNT(t + 1)];
        int64_t j = mc[NP_META_UCNT(t)], je = mc[NP_META_UCNT(t + 1)];
        while (i < ie && j < je) {
            if (up[i] < uc[j]) {
                i++;
            } else if (up[i] > uc[j]) {
                j++;
            } else {
                memcpy(Ec + (size_t)j * d, Ep + (size_t)i * d, d * sizeof(float));
                if (Sc) Sc[j] = Sp[i];
                n++;
                i++;
                j++;
            }
        }
    }
    a->out.count = n;
}

NP_CODELET(np_cl_sync, sync_cpu, "sync");
NP_CODELET(np_cl_gather, gather_cpu, "retrieve");
NP_CODELET(np_cl_scatter, scatter_cpu, "writeback");
