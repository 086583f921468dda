/* np_source: opens the configured data for one split, applies the train/eval split rule and
 * cuts records into table-major CSR batches, over any file format's reader. Not here: the
 * formats (readers.c, over criteo.c, binfmt.c and movielens.c) or the generator
 * (synthetic.c). Split and end-of-data rules: docs/data.md "Splits". */
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data.h"
#include "nestpipe/checkpoint.h"

struct np_source {
    np_data_kind kind;
    np_split split;
    long every;    /* cfg->eval_every: record i is held out when i % every == every-1 */
    long eval_cap; /* cfg->eval_samples: most records the eval split yields */
    int skip_bad;  /* cfg->skip_bad_lines */
    int n_dense, T;
    int seq_len;        /* cfg->seq_len: table 0's bags hold at most this many keys (0: any) */
    int seq_neg;        /* cfg->seq_negatives: negatives put before each sequence */
    int64_t *rows;      /* (T) rows per table: file keys are reduced modulo these */
    uint64_t delivered; /* records of this split handed out in batches so far */
    long skipped;       /* bad lines of this split skipped */
    np_status failed;   /* sticky: once a read fails, every later call fails the same way */
    np_error failure;

    np_syn *syn;              /* NP_DATA_SYNTHETIC */
    const np_reader_ops *ops; /* files: the format's reader (readers.c) */
    void *rd;                 /* its state */
    np_reader_spec spec;      /* what it opens (again at each pass) */
    uint64_t next_index; /* files: stream index of the next record to read */
    int eof;             /* files: no more records of this split */
    int epochs, epoch;   /* files, train split: passes over the file, and the current one */
    char path[NP_PATH_MAX];
    /* files, train split, --shuffle-buffer K: a pool of K records read ahead; each record
     * read replaces one drawn at random, which goes to the stage (shuffle_out) */
    long pool_cap, pool_n;
    uint64_t seed, draws;  /* the draws so far: the counter of the pool's random stream */
    uint64_t *pool_index;  /* (pool_cap) stream index */
    float *pool_label;     /* (pool_cap) */
    float *pool_dense;     /* (pool_cap, n_dense) */
    uint32_t *pool_count;  /* (pool_cap, T) */
    uint64_t **pool_keys;  /* (pool_cap) raw keys, owned */
    size_t *pool_keys_cap; /* (pool_cap) */

    /* files: records read but not yet delivered, sample-major; kept across an END_OF_DATA
     * so a partial train batch is not consumed */
    long st_n, st_cap;
    uint64_t *st_index; /* (st_cap) stream index of each staged record */
    float *st_label;    /* (st_cap) */
    float *st_dense;    /* (st_cap, n_dense) */
    uint32_t *st_count; /* (st_cap, T) keys per table */
    size_t *st_kpos;    /* (st_cap) where each record's keys start in st_keys */
    int64_t *st_keys;   /* (st_nnz) reduced keys, record by record, table-major inside */
    size_t st_nnz, st_keys_cap;
    np_batch whole; /* files, several ranks: the global batch a slice is cut from */
};

void np_source_free(np_source_t *src) {
    if (!src) return;
    for (long j = 0; src->pool_keys && j < src->pool_cap; j++)
        free(src->pool_keys[j]);
    free(src->pool_keys);
    free(src->pool_keys_cap);
    free(src->pool_index);
    free(src->pool_label);
    free(src->pool_dense);
    free(src->pool_count);
    np_batch_free(&src->whole);
    np_syn_free(src->syn);
    if (src->ops) src->ops->close(src->rd);
    free(src->rows);
    free(src->st_label);
    free(src->st_dense);
    free(src->st_count);
    free(src->st_kpos);
    free(src->st_index);
    free(src->st_keys);
    free(src);
}

long np_source_skipped(const np_source_t *src) {
    return src ? src->skipped : 0;
}

