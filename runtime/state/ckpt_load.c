/* Loading a checkpoint (np_ckpt_load): the newest whole one, checked against this run's
 * arithmetic and every file's size and hash, the tables resharded to this run's rank
 * count. Not here: the data source's seek (runtime/data/source.c). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/shard.h"
#include "runtime/state/ckpt_impl.h"

/* The first value of x[0..n) that is inf or nan: its index, or n. */
static size_t first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        if ((u & 0x7f800000u) == 0x7f800000u) return i;
    }
    return n;
}

static np_status nonfinite(np_error *err, const char *path, const char *tensor, const char *at,
                           float v) {
    return np_err(err, NP_STATUS_BAD_INPUT,
                  "checkpoint %s: %s: %s is %s; a model with a non-finite parameter is refused",
                  path, tensor, at, isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
}

/* The dense parameters, finite: a non-finite one is named by its tensor and element. */
static np_status check_dense(const np_model_t *m, const char *path, np_error *err) {
    size_t i = first_nonfinite(m->dense, m->n_dense);
    const np_graph_t *g = m->graph;
    for (int v = 0; i < m->n_dense && v < g->n; v++) {
        const np_node *x = &g->node[v];
        for (int p = 0; p < x->shape.n_params; p++) {
            const np_param_shape *ps = &x->shape.param[p];
            size_t off = x->poff[p], n = np_param_count(ps);
            if (i < off || i >= off + n) continue;
            char name[160], at[96];
            size_t e = i - off, cols = ps->ndim == 2 ? (size_t)ps->dims[1] : 0;
            snprintf(name, sizeof name, "tensor %s.%s", x->name, ps->name);
            if (cols)
                snprintf(at, sizeof at, "element %zu (row %zu, column %zu)", e, e / cols,
                         e % cols);
            else
                snprintf(at, sizeof at, "element %zu", e);
            return nonfinite(err, path, name, at, m->dense[i]);
        }
    }
    return i < m->n_dense ? nonfinite(err, path, "the dense parameters", "a value", m->dense[i])
                          : NP_OK;
}

static np_status load_dense(const manifest *mf, np_model_t *m, uint64_t fp, double *bytes,
                            np_error *err) {
    char path[CK_PATH + 16];
    uint64_t size, hash;
    np_status st = ck_mf_file(mf, "dense", &size, &hash, path, sizeof path, err);
    ck_in in;
    if (st || (st = ck_in_open(&in, path, err))) return st;
    unsigned char h[40];
    if (!(st = ck_read(&in, h, sizeof h, err))) {
        if (memcmp(h, CK_DENSE_MAGIC, 8) || np_le_get32(h + 8) != CK_VERSION)
            st =
                np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: not a dense-parameter file", path);
        else if (np_le_get64(h + 16) != (uint64_t)mf->step || np_le_get64(h + 24) != fp ||
                 np_le_get64(h + 32) != (uint64_t)m->n_dense)
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "checkpoint %s: its step, config fingerprint or size (%" PRIu64
                        " floats) differ from the manifest's and the model's (%zu floats)",
                        path, np_le_get64(h + 32), m->n_dense);
    }
    if (!st) st = ck_read(&in, m->dense, m->n_dense * sizeof(float), err);
    if (!st) st = ck_finish(&in, hash, err);
    if (!st) st = check_dense(m, path, err);
    *bytes += (double)in.bytes;
    ck_in_close(&in);
    return st;
}

/* Reads old rank r0's shard (of R0) and keeps the rows this rank owns now. got[t] counts the
 * rows of table t taken. */
