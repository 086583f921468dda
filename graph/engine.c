/* The StarPU engine: owns every buffer of the per-batch graph, registers them as data
 * handles, and submits each batch's tasks in an order whose access modes encode the
 * dependencies (DESIGN.md "The training step"). One rank; --pipeline sequential: the
 * driver waits for batch t before submitting t+1. Not here: the arithmetic (codelets/) or
 * which modes a node uses (tasks/). */
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
} np_buf;

/* Buffers of one row chunk of the batch (rows [row0, row0+n)). */
typedef struct np_chunk {
    long row0, n;
    np_buf act_bot[NP_MAX_LAYERS];  /* (n, bot[i].out) post-ReLU */
    np_buf dact_bot[NP_MAX_LAYERS]; /* (n, bot[i].out) grads; [last] unused (dbot) */
    np_buf act_top[NP_MAX_LAYERS];  /* (n, top[i].out); the last holds logits */
    np_buf dact_top[NP_MAX_LAYERS]; /* (n, top[i].out) */
    np_buf P, dP;                   /* (n, T, d) pooled embeddings and their grads */
    np_buf F, dF;                   /* (n, T+1, d) interaction inputs and grads */
    np_buf Z, dZ;                   /* (n, top_in) */
    np_buf dbot;                    /* (n, d) grad of the bottom output */
    np_buf loss;                    /* (1) double: BCE sum of the chunk */
    np_buf gdense;                  /* (n_dense) this chunk's dense gradient */
    np_buf grows;                   /* (cap_nnz, d) this chunk's embedding-row grads */
} np_chunk;

struct np_sp_engine {
    np_config cfg;
    np_model_t *m;
    np_comm *comm;   /* NULL: one rank, no MPI */
    int R;           /* ranks */
    long nb;         /* samples per local batch (global batch / ranks) */
    int C;           /* chunks */
    size_t cap_nnz;  /* capacity of the requester-side key buffers */
    size_t cap_recv; /* capacity of the owner-side buffers */
    /* model */
    np_h params, tables, state;
    /* input slot */
    np_buf in_dense;   /* (nb, n_dense) */
    np_buf in_label;   /* (nb) */
    np_buf in_offsets; /* (T, nb+1) uint32 */
    np_buf in_keys;    /* (cap_nnz) int64 */
    /* requester side, sized by cap_nnz */
    np_buf uniq;     /* (cap_nnz) int64 distinct keys per table, table after table */
    np_buf pos;      /* (cap_nnz) int64 row of Rin each key reads */
    np_buf sendkeys; /* (cap_nnz) int64 owner-local rows, grouped by owner */
    np_buf Rin;      /* (cap_nnz, d) received rows */
    np_buf grows;    /* (cap_nnz, d) their summed gradients */
    /* owner side, sized by cap_recv */
    np_buf recvkeys;   /* (cap_recv) int64 requested local rows, by requester */
    np_buf uniq_o;     /* (cap_recv) int64 distinct local rows per table */
    np_buf map;        /* (cap_recv) int64 E row of each received key */
    np_buf E;          /* (cap_recv, d) retrieved rows, updated in place */
    np_buf Es;         /* (cap_recv) their Adagrad state */
    np_buf gE;         /* (cap_recv, d) their summed gradients */
    np_buf sbuf, rbuf; /* (cap_recv, d) exchange staging */
    /* batch-wide */
    np_buf meta;   /* (NP_META_SIZE) int64 counts */
    np_buf token;  /* (1) the comm token: every collective takes it RW */
    np_buf glocal; /* (n_dense) this rank's dense grads */
    np_buf gdense; /* (n_dense) summed over ranks */
    np_buf gall;   /* (R, n_dense) all-gather staging */
    np_chunk *ch;  /* (C) */
    np_trace *trace;
    np_trace *merged; /* rank 0 after np_engine_finish: every rank's events */
    double t0_us;     /* trace time origin: StarPU's clock right after a barrier of all ranks */
    int comm_worker;
    unsigned compute_ctx;
    int fail;
    uint64_t bytes[4]; /* sent: keys, rows, grads, all-reduce */
    long step;
};

/* ---------------------------------------------------------------- buffers */

