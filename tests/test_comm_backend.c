/* runtime/comm/backend.h and codelets/kernels/xchg_plan.h: the host-side logic of the exchanges on
 * R = 1..4 simulated ranks in one process (a thread per rank, a memcpy transport behind the backend
 * interface), through the real CPU codelets (route, a2a_keys, route_owner, exchange_rows,
 * exchange_grads, allreduce: today's MPI code path with MPI swapped for the transport). Each rank's
 * received rows are checked against the owner's rows computed here from the sharding alone, the
 * owners' summed gradients bit for bit against a (window, rank) order sum computed here, the
 * all-reduce against the rank-order sum; the CUDA codelets' way of doing the same work (plans,
 * per-segment gathers, one rank's gradients added in parallel then the next) is replayed on the
 * host and must give the same bytes. The split row exchange (rows_fresh before the sync, with the
 * shared rows stale, then rows_shared) must fill Rin with the bytes of the whole one. No StarPU
 * runtime: codelet functions get hand-made vector interfaces. Not here: the plans by hand and
 * --comm's checks (test_comm_plan.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/cl.h"
#include "codelets/kernels/kernels.h"
#include "codelets/kernels/xchg_plan.h"
#include "runtime/comm/backend.h"
#include "runtime/core/shard.h"

#include "commsim.h"

/* ---------------------------------------------------------------- codelets without StarPU */

static void run_cl(struct starpu_codelet *cl, int n, void *const *ptrs, np_cl_xchg_args *a) {
    struct starpu_vector_interface v[12];
    void *bufs[12];
    memset(v, 0, sizeof v);
    for (int i = 0; i < n; i++) {
        v[i].ptr = (uintptr_t)ptrs[i];
        bufs[i] = &v[i];
    }
    cl->cpu_funcs[0](bufs, a);
}

/* ---------------------------------------------------------------- the scenario */

enum { T = 3, W = 2, NB = 24, D = 5, NDENSE = 37 };
static const int64_t ROWS[T] = {17, 40, 9};
/* the tables' rows are ROWS times this: 40 in test_many_ranks, so that past 64 ranks every
 * owner is asked for rows */
static int64_t rows_scale = 1;
static int64_t rows_of(int t) {
    return ROWS[t] * rows_scale;
}

/* key of bag (rank, sample, table), element i; bag sizes 0..3, repeats within a window */
static int bag_len(int r, int s, int t) {
    return (r * 7 + s * 3 + t * 5) % 4;
}
static int64_t key_of(int r, int s, int t, int i) {
    uint64_t x = (uint64_t)(r * 1000003 + s * 9176 + t * 131 + i * 17 + 11);
    x ^= x >> 7;
    x *= 0x9E3779B97F4A7C15ULL;
    return (int64_t)((x >> 33) % (uint64_t)(s % 5 == 0 ? 4 : rows_of(t))); /* some hot keys */
}
/* an owner's row element: a function of where the row lives */
static float row_val(int t, int owner, int64_t local, int j) {
    return (float)(t * 100000 + owner * 10000 + local * 10 + j) * 0.5f;
}
/* requester r's gradient of key k of table t in window w: magnitudes far apart, so the
 * order of a sum shows in its bits */
static float grad_val(int r, int w, int t, int64_t k, int j) {
    return (1.0f + 0.37f * (float)j) * (r % 2 ? 1e-4f : 1.0f) *
           (float)(1 + (k * 7 + t + w * 3 + r) % 13) / (float)(3 + r + 2 * w);
}
static float dense_val(int r, int i) {
    return (float)((i * 31 + r * 17) % 23) * (r == 1 ? 1e-3f : 0.1f) + 1.0f / (float)(1 + i + r);
}

enum { KEYS = NB * T * 4, OKEYS = MAXR * KEYS, BITS = MAXR + KEYS }; /* requester, owner sides */
enum { SMALLR = 4 }; /* the rank counts most scenarios run: 1 .. SMALLR */

