/* DLRM parameters: layout, deterministic initialisation from the seed, and the NPPARAMS
 * dump of the logical model. Not here: forward/backward (reference.c) or sharding. */
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "model/model.h"

int np_model_n_dense_tensors(const np_model_t *m) {
    return 2 * (m->n_bot + m->n_top);
}

/* Initialisation, after DLRM's reference code: W ~ N(0, sqrt(2/(in+out))),
 * b ~ N(0, sqrt(1/out)), table rows ~ U(-sqrt(1/rows), sqrt(1/rows)).
 * Tensor k (dense tensors in layer order W,b,W,b..., then tables) draws element e from
 * RNG stream NP_STREAM_PARAM + k, counter e. Tables are tensor 2L + t. */
float np_model_init_value(const np_config *cfg, int k, int fan_in, int fan_out, int64_t rows,
                          uint64_t e) {
    uint64_t stream = (uint64_t)NP_STREAM_PARAM + (uint64_t)k;
    if (rows > 0) { /* embedding table */
        double a = sqrt(1.0 / (double)rows);
        return (float)(a * (2.0 * np_rng_uniform(cfg->seed, stream, e) - 1.0));
    }
    double sd = fan_in > 0 ? sqrt(2.0 / (fan_in + fan_out)) : sqrt(1.0 / fan_out);
    return (float)(sd * np_rng_normal(cfg->seed, stream, e));
}

static size_t layout_mlp(np_layer *L, int n, const int *in_sizes, const int *out_sizes,
                         int last_relu, size_t off) {
    for (int i = 0; i < n; i++) {
        L[i].in = in_sizes[i];
        L[i].out = out_sizes[i];
        L[i].relu = (i < n - 1) || last_relu;
        L[i].w_off = off;
        off += (size_t)L[i].in * L[i].out;
        L[i].b_off = off;
        off += (size_t)L[i].out;
    }
    return off;
}

typedef struct init_job {
    np_model_t *m;
    int k0;         /* tensor index of table 0 */
    int64_t lo, hi; /* rows [lo, hi) of the table block */
} init_job;

static void *init_rows(void *arg) {
    const init_job *j = arg;
    np_model_t *m = j->m;
    const np_config *cfg = &m->cfg;
    size_t d = (size_t)m->d;
    int t = 0;
    for (int64_t r = j->lo; r < j->hi; r++) {
        while (r >= m->row_base[t + 1])
            t++;
        int64_t local = r - m->row_base[t];
        uint64_t g = (uint64_t)np_shard_global(cfg, t, cfg->rank, local);
        float *row = m->table_mem + (size_t)r * d;
        for (size_t col = 0; col < d; col++)
            row[col] = np_model_init_value(cfg, j->k0 + t, 0, 0, m->rows[t], g * d + col);
    }
    return NULL;
}

/* Initialises the table block on up to one thread per core (large tables take seconds). */
static void init_tables(np_model_t *m, int k0) {
    int64_t total = m->row_base[m->T];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cores > 1 ? (int)(cores < 64 ? cores : 64) : 1;
    if (total < 65536) n = 1; /* not worth a thread */
    pthread_t th[64];
    init_job jobs[64];
    int created[64] = {0};
    for (int i = 1; i < n; i++) {
        jobs[i] = (init_job){m, k0, total * i / n, total * (i + 1) / n};
        created[i] = pthread_create(&th[i], NULL, init_rows, &jobs[i]) == 0;
        if (!created[i]) init_rows(&jobs[i]); /* no thread: do its share here */
    }
    jobs[0] = (init_job){m, k0, 0, total / n};
    init_rows(&jobs[0]);
    for (int i = 1; i < n; i++)
        if (created[i]) pthread_join(th[i], NULL);
}

