/* Route, key/row/gradient exchanges and the dense all-reduce: the codelets that move data
 * between ranks (docs/engine.md "Across ranks"). With one rank and no MPI the
 * exchanges are local copies through the same code, so one rank computes exactly what the
 * single-process engine computes. Not here: which rank owns a row (runtime/core/shard.h), the
 * counts and orders of the exchanges (xchg_plan.c, shared with the CUDA codelets of
 * codelets/exchange.cu) or the collectives themselves (runtime/comm/). */
#include <stdlib.h>
#include <string.h>

#include "codelets/cl.h"
#include "codelets/kernels/kernels.h"
#include "codelets/kernels/xchg_plan.h"
#include "runtime/comm/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/core/shard.h"

/* The backend of a CPU task: the args' own when it works on host memory (a test's
 * transport), MPI on the data channel when there is MPI, NULL for one rank without MPI
 * (the x_ helpers below then copy locally, as comm.h does for a NULL comm). A device
 * backend (NCCL) is for the CUDA codelets only: the CPU ones (a2a_keys always) keep MPI. */
static np_backend *host_backend(const np_cl_xchg_args *a, np_backend *tmp) {
    if (a->be && !a->be->ops->on_device) return a->be;
    if (!a->comm) return NULL;
    np_backend_mpi(tmp, a->comm);
    return tmp;
}

/* A collective's start: the clock, and MPI's phase counters cleared of anything before it */
static double coll_start(void) {
    double post, pace;
    np_comm_take_phases(&post, &pace);
    return starpu_timing_now();
}

/* What a collective adds to the task's report (np_cl_report): one more collective, its
 * time since t0, and the payload bytes it sent to and received from each peer (scounts[q]
 * and rcounts[q] elements of elem bytes; a NULL array: n elements for every peer). */
static void account(np_cl_xchg_args *a, const np_backend *b, double t0, const int64_t *scounts,
                    const int64_t *rcounts, size_t n, size_t elem) {
    double t1 = starpu_timing_now(), post = 0, pace = 0;
    np_comm_take_phases(&post, &pace); /* MPI's own phases (zeros for another backend) */
    if (b->size < 2) return; /* one rank under MPI: a copy, as without MPI */
    np_cl_report *o = &a->out;
    if (!o->colls++) o->comm_first = t0;
    o->comm_last = t1;
    o->comm_us += t1 - t0;
    o->post_us += post;
    o->pace_us += pace;
    int R = b->size;
    if (R < 1 || (uint32_t)R > a->peer_room) return; /* no room for them (a test's args) */
    uint64_t *peer = np_cl_xchg_peers(a);
    o->npeer = (uint32_t)R;
    o->peer_off = (uint32_t)sizeof *a; /* out is the first field, the peers follow the args */
    for (int q = 0; q < R; q++) {
        if (q == b->rank) continue;
        peer[q] += (uint64_t)(scounts ? (size_t)scounts[q] : n) * elem;
        peer[R + q] += (uint64_t)(rcounts ? (size_t)rcounts[q] : n) * elem;
    }
}

static int x_alltoall_i64(np_cl_xchg_args *a, np_backend *b, const int64_t *send, int64_t *recv,
                          int per_rank) {
    if (!b) {
        memcpy(recv, send, (size_t)per_rank * sizeof(int64_t));
        return 0;
    }
    double t0 = coll_start();
    int rc = b->ops->alltoall(b, send, recv, (size_t)per_rank, sizeof(int64_t), NULL);
    account(a, b, t0, NULL, NULL, (size_t)per_rank, sizeof(int64_t));
    return rc;
}

static int x_alltoallv(np_cl_xchg_args *a, np_backend *b, const void *send,
                       const int64_t *scounts, void *recv, const int64_t *rcounts, size_t elem) {
    if (!b) {
        memcpy(recv, send, (size_t)scounts[0] * elem);
        return 0;
    }
    double t0 = coll_start();
    int rc = b->ops->alltoallv(b, send, scounts, recv, rcounts, elem, NULL);
    account(a, b, t0, scounts, rcounts, 0, elem);
    return rc;
}

