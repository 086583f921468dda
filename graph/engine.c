/* The StarPU engine: owns every buffer of the per-batch graph, registers them as data
 * handles, and submits each batch's tasks in an order whose access modes encode the
 * dependencies (DESIGN.md "The training step"). Pipelines: sequential (batch t+1 starts
 * after t ends), dbp (stages of t+1..t+4 run while t trains, two embedding buffers and a
 * sync of shared rows), async (dbp without the sync: stale), fwp (a batch's windows
 * exchange rows and gradients while their neighbours compute), nestpipe (dbp + fwp).
 * Not here: the arithmetic (codelets/) or which modes a node uses (tasks/). */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "graph/engine.h"
#include "comm/comm.h"
#include "model/model.h"
#include "tasks/tasks.h"

/* A registered buffer: the handle and the memory behind it. */
typedef struct np_buf {
    np_h h;
    void *mem;
    size_t count, elem; /* registered size */
} np_buf;

/* Batches in flight: t trains while t+1 is retrieved, t+2 routed, t+3 made resident and
 * t+4 prefetched (DESIGN.md DBP). Buffers of a stage are indexed by batch modulo these. */
#define NP_SLOTS 5 /* input slots: batches t .. t+4 */
#define NP_RSETS 3 /* route sets: batches t .. t+2 */

/* One input slot: a batch as the data source gave it. */
typedef struct np_slot {
    np_buf dense;   /* (nb, n_dense) */
    np_buf label;   /* (nb) */
    np_buf offsets; /* (T, nb+1) uint32 */
    np_buf keys;    /* (cap_nnz) int64 */
} np_slot;

/* What route computes for one batch, read until its write-back. */
typedef struct np_rset {
    np_buf uniq;     /* (cap_nnz) int64 distinct keys per table, table after table */
    np_buf pos;      /* (cap_nnz) int64 row of Rin each key reads */
    np_buf sendkeys; /* (cap_nnz) int64 owner-local rows, grouped by owner */
    np_buf meta;     /* (NP_META_SIZE) int64 counts */
    np_buf recvkeys; /* (cap_recv) int64 requested local rows, by requester */
    np_buf uniq_o;   /* (cap_recv) int64 distinct local rows per table (sorted) */
    np_buf map;      /* (cap_recv) int64 E row of each received key */
} np_rset;

/* Buffers of one row chunk of the batch (rows [row0, row0+n) of window w). */
typedef struct np_chunk {
    long row0, n;
    int w;
    np_buf act_bot[NP_MAX_LAYERS];  /* (n, bot[i].out) post-ReLU */
    np_buf dact_bot[NP_MAX_LAYERS]; /* (n, bot[i].out) grads; [last] unused (dbot) */
    np_buf act_top[NP_MAX_LAYERS];  /* (n, top[i].out); the last holds logits */
    np_buf dact_top[NP_MAX_LAYERS]; /* (n, top[i].out) */
    np_buf P, dP;                   /* (n, T, d) pooled embeddings and their grads */
    np_buf F, dF;                   /* (n, T+1, d) interaction inputs and grads */
    np_buf Z, dZ;                   /* (n, top_in) */
    np_buf dbot;                    /* (n, d) grad of the bottom output */
    np_buf loss;                    /* (1) double: BCE sum of the chunk */
    np_buf gd[2 * NP_MAX_LAYERS];   /* per layer (bottom, then top): this chunk's dense grads */
} np_chunk;

struct np_sp_engine {
    np_config cfg;
    np_model_t *m;
    np_comm *comm;   /* NULL: one rank, no MPI */
    int R;           /* ranks */
    long nb;         /* samples per local batch (global batch / ranks) */
    int W;           /* windows (micro-batches) per local batch */
    int C;           /* chunks per window; W * C chunks in all */
    int fwp;         /* 1: window w+1's rows travel while window w computes */
    int cluster;     /* 1: key-centric clustering of samples into windows */
    int ahead;       /* batches in flight after the training one: 0 sequential, 4 dbp/async */
    int sync;        /* 1: dual-buffer sync of shared rows (dbp) */
    size_t cap_nnz;  /* capacity of the requester-side key buffers */
    size_t cap_recv; /* capacity of the owner-side buffers */
    size_t cap_win;  /* capacity of each window's requester-side row buffers */
    /* model */
    np_h params, tables, state;
    np_slot slot[NP_SLOTS];
    np_rset rset[NP_RSETS];
    np_buf E[2];  /* (cap_recv, d) the dual buffer: retrieved rows of batch b in E[b % 2] */
    np_buf Es[2]; /* (cap_recv) their Adagrad state */
    /* the training batch's buffers (one batch trains at a time) */
    np_buf *Rin;       /* (W) (cap_win, d) each window's received rows */
    np_buf *grows;     /* (W) (cap_win, d) their gradients, summed over the window's chunks */
    np_buf gE;         /* (cap_recv, d) owner's summed row gradients */
    np_buf sbuf, rbuf; /* (cap_recv, d) exchange staging */
    np_buf token;      /* (1) the comm token: every collective takes it RW */
    /* dense gradients per layer (bottom, then top), so each layer's all-reduce can start
     * as soon as the last window's backward is past it */
    int NL;                          /* layers */
    np_buf glocal[2 * NP_MAX_LAYERS]; /* this rank's, summed over chunks */
    np_buf gdense[2 * NP_MAX_LAYERS]; /* summed over ranks */
    np_buf gall[2 * NP_MAX_LAYERS];   /* (R, layer) all-gather staging */
    np_chunk *ch;      /* (W * C) window after window */
    np_trace *trace;
    np_trace *merged; /* rank 0 after np_engine_finish: every rank's events */
    double t0_us;     /* trace time origin: StarPU's clock right after a barrier of all ranks */
    int comm_worker;
    unsigned compute_ctx;
    int fail;
    uint64_t bytes[4]; /* sent: keys, rows, grads, all-reduce */
    uint64_t synced;   /* rows copied by dual-buffer syncs */
    long step;         /* the next batch to train */
    long next[4];      /* next batch to submit to prefetch, h2d, route, retrieve */
    int pending;       /* a step was submitted and not yet waited for */
};

/* ---------------------------------------------------------------- buffers */