static np_status buf_reg(np_buf *b, size_t count, size_t elem, const char *what, np_error *err) {
    size_t bytes = (count ? count : 1) * elem;
    if (count > UINT32_MAX)
        return np_err(err, NP_STATUS_UNSUPPORTED, "%s: %zu elements exceed a StarPU vector", what,
                      count);
    if (starpu_malloc(&b->mem, bytes))
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory allocating %s (%zu bytes)", what,
                      bytes);
    memset(b->mem, 0, bytes);
    starpu_vector_data_register(&b->h, STARPU_MAIN_RAM, (uintptr_t)b->mem,
                                (uint32_t)(count ? count : 1), elem);
    return NP_OK;
}

static void buf_unreg(np_buf *b) {
    if (b->h) starpu_data_unregister(b->h);
    if (b->mem) starpu_free(b->mem);
    b->h = NULL;
    b->mem = NULL;
}

/* The buffers whose size follows the number of keys in a batch. */
static np_status reg_nnz_buffers(np_sp_engine *e, size_t cap, size_t cap_recv, np_error *err) {
    size_t row = (size_t)e->m->d * sizeof(float);
    np_status st;
    e->cap_nnz = cap;
    e->cap_recv = cap_recv;
    if ((st = buf_reg(&e->in_keys, cap, sizeof(int64_t), "batch keys", err)) ||
        (st = buf_reg(&e->uniq, cap, sizeof(int64_t), "unique keys", err)) ||
        (st = buf_reg(&e->pos, cap, sizeof(int64_t), "key positions", err)) ||
        (st = buf_reg(&e->sendkeys, cap, sizeof(int64_t), "keys to send", err)) ||
        (st = buf_reg(&e->Rin, cap, row, "received rows", err)) ||
        (st = buf_reg(&e->grows, cap, row, "row gradients", err)) ||
        (st = buf_reg(&e->recvkeys, cap_recv, sizeof(int64_t), "received keys", err)) ||
        (st = buf_reg(&e->uniq_o, cap_recv, sizeof(int64_t), "owner rows", err)) ||
        (st = buf_reg(&e->map, cap_recv, sizeof(int64_t), "owner row map", err)) ||
        (st = buf_reg(&e->E, cap_recv, row, "embedding buffer", err)) ||
        (st = buf_reg(&e->Es, cap_recv, sizeof(float), "optimizer state buffer", err)) ||
        (st = buf_reg(&e->gE, cap_recv, row, "owner row gradients", err)) ||
        (st = buf_reg(&e->sbuf, cap_recv, row, "send staging", err)) ||
        (st = buf_reg(&e->rbuf, cap_recv, row, "receive staging", err)))
        return st;
    for (int c = 0; c < e->C; c++)
        if ((st = buf_reg(&e->ch[c].grows, cap, row, "chunk row gradients", err))) return st;
    return NP_OK;
}

static void unreg_nnz_buffers(np_sp_engine *e) {
    np_buf *all[] = {&e->in_keys, &e->uniq, &e->pos, &e->sendkeys, &e->Rin, &e->grows, &e->recvkeys,
                     &e->uniq_o,  &e->map,  &e->E,   &e->Es,       &e->gE,  &e->sbuf,  &e->rbuf};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        buf_unreg(all[i]);
    for (int c = 0; e->ch && c < e->C; c++)
        buf_unreg(&e->ch[c].grows);
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
    if (!st) st = buf_reg(&k->gdense, m->n_dense, sizeof(float), "chunk dense grads", err);
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
    buf_unreg(&k->gdense);
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
    unreg_nnz_buffers(e);
    for (int c = 0; e->ch && c < e->C; c++)
        unreg_chunk(&e->ch[c]);
    free(e->ch);
    buf_unreg(&e->in_dense);
    buf_unreg(&e->in_label);
    buf_unreg(&e->in_offsets);
    buf_unreg(&e->meta);
    buf_unreg(&e->token);
    buf_unreg(&e->glocal);
    buf_unreg(&e->gdense);
    buf_unreg(&e->gall);
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
    e->ch = calloc((size_t)e->C, sizeof *e->ch);
    np_status st = e->ch ? NP_OK : np_err(err, NP_STATUS_NO_MEMORY, "out of memory (chunks)");
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
    if ((st = buf_reg(&e->in_dense, nb * cfg->bottom[0], sizeof(float), "batch dense", err)) ||
        (st = buf_reg(&e->in_label, nb, sizeof(float), "batch labels", err)) ||
        (st = buf_reg(&e->in_offsets, (size_t)T * (nb + 1), sizeof(uint32_t), "batch offsets",
                      err)) ||
        (st = buf_reg(&e->meta, NP_META_SIZE((size_t)T, (size_t)e->R), sizeof(int64_t),
                      "batch counts", err)) ||
        (st = buf_reg(&e->token, 1, sizeof(int64_t), "comm token", err)) ||
        (st = buf_reg(&e->glocal, m->n_dense, sizeof(float), "dense grads", err)) ||
        (st = buf_reg(&e->gdense, m->n_dense, sizeof(float), "summed dense grads", err)) ||
        (st = buf_reg(&e->gall, m->n_dense * (size_t)e->R, sizeof(float), "all-gather staging",
                      err))) {
        np_engine_free(e);
        return st;
    }
    for (int c = 0; c < e->C; c++) {
        e->ch[c].row0 = (long)(nb * (size_t)c / (size_t)e->C);
        e->ch[c].n = (long)(nb * (size_t)(c + 1) / (size_t)e->C) - e->ch[c].row0;
        if ((st = reg_chunk(e, &e->ch[c], err))) {
            np_engine_free(e);
            return st;
        }
    }
    /* a first guess at the key count: hot keys per bag (at least one) for every table */
    size_t guess = nb * (size_t)T * (size_t)(cfg->hot > 1 ? cfg->hot + cfg->hot / 2 : 1);
    if ((st = reg_nnz_buffers(e, guess, guess * (size_t)e->R, err))) {
        np_engine_free(e);
        return st;
    }
    *out = e;
    return NP_OK;
}