static int x_allgather(np_cl_xchg_args *a, np_backend *b, const void *send, void *recv, size_t n,
                       size_t elem) {
    if (!b) {
        memcpy(recv, send, n * elem);
        return 0;
    }
    double t0 = coll_start();
    int rc = b->ops->allgather(b, send, recv, n, elem, NULL);
    account(a, b, t0, NULL, NULL, n, elem);
    return rc;
}

/* every rank's counts[rank] elements to every other rank */
static int x_allgatherv_inplace(np_cl_xchg_args *a, np_backend *b, void *buf,
                                const int64_t *counts, size_t elem) {
    if (!b) return 0;
    double t0 = coll_start();
    int rc = b->ops->allgatherv_inplace(b, buf, counts, elem, NULL);
    account(a, b, t0, NULL, counts, (size_t)counts[b->rank], elem);
    return rc;
}

/* Whether a window's exchange fits the buffers the engine sized (make_room): the owner's
 * staging holds cap_stage rows, the requester's (a window's Rin and gradients) cap_win.
 * A bug if not. */
static int fits(const np_cl_xchg_args *a, int64_t owner_rows, int64_t requester_rows) {
    return (size_t)owner_rows <= a->cap_stage && (size_t)requester_rows <= a->cap_win;
}

/* ---- route (requester side) */

/* One route's buffers and scratch. tbase (W*T+1): first uniq index of (window, table); scur
 * (R, W, T): next send position; rcur (W, R, T): next row of the window's Rin; cu, cn, cg
 * (R, W, T): per segment its distinct keys, keys and bags; bag_at (R): the last bag that
 * had a key at each owner (a bag's first key there starts its row; bags are numbered
 * t * nb + s + 1, so no bag's number is another's); pooled (R, W, T): the segment's form. */
typedef struct route {
    np_cl_xchg_args *a;
    const uint32_t *off; /* (T, nb+1) */
    const int64_t *keys; /* (nnz) */
    int64_t *uniq;       /* distinct keys, (window, table) after (window, table) */
    int64_t *pos;        /* (nnz) */
    int64_t *sendkeys;   /* owner-local rows, (owner, window, table) order */
    int64_t *meta;
    int T, R, W, me;
    size_t nwt, nowt;
    int64_t *tbase, *scur, *rcur, *cu, *cn, *cg, *bag_at;
    uint8_t *pooled;
} route;

#define SEG(o, w, t) (((size_t)(o) * q->W + (w)) * q->T + (t))

/* 1. dedup every (window, table); pos[k] = absolute index into uniq. 0: a key out of range
 *    or no memory. */
static int route_dedup(route *q) {
    np_cl_xchg_args *a = q->a;
    int64_t base = 0;
    for (int w = 0; w < q->W; w++) {
        long r0 = a->nb * w / q->W, r1 = a->nb * (w + 1) / q->W;
        for (int t = 0; t < q->T; t++) {
            const uint32_t *o = q->off + (size_t)t * (a->nb + 1);
            size_t nu = 0;
            q->tbase[w * q->T + t] = base;
            if (np_keys_dedup(q->keys + o[r0], o[r1] - o[r0], q->uniq + base, &nu, q->pos + o[r0]) ||
                (nu && (q->uniq[base] < 0 || q->uniq[base + nu - 1] >= a->rows[t])))
                return 0;
            for (size_t k = o[r0]; k < o[r1]; k++)
                q->pos[k] += base;
            base += (int64_t)nu;
        }
    }
    q->tbase[q->nwt] = base;
    a->out.uniq = (uint64_t)base;
    for (int t = 0; t < q->T; t++)
        a->out.keys += q->off[(size_t)t * (a->nb + 1) + a->nb] - q->off[(size_t)t * (a->nb + 1)];
    return 1;
}

/* 2. each (owner, window, table) segment: its distinct keys, keys and bags, and so its form
 *    and the counts meta carries (the keys it sends, the rows it returns). */