static np_status buf_reg(np_buf *b, size_t count, size_t elem, const char *what, np_error *err) {
    if (count == 0) count = 1; /* StarPU vectors hold at least one element */
    size_t bytes = count * elem;
    if (count > UINT32_MAX)
        return np_err(err, NP_STATUS_UNSUPPORTED, "%s: %zu elements exceed a StarPU vector", what,
                      count);
    if (starpu_malloc(&b->mem, bytes))
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory allocating %s (%zu bytes)", what,
                      bytes);
    memset(b->mem, 0, bytes);
    b->count = count;
    b->elem = elem;
    starpu_vector_data_register(&b->h, STARPU_MAIN_RAM, (uintptr_t)b->mem, (uint32_t)count, elem);
    return NP_OK;
}

static void buf_unreg(np_buf *b) {
    if (b->h) starpu_data_unregister(b->h);
    if (b->mem) starpu_free(b->mem);
    b->h = NULL;
    b->mem = NULL;
    b->count = 0;
}

/* Re-registers b with room for count elements, KEEPING its contents: batches already
 * routed or retrieved stay valid. Only when no task is in flight. */
static np_status buf_grow(np_buf *b, size_t count, size_t elem, const char *what, np_error *err) {
    if (b->h && count <= b->count) return NP_OK;
    np_buf old = *b;
    if (old.h) starpu_data_unregister(old.h); /* makes main memory hold the latest data */
    b->h = NULL;
    np_status st = buf_reg(b, count, elem, what, err);
    if (!st && old.mem) memcpy(b->mem, old.mem, old.count * old.elem);
    if (old.mem) starpu_free(old.mem);
    return st;
}

/* The buffers whose size follows the number of keys in a batch. */
static np_status grow_nnz_buffers(np_sp_engine *e, size_t cap, size_t cap_recv, size_t cap_win,
                                  np_error *err) {
    size_t row = (size_t)e->m->d * sizeof(float), i64 = sizeof(int64_t);
    np_status st = NP_OK;
    for (int k = 0; k < NP_SLOTS && !st; k++)
        st = buf_grow(&e->slot[k].keys, cap, i64, "batch keys", err);
    for (int k = 0; k < NP_RSETS && !st; k++) {
        np_rset *r = &e->rset[k];
        if (!st) st = buf_grow(&r->uniq, cap, i64, "unique keys", err);
        if (!st) st = buf_grow(&r->pos, cap, i64, "key positions", err);
        if (!st) st = buf_grow(&r->sendkeys, cap, i64, "keys to send", err);
        if (!st) st = buf_grow(&r->recvkeys, cap_recv, i64, "received keys", err);
        if (!st) st = buf_grow(&r->uniq_o, cap_recv, i64, "owner rows", err);
        if (!st) st = buf_grow(&r->map, cap_recv, i64, "owner row map", err);
    }
    for (int k = 0; k < 2 && !st; k++) {
        st = buf_grow(&e->E[k], cap_recv, row, "embedding buffer", err);
        if (!st) st = buf_grow(&e->Es[k], cap_recv, sizeof(float), "optimizer state buffer", err);
    }
    for (int w = 0; w < e->W && !st; w++) {
        st = buf_grow(&e->Rin[w], cap_win, row, "received rows", err);
        if (!st) st = buf_grow(&e->grows[w], cap_win, row, "row gradients", err);
    }
    if (!st) st = buf_grow(&e->gE, cap_recv, row, "owner row gradients", err);
    if (!st) st = buf_grow(&e->sbuf, cap_recv, row, "send staging", err);
    if (!st) st = buf_grow(&e->rbuf, cap_recv, row, "receive staging", err);
    if (!st) {
        e->cap_nnz = cap;
        e->cap_recv = cap_recv;
        e->cap_win = cap_win;
    }
    return st;
}

static void unreg_all_buffers(np_sp_engine *e) {
    for (int k = 0; k < NP_SLOTS; k++) {
        buf_unreg(&e->slot[k].dense);
        buf_unreg(&e->slot[k].label);
        buf_unreg(&e->slot[k].offsets);
        buf_unreg(&e->slot[k].keys);
    }
    for (int k = 0; k < NP_RSETS; k++) {
        np_rset *r = &e->rset[k];
        np_buf *all[] = {&r->uniq,     &r->pos,    &r->sendkeys, &r->meta,
                         &r->recvkeys, &r->uniq_o, &r->map};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            buf_unreg(all[i]);
    }
    np_buf *all[] = {&e->E[0], &e->E[1], &e->Es[0], &e->Es[1], &e->gE, &e->sbuf, &e->rbuf, &e->token};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        buf_unreg(all[i]);
    for (int L = 0; L < 2 * NP_MAX_LAYERS; L++) {
        buf_unreg(&e->glocal[L]);
        buf_unreg(&e->gdense[L]);
        buf_unreg(&e->gall[L]);
    }
    for (int w = 0; w < e->W; w++) {
        if (e->Rin) buf_unreg(&e->Rin[w]);
        if (e->grows) buf_unreg(&e->grows[w]);
    }
}

/* Layer L of the dense part: bottom layers first, then top, as in the parameter vector. */
static const np_layer *layer_at(const np_model_t *m, int L) {
    return L < m->n_bot ? &m->bot[L] : &m->top[L - m->n_bot];
}

/* Floats of layer L's parameters (W then b, contiguous in the parameter vector). */
static size_t layer_floats(const np_model_t *m, int L) {
    const np_layer *l = layer_at(m, L);
    return (size_t)l->in * (size_t)l->out + (size_t)l->out;
}