typedef struct rank_state {
    int r, R;
    int split; /* 1: a previous batch first, and the split row exchange too */
    int salt;  /* which batch fill_batch draws: 0 the one checked, 1 the previous one */
    np_shard shard;
    np_exchange exchange; /* rows: the key-wise checks; pooled, auto: test_pooled's */
    np_backend *be; /* NULL: one rank without a backend (local copies) */
    /* requester */
    uint32_t off[T * (NB + 1)];
    int64_t keys[NB * T * 4], uniq[NB * T * 4], pos[NB * T * 4], sendkeys[NB * T * 4];
    int64_t meta[NP_META_SIZE(T, W, MAXR)];
    float Rin[W][NB * T * 4 * D], grows[W][NB * T * 4 * D];
    /* owner */
    int64_t recvkeys[MAXR * NB * T * 4], uniq_o[MAXR * NB * T * 4], map[MAXR * NB * T * 4];
    float E[MAXR * NB * T * 4 * D], gE[MAXR * NB * T * 4 * D];
    float scratch[MAXR * NB * T * 4 * D];
    /* the split row exchange: the previous batch's owner rows, E with the rows both batches
     * hold stale (before the sync), the bitmaps, the rows received, a second scratch */
    int64_t uprev[OKEYS], mprev[NP_META_SIZE(T, W, MAXR)];
    float stale[OKEYS * D], Rsplit[W][KEYS * D], scratch2[OKEYS * D];
    uint32_t obits[W][BITS], rbits[W][BITS];
    int64_t nshared, nfresh; /* E rows of each kind */
    /* dense */
    float mine[NDENSE], out[NDENSE], all[MAXR * NDENSE];
    /* test_pooled: each bag's gradient (sample, table, d), small multiples of 1/4 so that
     * every sum of them is exact in any order */
    float dP[NB][T * D];
    uint32_t segments, pooled; /* what route reported */
    int fail;
    uint64_t bytes[4];
    int64_t bound[2 * MAXR]; /* np_xchg_owner_bounds of its batch: keys, rows per owner */
    np_xchg_bound_scratch bx; /* its scratch */
    int64_t wrows[W];        /* rows it returned as owner in each window (exchange_rows) */
    int peers_ok;            /* exchange_rows's bytes by peer summed to its bytes, every window */
} rank_state;

static np_cl_xchg_args args_of(const rank_state *s) {
    static int64_t rows[T];
    for (int t = 0; t < T; t++)
        rows[t] = rows_of(t); /* the same values from every thread */
    return (np_cl_xchg_args){.shard = s->shard,
                             .exchange = s->exchange,
                             .rows = rows,
                             .nb = NB,
                             .T = T,
                             .d = D,
                             .R = s->R,
                             .W = W,
                             .cap_recv = MAXR * NB * T * 4,
                             .cap_stage = MAXR * NB * T * 4,
                             .cap_recv_keys = MAXR * NB * T * 4,
                             .cap_win = NB * T * 4,
                             .n = NDENSE,
                             .be = s->be};
}

static void fill_batch(rank_state *s) {
    size_t nk = 0;
    for (int t = 0; t < T; t++) {
        uint32_t *o = s->off + t * (NB + 1);
        /* keys lie table after table, each table's bags in sample order */
        for (int b = 0; b < NB; b++) {
            o[b] = (uint32_t)nk;
            for (int i = 0; i < bag_len(s->r, b, t); i++) /* salt 1: shares samples */
                s->keys[nk++] = key_of(s->r, b + 13 * s->salt, t, i);
        }
        o[NB] = (uint32_t)nk;
    }
}

/* A batch's keys routed: requester side, the key All2All, owner side. */
static void route_batch(rank_state *s, np_cl_xchg_args *a) {
    fill_batch(s);
    a->out = (np_cl_report){0};
    run_cl(&np_cl_route, 6, (void *[]){s->off, s->keys, s->uniq, s->pos, s->sendkeys, s->meta}, a);
    s->fail |= a->out.fail;
    s->segments = a->out.segments;
    s->pooled = a->out.pooled;
    if (!s->salt &&
        np_xchg_owner_bounds(s->off, s->keys, NB, T, args_of(s).rows, (int)s->shard, s->R, W, D,
                             (int)s->exchange,
                             0, s->bound, &s->bx))
        s->fail = 1;
    run_cl(&np_cl_a2a_keys, 3, (void *[]){s->meta, s->sendkeys, s->recvkeys}, a);
    s->fail |= a->out.fail;
    s->bytes[0] = a->out.bytes;
    run_cl(&np_cl_route_owner, 4, (void *[]){s->recvkeys, s->meta, s->uniq_o, s->map}, a);
    s->fail |= a->out.fail;
}