static void route_forms(route *q) {
    np_cl_xchg_args *a = q->a;
    int T = q->T, R = q->R, W = q->W;
    memset(q->cu, 0, 3 * q->nowt * sizeof *q->cu);
    /* whether any segment may go pooled: else the bags need no counting (one rank, rows) */
    int may_pool = a->exchange == NP_EXCHANGE_POOLED || (a->exchange == NP_EXCHANGE_AUTO && R > 1);
    for (int w = 0; w < W; w++)
        for (int t = 0; t < T; t++) {
            for (int64_t u = q->tbase[w * T + t]; u < q->tbase[w * T + t + 1]; u++)
                q->cu[SEG(np_shard_owner_in(a->shard, R, T, t, q->uniq[u]), w, t)]++;
            const uint32_t *o = q->off + (size_t)t * (a->nb + 1);
            for (long s = a->nb * w / W; may_pool && s < a->nb * (w + 1) / W; s++) {
                int64_t bag = (int64_t)t * a->nb + s + 1;
                for (uint32_t k = o[s]; k < o[s + 1]; k++) {
                    int ow = np_shard_owner_in(a->shard, R, T, t, q->keys[k]);
                    q->cn[SEG(ow, w, t)]++;
                    q->cg[SEG(ow, w, t)] += q->bag_at[ow] != bag;
                    q->bag_at[ow] = bag;
                }
            }
        }
    for (int o = 0; o < R; o++)
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                size_t g = SEG(o, w, t);
                /* a sequence's keys are positions, never summed: rows */
                int mode = t == 0 && a->seq ? NP_EXCHANGE_ROWS : (int)a->exchange;
                q->pooled[g] =
                    (uint8_t)np_xchg_seg_pooled(mode, o, q->me, q->cu[g], q->cn[g], q->cg[g], a->d);
                q->meta[NP_META_SC(T, W, o, w, t)] = q->pooled[g] ? q->cn[g] : q->cu[g];
                q->meta[NP_META_SR(T, W, R, o, w, t)] = q->pooled[g] ? q->cg[g] : q->cu[g];
                if (o != q->me && q->cu[g]) {
                    a->out.segments++;
                    a->out.pooled += q->pooled[g];
                }
            }
}

/* The segments' first send position and first row in their window's Rin, and each
 * window's row count. 0: a window overflows the Rin the engine sized (a bug). */
static int route_offsets(route *q) {
    int T = q->T, R = q->R, W = q->W;
    int64_t acc = 0;
    for (int o = 0; o < R; o++)
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                q->scur[SEG(o, w, t)] = acc;
                acc += q->meta[NP_META_SC(T, W, o, w, t)];
            }
    int64_t rows_all = 0;
    for (int w = 0; w < W; w++) {
        acc = 0;
        for (int o = 0; o < R; o++)
            for (int t = 0; t < T; t++) {
                q->rcur[((size_t)w * R + o) * T + t] = acc;
                acc += q->meta[NP_META_SR(T, W, R, o, w, t)];
            }
        q->meta[NP_META_WUQ(T, w)] = acc; /* rows of the window's Rin */
        rows_all += acc;
        if ((size_t)acc > q->a->cap_win) return 0;
    }
    q->meta[NP_META_UQ] = rows_all;
    return 1;
}

/* 3. rows segments: each distinct key once, a row start; its place in Rin (kept in uniq,
 *    which is not read again). */
static void route_rows(route *q) {
    np_cl_xchg_args *a = q->a;
    for (int w = 0; w < q->W; w++)
        for (int t = 0; t < q->T; t++)
            for (int64_t u = q->tbase[w * q->T + t]; u < q->tbase[w * q->T + t + 1]; u++) {
                int o = np_shard_owner_in(a->shard, q->R, q->T, t, q->uniq[u]);
                if (q->pooled[SEG(o, w, t)]) continue;
                q->sendkeys[q->scur[SEG(o, w, t)]++] =
                    -np_shard_local_in(a->shard, q->R, q->uniq[u]) - 1;
                q->uniq[u] = q->rcur[((size_t)w * q->R + o) * q->T + t]++;
            }
}

/* 4. every key reads its row where it will arrive in its window's Rin; a pooled segment's
 *    bags send their keys there in bag order, the first one a row start. */
