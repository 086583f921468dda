/* --init-params: loads an NPPARAMS dump (docs/formats.md) into a model of the same shape,
 * each rank keeping its shard of the tables. The file is streamed, never loaded whole;
 * the first tensor whose name or shape differs from the model's is named in the error, and
 * every check of the one NPPARAMS reader (runtime/model/params_read.c) holds.
 * Not here: writing dumps (runtime/model/model.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/model/model.h"

static void shape_str(char *buf, size_t cap, int nd, const uint64_t *dims) {
    int len = snprintf(buf, cap, "(");
    for (int i = 0; i < nd && len < (int)cap; i++)
        len += snprintf(buf + len, cap - (size_t)len, "%s%" PRIu64, i ? ", " : "", dims[i]);
    if (len < (int)cap) snprintf(buf + len, cap - (size_t)len, ")");
}

/* Reads tensor i's header and checks it against the model's name and shape. */
static np_status expect_tensor(np_params_reader *r, const char *path, int i, const char *name,
                               int nd, const uint64_t *dims, np_error *err) {
    np_params_tensor t;
    int more;
    char want[64], got[200], shown[1100];
    shape_str(want, sizeof want, nd, dims);
    np_status st = np_params_next(r, &t, &more, err);
    if (st) return st;
    if (!more)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "init-params %s: the file ends after %d tensors; the model's next is %s %s: "
                      "a dump of another model shape",
                      path, i, name, want);
    int same = !strcmp(t.name, name) && t.ndim == nd;
    for (int k = 0; same && k < nd; k++)
        same = t.dims[k] == dims[k];
    if (!same) {
        shape_str(got, sizeof got, t.ndim, t.dims);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "init-params %s: tensor %d is %s %s in the file but %s %s in the model: "
                      "a dump of another model shape",
                      path, i, np_escape(t.name, strlen(t.name), shown, sizeof shown), got, name,
                      want);
    }
    return NP_OK;
}

static np_status load_tables(np_params_reader *r, const char *path, np_model_t *m, int k0,
                             np_error *err) {
    const np_config *cfg = &m->cfg;
    size_t d = (size_t)m->d, per = d < 16384 ? 16384 / d : 1; /* rows read at once */
    float *rows = malloc(per * d * sizeof *rows);
    if (!rows) return np_err(err, NP_STATUS_NO_MEMORY, "init-params: out of memory");
    np_status st = NP_OK;
    char name[64];
    for (int t = 0; t < m->T && !st; t++) {
        uint64_t dims[2] = {(uint64_t)m->rows[t], (uint64_t)d};
        snprintf(name, sizeof name, "emb.%d", t);
        if ((st = expect_tensor(r, path, k0 + t, name, 2, dims, err))) break;
        for (int64_t k0r = 0; k0r < m->rows[t] && !st; k0r += (int64_t)per) {
            size_t n = (size_t)(m->rows[t] - k0r) < per ? (size_t)(m->rows[t] - k0r) : per;
            if ((st = np_params_read(r, rows, n * d, err))) break;
            for (size_t i = 0; i < n; i++) { /* this rank's rows, where its shard keeps them */
                int64_t k = k0r + (int64_t)i;
                if (np_shard_owner(cfg, t, k) == cfg->rank)
                    memcpy(m->table[t] + (size_t)np_shard_local(cfg, k) * d, rows + i * d,
                           d * sizeof *rows);
            }
        }
    }
    free(rows);
    return st;
}

np_status np_model_load(np_model_t *m, const char *path, np_error *err) {
    np_params_reader *r;
    np_status st = np_params_open(path, "init-params", &r, err);
    if (st) return st;
    const np_graph_t *g = m->graph;
    int i = 0, more = 0;
    char name[64];
    for (int v = 0; v < g->n && !st; v++) {
        const np_node *x = &g->node[v];
        for (int p = 0; p < x->shape.n_params && !st; p++, i++) {
            const np_param_shape *ps = &x->shape.param[p];
            uint64_t dims[2] = {(uint64_t)ps->dims[0], (uint64_t)ps->dims[1]};
            snprintf(name, sizeof name, "%s.%s", x->name, ps->name);
            if (!(st = expect_tensor(r, path, i, name, ps->ndim, dims, err)))
                st = np_params_read(r, m->dense + x->poff[p], np_param_count(ps), err);
        }
    }
    if (!st) st = load_tables(r, path, m, i, err);
    np_params_tensor t;
    if (!st) st = np_params_next(r, &t, &more, err);
    if (!st && more)
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "init-params %s: the file has %" PRIu32 " tensors, the model %d: a dump of "
                    "another model shape",
                    path, np_params_count(r), i + m->T);
    np_params_close(r);
    if (!st && m->state_mem) /* the dump holds no optimizer state: start it afresh */
        memset(m->state_mem, 0, (size_t)(m->row_base[m->T] ? m->row_base[m->T] : 1) * sizeof(float));
    return st;
}