/* E row u of the current batch is a row of the previous one too: found by a plain search of
 * the previous batch's rows of the same table, apart from np_xchg_mark_shared's merge */
static int held_before(const rank_state *s, int64_t u) {
    int t = 0;
    while (u >= s->meta[NP_META_UCNT(t + 1)])
        t++;
    for (int64_t i = s->mprev[NP_META_UCNT(t)]; i < s->mprev[NP_META_UCNT(t + 1)]; i++)
        if (s->uprev[i] == s->uniq_o[u]) return 1;
    return 0;
}

/* The split row exchange of every window into Rsplit: the fresh rows while the shared ones
 * are still stale in E (poisoned here), then the shared ones once the sync refreshed them. */
static void split_rows(rank_state *s, np_cl_xchg_args *a) {
    int64_t UO = s->meta[NP_META_UO];
    uint8_t shared[OKEYS];
    np_xchg_mark_shared(s->uprev, s->mprev, s->uniq_o, s->meta, T, shared);
    for (int64_t u = 0; u < UO; u++)
        if (shared[u] != held_before(s, u)) s->fail = 1;
    memcpy(s->stale, s->E, (size_t)UO * D * sizeof(float));
    for (int64_t u = 0; u < UO; u++) {
        s->nshared += shared[u];
        s->nfresh += !shared[u];
        if (shared[u])
            for (int j = 0; j < D; j++)
                s->stale[u * D + j] = -1e30f;
    }
    for (int w = 0; w < W; w++) {
        a->w = w;
        run_cl(&np_cl_rows_fresh, 12,
               (void *[]){s->stale, s->map, s->meta, s->Rsplit[w], s->scratch, NULL, s->obits[w],
                          s->rbits[w], s->uprev, s->mprev, s->uniq_o, s->recvkeys},
               a);
        s->fail |= a->out.fail;
    }
    for (int w = 0; w < W; w++) {
        a->w = w;
        run_cl(&np_cl_rows_shared, 10,
               (void *[]){s->E, s->map, s->meta, s->Rsplit[w], s->scratch, NULL, s->obits[w],
                          s->rbits[w], s->scratch2, s->recvkeys},
               a);
        s->fail |= a->out.fail;
    }
}

/* The steps of one batch as the engine orders them, through the codelets. */
static void *rank_main(void *arg) {
    rank_state *s = arg;
    /* the args with room for the bytes by peer after them, as tasks/exchange.c gives */
    np_cl_xchg_args *pa = calloc(1, sizeof *pa + 2 * (size_t)s->R * sizeof(uint64_t));
    if (!pa) {
        s->fail = 1;
        return NULL;
    }
    *pa = args_of(s);
    pa->peer_room = (uint32_t)s->R;
#define a (*pa)
    if (s->split) { /* the previous batch's owner rows, for the split exchange */
        s->salt = 1;
        route_batch(s, &a);
        memcpy(s->uprev, s->uniq_o, sizeof s->uprev);
        memcpy(s->mprev, s->meta, sizeof s->mprev);
        s->salt = 0;
    }
    route_batch(s, &a);
    /* the owner's rows, by where they live */
    for (int t = 0; t < T; t++)
        for (int64_t u = s->meta[NP_META_UCNT(t)]; u < s->meta[NP_META_UCNT(t + 1)]; u++)
            for (int j = 0; j < D; j++)
                s->E[u * D + j] = row_val(t, s->r, s->uniq_o[u], j);
    s->peers_ok = 1;
    for (int w = 0; w < W; w++) {
        a.w = w;
        a.out = (np_cl_report){0};
        memset(np_cl_xchg_peers(pa), 0, 2 * (size_t)s->R * sizeof(uint64_t));
        run_cl(&np_cl_exchange_rows, 7,
               (void *[]){s->E, s->map, s->meta, s->Rin[w], s->scratch, NULL, s->recvkeys}, &a);
        s->fail |= a.out.fail;
        s->bytes[1] += a.out.bytes;
        np_xchg_plan p;
        if (np_xchg_plan_rows(s->meta, T, W, s->R, w, &p)) {
            s->fail = 1;
        } else {
            s->wrows[w] = p.nsend;
            np_xchg_plan_free(&p);
        }
        /* every peer's bytes: they add up to the bytes sent to other ranks */
        uint64_t sum = 0;
        for (int q = 0; q < s->R && s->be; q++)
            sum += np_cl_xchg_peers(pa)[q];
        if (s->be && s->R > 1 && (a.out.npeer != (uint32_t)s->R || sum != a.out.bytes))
            s->peers_ok = 0;
    }
    if (s->split) split_rows(s, &a);
    if (s->exchange == NP_EXCHANGE_ROWS) {
        /* every key's gradient lands on its row of the window's grows (repeats agree) */
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                const uint32_t *o = s->off + t * (NB + 1);
                for (uint32_t k = o[NB * w / W]; k < o[NB * (w + 1) / W]; k++)
                    for (int j = 0; j < D; j++)
                        s->grows[w][s->pos[k] * D + j] = grad_val(s->r, w, t, s->keys[k], j);
            }
    } else { /* the pooling's backward of bag gradients, as pool_bwd forms grows */
        for (int w = 0; w < W; w++) {
            memset(s->grows[w], 0, sizeof s->grows[w]);
            for (int t = 0; t < T; t++)
                np_embbag_bwd_skip(s->dP[NB * w / W] + t * D, T * D,
                              s->off + t * (NB + 1) + NB * w / W, s->pos, NB * (w + 1) / W - NB * w / W,
                              D, s->grows[w]);
        }
    }
    for (int w = 0; w < W; w++) {
        a.w = w;
        run_cl(&np_cl_exchange_grads, 7,
               (void *[]){s->grows[w], s->map, s->meta, s->gE, s->scratch, NULL, s->recvkeys}, &a);
        s->fail |= a.out.fail;
        s->bytes[2] += a.out.bytes;
    }
    for (int i = 0; i < NDENSE; i++)
        s->mine[i] = dense_val(s->r, i);
    run_cl(&np_cl_allreduce, 3, (void *[]){s->mine, s->out, s->all}, &a);
    s->fail |= a.out.fail;
    s->bytes[3] = a.out.bytes;