np_status np_source_open(const np_config *cfg0, np_split split, np_source_t **out, np_error *err) {
    *out = NULL;
    /* eval-data: the eval split is every record of that file, and no training record is
     * held out */
    np_config ecfg = *cfg0;
    const np_config *cfg = &ecfg;
    if (cfg0->eval_data != NP_DATA_SYNTHETIC) {
        ecfg.eval_every = 0;
        if (split == NP_SPLIT_EVAL) {
            ecfg.data = cfg0->eval_data;
            memcpy(ecfg.data_path, cfg0->eval_data_path, sizeof ecfg.data_path);
            split = NP_SPLIT_ALL;
        }
    }
    np_source_t *s = np_zalloc(1, sizeof *s, "data source", err);
    if (!s) return NP_STATUS_NO_MEMORY;
    s->kind = cfg->data;
    s->split = split;
    s->every = cfg->eval_every > 0 ? cfg->eval_every : 0;
    s->ops = np_reader_of(cfg->data);
    if (s->ops && s->ops->every) s->every = s->ops->every; /* the format's own hold-out */
    s->eval_cap = cfg->eval_samples > 0 ? cfg->eval_samples : 0;
    int all = split == NP_SPLIT_ALL;
    if (all) { /* every record: the eval split of a hold-out that holds every one, uncapped */
        s->split = NP_SPLIT_EVAL;
        s->every = 1;
        s->eval_cap = LONG_MAX;
    }
    s->skip_bad = cfg->skip_bad_lines;
    s->epochs = split == NP_SPLIT_TRAIN && cfg->epochs > 1 ? cfg->epochs : 1;
    snprintf(s->path, sizeof s->path, "%s", cfg->data_path);
    s->n_dense = np_config_dense(cfg);
    s->T = cfg->tables;
    s->seq_len = cfg->seq_len;
    s->seq_neg = cfg->seq_len > 0 ? cfg->seq_negatives : 0;
    np_status st;
    s->seed = cfg->seed;
    if (split == NP_SPLIT_TRAIN && cfg->data != NP_DATA_SYNTHETIC && cfg->shuffle_buffer > 0) {
        size_t k = (size_t)cfg->shuffle_buffer;
        s->pool_cap = cfg->shuffle_buffer;
        s->pool_index = np_alloc(k, sizeof(uint64_t), "shuffle buffer", err);
        s->pool_label = np_alloc(k, sizeof(float), "shuffle buffer", err);
        s->pool_dense = np_alloc(k * (size_t)np_config_dense(cfg), sizeof(float), "shuffle buffer", err);
        s->pool_count = np_alloc(k * (size_t)cfg->tables, sizeof(uint32_t), "shuffle buffer", err);
        s->pool_keys = np_zalloc(k, sizeof(uint64_t *), "shuffle buffer", err);
        s->pool_keys_cap = np_zalloc(k, sizeof(size_t), "shuffle buffer", err);
        if (!s->pool_index || !s->pool_label || !s->pool_dense || !s->pool_count ||
            !s->pool_keys || !s->pool_keys_cap) {
            st = NP_STATUS_NO_MEMORY;
            goto fail;
        }
    }
    if (s->every == 1 && !all) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "eval-every: 1 would hold out every record; give 0 or an integer >= 2");
        goto fail;
    }
    if (s->T < 1 || s->T > NP_MAX_TABLES || s->n_dense < 1) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "data: need 1..%d tables and >= 1 dense feature, got tables %d and bottom "
                    "input %d",
                    NP_MAX_TABLES, s->T, s->n_dense);
        goto fail;
    }
    if (!(s->rows = np_alloc((size_t)s->T, sizeof(int64_t), "source row counts", err))) {
        st = NP_STATUS_NO_MEMORY;
        goto fail;
    }
    for (int t = 0; t < s->T; t++) {
        s->rows[t] = np_config_rows(cfg, t);
        if (s->rows[t] < 1) {
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "rows: table %d has %lld rows; give one row count (>= 1) or one per "
                        "table",
                        t, (long long)s->rows[t]);
            goto fail;
        }
    }
    s->spec = (np_reader_spec){.path = s->path, .n_dense = s->n_dense, .T = s->T,
                               .seq_len = cfg->seq_len};
    if (cfg->data == NP_DATA_SYNTHETIC) {
        if ((st = np_syn_create(cfg, &s->syn, err))) goto fail;
    } else if (s->ops) {
        if ((st = s->ops->open(&s->spec, &s->rd, err))) goto fail;
    } else {
        st = np_err(err, NP_STATUS_INTERNAL, "np_source_open: unknown data kind %d", (int)cfg->data);
        goto fail;
    }
    /* an eval split with nothing held out is empty from the start */
    if (split == NP_SPLIT_EVAL && (s->every == 0 || s->eval_cap == 0)) s->eof = 1;
    *out = s;
    return NP_OK;
