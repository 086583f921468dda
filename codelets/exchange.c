/* Route, key/row/gradient exchanges and the dense all-reduce: the codelets that move data
 * between ranks (DESIGN.md "The training step", step 3-5). With one rank and no MPI the
 * exchanges are local copies through the same code, so one rank computes exactly what the
 * single-process engine computes. Not here: which rank owns a row (core/shard.h) or the
 * MPI calls themselves (comm/). */
#include <stdlib.h>
#include <string.h>

#include "codelets/cl.h"
#include "codelets/kernels.h"
#include "comm/comm.h"
#include "core/shard.h"

/* Keys per rank of the send (sc) or receive (rc) side, summed over tables. */
static void per_rank_totals(const int64_t *meta, int T, int R, int recv, int64_t *tot) {
    for (int o = 0; o < R; o++) {
        tot[o] = 0;
        for (int t = 0; t < T; t++)
            tot[o] += meta[recv ? NP_META_RC(T, R, o, t) : NP_META_SC(T, o, t)];
    }
}

/* ---- route (requester side) */
static void route_cpu(void *buffers[], void *cl_arg) {
    const np_cl_xchg_args *a = cl_arg;
    const uint32_t *off = NP_BUF(buffers, 0); /* (T, nb+1) */
    const int64_t *keys = NP_BUF(buffers, 1); /* (nnz) */
    int64_t *uniq = NP_BUF(buffers, 2);       /* (Uq) distinct keys, table after table */
    int64_t *pos = NP_BUF(buffers, 3);        /* (nnz) */
    int64_t *sendkeys = NP_BUF(buffers, 4);   /* (Uq) owner-local rows, by owner */
    int64_t *meta = NP_BUF(buffers, 5);
    const np_config *cfg = a->cfg;
    int T = a->T, R = a->R;
    int64_t *tbase = malloc(((size_t)T + 1 + (size_t)R * T) * sizeof *tbase);
    if (!tbase) {
        *a->fail = 1;
        return;
    }
    int64_t *cursor = tbase + T + 1; /* (R, T) next send position of (owner, table) */
    /* 1. dedup every table; pos[k] = absolute index into uniq */
    int64_t base = 0;
    for (int t = 0; t < T; t++) {
        const uint32_t *o = off + (size_t)t * (a->nb + 1);
        size_t nu = 0;
        tbase[t] = base;
        if (np_keys_dedup(keys + o[0], o[a->nb] - o[0], uniq + base, &nu, pos + o[0]) ||
            (nu && (uniq[base] < 0 || uniq[base + nu - 1] >= np_config_rows(cfg, t)))) {
            *a->fail = 1;
            free(tbase);
            return;
        }
        for (size_t k = o[0]; k < o[a->nb]; k++)
            pos[k] += base;
        base += (int64_t)nu;
    }
    tbase[T] = base;
    meta[NP_META_UQ] = base;
    /* 2. bucket by owner, keeping (table, key) order inside a bucket: a counting sort */
    int64_t *slot = malloc(((size_t)base + 1) * sizeof *slot); /* uniq index -> send index */
    if (!slot) {
        *a->fail = 1;
        free(tbase);
        return;
    }
    for (int o = 0; o < R; o++)
        for (int t = 0; t < T; t++)
            meta[NP_META_SC(T, o, t)] = 0;
    for (int t = 0; t < T; t++)
        for (int64_t u = tbase[t]; u < tbase[t + 1]; u++)
            meta[NP_META_SC(T, np_shard_owner(cfg, t, uniq[u]), t)]++;
    int64_t acc = 0;
    for (int o = 0; o < R; o++)
        for (int t = 0; t < T; t++) {
            cursor[o * T + t] = acc;
            acc += meta[NP_META_SC(T, o, t)];
        }
    for (int t = 0; t < T; t++)
        for (int64_t u = tbase[t]; u < tbase[t + 1]; u++) {
            int64_t p = cursor[np_shard_owner(cfg, t, uniq[u]) * T + t]++;
            slot[u] = p;
            sendkeys[p] = np_shard_local(cfg, uniq[u]);
        }
    /* 3. every key reads its row where it will arrive: Rin follows the send order */
    for (int t = 0; t < T; t++) {
        const uint32_t *o = off + (size_t)t * (a->nb + 1);
        for (size_t k = o[0]; k < o[a->nb]; k++)
            pos[k] = slot[pos[k]];
    }
    free(slot);
    free(tbase);
}

