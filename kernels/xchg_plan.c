/* Counts, displacements and orders of the exchanges (xchg_plan.h): the arithmetic of
 * moving rows, never the moving itself. */
#include "kernels/xchg_plan.h"

#include <stdlib.h>
#include <string.h>


/* Keys (rows 0) or rows (1) of window w per rank, on the send or the receive side. */
static void totals(const int64_t *meta, int T, int W, int R, int recv, int w, int rows,
                   int64_t *tot) {
    for (int o = 0; o < R; o++) {
        tot[o] = 0;
        for (int v = 0; v < W; v++)
            if (w < 0 || v == w)
                for (int t = 0; t < T; t++)
                    tot[o] += meta[rows ? (recv ? NP_META_RR(T, W, R, o, v, t)
                                                : NP_META_SR(T, W, R, o, v, t))
                                        : (recv ? NP_META_RC(T, W, R, o, v, t)
                                                : NP_META_SC(T, W, o, v, t))];
    }
}

void np_xchg_totals(const int64_t *meta, int T, int W, int R, int recv, int w, int64_t *tot) {
    totals(meta, T, W, R, recv, w, 0, tot);
}

void np_xchg_row_totals(const int64_t *meta, int T, int W, int R, int recv, int w, int64_t *tot) {
    totals(meta, T, W, R, recv, w, 1, tot);
}

int64_t np_xchg_recv_start(const int64_t *meta, int T, int W, int R, int q, int w) {
    int64_t s = 0;
    for (int p = 0; p <= q; p++)
        for (int v = 0; v < (p < q ? W : w); v++)
            for (int t = 0; t < T; t++)
                s += meta[NP_META_RC(T, W, R, p, v, t)];
    return s;
}

static void plan(const int64_t *meta, int T, int W, int R, int w, int rows, np_xchg_plan *p) {
    memset(p, 0, sizeof *p);
    p->R = R;
    /* rows go back along the keys' way: as many rows to q as q's keys there start */
    np_xchg_row_totals(meta, T, W, R, rows ? 1 : 0, w, p->send);
    np_xchg_row_totals(meta, T, W, R, rows ? 0 : 1, w, p->recv);
    int64_t keys[NP_XCHG_MAX_RANKS];
    np_xchg_totals(meta, T, W, R, 1, w, keys);
    for (int q = 0; q < R; q++) {
        p->sdispl[q] = p->nsend;
        p->rdispl[q] = p->nrecv;
        p->nsend += p->send[q];
        p->nrecv += p->recv[q];
        p->seg[q] = np_xchg_recv_start(meta, T, W, R, q, w);
        p->nseg[q] = keys[q];
        p->pooled |= keys[q] != (rows ? p->send[q] : p->recv[q]);
    }
}

/* The owner-side rows of requester q's segment: nseg[q] keys, n rows. A row is the keys
 * from one start to the next (every key, when n = nseg[q]). */
static int seg_pooled(const np_xchg_plan *p, int q, int64_t n) {
    return p->nseg[q] != n;
}

void np_xchg_plan_rows(const int64_t *meta, int T, int W, int R, int w, np_xchg_plan *p) {
    plan(meta, T, W, R, w, 1, p);
}

void np_xchg_plan_grads(const int64_t *meta, int T, int W, int R, int w, np_xchg_plan *p) {
    plan(meta, T, W, R, w, 0, p);
}

/* Row r of segment q (keys [k0, k1) of it) into dst: a copy, or the keys' E rows summed. */
static void pack_one(const int64_t *mp, const int64_t *kp, int64_t nk, int pooled, int64_t *k,
                     const float *E, size_t d, float *dst) {
    memcpy(dst, E + (size_t)mp[*k] * d, d * sizeof(float));
    ++*k;
    if (!pooled) return;
    for (; *k < nk && !np_xchg_key_starts(kp[*k]); ++*k) {
        const float *e = E + (size_t)mp[*k] * d;
        for (size_t j = 0; j < d; j++)
            dst[j] += e[j];
    }
}