static np_status reg_chunk(np_sp_engine *e, np_chunk *k, np_error *err) {
    const np_model_t *m = e->m;
    size_t n = (size_t)k->n, d = (size_t)m->d, T = (size_t)m->T;
    size_t top_in = (size_t)np_config_top_input(&m->cfg);
    np_status st = NP_OK;
    for (int i = 0; i < m->n_bot && !st; i++) {
        st = buf_reg(&k->act_bot[i], n * m->bot[i].out, sizeof(float), "activations", err);
        if (!st && i < m->n_bot - 1)
            st =
                buf_reg(&k->dact_bot[i], n * m->bot[i].out, sizeof(float), "activation grads", err);
    }
    for (int i = 0; i < m->n_top && !st; i++) {
        st = buf_reg(&k->act_top[i], n * m->top[i].out, sizeof(float), "activations", err);
        if (!st)
            st =
                buf_reg(&k->dact_top[i], n * m->top[i].out, sizeof(float), "activation grads", err);
    }
    if (!st) st = buf_reg(&k->P, n * T * d, sizeof(float), "pooled embeddings", err);
    if (!st) st = buf_reg(&k->dP, n * T * d, sizeof(float), "pooled grads", err);
    if (!st) st = buf_reg(&k->F, n * (T + 1) * d, sizeof(float), "interaction inputs", err);
    if (!st) st = buf_reg(&k->dF, n * (T + 1) * d, sizeof(float), "interaction grads", err);
    if (!st) st = buf_reg(&k->Z, n * top_in, sizeof(float), "interaction outputs", err);
    if (!st) st = buf_reg(&k->dZ, n * top_in, sizeof(float), "interaction output grads", err);
    if (!st) st = buf_reg(&k->dbot, n * d, sizeof(float), "bottom output grads", err);
    if (!st) st = buf_reg(&k->loss, 1, sizeof(double), "chunk loss", err);
    for (int L = 0; L < m->n_bot + m->n_top && !st; L++)
        st = buf_reg(&k->gd[L], layer_floats(m, L), sizeof(float), "chunk dense grads", err);
    return st;
}

static void unreg_chunk(np_chunk *k) {
    for (int i = 0; i < NP_MAX_LAYERS; i++) {
        buf_unreg(&k->act_bot[i]);
        buf_unreg(&k->dact_bot[i]);
        buf_unreg(&k->act_top[i]);
        buf_unreg(&k->dact_top[i]);
    }
    buf_unreg(&k->P);
    buf_unreg(&k->dP);
    buf_unreg(&k->F);
    buf_unreg(&k->dF);
    buf_unreg(&k->Z);
    buf_unreg(&k->dZ);
    buf_unreg(&k->dbot);
    buf_unreg(&k->loss);
    for (int L = 0; L < 2 * NP_MAX_LAYERS; L++)
        buf_unreg(&k->gd[L]);
}

/* ---------------------------------------------------------------- life cycle */

static int sched_known(const char *name) {
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    for (; p && *p; p++)
        if (!strcmp((*p)->policy_name, name)) return 1;
    return 0;
}

static void sched_list(char *buf, size_t n) {
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    buf[0] = 0;
    for (; p && *p; p++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", len ? ", " : "", (*p)->policy_name);
    }
}

void np_engine_free(np_sp_engine *e) {
    if (!e) return;
    starpu_task_wait_for_all();
    unreg_all_buffers(e);
    for (int c = 0; e->ch && c < e->W * e->C; c++)
        unreg_chunk(&e->ch[c]);
    free(e->ch);
    free(e->Rin);
    free(e->grows);
    if (e->params) starpu_data_unregister(e->params);
    if (e->tables) starpu_data_unregister(e->tables);
    if (e->state) starpu_data_unregister(e->state);
    np_trace_free(e->trace);
    np_trace_free(e->merged);
    if (e->compute_ctx) starpu_sched_ctx_delete(e->compute_ctx);
    starpu_shutdown();
    free(e);
}