#undef a
    free(pa);
    np_xchg_bound_scratch_free(&s->bx);
    return NULL;
}

/* R simulated ranks (with_backend 0 and R 1: no backend at all, as without MPI) */
static rank_state *run_ranks_x(int R, np_shard shard, np_exchange x, int with_backend, int split,
                               hub *h) {
    rank_state *st = calloc((size_t)R, sizeof *st);
    np_backend be[MAXR];
    sim sims[MAXR];
    pthread_t th[MAXR];
    memset(h, 0, sizeof *h);
    h->R = R;
    assert_int_equal(pthread_barrier_init(&h->bar, NULL, (unsigned)R), 0);
    for (int r = 0; r < R; r++) {
        sims[r] = (sim){h, r};
        be[r] = (np_backend){.ops = &sim_ops, .rank = r, .size = R, .impl = &sims[r]};
        /* (fields set one by one: a compound literal of this size would be on the stack) */
        st[r].r = r;
        st[r].R = R;
        st[r].split = split;
        st[r].shard = shard;
        st[r].exchange = x;
        st[r].be = with_backend ? &be[r] : NULL;
        for (int b = 0; b < NB; b++)
            for (int i = 0; i < T * D; i++)
                st[r].dP[b][i] = (float)((r * 7 + b * 3 + i * 5) % 11 - 5) * 0.25f;
    }
    for (int r = 0; r < R; r++)
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &st[r]), 0);
    for (int r = 0; r < R; r++)
        pthread_join(th[r], NULL);
    pthread_barrier_destroy(&h->bar);
    for (int r = 0; r < R; r++) {
        st[r].be = NULL; /* was on this stack */
        assert_int_equal(st[r].fail, 0);
        assert_true(st[r].peers_ok);
    }
    assert_int_equal(h->bad, 0);
    /* the bounds make_room sizes an owner's buffers from hold what it was sent: summed over
     * the requesters, at least its received keys, its distinct rows and any window's rows */
    for (int o = 0; o < R; o++) {
        int64_t keys = 0, rows = 0;
        for (int r = 0; r < R; r++) {
            keys += st[r].bound[2 * o];
            rows += st[r].bound[2 * o + 1];
        }
        assert_true(keys >= st[o].meta[NP_META_NRECV]);
        assert_true(rows >= st[o].meta[NP_META_UO]);
        for (int w = 0; w < W; w++)
            assert_true(rows >= st[o].wrows[w]);
    }
    return st;
}

