/* Exchange volumes at any rank count (nestpipe/scale.h, docs/scale.md "What N ranks would
 * exchange"): each rank's slice of each global batch is routed as the route codelet routes
 * it (codelets/exchange.c), by the same rules: the sharding (runtime/core/shard.h), the windows and
 * their clustering (codelets/kernels/cluster.c), the form of each segment (np_xchg_seg_pooled). Only
 * the counts are kept, so no rank limit applies; for the first batch also each owner's
 * rows, for the buffers a rank would size (np_xchg_owner_bounds, against exact sizes). */
#include <stdlib.h>
#include <string.h>

#include "runtime/core/shard.h"
#include "runtime/core/util.h"
#include "runtime/data/data.h"
#include "codelets/kernels/kernels.h"
#include "codelets/kernels/xchg_plan.h"
#include "nestpipe/scale.h"

void np_route_stats_free(np_route_stats *s) {
    if (!s) return;
    free(s->keys);
    free(s->rows);
    free(s->rows_window);
    free(s->buffer_bytes); /* buffer_exact is its second half */
    memset(s, 0, sizeof *s);
}

uint64_t np_route_stats_rank(const np_route_stats *s, const uint64_t *m, int r, int recv) {
    uint64_t sum = 0;
    for (int q = 0; q < s->ranks; q++)
        sum += recv ? m[(size_t)q * s->ranks + r] : m[(size_t)r * s->ranks + q];
    return sum;
}

/* Scratch of one rank's routing: the counts per owner of one (window, table) and the
 * owners it touched, the dedup's arrays, the clustered batch. */
typedef struct scratch {
    int64_t *cu, *cn, *cg; /* (ranks) distinct keys, keys, bags per owner */
    int *touched, n_touched;
    int64_t *uniq, *pos;
    size_t cap_keys;
    long *perm;
    long cap_n;
    np_batch clustered;
    /* the first batch (first 1): what each owner is sent, for the buffers' figures */
    int first;
    int64_t *recv_keys;  /* (ranks) keys it receives, its own included */
    int64_t *win_rows;   /* (ranks, windows) rows it returns in each window */
    int64_t **rows;      /* (ranks) the (table, row) pairs it is asked for, repeats and all */
    size_t *nrows, *caprows;
    int64_t *bound;      /* (2 ranks) one rank's np_xchg_owner_bounds, then their sum */
    int64_t *bound_sum;  /* (2 ranks) */
    np_xchg_bound_scratch bx;
} scratch;

static void scratch_free(scratch *x, int ranks) {
    for (int o = 0; x->rows && o < ranks; o++)
        free(x->rows[o]);
    free(x->rows);
    free(x->nrows);
    free(x->recv_keys);
    free(x->bound);
    np_xchg_bound_scratch_free(&x->bx);
    free(x->cu);
    free(x->touched);
    free(x->uniq);
    free(x->pos);
    free(x->perm);
    np_batch_free(&x->clustered);
}

static void touch(scratch *x, int o) {
    if (!x->cu[o] && !x->cn[o]) x->touched[x->n_touched++] = o;
}

