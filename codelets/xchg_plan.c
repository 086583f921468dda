/* Counts, displacements and orders of the exchanges (xchg_plan.h): the arithmetic of
 * moving rows, never the moving itself. */
#include "codelets/xchg_plan.h"

#include <stdlib.h>
#include <string.h>

#include "codelets/cl.h"

void np_xchg_totals(const int64_t *meta, int T, int W, int R, int recv, int w, int64_t *tot) {
    for (int o = 0; o < R; o++) {
        tot[o] = 0;
        for (int v = 0; v < W; v++)
            if (w < 0 || v == w)
                for (int t = 0; t < T; t++)
                    tot[o] += meta[recv ? NP_META_RC(T, W, R, o, v, t) : NP_META_SC(T, W, o, v, t)];
    }
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
    /* rows go back along the keys' way: as many rows to q as keys came from q */
    np_xchg_totals(meta, T, W, R, rows ? 1 : 0, w, p->send);
    np_xchg_totals(meta, T, W, R, rows ? 0 : 1, w, p->recv);
    for (int q = 0; q < R; q++) {
        p->sdispl[q] = p->nsend;
        p->rdispl[q] = p->nrecv;
        p->nsend += p->send[q];
        p->nrecv += p->recv[q];
        p->seg[q] = np_xchg_recv_start(meta, T, W, R, q, w);
        p->nseg[q] = rows ? p->send[q] : p->recv[q];
    }
}

void np_xchg_plan_rows(const int64_t *meta, int T, int W, int R, int w, np_xchg_plan *p) {
    plan(meta, T, W, R, w, 1, p);
}

void np_xchg_plan_grads(const int64_t *meta, int T, int W, int R, int w, np_xchg_plan *p) {
    plan(meta, T, W, R, w, 0, p);
}

void np_xchg_pack_rows(const np_xchg_plan *p, const int64_t *map, const float *E, size_t d,
                       float *sbuf) {
    for (int q = 0; q < p->R; q++) {
        const int64_t *mp = map + p->seg[q];
        float *dst = sbuf + (size_t)p->sdispl[q] * d;
        for (int64_t i = 0; i < p->send[q]; i++)
            memcpy(dst + (size_t)i * d, E + (size_t)mp[i] * d, d * sizeof(float));
    }
}

void np_xchg_sum_grads(const np_xchg_plan *p, const int64_t *map, const float *rbuf, size_t d,
                       float *gE) {
    for (int q = 0; q < p->R; q++) {
        const int64_t *mp = map + p->seg[q];
        const float *src = rbuf + (size_t)p->rdispl[q] * d;
        for (int64_t i = 0; i < p->recv[q]; i++, src += d) {
            float *g = gE + (size_t)mp[i] * d;
            for (size_t j = 0; j < d; j++)
                g[j] += src[j];
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
