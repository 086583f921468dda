/* Key-centric sample clustering (Frozen-Window Pipelining, docs/pipeline.md): assigns the samples of
 * a batch to W balanced windows so that samples sharing keys land together, which lowers
 * the sum over windows of distinct keys (the exchange volume). Also the volume count used
 * to judge it. Not here: the windows' exchanges (the engine).
 *
 * Algorithm (docs/pipeline.md "Key-centric clustering"): every distinct (table, key) of the
 * batch gets a bitmask of the windows that already hold it. Samples are placed one by one,
 * in batch order; a sample's score for window w is the number of its keys already in w
 * (summed over the set bits of its keys' masks); it goes to the non-full window with the
 * highest score, ties to the emptiest, then the lowest index; then its keys' masks get bit
 * w. Capacities are G/W or G/W+1, so windows are balanced to one sample. Then up to
 * NP_CLUSTER_ROUNDS rounds of k-means-like re-placement (refine) undo the greedy's early
 * mistakes. The result is kept only if it moves fewer rows than contiguous windows.
 * Cost: a few sorts of the batch's keys plus O(nnz * W) per greedy pass and round;
 * W <= 64. */
#include <stdlib.h>
#include <string.h>

#include "codelets/kernels/kernels.h"

#define NP_CLUSTER_ROUNDS 4 /* refinement rounds at most; each stops early if no gain */

/* The batch's (table, key) pairs as one int64 each: table in the high bits. */
static int64_t *pair_keys(const uint32_t *off, const int64_t *keys, long n, int T, size_t *nnz) {
    size_t total = off[(size_t)T * (n + 1) - 1] - off[0];
    int64_t *pk = malloc((total + 1) * sizeof *pk);
    if (!pk) return NULL;
    size_t k = 0;
    for (int t = 0; t < T; t++) {
        const uint32_t *o = off + (size_t)t * (n + 1);
        for (uint32_t i = o[0]; i < o[n]; i++)
            pk[k++] = ((int64_t)t << 40) | keys[i];
    }
    *nnz = k;
    return pk;
}

/* Distinct (key, window) pairs: the rows the windows move. */
static long volume_of(const uint32_t *cnt, size_t nu, int W) {
    long v = 0;
    for (size_t i = 0; i < nu * (size_t)W; i++)
        v += cnt[i] > 0;
    return v;
}

typedef struct pref {
    long s, margin;
} pref;

static int by_margin(const void *x, const void *y) {
    const pref *a = x, *b = y;
    if (a->margin != b->margin) return a->margin < b->margin ? 1 : -1;
    return (a->s > b->s) - (a->s < b->s);
}

/* Refinement after the greedy, k-means style: with every other sample where the last
 * assignment put it, each sample scores each window (its keys that window would still
 * hold without it); samples then choose again, the most decided first (largest gap
 * between their best and second-best window), each taking its best window with room. A
 * round is kept only if it lowers the volume. cnt (nu, W): each window's occurrences of
 * each distinct key. */