np_status np_engine_create(const np_config *cfg, np_model_t *m, np_sp_engine **out, np_error *err) {
    *out = NULL;
    np_comm *comm = np_comm_world();
    if (np_comm_size(comm) != cfg->ranks)
        return np_err(err, NP_STATUS_INTERNAL, "config says %d ranks but MPI has %d", cfg->ranks,
                      np_comm_size(comm));
    if (cfg->ranks > 64)
        return np_err(err, NP_STATUS_UNSUPPORTED, "ranks: at most 64 ranks are supported, not %d",
                      cfg->ranks);
    if (!sched_known(cfg->sched)) {
        char names[512];
        sched_list(names, sizeof names);
        return np_err(err, NP_STATUS_BAD_INPUT, "sched: unknown StarPU policy '%s' (known: %s)",
                      cfg->sched, names);
    }
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy_name = cfg->sched;
    conf.ncuda = 0;
    conf.nopencl = 0;
    int rc = starpu_init(&conf);
    if (rc)
        return np_err(err, NP_STATUS_INTERNAL,
                      "StarPU failed to start (%s); check STARPU_* "
                      "environment variables",
                      rc == -ENODEV ? "no worker available" : strerror(-rc));
    /* kernels run one per worker: BLAS threads would fight the workers for the cores, and
     * a fixed thread count keeps sgemm's summation order fixed */
    openblas_set_num_threads(1);
    np_sp_engine *e = calloc(1, sizeof *e);
    if (!e) {
        starpu_shutdown();
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory creating the StarPU engine");
    }
    e->cfg = *cfg;
    e->m = m;
    e->comm = np_comm_is_mpi(comm) ? comm : NULL;
    e->R = cfg->ranks;
    e->nb = cfg->batch / cfg->ranks;
    e->C = cfg->chunks;
    e->W = np_config_windows(cfg);
    e->cluster = cfg->cluster;
    e->fwp = cfg->pipeline == NP_PIPELINE_FWP || cfg->pipeline == NP_PIPELINE_NESTPIPE;
    e->ahead = cfg->pipeline == NP_PIPELINE_SEQUENTIAL || cfg->pipeline == NP_PIPELINE_FWP
                   ? 0
                   : NP_SLOTS - 1;
    e->sync = cfg->pipeline == NP_PIPELINE_DBP || cfg->pipeline == NP_PIPELINE_NESTPIPE;
    e->comm_worker = -1;
    int nw = (int)starpu_worker_get_count();
    if (e->R > 1 && nw >= 2) {
        /* the last worker runs the collectives; the compute context keeps the others */
        int ids[STARPU_NMAXWORKERS];
        for (int w = 0; w < nw - 1; w++)
            ids[w] = w;
        e->comm_worker = nw - 1;
        e->compute_ctx = starpu_sched_ctx_create(ids, nw - 1, "compute",
                                                 STARPU_SCHED_CTX_POLICY_NAME, cfg->sched, 0);
    }
    e->ch = calloc((size_t)e->W * (size_t)e->C, sizeof *e->ch);
    e->Rin = calloc((size_t)e->W, sizeof *e->Rin);
    e->grows = calloc((size_t)e->W, sizeof *e->grows);
    np_status st = e->ch && e->Rin && e->grows
                       ? NP_OK
                       : np_err(err, NP_STATUS_NO_MEMORY, "out of memory (chunks)");
    if (!st && cfg->trace[0]) {
        /* one time origin for all ranks: everyone leaves this barrier at about the same time */
        if (np_comm_barrier(e->comm, NP_CHAN_CTL))
            st = np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI barrier failed", cfg->rank);
        e->t0_us = starpu_timing_now();
        if (!st) st = np_trace_create(&e->trace, err);
        if (!st) {
            starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
            for (unsigned w = 0; w < starpu_worker_get_count(); w++) {
                char name[64];
                starpu_worker_get_name((int)w, name, sizeof name);
                np_trace_set_worker_name(e->trace, (int)w, name);
            }
        }
    }
    if (st) {
        np_engine_free(e);
        return st;
    }
    int T = m->T;
    size_t total_rows = (size_t)m->row_base[T];
    starpu_vector_data_register(&e->params, STARPU_MAIN_RAM, (uintptr_t)m->dense,
                                (uint32_t)m->n_dense, sizeof(float));
    if (total_rows > UINT32_MAX) {
        np_engine_free(e);
        return np_err(err, NP_STATUS_UNSUPPORTED, "rows: %zu rows in all exceed 2^32", total_rows);
    }
    starpu_vector_data_register(&e->tables, STARPU_MAIN_RAM, (uintptr_t)m->table_mem,
                                (uint32_t)total_rows, (size_t)m->d * sizeof(float));
    if (m->state_mem)
        starpu_vector_data_register(&e->state, STARPU_MAIN_RAM, (uintptr_t)m->state_mem,
                                    (uint32_t)total_rows, sizeof(float));
    size_t nb = (size_t)e->nb;
    for (int k = 0; k < NP_SLOTS && !st; k++) {
        np_slot *sl = &e->slot[k];
        if (!st) st = buf_reg(&sl->dense, nb * cfg->bottom[0], sizeof(float), "batch dense", err);
        if (!st) st = buf_reg(&sl->label, nb, sizeof(float), "batch labels", err);
        if (!st)
            st =
                buf_reg(&sl->offsets, (size_t)T * (nb + 1), sizeof(uint32_t), "batch offsets", err);
    }
    for (int k = 0; k < NP_RSETS && !st; k++)
        st = buf_reg(&e->rset[k].meta, NP_META_SIZE((size_t)T, (size_t)e->W, (size_t)e->R),
                     sizeof(int64_t), "batch counts", err);
    if (!st) st = buf_reg(&e->token, 1, sizeof(int64_t), "comm token", err);
    e->NL = m->n_bot + m->n_top;
    for (int L = 0; L < e->NL && !st; L++) {
        size_t n = layer_floats(m, L);
        st = buf_reg(&e->glocal[L], n, sizeof(float), "dense grads", err);
        if (!st) st = buf_reg(&e->gdense[L], n, sizeof(float), "summed dense grads", err);
        if (!st) st = buf_reg(&e->gall[L], n * (size_t)e->R, sizeof(float), "all-gather staging", err);
    }
    if (st) {
        np_engine_free(e);
        return st;
    }
    for (int w = 0; w < e->W; w++) { /* window w: samples [nb*w/W, nb*(w+1)/W), as in route */
        size_t w0 = nb * (size_t)w / (size_t)e->W, wn = nb * (size_t)(w + 1) / (size_t)e->W - w0;
        for (int c = 0; c < e->C; c++) {
            np_chunk *k = &e->ch[w * e->C + c];
            k->w = w;
            k->row0 = (long)(w0 + wn * (size_t)c / (size_t)e->C);
            k->n = (long)(w0 + wn * (size_t)(c + 1) / (size_t)e->C) - k->row0;
            if ((st = reg_chunk(e, k, err))) {
                np_engine_free(e);
                return st;
            }
        }
    }
    /* a first guess at the key count: hot keys per bag (at least one) for every table */
    size_t guess = nb * (size_t)T * (size_t)(cfg->hot > 1 ? cfg->hot + cfg->hot / 2 : 1);
    size_t guess_win = (guess + (size_t)e->W - 1) / (size_t)e->W;
    if ((st = grow_nnz_buffers(e, guess, guess * (size_t)e->R, guess_win, err))) {
        np_engine_free(e);
        return st;
    }
    *out = e;
    return NP_OK;
}

/* ---------------------------------------------------------------- one batch */

/* Arguments of layer L on n rows, its input starting x_off floats in: W and b where the
 * parameters hold them, their gradients at the start of the layer's gradient buffer. */
static np_cl_linear_args linear_args(const np_layer *L, long n, size_t x_off) {
    return (np_cl_linear_args){.n = n,
                               .in = L->in,
                               .out = L->out,
                               .x_off = x_off,
                               .w_off = L->w_off,
                               .b_off = L->b_off,
                               .gb_off = (size_t)L->in * L->out};
}