static np_status load_shard(const manifest *mf, const np_config *cfg, np_model_t *m, int r0,
                            uint64_t fp, int64_t *got, double *bytes, np_error *err) {
    char name[64], path[CK_PATH + 16];
    snprintf(name, sizeof name, "shard-%d-of-%d", r0, mf->ranks);
    uint64_t size, hash;
    np_status st = ck_mf_file(mf, name, &size, &hash, path, sizeof path, err);
    ck_in in;
    if (st || (st = ck_in_open(&in, path, err))) return st;
    np_config old = *cfg; /* the writer's sharding: a pure function of its rank count */
    old.ranks = mf->ranks;
    old.rank = r0;
    const int T = m->T, d = m->d;
    size_t hn = 56 + 8 * (size_t)T;
    unsigned char *h = malloc(hn);
    float *buf = malloc(CK_BLOCK);
    char bad_name[64] = "", bad_at[96] = ""; /* the first non-finite value kept here */
    float bad_v = 0;
    if (!h || !buf) {
        st = np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
        goto out;
    }
    if ((st = ck_read(&in, h, hn, err))) goto out;
    if (memcmp(h, CK_SHARD_MAGIC, 8) || np_le_get32(h + 8) != CK_VERSION) {
        st = np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: not a table shard file", path);
        goto out;
    }
    int has_state = m->state_mem != NULL;
    int ok = np_le_get32(h + 12) == (uint32_t)r0 && np_le_get32(h + 16) == (uint32_t)mf->ranks &&
             np_le_get32(h + 20) == (uint32_t)cfg->shard && np_le_get32(h + 24) == (uint32_t)T &&
             np_le_get32(h + 28) == (uint32_t)d && np_le_get32(h + 32) == (uint32_t)has_state &&
             np_le_get64(h + 40) == (uint64_t)mf->step && np_le_get64(h + 48) == fp;
    int64_t total = 0;
    for (int t = 0; ok && t < T; t++) {
        int64_t lr = (int64_t)np_le_get64(h + 56 + 8 * (size_t)t);
        ok = lr == np_shard_rows(&old, t, r0, m->rows[t]);
        total += lr;
    }
    if (!ok) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "checkpoint %s: its header (rank, ranks, sharding, tables, dim, optimizer "
                    "state, step or row counts) disagrees with the manifest and the model",
                    path);
        goto out;
    }
    /* rows then (Adagrad) states, table after table, each row where this rank keeps it */
    for (int pass = 0; pass < 1 + has_state && !st; pass++) {
        size_t w = pass ? 1 : (size_t)d; /* floats per row */
        size_t per = CK_BLOCK / (w * sizeof(float));
        int t = 0;
        int64_t j = 0; /* local row of table t in the old shard */
        for (int64_t done = 0; done < total && !st;) {
            size_t k = (size_t)(total - done) < per ? (size_t)(total - done) : per;
            if ((st = ck_read(&in, buf, k * w * sizeof(float), err))) break;
            for (size_t i = 0; i < k; i++, j++) {
                while (j >= np_shard_rows(&old, t, r0, m->rows[t])) {
                    t++;
                    j = 0;
                }
                int64_t g = np_shard_global(&old, t, r0, j);
                if (np_shard_owner(cfg, t, g) != cfg->rank) continue;
                size_t e = first_nonfinite(buf + i * w, w);
                if (e < w && !bad_name[0]) { /* said once the file's hash holds */
                    snprintf(bad_name, sizeof bad_name,
                             pass ? "emb.%d's Adagrad state" : "tensor emb.%d", t);
                    if (pass)
                        snprintf(bad_at, sizeof bad_at, "row %" PRId64, g);
                    else
                        snprintf(bad_at, sizeof bad_at, "row %" PRId64 ", column %zu", g, e);
                    bad_v = buf[i * w + e];
                }
                float *dst = pass ? m->state[t] : m->table[t];
                memcpy(dst + (size_t)np_shard_local(cfg, g) * w, buf + i * w, w * sizeof(float));
                if (!pass) got[t]++;
            }
            done += (int64_t)k;
        }
    }
    if (!st) st = ck_finish(&in, hash, err);
    if (!st && bad_name[0]) st = nonfinite(err, path, bad_name, bad_at, bad_v);
out:
    *bytes += (double)in.bytes;
    free(h);
    free(buf);
    ck_in_close(&in);
    return st;
}

np_status np_ckpt_load(const np_config *cfg, np_model_t *m, np_ckpt_state *s, np_ckpt_stats *stats,
                       np_error *err) {
    double t0 = ck_now();
    memset(stats, 0, sizeof *stats);
    memset(s, 0, sizeof *s);
    manifest mf = {0};
    sbuf text = {0};
    uint64_t fp = 0;
    int64_t *got = NULL;
    np_status st = NP_OK;
    if (!np_host_is_little_endian())
        st = np_err(err, NP_STATUS_UNSUPPORTED, "resume: needs a little-endian host");
    if (!st) st = ck_read_manifest(cfg->resume, &mf, err);
    if (!st) (void)ck_fit(stats->path, sizeof stats->path, "%s", mf.dir);
    if (!st) snprintf(stats->skipped, sizeof stats->skipped, "%s", mf.skipped);
    if (!st) st = ck_fingerprint(cfg, m, &fp, &text, err);
    if (!st) st = ck_check_config(&mf, &text, err);
    if (!st) st = ck_check_exchange(&mf, cfg, err);
    const char *v = st ? NULL : ck_mf_line(&mf, "fingerprint");
    if (!st && (!v || strtoull(v, NULL, 16) != fp))
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "checkpoint %s: config fingerprint differs (a manifest of another version?)",
                    mf.path);
    /* every file there and of the listed size before reading any (a torn or cut checkpoint
     * fails alike on every rank) */
    char name[64], path[CK_PATH + 16];
    uint64_t size, hash;
    if (!st) st = ck_mf_file(&mf, "dense", &size, &hash, path, sizeof path, err);
    for (int r = 0; r < mf.ranks && !st; r++) {
        snprintf(name, sizeof name, "shard-%d-of-%d", r, mf.ranks);
        st = ck_mf_file(&mf, name, &size, &hash, path, sizeof path, err);
    }
    if (!st && !(got = calloc((size_t)m->T, sizeof *got)))
        st = np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    if (!st) st = load_dense(&mf, m, fp, &stats->bytes, err);
    /* the same rank count: this rank's own shard; another: every shard, keeping its rows */
    for (int r0 = 0; r0 < mf.ranks && !st; r0++)
        if (mf.ranks != cfg->ranks || r0 == cfg->rank)
            st = load_shard(&mf, cfg, m, r0, fp, got, &stats->bytes, err);
    for (int t = 0; t < m->T && !st; t++)
        if (got[t] != m->local_rows[t])
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "checkpoint %s: its shards hold %" PRId64 " of the %" PRId64
                        " rows of table %d this rank owns",
                        mf.dir, got[t], m->local_rows[t], t);
    if (!st) {
        s->step = mf.step;
        s->data = mf.data;
        s->loss_first = mf.loss_first;
        s->n_losses = mf.n_losses;
        memcpy(s->losses, mf.losses, (size_t)mf.n_losses * sizeof(double));
    }
    free(got);
    free(text.p);
    free(mf.text);
    free(mf.losses);
    stats->seconds = ck_now() - t0;
    return st;
}