static void route_positions(route *q) {
    np_cl_xchg_args *a = q->a;
    int any_pooled = 0;
    for (size_t g = 0; g < q->nowt; g++)
        any_pooled |= q->pooled[g];
    q->meta[NP_META_POOLED(q->T, q->W, q->R)] = any_pooled;
    if (!any_pooled)
        for (int t = 0; t < q->T; t++) {
            const uint32_t *o = q->off + (size_t)t * (a->nb + 1);
            for (size_t k = o[0]; k < o[a->nb]; k++)
                q->pos[k] = q->uniq[q->pos[k]];
        }
    for (int w = 0; any_pooled && w < q->W; w++)
        for (int t = 0; t < q->T; t++) {
            const uint32_t *o = q->off + (size_t)t * (a->nb + 1);
            for (long s = a->nb * w / q->W; s < a->nb * (w + 1) / q->W; s++) {
                /* negative numbers: apart from the counting pass's */
                int64_t bag = -((int64_t)t * a->nb + s + 1);
                for (uint32_t k = o[s]; k < o[s + 1]; k++) {
                    int ow = np_shard_owner_in(a->shard, q->R, q->T, t, q->keys[k]);
                    size_t g = SEG(ow, w, t);
                    if (!q->pooled[g]) {
                        q->pos[k] = q->uniq[q->pos[k]];
                        continue;
                    }
                    int64_t local = np_shard_local_in(a->shard, q->R, q->keys[k]);
                    if (q->bag_at[ow] == bag) {
                        q->sendkeys[q->scur[g]++] = local;
                        q->pos[k] = -1;
                    } else { /* the bag's row at ow */
                        q->bag_at[ow] = bag;
                        q->sendkeys[q->scur[g]++] = -local - 1;
                        q->pos[k] = q->rcur[((size_t)w * q->R + ow) * q->T + t]++;
                    }
                }
            }
        }
}
#undef SEG

static void route_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    np_backend mpi, *be = host_backend(a, &mpi);
    route q = {.a = a,
               .off = NP_BUF(buffers, 0),
               .keys = NP_BUF(buffers, 1),
               .uniq = NP_BUF(buffers, 2),
               .pos = NP_BUF(buffers, 3),
               .sendkeys = NP_BUF(buffers, 4),
               .meta = NP_BUF(buffers, 5),
               .T = a->T,
               .R = a->R,
               .W = a->W,
               .me = be ? be->rank : 0};
    q.nwt = (size_t)q.W * q.T;
    q.nowt = (size_t)q.R * q.nwt;
    q.tbase = malloc((q.nwt + 1 + 5 * q.nowt + (size_t)q.R) * sizeof *q.tbase);
    q.pooled = malloc(q.nowt + 1);
    if (!q.tbase || !q.pooled) {
        a->out.fail = 1;
        free(q.tbase);
        free(q.pooled);
        return;
    }
    q.scur = q.tbase + q.nwt + 1;
    q.rcur = q.scur + q.nowt;
    q.cu = q.rcur + q.nowt;
    q.cn = q.cu + q.nowt;
    q.cg = q.cn + q.nowt;
    q.bag_at = q.cg + q.nowt;
    memset(q.bag_at, 0, (size_t)q.R * sizeof *q.bag_at);
    if (!route_dedup(&q)) {
        a->out.fail = 1;
    } else {
        route_forms(&q);
        if (!route_offsets(&q)) { /* the engine sized it: a bug if hit */
            a->out.fail = 1;
        } else {
            route_rows(&q);
            route_positions(&q);
        }
    }
    free(q.pooled);
    free(q.tbase);
}

/* ---- the two-phase All2All: counts, then keys (owner-local rows), all windows at once */
static void a2a_keys_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    int64_t *meta = NP_BUF(buffers, 0);
    const int64_t *send = NP_BUF(buffers, 1);
    int64_t *recv = NP_BUF(buffers, 2);
    int T = a->T, R = a->R, W = a->W;
    int64_t *st = malloc(2 * (size_t)R * sizeof *st), *rt = st + R; /* (R) keys to, from q */
    np_backend mpi, *be = host_backend(a, &mpi);
    if (!st || x_alltoall_i64(a, be, meta + NP_META_SC(T, W, 0, 0, 0),
                              meta + NP_META_RC(T, W, R, 0, 0, 0), W * T)) {
        free(st);
        a->out.fail = 1;
        return;
    }
    np_xchg_totals(meta, T, W, R, 0, -1, st);
    np_xchg_totals(meta, T, W, R, 1, -1, rt);
    int64_t nrecv = 0, nsend = 0;
    for (int q = 0; q < R; q++) {
        nrecv += rt[q];
        nsend += st[q];
    }
    /* past the room the engine made (a bug if hit: make_room bounds it), the keys are not
     * received: the rank fails, and route_owner reads none */
    int room = (size_t)nrecv <= a->cap_recv_keys;
    meta[NP_META_NRECV] = room ? nrecv : 0;
    if (!room)
        for (int q = 0; q < R; q++)
            rt[q] = 0;
    if (!room || x_alltoallv(a, be, send, st, recv, rt, sizeof(int64_t))) a->out.fail = 1;
    /* bytes on the wire: what goes to other ranks (one rank sends nothing) */
    int me = be ? be->rank : 0;
    a->out.bytes = (uint64_t)(nsend - st[me] + (int64_t)(R - 1) * W * T) * sizeof(int64_t);
    free(st);
}

