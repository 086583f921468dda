/* The NPSAMPLE binary data format: a validating streaming reader and np_convert_criteo,
 * which writes it from a Criteo TSV through the TSV parser. Byte layout: docs/data.md.
 * Not here: the split or batching (source.c). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "runtime/core/util.h"
#include "runtime/data/data.h"

static const char bin_magic[8] = {'N', 'P', 'S', 'A', 'M', 'P', 'L', 'E'};

/* stdio buffer for both directions: records are small, so read and write in big chunks */
#define BIN_IO_CHUNK (1 << 20)

static np_status need_little_endian(np_error *err) {
    if (np_host_is_little_endian()) return NP_OK;
    return np_err(err, NP_STATUS_UNSUPPORTED,
                  "the nestpipe binary data format is little-endian and this host is not");
}

/* ---------------------------------------------------------------- reader */

struct np_bin_reader {
    FILE *f;
    char *path; /* owned copy for messages */
    uint32_t n_dense, n_tables;
    uint64_t n_records, n_keys;
    uint64_t record;    /* index of the next record */
    uint64_t keys_read; /* keys in the records read so far */
    uint64_t offset;    /* byte offset of the next record */
    uint64_t *keys;     /* (keys_cap) the current record's keys */
    size_t keys_cap;
    uint64_t *index;    /* (n_index) keys before record k * NP_BIN_INDEX_STRIDE; NULL: none */
    uint64_t n_index;
    unsigned char *checked; /* (n_index) 1: stride k's headers were found to agree with it */
};

int np_bin_indexed(const np_bin_reader *r) {
    return r->index != NULL;
}

/* Bytes of record headers (label, dense, counts) of n records. */
static uint64_t head_bytes(const np_bin_reader *r, uint64_t n) {
    return n * (4 + 4 * (uint64_t)r->n_dense + 4 * (uint64_t)r->n_tables);
}

uint64_t np_bin_records(const np_bin_reader *r) {
    return r->n_records;
}

void np_bin_close(np_bin_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->path);
    free(r->keys);
    free(r->index);
    free(r->checked);
    free(r);
}

/* The index after the records (the file's size already checked against it): its trailer
 * (stride, entries, magic) and entries, each the keys before its record, from 0 and never
 * decreasing, within the header's keys. The reader is left at the first record. */
static np_status read_index(np_bin_reader *r, uint64_t size, np_error *err) {
    unsigned char t[NP_BIN_TRAILER_BYTES];
    uint64_t n = (r->n_records + NP_BIN_INDEX_STRIDE - 1) / NP_BIN_INDEX_STRIDE;
    if (fseeko(r->f, (off_t)(size - NP_BIN_TRAILER_BYTES), SEEK_SET) ||
        fread(t, 1, sizeof t, r->f) != sizeof t)
        return np_err(err, NP_STATUS_IO, "%s: cannot read the record index: %s", r->path,
                      strerror(errno));
    if (memcmp(t + 16, "NPSAMIDX", 8) || np_le_get64(t) != NP_BIN_INDEX_STRIDE ||
        np_le_get64(t + 8) != n)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s: the record index's trailer is not one of %llu entries a %d records "
                      "(header flags say there is one): the file is corrupt",
                      r->path, (unsigned long long)n, NP_BIN_INDEX_STRIDE);
    if (n && (!(r->index = malloc((size_t)n * sizeof *r->index)) ||
              !(r->checked = calloc((size_t)n, 1))))
        return np_err(err, NP_STATUS_NO_MEMORY, "%s: out of memory reading the record index",
                      r->path);
    r->n_index = n;
    if (n && (fseeko(r->f, (off_t)(size - NP_BIN_TRAILER_BYTES - 8 * n), SEEK_SET) ||
              fread(r->index, 8, (size_t)n, r->f) != (size_t)n))
        return np_err(err, NP_STATUS_IO, "%s: cannot read the record index: %s", r->path,
                      strerror(errno));
    for (uint64_t k = 0; k < n; k++) {
        unsigned char *b = (unsigned char *)&r->index[k];
        r->index[k] = np_le_get64(b);
        if ((k == 0 && r->index[k]) || (k && r->index[k] < r->index[k - 1]) ||
            r->index[k] > r->n_keys)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "%s: record index entry %llu (%llu keys before record %llu) is out of "
                          "order: the file is corrupt",
                          r->path, (unsigned long long)k, (unsigned long long)r->index[k],
                          (unsigned long long)(k * NP_BIN_INDEX_STRIDE));
    }
    if (fseeko(r->f, NP_BIN_HEADER_BYTES, SEEK_SET))
        return np_err(err, NP_STATUS_IO, "%s: cannot seek: %s", r->path, strerror(errno));
    return NP_OK;
}

