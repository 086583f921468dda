/* np_batch memory: freeing and growing the table-major CSR arrays that every source fills.
 * Not here: what goes into a batch (synthetic.c, source.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data.h"

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

np_status np_batch_slice(const np_batch *full, long lo, long n, np_batch *out, np_error *err) {
    if (lo < 0 || n < 0 || lo + n > full->n)
        return np_err(err, NP_STATUS_INTERNAL, "slice [%ld, %ld) of a batch of %ld samples", lo,
                      lo + n, full->n);
    int T = full->n_tables, nd = full->n_dense;
    size_t nnz = 0;
    for (int t = 0; t < T; t++) {
        const uint32_t *o = full->offsets + (size_t)t * (full->n + 1);
        nnz += o[lo + n] - o[lo];
    }
    np_status st = np_batch_reserve(out, n, nd, T, err);
    if (!st) st = np_batch_reserve_keys(out, nnz, err);
    if (st) return st;
    out->n = n;
    out->nnz = nnz;
    out->first = full->first + (uint64_t)lo;
    memcpy(out->dense, full->dense + (size_t)lo * nd, (size_t)n * nd * sizeof(float));
    memcpy(out->label, full->label + lo, (size_t)n * sizeof(float));
    size_t k = 0;
    for (int t = 0; t < T; t++) {
        const uint32_t *o = full->offsets + (size_t)t * (full->n + 1);
        uint32_t *so = out->offsets + (size_t)t * (n + 1);
        for (long i = 0; i <= n; i++)
            so[i] = (uint32_t)(k + (o[lo + i] - o[lo]));
        size_t c = o[lo + n] - o[lo];
        memcpy(out->keys + k, full->keys + o[lo], c * sizeof(int64_t));
        k += c;
    }
    return NP_OK;
}

np_status np_batch_check_seq(const np_batch *b, int L, np_error *err) {
    if (L <= 0 || b->n_tables < 1) return NP_OK;
    for (long i = 0; i < b->n; i++)
        if (b->offsets[i + 1] - b->offsets[i] > (uint32_t)L)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "batch sample %ld: table 0 holds a sequence of %u keys, more than its "
                          "%d slots (seq-negatives + seq-len)",
                          i, b->offsets[i + 1] - b->offsets[i], L);
    return NP_OK;
}

np_status np_batch_add_negatives(np_batch *b, int K, int64_t rows0, uint64_t seed, np_error *err) {
    if (K <= 0 || b->n_tables < 1 || b->n < 1) return NP_OK;
    size_t n = (size_t)b->n, n1 = n + 1, add = n * (size_t)K;
    if (b->nnz + add > UINT32_MAX)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "a batch of %zu keys and %zu negatives overflows 32-bit offsets", b->nnz, add);
    np_status st = np_batch_reserve_keys(b, b->nnz + add, err);
    if (st) return st;
    uint32_t *o0 = b->offsets;
    size_t end0 = o0[n]; /* table 0's keys are [0, end0) */
    memmove(b->keys + end0 + add, b->keys + end0, (b->nnz - end0) * sizeof *b->keys);
    for (int t = 1; t < b->n_tables; t++)
        for (size_t i = 0; i < n1; i++)
            b->offsets[(size_t)t * n1 + i] += (uint32_t)add;
    /* table 0 from its last bag back: each bag moves right by i*K, then its negatives */
    for (size_t i = n; i-- > 0;) {
        uint32_t k0 = o0[i], len = o0[i + 1] - k0;
        int64_t *dst = b->keys + k0 + i * (size_t)K;
        memmove(dst + K, b->keys + k0, (size_t)len * sizeof *dst);
        uint64_t h = np_mix64(seed ^ 0x6e656773u);
        for (uint32_t k = 0; k < len; k++)
            h = np_mix64(h ^ (uint64_t)dst[K + (int)k]);
        for (int j = 0; j < K; j++)
            dst[j] = (int64_t)(np_rng_u64(h, NP_STREAM_SEQ_NEG, (uint64_t)j) % (uint64_t)rows0);
    }
    for (size_t i = 1; i < n1; i++)
        o0[i] += (uint32_t)(i * (size_t)K);
    b->nnz += add;
    return NP_OK;
}
