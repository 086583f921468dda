/* Gather and scatter of whole table rows by index; pure copies, no arithmetic.
 * Not here: deduplicating the indices (dedup.c) or bounds checks (callers pass valid rows). */
#include "codelets/kernels.h"

#include <string.h>

void np_rows_gather(const float *table, const int64_t *idx, long U, int d, float *out) {
    /* table: (rows, d), idx: (U), out: (U, d) */
    for (long u = 0; u < U; u++)
        memcpy(out + (size_t)u * (size_t)d, table + (size_t)idx[u] * (size_t)d,
               (size_t)d * sizeof *out);
}

void np_rows_scatter(const float *in, const int64_t *idx, long U, int d, float *table) {
    /* in: (U, d), idx: (U), table: (rows, d). With repeated idx the last copy wins. */
    for (long u = 0; u < U; u++)
        memcpy(table + (size_t)idx[u] * (size_t)d, in + (size_t)u * (size_t)d,
               (size_t)d * sizeof *in);
}

/* ---- StarPU codelets (codelets/cl.h): retrieve, write-back, local exchange */
#include <string.h>

#include "codelets/cl.h"

static void gather_cpu(void *buffers[], void *cl_arg) {
    const np_cl_rows_args *a = cl_arg;
    const float *tables = NP_BUF(buffers, 0);
    const int64_t *uniq = NP_BUF(buffers, 1), *ucnt = NP_BUF(buffers, 2);
    float *E = NP_BUF(buffers, 3);
    for (int t = 0; t < a->T; t++) {
        long U = (long)(ucnt[t + 1] - ucnt[t]);
        np_rows_gather(tables + (size_t)a->row_base[t] * a->d, uniq + ucnt[t], U, a->d,
                       E + (size_t)ucnt[t] * a->d);
        if (a->with_state)
            np_rows_gather((const float *)NP_BUF(buffers, 4) + a->row_base[t], uniq + ucnt[t], U, 1,
                           (float *)NP_BUF(buffers, 5) + ucnt[t]);
    }
}

static void scatter_cpu(void *buffers[], void *cl_arg) {
    const np_cl_rows_args *a = cl_arg;
    const float *E = NP_BUF(buffers, 0);
    const int64_t *uniq = NP_BUF(buffers, 1), *ucnt = NP_BUF(buffers, 2);
    float *tables = NP_BUF(buffers, 3);
    for (int t = 0; t < a->T; t++) {
        long U = (long)(ucnt[t + 1] - ucnt[t]);
        np_rows_scatter(E + (size_t)ucnt[t] * a->d, uniq + ucnt[t], U, a->d,
                        tables + (size_t)a->row_base[t] * a->d);
        if (a->with_state)
            np_rows_scatter((const float *)NP_BUF(buffers, 4) + ucnt[t], uniq + ucnt[t], U, 1,
                            (float *)NP_BUF(buffers, 5) + a->row_base[t]);
    }
}

static void copy_cpu(void *buffers[], void *cl_arg) {
    const np_cl_copy_args *a = cl_arg;
    const int64_t *ucnt = NP_BUF(buffers, 1);
    memcpy(NP_BUF(buffers, 2), NP_BUF(buffers, 0), (size_t)ucnt[a->T] * a->width * sizeof(float));
}

NP_CODELET(np_cl_gather, gather_cpu, "retrieve");
NP_CODELET(np_cl_scatter, scatter_cpu, "writeback");
NP_CODELET(np_cl_copy, copy_cpu, "exchange");
