/* Saving a checkpoint (np_ckpt_save): every rank its table shard in parallel, rank 0 the
 * dense parameters and, once every rank's files are in, the manifest; then the oldest ones
 * beyond "keep-checkpoints" and torn ones are removed. Not here: when the driver takes one
 * (runtime/train/run.c). */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/comm.h"
#include "runtime/state/ckpt_impl.h"

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
        if (is_temp(de->d_name) && !ck_fit(p, sizeof p, "%s/%s", dir, de->d_name)) unlink(p);
    closedir(dh);
}

/* Removes a checkpoint folder: the manifest first (so it is never seen whole but broken),
 * then the files nestpipe writes there; anything else keeps the folder. */
static void remove_ckpt(const char *base, const char *name) {
    char dir[CK_PATH], p[CK_PATH + 256];
    snprintf(dir, sizeof dir, "%s/%s", base, name);
    snprintf(p, sizeof p, "%s/" CK_MANIFEST, dir);
    if (!unlink(p)) (void)ck_fsync_dir(dir, NULL);
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
        long s = ck_parse_step(de->d_name);
        if (s < 0) continue;
        if (ck_is_whole(base, de->d_name)) {
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
    (void)ck_fsync_dir(base, NULL);
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

np_status np_ckpt_save(np_dist_t *d, const np_config *cfg, np_trainer_t *tr, np_model_t *m,
                       const np_ckpt_state *s, np_ckpt_stats *stats, np_error *err) {
    double t0 = ck_now();
    memset(stats, 0, sizeof *stats);
    char dir[CK_PATH];
    ck_step_dir(dir, sizeof dir, cfg->checkpoint_dir, s->step);
    (void)ck_fit(stats->path, sizeof stats->path, "%s", dir);
    np_status st = NP_OK;
    sbuf text = {0};
    uint64_t fp = 0;
    if (!np_host_is_little_endian())
        st = np_err(err, NP_STATUS_UNSUPPORTED, "checkpoint: needs a little-endian host");
    if (!st) st = ck_fingerprint(cfg, m, &fp, &text, err);
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
        if (!st) st = ck_fsync_dir(dir, err);
        if (!st) st = ck_fsync_dir(cfg->checkpoint_dir, err);
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
        if (!st) st = ck_fsync_dir(dir, err);
        if (!st) st = ck_write_manifest(cfg, dir, s, fp, &text, all, err);
        if (!st) st = ck_fsync_dir(dir, err);
        if (!st) prune(cfg->checkpoint_dir, s->step, cfg->keep_checkpoints);
    }
    free(all);
    free(text.p);
    if (failed) return st; /* every rank knows already */
    st = agree(d, cfg, st, "writing the manifest", err);
    stats->bytes = bytes;
    stats->seconds = ck_now() - t0;
    return st;
}