/* ---------------------------------------------------------------- one batch */

static np_status submit_chunk(np_sp_engine *e, np_task_ctx *ctx, np_chunk *k, np_error *err) {
    const np_model_t *m = e->m;
    np_status st = NP_OK;
    int T = m->T, d = m->d, nd = m->cfg.bottom[0];
    np_cl_emb_args ea = {.nb = e->nb, .row0 = k->row0, .n = k->n, .T = T, .d = d};
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((st = (call))) return st;                                                              \
    } while (0)
    /* forward: bottom MLP */
    for (int i = 0; i < m->n_bot; i++) {
        const np_layer *L = &m->bot[i];
        np_cl_linear_args a = {.n = k->n,
                               .in = L->in,
                               .out = L->out,
                               .w_off = L->w_off,
                               .b_off = L->b_off,
                               .x_off = i ? 0 : (size_t)k->row0 * nd};
        np_h x = i ? k->act_bot[i - 1].h : e->in_dense.h;
        TRY(np_submit_linear_fwd(ctx, &a, x, e->params, k->act_bot[i].h, err));
        TRY(np_submit_relu_fwd(ctx, (size_t)k->n * L->out, k->act_bot[i].h, err));
    }
    /* embeddings and interaction */
    TRY(np_submit_pool_fwd(ctx, &ea, e->Rin.h, e->in_offsets.h, e->pos.h, k->P.h, err));
    TRY(np_submit_interact_fwd(ctx, &ea, k->act_bot[m->n_bot - 1].h, k->P.h, k->F.h, k->Z.h, err));
    /* top MLP and loss */
    for (int i = 0; i < m->n_top; i++) {
        const np_layer *L = &m->top[i];
        np_cl_linear_args a = {
            .n = k->n, .in = L->in, .out = L->out, .w_off = L->w_off, .b_off = L->b_off};
        np_h x = i ? k->act_top[i - 1].h : k->Z.h;
        TRY(np_submit_linear_fwd(ctx, &a, x, e->params, k->act_top[i].h, err));
        if (L->relu) TRY(np_submit_relu_fwd(ctx, (size_t)k->n * L->out, k->act_top[i].h, err));
    }
    /* the loss is the mean over the GLOBAL batch: every rank scales by 1/G */
    np_cl_bce_args ba = {.row0 = k->row0, .n = k->n, .scale = 1.0f / (float)e->cfg.batch};
    TRY(np_submit_bce(ctx, &ba, k->act_top[m->n_top - 1].h, e->in_label.h, k->loss.h,
                      k->dact_top[m->n_top - 1].h, err));
    /* backward: top MLP */
    for (int i = m->n_top - 1; i >= 0; i--) {
        const np_layer *L = &m->top[i];
        np_cl_linear_args a = {
            .n = k->n, .in = L->in, .out = L->out, .w_off = L->w_off, .b_off = L->b_off};
        if (L->relu)
            TRY(np_submit_relu_bwd(ctx, (size_t)k->n * L->out, k->act_top[i].h, k->dact_top[i].h,
                                   err));
        np_h x = i ? k->act_top[i - 1].h : k->Z.h;
        np_h dx = i ? k->dact_top[i - 1].h : k->dZ.h;
        TRY(np_submit_linear_bwd(ctx, &a, x, e->params, k->dact_top[i].h, k->gdense.h, dx, err));
    }
    TRY(np_submit_interact_bwd(ctx, &ea, k->F.h, k->dZ.h, k->dF.h, k->dbot.h, k->dP.h, err));
    /* backward: bottom MLP */
    for (int i = m->n_bot - 1; i >= 0; i--) {
        const np_layer *L = &m->bot[i];
        np_cl_linear_args a = {.n = k->n,
                               .in = L->in,
                               .out = L->out,
                               .w_off = L->w_off,
                               .b_off = L->b_off,
                               .x_off = i ? 0 : (size_t)k->row0 * nd};
        np_h dy = i == m->n_bot - 1 ? k->dbot.h : k->dact_bot[i].h;
        TRY(np_submit_relu_bwd(ctx, (size_t)k->n * L->out, k->act_bot[i].h, dy, err));
        np_h x = i ? k->act_bot[i - 1].h : e->in_dense.h;
        np_h dx = i ? k->dact_bot[i - 1].h : NULL;
        TRY(np_submit_linear_bwd(ctx, &a, x, e->params, dy, k->gdense.h, dx, err));
    }
    /* embedding-row gradients of this chunk */
    TRY(np_submit_pool_bwd(ctx, &ea, k->dP.h, e->in_offsets.h, e->pos.h, e->meta.h, k->grows.h,
                           err));