static rank_state *run_ranks(int R, np_shard shard, int with_backend, int split, hub *h) {
    return run_ranks_x(R, shard, NP_EXCHANGE_ROWS, with_backend, split, h);
}

/* E row of (t, key) on its owner */
static int64_t owner_row(const rank_state *o, np_shard shard, int R, int t, int64_t k) {
    int64_t local = np_shard_local_in(shard, R, k);
    for (int64_t u = o->meta[NP_META_UCNT(t)]; u < o->meta[NP_META_UCNT(t + 1)]; u++)
        if (o->uniq_o[u] == local) return u;
    return -1;
}

/* Every key's Rin row holds its owner's row; the owners' gE rows are the (window, rank)
 * order sums, bit for bit, and a (rank, window) order would differ somewhere. */
static void check_exchanges(const rank_state *st, int R, np_shard shard) {
    int order_shows = 0;
    for (int r = 0; r < R; r++) {
        const rank_state *s = &st[r];
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                const uint32_t *o = s->off + t * (NB + 1);
                for (uint32_t k = o[NB * w / W]; k < o[NB * (w + 1) / W]; k++) {
                    int own = np_shard_owner_in(shard, R, T, t, s->keys[k]);
                    int64_t local = np_shard_local_in(shard, R, s->keys[k]);
                    for (int j = 0; j < D; j++)
                        assert_true(s->Rin[w][s->pos[k] * D + j] == row_val(t, own, local, j));
                }
            }
    }
    for (int r = 0; r < R; r++) {
        const rank_state *o = &st[r];
        int64_t UO = o->meta[NP_META_UO];
        float *exp = calloc((size_t)UO * D + 1, sizeof *exp),
              *alt = calloc((size_t)UO * D + 1, sizeof *alt);
        char *seen = calloc((size_t)UO * MAXR * W + 1, 1);
        /* expected: window outer, requester inner; each (requester, window) adds a key once */
        for (int pass = 0; pass < 2; pass++) {
            float *acc = pass ? alt : exp;
            memset(seen, 0, (size_t)UO * MAXR * W + 1);
            for (int x = 0; x < W * R; x++) {
                int w = pass ? x % W : x / R, q = pass ? x / W : x % R;
                const rank_state *s = &st[q];
                for (int t = 0; t < T; t++) {
                    const uint32_t *of = s->off + t * (NB + 1);
                    for (uint32_t k = of[NB * w / W]; k < of[NB * (w + 1) / W]; k++) {
                        if (np_shard_owner_in(shard, R, T, t, s->keys[k]) != r) continue;
                        int64_t u = owner_row(o, shard, R, t, s->keys[k]);
                        assert_true(u >= 0);
                        char *sn = &seen[(u * MAXR + q) * W + w];
                        if (*sn) continue;
                        *sn = 1;
                        for (int j = 0; j < D; j++)
                            acc[u * D + j] += grad_val(q, w, t, s->keys[k], j);
                    }
                }
            }
        }
        assert_memory_equal(o->gE, exp, (size_t)UO * D * sizeof(float));
        order_shows |= memcmp(exp, alt, (size_t)UO * D * sizeof(float)) != 0;
        free(exp);
        free(alt);
        free(seen);
    }
    if (R > 2) assert_true(order_shows); /* the data can tell the orders apart */
    /* the dense all-reduce: the rank-order sum on every rank */
    const float *parts[MAXR] = {0};
    for (int r = 0; r < R; r++)
        parts[r] = st[r].mine;
    float want[NDENSE];
    np_sum_ordered(parts, R, NDENSE, want);
    for (int r = 0; r < R; r++)
        assert_memory_equal(st[r].out, want, sizeof want);
}

/* The CUDA codelets' way on the host: the rows of each requester's segment gathered on
 * their own (a kernel per segment), a rank's gradients added to gE in parallel (here in
 * reverse key order, as any thread order may), ranks one after another. */
