/* Counts, displacements and orders of the exchanges (xchg_plan.h): the arithmetic of
 * moving rows, never the moving itself. */
#include "codelets/kernels/xchg_plan.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/core/shard.h"
#include "codelets/kernels/kernels.h"


/* Keys (rows 0) or rows (1) of window w per rank, on the send or the receive side. */
static void totals(const int64_t *meta, int T, int W, int R, int recv, int w, int rows,
                   int64_t *tot) {
    int v0 = w < 0 ? 0 : w, v1 = w < 0 ? W : w + 1;
    for (int o = 0; o < R; o++) {
        int64_t s = 0;
        for (int v = v0; v < v1; v++)
            for (int t = 0; t < T; t++)
                s += meta[rows ? (recv ? NP_META_RR(T, W, R, o, v, t)
                                       : NP_META_SR(T, W, R, o, v, t))
                               : (recv ? NP_META_RC(T, W, R, o, v, t)
                                       : NP_META_SC(T, W, o, v, t))];
        tot[o] = s;
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

void np_xchg_plan_free(np_xchg_plan *p) {
    if (!p) return;
    free(p->mem);
    memset(p, 0, sizeof *p);
}

/* One pass over the requesters' received counts: requester q's keys in window w (nseg),
 * and where they start (seg), the sum of every earlier requester's keys of all windows
 * and q's own of the windows before w: a prefix sum, not a scan per requester. */
static void segments(const int64_t *meta, int T, int W, int R, int w, int64_t *seg,
                     int64_t *nseg) {
    int64_t acc = 0;
    for (int q = 0; q < R; q++) {
        const int64_t *c = meta + NP_META_RC(T, W, R, q, 0, 0); /* (W, T) of requester q */
        int64_t before = 0, mine = 0, after = 0;
        for (int v = 0; v < W; v++) {
            int64_t s = 0;
            for (int t = 0; t < T; t++)
                s += c[(size_t)v * (size_t)T + (size_t)t];
            if (v < w)
                before += s;
            else if (v == w)
                mine = s;
            else
                after += s;
        }
        seg[q] = acc + before;
        nseg[q] = mine;
        acc += before + mine + after;
    }
}

static int plan(const int64_t *meta, int T, int W, int R, int w, int rows, np_xchg_plan *p) {
    memset(p, 0, sizeof *p);
    int64_t *m = malloc(6 * (size_t)(R > 0 ? R : 1) * sizeof *m);
    if (!m) return -1;
    p->R = R;
    p->mem = m;
    p->send = m;
    p->sdispl = m + R;
    p->recv = m + 2 * (size_t)R;
    p->rdispl = m + 3 * (size_t)R;
    p->seg = m + 4 * (size_t)R;
    p->nseg = m + 5 * (size_t)R;
    /* rows go back along the keys' way: as many rows to q as q's keys there start */
    np_xchg_row_totals(meta, T, W, R, rows ? 1 : 0, w, p->send);
    np_xchg_row_totals(meta, T, W, R, rows ? 0 : 1, w, p->recv);
    segments(meta, T, W, R, w, p->seg, p->nseg);
    for (int q = 0; q < R; q++) {
        p->sdispl[q] = p->nsend;
        p->rdispl[q] = p->nrecv;
        p->nsend += p->send[q];
        p->nrecv += p->recv[q];
        p->pooled |= p->nseg[q] != (rows ? p->send[q] : p->recv[q]);
    }
    return 0;
}

/* The owner-side rows of requester q's segment: nseg[q] keys, n rows. A row is the keys
 * from one start to the next (every key, when n = nseg[q]). */
static int seg_pooled(const np_xchg_plan *p, int q, int64_t n) {
    return p->nseg[q] != n;
}

int np_xchg_plan_rows(const int64_t *meta, int T, int W, int R, int w, np_xchg_plan *p) {
    return plan(meta, T, W, R, w, 1, p);
}

int np_xchg_plan_grads(const int64_t *meta, int T, int W, int R, int w, np_xchg_plan *p) {
    return plan(meta, T, W, R, w, 0, p);
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
    /* the part's rows in all, and the bitmap's words: walked back from their ends */
    int64_t total = 0, words = 0;
    for (int o = 0; o < p->R; o++) {
        const uint32_t *b = bits + words;
        for (int64_t i = 0; i < p->recv[o]; i++)
            total += bit_of(b, i) == part;
        words += np_xchg_bit_words(p->recv[o]);
    }
    /* from the last row back: a packed row sits at or before its place */
    for (int o = p->R - 1; o >= 0; o--) {
        words -= np_xchg_bit_words(p->recv[o]);
        const uint32_t *b = bits + words;
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

void np_xchg_allreduce_plan_free(np_xchg_allreduce_plan *p) {
    if (!p) return;
    free(p->lo);
    memset(p, 0, sizeof *p);
}

int np_xchg_plan_allreduce(size_t n, int R, int me, np_xchg_allreduce_plan *p) {
    memset(p, 0, sizeof *p);
    p->rs = np_xchg_allreduce_rs(R);
    if (!p->rs) { /* the whole gradient to every other rank */
        p->nsend = (uint64_t)n * (uint64_t)(R - 1);
        return 0;
    }
    int64_t *m = malloc(3 * (size_t)R * sizeof *m);
    if (!m) return -1;
    p->lo = m;
    p->len = m + R;
    p->got = m + 2 * (size_t)R;
    np_xchg_slices(n, R, p->lo, p->len);
    for (int q = 0; q < R; q++)
        p->got[q] = p->len[me];
    /* the other ranks' slices in the reduce-scatter, then its own slice to each of them */
    p->nsend = (uint64_t)n - (uint64_t)p->len[me] + (uint64_t)p->len[me] * (uint64_t)(R - 1);
    return 0;
}

size_t np_xchg_allreduce_staging(size_t n, int R) {
    if (R < 1) R = 1;
    if (!np_xchg_allreduce_rs(R)) return n * (size_t)R;
    return ((n + (size_t)R - 1) / (size_t)R) * (size_t)R; /* R slices of ceil(n / R) */
}

size_t np_xchg_allreduce_room(size_t n, int R, int k) {
    return np_xchg_allreduce_staging(n, R) + (k > 1 ? 2 * n : 0);
}

/* ---------------------------------------------------------------- buffer sizing */

int np_xchg_caps_grow(np_xchg_caps *cap, const np_xchg_caps *need) {
    size_t *c[5] = {&cap->keys, &cap->recv_keys, &cap->recv, &cap->stage, &cap->win};
    const size_t n[5] = {need->keys, need->recv_keys, need->recv, need->stage, need->win};
    int grew = 0;
    for (int i = 0; i < 5; i++) {
        if (n[i] <= *c[i]) continue;
        size_t more = *c[i] + *c[i] / 4;
        *c[i] = more > n[i] ? more : n[i];
        grew = 1;
    }
    return grew;
}

uint64_t np_xchg_caps_bytes(const np_xchg_caps *c, int d, int W, int R, int ebuffers, int split,
                            int slots, int rsets) {
    uint64_t row = (uint64_t)d * sizeof(float), i64 = sizeof(int64_t);
    uint64_t stage = c->stage > c->win ? c->stage : c->win; /* sbuf, rbuf: both sides use them */
    uint64_t b = (uint64_t)slots * c->keys * i64;                    /* the slots' keys */
    b += (uint64_t)rsets * (3 * c->keys * i64                         /* uniq, pos, sendkeys */
                            + 2 * c->recv_keys * i64                  /* recvkeys, map */
                            + c->recv * i64);                         /* uniq_o */
    b += (uint64_t)ebuffers * c->recv * (row + sizeof(float));       /* E, Es */
    b += (uint64_t)W * 2 * c->win * row;                              /* Rin, grows */
    b += c->recv * row + 2 * stage * row;                             /* gE, sbuf, rbuf */
    b += (uint64_t)split * ((c->stage / 32 + (uint64_t)R) + (c->win / 32 + (uint64_t)R)) *
         sizeof(uint32_t); /* obits, rbits */
    return b;
}

void np_xchg_bound_scratch_free(np_xchg_bound_scratch *x) {
    if (!x) return;
    free(x->key);
    free(x->cnt);
    free(x->stamp);
    free(x->used);
    free(x->m);
    free(x->touched);
    memset(x, 0, sizeof *x);
}

/* Room for a table of n keys (slots >= 2 n) and R owners. */
static int bound_room(np_xchg_bound_scratch *x, size_t n, int R) {
    if (2 * n > x->slots) {
        size_t s = 64;
        while (s < 2 * n)
            s *= 2;
        int64_t *k = malloc(s * sizeof *k);
        uint32_t *c = malloc(s * sizeof *c), *st = calloc(s, sizeof *st);
        size_t *u = malloc(s / 2 * sizeof *u);
        if (!k || !c || !st || !u) {
            free(k), free(c), free(st), free(u);
            return -1;
        }
        free(x->key), free(x->cnt), free(x->stamp), free(x->used);
        x->key = k;
        x->cnt = c;
        x->stamp = st;
        x->used = u;
        x->slots = s;
        x->now = 0;
    }
    if (R > x->capR) {
        int64_t *m = calloc(2 * (size_t)R, sizeof *m);
        int *t = malloc((size_t)R * sizeof *t);
        if (!m || !t) {
            free(m);
            free(t);
            return -1;
        }
        free(x->m);
        free(x->touched);
        x->m = m;
        x->raw = m + R;
        x->touched = t;
        x->capR = R;
    }
    return 0;
}

int np_xchg_owner_bounds(const uint32_t *off, const int64_t *keys, long n, int T,
                         const int64_t *rows, int shard, int R, int W, int d, int exchange,
                         int seq, int64_t *out, np_xchg_bound_scratch *x) {
    memset(out, 0, 2 * (size_t)R * sizeof *out);
    if (bound_room(x, 1, R)) return -1;
    double row = 2.0 * (double)d * sizeof(float), key = sizeof(int64_t);
    for (int t = 0; t < T; t++) {
        const uint32_t *o = off + (size_t)t * (size_t)(n + 1);
        size_t nk = o[n] - o[0], nu = 0;
        if (!nk) continue;
        if (bound_room(x, nk, R)) {
            memset(out, 0, 2 * (size_t)R * sizeof *out);
            return -1;
        }
        /* count the table's keys: each distinct key once, with how often it occurs */
        if (++x->now == 0) { /* the stamps wrapped: clear them */
            memset(x->stamp, 0, x->slots * sizeof *x->stamp);
            x->now = 1;
        }
        size_t mask = x->slots - 1;
        int bits = 0;
        while (((size_t)1 << bits) < x->slots)
            bits++;
        for (size_t i = 0; i < nk; i++) {
            int64_t k = keys[o[0] + i];
            size_t h = (size_t)(((uint64_t)k * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits));
            while (x->stamp[h] == x->now && x->key[h] != k)
                h = (h + 1) & mask;
            if (x->stamp[h] != x->now) {
                x->stamp[h] = x->now;
                x->key[h] = k;
                x->cnt[h] = 0;
                x->used[nu++] = h;
            }
            x->cnt[h]++;
        }
        /* the rows-or-pooled rule (np_xchg_seg_pooled) lets a segment send more keys than
         * distinct ones only where its bags hold several keys */
        int mode = t == 0 && seq ? NP_EXCHANGE_ROWS : exchange;
        int may_pool = mode == NP_EXCHANGE_POOLED || (mode == NP_EXCHANGE_AUTO && R > 1);
        uint32_t h = 0;
        for (long s = 0; may_pool && s < n; s++)
            if (o[s + 1] - o[s] > h) h = o[s + 1] - o[s];
        double f = may_pool && h > 1 ? (key + row) / (key + row / h) : 1;
        if (mode == NP_EXCHANGE_POOLED) f = 1e300; /* pooled sends every key of the bags */
        int nt = 0;
        for (size_t u = 0; u < nu; u++) {
            int64_t k = x->key[x->used[u]], c = x->cnt[x->used[u]];
            if (k < 0 || k >= rows[t]) continue; /* route refuses it */
            int ow = np_shard_owner_in((np_shard)shard, R, T, t, k);
            if (!x->m[ow] && !x->raw[ow]) x->touched[nt++] = ow;
            x->m[ow] += c < W ? c : W;
            x->raw[ow] += c;
            /* a distinct row of table t; forced pooled, a row a bag, which has a key */
            out[2 * (size_t)ow + 1] += mode == NP_EXCHANGE_POOLED ? c : 1;
        }
        for (int i = 0; i < nt; i++) {
            int ow = x->touched[i];
            double pooled = f * (double)x->m[ow]; /* >= m: f >= 1 */
            out[2 * (size_t)ow] += f <= 1 ? x->m[ow]
                                   : pooled >= (double)x->raw[ow] ? x->raw[ow]
                                                                  : (int64_t)pooled + 1;
            x->m[ow] = x->raw[ow] = 0;
        }
    }
    return 0;
}

static int cmp_u32_desc(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a < b) - (a > b);
}

int np_xchg_window_keys_bound(const uint32_t *off, long n, int T, int W, size_t nnz, size_t *out) {
    *out = nnz;
    if (W <= 1) return 0;
    uint32_t *cnt = calloc((size_t)n + 1, sizeof *cnt);
    if (!cnt) return -1;
    for (int t = 0; t < T; t++) {
        const uint32_t *o = off + (size_t)t * (size_t)(n + 1);
        for (long s = 0; s < n; s++)
            cnt[s] += o[s + 1] - o[s];
    }
    qsort(cnt, (size_t)n, sizeof *cnt, cmp_u32_desc);
    size_t sum = 0;
    for (long s = 0; s < (n + W - 1) / W; s++)
        sum += cnt[s];
    free(cnt);
    if (sum < nnz) *out = sum;
    return 0;
}
