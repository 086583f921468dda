/* Checkpoints: every rank writes its table shard, rank 0 the dense parameters and, last, a
 * checksummed manifest renamed into place; loading checks all of it and reshards the tables
 * to this run's rank count. Format: docs/formats.md "Checkpoints". Not here: when the
 * driver takes one, or the data source's seek (data/source.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "comm/comm.h"
#include "core/shard.h"
#include "core/util.h"
#include "engine/engine.h"
#include "model/model.h"
#include "nestpipe/checkpoint.h"

#define CK_VERSION 1
#define CK_SHARD_MAGIC "NPCKSHRD"
#define CK_DENSE_MAGIC "NPCKDENS"
#define CK_MANIFEST "manifest"
#define CK_PATH (NP_PATH_MAX + 96)
#define CK_BLOCK ((size_t)8 << 20) /* bytes per read or write call */

/* snprintf that says when it cut: paths here are bounded, a longer one is refused. */
static int fit(char *out, size_t n, const char *fmt, ...) NP_PRINTF(3, 4);
static int fit(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Test hook (tests/test_ckpt.sh): NP_TEST_CKPT_KILL=STEP:PHASE makes this process die by
 * SIGKILL inside checkpoint STEP's write, as a crashed node would: PHASE "shard" when its
 * shard is written but not yet renamed, "manifest" when the manifest is written but not
 * yet renamed. Never set in production; a library never exits otherwise. */
static void test_kill(long step, const char *phase) {
    const char *v = getenv("NP_TEST_CKPT_KILL");
    char want[64];
    snprintf(want, sizeof want, "%ld:%s", step, phase);
    if (v && !strcmp(v, want)) raise(SIGKILL);
}

/* ---------------------------------------------------------------- atomic files
 * A file is written under a unique temporary name (mkstemp) in its final folder, hashed as
 * it goes, fsync'd and renamed: a reader sees the whole file or none. */

typedef struct ck_out {
    int fd;
    char tmp[CK_PATH], path[CK_PATH];
    XXH3_state_t *h;
    uint64_t bytes;
} ck_out;

static void ck_abandon(ck_out *o) {
    if (o->fd >= 0) {
        close(o->fd);
        unlink(o->tmp);
    }
    o->fd = -1;
    XXH3_freeState(o->h);
    o->h = NULL;
}

static np_status ck_open(ck_out *o, const char *dir, const char *name, np_error *err) {
    o->fd = -1;
    o->bytes = 0;
    o->h = XXH3_createState();
    snprintf(o->path, sizeof o->path, "%s/%s", dir, name);
    snprintf(o->tmp, sizeof o->tmp, "%s/.%s.tmp-XXXXXX", dir, name);
    if (!o->h || XXH3_64bits_reset(o->h) != XXH_OK) {
        ck_abandon(o);
        return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    }
    o->fd = mkstemp(o->tmp);
    if (o->fd < 0) {
        int e = errno;
        ck_abandon(o);
        return np_err(err, NP_STATUS_IO, "checkpoint %s: cannot create a file in %s: %s", o->path,
                      dir, strerror(e));
    }
    (void)fchmod(o->fd, 0644); /* mkstemp's 0600 would hide it from the job's other users */
    return NP_OK;
}

static np_status ck_raw(ck_out *o, const void *p, size_t n, np_error *err) {
    const char *c = p;
    while (n) {
        ssize_t k = write(o->fd, c, n < CK_BLOCK ? n : CK_BLOCK);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return np_err(err, NP_STATUS_IO, "checkpoint %s: write failed: %s", o->path,
                          k < 0 ? strerror(errno) : "no progress");
        c += k;
        n -= (size_t)k;
        o->bytes += (uint64_t)k;
    }
    return NP_OK;
}

static np_status ck_write(ck_out *o, const void *p, size_t n, np_error *err) {
    const char *c = p;
    for (size_t at = 0; at < n; at += CK_BLOCK) { /* hash a block while it is in cache */
        size_t k = n - at < CK_BLOCK ? n - at : CK_BLOCK;
        XXH3_64bits_update(o->h, c + at, k);
        np_status st = ck_raw(o, c + at, k, err);
        if (st) return st;
    }
    return NP_OK;
}

/* Appends the trailer (the hash of everything before it) when `trailer`, then fsync and
 * rename. *hash gets the content's hash, *bytes the file's size. `step` and `phase` name the
 * moment for the test hook. */
static np_status ck_commit(ck_out *o, int trailer, uint64_t *hash, uint64_t *bytes, long step,
                           const char *phase, np_error *err) {
    uint64_t h = XXH3_64bits_digest(o->h);
    unsigned char t[8];
    np_le_put64(t, h);
    np_status st = trailer ? ck_raw(o, t, 8, err) : NP_OK;
    if (!st && fsync(o->fd))
        st = np_err(err, NP_STATUS_IO, "checkpoint %s: fsync failed: %s", o->path, strerror(errno));
    if (!st) test_kill(step, phase);
    if (!st) {
        int e = close(o->fd) ? errno : 0;
        o->fd = -1;
        if (e || rename(o->tmp, o->path)) {
            e = e ? e : errno;
            unlink(o->tmp);
            st = np_err(err, NP_STATUS_IO, "checkpoint %s: cannot finish the file: %s", o->path,
                        strerror(e));
        }
    }
    if (!st) {
        *hash = h;
        *bytes = o->bytes;
    }
    ck_abandon(o);
    return st;
}

static np_status fsync_dir(const char *dir, np_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return np_err(err, NP_STATUS_IO, "checkpoint: cannot fsync the folder %s: %s", dir,
                      strerror(e));
    }
    close(fd);
    return NP_OK;
}