/* Exact file size from the header, or 0 with *overflow set when it exceeds 64 bits. */
static uint64_t expected_size(uint64_t n_records, uint32_t n_dense, uint32_t n_tables,
                              uint64_t n_keys, int *overflow) {
    uint64_t per = 4 + 4 * (uint64_t)n_dense + 4 * (uint64_t)n_tables; /* < 2^35 */
    *overflow = 0;
    if (n_records > (UINT64_MAX - NP_BIN_HEADER_BYTES) / per) goto over;
    uint64_t size = NP_BIN_HEADER_BYTES + n_records * per;
    if (n_keys > (UINT64_MAX - size) / 8) goto over;
    return size + 8 * n_keys;
over:
    *overflow = 1;
    return 0;
}

np_status np_bin_open(const char *path, int n_dense, int n_tables, np_bin_reader **out,
                      np_error *err) {
    *out = NULL;
    np_status st = need_little_endian(err);
    if (st) return st;
    np_bin_reader *r = np_zalloc(1, sizeof *r, "binary reader", err);
    if (!r) return NP_STATUS_NO_MEMORY;
    size_t plen = strlen(path);
    if (!(r->path = np_alloc(plen + 1, 1, "binary data path", err))) {
        st = NP_STATUS_NO_MEMORY;
        goto fail;
    }
    memcpy(r->path, path, plen + 1);
    if (!(r->f = fopen(path, "rb"))) {
        st = np_err(err, NP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    setvbuf(r->f, NULL, _IOFBF, BIN_IO_CHUNK);
    struct stat sb;
    if (fstat(fileno(r->f), &sb)) {
        st = np_err(err, NP_STATUS_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size;
    unsigned char h[NP_BIN_HEADER_BYTES];
    if (size < NP_BIN_HEADER_BYTES) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "%s: %llu bytes, too short for the %d-byte header of a nestpipe binary data "
                    "file",
                    path, (unsigned long long)size, NP_BIN_HEADER_BYTES);
        goto fail;
    }
    if (fread(h, 1, sizeof h, r->f) != sizeof h) {
        st = np_err(err, NP_STATUS_IO, "%s: cannot read the header: %s", path,
                    ferror(r->f) ? strerror(errno) : "unexpected end of file");
        goto fail;
    }
    if (memcmp(h, bin_magic, sizeof bin_magic)) {
        st = np_err(err, NP_STATUS_BAD_INPUT, "%s: not a nestpipe binary data file (bad magic)",
                    path);
        goto fail;
    }
    uint32_t version = np_le_get32(h + 8), flags = np_le_get32(h + 20);
    r->n_dense = np_le_get32(h + 12);
    r->n_tables = np_le_get32(h + 16);
    r->n_records = np_le_get64(h + 24);
    r->n_keys = np_le_get64(h + 32);
    if (version != NP_BIN_VERSION) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "%s: binary format version %u is not supported (this build reads version %d)",
                    path, version, NP_BIN_VERSION);
        goto fail;
    }
    if (flags & ~NP_BIN_FLAG_INDEX) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "%s: header flags 0x%x are not supported (this build reads flags 0 and 1)",
                    path, flags);
        goto fail;
    }
    int over;
    uint64_t want = expected_size(r->n_records, r->n_dense, r->n_tables, r->n_keys, &over);
    if (!over && (flags & NP_BIN_FLAG_INDEX)) { /* the index after the records */
        uint64_t n_idx = (r->n_records + NP_BIN_INDEX_STRIDE - 1) / NP_BIN_INDEX_STRIDE;
        if (want > UINT64_MAX - NP_BIN_TRAILER_BYTES - 8 * n_idx || n_idx > UINT64_MAX / 8)
            over = 1;
        else
            want += 8 * n_idx + NP_BIN_TRAILER_BYTES;
    }
    if (over || want != size) {
        char want_s[32];
        if (over)
            snprintf(want_s, sizeof want_s, "more than 2^64");
        else
            snprintf(want_s, sizeof want_s, "%llu", (unsigned long long)want);
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "%s: file is %llu bytes but its header (%llu records, %u dense, %u tables, "
                    "%llu keys) implies %s bytes: the file is %s",
                    path, (unsigned long long)size, (unsigned long long)r->n_records, r->n_dense,
                    r->n_tables, (unsigned long long)r->n_keys, want_s,
                    !over && size > want ? "longer than its records (extra bytes)"
                                         : "truncated or its header is corrupt");
        goto fail;
    }
    if (r->n_dense != (uint32_t)n_dense) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "%s: records have %u dense features but the model's bottom input is %d "
                    "(bottom must start with %u)",
                    path, r->n_dense, n_dense, r->n_dense);
        goto fail;
    }
    if (r->n_tables != (uint32_t)n_tables) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "%s: records have %u tables but the model has %d (set tables to %u)", path,
                    r->n_tables, n_tables, r->n_tables);
        goto fail;
    }
    if ((flags & NP_BIN_FLAG_INDEX) && (st = read_index(r, size, err))) goto fail;
    r->offset = NP_BIN_HEADER_BYTES;
    *out = r;
    return NP_OK;