/* ---- the two-phase All2All: counts, then keys (owner-local rows) */
static void a2a_keys_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    int64_t *meta = NP_BUF(buffers, 0);
    const int64_t *send = NP_BUF(buffers, 1);
    int64_t *recv = NP_BUF(buffers, 2);
    int T = a->T, R = a->R;
    int64_t st[64], rt[64];
    if (np_comm_alltoall_i64(a->comm, NP_CHAN_DATA, meta + NP_META_SC(T, 0, 0),
                             meta + NP_META_RC(T, R, 0, 0), T)) {
        *a->fail = 1;
        return;
    }
    per_rank_totals(meta, T, R, 0, st);
    per_rank_totals(meta, T, R, 1, rt);
    int64_t nrecv = 0, nsend = 0;
    for (int q = 0; q < R; q++) {
        nrecv += rt[q];
        nsend += st[q];
    }
    meta[NP_META_NRECV] = nrecv;
    if ((size_t)nrecv > a->cap_recv ||
        np_comm_alltoallv(a->comm, NP_CHAN_DATA, send, st, recv, rt, sizeof(int64_t))) {
        *a->fail = 1;
        return;
    }
    a->task_bytes = (uint64_t)(nsend + (int64_t)R * T) * sizeof(int64_t);
    a->bytes[0] += a->task_bytes;
}

/* ---- owner side: distinct rows per table across requesters, E row of each received key */
static void route_owner_cpu(void *buffers[], void *cl_arg) {
    const np_cl_xchg_args *a = cl_arg;
    const int64_t *recv = NP_BUF(buffers, 0); /* (nrecv) (requester, table, key) order */
    int64_t *meta = NP_BUF(buffers, 1);
    int64_t *uniq = NP_BUF(buffers, 2); /* (Uo) owner-local rows, table after table */
    int64_t *map = NP_BUF(buffers, 3);  /* (nrecv) E row of each received key */
    int T = a->T, R = a->R;
    int64_t nrecv = meta[NP_META_NRECV];
    int64_t *keys = malloc(((size_t)nrecv + 1) * 2 * sizeof *keys);
    if (!keys) {
        *a->fail = 1;
        return;
    }
    int64_t *idx = keys + nrecv; /* (nrecv) where each collected key came from */
    int64_t ubase = 0;
    for (int t = 0; t < T; t++) {
        /* collect table t's keys from every requester's segment, in rank order */
        int64_t n = 0, seg = 0;
        for (int q = 0; q < R; q++)
            for (int tt = 0; tt < T; tt++) {
                int64_t c = meta[NP_META_RC(T, R, q, tt)];
                if (tt == t)
                    for (int64_t i = 0; i < c; i++) {
                        keys[n] = recv[seg + i];
                        idx[n++] = seg + i;
                    }
                seg += c;
            }
        size_t nu = 0;
        int64_t *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
        if (!tmp || np_keys_dedup(keys, (size_t)n, uniq + ubase, &nu, tmp)) {
            free(tmp);
            free(keys);
            *a->fail = 1;
            return;
        }
        for (int64_t i = 0; i < n; i++)
            map[idx[i]] = ubase + tmp[i];
        free(tmp);
        meta[NP_META_UCNT(t)] = ubase;
        ubase += (int64_t)nu;
    }
    meta[NP_META_UCNT(T)] = ubase;
    meta[NP_META_UO] = ubase;
    free(keys);
}

