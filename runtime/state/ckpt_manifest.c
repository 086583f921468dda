/* The checkpoint manifest: the run's state (step, data position, losses), the fingerprint of
 * the arithmetic (the config keys and the model graph that fix the bytes a run computes),
 * every file's size and hash, and its own checksum; written last, so a checkpoint is whole
 * when it has one. Not here: the files it lists (ckpt_save.c, ckpt_load.c). */
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/model/graph.h"
#include "runtime/state/ckpt_impl.h"

static void sb_list(sbuf *b, const char *key, const int *v, int n) {
    ck_sb_printf(b, "config %s ", key);
    for (int i = 0; i < n; i++)
        ck_sb_printf(b, "%s%d", i ? "-" : "", v[i]);
    ck_sb_printf(b, "\n");
}

/* A double as short as it reads back exactly. */
static const char *exact(char *buf, size_t n, double v) {
    snprintf(buf, n, "%g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
    return buf;
}

/* The config keys that fix the arithmetic; with own_graph, the graph's lines replace the
 * built-in models' size keys. */
static void config_text(const np_config *c, sbuf *b, int own_graph) {
    char x[40];
    static const char *data[] = {"synthetic", "criteo", "bin", "movielens"};
    static const char *models[] = {"dlrm", "dcnv2", "hstu"};
    if (!own_graph) ck_sb_printf(b, "config model %s\n", models[c->model]);
    ck_sb_printf(b, "config tables %d\n", c->tables);
    ck_sb_printf(b, "config rows ");
    for (int t = 0; t < c->tables; t++)
        ck_sb_printf(b, "%s%" PRId64, t ? "," : "", np_config_rows(c, t));
    ck_sb_printf(b, "\nconfig dim %d\n", c->dim);
    if (own_graph) ck_sb_printf(b, "config dense-features %d\n", np_config_dense(c));
    if (!own_graph) sb_list(b, "bottom", c->bottom, c->n_bottom);
    if (!own_graph) sb_list(b, "top", c->top, c->n_top);
    if (!own_graph && c->model == NP_MODEL_DCNV2) {
        ck_sb_printf(b, "config cross-layers %d\nconfig cross-rank %d\n", c->cross_layers,
                  c->cross_rank);
        sb_list(b, "deep", c->deep, c->n_deep);
    }
    if (!own_graph && c->model == NP_MODEL_HSTU)
        ck_sb_printf(b, "config hstu-blocks %d\nconfig hstu-heads %d\n", c->hstu_blocks,
                     c->hstu_heads);
    /* 0.7's keys, only when in use: older checkpoints keep their fingerprint */
    if (c->seq_len > 0)
        ck_sb_printf(b, "config seq-len %d\nconfig seq-negatives %d\n", c->seq_len,
                     c->seq_negatives);
    if (np_config_loss(c) != NP_LOSS_BCE) ck_sb_printf(b, "config loss output\n");
    ck_sb_printf(b, "config batch %ld\nconfig lr %s\n", c->batch, exact(x, sizeof x, c->lr));
    ck_sb_printf(b, "config sparse-optim %s\n",
              c->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD ? "rowwise-adagrad" : "sgd");
    if (c->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD)
        ck_sb_printf(b, "config adagrad-eps %s\n", exact(x, sizeof x, c->adagrad_eps));
    ck_sb_printf(b, "config seed %" PRIu64 "\n", c->seed);
    ck_sb_printf(b, "config chunks %d\nconfig windows %d\nconfig cluster %s\n", c->chunks,
              np_config_windows(c), c->cluster ? "keys" : "none");
    ck_sb_printf(b, "config precision %s\n", c->precision == NP_PRECISION_BF16 ? "bf16" : "fp32");
    ck_sb_printf(b, "config shard %s\n", c->shard == NP_SHARD_TABLE    ? "table"
                                          : c->shard == NP_SHARD_SPREAD ? "spread"
                                                                        : "row");
    ck_sb_printf(b, "config data %s%s%s\n", data[c->data], c->data == NP_DATA_SYNTHETIC ? "" : ":",
              c->data == NP_DATA_SYNTHETIC ? "" : c->data_path);
    ck_sb_printf(b, "config eval-every %ld\nconfig skip-bad-lines %d\n", c->eval_every,
              c->skip_bad_lines);
    /* the order of file records (not epochs: more passes may follow a resumed run) */
    if (c->data != NP_DATA_SYNTHETIC && c->shuffle_buffer)
        ck_sb_printf(b, "config shuffle-buffer %ld\n", c->shuffle_buffer);
    if (c->data == NP_DATA_SYNTHETIC)
        ck_sb_printf(b, "config zipf %s\nconfig hot %d\nconfig groups %ld\n",
                  exact(x, sizeof x, c->zipf), c->hot, c->groups);
    if (c->data == NP_DATA_SYNTHETIC && c->seq_len > 0)
        ck_sb_printf(b, "config seq-clusters %d\n", c->seq_clusters);
}

/* 1 when m's graph is the one cfg's built-in model builds (no model file, the same nodes,
 * kinds, hyper-parameters, inputs and output). */
static int builtin_graph(const np_config *cfg, const np_model_t *m) {
    if (cfg->model_file[0]) return 0;
    np_graph_t *g;
    np_error e;
    if (np_graph_from_config(cfg, &g, &e)) return 0;
    const np_graph_t *h = m->graph;
    int same = g->n == h->n && g->output == h->output;
    for (int v = 0; same && v < g->n; v++) {
        const np_node *a = &g->node[v], *b = &h->node[v];
        same = !strcmp(a->name, b->name) && a->def == b->def && a->shape.n_in == b->shape.n_in &&
               !memcmp(&a->hp, &b->hp, sizeof a->hp) &&
               !memcmp(a->in, b->in, sizeof a->in[0] * (size_t)a->shape.n_in);
    }
    np_graph_free(g);
    return same;
}

/* Another graph (a model file, a program's own): one line per node with its kind, inputs
 * and hyper-parameters, so that a checkpoint resumes only the model it holds. The built-in
 * models keep their keys' lines (config_text), which checkpoints of 0.4 hold too. */
static void graph_text(const np_model_t *m, sbuf *b) {
    const np_graph_t *g = m->graph;
    char x[40];
    ck_sb_printf(b, "config graph.nodes %d\nconfig graph.output %s\n", g->n,
                 g->node[g->output].name);
    for (int v = 0; v < g->n; v++) {
        const np_node *x0 = &g->node[v];
        ck_sb_printf(b, "config graph.%d %s %s in", v, x0->name, np_layer_get(x0->def)->kind);
        for (int i = 0; i < x0->shape.n_in; i++) {
            int p = x0->in[i];
            ck_sb_printf(b, "%s%s", i ? "," : " ",
                         p == NP_IN_DENSE ? "dense" : p == NP_IN_POOLED ? "pooled" : g->node[p].name);
        }
        ck_sb_printf(b, " i");
        for (int k = 0; k < NP_LAYER_MAX_HP; k++)
            ck_sb_printf(b, "%s%d", k ? "," : " ", x0->hp.i[k]);
        ck_sb_printf(b, " f");
        for (int k = 0; k < NP_LAYER_MAX_HP; k++)
            ck_sb_printf(b, "%s%s", k ? "," : " ", exact(x, sizeof x, x0->hp.f[k]));
        ck_sb_printf(b, "\n");
    }
}

np_status ck_fingerprint(const np_config *cfg, const np_model_t *m, uint64_t *fp, sbuf *text,
                         np_error *err) {
    config_text(cfg, text, m && !builtin_graph(cfg, m));
    if (m && !builtin_graph(cfg, m)) graph_text(m, text);
    if (text->oom) return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    *fp = XXH3_64bits(text->p, text->n);
    return NP_OK;
}

/* ---------------------------------------------------------------- writing */

void ck_step_dir(char *out, size_t n, const char *base, long step) {
    snprintf(out, n, "%s/ckpt-%09ld", base, step);
}

/* "ckpt-<digits>" -> its step, else -1. */
long ck_parse_step(const char *name) {
    if (strncmp(name, "ckpt-", 5) || !name[5]) return -1;
    long v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > (LONG_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

int ck_is_whole(const char *base, const char *name) {
    char p[CK_PATH];
    struct stat sb;
    return !ck_fit(p, sizeof p, "%s/%s/" CK_MANIFEST, base, name) && !stat(p, &sb) &&
           S_ISREG(sb.st_mode);
}

/* The values of key "exchange", by np_exchange. */
static const char *const exchange_names[] = {"auto", "rows", "pooled"};

np_status ck_write_manifest(const np_config *cfg, const char *dir, const np_ckpt_state *s,
                                uint64_t fp, const sbuf *cfgtext, const int64_t *files,
                                np_error *err) {
    sbuf b = {0};
    ck_sb_printf(&b, "nestpipe checkpoint %d\nstep %ld\nranks %d\n", CK_VERSION, s->step, cfg->ranks);
    /* the exchange's form (ck_check_exchange), outside the fingerprint's config lines so that
     * checkpoints of 0.5, which have none, keep their fingerprint */
    ck_sb_printf(&b, "exchange %s\n", exchange_names[cfg->exchange]);
    ck_sb_printf(&b,
              "data_delivered %" PRIu64 "\ndata_next_index %" PRIu64 "\ndata_skipped %" PRId64 "\n",
              s->data.delivered, s->data.next_index, s->data.skipped);
    ck_sb_printf(&b, "loss_first %a\nlosses %d", s->loss_first, s->n_losses);
    for (int i = 0; i < s->n_losses; i++)
        ck_sb_printf(&b, " %a", s->losses[i]);
    ck_sb_printf(&b, "\nfingerprint %016" PRIx64 "\n", fp);
    ck_sb_printf(&b, "%.*s", (int)cfgtext->n, cfgtext->p);
    ck_sb_printf(&b, "file dense %" PRId64 " %016" PRIx64 "\n", files[3], (uint64_t)files[4]);
    for (int r = 0; r < cfg->ranks; r++)
        ck_sb_printf(&b, "file shard-%d-of-%d %" PRId64 " %016" PRIx64 "\n", r, cfg->ranks,
                  files[6 * r + 1], (uint64_t)files[6 * r + 2]);
    if (b.oom) {
        free(b.p);
        return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    }
    ck_sb_printf(&b, "checksum %016" PRIx64 "\n", XXH3_64bits(b.p, b.n));
    ck_out o;
    uint64_t h, n;
    np_status st = b.oom ? np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory")
                         : ck_open(&o, dir, CK_MANIFEST, err);
    if (!st && (st = ck_write(&o, b.p, b.n, err))) ck_abandon(&o);
    if (!st) st = ck_commit(&o, 0, &h, &n, s->step, "manifest", err);
    free(b.p);
    return st;
}

/* The line "key ..." of the manifest's text (after the version line), or NULL. */
const char *ck_mf_line(const manifest *mf, const char *key) {
    size_t k = strlen(key);
    for (const char *p = mf->text; p < mf->text + mf->len;) {
        const char *nl = memchr(p, '\n', (size_t)(mf->text + mf->len - p));
        if (!nl) break;
        if ((size_t)(nl - p) > k && !strncmp(p, key, k) && p[k] == ' ') return p + k + 1;
        p = nl + 1;
    }
    return NULL;
}

/* Why base/name is not a whole checkpoint, for the warning. */
static const char *not_whole(const char *base, const char *name) {
    char p[CK_PATH];
    struct stat sb;
    if (ck_fit(p, sizeof p, "%s/%s", base, name) || stat(p, &sb)) return "cannot be read";
    if (!S_ISDIR(sb.st_mode)) return "a file, not a folder";
    if (ck_fit(p, sizeof p, "%s/%s/" CK_MANIFEST, base, name) || stat(p, &sb))
        return "no manifest: cut short while written, or made by hand";
    return "its manifest is not a file";
}

/* The newest folder ckpt-<step> with a manifest under base; in skipped, the newest one
 * newer than it that is not whole, and why ("" when none). */
static np_status find_newest(const char *base, char *name, size_t n, char *skipped, size_t sn,
                             np_error *err) {
    DIR *dh = opendir(base);
    if (!dh)
        return np_err(err, errno == ENOENT || errno == ENOTDIR ? NP_STATUS_BAD_INPUT : NP_STATUS_IO,
                      "resume %s: cannot open the folder: %s", base, strerror(errno));
    long best = -1, torn = 0, newest_torn = -1;
    char torn_name[256] = "";
    struct dirent *de;
    while ((de = readdir(dh))) {
        long s = ck_parse_step(de->d_name);
        if (s < 0) continue;
        if (!ck_is_whole(base, de->d_name)) {
            torn++;
            if (s > newest_torn) {
                newest_torn = s;
                snprintf(torn_name, sizeof torn_name, "%s", de->d_name);
            }
            continue;
        }
        if (s > best) {
            best = s;
            snprintf(name, n, "%s", de->d_name);
        }
    }
    closedir(dh);
    if (best < 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "resume %s: no whole checkpoint there (a ckpt-<step> folder with a "
                      "manifest; %ld without one)",
                      base, torn);
    skipped[0] = 0;
    if (newest_torn > best)
        snprintf(skipped, sn, "%.100s (%s)", torn_name, not_whole(base, torn_name));
    return NP_OK;
}

np_status ck_read_manifest(const char *base, manifest *mf, np_error *err) {
    char name[256];
    np_status st = find_newest(base, name, sizeof name, mf->skipped, sizeof mf->skipped, err);
    if (st) return st;
    if (ck_fit(mf->dir, sizeof mf->dir, "%s/%s", base, name) ||
        ck_fit(mf->path, sizeof mf->path, "%s/" CK_MANIFEST, mf->dir))
        return np_err(err, NP_STATUS_BAD_INPUT, "resume %s: the path is too long", base);
    FILE *f = fopen(mf->path, "rb");
    if (!f)
        return np_err(err, NP_STATUS_IO, "checkpoint %s: cannot open: %s", mf->path,
                      strerror(errno));
    size_t cap = 1 << 16;
    mf->text = malloc(cap + 1);
    size_t k;
    while (mf->text && (k = fread(mf->text + mf->len, 1, cap - mf->len, f)) > 0) {
        mf->len += k;
        if (mf->len == cap) {
            if (cap >= ((size_t)64 << 20)) break;
            char *q = realloc(mf->text, 2 * cap + 1);
            if (!q) {
                free(mf->text);
                mf->text = NULL;
                break;
            }
            mf->text = q;
            cap *= 2;
        }
    }
    int rerr = ferror(f);
    fclose(f);
    if (!mf->text) return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    if (rerr) return np_err(err, NP_STATUS_IO, "checkpoint %s: read error", mf->path);
    mf->text[mf->len] = 0;
    /* the last line is "checksum <hash of everything before it>" */
    const char *magic = "nestpipe checkpoint ";
    char *cs = NULL;
    for (size_t i = mf->len; i > 0; i--)
        if (i >= 2 && mf->text[i - 2] == '\n' && !strncmp(mf->text + i - 1, "checksum ", 9)) {
            cs = mf->text + i - 1;
            break;
        }
    if (strncmp(mf->text, magic, strlen(magic)) || !cs)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "checkpoint %s: not a whole manifest (no header or no checksum line)",
                      mf->path);
    uint64_t want = strtoull(cs + 9, NULL, 16),
             got = XXH3_64bits(mf->text, (size_t)(cs - mf->text));
    if (want != got)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "checkpoint %s: checksum %016" PRIx64 " but the file says %016" PRIx64
                      ": the manifest is corrupted",
                      mf->path, got, want);
    mf->len = (size_t)(cs - mf->text);
    int ver = atoi(mf->text + strlen(magic));
    if (ver != CK_VERSION)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: version %d, this build reads %d",
                      mf->path, ver, CK_VERSION);
    const char *v;
    char *end;
#define NEED(key)                                                                                  \
    if (!(v = ck_mf_line(mf, key)))                                                                   \
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: no '%s' line", mf->path, key);
    NEED("step");
    mf->step = strtol(v, NULL, 10);
    NEED("ranks");
    mf->ranks = atoi(v);
    NEED("data_delivered");
    mf->data.delivered = strtoull(v, NULL, 10);
    NEED("data_next_index");
    mf->data.next_index = strtoull(v, NULL, 10);
    NEED("data_skipped");
    mf->data.skipped = strtoll(v, NULL, 10);
    NEED("loss_first");
    mf->loss_first = strtod(v, NULL);
    NEED("losses");
    mf->n_losses = (int)strtol(v, &end, 10);
#undef NEED
    if (mf->step < 0 || mf->ranks < 1 || mf->n_losses < 0 || mf->n_losses > NP_CKPT_LOSSES)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: step, ranks or losses out of range",
                      mf->path);
    mf->losses = calloc((size_t)mf->n_losses + 1, sizeof(double));
    if (!mf->losses) return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    for (int i = 0; i < mf->n_losses; i++)
        mf->losses[i] = strtod(end, &end);
    return NP_OK;
}

