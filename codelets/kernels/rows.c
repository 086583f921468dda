/* Gather and scatter of whole table rows by index; pure copies, no arithmetic.
 * Not here: deduplicating the indices (dedup.c) or bounds checks (callers pass valid rows). */
#include "codelets/kernels/kernels.h"

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
