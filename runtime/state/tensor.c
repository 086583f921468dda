/* Reading a trained model back in-process: its tensors by name, as a dump names them
 * (np_model_tensor_info), and their values on every rank (np_dist_model_read), the tables
 * gathered from their shards into the single-process layout.
 * Not here: files (runtime/model/load.c writes and reads dumps; ckpt_*.c checkpoints). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/comm.h"
#include "runtime/core/shard.h"
#include "runtime/core/util.h"
#include "runtime/model/model.h"
#include "nestpipe/dist.h"

int np_model_tensor_count(const np_model_t *m) {
    return m ? m->graph->n_tensors + m->T : 0;
}

/* Tensor i: a node's parameter (node, p) with its offset in m->dense, or table t. */
typedef struct tensor_ref {
    int table; /* >= 0: embedding table t; -1: a dense tensor */
    const np_node *node;
    int p;
    size_t off;
} tensor_ref;

static int find_index(const np_model_t *m, int i, tensor_ref *ref) {
    const np_graph_t *g = m->graph;
    if (i < 0) return -1;
    if (i >= g->n_tensors) {
        if (i - g->n_tensors >= m->T) return -1;
        *ref = (tensor_ref){.table = i - g->n_tensors};
        return 0;
    }
    int k = 0;
    for (int v = 0; v < g->n; v++)
        for (int p = 0; p < g->node[v].shape.n_params; p++, k++)
            if (k == i) {
                *ref = (tensor_ref){.table = -1, .node = &g->node[v], .p = p,
                                    .off = g->node[v].poff[p]};
                return 0;
            }
    return -1;
}

static void name_of(const np_model_t *m, const tensor_ref *ref, char *buf, size_t n) {
    (void)m;
    if (ref->table >= 0)
        snprintf(buf, n, "emb.%d", ref->table);
    else
        snprintf(buf, n, "%s.%s", ref->node->name, ref->node->shape.param[ref->p].name);
}

np_status np_model_tensor_info(const np_model_t *m, int i, char *name, size_t name_cap, int *ndim,
                               int64_t dims[2], np_error *err) {
    tensor_ref ref = {.table = -1};
    if (!m || find_index(m, i, &ref))
        return np_err(err, NP_STATUS_BAD_INPUT, "model: no tensor %d (it has %d)", i,
                      np_model_tensor_count(m));
    if (name && name_cap) name_of(m, &ref, name, name_cap);
    if (ref.table >= 0) {
        if (ndim) *ndim = 2;
        if (dims) {
            dims[0] = m->rows[ref.table];
            dims[1] = m->d;
        }
    } else {
        const np_param_shape *ps = &ref.node->shape.param[ref.p];
        if (ndim) *ndim = ps->ndim;
        if (dims) {
            dims[0] = ps->dims[0];
            dims[1] = ps->ndim == 2 ? ps->dims[1] : 1;
        }
    }
    return NP_OK;
}

/* The tensor called `name`, or -1. */
static int find_name(const np_model_t *m, const char *name, tensor_ref *ref) {
    char buf[96];
    for (int i = 0; i < np_model_tensor_count(m); i++) {
        if (find_index(m, i, ref)) return -1;
        name_of(m, ref, buf, sizeof buf);
        if (!strcmp(buf, name)) return i;
    }
    return -1;
}

/* Table t on every rank, in the single-process layout (row k at row k): each rank's local
 * rows gathered to all (rank after rank), then placed where their global index says. */
static np_status gather_table(np_comm *c, const np_model_t *m, int t, float *out, np_error *err) {
    const np_config *cfg = &m->cfg;
    int R = np_comm_size(c);
    size_t d = (size_t)m->d;
    int64_t *counts = calloc((size_t)R, sizeof *counts);
    float *buf = np_alloc((size_t)m->rows[t] * d + 1, sizeof *buf, "table gather", err);
    int64_t bad = !counts || !buf;
    size_t at = 0;
    for (int r = 0; !bad && r < R; r++) {
        counts[r] = np_shard_rows(cfg, t, r, m->rows[t]) * (int64_t)d;
        if (r == np_comm_rank(c))
            memcpy(buf + at, m->table[t], (size_t)counts[r] * sizeof *buf);
        at += (size_t)counts[r];
    }
    /* every rank learns whether every rank has its buffers before the collective */
    if (np_comm_allreduce_i64(c, NP_CHAN_CTL, &bad, 1) || bad ||
        np_comm_allgatherv_inplace(c, NP_CHAN_CTL, buf, counts, sizeof *buf)) {
        free(counts);
        free(buf);
        return np_err(err, bad ? NP_STATUS_NO_MEMORY : NP_STATUS_INTERNAL,
                      "rank %d: gathering table %d failed", np_comm_rank(c), t);
    }
    const float *src = buf;
    for (int r = 0; r < R; r++) {
        int64_t n = np_shard_rows(cfg, t, r, m->rows[t]);
        for (int64_t j = 0; j < n; j++, src += d)
            memcpy(out + (size_t)np_shard_global(cfg, t, r, j) * d, src, d * sizeof *out);
    }
    free(counts);
    free(buf);
    return NP_OK;
}

np_status np_dist_model_read(np_dist_t *d, const np_model_t *m, const char *name, float *out,
                             size_t cap, size_t *count, np_error *err) {
    tensor_ref ref = {.table = -1};
    if (count) *count = 0;
    if (!m || !name || find_name(m, name, &ref) < 0) {
        char first[96] = "";
        if (m && np_model_tensor_count(m) > 0) {
            find_index(m, 0, &ref);
            name_of(m, &ref, first, sizeof first);
        }
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "model: no tensor '%s' (names are those of a dump: \"%s\", ..., \"emb.0\"; "
                      "np_model_tensor_info lists them)",
                      name ? name : "", first);
    }
    size_t n;
    if (ref.table >= 0)
        n = (size_t)m->rows[ref.table] * (size_t)m->d;
    else
        n = np_param_count(&ref.node->shape.param[ref.p]);
    if (n > cap)
        return np_err(err, NP_STATUS_BAD_INPUT, "model: tensor %s holds %zu floats, room for %zu",
                      name, n, cap);
    if (ref.table >= 0 && m->cfg.ranks > 1 && (!d || np_comm_size(d) != m->cfg.ranks))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "model: %s is sharded over %d ranks: read it with the job's np_dist_t, "
                      "on every rank",
                      name, m->cfg.ranks);
    if (ref.table < 0 || !d || np_comm_size(d) == 1) {
        /* a dense tensor is every rank's replica; one rank holds the whole table */
        memcpy(out, ref.table < 0 ? m->dense + ref.off : m->table[ref.table], n * sizeof *out);
    } else {
        np_status st = gather_table(d, m, ref.table, out, err);
        if (st) return st;
    }
    if (count) *count = n;
    return NP_OK;
}