fail:
    np_bin_close(r);
    return st;
}

static np_status read_exact(np_bin_reader *r, void *p, size_t n, np_error *err) {
    if (fread(p, 1, n, r->f) == n) return NP_OK;
    if (ferror(r->f))
        return np_err(err, NP_STATUS_IO, "%s: record %llu: read error: %s", r->path,
                      (unsigned long long)r->record, strerror(errno));
    return np_err(err, NP_STATUS_BAD_INPUT,
                  "%s: record %llu (byte %llu): unexpected end of file (was it changed while "
                  "being read?)",
                  r->path, (unsigned long long)r->record, (unsigned long long)r->offset);
}

static np_status index_agrees(const np_bin_reader *r, np_error *err);

np_status np_bin_next(np_bin_reader *r, float *label, float *dense, uint32_t *count,
                      const uint64_t **keys, np_error *err) {
    if (r->record >= r->n_records) {
        if (r->keys_read != r->n_keys)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "%s: the records hold %llu keys but the header says %llu", r->path,
                          (unsigned long long)r->keys_read, (unsigned long long)r->n_keys);
        return NP_STATUS_END_OF_DATA;
    }
    const uint64_t rec = r->record, at = r->offset;
    np_status st;
    /* the index against the records as they are read: a wrong entry would misplace a seek */
    if ((st = index_agrees(r, err))) return st;
    if ((st = read_exact(r, label, sizeof(float), err)) ||
        (st = read_exact(r, dense, (size_t)r->n_dense * sizeof(float), err)) ||
        (st = read_exact(r, count, (size_t)r->n_tables * sizeof(uint32_t), err)))
        return st;
    if (*label != 0.0f && *label != 1.0f)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s: record %llu (byte %llu): label %g is not 0 or 1", r->path,
                      (unsigned long long)rec, (unsigned long long)at, (double)*label);
    /* a NaN or inf feature would poison the model without a word: refuse it here */
    for (uint32_t j = 0; j < r->n_dense; j++)
        if (!isfinite(dense[j]))
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "%s: record %llu (byte %llu): dense feature %u is %g, not a finite "
                          "number",
                          r->path, (unsigned long long)rec, (unsigned long long)at, j,
                          (double)dense[j]);
    uint64_t nk = 0;
    for (uint32_t t = 0; t < r->n_tables; t++) {
        nk += count[t];
        if (r->keys_read + nk > r->n_keys)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "%s: record %llu (byte %llu): key counts exceed the header's total of "
                          "%llu keys (table %u count %u)",
                          r->path, (unsigned long long)rec, (unsigned long long)at,
                          (unsigned long long)r->n_keys, t, count[t]);
    }
    if ((st = np_grow((void **)&r->keys, &r->keys_cap, (size_t)nk, sizeof(uint64_t),
                      "binary record keys", err)) ||
        (st = read_exact(r, r->keys, (size_t)nk * sizeof(uint64_t), err)))
        return st;
    r->keys_read += nk;
    r->offset += 4 + 4 * (uint64_t)r->n_dense + 4 * (uint64_t)r->n_tables + 8 * nk;
    r->record++;
    *keys = r->keys;
    return NP_OK;
}