void np_xchg_pack_rows(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const float *E, size_t d, float *sbuf) {
    for (int q = 0; q < p->R; q++) {
        const int64_t *mp = map + p->seg[q], *kp = keys ? keys + p->seg[q] : NULL;
        float *dst = sbuf + (size_t)p->sdispl[q] * d;
        if (!seg_pooled(p, q, p->send[q])) { /* a row a key: copies */
            for (int64_t i = 0; i < p->send[q]; i++)
                memcpy(dst + (size_t)i * d, E + (size_t)mp[i] * d, d * sizeof(float));
            continue;
        }
        for (int64_t i = 0, k = 0; i < p->send[q]; i++)
            pack_one(mp, kp, p->nseg[q], 1, &k, E, d, dst + (size_t)i * d);
    }
}

void np_xchg_sum_grads(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const float *rbuf, size_t d, float *gE) {
    for (int q = 0; q < p->R; q++) {
        const int64_t *mp = map + p->seg[q], *kp = keys ? keys + p->seg[q] : NULL;
        const float *src = rbuf + (size_t)p->rdispl[q] * d;
        int pooled = seg_pooled(p, q, p->recv[q]);
        /* key i adds the row its row start received: the row itself in a rows segment, the
         * bag's pooled gradient in a pooled one */
        for (int64_t i = 0, r = -1; i < p->nseg[q]; i++) {
            if (!pooled || np_xchg_key_starts(kp[i])) r++;
            const float *s = src + (size_t)r * d;
            float *g = gE + (size_t)mp[i] * d;
            for (size_t j = 0; j < d; j++)
                g[j] += s[j];
        }
    }
}

void np_xchg_mark_shared(const int64_t *uprev, const int64_t *mprev, const int64_t *ucur,
                         const int64_t *mcur, int T, uint8_t *shared) {
    memset(shared, 0, (size_t)mcur[NP_META_UCNT(T)]);
    for (int t = 0; t < T; t++) { /* the merge of sync_cpu (codelets/rows.c) */
        int64_t i = mprev[NP_META_UCNT(t)], ie = mprev[NP_META_UCNT(t + 1)];
        int64_t j = mcur[NP_META_UCNT(t)], je = mcur[NP_META_UCNT(t + 1)];
        while (i < ie && j < je) {
            if (uprev[i] < ucur[j]) {
                i++;
            } else if (uprev[i] > ucur[j]) {
                j++;
            } else {
                shared[j++] = 1;
                i++;
            }
        }
    }
}

static int64_t seg_rows(const np_xchg_plan *p, int side, int q) {
    return side ? p->recv[q] : p->send[q];
}

static int bit_of(const uint32_t *bits, int64_t i) {
    return (int)(bits[i / 32] >> (i % 32) & 1u);
}

void np_xchg_bit_counts(const np_xchg_plan *p, int side, int64_t *words) {
    for (int q = 0; q < p->R; q++)
        words[q] = np_xchg_bit_words(seg_rows(p, side, q));
}

void np_xchg_mark_rows(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const uint8_t *shared, uint32_t *bits) {
    for (int q = 0; q < p->R; q++) {
        const int64_t *mp = map + p->seg[q], *kp = keys ? keys + p->seg[q] : NULL;
        int64_t n = p->send[q];
        int pooled = seg_pooled(p, q, n);
        memset(bits, 0, (size_t)np_xchg_bit_words(n) * sizeof *bits);
        for (int64_t i = 0, r = -1; i < p->nseg[q]; i++) {
            if (!pooled || np_xchg_key_starts(kp[i])) r++;
            bits[r / 32] |= (uint32_t)shared[mp[i]] << (r % 32);
        }
        bits += np_xchg_bit_words(n);
    }
}