/* ---- owner side: distinct rows per table across requesters and windows, and the E row
 *      of each received key */
static void route_owner_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const int64_t *recv = NP_BUF(buffers, 0); /* (nrecv) (requester, window, table, key) */
    int64_t *meta = NP_BUF(buffers, 1);
    int64_t *uniq = NP_BUF(buffers, 2); /* (Uo) owner-local rows, table after table */
    int64_t *map = NP_BUF(buffers, 3);  /* (nrecv) E row of each received key */
    int T = a->T, R = a->R, W = a->W;
    int64_t nrecv = meta[NP_META_NRECV];
    int64_t *keys = (size_t)nrecv <= a->cap_recv_keys ? malloc(((size_t)nrecv + 1) * 4 * sizeof *keys)
                                                      : NULL;
    if (!keys) {
        a->out.fail = 1;
        return;
    }
    int64_t *idx = keys + nrecv;    /* (nrecv) where each collected key came from */
    int64_t *tmp = idx + nrecv + 1; /* (nrecv) dedup positions */
    int64_t *out = tmp + nrecv + 1; /* (nrecv) a table's distinct rows, before uniq holds them */
    /* the rows each segment returns: its row starts (a segment that does not begin with
     * one is a bug of the sender) */
    for (int64_t q = 0, seg = 0; q < R; q++)
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                int64_t c = meta[NP_META_RC(T, W, R, q, w, t)], rows = 0;
                for (int64_t i = 0; i < c; i++)
                    rows += np_xchg_key_starts(recv[seg + i]);
                if (c && !np_xchg_key_starts(recv[seg])) {
                    free(keys);
                    a->out.fail = 1;
                    return;
                }
                meta[NP_META_RR(T, W, R, q, w, t)] = rows;
                seg += c;
            }
    int64_t ubase = 0;
    for (int t = 0; t < T; t++) {
        /* collect table t's keys from every (requester, window) segment, in that order */
        int64_t n = 0, seg = 0;
        for (int q = 0; q < R; q++)
            for (int w = 0; w < W; w++)
                for (int tt = 0; tt < T; tt++) {
                    int64_t c = meta[NP_META_RC(T, W, R, q, w, tt)];
                    if (tt == t)
                        for (int64_t i = 0; i < c; i++) {
                            keys[n] = np_xchg_key_row(recv[seg + i]);
                            idx[n++] = seg + i;
                        }
                    seg += c;
                }
        size_t nu = 0;
        /* uniq holds the rows make_room bounded (cap_recv): a bug if they do not fit */
        if (np_keys_dedup(keys, (size_t)n, out, &nu, tmp) ||
            (size_t)ubase + nu > a->cap_recv) {
            free(keys);
            a->out.fail = 1;
            return;
        }
        memcpy(uniq + ubase, out, nu * sizeof *uniq);
        for (int64_t i = 0; i < n; i++)
            map[idx[i]] = ubase + tmp[i];
        meta[NP_META_UCNT(t)] = ubase;
        ubase += (int64_t)nu;
    }
    meta[NP_META_UCNT(T)] = ubase;
    meta[NP_META_UO] = ubase;
    a->out.keys = (uint64_t)nrecv;
    a->out.uniq = (uint64_t)ubase;
    free(keys);
}