/* Every "config" line of this run must be in the manifest with the same value. */
/* The form a run's sums follow: auto on one rank exchanges rows only. */
static const char *form_of(const char *name, int ranks) {
    return !strcmp(name, "auto") && ranks == 1 ? "rows" : name;
}

np_status ck_check_exchange(const manifest *mf, const np_config *cfg, np_error *err) {
    const char *v = ck_mf_line(mf, "exchange");
    char theirs[16] = "rows"; /* 0.5 wrote no line: it had the row exchange only */
    if (v) snprintf(theirs, sizeof theirs, "%.*s", (int)strcspn(v, "\n"), v);
    const char *mine = exchange_names[cfg->exchange];
    /* the same form, or rows on both sides (auto on one rank, 0.5's checkpoints) */
    if (!strcmp(theirs, mine) ||
        (!strcmp(form_of(theirs, mf->ranks), "rows") && !strcmp(form_of(mine, cfg->ranks), "rows")))
        return NP_OK;
    return np_err(err, NP_STATUS_BAD_INPUT,
                  "checkpoint %s: written with exchange = %s%s, but this run has %s; resume "
                  "with --exchange %s (the form fixes the order of each bag's sum)",
                  mf->path, theirs, v ? "" : " (by 0.5, which exchanged rows)", mine,
                  form_of(theirs, mf->ranks));
}