/* ---------------------------------------------------------------- the arithmetic's config
 * The keys that fix the bytes a run computes. Not the rank count, the pipeline or the
 * engine: a checkpoint may be resumed with other ones (the same bytes for pipelines that
 * only reorder work, within tolerance for another rank count). */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) NP_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void sb_list(sbuf *b, const char *key, const int *v, int n) {
    sb_printf(b, "config %s ", key);
    for (int i = 0; i < n; i++)
        sb_printf(b, "%s%d", i ? "-" : "", v[i]);
    sb_printf(b, "\n");
}

/* A double as short as it reads back exactly. */
static const char *exact(char *buf, size_t n, double v) {
    snprintf(buf, n, "%g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
    return buf;
}

static void config_text(const np_config *c, sbuf *b) {
    char x[40];
    static const char *data[] = {"synthetic", "criteo", "bin"};
    sb_printf(b, "config model %s\n", c->model == NP_MODEL_DCNV2 ? "dcnv2" : "dlrm");
    sb_printf(b, "config tables %d\n", c->tables);
    sb_printf(b, "config rows ");
    for (int t = 0; t < c->tables; t++)
        sb_printf(b, "%s%" PRId64, t ? "," : "", np_config_rows(c, t));
    sb_printf(b, "\nconfig dim %d\n", c->dim);
    sb_list(b, "bottom", c->bottom, c->n_bottom);
    sb_list(b, "top", c->top, c->n_top);
    if (c->model == NP_MODEL_DCNV2) {
        sb_printf(b, "config cross-layers %d\nconfig cross-rank %d\n", c->cross_layers,
                  c->cross_rank);
        sb_list(b, "deep", c->deep, c->n_deep);
    }
    sb_printf(b, "config batch %ld\nconfig lr %s\n", c->batch, exact(x, sizeof x, c->lr));
    sb_printf(b, "config sparse-optim %s\n",
              c->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD ? "rowwise-adagrad" : "sgd");
    if (c->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD)
        sb_printf(b, "config adagrad-eps %s\n", exact(x, sizeof x, c->adagrad_eps));
    sb_printf(b, "config seed %" PRIu64 "\n", c->seed);
    sb_printf(b, "config chunks %d\nconfig windows %d\nconfig cluster %s\n", c->chunks,
              np_config_windows(c), c->cluster ? "keys" : "none");
    sb_printf(b, "config precision %s\n", c->precision == NP_PRECISION_BF16 ? "bf16" : "fp32");
    sb_printf(b, "config shard %s\n", c->shard == NP_SHARD_TABLE ? "table" : "row");
    sb_printf(b, "config data %s%s%s\n", data[c->data], c->data == NP_DATA_SYNTHETIC ? "" : ":",
              c->data == NP_DATA_SYNTHETIC ? "" : c->data_path);
    sb_printf(b, "config eval-every %ld\nconfig skip-bad-lines %d\n", c->eval_every,
              c->skip_bad_lines);
    /* the order of file records (not epochs: more passes may follow a resumed run) */
    if (c->data != NP_DATA_SYNTHETIC && c->shuffle_buffer)
        sb_printf(b, "config shuffle-buffer %ld\n", c->shuffle_buffer);
    if (c->data == NP_DATA_SYNTHETIC)
        sb_printf(b, "config zipf %s\nconfig hot %d\nconfig groups %ld\n",
                  exact(x, sizeof x, c->zipf), c->hot, c->groups);
}

static np_status fingerprint(const np_config *cfg, uint64_t *fp, sbuf *text, np_error *err) {
    config_text(cfg, text);
    if (text->oom) return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    *fp = XXH3_64bits(text->p, text->n);
    return NP_OK;
}

/* ---------------------------------------------------------------- writing */

static void step_dir(char *out, size_t n, const char *base, long step) {
    snprintf(out, n, "%s/ckpt-%09ld", base, step);
}

static np_status write_shard(const np_config *cfg, const np_model_t *m, const char *dir, long step,
                             uint64_t fp, uint64_t *bytes, uint64_t *hash, np_error *err) {
    char name[64];
    snprintf(name, sizeof name, "shard-%d-of-%d", cfg->rank, cfg->ranks);
    ck_out o;
    np_status st = ck_open(&o, dir, name, err);
    if (st) return st;
    size_t hn = 56 + 8 * (size_t)m->T;
    unsigned char *h = malloc(hn);
    if (!h) {
        ck_abandon(&o);
        return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    }
    memcpy(h, CK_SHARD_MAGIC, 8);
    np_le_put32(h + 8, CK_VERSION);
    np_le_put32(h + 12, (uint32_t)cfg->rank);
    np_le_put32(h + 16, (uint32_t)cfg->ranks);
    np_le_put32(h + 20, (uint32_t)cfg->shard);
    np_le_put32(h + 24, (uint32_t)m->T);
    np_le_put32(h + 28, (uint32_t)m->d);
    np_le_put32(h + 32, m->state_mem ? 1u : 0u);
    np_le_put32(h + 36, 0);
    np_le_put64(h + 40, (uint64_t)step);
    np_le_put64(h + 48, fp);
    for (int t = 0; t < m->T; t++)
        np_le_put64(h + 56 + 8 * (size_t)t, (uint64_t)m->local_rows[t]);
    st = ck_write(&o, h, hn, err);
    free(h);
    size_t rows = (size_t)m->row_base[m->T];
    /* the shard's rows, table after table, as the model holds them: one block */
    if (!st) st = ck_write(&o, m->table_mem, rows * (size_t)m->d * sizeof(float), err);
    if (!st && m->state_mem) st = ck_write(&o, m->state_mem, rows * sizeof(float), err);
    if (st) {
        ck_abandon(&o);
        return st;
    }
    return ck_commit(&o, 1, hash, bytes, step, "shard", err);
}

static np_status write_dense(const np_model_t *m, const char *dir, long step, uint64_t fp,
                             uint64_t *bytes, uint64_t *hash, np_error *err) {
    ck_out o;
    np_status st = ck_open(&o, dir, "dense", err);
    if (st) return st;
    unsigned char h[40];
    memcpy(h, CK_DENSE_MAGIC, 8);
    np_le_put32(h + 8, CK_VERSION);
    np_le_put32(h + 12, 0);
    np_le_put64(h + 16, (uint64_t)step);
    np_le_put64(h + 24, fp);
    np_le_put64(h + 32, (uint64_t)m->n_dense);
    if ((st = ck_write(&o, h, sizeof h, err)) ||
        (st = ck_write(&o, m->dense, m->n_dense * sizeof(float), err))) {
        ck_abandon(&o);
        return st;
    }
    return ck_commit(&o, 1, hash, bytes, step, "dense", err);
}

/* "ckpt-<digits>" -> its step, else -1. */
static long parse_step(const char *name) {
    if (strncmp(name, "ckpt-", 5) || !name[5]) return -1;
    long v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > (LONG_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

static int is_whole(const char *base, const char *name) {
    char p[CK_PATH];
    struct stat sb;
    return !fit(p, sizeof p, "%s/%s/" CK_MANIFEST, base, name) && !stat(p, &sb) &&
           S_ISREG(sb.st_mode);
}

/* A temporary name of ck_open's ("." NAME ".tmp-XXXXXX"): left behind by a killed writer. */
static int is_temp(const char *n) {
    return n[0] == '.' && strstr(n, ".tmp-") != NULL;
}

/* Removes what a killed earlier attempt at this checkpoint left in its folder. */
static void remove_temps(const char *dir) {
    char p[CK_PATH + 256];
    DIR *dh = opendir(dir);
    if (!dh) return;
    struct dirent *de;
    while ((de = readdir(dh)))
        if (is_temp(de->d_name) && !fit(p, sizeof p, "%s/%s", dir, de->d_name)) unlink(p);
    closedir(dh);
}

/* Removes a checkpoint folder: the manifest first (so it is never seen whole but broken),
 * then the files nestpipe writes there; anything else keeps the folder. */
static void remove_ckpt(const char *base, const char *name) {
    char dir[CK_PATH], p[CK_PATH + 256];
    snprintf(dir, sizeof dir, "%s/%s", base, name);
    snprintf(p, sizeof p, "%s/" CK_MANIFEST, dir);
    if (!unlink(p)) (void)fsync_dir(dir, NULL);
    DIR *dh = opendir(dir);
    if (!dh) return;
    struct dirent *de;
    while ((de = readdir(dh))) {
        const char *n = de->d_name;
        if (!strcmp(n, "dense") || !strncmp(n, "shard-", 6) || is_temp(n)) {
            snprintf(p, sizeof p, "%s/%s", dir, n);
            unlink(p);
        }
    }
    closedir(dh);
    rmdir(dir);
}

/* Keeps the newest `keep` whole checkpoints and no torn one older than `current`. */
static void prune(const char *base, long current, int keep) {
    DIR *dh = opendir(base);
    if (!dh) return;
    long *whole = NULL;
    size_t nw = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dh))) {
        long s = parse_step(de->d_name);
        if (s < 0) continue;
        if (is_whole(base, de->d_name)) {
            if (nw == cap) {
                size_t c2 = cap ? 2 * cap : 16;
                long *q = realloc(whole, c2 * sizeof *q);
                if (!q) break;
                whole = q;
                cap = c2;
            }
            whole[nw++] = s;
        } else if (s < current) {
            remove_ckpt(base, de->d_name);
        }
    }
    closedir(dh);
    /* the newest `keep` by step: drop every whole one below the keep-th largest */
    for (size_t i = 0; i < nw; i++) {
        size_t newer = 0;
        for (size_t j = 0; j < nw; j++)
            newer += whole[j] > whole[i];
        if (newer >= (size_t)keep) {
            char name[64];
            snprintf(name, sizeof name, "ckpt-%09ld", whole[i]);
            remove_ckpt(base, name);
        }
    }
    free(whole);
    (void)fsync_dir(base, NULL);
}