fail:
    np_source_free(s);
    return st;
}

/* ---------------------------------------------------------------- staging (files) */

/* Room for one more staged record with nk keys. */
static np_status stage_reserve(np_source_t *s, size_t nk, np_error *err) {
    if (s->st_n == s->st_cap) {
        size_t cap = s->st_cap ? (size_t)s->st_cap * 2 : 64;
        void *p;
        if (!(p = realloc(s->st_label, cap * sizeof(float)))) goto oom;
        s->st_label = p;
        if (!(p = realloc(s->st_dense, cap * (size_t)s->n_dense * sizeof(float)))) goto oom;
        s->st_dense = p;
        if (!(p = realloc(s->st_count, cap * (size_t)s->T * sizeof(uint32_t)))) goto oom;
        s->st_count = p;
        if (!(p = realloc(s->st_kpos, cap * sizeof(size_t)))) goto oom;
        s->st_kpos = p;
        if (!(p = realloc(s->st_index, cap * sizeof(uint64_t)))) goto oom;
        s->st_index = p;
        s->st_cap = (long)cap;
    }
    return np_grow((void **)&s->st_keys, &s->st_keys_cap, s->st_nnz + nk, sizeof(int64_t),
                   "staged keys", err);
oom:
    return np_err(err, NP_STATUS_NO_MEMORY, "out of memory staging %ld records", s->st_cap * 2);
}

/* Stages stream record i: keys are raw, count[t] per table in table order. */
static np_status stage(np_source_t *s, uint64_t i, float label, const float *dense,
                       const uint32_t *count, const uint64_t *keys, np_error *err) {
    size_t nk = 0;
    for (int t = 0; t < s->T; t++)
        nk += count[t];
    np_status st = stage_reserve(s, nk, err);
    if (st) return st;
    long r = s->st_n;
    s->st_index[r] = i;
    s->st_label[r] = label;
    memcpy(s->st_dense + (size_t)r * (size_t)s->n_dense, dense, (size_t)s->n_dense * sizeof(float));
    memcpy(s->st_count + (size_t)r * (size_t)s->T, count, (size_t)s->T * sizeof(uint32_t));
    s->st_kpos[r] = s->st_nnz;
    int64_t *dst = s->st_keys + s->st_nnz;
    size_t q = 0;
    for (int t = 0; t < s->T; t++)
        for (uint32_t k = 0; k < count[t]; k++, q++)
            dst[q] = (int64_t)(keys[q] % (uint64_t)s->rows[t]);
    s->st_nnz += nk;
    s->st_n++;
    return NP_OK;
}

/* Shuffle stream of the pool's draws (docs/formats.md "Random numbers"). */
#define NP_STREAM_SHUFFLE 0x30000

/* Stages pool slot j's record. */
static np_status stage_slot(np_source_t *s, long j, np_error *err) {
    return stage(s, s->pool_index[j], s->pool_label[j],
                 s->pool_dense + (size_t)j * (size_t)s->n_dense,
                 s->pool_count + (size_t)j * (size_t)s->T, s->pool_keys[j], err);
}

/* A draw from the pool: a slot in [0, pool_n), uniform. */
static long draw_slot(np_source_t *s) {
    long j = (long)(np_rng_uniform(s->seed, NP_STREAM_SHUFFLE, s->draws++) * (double)s->pool_n);
    return j < s->pool_n ? j : s->pool_n - 1;
}

/* A record read (not yet staged): without a pool it is staged at once; with one it goes
 * into the pool, and once the pool is full a record drawn from it is staged first, its
 * slot taking the new one. */
