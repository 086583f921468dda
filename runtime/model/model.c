/* The model's parameters: layout from its graph, deterministic initialisation from the
 * seed, and the NPPARAMS dump of the logical model (loading: runtime/model/load.c).
 * Not here: forward/backward (reference.c) or sharding. */
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codelets/kernels/gemm.h"
#include "runtime/core/util.h"
#include "runtime/model/model.h"

int np_model_n_dense_tensors(const np_model_t *m) {
    return m->graph->n_tensors;
}

/* Tensor k (dense tensors in node and tensor order, then tables) draws element e from
 * RNG stream NP_STREAM_PARAM + k, counter e. */
float np_model_table_init(const np_model_t *m, int t, uint64_t e) {
    uint64_t stream = (uint64_t)NP_STREAM_PARAM + (uint64_t)(m->graph->n_tensors + t);
    double a = sqrt(1.0 / (double)m->rows[t]);
    return (float)(a * (2.0 * np_rng_uniform(m->cfg.seed, stream, e) - 1.0));
}

typedef struct init_job {
    np_model_t *m;
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
            row[col] = np_model_table_init(m, t, g * d + col);
    }
    return NULL;
}

/* Initialises the table block on up to one thread per core (large tables take seconds). */
static void init_tables(np_model_t *m) {
    int64_t total = m->row_base[m->T];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cores > 1 ? (int)(cores < 64 ? cores : 64) : 1;
    if (total < 65536) n = 1; /* not worth a thread */
    pthread_t th[64];
    init_job jobs[64];
    int created[64] = {0};
    for (int i = 1; i < n; i++) {
        jobs[i] = (init_job){m, total * i / n, total * (i + 1) / n};
        created[i] = pthread_create(&th[i], NULL, init_rows, &jobs[i]) == 0;
        if (!created[i]) init_rows(&jobs[i]); /* no thread: do its share here */
    }
    jobs[0] = (init_job){m, 0, total / n};
    init_rows(&jobs[0]);
    for (int i = 1; i < n; i++)
        if (created[i]) pthread_join(th[i], NULL);
}

/* Every dense tensor from its own RNG stream (tensor index k), by its kind's init. */
static void init_dense(np_model_t *m) {
    const np_graph_t *g = m->graph;
    int k = 0;
    for (int v = 0; v < g->n; v++) {
        const np_node *x = &g->node[v];
        const np_layer_def *def = np_node_def(x);
        for (int p = 0; p < x->shape.n_params; p++, k++) {
            float *w = m->dense + x->poff[p];
            uint64_t stream = (uint64_t)NP_STREAM_PARAM + (uint64_t)k;
            size_t n = np_param_count(&x->shape.param[p]);
            for (uint64_t e = 0; e < n; e++)
                w[e] = def->init(&x->hp, &x->shape, p, m->cfg.seed, stream, e);
        }
    }
}

np_status np_model_create(const np_config *cfg, np_model_t **out, np_error *err) {
    *out = NULL;
    np_status st = np_config_check(cfg, err);
    if (st) return st;
    np_graph_t *g;
    if ((st = np_graph_from_config(cfg, &g, err))) return st;
    st = np_model_create_graph(cfg, g, out, err);
    np_graph_free(g);
    return st;
}

/* The dense layers (weights and their gradients at least) and the tables must fit in this
 * machine's memory: refused here, before the tables are built, rather than an allocation
 * failure (exit 1) part way. */
static np_status check_memory(const np_config *c, const np_graph_t *g, np_error *err) {
    double tables = 0;
    for (int t = 0; t < c->tables; t++) {
        double r = (double)np_config_rows(c, t);
        tables += r * c->dim * 4.0;
        if (c->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD) tables += r * 4.0;
    }
    double dense = (double)g->n_params * 8.0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && dense + tables > (double)pages * (double)page * 0.9)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "model: the dense layers hold %.3g parameters, %.1f GiB with their "
                      "gradients, and the tables %.1f GiB, but this machine has %.1f GiB of "
                      "memory; reduce the layer sizes (bottom, top, deep, cross-rank, or the "
                      "model file's)",
                      dense / 8.0, dense / (1 << 30), tables / (1 << 30),
                      (double)pages * page / (1 << 30));
    return NP_OK;
}

/* The loss fits the output node: a loss kind (nextitem) is trained with loss = output, and
 * loss = output minimises what a loss kind computes, not a built-in layer's values. */
static np_status check_loss(const np_config *cfg, const np_graph_t *g, np_error *err) {
    if (g->output < 0) return NP_OK; /* the graph's own check says so */
    const char *name = g->node[g->output].name, *kind = np_node_def(&g->node[g->output])->kind;
    static const char *const layers[] = {"linear", "dot", "concat", "cross", "slice", "hstu"};
    int output = np_config_loss(cfg) == NP_LOSS_OUTPUT;
    if (!strcmp(kind, "nextitem") && !output)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "loss: the output node %s is a nextitem loss, each sample's loss itself; "
                      "train it with --loss output",
                      name);
    for (size_t k = 0; output && k < sizeof layers / sizeof *layers; k++)
        if (!strcmp(kind, layers[k]))
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "loss output: the output node %s is a %s layer, not a loss; use --loss "
                          "bce for a click logit, or end the model with a loss kind (nextitem)",
                          name, kind);
    return NP_OK;
}

