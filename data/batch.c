/* np_batch memory: freeing and growing the table-major CSR arrays that every source fills.
 * Not here: what goes into a batch (synthetic.c, source.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

void np_batch_free(np_batch *b) {
    if (!b) return;
    free(b->dense);
    free(b->label);
    free(b->offsets);
    free(b->keys);
    memset(b, 0, sizeof *b);
}

/* realloc that leaves *p untouched on failure, so the batch stays valid and freeable. */
static np_status regrow(void **p, size_t n, size_t size, const char *what, np_error *err) {
    if (size && n > SIZE_MAX / size)
        return np_err(err, NP_STATUS_NO_MEMORY, "size overflow growing batch %s", what);
    size_t bytes = n * size;
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q)
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory growing batch %s to %zu bytes", what,
                      bytes);
    *p = q;
    return NP_OK;
}

np_status np_batch_reserve(np_batch *b, long n, int n_dense, int n_tables, np_error *err) {
    if (n < 0 || n_dense < 0 || n_tables < 1)
        return np_err(err, NP_STATUS_INTERNAL,
                      "np_batch_reserve: bad shape n=%ld n_dense=%d n_tables=%d", n, n_dense,
                      n_tables);
    /* cap_n counts samples of the current shape; a new shape means new array sizes */
    if (b->n_dense != n_dense || b->n_tables != n_tables) b->cap_n = 0;
    if (n > b->cap_n || !b->dense || !b->label || !b->offsets) {
        size_t cap = (size_t)n;
        np_status st;
        if ((st = regrow((void **)&b->dense, cap, (size_t)n_dense * sizeof(float), "dense", err)) ||
            (st = regrow((void **)&b->label, cap, sizeof(float), "labels", err)) ||
            (st = regrow((void **)&b->offsets, cap + 1, (size_t)n_tables * sizeof(uint32_t),
                         "offsets", err))) {
            b->cap_n = 0; /* arrays may now differ in size: force a full regrow next time */
            return st;
        }
        b->cap_n = n;
    }
    b->n = n;
    b->n_dense = n_dense;
    b->n_tables = n_tables;
    return NP_OK;
}

np_status np_batch_reserve_keys(np_batch *b, size_t nnz, np_error *err) {
    if (nnz > UINT32_MAX)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "a batch of %ld samples holds %zu keys, more than the 2^32-1 that its "
                      "uint32 offsets can index; use a smaller batch",
                      b->n, nnz);
    return np_grow((void **)&b->keys, &b->cap_nnz, nnz, sizeof(int64_t), "batch keys", err);
}