np_status ck_check_config(const manifest *mf, const sbuf *mine, np_error *err) {
    for (const char *p = mine->p; p < mine->p + mine->n;) {
        const char *nl = memchr(p, '\n', (size_t)(mine->p + mine->n - p));
        const char *key = p + 7, *sp = memchr(key, ' ', (size_t)(nl - key));
        char k[64];
        snprintf(k, sizeof k, "config %.*s", (int)(sp - key), key);
        const char *theirs = ck_mf_line(mf, k);
        const char *val = sp + 1;
        size_t vlen = (size_t)(nl - val), tlen = 0;
        if (theirs) tlen = strcspn(theirs, "\n");
        if (!theirs || tlen != vlen || strncmp(theirs, val, vlen))
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "checkpoint %s: written with %.*s = %.*s, but this run has %.*s; "
                          "resume with the same value (only the rank count, pipeline and "
                          "engine may change)",
                          mf->path, (int)(sp - key), key, (int)(theirs ? tlen : 6),
                          theirs ? theirs : "(none)", (int)vlen, val);
        p = nl + 1;
    }
    return NP_OK;
}

/* The size and hash the manifest lists for file `name`. */
np_status ck_mf_file(const manifest *mf, const char *name, uint64_t *size, uint64_t *hash,
                         char *path, size_t pn, np_error *err) {
    char k[80];
    snprintf(k, sizeof k, "file %s", name);
    snprintf(path, pn, "%s/%s", mf->dir, name);
    const char *v = ck_mf_line(mf, k);
    if (!v)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: the manifest does not list %s",
                      mf->path, name);
    char *end;
    *size = strtoull(v, &end, 10);
    *hash = strtoull(end, NULL, 16);
    struct stat sb;
    if (stat(path, &sb))
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: %s (the manifest lists it)", path,
                      errno == ENOENT ? "missing" : strerror(errno));
    if ((uint64_t)sb.st_size != *size)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "checkpoint %s: %lld bytes, but the manifest says %" PRIu64
                      ": truncated or overwritten",
                      path, (long long)sb.st_size, *size);
    return NP_OK;
}