/* Every rank's outcome: NP_OK when all succeeded; else this rank's failure, or an error
 * saying another rank failed. */
static np_status agree(np_dist_t *d, const np_config *cfg, np_status mine, const char *what,
                       np_error *err) {
    int64_t v = mine ? 1 : 0;
    if (np_comm_allreduce_i64(d, NP_CHAN_CTL, &v, 1))
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed during %s", cfg->rank, what);
    if (mine) return mine;
    if (v)
        return np_err(err, NP_STATUS_IO, "another rank failed during %s (see its message)", what);
    return NP_OK;
}

static np_status write_manifest(const np_config *cfg, const char *dir, const np_ckpt_state *s,
                                uint64_t fp, const sbuf *cfgtext, const int64_t *files,
                                np_error *err) {
    sbuf b = {0};
    sb_printf(&b, "nestpipe checkpoint %d\nstep %ld\nranks %d\n", CK_VERSION, s->step, cfg->ranks);
    sb_printf(&b,
              "data_delivered %" PRIu64 "\ndata_next_index %" PRIu64 "\ndata_skipped %" PRId64 "\n",
              s->data.delivered, s->data.next_index, s->data.skipped);
    sb_printf(&b, "loss_first %a\nlosses %d", s->loss_first, s->n_losses);
    for (int i = 0; i < s->n_losses; i++)
        sb_printf(&b, " %a", s->losses[i]);
    sb_printf(&b, "\nfingerprint %016" PRIx64 "\n", fp);
    sb_printf(&b, "%.*s", (int)cfgtext->n, cfgtext->p);
    sb_printf(&b, "file dense %" PRId64 " %016" PRIx64 "\n", files[3], (uint64_t)files[4]);
    for (int r = 0; r < cfg->ranks; r++)
        sb_printf(&b, "file shard-%d-of-%d %" PRId64 " %016" PRIx64 "\n", r, cfg->ranks,
                  files[6 * r + 1], (uint64_t)files[6 * r + 2]);
    if (b.oom) {
        free(b.p);
        return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    }
    sb_printf(&b, "checksum %016" PRIx64 "\n", XXH3_64bits(b.p, b.n));
    ck_out o;
    uint64_t h, n;
    np_status st = b.oom ? np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory")
                         : ck_open(&o, dir, CK_MANIFEST, err);
    if (!st && (st = ck_write(&o, b.p, b.n, err))) ck_abandon(&o);
    if (!st) st = ck_commit(&o, 0, &h, &n, s->step, "manifest", err);
    free(b.p);
    return st;
}

