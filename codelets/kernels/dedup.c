/* Key dedup for routing: sorted distinct keys plus, for each key, its slot among them.
 * Sort-based (LSD radix on (key, position) pairs). Not here: which rank owns a key. */
#include "codelets/kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

typedef struct key_pos {
    uint64_t key; /* the key's bits with the sign bit flipped: unsigned order = signed order */
    size_t pos;   /* where it was in keys */
} key_pos;

#define RADIX_BITS 8
#define RADIX_BUCKETS (1u << RADIX_BITS)
#define RADIX_PASSES (64 / RADIX_BITS)

/* Stable LSD radix sort of a[0..n) by key, using tmp (n) as the other buffer; returns the
 * buffer that holds the result. Passes whose digit is the same for every key are skipped,
 * so table-row keys (small, non-negative) cost about three passes instead of eight.
 * Needs n >= 1. */
static key_pos *radix_sort(key_pos *a, key_pos *tmp, size_t n) {
    size_t count[RADIX_PASSES][RADIX_BUCKETS]; /* 16 KiB: per-pass digit histograms */
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < RADIX_PASSES; p++)
            count[p][(a[i].key >> (p * RADIX_BITS)) & (RADIX_BUCKETS - 1)]++;
    for (int p = 0; p < RADIX_PASSES; p++) {
        size_t *c = count[p];
        if (c[(a[0].key >> (p * RADIX_BITS)) & (RADIX_BUCKETS - 1)] == n) continue;
        size_t start = 0; /* bucket counts -> first output slot of each bucket */
        for (unsigned b = 0; b < RADIX_BUCKETS; b++) {
            size_t cnt = c[b];
            c[b] = start;
            start += cnt;
        }
        for (size_t i = 0; i < n; i++)
            tmp[c[(a[i].key >> (p * RADIX_BITS)) & (RADIX_BUCKETS - 1)]++] = a[i];
        key_pos *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

int np_keys_dedup(const int64_t *keys, size_t n, int64_t *uniq, size_t *n_uniq, int64_t *pos) {
    /* keys: (n); uniq: room for (n); pos: (n) */
    *n_uniq = 0;
    if (n == 0) return 0; /* before malloc: malloc(0) may return NULL */
    if (n > SIZE_MAX / (2 * sizeof(key_pos))) return -1;
    key_pos *buf = malloc(2 * n * sizeof *buf); /* (2n): the sort's two buffers */
    if (!buf) return -1;
    for (size_t i = 0; i < n; i++) {
        buf[i].key = (uint64_t)keys[i] ^ (UINT64_C(1) << 63);
        buf[i].pos = i;
    }
    const key_pos *sorted = radix_sort(buf, buf + n, n);
    /* The output depends only on the key values, not on how ties were ordered. */
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || sorted[i].key != sorted[i - 1].key) uniq[u++] = keys[sorted[i].pos];
        pos[sorted[i].pos] = (int64_t)(u - 1);
    }
    *n_uniq = u;
    free(buf);
    return 0;
}