static np_status submit_chunk(np_sp_engine *e, np_task_ctx *ctx, np_chunk *k, const np_slot *sl,
                              const np_rset *rs, np_error *err) {
    const np_model_t *m = e->m;
    np_status st = NP_OK;
    int T = m->T, d = m->d, nd = m->cfg.bottom[0];
    np_cl_emb_args ea = {.nb = e->nb,
                         .row0 = k->row0,
                         .n = k->n,
                         .T = T,
                         .d = d,
                         .w = k->w,
                         .zero = k == &e->ch[k->w * e->C]};
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((st = (call))) return st;                                                              \
    } while (0)
    /* forward: bottom MLP */
    for (int i = 0; i < m->n_bot; i++) {
        const np_layer *L = &m->bot[i];
        np_cl_linear_args a = linear_args(L, k->n, i ? 0 : (size_t)k->row0 * nd);
        np_h x = i ? k->act_bot[i - 1].h : sl->dense.h;
        TRY(np_submit_linear_fwd(ctx, &a, x, e->params, k->act_bot[i].h, err));
        TRY(np_submit_relu_fwd(ctx, (size_t)k->n * L->out, k->act_bot[i].h, err));
    }
    /* embeddings and interaction */
    TRY(np_submit_pool_fwd(ctx, &ea, e->Rin[k->w].h, sl->offsets.h, rs->pos.h, k->P.h, err));
    TRY(np_submit_interact_fwd(ctx, &ea, k->act_bot[m->n_bot - 1].h, k->P.h, k->F.h, k->Z.h, err));
    /* top MLP and loss */
    for (int i = 0; i < m->n_top; i++) {
        const np_layer *L = &m->top[i];
        np_cl_linear_args a = linear_args(L, k->n, 0);
        np_h x = i ? k->act_top[i - 1].h : k->Z.h;
        TRY(np_submit_linear_fwd(ctx, &a, x, e->params, k->act_top[i].h, err));
        if (L->relu) TRY(np_submit_relu_fwd(ctx, (size_t)k->n * L->out, k->act_top[i].h, err));
    }
    /* the loss is the mean over the GLOBAL batch: every rank scales by 1/G */
    np_cl_bce_args ba = {.row0 = k->row0, .n = k->n, .scale = 1.0f / (float)e->cfg.batch};
    TRY(np_submit_bce(ctx, &ba, k->act_top[m->n_top - 1].h, sl->label.h, k->loss.h,
                      k->dact_top[m->n_top - 1].h, err));
    /* backward: top MLP */
    for (int i = m->n_top - 1; i >= 0; i--) {
        const np_layer *L = &m->top[i];
        np_cl_linear_args a = linear_args(L, k->n, 0);
        if (L->relu)
            TRY(np_submit_relu_bwd(ctx, (size_t)k->n * L->out, k->act_top[i].h, k->dact_top[i].h,
                                   err));
        np_h x = i ? k->act_top[i - 1].h : k->Z.h;
        np_h dx = i ? k->dact_top[i - 1].h : k->dZ.h;
        TRY(np_submit_linear_bwd(ctx, &a, x, e->params, k->dact_top[i].h, k->gd[m->n_bot + i].h,
                                 dx, err));
    }
    TRY(np_submit_interact_bwd(ctx, &ea, k->F.h, k->dZ.h, k->dF.h, k->dbot.h, k->dP.h, err));
    /* backward: bottom MLP */
    for (int i = m->n_bot - 1; i >= 0; i--) {
        const np_layer *L = &m->bot[i];
        np_cl_linear_args a = linear_args(L, k->n, i ? 0 : (size_t)k->row0 * nd);
        np_h dy = i == m->n_bot - 1 ? k->dbot.h : k->dact_bot[i].h;
        TRY(np_submit_relu_bwd(ctx, (size_t)k->n * L->out, k->act_bot[i].h, dy, err));
        np_h x = i ? k->act_bot[i - 1].h : sl->dense.h;
        np_h dx = i ? k->dact_bot[i - 1].h : NULL;
        TRY(np_submit_linear_bwd(ctx, &a, x, e->params, dy, k->gd[i].h, dx, err));
    }
    /* embedding-row gradients of this chunk, added to its window's */
    TRY(np_submit_pool_bwd(ctx, &ea, k->dP.h, sl->offsets.h, rs->pos.h, rs->meta.h,
                           e->grows[k->w].h, err));
#undef TRY
    return NP_OK;
}

/* Everything a batch's tasks share: its place in the graph and the codelets' arguments. */
typedef struct batch_args {
    np_task_ctx ctx;
    np_cl_xchg_args xa;
    np_cl_rows_args wa;
    np_cl_sparse_args sa;
    np_cl_dense_args da;
    np_cl_sync_args ya;
} batch_args;

static void make_args(np_sp_engine *e, long batch, batch_args *b) {
    const np_model_t *m = e->m;
    int adagrad = m->cfg.sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD;
    b->ctx = (np_task_ctx){.batch = batch,
                           .window = -1,
                           .rank = e->cfg.rank,
                           .trace = e->trace,
                           .comm_worker = e->comm_worker,
                           .compute_ctx = e->compute_ctx};
    b->xa = (np_cl_xchg_args){.cfg = &e->cfg,
                              .comm = e->comm,
                              .nb = e->nb,
                              .T = m->T,
                              .d = m->d,
                              .R = e->R,
                              .W = e->W,
                              .cap_recv = e->cap_recv,
                              .cap_win = e->cap_win,
                              .n = m->n_dense,
                              .fail = &e->fail,
                              .bytes = e->bytes};
    b->wa = (np_cl_rows_args){.T = m->T, .d = m->d, .with_state = adagrad, .row_base = m->row_base};
    b->sa = (np_cl_sparse_args){
        .d = m->d, .adagrad = adagrad, .lr = (float)m->cfg.lr, .eps = (float)m->cfg.adagrad_eps};
    b->da = (np_cl_dense_args){.n = m->n_dense, .lr = (float)m->cfg.lr};
    b->ya = (np_cl_sync_args){.T = m->T, .d = m->d, .with_state = adagrad, .synced = &e->synced};
}

static np_slot *slot_of(np_sp_engine *e, long b) {
    return &e->slot[b % NP_SLOTS];
}

static np_rset *rset_of(np_sp_engine *e, long b) {
    return &e->rset[b % NP_RSETS];
}

/* Stages 1-4 of batch b, each a separate call so the driver can run them ahead. */
static np_status submit_prefetch(np_sp_engine *e, long b, const np_batch *src, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_h h[4] = {sl->dense.h, sl->label.h, sl->offsets.h, sl->keys.h};
    np_cl_prefetch_args pa = {.src = src, .W = e->W, .cluster = e->cluster, .fail = &e->fail};
    return np_submit_prefetch(&a.ctx, &pa, h, err);
}

static np_status submit_h2d(np_sp_engine *e, long b, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_h h[4] = {sl->dense.h, sl->label.h, sl->offsets.h, sl->keys.h};
    return np_submit_h2d(&a.ctx, h, err);
}