static int refine(const uint32_t *off, const int64_t *pos, size_t base, long n, int T, int W,
                  size_t nu, long *win, const long *bounds, int rounds) {
    uint32_t *cnt = calloc(nu * (size_t)W + 1, sizeof *cnt);
    long *score = malloc(((size_t)n * W + 1) * sizeof *score);
    long *next = malloc(((size_t)n + 1) * sizeof *next);
    pref *order = malloc(((size_t)n + 1) * sizeof *order);
    int rc = -1;
    if (!cnt || !score || !next || !order) goto out;
#define KEYS_OF(s, body)                                                                           \
    for (int t = 0; t < T; t++) {                                                                  \
        const uint32_t *o = off + (size_t)t * (n + 1);                                             \
        for (uint32_t i = o[s]; i < o[(s) + 1]; i++) {                                             \
            size_t u = (size_t)pos[i - base];                                                      \
            body;                                                                                  \
        }                                                                                          \
    }
    for (long s = 0; s < n; s++)
        KEYS_OF(s, cnt[u * W + win[s]]++);
    long vol = volume_of(cnt, nu, W);
    for (int r = 0; r < rounds; r++) {
        for (long s = 0; s < n; s++) {
            long *sc = score + (size_t)s * W;
            memset(sc, 0, (size_t)W * sizeof *sc);
            KEYS_OF(s, {
                const uint32_t *c = cnt + u * W;
                for (int w = 0; w < W; w++)
                    sc[w] += c[w] > (w == win[s]);
            });
            long b1 = -1, b2 = -1;
            for (int w = 0; w < W; w++) {
                if (sc[w] > b1) {
                    b2 = b1;
                    b1 = sc[w];
                } else if (sc[w] > b2)
                    b2 = sc[w];
            }
            order[s] = (pref){s, b1 - b2};
        }
        qsort(order, (size_t)n, sizeof *order, by_margin);
        long fill[64] = {0};
        for (long k = 0; k < n; k++) {
            long s = order[k].s, *sc = score + (size_t)s * W;
            int best = -1;
            for (int w = 0; w < W; w++)
                if (fill[w] < bounds[w + 1] - bounds[w] && (best < 0 || sc[w] > sc[best]))
                    best = w;
            next[s] = best;
            fill[best]++;
        }
        memset(cnt, 0, nu * (size_t)W * sizeof *cnt);
        for (long s = 0; s < n; s++)
            KEYS_OF(s, cnt[u * W + next[s]]++);
        long v = volume_of(cnt, nu, W);
        if (v >= vol) break; /* win stays the better one */
        vol = v;
        memcpy(win, next, (size_t)n * sizeof *win);
    }
#undef KEYS_OF
    rc = 0;
out:
    free(cnt);
    free(score);
    free(next);
    free(order);
    return rc;
}

int np_cluster_windows(const uint32_t *off, const int64_t *keys, long n, int T, int W, int by_keys,
                       long *perm, long *bounds) {
    if (W < 1 || W > 64 || n < 0) return -1;
    for (int w = 0; w <= W; w++)
        bounds[w] = n * w / W;
    if (!by_keys || W == 1 || n == 0) { /* contiguous windows in batch order */
        for (long s = 0; s < n; s++)
            perm[s] = s;
        return 0;
    }
    size_t nnz = 0, nu = 0;
    int64_t *pk = pair_keys(off, keys, n, T, &nnz);
    int64_t *uniq = pk ? malloc((nnz + 1) * sizeof *uniq) : NULL;
    int64_t *pos = uniq ? malloc((nnz + 1) * sizeof *pos) : NULL;
    uint64_t *mask = NULL;
    long *win = malloc(((size_t)n + 1) * sizeof *win);
    int rc = -1;
    if (!pos || !win || np_keys_dedup(pk, nnz, uniq, &nu, pos)) goto out;
    if (!(mask = calloc(nu + 1, sizeof *mask))) goto out;
    /* a key of one sample costs one row wherever the sample goes: only shared keys steer */
    uint32_t *freq = calloc(nu + 1, sizeof *freq);
    if (!freq) goto out;
    for (size_t i = 0; i < nnz; i++)
        freq[pos[i]]++;
    /* where sample s's keys sit in pos: table t's keys of s are at off_t[s] .. off_t[s+1]
     * in `keys`, which pair_keys laid out table after table, so pos index = that - off[0] */
    long fill[64] = {0};
    for (long s = 0; s < n; s++) {
        long score[64] = {0};
        for (int t = 0; t < T; t++) {
            const uint32_t *o = off + (size_t)t * (n + 1);
            for (uint32_t i = o[s]; i < o[s + 1]; i++) {
                int64_t u = pos[i - off[0]];
                if (freq[u] < 2) continue;
                uint64_t m = mask[u];
                while (m) {
                    int w = __builtin_ctzll(m);
                    score[w]++;
                    m &= m - 1;
                }
            }
        }
        int best = -1;
        for (int w = 0; w < W; w++) {
            if (fill[w] >= bounds[w + 1] - bounds[w]) continue; /* full */
            if (best < 0 || score[w] > score[best] ||
                (score[w] == score[best] && fill[w] < fill[best]))
                best = w;
        }
        win[s] = best;
        fill[best]++;
        for (int t = 0; t < T; t++) {
            const uint32_t *o = off + (size_t)t * (n + 1);
            for (uint32_t i = o[s]; i < o[s + 1]; i++)
                mask[pos[i - off[0]]] |= 1ULL << best;
        }
    }
    free(freq);
    freq = NULL;
    /* rounds of re-placement that lower the volume; skipped when the key counts would
     * not fit in 64 MiB */
    if (nu * (size_t)W <= ((size_t)16 << 20) &&
        refine(off, pos, off[0], n, T, W, nu, win, bounds, NP_CLUSTER_ROUNDS))
        goto out;
    /* perm: window 0's samples first, each window in batch order */
    long next[65];
    for (int w = 0; w <= W; w++)
        next[w] = bounds[w];
    for (long s = 0; s < n; s++)
        perm[next[win[s]]++] = s;
    /* the greedy is not optimal: keep contiguous windows when they move fewer rows (with
     * many independent tables there is little to gain and the greedy can lose a little) */
    long keyed = np_window_volume(off, keys, n, T, W, perm, bounds);
    for (long s = 0; s < n; s++)
        win[s] = s; /* reuse win as the contiguous permutation */
    long plain = np_window_volume(off, keys, n, T, W, win, bounds);
    if (keyed < 0 || plain < 0) goto out;
    if (plain <= keyed) memcpy(perm, win, (size_t)n * sizeof *perm);
    rc = 0;
out:
    free(pk);
    free(uniq);
    free(pos);
    free(mask);
    free(win);
    return rc;
}

