/* Criteo TSV: a streaming line reader (lines of at most NP_TSV_MAX_LINE bytes:
 * runtime/core/lines.h) and the one line parser that both the TSV source and np_convert_criteo use.
 * Not here: the split or batching (source.c). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/lines.h"
#include "runtime/data/data.h"

/* ---------------------------------------------------------------- line reader */

struct np_tsv_reader {
    FILE *f;
    char *path; /* owned copy for messages */
    np_lines *lines;
    long line_no; /* of the last line returned */
};

np_status np_tsv_open(const char *path, np_tsv_reader **out, np_error *err) {
    *out = NULL;
    np_tsv_reader *r = np_zalloc(1, sizeof *r, "TSV reader", err);
    if (!r) return NP_STATUS_NO_MEMORY;
    size_t n = strlen(path);
    r->path = np_alloc(n + 1, 1, "TSV path", err);
    if (!r->path) {
        free(r);
        return NP_STATUS_NO_MEMORY;
    }
    memcpy(r->path, path, n + 1);
    r->f = fopen(path, "rb");
    if (!r->f) {
        np_status st = np_err(err, NP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
        np_tsv_close(r);
        return st;
    }
    if (!(r->lines = np_lines_new(r->f, NP_TSV_MAX_LINE))) {
        np_tsv_close(r);
        return np_err(err, NP_STATUS_NO_MEMORY, "%s: out of memory for its reader", path);
    }
    *out = r;
    return NP_OK;
}

np_status np_tsv_next_line(np_tsv_reader *r, const char **line, size_t *len, long *line_no,
                           np_error *err) {
    char *s;
    size_t n;
    errno = 0;
    switch (np_lines_next(r->lines, &s, &n)) {
    case NP_LINES_OK:
        break;
    case NP_LINES_END:
        return NP_STATUS_END_OF_DATA;
    case NP_LINES_TOO_LONG:
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%ld: a line of more than %d bytes (a Criteo record has about 40 "
                      "short fields): not a TSV file?",
                      r->path, r->line_no + 1, NP_TSV_MAX_LINE);
    case NP_LINES_READ_ERROR:
        return np_err(err, NP_STATUS_IO, "%s:%ld: cannot read: %s", r->path, r->line_no + 1,
                      strerror(errno));
    default:
        return np_err(err, NP_STATUS_NO_MEMORY, "%s: out of memory", r->path);
    }
    *line = s;
    *len = n;
    *line_no = ++r->line_no;
    return NP_OK;
}

const char *np_tsv_path(const np_tsv_reader *r) {
    return r->path;
}

void np_tsv_close(np_tsv_reader *r) {
    if (!r) return;
    np_lines_free(r->lines);
    if (r->f) fclose(r->f);
    free(r->path);
    free(r);
}

/* ---------------------------------------------------------------- line parser */

/* Quoted field text for messages; long fields are cut so the message stays one line. */
#define SHOW_MAX 40

static np_status field_err(np_error *err, const char *path, long line_no, size_t col,
                           const char *what, const char *p, size_t n, const char *why) {
    char shown[4 * SHOW_MAX + 1]; /* control bytes escaped: \\xHH */
    np_escape(p, n > SHOW_MAX ? SHOW_MAX : n, shown, sizeof shown);
    return np_err(err, NP_STATUS_BAD_INPUT, "%s:%ld:%zu: %s: '%s%s' %s", path, line_no, col, what,
                  shown, n > SHOW_MAX ? "..." : "", why);
}

/* Optional '-', then decimal digits, within int64. 0 ok, -1 not a number, -2 out of range. */
static int parse_int(const char *p, size_t n, int64_t *out) {
    int neg = n > 0 && p[0] == '-';
    p += neg;
    n -= (size_t)neg;
    if (n == 0) return -1;
    for (size_t k = 0; k < n; k++)
        if (p[k] < '0' || p[k] > '9') return -1;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t d = (uint64_t)(p[k] - '0');
        if (v > (limit - d) / 10) return -2;
        v = v * 10 + d;
    }
    /* negative values are clamped to 0 by the caller; only their range matters */
    *out = neg ? 0 : (int64_t)v;
    return 0;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* 1 to 16 hex digits, either case. 0 ok, -1 otherwise. */
static int parse_hex(const char *p, size_t n, uint64_t *out) {
    if (n < 1 || n > 16) return -1;
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++) {
        int d = hex_digit(p[k]);
        if (d < 0) return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

np_status np_criteo_parse_line(const char *path, long line_no, const char *line, size_t len,
                               np_criteo_record *rec, np_error *err) {
    /* field f spans [start[f], start[f] + flen[f]); columns are 1-based byte offsets */
    size_t start[NP_CRITEO_FIELDS], flen[NP_CRITEO_FIELDS];
    size_t nf = 0, pos = 0;
    if (len == 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%ld:1: expected %d tab-separated fields, found an empty line", path,
                      line_no, NP_CRITEO_FIELDS);
    for (;;) {
        const char *tab = memchr(line + pos, '\t', len - pos);
        size_t end = tab ? (size_t)(tab - line) : len;
        if (nf == NP_CRITEO_FIELDS) {
            size_t found = nf + 1;
            while (tab) { /* count the rest for the message */
                tab = memchr(tab + 1, '\t', len - (size_t)(tab + 1 - line));
                found++;
            }
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "%s:%ld:%zu: expected %d tab-separated fields, found %zu", path, line_no,
                          pos + 1, NP_CRITEO_FIELDS, found);
        }
        start[nf] = pos;
        flen[nf] = end - pos;
        nf++;
        if (!tab) break;
        pos = end + 1;
    }
    if (nf < NP_CRITEO_FIELDS)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%ld:%zu: expected %d tab-separated fields, found %zu", path, line_no,
                      len + 1, NP_CRITEO_FIELDS, nf);

    const char *p = line + start[0];
    if (flen[0] != 1 || (p[0] != '0' && p[0] != '1'))
        return field_err(err, path, line_no, start[0] + 1, "label", p, flen[0], "is not 0 or 1");
    rec->label = p[0] == '1' ? 1.0f : 0.0f;

    char what[48];
    for (int j = 0; j < NP_CRITEO_DENSE; j++) {
        size_t f = 1 + (size_t)j;
        int64_t v = 0; /* missing -> 0 */
        p = line + start[f];
        if (flen[f]) {
            int rc = parse_int(p, flen[f], &v);
            if (rc) {
                snprintf(what, sizeof what, "field I%d (integer)", j + 1);
                return field_err(err, path, line_no, start[f] + 1, what, p, flen[f],
                                 rc == -1 ? "is not a decimal integer"
                                          : "does not fit in a signed 64-bit integer");
            }
        }
        rec->dense[j] = (float)log1p((double)v);
    }
    for (int t = 0; t < NP_CRITEO_TABLES; t++) {
        size_t f = 1 + NP_CRITEO_DENSE + (size_t)t;
        uint64_t v = 0; /* missing -> 0 */
        p = line + start[f];
        if (flen[f] && parse_hex(p, flen[f], &v)) {
            snprintf(what, sizeof what, "field C%d (categorical)", t + 1);
            return field_err(err, path, line_no, start[f] + 1, what, p, flen[f],
                             "is not a hex number of 1-16 digits");
        }
        rec->cat[t] = v;
    }
    return NP_OK;
}