np_status np_ckpt_save(np_dist_t *d, const np_config *cfg, np_trainer_t *tr, np_model_t *m,
                       const np_ckpt_state *s, np_ckpt_stats *stats, np_error *err) {
    double t0 = now_s();
    memset(stats, 0, sizeof *stats);
    char dir[CK_PATH];
    step_dir(dir, sizeof dir, cfg->checkpoint_dir, s->step);
    (void)fit(stats->path, sizeof stats->path, "%s", dir);
    np_status st = NP_OK;
    sbuf text = {0};
    uint64_t fp = 0;
    if (!np_host_is_little_endian())
        st = np_err(err, NP_STATUS_UNSUPPORTED, "checkpoint: needs a little-endian host");
    if (!st) st = fingerprint(cfg, &fp, &text, err);
    /* rank 0 makes the folder; an older attempt at the same step loses its manifest first,
     * so the folder is torn (not whole) until the new manifest is in place */
    if (!st && cfg->rank == 0) {
        char p[CK_PATH + 16];
        if (mkdir(cfg->checkpoint_dir, 0755) && errno != EEXIST)
            st = np_err(err, NP_STATUS_IO, "checkpoint-dir %s: cannot create it: %s",
                        cfg->checkpoint_dir, strerror(errno));
        else if (mkdir(dir, 0755) && errno != EEXIST)
            st = np_err(err, NP_STATUS_IO, "checkpoint %s: cannot create it: %s", dir,
                        strerror(errno));
        snprintf(p, sizeof p, "%s/" CK_MANIFEST, dir);
        if (!st && unlink(p) && errno != ENOENT)
            st = np_err(err, NP_STATUS_IO, "checkpoint %s: cannot remove the old manifest: %s", p,
                        strerror(errno));
        if (!st) remove_temps(dir);
        if (!st) st = fsync_dir(dir, err);
        if (!st) st = fsync_dir(cfg->checkpoint_dir, err);
    }
    if ((st = agree(d, cfg, st, "a checkpoint's set-up", err))) {
        free(text.p);
        return st;
    }
    /* every rank its shard, in parallel; rank 0 also the dense parameters */
    uint64_t sb = 0, sh = 0, db = 0, dh = 0;
    np_trainer_hold(tr);
    st = write_shard(cfg, m, dir, s->step, fp, &sb, &sh, err);
    if (!st && cfg->rank == 0) st = write_dense(m, dir, s->step, fp, &db, &dh, err);
    np_trainer_release(tr);
    /* rank 0 learns every file's size and hash (and checks the ranks agree on the data) */
    int R = cfg->ranks;
    int64_t mine[6] = {st ? 1 : 0,  (int64_t)sb, (int64_t)sh,
                       (int64_t)db, (int64_t)dh, (int64_t)s->data.delivered};
    int64_t *all = calloc((size_t)R * 6, sizeof *all);
    if (!all) {
        free(text.p);
        return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    }
    if (np_comm_allgather(d, NP_CHAN_CTL, mine, all, 6, sizeof(int64_t))) {
        free(all);
        free(text.p);
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed gathering checkpoint hashes",
                      cfg->rank);
    }
    int failed = 0;
    double bytes = 0;
    for (int r = 0; r < R; r++) {
        failed |= all[6 * r] != 0;
        bytes += (double)all[6 * r + 1] + (double)all[6 * r + 3];
    }
    if (!st && failed)
        st = np_err(err, NP_STATUS_IO,
                    "another rank failed writing checkpoint %s (see its message)", dir);
    if (!st && cfg->rank == 0) {
        for (int r = 1; r < R && !st; r++)
            if (all[6 * r + 5] != all[5])
                st = np_err(err, NP_STATUS_INTERNAL,
                            "checkpoint %s: rank %d read %" PRId64 " records, rank 0 %" PRId64, dir,
                            r, all[6 * r + 5], all[5]);
        if (!st) st = fsync_dir(dir, err);
        if (!st) st = write_manifest(cfg, dir, s, fp, &text, all, err);
        if (!st) st = fsync_dir(dir, err);
        if (!st) prune(cfg->checkpoint_dir, s->step, cfg->keep_checkpoints);
    }
    free(all);
    free(text.p);
    if (failed) return st; /* every rank knows already */
    st = agree(d, cfg, st, "writing the manifest", err);
    stats->bytes = bytes;
    stats->seconds = now_s() - t0;
    return st;
}