/* ---- window w's rows to their requesters */
static void exchange_rows_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const float *E = NP_BUF(buffers, 0);
    const int64_t *map = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *Rin = NP_BUF(buffers, 3), *sbuf = NP_BUF(buffers, 4);
    size_t d = (size_t)a->d;
    np_xchg_plan p;
    if (np_xchg_plan_rows(meta, a->T, a->W, a->R, a->w, &p) || !fits(a, p.nsend, p.nrecv)) {
        np_xchg_plan_free(&p);
        a->out.fail = 1;
        return;
    }
    const int64_t *keys = p.pooled ? NP_BUF(buffers, 6) : NULL;
    np_backend mpi, *be = host_backend(a, &mpi);
    /* one rank without MPI: the requester is the owner, gather straight into Rin */
    np_xchg_pack_rows(&p, map, keys, E, d, be ? sbuf : Rin);
    a->out.bytes = 0;
    if (be && x_alltoallv(a, be, sbuf, p.send, Rin, p.recv, d * sizeof(float)))
        a->out.fail = 1;
    else if (be)
        a->out.bytes = (uint64_t)(p.nsend - p.send[be->rank]) * d * sizeof(float); /* off-rank */
    np_xchg_plan_free(&p);
}

/* ---- window w's rows in two parts (dbp across ranks, docs/pipeline.md "The batch
 *      boundary"): the fresh ones while the previous batch still trains, the shared ones
 *      after the sync refreshed them. Together they fill Rin as exchange_rows does. */
/* One part (0 fresh, 1 shared) of a split exchange, counted from both sides' bitmaps:
 * packed into sbuf, sent, received packed into recv (Rin itself for the fresh part) and
 * placed in Rin. *rows: rows sent. 0, or -1 when the collective failed. */
static int send_part(np_cl_xchg_args *a, const np_xchg_plan *p, np_backend *be, const int64_t *map,
                     const int64_t *keys, const float *E, size_t d, const uint32_t *obits,
                     const uint32_t *rbits, int part, float *sbuf, float *recv, float *Rin,
                     uint64_t *rows) {
    int64_t *cs = malloc(2 * (size_t)p->R * sizeof *cs), *cr = cs + p->R; /* (R) each */
    if (!cs) return -1;
    np_xchg_part_counts(p, obits, 0, part, cs);
    np_xchg_part_counts(p, rbits, 1, part, cr);
    np_xchg_pack_part(p, map, keys, E, d, obits, part, sbuf);
    int rc = x_alltoallv(a, be, sbuf, cs, recv, cr, d * sizeof(float));
    if (!rc) np_xchg_place_part(p, rbits, part, recv, d, Rin);
    for (int q = 0; q < p->R && !rc; q++)
        if (q != (be ? be->rank : 0)) *rows += (uint64_t)cs[q]; /* to other ranks */
    free(cs);
    return rc ? -1 : 0;
}

static void rows_fresh_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const float *E = NP_BUF(buffers, 0);
    const int64_t *map = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *Rin = NP_BUF(buffers, 3), *sbuf = NP_BUF(buffers, 4);
    uint32_t *obits = NP_BUF(buffers, 6), *rbits = NP_BUF(buffers, 7);
    const int64_t *uprev = NP_BUF(buffers, 8), *mprev = NP_BUF(buffers, 9);
    const int64_t *ucur = NP_BUF(buffers, 10);
    size_t d = (size_t)a->d;
    np_xchg_plan p;
    int64_t *ws = NULL;
    if (np_xchg_plan_rows(meta, a->T, a->W, a->R, a->w, &p) || !fits(a, p.nsend, p.nrecv) ||
        !(ws = malloc(2 * (size_t)a->R * sizeof *ws))) {
        np_xchg_plan_free(&p);
        a->out.fail = 1;
        return;
    }
    int64_t *wr = ws + a->R; /* (R) bitmap words to, from each rank */
    const int64_t *keys = p.pooled ? NP_BUF(buffers, 11) : NULL;
    np_backend mpi, *be = host_backend(a, &mpi);
    /* which E rows are shared, a byte each, in sbuf before it stages the rows (Uo bytes fit
     * in its (cap_stage, d) floats: a byte a row against 4d bytes, and the distinct rows
     * are at most cap_stage) */
    uint8_t *shared = (uint8_t *)sbuf;
    np_xchg_mark_shared(uprev, mprev, ucur, meta, a->T, shared);
    np_xchg_mark_rows(&p, map, keys, shared, obits);
    np_xchg_bit_counts(&p, 0, ws);
    np_xchg_bit_counts(&p, 1, wr);
    /* the requesters learn which of their rows come now, then get them */
    uint64_t rows = 0, words = 0;
    if (x_alltoallv(a, be, obits, ws, rbits, wr, sizeof *obits) ||
        send_part(a, &p, be, map, keys, E, d, obits, rbits, 0, sbuf, Rin, Rin, &rows)) {
        a->out.fail = 1;
    } else {
        for (int q = 0; q < a->R; q++)
            if (q != (be ? be->rank : 0)) words += (uint64_t)ws[q];
        a->out.bytes = rows * d * sizeof(float) + words * sizeof *obits;
    }
    free(ws);
    np_xchg_plan_free(&p);
}