np_status np_model_create(const np_config *cfg, np_model_t **out, np_error *err) {
    *out = NULL;
    np_status st = np_config_check(cfg, err);
    if (st) return st;
    np_model_t *m = np_zalloc(1, sizeof *m, "model", err);
    if (!m) return NP_STATUS_NO_MEMORY;
    m->cfg = *cfg;
    m->T = cfg->tables;
    m->d = cfg->dim;
    m->n_bot = cfg->n_bottom - 1;
    m->n_top = cfg->n_top;

    /* bottom: sizes[i] -> sizes[i+1], ReLU everywhere (DLRM); top: ReLU but the last */
    int top_in[NP_MAX_LAYERS];
    top_in[0] = np_config_top_input(cfg);
    for (int i = 1; i < m->n_top; i++)
        top_in[i] = cfg->top[i - 1];
    size_t off = layout_mlp(m->bot, m->n_bot, cfg->bottom, cfg->bottom + 1, 1, 0);
    off = layout_mlp(m->top, m->n_top, top_in, cfg->top, 0, off);
    m->n_dense = off;

    m->dense = np_alloc(m->n_dense, sizeof(float), "dense parameters", err);
    m->rows = np_alloc((size_t)m->T, sizeof(int64_t), "row counts", err);
    m->row_base = np_alloc((size_t)m->T + 1, sizeof(int64_t), "row offsets", err);
    m->local_rows = np_alloc((size_t)m->T, sizeof(int64_t), "shard row counts", err);
    m->table = np_zalloc((size_t)m->T, sizeof(float *), "table pointers", err);
    if (cfg->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD)
        m->state = np_zalloc((size_t)m->T, sizeof(float *), "adagrad pointers", err);
    if (!m->dense || !m->rows || !m->row_base || !m->local_rows || !m->table ||
        (cfg->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD && !m->state)) {
        np_model_free(m);
        return NP_STATUS_NO_MEMORY;
    }

    int k = 0;
    for (int part = 0; part < 2; part++) {
        np_layer *L = part ? m->top : m->bot;
        int n = part ? m->n_top : m->n_bot;
        for (int i = 0; i < n; i++, k += 2) {
            float *W = m->dense + L[i].w_off, *b = m->dense + L[i].b_off;
            for (uint64_t e = 0; e < (uint64_t)L[i].in * L[i].out; e++)
                W[e] = np_model_init_value(cfg, k, L[i].in, L[i].out, 0, e);
            for (uint64_t e = 0; e < (uint64_t)L[i].out; e++)
                b[e] = np_model_init_value(cfg, k + 1, 0, L[i].out, 0, e);
        }
    }
    /* this rank's shard of every table in one block (and its Adagrad state in another):
     * one buffer for the engines to register; local rows of table t start at row_base[t] */
    int64_t total = 0;
    for (int t = 0; t < m->T; t++) {
        m->rows[t] = np_config_rows(cfg, t);
        m->local_rows[t] = np_shard_rows(cfg, t, cfg->rank, m->rows[t]);
        m->row_base[t] = total;
        total += m->local_rows[t];
    }
    m->row_base[m->T] = total;
    /* at least one row, so a rank that owns no rows (table-wise, R > T) still has a buffer */
    size_t alloc_rows = total > 0 ? (size_t)total : 1;
    m->table_mem = np_alloc(alloc_rows, (size_t)m->d * sizeof(float), "embedding tables", err);
    if (m->state) m->state_mem = np_zalloc(alloc_rows, sizeof(float), "adagrad state", err);
    if (!m->table_mem || (m->state && !m->state_mem)) {
        np_model_free(m);
        return NP_STATUS_NO_MEMORY;
    }
    for (int t = 0; t < m->T; t++) {
        size_t d = (size_t)m->d;
        m->table[t] = m->table_mem + (size_t)m->row_base[t] * d;
        if (m->state) m->state[t] = m->state_mem + m->row_base[t];
    }
    /* every row from its GLOBAL index, so a shard holds exactly the single-process rows;
     * each value depends only on its index, so threads may fill rows in any split */
    init_tables(m, k);
    *out = m;
    return NP_OK;
}

size_t np_model_table_bytes(const np_model_t *m) {
    size_t rows = (size_t)m->row_base[m->T];
    return rows * (size_t)m->d * sizeof(float) + (m->state_mem ? rows * sizeof(float) : 0);
}

void np_model_free(np_model_t *m) {
    if (!m) return;
    free(m->table_mem);
    free(m->state_mem);
    free(m->row_base);
    free(m->local_rows);
    free(m->table);
    free(m->state);
    free(m->rows);
    free(m->dense);
    free(m);
}

/* ---------------------------------------------------------------- NPPARAMS dump */

static int put_u32(FILE *f, uint32_t v) {
    unsigned char b[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static int put_u64(FILE *f, uint64_t v) {
    return put_u32(f, (uint32_t)v) || put_u32(f, (uint32_t)(v >> 32)) ? -1 : 0;
}

static int put_floats(FILE *f, const float *x, size_t n) {
    /* floats as little-endian IEEE-754 bytes, portable to big-endian hosts too */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        if (put_u32(f, u)) return -1;
    }
    return 0;
}

static int put_tensor(FILE *f, const char *name, int ndim, const uint64_t *dims, const float *x) {
    uint32_t len = (uint32_t)strlen(name);
    size_t n = 1;
    if (put_u32(f, len) || fwrite(name, 1, len, f) != len || put_u32(f, (uint32_t)ndim)) return -1;
    for (int i = 0; i < ndim; i++) {
        if (put_u64(f, dims[i])) return -1;
        n *= dims[i];
    }
    return put_floats(f, x, n);
}

np_status np_model_dump(const np_model_t *m, const char *path, np_error *err) {
    if (m->cfg.ranks > 1)
        return np_err(err, NP_STATUS_INTERNAL,
                      "dump-params: rank %d holds a shard; gather the model first", m->cfg.rank);
    char tmp[NP_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return np_err(err, NP_STATUS_IO, "dump-params: cannot create %s: %s", tmp, strerror(errno));
    int bad = fwrite("NPPARAMS", 1, 8, f) != 8 || put_u32(f, 1) ||
              put_u32(f, (uint32_t)(np_model_n_dense_tensors(m) + m->T));
    char name[64];
    for (int part = 0; part < 2 && !bad; part++) {
        const np_layer *L = part ? m->top : m->bot;
        int n = part ? m->n_top : m->n_bot;
        const char *pre = part ? "top" : "bottom";
        for (int i = 0; i < n && !bad; i++) {
            uint64_t wd[2] = {(uint64_t)L[i].out, (uint64_t)L[i].in}, bd[1] = {(uint64_t)L[i].out};
            snprintf(name, sizeof name, "%s.%d.weight", pre, i);
            bad |= put_tensor(f, name, 2, wd, m->dense + L[i].w_off);
            snprintf(name, sizeof name, "%s.%d.bias", pre, i);
            bad |= put_tensor(f, name, 1, bd, m->dense + L[i].b_off);
        }
    }
    for (int t = 0; t < m->T && !bad; t++) {
        uint64_t dims[2] = {(uint64_t)m->rows[t], (uint64_t)m->d};
        snprintf(name, sizeof name, "emb.%d", t);
        bad |= put_tensor(f, name, 2, dims, m->table[t]);
    }
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return np_err(err, NP_STATUS_IO, "dump-params: cannot write %s: %s", path, strerror(errno));
    }
    return NP_OK;
}