#undef TRY
    return NP_OK;
}

static np_status submit_batch(np_sp_engine *e, const np_batch *b, np_error *err) {
    const np_model_t *m = e->m;
    int T = m->T, d = m->d;
    np_task_ctx ctx = {.batch = e->step,
                       .window = -1,
                       .rank = e->cfg.rank,
                       .trace = e->trace,
                       .comm_worker = e->comm_worker,
                       .compute_ctx = e->compute_ctx};
    np_h slot[4] = {e->in_dense.h, e->in_label.h, e->in_offsets.h, e->in_keys.h};
    np_status st;
    int adagrad = m->cfg.sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD;
    np_cl_xchg_args xa = {.cfg = &e->cfg,
                          .comm = e->comm,
                          .nb = e->nb,
                          .T = T,
                          .d = d,
                          .R = e->R,
                          .cap_recv = e->cap_recv,
                          .n = m->n_dense,
                          .fail = &e->fail,
                          .bytes = e->bytes};
    np_cl_rows_args wa = {.T = T, .d = d, .with_state = adagrad, .row_base = m->row_base};
    np_cl_sparse_args sa = {
        .d = d, .adagrad = adagrad, .lr = (float)m->cfg.lr, .eps = (float)m->cfg.adagrad_eps};
    np_cl_dense_args da = {.n = m->n_dense, .lr = (float)m->cfg.lr};
    np_h parts[64];

    /* stages 1-4: input, route (two-phase All2All), retrieve, rows to their requesters */
    if ((st = np_submit_prefetch(&ctx, b, slot, err)) || (st = np_submit_h2d(&ctx, slot, err)) ||
        (st = np_submit_route(&ctx, &xa, e->in_offsets.h, e->in_keys.h, e->uniq.h, e->pos.h,
                              e->sendkeys.h, e->meta.h, err)) ||
        (st = np_submit_a2a_keys(&ctx, &xa, e->meta.h, e->sendkeys.h, e->recvkeys.h, e->token.h,
                                 err)) ||
        (st = np_submit_route_owner(&ctx, &xa, e->recvkeys.h, e->meta.h, e->uniq_o.h, e->map.h,
                                    err)) ||
        (st = np_submit_retrieve(&ctx, &wa, e->tables, e->uniq_o.h, e->meta.h, e->E.h, e->state,
                                 e->Es.h, err)) ||
        (st = np_submit_exchange_rows(&ctx, &xa, e->E.h, e->map.h, e->meta.h, e->Rin.h, e->sbuf.h,
                                      e->token.h, err)))
        return st;
    /* stage 5: dense forward/backward, chunk by chunk (chunks run in parallel) */
    for (int c = 0; c < e->C; c++) {
        ctx.window = c;
        if ((st = submit_chunk(e, &ctx, &e->ch[c], err))) return st;
    }
    ctx.window = -1;
    /* gradients: rows back to their owners, dense all-reduce, updates, write-back */
    for (int c = 0; c < e->C; c++)
        parts[c] = e->ch[c].grows.h;
    if ((st = np_submit_sum(&ctx, NP_NODE_BWD, e->C, parts, 0, e->meta.h, NP_META_UQ, d, e->grows.h,
                            err)) ||
        (st = np_submit_exchange_grads(&ctx, &xa, e->grows.h, e->map.h, e->meta.h, e->gE.h,
                                       e->rbuf.h, e->token.h, err)))
        return st;
    for (int c = 0; c < e->C; c++)
        parts[c] = e->ch[c].gdense.h;
    if ((st = np_submit_sum(&ctx, NP_NODE_BWD, e->C, parts, m->n_dense, NULL, 0, 0, e->glocal.h,
                            err)) ||
        (st = np_submit_allreduce(&ctx, &xa, e->glocal.h, e->gdense.h, e->gall.h, e->token.h,
                                  err)) ||
        (st = np_submit_sparse_update(&ctx, &sa, e->E.h, e->gE.h, e->meta.h, e->Es.h, err)) ||
        (st = np_submit_writeback(&ctx, &wa, e->E.h, e->uniq_o.h, e->meta.h, e->tables, e->Es.h,
                                  e->state, err)) ||
        (st = np_submit_dense_update(&ctx, &da, e->params, e->gdense.h, err)))
        return st;
    return NP_OK;
}