void np_permute_samples(long n, int nd, int T, const long *perm, const float *dense,
                        const float *label, const uint32_t *off, const int64_t *keys,
                        float *dense_o, float *label_o, uint32_t *off_o, int64_t *keys_o) {
    for (long j = 0; j < n; j++) {
        long s = perm[j];
        memcpy(dense_o + (size_t)j * nd, dense + (size_t)s * nd, (size_t)nd * sizeof *dense);
        label_o[j] = label[s];
    }
    uint32_t acc = off[0];
    for (int t = 0; t < T; t++) {
        const uint32_t *o = off + (size_t)t * (n + 1);
        uint32_t *oo = off_o + (size_t)t * (n + 1);
        for (long j = 0; j < n; j++) {
            oo[j] = acc;
            uint32_t b = o[perm[j]], c = o[perm[j] + 1] - b;
            memcpy(keys_o + acc, keys + b, c * sizeof *keys);
            acc += c;
        }
        oo[n] = acc;
    }
}

long np_window_volume(const uint32_t *off, const int64_t *keys, long n, int T, int W,
                      const long *perm, const long *bounds) {
    size_t total = off[(size_t)T * (n + 1) - 1] - off[0];
    int64_t *pk = malloc((total + 1) * sizeof *pk);
    int64_t *tmp = malloc((total + 1) * sizeof *tmp), *pos = malloc((total + 1) * sizeof *pos);
    long sum = -1;
    if (!pk || !tmp || !pos) goto out;
    sum = 0;
    for (int w = 0; w < W; w++) {
        size_t k = 0, nu = 0;
        for (long j = bounds[w]; j < bounds[w + 1]; j++) {
            long s = perm[j];
            for (int t = 0; t < T; t++) {
                const uint32_t *o = off + (size_t)t * (n + 1);
                for (uint32_t i = o[s]; i < o[s + 1]; i++)
                    pk[k++] = ((int64_t)t << 40) | keys[i];
            }
        }
        if (np_keys_dedup(pk, k, tmp, &nu, pos)) {
            sum = -1;
            goto out;
        }
        sum += (long)nu;
    }
out:
    free(pk);
    free(tmp);
    free(pos);
    return sum;
}