static np_status take(np_source_t *s, uint64_t i, float label, const float *dense,
                      const uint32_t *count, const uint64_t *keys, np_error *err) {
    if (s->seq_len > 0 && count[0] > (uint32_t)s->seq_len)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s: record %llu: table 0 holds a sequence of %u keys, longer than "
                      "seq-len %d",
                      s->path, (unsigned long long)i, count[0], s->seq_len);
    if (!s->pool_cap) return stage(s, i, label, dense, count, keys, err);
    long j = s->pool_n;
    if (s->pool_n == s->pool_cap) {
        j = draw_slot(s);
        np_status st = stage_slot(s, j, err);
        if (st) return st;
    } else {
        s->pool_n++;
    }
    size_t nk = 0;
    for (int t = 0; t < s->T; t++)
        nk += count[t];
    if (np_grow((void **)&s->pool_keys[j], &s->pool_keys_cap[j], nk ? nk : 1, sizeof(uint64_t),
                "shuffle buffer keys", err))
        return NP_STATUS_NO_MEMORY;
    s->pool_index[j] = i;
    s->pool_label[j] = label;
    memcpy(s->pool_dense + (size_t)j * (size_t)s->n_dense, dense,
           (size_t)s->n_dense * sizeof(float));
    memcpy(s->pool_count + (size_t)j * (size_t)s->T, count, (size_t)s->T * sizeof(uint32_t));
    memcpy(s->pool_keys[j], keys, nk * sizeof(uint64_t));
    return NP_OK;
}

/* The data ended: the pool's records are staged in random order (each draw's slot is
 * filled by the last one). */
static np_status drain_pool(np_source_t *s, long n, np_error *err) {
    while (s->pool_n > 0 && s->st_n < n) {
        long j = draw_slot(s), last = s->pool_n - 1;
        np_status st = stage_slot(s, j, err);
        if (st) return st;
        if (j != last) { /* the last slot moves into j; pointers swap, so no key is lost */
            s->pool_index[j] = s->pool_index[last];
            s->pool_label[j] = s->pool_label[last];
            memcpy(s->pool_dense + (size_t)j * (size_t)s->n_dense,
                   s->pool_dense + (size_t)last * (size_t)s->n_dense,
                   (size_t)s->n_dense * sizeof(float));
            memcpy(s->pool_count + (size_t)j * (size_t)s->T,
                   s->pool_count + (size_t)last * (size_t)s->T, (size_t)s->T * sizeof(uint32_t));
            uint64_t *kp = s->pool_keys[j];
            size_t kc = s->pool_keys_cap[j];
            s->pool_keys[j] = s->pool_keys[last];
            s->pool_keys_cap[j] = s->pool_keys_cap[last];
            s->pool_keys[last] = kp;
            s->pool_keys_cap[last] = kc;
        }
        s->pool_n--;
    }
    return NP_OK;
}

/* The file ended: the next pass (epoch) starts from its first record again, with the same
 * split rule (stream indices restart at 0); after the last pass the split ends. */
static np_status next_epoch(np_source_t *s, np_error *err) {
    if (s->epoch + 1 >= s->epochs) {
        s->eof = 1;
        return NP_OK;
    }
    s->ops->close(s->rd);
    s->rd = NULL;
    np_status st = s->ops->open(&s->spec, &s->rd, err);
    if (st) return st;
    s->epoch++;
    s->next_index = 0;
    return NP_OK;
}

/* Reads records of this split until n are staged or the split ends (sets s->eof). */
static np_status fill_stage(np_source_t *s, long n, np_error *err) {
    np_status st;
    while (s->st_n < n && !s->eof) {
        if (s->split == NP_SPLIT_EVAL &&
            s->delivered + (uint64_t)s->st_n >= (uint64_t)s->eval_cap) {
            s->eof = 1; /* held-out set is full: no need to read further */
            break;
        }
        uint64_t i = s->next_index;
        st = s->ops->next(s->rd, err);
        if (st == NP_STATUS_END_OF_DATA) {
            if ((st = next_epoch(s, err))) return st;
            continue;
        }
        if (st) return st;
        s->next_index++;
        if (!np_split_holds(s->split, s->every, i)) continue; /* counted, not parsed */
        np_record r;
        st = s->ops->get(s->rd, &r, err);
        if (st == NP_STATUS_BAD_INPUT && s->skip_bad) {
            s->skipped++;
            continue;
        }
        if (st || (st = take(s, i, r.label, r.dense, r.count, r.keys, err))) return st;
    }
    if (s->eof) return drain_pool(s, n, err); /* the pool last, in random order */
    return NP_OK;
}