/* One (window, table) of rank r: the bags of samples [s0, s1) of b's table t. */
static np_status route_segment(const np_config *cfg, np_route_stats *st, scratch *x,
                               const np_batch *b, int r, int w, int t, long s0, long s1,
                               np_error *err) {
    int R = st->ranks;
    const uint32_t *off = b->offsets + (size_t)t * (b->n + 1);
    size_t n = off[s1] - off[s0];
    const int64_t *keys = b->keys + off[s0];
    if (n > x->cap_keys) {
        size_t cap = n;
        if (np_grow((void **)&x->uniq, &x->cap_keys, cap, sizeof *x->uniq, "route stats", err))
            return NP_STATUS_NO_MEMORY;
        free(x->pos);
        if (!(x->pos = np_alloc(x->cap_keys, sizeof *x->pos, "route stats", err)))
            return NP_STATUS_NO_MEMORY;
    }
    size_t nu = 0;
    if (n && np_keys_dedup(keys, n, x->uniq, &nu, x->pos))
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (route stats)");
    int64_t rows_t = np_config_rows(cfg, t);
    if (nu && (x->uniq[0] < 0 || x->uniq[nu - 1] >= rows_t))
        return np_err(err, NP_STATUS_BAD_INPUT, "route stats: a key of table %d is outside its %lld rows",
                      t, (long long)rows_t);
    x->n_touched = 0;
    for (size_t u = 0; u < nu; u++) {
        int o = np_shard_owner_in(cfg->shard, R, cfg->tables, t, x->uniq[u]);
        touch(x, o);
        x->cu[o]++;
        if (x->first) { /* the row it names, for the owner's distinct rows */
            if (x->nrows[o] == x->caprows[o] &&
                np_grow((void **)&x->rows[o], &x->caprows[o], x->nrows[o] + 1, sizeof **x->rows,
                        "route stats (rows)", err))
                return NP_STATUS_NO_MEMORY;
            x->rows[o][x->nrows[o]++] = (int64_t)t << 44 | x->uniq[u];
        }
    }
    /* a sequence's keys are positions, never summed: rows, as the route codelet sends them */
    np_exchange mode = t == 0 && cfg->seq_len > 0 ? NP_EXCHANGE_ROWS : cfg->exchange;
    int may_pool = mode == NP_EXCHANGE_POOLED || (mode == NP_EXCHANGE_AUTO && R > 1);
    for (long s = s0; may_pool && s < s1; s++)
        for (uint32_t k = off[s]; k < off[s + 1]; k++) {
            int o = np_shard_owner_in(cfg->shard, R, cfg->tables, t, b->keys[k]), seen = 0;
            for (uint32_t j = off[s]; j < k && !seen; j++) /* bags hold a few keys */
                seen = np_shard_owner_in(cfg->shard, R, cfg->tables, t, b->keys[j]) == o;
            x->cn[o]++;
            x->cg[o] += !seen;
        }
    for (int i = 0; i < x->n_touched; i++) {
        int o = x->touched[i];
        int pooled = np_xchg_seg_pooled((int)mode, o, r, x->cu[o], x->cn[o], x->cg[o],
                                        cfg->dim);
        if (x->first && x->cu[o]) { /* to every owner, this rank itself too */
            x->recv_keys[o] += pooled ? x->cn[o] : x->cu[o];
            x->win_rows[(size_t)o * st->windows + w] += pooled ? x->cg[o] : x->cu[o];
        }
        if (o != r && x->cu[o]) {
            int64_t sent_keys = pooled ? x->cn[o] : x->cu[o], rows = pooled ? x->cg[o] : x->cu[o];
            uint64_t row_bytes = (uint64_t)rows * (uint64_t)cfg->dim * sizeof(float);
            st->keys[(size_t)r * R + o] += (uint64_t)sent_keys * sizeof(int64_t);
            st->rows[(size_t)o * R + r] += row_bytes;
            st->rows_window[w] += row_bytes;
            st->segments++;
            st->pooled += (uint64_t)pooled;
        }
        x->cu[o] = x->cn[o] = x->cg[o] = 0;
    }
    return NP_OK;
}

/* Rank r's slice b of one batch, windows as the prefetch and route codelets form them. */
static np_status route_slice(const np_config *cfg, np_route_stats *st, scratch *x,
                             const np_batch *b, int r, np_error *err) {
    int W = st->windows;
    const np_batch *src = b;
    if (x->first) { /* what make_room bounds for this batch (samples' order is no matter) */
        int64_t rows[NP_MAX_TABLES];
        for (int t = 0; t < b->n_tables && t < NP_MAX_TABLES; t++)
            rows[t] = np_config_rows(cfg, t);
        if (np_xchg_owner_bounds(b->offsets, b->keys, b->n, b->n_tables, rows, (int)cfg->shard,
                                 st->ranks, W, cfg->dim, (int)cfg->exchange, cfg->seq_len > 0,
                                 x->bound, &x->bx))
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (route stats: bounds)");
        for (int o = 0; o < 2 * st->ranks; o++)
            x->bound_sum[o] += x->bound[o];
    }
    if (cfg->cluster && W > 1) {
        long bounds[65];
        if (b->n + 1 > x->cap_n) {
            free(x->perm);
            if (!(x->perm = np_alloc((size_t)b->n + 1, sizeof *x->perm, "route stats", err)))
                return NP_STATUS_NO_MEMORY;
            x->cap_n = b->n + 1;
        }
        np_batch *c = &x->clustered;
        np_status s = np_batch_reserve(c, b->n, b->n_dense, b->n_tables, err);
        if (!s) s = np_batch_reserve_keys(c, b->nnz, err);
        if (s) return s;
        if (np_cluster_windows(b->offsets, b->keys, b->n, b->n_tables, W, 1, x->perm, bounds))
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (route stats: clustering)");
        np_permute_samples(b->n, b->n_dense, b->n_tables, x->perm, b->dense, b->label, b->offsets,
                           b->keys, c->dense, c->label, c->offsets, c->keys);
        c->nnz = b->nnz;
        src = c;
    }
    for (int w = 0; w < W; w++)
        for (int t = 0; t < st->tables; t++) {
            np_status s = route_segment(cfg, st, x, src, r, w, t, src->n * w / W,
                                        src->n * (w + 1) / W, err);
            if (s) return s;
        }
    return NP_OK;
}