static void rows_shared_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const float *E = NP_BUF(buffers, 0);
    const int64_t *map = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *Rin = NP_BUF(buffers, 3), *sbuf = NP_BUF(buffers, 4);
    const uint32_t *obits = NP_BUF(buffers, 6), *rbits = NP_BUF(buffers, 7);
    float *rbuf = NP_BUF(buffers, 8);
    size_t d = (size_t)a->d;
    np_xchg_plan p;
    if (np_xchg_plan_rows(meta, a->T, a->W, a->R, a->w, &p) || !fits(a, p.nsend, p.nrecv)) {
        np_xchg_plan_free(&p);
        a->out.fail = 1;
        return;
    }
    const int64_t *keys = p.pooled ? NP_BUF(buffers, 9) : NULL;
    np_backend mpi, *be = host_backend(a, &mpi);
    uint64_t rows = 0;
    if (send_part(a, &p, be, map, keys, E, d, obits, rbits, 1, sbuf, rbuf, Rin, &rows))
        a->out.fail = 1;
    else
        a->out.bytes = rows * d * sizeof(float);
    np_xchg_plan_free(&p);
}

/* ---- window w's gradients back to the owners, added per row in a fixed order */
static void exchange_grads_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const float *grows = NP_BUF(buffers, 0);
    const int64_t *map = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *gE = NP_BUF(buffers, 3), *rbuf = NP_BUF(buffers, 4);
    int T = a->T, w = a->w;
    size_t d = (size_t)a->d;
    np_xchg_plan p;
    if (np_xchg_plan_grads(meta, T, a->W, a->R, w, &p) || !fits(a, p.nrecv, p.nsend)) {
        np_xchg_plan_free(&p);
        a->out.fail = 1;
        return;
    }
    const int64_t *keys = p.pooled ? NP_BUF(buffers, 6) : NULL;
    np_backend mpi, *be = host_backend(a, &mpi);
    const float *src = grows; /* one rank without MPI: the grads are already here */
    if (be) {
        if (x_alltoallv(a, be, grows, p.send, rbuf, p.recv, d * sizeof(float))) {
            np_xchg_plan_free(&p);
            a->out.fail = 1;
            return;
        }
        a->out.bytes = (uint64_t)(p.nsend - p.send[be->rank]) * d * sizeof(float); /* off-rank */
        src = rbuf;
    }
    if (w == 0) memset(gE, 0, (size_t)meta[NP_META_UO] * d * sizeof(float));
    np_xchg_sum_grads(&p, map, keys, src, d, gE);
    np_xchg_plan_free(&p);
}

/* ---- dense gradients: all-gather, then the same ordered sum on every rank */
/* Above 2 ranks, a reduce-scatter then an all-gather: rank q sums slice q of every rank's
 * gradient, in rank order, and the slices are gathered. Each element is the same rank-order
 * sum as the all-gather form computes, so the bits do not depend on the form; each rank
 * sends 2 (R-1)/R n floats instead of n. At 2 ranks both send n, and the all-gather
 * is one collective instead of two (np_xchg_allreduce_rs). */
/* A bucket of k > 1 layers (buffers: their k gradients, their k sums, the staging) packs
 * the gradients after the collectives' staging, sums them into the area after, and copies
 * the sums out: each element is summed as alone, so the bits are the per-layer ones. */