/* Moves the first m staged records into b as table-major CSR; the rest stay staged. */
static np_status emit_stage(np_source_t *s, long m, np_batch *b, np_error *err) {
    const long left = s->st_n - m;
    const int T = s->T, D = s->n_dense;
    const size_t n1 = (size_t)m + 1;
    const size_t nnz = left ? s->st_kpos[m] : s->st_nnz; /* records are staged in order */
    np_status st;
    if ((st = np_batch_reserve(b, m, D, T, err)) || (st = np_batch_reserve_keys(b, nnz, err)))
        return st;
    memcpy(b->label, s->st_label, (size_t)m * sizeof(float));
    memcpy(b->dense, s->st_dense, (size_t)m * (size_t)D * sizeof(float));
    /* st_kpos walks each record's keys table by table: the transpose to table-major */
    size_t at = 0;
    for (int t = 0; t < T; t++) {
        for (long r = 0; r < m; r++) {
            uint32_t c = s->st_count[(size_t)r * (size_t)T + (size_t)t];
            b->offsets[(size_t)t * n1 + (size_t)r] = (uint32_t)at;
            memcpy(b->keys + at, s->st_keys + s->st_kpos[r], c * sizeof(int64_t));
            s->st_kpos[r] += c;
            at += c;
        }
        b->offsets[(size_t)t * n1 + (size_t)m] = (uint32_t)at;
    }
    b->nnz = at;
    b->first = s->st_index[0];
    s->delivered += (uint64_t)m;
    if (left) { /* a later call asked for fewer records than an earlier one staged */
        memmove(s->st_label, s->st_label + m, (size_t)left * sizeof(float));
        memmove(s->st_dense, s->st_dense + (size_t)m * (size_t)D,
                (size_t)left * (size_t)D * sizeof(float));
        memmove(s->st_count, s->st_count + (size_t)m * (size_t)T,
                (size_t)left * (size_t)T * sizeof(uint32_t));
        memmove(s->st_index, s->st_index + m, (size_t)left * sizeof(uint64_t));
        memmove(s->st_keys, s->st_keys + nnz, (s->st_nnz - nnz) * sizeof(int64_t));
        for (long r = 0; r < left; r++)
            s->st_kpos[r] = s->st_kpos[r + m] - nnz;
    }
    s->st_n = left;
    s->st_nnz -= nnz;
    return NP_OK;
}

/* ---------------------------------------------------------------- batches */

static np_status next_synthetic(np_source_t *s, long n, np_batch *b, np_error *err) {
    long m = n;
    if (s->split == NP_SPLIT_EVAL) {
        if (s->eof || s->delivered >= (uint64_t)s->eval_cap) return NP_STATUS_END_OF_DATA;
        uint64_t left = (uint64_t)s->eval_cap - s->delivered;
        if (left < (uint64_t)m) m = (long)left; /* the eval split's last, partial batch */
    }
    np_status st = np_syn_fill(s->syn, s->split, s->every, s->delivered, m, b, err);
    if (st) return st;
    s->delivered += (uint64_t)m;
    return NP_OK;
}