static void check_device_order(const rank_state *st, int R) {
    for (int r = 0; r < R; r++) {
        const rank_state *s = &st[r];
        for (int w = 0; w < W; w++) {
            np_xchg_plan p;
            assert_int_equal(np_xchg_plan_rows(s->meta, T, W, R, w, &p), 0);
            assert_true(np_xchg_segments_distinct(&p, s->map));
            float *a = calloc((size_t)p.nsend * D + 1, sizeof *a),
                  *b = calloc((size_t)p.nsend * D + 1, sizeof *b);
            np_xchg_pack_rows(&p, s->map, NULL, s->E, D, a);
            for (int q = 0; q < R; q++)
                for (int64_t i = p.send[q] - 1; i >= 0; i--)
                    memcpy(b + (p.sdispl[q] + i) * D, s->E + s->map[p.seg[q] + i] * D,
                           D * sizeof(float));
            assert_memory_equal(a, b, (size_t)p.nsend * D * sizeof(float));
            free(a);
            free(b);
            np_xchg_plan_free(&p);
        }
    }
}

/* The grads' sum replayed from the plans with a rank's rows added in reverse key order:
 * the same bits as the codelet, because a segment never names a row twice. */
static void check_device_sum(int R, np_shard shard) {
    hub h;
    rank_state *st = run_ranks(R, shard, 1, 0, &h);
    /* the received grads of each window again, through the plans, into a fresh gE */
    for (int r = 0; r < R; r++) {
        rank_state *o = &st[r];
        int64_t UO = o->meta[NP_META_UO];
        float *g = calloc((size_t)UO * D + 1, sizeof *g);
        for (int w = 0; w < W; w++) {
            np_xchg_plan p;
            assert_int_equal(np_xchg_plan_grads(o->meta, T, W, R, w, &p), 0);
            assert_true(np_xchg_segments_distinct(&p, o->map));
            /* what rank q sent for window w: its grows rows for owner r, in its send order */
            for (int q = 0; q < R; q++) {
                np_xchg_plan pq;
                assert_int_equal(np_xchg_plan_grads(st[q].meta, T, W, R, w, &pq), 0);
                assert_int_equal(pq.send[r], p.recv[q]); /* counts agree across ranks */
                const float *src = st[q].grows[w] + pq.sdispl[r] * D;
                for (int64_t i = p.recv[q] - 1; i >= 0; i--)
                    for (int j = 0; j < D; j++)
                        g[o->map[p.seg[q] + i] * D + j] += src[i * D + j];
                np_xchg_plan_free(&pq);
            }
            np_xchg_plan_free(&p);
        }
        assert_memory_equal(g, o->gE, (size_t)UO * D * sizeof(float));
        free(g);
    }
    free(st);
}

/* The split exchange filled Rsplit with the whole exchange's bytes, both kinds of rows
 * occurring. */
static void check_split(const rank_state *st, int R) {
    int64_t shared = 0, fresh = 0;
    for (int r = 0; r < R; r++) {
        const rank_state *s = &st[r];
        for (int w = 0; w < W; w++)
            assert_memory_equal(s->Rsplit[w], s->Rin[w],
                                (size_t)s->meta[NP_META_WUQ(T, w)] * D * sizeof(float));
        shared += s->nshared;
        fresh += s->nfresh;
    }
    assert_true(shared > 0 && fresh > 0);
}

static void test_split_rows(void **state) {
    (void)state;
    for (int sh = 0; sh < 2; sh++)
        for (int R = 1; R <= SMALLR; R++) {
            hub h;
            np_shard shard = sh ? NP_SHARD_TABLE : NP_SHARD_ROW;
            rank_state *st = run_ranks(R, shard, 1, 1, &h);
            check_exchanges(st, R, shard);
            check_split(st, R);
            /* the previous batch's counts and keys; per window bitmaps and fresh rows, then
             * shared rows */
            uint64_t want = 2 + 2 + 2 * W + 3 * W + (np_xchg_allreduce_rs(R) ? 2 : 1);
            for (int r = 0; r < R; r++)
                assert_int_equal(h.calls[r], want);
            free(st);
        }
    hub h; /* one rank without a backend: local copies */
    rank_state *st = run_ranks(1, NP_SHARD_ROW, 0, 1, &h);
    check_split(st, 1);
    free(st);
}