/* The keys before record rec as the index has them (rec a multiple of the stride), or the
 * header's total for rec = n_records. */
static uint64_t index_keys(const np_bin_reader *r, uint64_t rec) {
    return rec >= r->n_records ? r->n_keys : r->index[rec / NP_BIN_INDEX_STRIDE];
}

/* A record where the index says one starts, reached by reading: the index must agree. */
static np_status index_agrees(const np_bin_reader *r, np_error *err) {
    if (!r->index || r->record % NP_BIN_INDEX_STRIDE || r->keys_read == index_keys(r, r->record))
        return NP_OK;
    return np_err(err, NP_STATUS_BAD_INPUT,
                  "%s: record %llu (byte %llu): the record index says %llu keys come before it, "
                  "the records %llu: the file is corrupt",
                  r->path, (unsigned long long)r->record, (unsigned long long)r->offset,
                  (unsigned long long)index_keys(r, r->record), (unsigned long long)r->keys_read);
}

/* Passes over the next record: its counts read (they must stay within the header's keys),
 * the rest skipped. */
static np_status skip_one(np_bin_reader *r, np_error *err) {
    np_status st0 = index_agrees(r, err);
    if (st0) return st0;
    size_t skip = 4 + 4 * (size_t)r->n_dense;
    /* the keys' scratch holds the counts */
    np_status st = np_grow((void **)&r->keys, &r->keys_cap,
                           ((size_t)r->n_tables * sizeof(uint32_t) + 7) / 8, sizeof(uint64_t),
                           "binary record keys", err);
    if (st) return st;
    uint32_t *count = (uint32_t *)(void *)r->keys;
    if (fseeko(r->f, (off_t)skip, SEEK_CUR))
        return np_err(err, NP_STATUS_IO, "%s: record %llu: cannot seek: %s", r->path,
                      (unsigned long long)r->record, strerror(errno));
    if ((st = read_exact(r, count, (size_t)r->n_tables * sizeof(uint32_t), err))) return st;
    uint64_t nk = 0;
    for (uint32_t t = 0; t < r->n_tables; t++)
        nk += count[t];
    if (r->keys_read + nk > r->n_keys)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s: record %llu (byte %llu): key counts exceed the header's total of %llu "
                      "keys",
                      r->path, (unsigned long long)r->record, (unsigned long long)r->offset,
                      (unsigned long long)r->n_keys);
    if (nk && fseeko(r->f, (off_t)(8 * nk), SEEK_CUR))
        return np_err(err, NP_STATUS_IO, "%s: record %llu: cannot seek: %s", r->path,
                      (unsigned long long)r->record, strerror(errno));
    r->keys_read += nk;
    r->offset += head_bytes(r, 1) + 8 * nk;
    r->record++;
    return NP_OK;
}