np_status np_source_next_batch(np_source_t *src, long n, np_batch *b, np_error *err) {
    if (src->failed) {
        if (err) *err = src->failure;
        return src->failed;
    }
    if (n < 1) return np_err(err, NP_STATUS_BAD_INPUT, "batch size %ld: need at least 1 sample", n);
    np_error e; /* kept for the sticky failure even when the caller passes no err */
    np_status st;
    if (src->syn) {
        st = next_synthetic(src, n, b, &e);
    } else {
        st = fill_stage(src, n, &e);
        if (st == NP_OK) {
            /* train: only full batches; eval: also the last partial one */
            if (src->st_n == 0 || (src->st_n < n && src->split == NP_SPLIT_TRAIN))
                return NP_STATUS_END_OF_DATA;
            st = emit_stage(src, src->st_n < n ? src->st_n : n, b, &e);
        }
    }
    if (st == NP_OK) st = np_batch_add_negatives(b, src->seq_neg, src->rows[0], src->seed, &e);
    if (st == NP_OK || st == NP_STATUS_END_OF_DATA) return st;
    src->failed = st;
    src->failure = e;
    if (err) *err = e;
    return st;
}

/* Files, training split, a slice of a global batch: only this rank's records are read
 * (docs/data.md "Several ranks"). Where no record's place depends on another's contents:
 * no shuffle buffer (its draws take every record), no skipped bad lines (a skip moves
 * every later record into another batch). */
static int reads_slice(const np_source_t *s) {
    return s->split == NP_SPLIT_TRAIN && !s->pool_cap && !s->skip_bad && s->ops && s->ops->slices;
}

/* After a slice of a global batch of g: the position is the whole batch's, as if every
 * record of it had been read (the same on every rank, which checkpoints check). */
static void slice_done(np_source_t *s, long g, long n) {
    s->delivered += (uint64_t)(g - n); /* emit_stage counted the slice's n */
}

/* A reader that seeks (binary): the members' stream indices are arithmetic (the split rule
 * is one of the index, passes repeat), so the reader seeks to the slice's first record and
 * reads n members; every rank knows from the record count when the data ends. */
static np_status seek_slice(np_source_t *s, long g, long lo, long n, np_batch *b, np_error *err) {
    int estimated = 0;
    uint64_t N = s->ops->records(s->rd, s->path, &estimated);
    uint64_t e = s->every > 0 ? (uint64_t)s->every : 0;
    uint64_t M = N - (e ? N / e : 0); /* members of the split a pass */
    if (s->eof || !M || s->delivered + (uint64_t)g > M * (uint64_t)s->epochs) {
        s->eof = 1;
        return NP_STATUS_END_OF_DATA;
    }
    np_status st = NP_OK;
    for (long k = 0; k < n && !st; k++) {
        uint64_t m = s->delivered + (uint64_t)(lo + k), j = m % M;
        uint64_t i = np_split_index(NP_SPLIT_TRAIN, s->every, j);
        np_record r;
        if ((st = s->ops->seek(s->rd, i, err)) || (st = s->ops->next(s->rd, err)) ||
            (st = s->ops->get(s->rd, &r, err)))
            break;
        s->epoch = (int)(m / M);
        st = take(s, i, r.label, r.dense, r.count, r.keys, err);
    }
    if (!st) st = emit_stage(s, n, b, err);
    if (st) return st;
    slice_done(s, g, n);
    /* the next record the whole batch's reading would read */
    s->next_index = np_split_index(NP_SPLIT_TRAIN, s->every, (s->delivered - 1) % M) + 1;
    return NP_OK;
}

/* A reader in order (TSV): the batch's records are read (a line's end is a memchr away),
 * those of the slice parsed, the others counted; the data ends where it ends for every
 * rank. */
static np_status read_slice(np_source_t *s, long g, long lo, long n, np_batch *b, np_error *err) {
    if (s->eof) return NP_STATUS_END_OF_DATA;
    np_status st;
    for (long p = 0; p < g;) {
        uint64_t i = s->next_index;
        st = s->ops->next(s->rd, err);
        if (st == NP_STATUS_END_OF_DATA) {
            if ((st = next_epoch(s, err))) return st;
            if (s->eof) return NP_STATUS_END_OF_DATA; /* the slice stays unconsumed */
            continue;
        }
        if (st) return st;
        s->next_index++;
        if (!np_split_holds(s->split, s->every, i)) continue;
        if (p >= lo && p < lo + n) {
            np_record r;
            if ((st = s->ops->get(s->rd, &r, err)) ||
                (st = take(s, i, r.label, r.dense, r.count, r.keys, err)))
                return st;
        }
        p++;
    }
    if ((st = emit_stage(s, n, b, err))) return st;
    slice_done(s, g, n);
    return NP_OK;
}