static int cmp_i64(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* Each rank's exchange buffers for the first batch: at the caps make_room takes from the
 * owners' bounds, and at the caps its actual counts need (received keys; the larger of its
 * distinct rows and the rows of its busiest window). The dual buffer and dbp's split rows
 * counted in (the most any pipeline holds); own: (2 ranks) each rank's keys, window bound. */
static np_status buffers(const np_config *cfg, np_route_stats *st, scratch *x,
                         const int64_t *own) {
    int R = st->ranks, W = st->windows, split = W < 2 ? W : 2;
    int64_t most = 0;
    for (int r = 0; r < R; r++)
        if (own[r] > most) most = own[r];
    for (int o = 0; o < R; o++) {
        int64_t owned = 0; /* the rows it holds: its distinct rows are no more */
        for (int t = 0; t < cfg->tables; t++)
            owned += np_shard_rows(cfg, t, o, np_config_rows(cfg, t));
        qsort(x->rows[o], x->nrows[o], sizeof *x->rows[o], cmp_i64);
        int64_t uo = 0, wmax = 0;
        for (size_t i = 0; i < x->nrows[o]; i++)
            uo += !i || x->rows[o][i] != x->rows[o][i - 1];
        for (int w = 0; w < W; w++)
            if (x->win_rows[(size_t)o * W + w] > wmax) wmax = x->win_rows[(size_t)o * W + w];
        np_xchg_caps mine = {.keys = (size_t)own[o], .win = (size_t)own[(size_t)R + o]};
        np_xchg_caps bound = mine, exact = mine;
        bound.recv_keys = (size_t)x->bound_sum[2 * o];
        bound.stage = (size_t)x->bound_sum[2 * o + 1];
        bound.recv = bound.stage < (size_t)owned ? bound.stage : (size_t)owned;
        exact.recv_keys = (size_t)x->recv_keys[o];
        exact.recv = (size_t)uo;
        exact.stage = (size_t)wmax;
        st->buffer_bytes[o] = np_xchg_caps_bytes(&bound, cfg->dim, W, R, 2, split, NP_XCHG_SLOTS,
                                                 NP_XCHG_RSETS);
        st->buffer_exact[o] = np_xchg_caps_bytes(&exact, cfg->dim, W, R, 2, split, NP_XCHG_SLOTS,
                                                 NP_XCHG_RSETS);
        if (o == 0) { /* before 0.8: every owner-side buffer R x the largest batch */
            np_xchg_caps old = mine;
            old.recv_keys = old.recv = old.stage = (size_t)most * (size_t)R;
            st->buffer_before = np_xchg_caps_bytes(&old, cfg->dim, W, R, 2, split, NP_XCHG_SLOTS,
                                                   NP_XCHG_RSETS);
        }
    }
    return NP_OK;
}