/* The reader at record `from`, which `keys` keys precede. */
static np_status jump_to(np_bin_reader *r, uint64_t from, uint64_t keys, np_error *err) {
    uint64_t at = NP_BIN_HEADER_BYTES + head_bytes(r, from) + 8 * keys;
    if (fseeko(r->f, (off_t)at, SEEK_SET))
        return np_err(err, NP_STATUS_IO, "%s: cannot seek to record %llu: %s", r->path,
                      (unsigned long long)from, strerror(errno));
    r->record = from;
    r->keys_read = keys;
    r->offset = at;
    return NP_OK;
}

np_status np_bin_seek(np_bin_reader *r, uint64_t rec, np_error *err) {
    if (rec > r->n_records)
        return np_err(err, NP_STATUS_INTERNAL, "%s: no record %llu (the file has %llu)", r->path,
                      (unsigned long long)rec, (unsigned long long)r->n_records);
    uint64_t from = 0, keys = 0;
    int jump = 0;
    if (r->index && rec < r->n_records) { /* the indexed record at or before rec */
        from = rec / NP_BIN_INDEX_STRIDE * NP_BIN_INDEX_STRIDE;
        keys = r->index[rec / NP_BIN_INDEX_STRIDE];
        jump = from > r->record || rec < r->record;
    } else if (rec < r->record) {
        jump = 1; /* from the start */
    }
    if (jump) {
        np_status st = jump_to(r, from, keys, err);
        /* the first jump into a stride reads its headers to the next entry, which must
         * agree: a wrong entry would otherwise hand out other records than asked for */
        uint64_t k = from / NP_BIN_INDEX_STRIDE;
        if (!st && r->index && !r->checked[k]) {
            uint64_t end = from + NP_BIN_INDEX_STRIDE < r->n_records ? from + NP_BIN_INDEX_STRIDE
                                                                     : r->n_records;
            while (!st && r->record < end)
                st = skip_one(r, err);
            if (!st) st = index_agrees(r, err);
            if (!st && r->record == r->n_records && r->keys_read != r->n_keys)
                st = np_err(err, NP_STATUS_BAD_INPUT,
                            "%s: the records hold %llu keys but the header says %llu", r->path,
                            (unsigned long long)r->keys_read, (unsigned long long)r->n_keys);
            if (!st) r->checked[k] = 1;
            if (!st) st = jump_to(r, from, keys, err);
        }
        if (st) return st;
    }
    while (r->record < rec) {
        np_status st = skip_one(r, err);
        if (st) return st;
    }
    return NP_OK;
}

/* ---------------------------------------------------------------- writers */

static void encode_header(unsigned char *h, uint32_t n_dense, uint32_t n_tables,
                          uint64_t n_records, uint64_t n_keys, uint32_t flags) {
    memcpy(h, bin_magic, sizeof bin_magic);
    np_le_put32(h + 8, NP_BIN_VERSION);
    np_le_put32(h + 12, n_dense);
    np_le_put32(h + 16, n_tables);
    np_le_put32(h + 20, flags);
    np_le_put64(h + 24, n_records);
    np_le_put64(h + 32, n_keys);
}

/* A binary file being written: beside the target under a unique name, renamed at the end,
 * so a failed write leaves no half file and two writers to one target never share a
 * temporary. The header's counts are patched in at the commit. */
typedef struct {
    np_outfile o;
    const char *path;
    uint32_t n_dense, n_tables;
    uint64_t n_records, n_keys;
    uint64_t *index; /* (index_cap) keys before every NP_BIN_INDEX_STRIDE-th record */
    size_t n_index, index_cap;
} bin_writer;