static void allreduce_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    int k = a->layers > 1 ? a->layers : 1, R = a->R;
    float *all = NP_BUF(buffers, 2 * k); /* (staging) the collectives' */
    const float *mine = NP_BUF(buffers, 0);
    float *out = NP_BUF(buffers, 1);
    if (k > 1) { /* pack the bucket's gradients */
        float *pack = all + np_xchg_allreduce_staging(a->n, R);
        size_t at = 0;
        for (int i = 0; i < k; i++) {
            size_t m = STARPU_VECTOR_GET_NX(buffers[i]);
            memcpy(pack + at, NP_BUF(buffers, i), m * sizeof *pack);
            at += m;
        }
        mine = pack;
        out = pack + a->n;
    }
    np_backend mpi, *be = host_backend(a, &mpi);
    int me = be ? be->rank : 0;
    const float **parts = malloc((size_t)R * sizeof *parts); /* (R) each rank's part */
    np_xchg_allreduce_plan p;
    if (!parts || np_xchg_plan_allreduce(a->n, R, me, &p)) {
        free(parts);
        a->out.fail = 1;
        return;
    }
    if (!p.rs) {
        if (x_allgather(a, be, mine, all, a->n, sizeof(float))) {
            a->out.fail = 1;
        } else {
            for (int r = 0; r < R; r++)
                parts[r] = all + (size_t)r * a->n;
            np_sum_ordered(parts, R, a->n, out);
            a->out.bytes = p.nsend * sizeof(float);
        }
    } else if (x_alltoallv(a, be, mine, p.len, all, p.got, sizeof(float))) {
        /* slice q of mine went to rank q; all got slice `me` of every rank, rank after rank */
        a->out.fail = 1;
    } else {
        for (int r = 0; r < R; r++)
            parts[r] = all + (size_t)r * (size_t)p.len[me];
        np_sum_ordered(parts, R, (size_t)p.len[me], out + p.lo[me]);
        if (x_allgatherv_inplace(a, be, out, p.len, sizeof(float)))
            a->out.fail = 1;
        else
            a->out.bytes = p.nsend * sizeof(float);
    }
    np_xchg_allreduce_plan_free(&p);
    free(parts);
    for (size_t i = 0, at = 0; k > 1 && (int)i < k; i++) { /* the sums to their layers */
        size_t m = STARPU_VECTOR_GET_NX(buffers[k + i]);
        memcpy(NP_BUF(buffers, k + i), out + at, m * sizeof *out);
        at += m;
    }
}

NP_CODELET(np_cl_route, route_cpu, "route");
NP_CODELET(np_cl_a2a_keys, a2a_keys_cpu, "a2a_keys");
NP_CODELET(np_cl_route_owner, route_owner_cpu, "route_owner");
NP_CODELET(np_cl_exchange_rows, exchange_rows_cpu, "exchange_rows");
NP_CODELET(np_cl_rows_fresh, rows_fresh_cpu, "exchange_rows_fresh");
NP_CODELET(np_cl_rows_shared, rows_shared_cpu, "exchange_rows_shared");
NP_CODELET(np_cl_exchange_grads, exchange_grads_cpu, "exchange_grads");
NP_CODELET(np_cl_allreduce, allreduce_cpu, "allreduce");

/* --comm nccl: the same three on the CUDA worker (codelets/exchange.cu). CUDA functions only,
 * so StarPU never runs them on a CPU worker; tasks/exchange.c picks them when the args
 * carry a device backend. Named apart in traces and perf models. */
#ifdef NP_HAVE_CUDA
#include "codelets/exchange_nccl.h"
#define NP_CODELET_NCCL(var, cfn, sym)                                                             \
    static struct starpu_perfmodel var##_model = NP_PERFMODEL(sym);                                \
    struct starpu_codelet var = {.cuda_funcs = {cfn},                                              \
                                 .cuda_flags = {STARPU_CUDA_ASYNC},                                \
                                 .nbuffers = STARPU_VARIABLE_NBUFFERS,                             \
                                 .model = &var##_model,                                            \
                                 .name = sym}
NP_CODELET_NCCL(np_cl_exchange_rows_nccl, np_cuda_exchange_rows, "exchange_rows_nccl");
NP_CODELET_NCCL(np_cl_exchange_grads_nccl, np_cuda_exchange_grads, "exchange_grads_nccl");
NP_CODELET_NCCL(np_cl_allreduce_nccl, np_cuda_allreduce, "allreduce_nccl");
#endif