static np_status submit_route(np_sp_engine *e, long b, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_rset *r = rset_of(e, b);
    np_status st;
    if ((st = np_submit_route(&a.ctx, &a.xa, sl->offsets.h, sl->keys.h, r->uniq.h, r->pos.h,
                              r->sendkeys.h, r->meta.h, err)) ||
        (st = np_submit_a2a_keys(&a.ctx, &a.xa, r->meta.h, r->sendkeys.h, r->recvkeys.h, e->token.h,
                                 err)))
        return st;
    return np_submit_route_owner(&a.ctx, &a.xa, r->recvkeys.h, r->meta.h, r->uniq_o.h, r->map.h,
                                 err);
}

/* Retrieve of batch b reads the table: submitted after writeback(b-2) and before
 * writeback(b-1), so rows of U_b not in U_{b-1} are fresh and the others are refreshed by
 * sync(b). */
static np_status submit_retrieve(np_sp_engine *e, long b, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    np_rset *r = rset_of(e, b);
    return np_submit_retrieve(&a.ctx, &a.wa, e->tables, r->uniq_o.h, r->meta.h, e->E[b % 2].h,
                              e->state, e->Es[b % 2].h, err);
}

/* Dual-buffer sync: rows of U_{b-1} and U_b, updated by batch b-1, copied into b's buffer. */
static np_status submit_sync(np_sp_engine *e, long b, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    np_rset *prev = rset_of(e, b - 1), *cur = rset_of(e, b);
    return np_submit_sync(&a.ctx, &a.ya, e->E[(b - 1) % 2].h, prev->uniq_o.h, prev->meta.h,
                          e->E[b % 2].h, cur->uniq_o.h, cur->meta.h, e->Es[(b - 1) % 2].h,
                          e->Es[b % 2].h, err);
}

/* Window w of batch b gets its rows. Window 0's (and with fwp window 1's) are submitted
 * before the later batches' route, so their key All2All (same comm token) does not delay
 * them. */
static np_status submit_exchange_rows(np_sp_engine *e, long b, int w, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    a.ctx.window = w;
    a.xa.w = w;
    np_rset *r = rset_of(e, b);
    return np_submit_exchange_rows(&a.ctx, &a.xa, e->E[b % 2].h, r->map.h, r->meta.h,
                                   e->Rin[w].h, e->sbuf.h, e->token.h, err);
}

/* Window w of batch b returns its row gradients; the owner adds them to gE. */
static np_status submit_exchange_grads(np_sp_engine *e, long b, int w, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    a.ctx.window = w;
    a.xa.w = w;
    np_rset *r = rset_of(e, b);
    return np_submit_exchange_grads(&a.ctx, &a.xa, e->grows[w].h, r->map.h, r->meta.h, e->gE.h,
                                    e->rbuf.h, e->token.h, err);
}

/* Windows whose rows np_engine_submit sends before the later batches' stages. */
static int early_windows(const np_sp_engine *e) {
    return e->fwp && e->W > 1 ? 2 : 1;
}

/* The dense gradients of batch b, submitted after its last window w: layer by layer in
 * backward order, each summed over the chunks (chunk order) and all-reduced (rank order),
 * so a top layer's all-reduce travels while the last window is still in its lower layers;
 * then the update. The last window's row gradients go between the top and the bottom
 * layers: the sparse update and the next batch's sync then run during the bottom layers'
 * all-reduce. */
static np_status submit_dense_reduce(np_sp_engine *e, long b, int w, np_error *err) {
    const np_model_t *m = e->m;
    batch_args a;
    make_args(e, b, &a);
    np_h parts[64];
    int K = e->W * e->C;
    np_status st;
    for (int L = e->NL - 1; L >= 0; L--) {
        if (L == m->n_bot - 1 && (st = submit_exchange_grads(e, b, w, err))) return st;
        a.ctx.window = -1;
        a.xa.n = layer_floats(m, L);
        for (int k = 0; k < K; k++)
            parts[k] = e->ch[k].gd[L].h;
        if ((st = np_submit_sum(&a.ctx, NP_NODE_BWD, K, parts, a.xa.n, NULL, 0, 0,
                                e->glocal[L].h, err)) ||
            (st = np_submit_allreduce(&a.ctx, &a.xa, e->glocal[L].h, e->gdense[L].h,
                                      e->gall[L].h, e->token.h, err)))
            return st;
    }
    for (int L = 0; L < e->NL; L++) {
        a.da.n = layer_floats(m, L);
        a.da.off = layer_at(m, L)->w_off;
        if ((st = np_submit_dense_update(&a.ctx, &a.da, e->params, e->gdense[L].h, err)))
            return st;
    }
    return NP_OK;
}

/* The rest of stage 5: window after window, forward/backward chunk by chunk and the
 * window's gradients back; then the dense all-reduce, the updates and the write-back.
 * The comm token orders the exchanges. fwp: rows(0), rows(1), grads(0), rows(2),
 * grads(1), ...: window w+1's rows travel while w computes, and w's gradients while w+1
 * computes. Otherwise rows(w) follows grads(w-1), so windows run one after another.
 * Either way the parameters stay frozen until the updates at the end of the batch, and
 * every sum runs in the same order: the modes differ in time only. */
static np_status submit_train(np_sp_engine *e, long b, np_error *err) {
    batch_args a;
    make_args(e, b, &a);
    np_slot *sl = slot_of(e, b);
    np_rset *r = rset_of(e, b);
    np_buf *E = &e->E[b % 2], *Es = &e->Es[b % 2];
    np_status st;
    int ahead = e->fwp ? 1 : 0;
    for (int w = 0; w < e->W; w++) {
        int next = w + ahead; /* the window whose rows go now, if not sent yet */
        if (next >= early_windows(e) && next < e->W &&
            (st = submit_exchange_rows(e, b, next, err)))
            return st;
        for (int c = 0; c < e->C; c++) { /* a window's chunks run in parallel */
            a.ctx.window = w;
            a.ctx.boost = e->W - w;
            if ((st = submit_chunk(e, &a.ctx, &e->ch[w * e->C + c], sl, r, err))) return st;
        }
        /* the last window's row gradients go inside the dense reduction */
        st = w < e->W - 1 ? submit_exchange_grads(e, b, w, err) : submit_dense_reduce(e, b, w, err);
        if (st) return st;
    }
    a.ctx.window = -1;
    if ((st = np_submit_sparse_update(&a.ctx, &a.sa, E->h, e->gE.h, r->meta.h, Es->h, err)) ||
        (st = np_submit_writeback(&a.ctx, &a.wa, E->h, r->uniq_o.h, r->meta.h, e->tables, Es->h,
                                  e->state, err)))
        return st;
    return NP_OK;
}