/* Before each record's bytes: its index entry when it starts a stride. */
static np_status writer_record(bin_writer *w, np_error *err) {
    if (w->n_records % NP_BIN_INDEX_STRIDE) return NP_OK;
    np_status st = np_grow((void **)&w->index, &w->index_cap, w->n_index + 1, sizeof *w->index,
                           "the record index", err);
    if (!st) w->index[w->n_index++] = w->n_keys;
    return st;
}

static np_status writer_open(bin_writer *w, const char *path, const char *what, int n_dense,
                             int n_tables, np_error *err) {
    *w = (bin_writer){.path = path, .n_dense = (uint32_t)n_dense, .n_tables = (uint32_t)n_tables};
    struct stat sb; /* refused before any work, not at the final rename */
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
        return np_err(err, NP_STATUS_BAD_INPUT, "%s %s: is a folder, not a file", what, path);
    np_status st = need_little_endian(err);
    if (st || (st = np_outfile_open(&w->o, path, what, err))) return st;
    setvbuf(w->o.f, NULL, _IOFBF, BIN_IO_CHUNK);
    unsigned char h[NP_BIN_HEADER_BYTES];
    encode_header(h, w->n_dense, w->n_tables, 0, 0, 0); /* placeholder */
    if (fwrite(h, 1, sizeof h, w->o.f) != sizeof h)
        return np_err(err, NP_STATUS_IO, "%s: cannot write: %s", path, strerror(errno));
    return NP_OK;
}

/* Bytes of records; the caller counts records and keys into w. */
static np_status writer_put(bin_writer *w, const void *p, size_t n, np_error *err) {
    if (fwrite(p, 1, n, w->o.f) == n) return NP_OK;
    return np_err(err, NP_STATUS_IO, "%s: cannot write: %s", w->path, strerror(errno));
}

/* The index after the records, then the header's counts: written whole or not at all. */
static np_status writer_commit(bin_writer *w, np_error *err) {
    unsigned char h[NP_BIN_HEADER_BYTES], le[8];
    int failed = 0;
    for (size_t k = 0; k < w->n_index && !failed; k++) {
        np_le_put64(le, w->index[k]);
        failed = fwrite(le, 1, 8, w->o.f) != 8;
    }
    unsigned char t[NP_BIN_TRAILER_BYTES];
    np_le_put64(t, NP_BIN_INDEX_STRIDE);
    np_le_put64(t + 8, w->n_index);
    memcpy(t + 16, "NPSAMIDX", 8);
    failed = failed || fwrite(t, 1, sizeof t, w->o.f) != sizeof t;
    encode_header(h, w->n_dense, w->n_tables, w->n_records, w->n_keys, NP_BIN_FLAG_INDEX);
    failed = failed || fseek(w->o.f, 0, SEEK_SET) || fwrite(h, 1, sizeof h, w->o.f) != sizeof h;
    free(w->index);
    w->index = NULL;
    return np_outfile_commit(&w->o, failed, err);
}

/* ---------------------------------------------------------------- convert */

