/* Private to runtime/data/: the split rule, batch growth, and the three record producers
 * (synthetic generator, Criteo TSV reader, binary reader) that source.c drives.
 * Not public API (see include/nestpipe/nestpipe.h); nothing here knows the model. */
#ifndef NP_DATA_DATA_H
#define NP_DATA_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/core/util.h"

/* ---------------------------------------------------------------- split rule
 * Records are numbered i = 0, 1, 2, ... in the underlying stream (synthetic sample index,
 * file line or record index, bad lines included). Record i is held out for evaluation when
 * every > 0 and i % every == every - 1; everything else is training data. */

/* 1 when stream record i belongs to split. */
static inline int np_split_holds(np_split split, long every, uint64_t i) {
    int held = every > 0 && i % (uint64_t)every == (uint64_t)every - 1;
    return split == NP_SPLIT_EVAL ? held : !held;
}

/* Stream index of the j-th record (0-based) of split. For the eval split every must be > 0
 * (with every == 0 the eval split is empty and has no j-th record). */
static inline uint64_t np_split_index(np_split split, long every, uint64_t j) {
    if (every <= 0) return j;
    uint64_t e = (uint64_t)every;
    if (split == NP_SPLIT_EVAL) return j * e + (e - 1);
    return j + j / (e - 1); /* every (e-1) training records skip one held-out record */
}

/* ---------------------------------------------------------------- batches (batch.c) */

/* Makes b hold n samples of n_dense features and n_tables tables: sets b->n, b->n_dense,
 * b->n_tables and grows dense, label and offsets (cap_n). Contents are not kept when the
 * shape (n_dense, n_tables) changes. b->nnz and the keys are left alone. */
NP_NODISCARD np_status np_batch_reserve(np_batch *b, long n, int n_dense, int n_tables,
                                        np_error *err);

/* Grows b->keys to hold nnz keys (cap_nnz); offsets are uint32, so nnz must fit in 32 bits. */
NP_NODISCARD np_status np_batch_reserve_keys(np_batch *b, size_t nnz, np_error *err);
/* With L > 0 (np_config_seq_slots), every bag of table 0 holds at most L keys (a sequence,
 * after its negatives); else a bad input naming the sample. The sources check each record as they read it; the trainers
 * check a program's own batches with this. */
NP_NODISCARD np_status np_batch_check_seq(const np_batch *b, int L, np_error *err);
/* Puts K negative items before each bag of table 0 (of rows0 rows): uniform draws from the
 * counter-based stream seeded by (seed, the bag's keys), so that a record gets the same
 * negatives wherever and whenever it is read (any rank, any split of the batch, a file or
 * the generator). Other tables' keys move along. */
NP_NODISCARD np_status np_batch_add_negatives(np_batch *b, int K, int64_t rows0, uint64_t seed,
                                              np_error *err);

/* ---------------------------------------------------------------- synthetic (synthetic.c) */

typedef struct np_syn np_syn;

/* Precomputes what every sample needs (Zipf CDFs per distinct row count, teacher weights
 * of the dense features). cfg is copied; the tables' row counts must be >= 1. */
NP_NODISCARD np_status np_syn_create(const np_config *cfg, np_syn **out, np_error *err);

/* Writes records j0 .. j0+n-1 of split (stream indices from np_split_index) into b. */
NP_NODISCARD np_status np_syn_fill(np_syn *s, np_split split, long every, uint64_t j0, long n,
                                   np_batch *b, np_error *err);
void np_syn_free(np_syn *s);

/* ---------------------------------------------------------------- Criteo TSV (criteo.c) */

#define NP_CRITEO_DENSE 13
#define NP_CRITEO_TABLES 26
#define NP_CRITEO_FIELDS (1 + NP_CRITEO_DENSE + NP_CRITEO_TABLES)

/* One parsed Criteo line: transformed dense values and raw categorical values. */
typedef struct np_criteo_record {
    float label;                    /* 0 or 1 */
    float dense[NP_CRITEO_DENSE];   /* log1p(max(x, 0)); missing -> 0 */
    uint64_t cat[NP_CRITEO_TABLES]; /* hex value; missing -> 0; not reduced modulo rows */
} np_criteo_record;

/* Parses one line (without its '\n' or trailing '\r'; len bytes, may hold NUL bytes).
 * Errors are NP_STATUS_BAD_INPUT with "path:line:col: what". */
NP_NODISCARD np_status np_criteo_parse_line(const char *path, long line_no, const char *line,
                                            size_t len, np_criteo_record *rec, np_error *err);

/* A line reader over a TSV file (runtime/core/lines.c: bounded lines; the file is never loaded
 * whole). */
typedef struct np_tsv_reader np_tsv_reader;

/* The longest line a TSV file may have (a Criteo record is under 1 KB): a longer one is
 * refused without reading the rest of it. */
#define NP_TSV_MAX_LINE 65536

/* NP_STATUS_IO "path: cannot open: strerror" when the file cannot be opened. */
NP_NODISCARD np_status np_tsv_open(const char *path, np_tsv_reader **out, np_error *err);

/* Next line with '\n' and one trailing '\r' stripped: *line stays valid until the next
 * call, *len its length, *line_no its 1-based number. NP_STATUS_END_OF_DATA at the end;
 * NP_STATUS_BAD_INPUT naming path:line for a line over NP_TSV_MAX_LINE bytes. */
NP_NODISCARD np_status np_tsv_next_line(np_tsv_reader *r, const char **line, size_t *len,
                                        long *line_no, np_error *err);
const char *np_tsv_path(const np_tsv_reader *r);
void np_tsv_close(np_tsv_reader *r);