/* ---- rows to their requesters */
static void exchange_rows_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const float *E = NP_BUF(buffers, 0);
    const int64_t *map = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *Rin = NP_BUF(buffers, 3), *sbuf = NP_BUF(buffers, 4);
    int T = a->T, R = a->R;
    size_t d = (size_t)a->d;
    int64_t nrecv = meta[NP_META_NRECV], st[64], rt[64];
    /* one rank without MPI: the requester is the owner, gather straight into Rin */
    float *dst = a->comm ? sbuf : Rin;
    for (int64_t i = 0; i < nrecv; i++)
        memcpy(dst + (size_t)i * d, E + (size_t)map[i] * d, d * sizeof(float));
    if (!a->comm) {
        a->task_bytes = 0;
        return;
    }
    per_rank_totals(meta, T, R, 1, st); /* rows go back along the keys' way */
    per_rank_totals(meta, T, R, 0, rt);
    if (np_comm_alltoallv(a->comm, NP_CHAN_DATA, sbuf, st, Rin, rt, d * sizeof(float))) {
        *a->fail = 1;
        return;
    }
    a->task_bytes = (uint64_t)nrecv * d * sizeof(float);
    a->bytes[1] += a->task_bytes;
}

/* ---- gradients back to the owners, summed per row in a fixed order */
static void exchange_grads_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const float *grows = NP_BUF(buffers, 0);
    const int64_t *map = NP_BUF(buffers, 1), *meta = NP_BUF(buffers, 2);
    float *gE = NP_BUF(buffers, 3), *rbuf = NP_BUF(buffers, 4);
    int T = a->T, R = a->R;
    size_t d = (size_t)a->d;
    int64_t nrecv = meta[NP_META_NRECV], st[64], rt[64];
    const float *src = grows; /* one rank without MPI: the grads are already here */
    if (a->comm) {
        per_rank_totals(meta, T, R, 0, st);
        per_rank_totals(meta, T, R, 1, rt);
        if (np_comm_alltoallv(a->comm, NP_CHAN_DATA, grows, st, rbuf, rt, d * sizeof(float))) {
            *a->fail = 1;
            return;
        }
        a->task_bytes = (uint64_t)meta[NP_META_UQ] * d * sizeof(float);
        a->bytes[2] += a->task_bytes;
        src = rbuf;
    }
    memset(gE, 0, (size_t)meta[NP_META_UO] * d * sizeof(float));
    for (int64_t i = 0; i < nrecv; i++) {
        float *g = gE + (size_t)map[i] * d;
        const float *x = src + (size_t)i * d;
        for (size_t j = 0; j < d; j++)
            g[j] += x[j];
    }
}

/* ---- dense gradients: all-gather, then the same ordered sum on every rank */
static void allreduce_cpu(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = cl_arg;
    const float *mine = NP_BUF(buffers, 0);
    float *out = NP_BUF(buffers, 1), *all = NP_BUF(buffers, 2); /* (n), (R, n) */
    if (np_comm_allgather(a->comm, NP_CHAN_DATA, mine, all, a->n, sizeof(float))) {
        *a->fail = 1;
        return;
    }
    const float *parts[64];
    for (int r = 0; r < a->R; r++)
        parts[r] = all + (size_t)r * a->n;
    np_sum_ordered(parts, a->R, a->n, out);
    a->task_bytes = (uint64_t)a->n * sizeof(float);
    a->bytes[3] += a->task_bytes;
}

NP_CODELET(np_cl_route, route_cpu, "route");
NP_CODELET(np_cl_a2a_keys, a2a_keys_cpu, "a2a_keys");
NP_CODELET(np_cl_route_owner, route_owner_cpu, "route_owner");
NP_CODELET(np_cl_exchange_rows, exchange_rows_cpu, "exchange_rows");
NP_CODELET(np_cl_exchange_grads, exchange_grads_cpu, "exchange_grads");
NP_CODELET(np_cl_allreduce, allreduce_cpu, "allreduce");