np_status np_convert_criteo(const char *tsv_path, const char *bin_path, int skip_bad_lines,
                            long *n_written, long *n_skipped, np_error *err) {
    long skipped = 0;
    np_tsv_reader *in = NULL;
    bin_writer w = {0};
    np_status st = np_output_not_input(bin_path, "convert: the output", tsv_path, "the input", err);
    if (!st) st = np_tsv_open(tsv_path, &in, err);
    if (st || (st = writer_open(&w, bin_path, "convert", NP_CRITEO_DENSE, NP_CRITEO_TABLES, err)))
        goto done;

    /* one record: label, dense (13), count (26) all 1, keys (26) */
    enum { REC_BYTES = 4 + 4 * NP_CRITEO_DENSE + 4 * NP_CRITEO_TABLES + 8 * NP_CRITEO_TABLES };
    unsigned char rec[REC_BYTES];
    const uint32_t ones[NP_CRITEO_TABLES] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                             1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    memcpy(rec + 4 + 4 * NP_CRITEO_DENSE, ones, sizeof ones);
    for (;;) {
        const char *line;
        size_t len;
        long line_no;
        st = np_tsv_next_line(in, &line, &len, &line_no, err);
        if (st == NP_STATUS_END_OF_DATA) break;
        if (st) goto done;
        np_criteo_record cr;
        st = np_criteo_parse_line(tsv_path, line_no, line, len, &cr, err);
        if (st == NP_STATUS_BAD_INPUT && skip_bad_lines) {
            skipped++;
            continue;
        }
        if (st) goto done;
        memcpy(rec, &cr.label, 4);
        memcpy(rec + 4, cr.dense, sizeof cr.dense);
        memcpy(rec + 4 + 4 * NP_CRITEO_DENSE + 4 * NP_CRITEO_TABLES, cr.cat, sizeof cr.cat);
        if ((st = writer_record(&w, err)) || (st = writer_put(&w, rec, sizeof rec, err))) goto done;
        w.n_records++;
        w.n_keys += NP_CRITEO_TABLES;
    }
    st = writer_commit(&w, err);
done:
    np_outfile_discard(&w.o); /* after a commit: nothing left to remove */
    free(w.index);
    np_tsv_close(in);
    if (n_written) *n_written = (long)w.n_records;
    if (n_skipped) *n_skipped = skipped;
    return st;
}

np_status np_convert_movielens(const char *ml_path, const char *bin_path, int seq_len,
                               int n_dense, long *n_written, np_error *err) {
    if (seq_len < 2 || seq_len > 4096)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "convert %s: --seq-len %d; a history keeps its last L movies, L in [2, 4096]",
                      ml_path, seq_len);
    if (n_dense < 0 || n_dense > 65536)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "convert %s: --dense-features %d; an integer in [0, 65536]", ml_path, n_dense);
    float *zeros = np_zalloc((size_t)n_dense + 1, sizeof *zeros, "convert", err);
    if (!zeros) return NP_STATUS_NO_MEMORY;
    np_ml_reader *in = NULL;
    bin_writer w = {0};
    np_status st = np_output_not_input(bin_path, "convert: the output", ml_path, "the input", err);
    if (!st) st = np_ml_open(ml_path, seq_len, &in, err);
    /* a record: label 1, n_dense zeros (MovieLens has no dense feature: the source gives a
     * model zeros), one table (the history) */
    if (st || (st = writer_open(&w, bin_path, "convert", n_dense, 1, err))) goto done;
    for (;;) {
        uint32_t count;
        const uint64_t *keys;
        st = np_ml_next(in, &count, &keys, err);
        if (st == NP_STATUS_END_OF_DATA) break;
        if (st) goto done;
        const float one = 1.0f;
        unsigned char le[8];
        np_le_put32(le, count);
        if ((st = writer_record(&w, err)) || (st = writer_put(&w, &one, 4, err)) ||
            (st = writer_put(&w, zeros, 4 * (size_t)n_dense, err)) ||
            (st = writer_put(&w, le, 4, err)))
            goto done;
        for (uint32_t k = 0; k < count; k++) {
            np_le_put64(le, keys[k]);
            if ((st = writer_put(&w, le, 8, err))) goto done;
        }
        w.n_records++;
        w.n_keys += count;
    }
    st = writer_commit(&w, err);
done:
    np_outfile_discard(&w.o);
    free(w.index);
    np_ml_close(in);
    free(zeros);
    if (n_written) *n_written = (long)w.n_records;
    return st;
}

/* ---------------------------------------------------------------- generate */

/* Refuses before any work a file the folder has no room for: the bytes of n records with
 * the fewest keys their bags can hold (hot - hot/2 each), against the free space there. */