static void test_ranks(void **state) {
    (void)state;
    for (int sh = 0; sh < 2; sh++)
        for (int R = 1; R <= SMALLR; R++)
            for (int form = 0; form < 2; form++) {
                setenv("NP_ALLREDUCE", form ? "rs" : "allgather", 1);
                hub h;
                np_shard shard = sh ? NP_SHARD_TABLE : NP_SHARD_ROW;
                rank_state *st = run_ranks(R, shard, 1, 0, &h);
                check_exchanges(st, R, shard);
                check_device_order(st, R);
                /* collectives per rank: counts, keys, W rows, W grads, the all-reduce (one
                 * or two calls) */
                uint64_t want = 2 + 2 * W + (np_xchg_allreduce_rs(R) ? 2 : 1);
                for (int r = 0; r < R; r++)
                    assert_int_equal(h.calls[r], want);
                free(st);
                check_device_sum(R, shard);
            }
    unsetenv("NP_ALLREDUCE");
}

/* One rank: the backend path and the no-backend path (local copies, as without MPI)
 * compute the same bytes, and neither reports bytes sent: a rank's rows to itself cross
 * no wire. Two ranks report exactly the rows the other one gets. */
static void test_one_rank_paths(void **state) {
    (void)state;
    hub h1, h0;
    rank_state *a = run_ranks(1, NP_SHARD_ROW, 1, 0, &h1);
    rank_state *b = run_ranks(1, NP_SHARD_ROW, 0, 0, &h0);
    assert_memory_equal(a->Rin, b->Rin, sizeof a->Rin);
    assert_memory_equal(a->gE, b->gE, sizeof a->gE);
    assert_memory_equal(a->out, b->out, sizeof a->out);
    assert_int_equal(a->bytes[0] + a->bytes[1] + a->bytes[2], 0);
    assert_int_equal(b->bytes[0] + b->bytes[1] + b->bytes[2], 0);
    free(a);
    free(b);
    rank_state *c = run_ranks(2, NP_SHARD_ROW, 1, 0, &h1);
    for (int r = 0; r < 2; r++) {
        uint64_t rows = 0; /* the other rank's rows of every window, from its counts */
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++)
                rows += (uint64_t)c[1 - r].meta[NP_META_SR(T, W, 2, r, w, t)];
        assert_true(rows > 0);
        assert_int_equal(c[r].bytes[1], rows * D * sizeof(float));
        assert_int_equal(c[r].bytes[2], c[1 - r].bytes[1]); /* as many gradients back */
    }
    free(c);
}

/* Pooled and auto exchanges: every bag pools (np_embbag_fwd over its window's Rin, as
 * pool_fwd does) to the sum of its keys' rows, and every owner row's gradient is the sum of
 * the bag gradients of the bags that hold it, once per key. Row values and bag gradients
 * are exact in float in any order of summation, so the checks are equalities. */
static void check_pooled(const rank_state *st, int R, np_shard shard, np_exchange x,
                         uint64_t *segs_out, uint64_t *pooled_out) {
    int64_t skipped = 0;
    uint64_t segs = 0, pooled = 0;
    for (int r = 0; r < R; r++) {
        const rank_state *s = &st[r];
        segs += s->segments;
        pooled += s->pooled;
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                const uint32_t *o = s->off + t * (NB + 1);
                for (int b = NB * w / W; b < NB * (w + 1) / W; b++) {
                    float got[D], want[D] = {0};
                    np_embbag_fwd_skip(s->Rin[w], o + b, s->pos, 1, D, got, D);
                    for (uint32_t k = o[b]; k < o[b + 1]; k++) {
                        int own = np_shard_owner_in(shard, R, T, t, s->keys[k]);
                        int64_t local = np_shard_local_in(shard, R, s->keys[k]);
                        for (int j = 0; j < D; j++)
                            want[j] += row_val(t, own, local, j);
                        skipped += s->pos[k] < 0;
                    }
                    assert_memory_equal(got, want, sizeof got);
                }
            }
    }
    for (int r = 0; r < R; r++) {
        const rank_state *o = &st[r];
        int64_t UO = o->meta[NP_META_UO];
        float *want = calloc((size_t)UO * D + 1, sizeof *want);
        for (int q = 0; q < R; q++)
            for (int t = 0; t < T; t++) {
                const uint32_t *of = st[q].off + t * (NB + 1);
                for (int b = 0; b < NB; b++)
                    for (uint32_t k = of[b]; k < of[b + 1]; k++) {
                        if (np_shard_owner_in(shard, R, T, t, st[q].keys[k]) != r) continue;
                        int64_t u = owner_row(o, shard, R, t, st[q].keys[k]);
                        assert_true(u >= 0);
                        for (int j = 0; j < D; j++)
                            want[u * D + j] += st[q].dP[b][t * D + j];
                    }
            }
        assert_memory_equal(o->gE, want, (size_t)UO * D * sizeof(float));
        free(want);
    }
    if (x == NP_EXCHANGE_POOLED) {
        assert_true(skipped > 0); /* some bag had two keys at one owner */
        assert_int_equal(pooled, segs);
    }
    assert_true(pooled <= segs);
    if (R == 1) assert_int_equal(segs, 0);
    *segs_out += segs;
    *pooled_out += pooled;
}