/* ---------------------------------------------------------------- MovieLens (movielens.c) */

typedef struct np_ml_reader np_ml_reader;
/* Opens ratings.dat (UserID::MovieID::Rating::Timestamp, grouped by user in increasing
 * order); records keep the last max_len movies of a history. */
NP_NODISCARD np_status np_ml_open(const char *path, int max_len, np_ml_reader **out, np_error *err);
/* The next record: for each user with 3 ratings or more, its history without the last movie,
 * then its whole history (record 2j and 2j+1 of user j), movies in time order; *keys valid
 * until the next call. NP_STATUS_END_OF_DATA at the end; a bad line is NP_STATUS_BAD_INPUT
 * naming path:line. */
NP_NODISCARD np_status np_ml_next(np_ml_reader *r, uint32_t *count, const uint64_t **keys,
                                  np_error *err);
void np_ml_close(np_ml_reader *r);

/* ---------------------------------------------------------------- binary (binfmt.c) */

#define NP_BIN_HEADER_BYTES 40
#define NP_BIN_VERSION 1
/* Header flag: a record index follows the records (docs/data.md "Binary format"): the keys
 * before every NP_BIN_INDEX_STRIDE-th record, so a reader seeks to any record. */
#define NP_BIN_FLAG_INDEX 1u
#define NP_BIN_INDEX_STRIDE 256
#define NP_BIN_TRAILER_BYTES 24 /* stride, entries, magic NPSAMIDX */

typedef struct np_bin_reader np_bin_reader;

/* Opens and validates a binary data file (header, exact size, n_dense and n_tables against
 * the model's). Streams it afterwards: records are read one at a time through stdio. */
NP_NODISCARD np_status np_bin_open(const char *path, int n_dense, int n_tables, np_bin_reader **out,
                                   np_error *err);

/* Reads the next record: label, dense (n_dense), count (n_tables), and *keys pointing at
 * the record's sum(count) raw keys (table-major within the record; valid until the next
 * call). NP_STATUS_END_OF_DATA after the header's n_records records. */
NP_NODISCARD np_status np_bin_next(np_bin_reader *r, float *label, float *dense, uint32_t *count,
                                   const uint64_t **keys, np_error *err);
/* Positions the reader at record `rec` (0 <= rec <= records), so np_bin_next reads it
 * next: with the file's index, a seek to the indexed record at or before it and at most
 * NP_BIN_INDEX_STRIDE - 1 records skipped; without one (a file of 0.7.1 or before), the
 * records between are skipped (their headers read, their keys passed over), from the
 * start when rec is behind. Skipped records are not validated, but that the key counts
 * stay within the header's total (a record that is read is). */
NP_NODISCARD np_status np_bin_seek(np_bin_reader *r, uint64_t rec, np_error *err);
/* 1 when the file has a record index (np_bin_seek jumps), 0 when it skips. */
int np_bin_indexed(const np_bin_reader *r);
/* The records the header says the file holds. */
uint64_t np_bin_records(const np_bin_reader *r);
void np_bin_close(np_bin_reader *r);

/* ---------------------------------------------------------------- readers (readers.c) */

/* A record as a file format hands it over: raw keys, count[t] of them per table in table
 * order; valid until the reader's next call. */
typedef struct np_record {
    float label;
    const float *dense;
    const uint32_t *count;
    const uint64_t *keys;
} np_record;

/* What a reader opens: the file and the model's widths. */
typedef struct np_reader_spec {
    const char *path;
    int n_dense, T;
    int seq_len; /* table 0's longest sequence kept (MovieLens), 0: any */
} np_reader_spec;

/* A file format, one row of readers.c's table. */
typedef struct np_reader_ops {
    np_data_kind kind; /* its name: np_cfg_data_names[kind] */
    /* Opens and checks the file against the spec; *rd is the reader's state. */
    NP_NODISCARD np_status (*open)(const np_reader_spec *sp, void **rd, np_error *err);
    /* Reads the next record (counted, not yet parsed); NP_STATUS_END_OF_DATA past the last. */
    NP_NODISCARD np_status (*next)(void *rd, np_error *err);
    /* The record next read, parsed: NP_STATUS_BAD_INPUT naming path:line when malformed
     * (the source may skip it: --skip-bad-lines). */
    NP_NODISCARD np_status (*get)(void *rd, np_record *r, np_error *err);
    /* NULL, or positions the reader so next reads record i (the binary format; a reader
     * that seeks has `records` too: a rank's slice is found from the count). */
    NP_NODISCARD np_status (*seek)(void *rd, uint64_t i, np_error *err);
    /* NULL (unknown: 0), or the records of one pass; *estimated = 1 when estimated. */
    uint64_t (*records)(void *rd, const char *path, int *estimated);
    void (*close)(void *rd); /* NULL rd: nothing */
    int slices;              /* a rank reads only its slice of a global batch */
    int every;               /* 0, or the format's own hold-out rule (record i % every) */
} np_reader_ops;

/* The reader of a file format; NULL for synthetic data. */
const np_reader_ops *np_reader_of(np_data_kind kind);

/* How many training records one pass over the source's file holds (train split of file
 * data; held-out records not counted): exact for the binary format (its header's count),
 * estimated for a Criteo TSV larger than 1 MiB from its size and the mean length of its
 * first MiB of lines (*estimated = 1), counted exactly below that (bad lines included).
 * 0 for synthetic data or an unreadable file (the reads then say why). runtime/data/source.c */
uint64_t np_source_records_per_pass(const np_source_t *src, int *estimated);

#endif