np_status np_engine_step(np_sp_engine *e, const np_batch *b, double *loss, np_error *err) {
    const np_model_t *m = e->m;
    if (b->n != e->nb || b->n_tables != m->T || b->n_dense != m->cfg.bottom[0])
        return np_err(err, NP_STATUS_INTERNAL,
                      "batch shape (n=%ld, dense=%d, tables=%d) does not fit the engine "
                      "(n=%ld, dense=%d, tables=%d)",
                      b->n, b->n_dense, b->n_tables, e->nb, m->cfg.bottom[0], m->T);
    np_status st;
    /* an owner receives at most every rank's keys: size its buffers from the largest batch
     * (a control collective, between batches, so it never meets the graph's) */
    int64_t max_nnz = (int64_t)b->nnz;
    if (e->comm && np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &max_nnz, 1))
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed agreeing on batch sizes",
                      e->cfg.rank);
    size_t need_recv = (size_t)max_nnz * (size_t)e->R;
    if (b->nnz > e->cap_nnz || need_recv > e->cap_recv) { /* nothing is in flight here */
        unreg_nnz_buffers(e);
        size_t cap = e->cap_nnz * 2 > b->nnz ? e->cap_nnz * 2 : b->nnz;
        size_t cap_recv = e->cap_recv * 2 > need_recv ? e->cap_recv * 2 : need_recv;
        if ((st = reg_nnz_buffers(e, cap, cap_recv, err))) return st;
    }
    e->fail = 0;
    st = submit_batch(e, b, err);
    starpu_task_wait_for_all(); /* sequential mode: batch t+1 starts after t ends */
    if (st) return st;
    if (e->fail)
        return np_err(err, NP_STATUS_INTERNAL,
                      "rank %d, step %ld: a key was out of its table's range, memory ran out "
                      "or an exchange failed",
                      e->cfg.rank, e->step + 1);
    double sum = 0;
    for (int c = 0; c < e->C; c++)
        sum += *(double *)e->ch[c].loss.mem; /* fixed order */
    *loss = sum / (double)e->cfg.batch;      /* this rank's share of the global mean */
    e->step++;
    return NP_OK;
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
    static struct starpu_codelet *all[] = {&np_cl_linear_fwd,
                                           &np_cl_linear_bwd,
                                           &np_cl_relu_fwd,
                                           &np_cl_relu_bwd,
                                           &np_cl_pool_fwd,
                                           &np_cl_pool_bwd,
                                           &np_cl_interact_fwd,
                                           &np_cl_interact_bwd,
                                           &np_cl_bce_fwd,
                                           &np_cl_bce_bwd,
                                           &np_cl_sum,
                                           &np_cl_route,
                                           &np_cl_a2a_keys,
                                           &np_cl_route_owner,
                                           &np_cl_exchange_rows,
                                           &np_cl_exchange_grads,
                                           &np_cl_allreduce,
                                           &np_cl_gather,
                                           &np_cl_scatter,
                                           &np_cl_sparse_update,
                                           &np_cl_dense_update,
                                           &np_cl_prefetch,
                                           &np_cl_h2d};
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

void np_engine_bytes(const np_sp_engine *e, uint64_t out[4]) {
    memcpy(out, e->bytes, sizeof e->bytes);
}

const np_trace *np_engine_trace(const np_sp_engine *e) {
    return e->merged;
}