static np_status check_room(const char *path, long n, int D, int T, int hot, np_error *err) {
    struct stat sb;
    if (!stat(path, &sb) && !S_ISREG(sb.st_mode)) return NP_OK; /* a device: written in place */
    char dir[NP_PATH_MAX];
    np_path_folder(path, dir, sizeof dir);
    struct statvfs vf;
    if (statvfs(dir, &vf)) return NP_OK; /* the writer says what is wrong with the folder */
    double min_keys = hot <= 1 ? hot : hot - hot / 2;
    double per = 4.0 + 4.0 * D + 4.0 * T + 8.0 * T * min_keys;
    double need = NP_BIN_HEADER_BYTES + per * (double)n, room = (double)vf.f_bavail * vf.f_frsize;
    if (need <= room) return NP_OK;
    return np_err(err, NP_STATUS_BAD_INPUT,
                  "generate %s: %ld records of at least %.0f bytes need %.3g GB, but %s has "
                  "%.3g GB free",
                  path, n, per, need / 1e9, dir, room / 1e9);
}

np_status np_generate_synthetic(const np_config *cfg, long n_records, const char *bin_path,
                                np_error *err) {
    if (n_records < 1)
        return np_err(err, NP_STATUS_BAD_INPUT, "generate: %ld records; need at least 1",
                      n_records);
    /* the data's own rules only: what training needs besides (memory for the tables, a
     * step count) is no concern of a file */
    if (cfg->n_rows != 1 && cfg->n_rows != cfg->tables)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "rows: %d row counts for %d tables; give one count or one per table",
                      cfg->n_rows, cfg->tables);
    const int D = np_config_dense(cfg), T = cfg->tables;
    np_status st = check_room(bin_path, n_records, D, T, cfg->hot, err);
    if (st) return st;
    np_syn *syn = NULL;
    np_batch b = {0};
    bin_writer w = {0};
    st = np_syn_create(cfg, &syn, err);
    if (st || (st = writer_open(&w, bin_path, "generate", D, T, err))) goto done;
    /* records in blocks (each is a pure function of its index) of at most 2^24 keys, as
     * many as a bag size allows up to 4096 records: a block fits a batch's 32-bit offsets */
    uint64_t max_bag = cfg->hot <= 1 ? 1 : (uint64_t)cfg->hot + (uint64_t)cfg->hot / 2;
    uint64_t per_rec = (uint64_t)T * max_bag + (uint64_t)cfg->seq_len; /* + a sequence */
    long block = (long)((UINT64_C(1) << 24) / per_rec);
    if (block > 4096) block = 4096;
    if (block < 1) block = 1;
    for (long j0 = 0; j0 < n_records; j0 += block) {
        long n = n_records - j0 < block ? n_records - j0 : block;
        if ((st = np_syn_fill(syn, NP_SPLIT_TRAIN, 0, (uint64_t)j0, n, &b, err))) goto done;
        const size_t n1 = (size_t)n + 1;
        for (long r = 0; r < n; r++) { /* label, dense, counts, keys: stdio buffers them */
            if ((st = writer_record(&w, err)) || (st = writer_put(&w, &b.label[r], 4, err)) ||
                (st = writer_put(&w, b.dense + (size_t)r * (size_t)D, 4 * (size_t)D, err)))
                goto done;
            unsigned char le[8];
            for (int t = 0; t < T && !st; t++) {
                const uint32_t *o = b.offsets + (size_t)t * n1 + (size_t)r;
                np_le_put32(le, o[1] - o[0]);
                st = writer_put(&w, le, 4, err);
                w.n_keys += o[1] - o[0];
            }
            for (int t = 0; t < T && !st; t++) {
                const uint32_t *o = b.offsets + (size_t)t * n1 + (size_t)r;
                for (uint32_t k = o[0]; k < o[1] && !st; k++) {
                    np_le_put64(le, (uint64_t)b.keys[k]);
                    st = writer_put(&w, le, 8, err);
                }
            }
            if (st) goto done;
            w.n_records++;
        }
    }
    st = writer_commit(&w, err);
done:
    np_outfile_discard(&w.o);
    free(w.index);
    np_batch_free(&b);
    np_syn_free(syn);
    return st;
}
