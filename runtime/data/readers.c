/* The file formats as one table of readers (np_reader_ops): each opens its file, reads
 * record after record, parses the one just read, and closes; the binary format also seeks
 * and knows its count. runtime/data/source.c applies the split, the passes and the shuffle over
 * any of them. A new format is a parser in its own file and a row here, plus its kind and
 * its name (include/nestpipe/nestpipe.h, runtime/core/config_values.c; docs/architecture.md). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "runtime/core/util.h"
#include "runtime/data/data.h"

/* ---- Criteo TSV: a line read, parsed when asked */

typedef struct tsv_rd {
    np_tsv_reader *r;
    const char *line;
    size_t len;
    long line_no;
    np_criteo_record rec;
} tsv_rd;

static const uint32_t ones[NP_CRITEO_TABLES] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

static np_status tsv_open(const np_reader_spec *sp, void **out, np_error *err) {
    if (sp->T != NP_CRITEO_TABLES || sp->n_dense != NP_CRITEO_DENSE)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "data criteo:%s: Criteo records have %d dense and %d categorical "
                      "features, but the model takes %d dense (dense-features, or the first "
                      "bottom size) and tables is %d",
                      sp->path, NP_CRITEO_DENSE, NP_CRITEO_TABLES, sp->n_dense, sp->T);
    tsv_rd *d = np_zalloc(1, sizeof *d, "TSV reader", err);
    if (!d) return NP_STATUS_NO_MEMORY;
    np_status st = np_tsv_open(sp->path, &d->r, err);
    if (st) {
        free(d);
        return st;
    }
    *out = d;
    return NP_OK;
}

static np_status tsv_next(void *rd, np_error *err) {
    tsv_rd *d = rd;
    return np_tsv_next_line(d->r, &d->line, &d->len, &d->line_no, err);
}

static np_status tsv_get(void *rd, np_record *r, np_error *err) {
    tsv_rd *d = rd;
    np_status st =
        np_criteo_parse_line(np_tsv_path(d->r), d->line_no, d->line, d->len, &d->rec, err);
    if (st) return st;
    *r = (np_record){d->rec.label, d->rec.dense, ones, d->rec.cat};
    return NP_OK;
}

/* Exact below 1 MiB (bad lines included), else estimated from the first MiB's lines. */
static uint64_t tsv_records(void *rd, const char *path, int *estimated) {
    (void)rd;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f) return 0;
    if (fstat(fileno(f), &sb) || sb.st_size <= 0) {
        fclose(f);
        return 0;
    }
    enum { SAMPLE = 1 << 20 };
    char *buf = malloc(SAMPLE);
    size_t got = buf ? fread(buf, 1, SAMPLE, f) : 0, lines = 0, upto = 0;
    fclose(f);
    for (size_t i = 0; i < got; i++)
        if (buf[i] == '\n') lines++, upto = i + 1;
    free(buf);
    if ((off_t)got == sb.st_size) return lines + (got > upto); /* a last one unended too */
    if (!lines) return 0;
    *estimated = 1;
    return (uint64_t)((double)sb.st_size / ((double)upto / (double)lines) + 0.5);
}

static void tsv_close(void *rd) {
    tsv_rd *d = rd;
    if (d) np_tsv_close(d->r);
    free(d);
}

/* ---- binary and MovieLens: a record read whole; its own scratch */

typedef struct rec_rd {
    void *r; /* np_bin_reader or np_ml_reader */
    float label;
    float *dense;    /* (n_dense); zeros for MovieLens */
    uint32_t *count; /* (T) */
    const uint64_t *keys;
} rec_rd;

static void rec_close(rec_rd *d, void (*close)(void *)) {
    if (!d) return;
    if (d->r) close(d->r);
    free(d->dense);
    free(d->count);
    free(d);
}

static rec_rd *rec_new(const np_reader_spec *sp, np_error *err) {
    rec_rd *d = np_zalloc(1, sizeof *d, "reader", err);
    if (!d) return NULL;
    d->dense = np_zalloc((size_t)sp->n_dense, sizeof(float), "record dense", err);
    d->count = np_zalloc((size_t)sp->T, sizeof(uint32_t), "record counts", err);
    if (!d->dense || !d->count) {
        rec_close(d, free);
        return NULL;
    }
    return d;
}

static np_status rec_get(void *rd, np_record *r, np_error *err) {
    (void)err;
    rec_rd *d = rd;
    *r = (np_record){d->label, d->dense, d->count, d->keys};
    return NP_OK;
}

static void bin_close_any(void *r) { np_bin_close(r); }
static void ml_close_any(void *r) { np_ml_close(r); }

static np_status bin_open(const np_reader_spec *sp, void **out, np_error *err) {
    rec_rd *d = rec_new(sp, err);
    if (!d) return NP_STATUS_NO_MEMORY;
    np_bin_reader *b;
    np_status st = np_bin_open(sp->path, sp->n_dense, sp->T, &b, err);
    if (st) {
        rec_close(d, bin_close_any);
        return st;
    }
    d->r = b;
    *out = d;
    return NP_OK;
}

static np_status bin_next(void *rd, np_error *err) {
    rec_rd *d = rd;
    return np_bin_next(d->r, &d->label, d->dense, d->count, &d->keys, err);
}

static np_status bin_seek(void *rd, uint64_t i, np_error *err) {
    return np_bin_seek(((rec_rd *)rd)->r, i, err);
}

static uint64_t bin_records(void *rd, const char *path, int *estimated) {
    (void)path, (void)estimated;
    return np_bin_records(((rec_rd *)rd)->r);
}

static void bin_close(void *rd) { rec_close(rd, bin_close_any); }

static np_status ml_open(const np_reader_spec *sp, void **out, np_error *err) {
    rec_rd *d = rec_new(sp, err);
    if (!d) return NP_STATUS_NO_MEMORY;
    np_ml_reader *m;
    np_status st = np_ml_open(sp->path, sp->seq_len, &m, err);
    if (st) {
        rec_close(d, ml_close_any);
        return st;
    }
    d->r = m;
    d->label = 1.0f; /* a history: label 1, no dense features, table 0 alone */
    *out = d;
    return NP_OK;
}

static np_status ml_next(void *rd, np_error *err) {
    rec_rd *d = rd;
    return np_ml_next(d->r, &d->count[0], &d->keys, err);
}

static void ml_close(void *rd) { rec_close(rd, ml_close_any); }

static const np_reader_ops readers[] = {
    {NP_DATA_CRITEO, tsv_open, tsv_next, tsv_get, NULL, tsv_records, tsv_close, 1, 0},
    {NP_DATA_BIN, bin_open, bin_next, rec_get, bin_seek, bin_records, bin_close, 1, 0},
    /* a user's two records: the history without its last movie, held out every 2nd */
    {NP_DATA_MOVIELENS, ml_open, ml_next, rec_get, NULL, NULL, ml_close, 0, 2},
};

const np_reader_ops *np_reader_of(np_data_kind kind) {
    for (size_t k = 0; k < sizeof readers / sizeof *readers; k++)
        if (readers[k].kind == kind) return &readers[k];
    return NULL;
}
