/* --init-params: loads an NPPARAMS dump (docs/formats.md) into a model of the same shape,
 * each rank keeping its shard of the tables. The file is streamed, never loaded whole;
 * the first tensor whose name or shape differs from the model's is named in the error.
 * Not here: writing dumps (model/model.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/model.h"

typedef struct reader {
    FILE *f;
    const char *path;
} reader;

static int get_u32(reader *r, uint32_t *v) {
    unsigned char b[4];
    if (fread(b, 1, 4, r->f) != 4) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int get_u64(reader *r, uint64_t *v) {
    uint32_t lo, hi;
    if (get_u32(r, &lo) || get_u32(r, &hi)) return -1;
    *v = (uint64_t)hi << 32 | lo;
    return 0;
}

/* n little-endian floats into x (NULL: skip them). */
static int get_floats(reader *r, float *x, size_t n) {
    unsigned char buf[4096];
    while (n) {
        size_t k = n < sizeof buf / 4 ? n : sizeof buf / 4;
        if (fread(buf, 4, k, r->f) != k) return -1;
        for (size_t i = 0; x && i < k; i++) {
            uint32_t u = (uint32_t)buf[4 * i] | (uint32_t)buf[4 * i + 1] << 8 |
                         (uint32_t)buf[4 * i + 2] << 16 | (uint32_t)buf[4 * i + 3] << 24;
            memcpy(&x[i], &u, 4);
        }
        if (x) x += k;
        n -= k;
    }
    return 0;
}

static void shape_str(char *buf, size_t cap, int nd, const uint64_t *dims) {
    int len = snprintf(buf, cap, "(");
    for (int i = 0; i < nd && len < (int)cap; i++)
        len += snprintf(buf + len, cap - (size_t)len, "%s%" PRIu64, i ? ", " : "", dims[i]);
    if (len < (int)cap) snprintf(buf + len, cap - (size_t)len, ")");
}

/* Reads tensor i's header and checks it against the model's name and shape. */
static np_status expect_tensor(reader *r, int i, const char *name, int nd, const uint64_t *dims,
                               np_error *err) {
    uint32_t len, fnd;
    char fname[256];
    uint64_t fdims[8] = {0};
    char want[64], got[160];
    shape_str(want, sizeof want, nd, dims);
    if (get_u32(r, &len))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "init-params %s: the file ends before tensor %d; the model's is %s %s",
                      r->path, i, name, want);
    if (len >= sizeof fname || fread(fname, 1, len, r->f) != len || get_u32(r, &fnd) || fnd > 8)
        return np_err(err, NP_STATUS_BAD_INPUT, "init-params %s: tensor %d: a corrupt header",
                      r->path, i);
    fname[len] = 0;
    for (uint32_t k = 0; k < fnd; k++)
        if (get_u64(r, &fdims[k]))
            return np_err(err, NP_STATUS_BAD_INPUT, "init-params %s: tensor %d: truncated",
                          r->path, i);
    int same = !strcmp(fname, name) && (int)fnd == nd;
    for (int k = 0; same && k < nd; k++)
        same = fdims[k] == dims[k];
    if (!same) {
        shape_str(got, sizeof got, (int)fnd, fdims);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "init-params %s: tensor %d is %s %s in the file but %s %s in the model: "
                      "a dump of another model shape",
                      r->path, i, fname, got, name, want);
    }
    return NP_OK;
}

static np_status load_tables(reader *r, np_model_t *m, int k0, np_error *err) {
    const np_config *cfg = &m->cfg;
    size_t d = (size_t)m->d;
    float *row = malloc(d * sizeof *row);
    if (!row) return np_err(err, NP_STATUS_NO_MEMORY, "init-params: out of memory");
    np_status st = NP_OK;
    char name[64];
    for (int t = 0; t < m->T && !st; t++) {
        uint64_t dims[2] = {(uint64_t)m->rows[t], (uint64_t)d};
        snprintf(name, sizeof name, "emb.%d", t);
        if ((st = expect_tensor(r, k0 + t, name, 2, dims, err))) break;
        for (int64_t k = 0; k < m->rows[t]; k++) {
            if (get_floats(r, row, d)) {
                st = np_err(err, NP_STATUS_BAD_INPUT, "init-params %s: %s is truncated at row %" PRId64,
                            r->path, name, k);
                break;
            }
            if (np_shard_owner(cfg, t, k) == cfg->rank)
                memcpy(m->table[t] + (size_t)np_shard_local(cfg, k) * d, row, d * sizeof *row);
        }
    }
    free(row);
    return st;
}

np_status np_model_load(np_model_t *m, const char *path, np_error *err) {
    reader r = {.f = fopen(path, "rb"), .path = path};
    if (!r.f)
        return np_err(err, NP_STATUS_IO, "init-params: cannot open %s: %s", path, strerror(errno));
    char magic[8];
    uint32_t ver = 0, count = 0;
    np_status st = NP_OK;
    int want = np_model_n_dense_tensors(m) + m->T;
    if (fread(magic, 1, 8, r.f) != 8 || memcmp(magic, "NPPARAMS", 8) || get_u32(&r, &ver) ||
        get_u32(&r, &count))
        st = np_err(err, NP_STATUS_BAD_INPUT, "init-params %s: not an NPPARAMS dump", path);
    else if (ver != 1)
        st = np_err(err, NP_STATUS_BAD_INPUT, "init-params %s: version %u, this build reads 1",
                    path, ver);
    const np_graph_t *g = m->graph;
    int i = 0;
    char name[64];
    for (int v = 0; v < g->n && !st; v++) {
        const np_node *x = &g->node[v];
        for (int p = 0; p < x->shape.n_params && !st; p++, i++) {
            const np_param_shape *ps = &x->shape.param[p];
            uint64_t dims[2] = {(uint64_t)ps->dims[0], (uint64_t)ps->dims[1]};
            snprintf(name, sizeof name, "%s.%s", x->name, ps->name);
            if (!(st = expect_tensor(&r, i, name, ps->ndim, dims, err)) &&
                get_floats(&r, m->dense + x->poff[p], np_param_count(ps)))
                st = np_err(err, NP_STATUS_BAD_INPUT, "init-params %s: %s is truncated", path,
                            name);
        }
    }
    if (!st) st = load_tables(&r, m, i, err);
    if (!st && (int)count != want)
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "init-params %s: the file has %u tensors after the model's %d: a dump of "
                    "another model shape",
                    path, count, want);
    if (!st && fgetc(r.f) != EOF)
        st = np_err(err, NP_STATUS_BAD_INPUT, "init-params %s: bytes after the last tensor", path);
    fclose(r.f);
    if (!st && m->state_mem) /* the dump holds no optimizer state: start it afresh */
        memset(m->state_mem, 0, (size_t)(m->row_base[m->T] ? m->row_base[m->T] : 1) * sizeof(float));
    return st;
}