void np_xchg_part_counts(const np_xchg_plan *p, const uint32_t *bits, int side, int part,
                         int64_t *count) {
    for (int q = 0; q < p->R; q++) {
        int64_t n = seg_rows(p, side, q), c = 0;
        for (int64_t i = 0; i < n; i++)
            c += bit_of(bits, i) == part;
        count[q] = c;
        bits += np_xchg_bit_words(n);
    }
}

void np_xchg_pack_part(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const float *E, size_t d, const uint32_t *bits, int part, float *sbuf) {
    for (int q = 0; q < p->R; q++) {
        const int64_t *mp = map + p->seg[q], *kp = keys ? keys + p->seg[q] : NULL;
        int pooled = seg_pooled(p, q, p->send[q]);
        for (int64_t i = 0, k = 0; i < p->send[q]; i++) {
            if (bit_of(bits, i) != part) { /* skip the row's keys */
                for (k++; pooled && k < p->nseg[q] && !np_xchg_key_starts(kp[k]); k++)
                    ;
                continue;
            }
            pack_one(mp, kp, p->nseg[q], pooled, &k, E, d, sbuf);
            sbuf += d;
        }
        bits += np_xchg_bit_words(p->send[q]);
    }
}

void np_xchg_place_part(const np_xchg_plan *p, const uint32_t *bits, int part, const float *src,
                        size_t d, float *Rin) {
    int64_t total = 0, words = 0, cnt[NP_XCHG_MAX_RANKS], off[NP_XCHG_MAX_RANKS];
    np_xchg_part_counts(p, bits, 1, part, cnt);
    for (int o = 0; o < p->R; o++) {
        off[o] = words;
        words += np_xchg_bit_words(p->recv[o]);
        total += cnt[o];
    }
    /* from the last row back: a packed row sits at or before its place */
    for (int o = p->R - 1; o >= 0; o--) {
        const uint32_t *b = bits + off[o];
        for (int64_t i = p->recv[o] - 1; i >= 0; i--) {
            if (bit_of(b, i) != part) continue;
            float *dst = Rin + (size_t)(p->rdispl[o] + i) * d;
            const float *from = src + (size_t)--total * d;
            if (dst != from) memmove(dst, from, d * sizeof(float));
        }
    }
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

int np_xchg_segments_distinct(const np_xchg_plan *p, const int64_t *map) {
    for (int q = 0; q < p->R; q++) {
        int64_t n = p->nseg[q];
        if (n < 2) continue;
        int64_t *s = malloc((size_t)n * sizeof *s);
        if (!s) return 0;
        memcpy(s, map + p->seg[q], (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, cmp_i64);
        int ok = 1;
        for (int64_t i = 1; i < n && ok; i++)
            ok = s[i] != s[i - 1];
        free(s);
        if (!ok) return 0;
    }
    return 1;
}

int np_xchg_allreduce_rs(int R) {
    const char *f = getenv("NP_ALLREDUCE");
    if (f && !strcmp(f, "allgather")) return 0;
    if (f && !strcmp(f, "rs")) return R > 1;
    return R > 2;
}

void np_xchg_slices(size_t n, int R, int64_t *lo, int64_t *len) {
    for (int q = 0; q < R; q++) {
        lo[q] = (int64_t)(n * (size_t)q / (size_t)R);
        len[q] = (int64_t)(n * (size_t)(q + 1) / (size_t)R) - lo[q];
    }
}

void np_xchg_plan_allreduce(size_t n, int R, int me, np_xchg_allreduce_plan *p) {
    p->rs = np_xchg_allreduce_rs(R);
    if (!p->rs) { /* the whole gradient to every other rank */
        p->nsend = (uint64_t)n * (uint64_t)(R - 1);
        return;
    }
    np_xchg_slices(n, R, p->lo, p->len);
    for (int q = 0; q < R; q++)
        p->got[q] = p->len[me];
    /* the other ranks' slices in the reduce-scatter, then its own slice to each of them */
    p->nsend = (uint64_t)n - (uint64_t)p->len[me] + (uint64_t)p->len[me] * (uint64_t)(R - 1);
}