static void test_pooled(void **state) {
    (void)state;
    uint64_t segs[2] = {0}, pooled[2] = {0}; /* summed over the runs of each form */
    for (int sh = 0; sh < 2; sh++)
        for (int R = 1; R <= SMALLR; R++)
            for (int x = 0; x < 2; x++)
                for (int split = 0; split < 2; split++) {
                    hub h;
                    np_shard shard = sh ? NP_SHARD_TABLE : NP_SHARD_ROW;
                    np_exchange ex = x ? NP_EXCHANGE_AUTO : NP_EXCHANGE_POOLED;
                    rank_state *st = run_ranks_x(R, shard, ex, 1, split, &h);
                    check_pooled(st, R, shard, ex, &segs[x], &pooled[x]);
                    if (split) check_split(st, R);
                    uint64_t want = 2 + 2 * W + (np_xchg_allreduce_rs(R) ? 2 : 1) +
                                    (split ? 2 + 3 * W : 0);
                    for (int r = 0; r < R; r++)
                        assert_int_equal(h.calls[r], want);
                    free(st);
                }
    /* auto chose both forms on this data, some segments pooled and some not */
    assert_true(pooled[1] > 0 && pooled[1] < segs[1]);
    assert_int_equal(pooled[0], segs[0]);
    hub h; /* one rank without a backend: local copies */
    rank_state *st = run_ranks_x(1, NP_SHARD_ROW, NP_EXCHANGE_POOLED, 0, 1, &h);
    uint64_t s1 = 0, p1 = 0;
    check_pooled(st, 1, NP_SHARD_ROW, NP_EXCHANGE_POOLED, &s1, &p1);
    check_split(st, 1);
    free(st);
}

/* Past 64 ranks (67 and 130, an owner's index past any 64-bit mask): the same checks as
 * test_ranks and test_pooled, every owner asked for rows, the bytes by peer for every peer
 * (rank_main), the owners' bounds (run_ranks_x). */
static void test_many_ranks(void **state) {
    (void)state;
    rows_scale = 40;
    static const int many[] = {67, 130};
    for (size_t i = 0; i < sizeof many / sizeof *many; i++)
        for (int sh = 0; sh < 3; sh++) { /* row, table, spread (its offsets R / T apart) */
            int R = many[i];
            hub h;
            np_shard shard = sh == 2 ? NP_SHARD_SPREAD : sh ? NP_SHARD_TABLE : NP_SHARD_ROW;
            rank_state *st = run_ranks(R, shard, 1, 0, &h);
            check_exchanges(st, R, shard);
            check_device_order(st, R);
            int asked = 0; /* owners past 64 that served rows */
            for (int o = 64; o < R; o++)
                asked += st[o].meta[NP_META_UO] > 0;
            if (shard != NP_SHARD_TABLE) assert_true(asked > (R - 64) / 2);
            for (int r = 0; r < R; r++)
                assert_int_equal(h.calls[r], 2 + 2 * W + (np_xchg_allreduce_rs(R) ? 2 : 1));
            free(st);
            check_device_sum(R, shard);
            uint64_t segs = 0, pooled = 0;
            st = run_ranks_x(R, shard, NP_EXCHANGE_AUTO, 1, 1, &h);
            check_pooled(st, R, shard, NP_EXCHANGE_AUTO, &segs, &pooled);
            check_split(st, R);
            free(st);
        }
    rows_scale = 1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_ranks),
        cmocka_unit_test(test_ranks),
        cmocka_unit_test(test_one_rank_paths),
        cmocka_unit_test(test_split_rows),
        cmocka_unit_test(test_pooled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