np_status np_source_next_slice(np_source_t *src, long g, long lo, long n, np_batch *b,
                               np_error *err) {
    if (lo == 0 && n == g) return np_source_next_batch(src, g, b, err);
    if (src->failed) {
        if (err) *err = src->failure;
        return src->failed;
    }
    if (n < 1 || lo < 0 || lo + n > g)
        return np_err(err, NP_STATUS_BAD_INPUT, "slice [%ld, %ld) of a batch of %ld samples", lo,
                      lo + n, g);
    if (src->syn && src->split == NP_SPLIT_TRAIN) {
        /* every sample is a pure function of its index: generate only the slice */
        np_error e;
        np_status st =
            np_syn_fill(src->syn, src->split, src->every, src->delivered + (uint64_t)lo, n, b, &e);
        if (!st) st = np_batch_add_negatives(b, src->seq_neg, src->rows[0], src->seed, &e);
        if (st) {
            src->failed = st;
            src->failure = e;
            if (err) *err = e;
            return st;
        }
        src->delivered += (uint64_t)g;
        return NP_OK;
    }
    if (reads_slice(src) && !src->st_n) { /* nothing staged by a whole batch's read */
        np_error e;
        np_status st = src->ops->seek ? seek_slice(src, g, lo, n, b, &e) : read_slice(src, g, lo, n, b, &e);
        if (!st) st = np_batch_add_negatives(b, src->seq_neg, src->rows[0], src->seed, &e);
        if (st == NP_OK || st == NP_STATUS_END_OF_DATA) return st;
        src->failed = st;
        src->failure = e;
        if (err) *err = e;
        return st;
    }
    /* the whole batch read (and checked), the slice cut from it */
    np_status st = np_source_next_batch(src, g, &src->whole, err);
    if (st) return st;
    return np_batch_slice(&src->whole, lo, n, b, err);
}

/* ---------------------------------------------------------------- checkpoints */

void np_source_tell(const np_source_t *src, np_data_pos *pos) {
    pos->delivered = src->delivered;
    pos->next_index = src->next_index;
    pos->skipped = src->skipped;
}

/* Files are read up to the position again (their records are checked on the way): a
 * binary file's index could make this O(1), but the replay also proves that the file is
 * the one the checkpoint read. */
np_status np_source_seek(np_source_t *src, long g, const np_data_pos *pos, np_error *err) {
    if (src->split != NP_SPLIT_TRAIN || src->delivered != 0)
        return np_err(err, NP_STATUS_INTERNAL, "np_source_seek: only a fresh training source");
    if (src->syn) {
        src->delivered = pos->delivered;
        return NP_OK;
    }
    np_batch scratch = {0};
    np_status st = NP_OK;
    while (src->delivered < pos->delivered && !st)
        st = np_source_next_batch(src, g, &scratch, err);
    np_batch_free(&scratch);
    if (st == NP_STATUS_END_OF_DATA || (!st && (src->delivered != pos->delivered ||
                                                src->next_index != pos->next_index ||
                                                src->skipped != pos->skipped)))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "data %s: the checkpoint stopped after %llu training records (stream "
                      "index %llu, %lld bad lines skipped), but this file gives %llu (index "
                      "%llu, %ld skipped): not the data the checkpoint was trained on",
                      src->path,
                      (unsigned long long)pos->delivered, (unsigned long long)pos->next_index,
                      (long long)pos->skipped, (unsigned long long)src->delivered,
                      (unsigned long long)src->next_index, src->skipped);
    return st;
}

uint64_t np_source_records_per_pass(const np_source_t *s, int *estimated) {
    *estimated = 0;
    uint64_t n = 0;
    if (s->ops && s->ops->records) n = s->ops->records(s->rd, s->path, estimated);
    uint64_t held = s->every > 0 ? n / (uint64_t)s->every : 0;
    return n - held;
}