np_status np_route_stats_compute(const np_config *cfg, int ranks, long steps, np_route_stats *out,
                                 np_error *err) {
    memset(out, 0, sizeof *out);
    if (ranks < 1) return np_err(err, NP_STATUS_BAD_INPUT, "route stats: ranks %d (1 or more)", ranks);
    if (steps < 1) return np_err(err, NP_STATUS_BAD_INPUT, "route stats: steps %ld (1 or more)", steps);
    if (cfg->batch % ranks)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "route stats: the global batch %ld is not divisible by %d ranks", cfg->batch,
                      ranks);
    long local_n = cfg->batch / ranks;
    np_config at = *cfg; /* the engine's view at `ranks` ranks: its windows, its exchange */
    at.ranks = ranks;
    if (at.comm == NP_COMM_NCCL) at.exchange = NP_EXCHANGE_ROWS; /* NCCL moves rows only */
    cfg = &at;
    int W = np_config_windows(cfg);
    if (W > local_n)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "route stats: %d windows of a local batch of %ld samples", W, local_n);
    np_route_stats st = {.ranks = ranks, .windows = W, .tables = cfg->tables, .dim = cfg->dim,
                         .steps = steps};
    size_t nn = (size_t)ranks * (size_t)ranks;
    scratch x = {0};
    np_batch b = {0};
    np_status s = NP_STATUS_NO_MEMORY;
    int64_t *own = NULL; /* (2 ranks) the first batch's own keys and window bound of each rank */
    st.keys = np_zalloc(nn, sizeof *st.keys, "route stats (keys)", err);
    st.rows = np_zalloc(nn, sizeof *st.rows, "route stats (rows)", err);
    st.rows_window = np_zalloc((size_t)W, sizeof *st.rows_window, "route stats", err);
    x.cu = np_zalloc(3 * (size_t)ranks, sizeof *x.cu, "route stats", err);
    x.touched = np_alloc((size_t)ranks, sizeof *x.touched, "route stats", err);
    if (!st.keys || !st.rows || !st.rows_window || !x.cu || !x.touched) goto out;
    x.cn = x.cu + ranks;
    x.cg = x.cn + ranks;
    size_t R = (size_t)ranks;
    own = np_zalloc(2 * R, sizeof *own, "route stats", err);
    x.recv_keys = np_zalloc(R * (1 + (size_t)W), sizeof *x.recv_keys, "route stats", err);
    x.bound = np_zalloc(4 * R, sizeof *x.bound, "route stats", err);
    x.rows = np_zalloc(R, sizeof *x.rows, "route stats", err);
    x.nrows = np_zalloc(2 * R, sizeof *x.nrows, "route stats", err);
    st.buffer_bytes = np_zalloc(2 * R, sizeof *st.buffer_bytes, "route stats", err);
    if (!own || !x.recv_keys || !x.bound || !x.rows || !x.nrows || !st.buffer_bytes) goto out;
    x.win_rows = x.recv_keys + R;
    x.bound_sum = x.bound + 2 * R;
    x.caprows = x.nrows + R;
    st.buffer_exact = st.buffer_bytes + R;
    for (int r = 0; r < ranks; r++) {
        np_source_t *src = NULL;
        if ((s = np_source_open(cfg, NP_SPLIT_TRAIN, &src, err))) break;
        for (long k = 0; k < steps && !s; k++) {
            s = np_source_next_slice(src, cfg->batch, local_n * r, local_n, &b, err);
            if (s == NP_STATUS_END_OF_DATA)
                s = np_err(err, NP_STATUS_BAD_INPUT,
                           "route stats: the data has %ld batches of %ld samples, not %ld", k,
                           cfg->batch, steps);
            x.first = k == 0;
            if (!s && x.first) {
                size_t wb = 0;
                own[r] = (int64_t)b.nnz;
                if (np_xchg_window_keys_bound(b.offsets, b.n, b.n_tables, W, b.nnz, &wb))
                    s = np_err(err, NP_STATUS_NO_MEMORY, "out of memory (route stats)");
                own[R + (size_t)r] = (int64_t)wb;
            }
            if (!s) s = route_slice(cfg, &st, &x, &b, r, err);
        }
        np_source_free(src);
        if (s) break;
        /* the counts before the keys: W * T of them to every other rank, every step */
        for (int o = 0; o < ranks; o++)
            if (o != r)
                st.keys[(size_t)r * ranks + o] +=
                    (uint64_t)steps * (uint64_t)W * (uint64_t)cfg->tables * sizeof(int64_t);
    }
    if (!s) s = buffers(cfg, &st, &x, own);
out:
    free(own);
    np_batch_free(&b);
    scratch_free(&x, ranks);
    if (s) {
        np_route_stats_free(&st);
        return s;
    }
    *out = st;
    return NP_OK;
}