np_status np_model_create_graph(const np_config *cfg, const np_graph_t *graph, np_model_t **out,
                                np_error *err) {
    *out = NULL;
    /* every use of the model (training, evaluation) takes its products in this precision:
     * refuse here, once, what the CPU cannot run */
    const char *isa;
    if (cfg->precision == NP_PRECISION_BF16 && !np_gemm_bf16_supported(&isa))
        return np_err(err, NP_STATUS_UNSUPPORTED,
                      "precision: bf16 needs a CPU with avx512_bf16, and this one runs %s; use "
                      "--precision fp32",
                      isa);
    np_status st = np_config_check(cfg, err);
    if (st) return st;
    if (graph->dense_w != np_config_dense(cfg) ||
        graph->pooled_w != np_config_slots(cfg) * cfg->dim || graph->seq_slots != np_config_seq_slots(cfg))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "graph: built for %d dense features and %d pooled floats (%d sequence slots), "
                      "but the config has %d and %d slots x %d (%d sequence slots)",
                      graph->dense_w, graph->pooled_w, graph->seq_slots, np_config_dense(cfg),
                      np_config_slots(cfg), cfg->dim, np_config_seq_slots(cfg));
    if ((st = check_loss(cfg, graph, err))) return st;
    np_model_t *m = np_zalloc(1, sizeof *m, "model", err);
    if (!m) return NP_STATUS_NO_MEMORY;
    m->cfg = *cfg;
    m->T = cfg->tables;
    m->d = cfg->dim;
    m->graph = np_alloc(1, sizeof *m->graph, "model graph", err);
    if (!m->graph) {
        np_model_free(m);
        return NP_STATUS_NO_MEMORY;
    }
    *m->graph = *graph;
    if ((st = np_graph_finalize(m->graph, err)) || (st = check_memory(cfg, m->graph, err))) {
        np_model_free(m);
        return st;
    }
    m->n_dense = m->graph->n_params;
    m->dense = np_alloc(m->n_dense ? m->n_dense : 1, sizeof(float), "dense parameters", err);
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

    init_dense(m);
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
    init_tables(m);
    /* --init-params: start from a dump (a resumed run starts from its checkpoint instead) */
    if (cfg->init_params[0] && !cfg->resume[0] && (st = np_model_load(m, cfg->init_params, err))) {
        np_model_free(m);
        return st;
    }
    *out = m;
    return NP_OK;
}

size_t np_model_table_bytes(const np_model_t *m) {
    size_t rows = (size_t)m->row_base[m->T];
    return rows * (size_t)m->d * sizeof(float) + (m->state_mem ? rows * sizeof(float) : 0);
}

double np_model_dense_flops(const np_model_t *m, int backward) {
    const np_graph_t *g = m->graph;
    double f = 0;
    for (int v = 0; v < g->n; v++) {
        const np_node *x = &g->node[v];
        const np_layer_def *def = np_node_def(x);
        int data_only = 1; /* reads only the data: no input gradient in backward */
        for (int k = 0; k < x->shape.n_in; k++)
            data_only &= x->in[k] == NP_IN_DENSE;
        if (def->flops) f += def->flops(&x->hp, &x->shape, 1, backward && data_only ? 2 : backward);
    }
    return f;
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
    free(m->graph);
    free(m);
}

np_status np_model_diverged(const np_model_t *m, long step, const char *what, np_error *err) {
    return np_err(err, NP_STATUS_BAD_INPUT,
                  "training diverged: the update of step %ld left a NaN or inf in %s; lower --lr "
                  "(now %g)",
                  step, what, m->cfg.lr);
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
    /* floats as little-endian IEEE-754 bytes, portable to big-endian hosts too; in blocks,
     * since one fwrite per float ran at about 45 MB/s */
    unsigned char buf[16384];
    while (n) {
        size_t k = n < sizeof buf / 4 ? n : sizeof buf / 4;
        for (size_t i = 0; i < k; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            buf[4 * i] = (unsigned char)u;
            buf[4 * i + 1] = (unsigned char)(u >> 8);
            buf[4 * i + 2] = (unsigned char)(u >> 16);
            buf[4 * i + 3] = (unsigned char)(u >> 24);
        }
        if (fwrite(buf, 4, k, f) != k) return -1;
        x += k;
        n -= k;
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
    np_outfile o;
    np_status st = np_outfile_open(&o, path, "dump-params", err);
    if (st) return st;
    FILE *f = o.f;
    int bad = fwrite("NPPARAMS", 1, 8, f) != 8 || put_u32(f, 1) ||
              put_u32(f, (uint32_t)(np_model_n_dense_tensors(m) + m->T));
    char name[64];
    const np_graph_t *g = m->graph;
    for (int v = 0; v < g->n && !bad; v++) {
        const np_node *x = &g->node[v];
        for (int p = 0; p < x->shape.n_params && !bad; p++) {
            const np_param_shape *ps = &x->shape.param[p];
            uint64_t dims[2] = {(uint64_t)ps->dims[0], (uint64_t)ps->dims[1]};
            snprintf(name, sizeof name, "%s.%s", x->name, ps->name);
            bad |= put_tensor(f, name, ps->ndim, dims, m->dense + x->poff[p]);
        }
    }
    for (int t = 0; t < m->T && !bad; t++) {
        uint64_t dims[2] = {(uint64_t)m->rows[t], (uint64_t)m->d};
        snprintf(name, sizeof name, "emb.%d", t);
        bad |= put_tensor(f, name, 2, dims, m->table[t]);
    }
    return np_outfile_commit(&o, bad, err);
}