/* Before batch b enters the pipeline: room for its keys on every rank (a control
 * all-reduce of the largest key count, so all ranks take part), growing the buffers after
 * draining what is in flight, which keeps their contents. */
static int cmp_desc(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a < b) - (a > b);
}

/* The most keys any window of b can hold, whichever samples clustering puts together: the
 * keys of its ceil(nb/W) largest samples. */
static np_status window_keys_bound(const np_batch *b, int W, size_t *out, np_error *err) {
    *out = b->nnz;
    if (W == 1) return NP_OK;
    uint32_t *cnt = calloc((size_t)b->n + 1, sizeof *cnt);
    if (!cnt) return np_err(err, NP_STATUS_NO_MEMORY, "out of memory sizing the windows");
    for (int t = 0; t < b->n_tables; t++) {
        const uint32_t *o = b->offsets + (size_t)t * (size_t)(b->n + 1);
        for (long s = 0; s < b->n; s++)
            cnt[s] += o[s + 1] - o[s];
    }
    qsort(cnt, (size_t)b->n, sizeof *cnt, cmp_desc);
    size_t sum = 0;
    for (long s = 0; s < (b->n + W - 1) / W; s++)
        sum += cnt[s];
    free(cnt);
    if (sum < b->nnz) *out = sum;
    return NP_OK;
}

static np_status make_room(np_sp_engine *e, const np_batch *b, np_error *err) {
    int64_t max_nnz = (int64_t)b->nnz;
    if (e->comm && np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &max_nnz, 1))
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed agreeing on batch sizes",
                      e->cfg.rank);
    size_t need = (size_t)b->nnz, need_recv = (size_t)max_nnz * (size_t)e->R, need_win;
    np_status st = window_keys_bound(b, e->W, &need_win, err);
    if (st) return st;
    if (need <= e->cap_nnz && need_recv <= e->cap_recv && need_win <= e->cap_win) return NP_OK;
    starpu_task_wait_for_all();
    /* grow what is short, at least doubling */
#define GROW(cur, want) ((want) <= (cur) ? (cur) : (cur) * 2 > (want) ? (cur) * 2 : (want))
    size_t cap = GROW(e->cap_nnz, need), cap_recv = GROW(e->cap_recv, need_recv);
    size_t cap_win = GROW(e->cap_win, need_win);
#undef GROW
    return grow_nnz_buffers(e, cap, cap_recv, cap_win, err);
}

static np_status submit_stage(np_sp_engine *e, int s, long b, const np_batch *src, np_error *err) {
    np_status st;
    switch (s) {
    case 0:
        return (st = make_room(e, src, err)) ? st : submit_prefetch(e, b, src, err);
    case 1:
        return submit_h2d(e, b, err);
    case 2:
        return submit_route(e, b, err);
    default:
        return submit_retrieve(e, b, err);
    }
}

np_status np_engine_submit(np_sp_engine *e, const np_batch *const *b, int n, np_error *err) {
    const np_model_t *m = e->m;
    long t = e->step;
    if (n < 1) return np_err(err, NP_STATUS_INTERNAL, "step %ld: no batch given", t + 1);
    for (int i = 0; i < n; i++)
        if (b[i]->n != e->nb || b[i]->n_tables != m->T || b[i]->n_dense != m->cfg.bottom[0])
            return np_err(err, NP_STATUS_INTERNAL,
                          "batch shape (n=%ld, dense=%d, tables=%d) does not fit the engine "
                          "(n=%ld, dense=%d, tables=%d)",
                          b[i]->n, b[i]->n_dense, b[i]->n_tables, e->nb, m->cfg.bottom[0], m->T);
    e->pending = 1;
    np_status st = NP_OK;
    /* 1. the training batch's own early stages, if no look-ahead ran them (sequential,
     *    the first steps) */
    for (int s = 0; s < 4 && !st; s++)
        for (; e->next[s] <= t && !st; e->next[s]++)
            st = submit_stage(e, s, t, b[0], err);
    /* 2. its rows to their requesters; then the stages of the batches ahead, in DESIGN.md's
     *    order prefetch(t+4), h2d(t+3), route(t+2), retrieve(t+1), each never past the newest
     *    batch the driver has read. Retrieve(t+1) stays before write-back(t): the rule. */
    for (int w = 0; w < early_windows(e) && !st; w++)
        st = submit_exchange_rows(e, t, w, err);
    static const int lag[4] = {4, 3, 2, 1};
    long last = t + (n - 1 < e->ahead ? n - 1 : e->ahead);
    for (int s = 0; s < 4 && !st; s++) {
        long upto = t + lag[s] < last ? t + lag[s] : last;
        for (; e->next[s] <= upto && !st; e->next[s]++)
            st = submit_stage(e, s, e->next[s], b[e->next[s] - t], err);
    }
    /* 3. the rest of training batch t, then (dbp) the sync of the rows t+1 shares with t:
     *    t+1 was retrieved before write-back(t) */
    if (!st) st = submit_train(e, t, err);
    if (!st && e->sync && e->next[3] > t + 1) st = submit_sync(e, t + 1, err);
    if (st) starpu_task_wait_for_all(); /* leave nothing half-submitted running */
    return st;
}

np_status np_engine_wait(np_sp_engine *e, double *loss, np_error *err) {
    long t = e->step;
    if (!e->pending) return np_err(err, NP_STATUS_INTERNAL, "wait without a submitted step");
    e->pending = 0;
    if (!e->ahead) {
        starpu_task_wait_for_all(); /* sequential: batch t+1 starts after t ends */
    } else {
        /* pipelined: wait for this batch's loss only; the rest keeps running */
        for (int c = 0; c < e->W * e->C; c++) {
            starpu_data_acquire(e->ch[c].loss.h, STARPU_R);
            starpu_data_release(e->ch[c].loss.h);
        }
    }
    if (e->fail)
        return np_err(err, NP_STATUS_INTERNAL,
                      "rank %d, step %ld: a key was out of its table's range, memory ran out "
                      "or an exchange failed",
                      e->cfg.rank, t + 1);
    double sum = 0;
    for (int c = 0; c < e->W * e->C; c++)
        sum += *(double *)e->ch[c].loss.mem; /* fixed order */
    *loss = sum / (double)e->cfg.batch;      /* this rank's share of the global mean */
    e->step++;
    return NP_OK;
}