/* ---------------------------------------------------------------- loading */

typedef struct manifest {
    char path[CK_PATH]; /* the manifest file, for messages */
    char dir[CK_PATH];
    long step;
    int ranks;
    np_data_pos data;
    double loss_first;
    int n_losses;
    double *losses;
    char *text; /* the whole file, NUL-terminated, lines cut in place */
    size_t len;
} manifest;

/* The line "key ..." of the manifest's text (after the version line), or NULL. */
static const char *mf_line(const manifest *mf, const char *key) {
    size_t k = strlen(key);
    for (const char *p = mf->text; p < mf->text + mf->len;) {
        const char *nl = memchr(p, '\n', (size_t)(mf->text + mf->len - p));
        if (!nl) break;
        if ((size_t)(nl - p) > k && !strncmp(p, key, k) && p[k] == ' ') return p + k + 1;
        p = nl + 1;
    }
    return NULL;
}

/* The newest folder ckpt-<step> with a manifest under base. */
static np_status find_newest(const char *base, char *name, size_t n, np_error *err) {
    DIR *dh = opendir(base);
    if (!dh)
        return np_err(err, errno == ENOENT || errno == ENOTDIR ? NP_STATUS_BAD_INPUT : NP_STATUS_IO,
                      "resume %s: cannot open the folder: %s", base, strerror(errno));
    long best = -1, torn = 0;
    struct dirent *de;
    while ((de = readdir(dh))) {
        long s = parse_step(de->d_name);
        if (s < 0) continue;
        if (!is_whole(base, de->d_name)) {
            torn++;
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
    return NP_OK;
}

static np_status read_manifest(const char *base, manifest *mf, np_error *err) {
    char name[256];
    np_status st = find_newest(base, name, sizeof name, err);
    if (st) return st;
    if (fit(mf->dir, sizeof mf->dir, "%s/%s", base, name) ||
        fit(mf->path, sizeof mf->path, "%s/" CK_MANIFEST, mf->dir))
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
    if (!(v = mf_line(mf, key)))                                                                   \
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
static np_status check_config(const manifest *mf, const sbuf *mine, np_error *err) {
    for (const char *p = mine->p; p < mine->p + mine->n;) {
        const char *nl = memchr(p, '\n', (size_t)(mine->p + mine->n - p));
        const char *key = p + 7, *sp = memchr(key, ' ', (size_t)(nl - key));
        char k[64];
        snprintf(k, sizeof k, "config %.*s", (int)(sp - key), key);
        const char *theirs = mf_line(mf, k);
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
static np_status mf_file(const manifest *mf, const char *name, uint64_t *size, uint64_t *hash,
                         char *path, size_t pn, np_error *err) {
    char k[80];
    snprintf(k, sizeof k, "file %s", name);
    snprintf(path, pn, "%s/%s", mf->dir, name);
    const char *v = mf_line(mf, k);
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

/* A checkpoint file read front to back, hashed on the way. */
typedef struct ck_in {
    FILE *f;
    const char *path;
    XXH3_state_t *h;
    uint64_t bytes;
} ck_in;

static np_status ck_read(ck_in *in, void *p, size_t n, np_error *err) {
    if (fread(p, 1, n, in->f) != n)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: ends early (truncated)", in->path);
    XXH3_64bits_update(in->h, p, n);
    in->bytes += n;
    return NP_OK;
}

/* The trailer: the content's hash, which must also be the manifest's, then the end. */
static np_status ck_finish(ck_in *in, uint64_t want, np_error *err) {
    unsigned char t[8];
    uint64_t got = XXH3_64bits_digest(in->h);
    if (fread(t, 1, 8, in->f) != 8)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: ends early (truncated)", in->path);
    in->bytes += 8;
    if (got != want || np_le_get64(t) != want)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "checkpoint %s: checksum %016" PRIx64 ", but the manifest says %016" PRIx64
                      ": the file is corrupted",
                      in->path, got, want);
    if (fgetc(in->f) != EOF)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: bytes after the end", in->path);
    return NP_OK;
}

static np_status ck_in_open(ck_in *in, const char *path, np_error *err) {
    in->path = path;
    in->bytes = 0;
    in->h = XXH3_createState();
    in->f = fopen(path, "rb");
    if (!in->h || !in->f || XXH3_64bits_reset(in->h) != XXH_OK) {
        int e = errno;
        if (in->f) fclose(in->f);
        XXH3_freeState(in->h);
        in->f = NULL;
        in->h = NULL;
        return np_err(err, NP_STATUS_IO, "checkpoint %s: cannot open: %s", path, strerror(e));
    }
    return NP_OK;
}

static void ck_in_close(ck_in *in) {
    if (in->f) fclose(in->f);
    XXH3_freeState(in->h);
    in->f = NULL;
    in->h = NULL;
}

static np_status load_dense(const manifest *mf, np_model_t *m, uint64_t fp, double *bytes,
                            np_error *err) {
    char path[CK_PATH + 16];
    uint64_t size, hash;
    np_status st = mf_file(mf, "dense", &size, &hash, path, sizeof path, err);
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
    np_status st = mf_file(mf, name, &size, &hash, path, sizeof path, err);
    ck_in in;
    if (st || (st = ck_in_open(&in, path, err))) return st;
    np_config old = *cfg; /* the writer's sharding: a pure function of its rank count */
    old.ranks = mf->ranks;
    old.rank = r0;
    const int T = m->T, d = m->d;
    size_t hn = 56 + 8 * (size_t)T;
    unsigned char *h = malloc(hn);
    float *buf = malloc(CK_BLOCK);
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
                float *dst = pass ? m->state[t] : m->table[t];
                memcpy(dst + (size_t)np_shard_local(cfg, g) * w, buf + i * w, w * sizeof(float));
                if (!pass) got[t]++;
            }
            done += (int64_t)k;
        }
    }
    if (!st) st = ck_finish(&in, hash, err);
out:
    *bytes += (double)in.bytes;
    free(h);
    free(buf);
    ck_in_close(&in);
    return st;
}

np_status np_ckpt_load(const np_config *cfg, np_model_t *m, np_ckpt_state *s, np_ckpt_stats *stats,
                       np_error *err) {
    double t0 = now_s();
    memset(stats, 0, sizeof *stats);
    memset(s, 0, sizeof *s);
    manifest mf = {0};
    sbuf text = {0};
    uint64_t fp = 0;
    int64_t *got = NULL;
    np_status st = NP_OK;
    if (!np_host_is_little_endian())
        st = np_err(err, NP_STATUS_UNSUPPORTED, "resume: needs a little-endian host");
    if (!st) st = read_manifest(cfg->resume, &mf, err);
    if (!st) (void)fit(stats->path, sizeof stats->path, "%s", mf.dir);
    if (!st) st = fingerprint(cfg, &fp, &text, err);
    if (!st) st = check_config(&mf, &text, err);
    const char *v = st ? NULL : mf_line(&mf, "fingerprint");
    if (!st && (!v || strtoull(v, NULL, 16) != fp))
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "checkpoint %s: config fingerprint differs (a manifest of another version?)",
                    mf.path);
    /* every file there and of the listed size before reading any (a torn or cut checkpoint
     * fails alike on every rank) */
    char name[64], path[CK_PATH + 16];
    uint64_t size, hash;
    if (!st) st = mf_file(&mf, "dense", &size, &hash, path, sizeof path, err);
    for (int r = 0; r < mf.ranks && !st; r++) {
        snprintf(name, sizeof name, "shard-%d-of-%d", r, mf.ranks);
        st = mf_file(&mf, name, &size, &hash, path, sizeof path, err);
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
    stats->seconds = now_s() - t0;
    return st;
}