np_status np_engine_step(np_sp_engine *e, const np_batch *const *b, int n, double *loss,
                         np_error *err) {
    np_status st = np_engine_submit(e, b, n, err);
    return st ? st : np_engine_wait(e, loss, err);
}

/* ---------------------------------------------------------------- traces */

/* An event on the wire between ranks: the name travels as text (pointers do not). */
typedef struct wire_event {
    char name[32];
    int32_t kind, window, rank, worker;
    int64_t batch;
    double start_us, end_us;
    uint64_t bytes;
} wire_event;

/* Maps a task name received from another rank to this process's codelet name string, which
 * outlives the trace (every rank runs the same codelets). */
static const char *codelet_name(const char *name) {
    static struct starpu_codelet *all[] = {
        &np_cl_linear_fwd,   &np_cl_linear_bwd,  &np_cl_relu_fwd,      &np_cl_relu_bwd,
        &np_cl_pool_fwd,     &np_cl_pool_bwd,    &np_cl_interact_fwd,  &np_cl_interact_bwd,
        &np_cl_bce_fwd,      &np_cl_bce_bwd,     &np_cl_sum,           &np_cl_route,
        &np_cl_a2a_keys,     &np_cl_route_owner, &np_cl_exchange_rows, &np_cl_exchange_grads,
        &np_cl_allreduce,    &np_cl_gather,      &np_cl_scatter,       &np_cl_sparse_update,
        &np_cl_dense_update, &np_cl_prefetch,    &np_cl_h2d,           &np_cl_sync};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!strcmp(all[i]->name, name)) return all[i]->name;
    return NULL;
}

/* Every rank's events, times relative to the common origin, merged on rank 0 (the others
 * get NULL). Collective over the control channel. */
static np_status merge_traces(np_sp_engine *e, np_trace **out, np_error *err) {
    *out = NULL;
    int R = e->R, me = e->cfg.rank;
    int64_t n = (int64_t)np_trace_count(e->trace);
    int64_t *counts = calloc((size_t)R, sizeof *counts);
    wire_event *mine = calloc((size_t)n + 1, sizeof *mine), *all = NULL;
    np_status st = counts && mine ? NP_OK : np_err(err, NP_STATUS_NO_MEMORY, "trace: no memory");
    for (int64_t i = 0; !st && i < n; i++) {
        const np_trace_event *ev = np_trace_get(e->trace, (size_t)i);
        snprintf(mine[i].name, sizeof mine[i].name, "%s", ev->name ? ev->name : "?");
        mine[i].kind = (int32_t)ev->kind;
        mine[i].window = ev->window;
        mine[i].rank = me;
        mine[i].worker = ev->worker;
        mine[i].batch = ev->batch;
        mine[i].start_us = ev->start_us - e->t0_us;
        mine[i].end_us = ev->end_us - e->t0_us;
        mine[i].bytes = ev->bytes;
    }
    int64_t total = 0, bad = st != NP_OK;
    if (np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &bad, 1) ||
        (!bad && np_comm_allgather(e->comm, NP_CHAN_CTL, &n, counts, 1, sizeof n)))
        bad = 1;
    for (int r = 0; r < R; r++)
        total += counts[r];
    if (!bad && me == 0 && !(all = calloc((size_t)total + 1, sizeof *all))) bad = 1;
    if (!bad && np_comm_gatherv(e->comm, NP_CHAN_CTL, mine, n, all, counts, sizeof *all)) bad = 1;
    np_trace *merged = NULL;
    if (!bad && me == 0 && !(st = np_trace_create(&merged, err))) {
        for (unsigned w = 0; w < starpu_worker_get_count(); w++) {
            char name[64];
            starpu_worker_get_name((int)w, name, sizeof name);
            np_trace_set_worker_name(merged, (int)w, name);
        }
        for (int64_t i = 0; i < total; i++) {
            all[i].name[sizeof all[i].name - 1] = 0;
            np_trace_event ev = {.name = codelet_name(all[i].name),
                                 .kind = (np_node_kind)all[i].kind,
                                 .batch = (long)all[i].batch,
                                 .window = all[i].window,
                                 .rank = all[i].rank,
                                 .worker = all[i].worker,
                                 .start_us = all[i].start_us,
                                 .end_us = all[i].end_us,
                                 .bytes = all[i].bytes};
            if (np_trace_record(merged, &ev)) {
                st = np_err(err, NP_STATUS_NO_MEMORY, "trace: no memory merging ranks");
                break;
            }
        }
    }
    free(counts);
    free(mine);
    free(all);
    if (bad && !st) st = np_err(err, NP_STATUS_INTERNAL, "rank %d: merging the trace failed", me);
    if (st) {
        np_trace_free(merged);
        return st;
    }
    *out = merged;
    return NP_OK;
}

np_status np_engine_finish(np_sp_engine *e, np_error *err) {
    starpu_task_wait_for_all();
    if (!e->trace) return NP_OK;
    if (np_trace_dropped(e->trace))
        return np_err(err, NP_STATUS_NO_MEMORY, "trace: %zu events lost for lack of memory",
                      np_trace_dropped(e->trace));
    np_trace *merged = NULL;
    np_status st = merge_traces(e, &merged, err);
    if (!st && merged) st = np_trace_write_chrome(merged, e->cfg.trace, err);
    /* keep the merged trace for the metrics of a traced run (rank 0) */
    np_trace_free(e->merged);
    e->merged = merged;
    return st;
}

int np_engine_lookahead(const np_sp_engine *e) {
    return e->ahead;
}

void np_engine_bytes(const np_sp_engine *e, uint64_t out[4]) {
    memcpy(out, e->bytes, sizeof e->bytes);
}

uint64_t np_engine_synced_rows(const np_sp_engine *e) {
    return e->synced;
}

const np_trace *np_engine_trace(const np_sp_engine *e) {
    return e->merged;
}
