/* Reading NPPARAMS dumps (docs/formats.md), for every command that reads one: --init-params
 * and predict (runtime/model/load.c), compare and export (apps/). The file is streamed; every size
 * is checked against the bytes left before it is used, and every value is read through
 * np_params_read, which refuses a non-finite one. Not here: writing dumps (model.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/core/util.h"

struct np_params_reader {
    FILE *f;
    const char *path, *what;
    uint64_t size, pos; /* the file's bytes (UINT64_MAX: not known, a pipe), those read */
    uint32_t count;     /* tensors, from the header */
    int next;           /* tensors whose header was read */
    np_params_tensor cur;
    uint64_t left;  /* values of cur not read yet */
    int in_values; /* reading cur's values (else a header) */
    /* the names so far, to refuse one given twice: open addressing on their hash */
    char **names;
    size_t cap;
};

static np_status fail(np_params_reader *r, np_error *err, const char *fmt, ...)
    NP_FORMAT_PRINTF(3, 4);
static np_status fail(np_params_reader *r, np_error *err, const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return np_err(err, NP_STATUS_BAD_INPUT, "%s %s: %s", r->what, r->path, why);
}

static np_status get(np_params_reader *r, void *out, size_t n, np_error *err) {
    if (n <= r->size - r->pos && fread(out, 1, n, r->f) == n) {
        r->pos += n;
        return NP_OK;
    }
    if (ferror(r->f))
        return np_err(err, NP_STATUS_IO, "%s %s: cannot read it: %s", r->what, r->path,
                      strerror(errno));
    char shown[280];
    if (r->in_values)
        return fail(r, err, "the file ends in the values of tensor %d (%s)", r->cur.index,
                    np_escape(r->cur.name, strlen(r->cur.name), shown, sizeof shown));
    return fail(r, err, "the file ends in tensor %d of the header's %" PRIu32, r->next - 1,
                r->count);
}

np_status np_params_open(const char *path, const char *what, np_params_reader **out,
                         np_error *err) {
    *out = NULL;
    np_params_reader *r = calloc(1, sizeof *r);
    if (!r) return np_err(err, NP_STATUS_NO_MEMORY, "%s: out of memory", what);
    r->path = path;
    r->what = what;
    struct stat sb;
    if (!(r->f = fopen(path, "rb")) || fstat(fileno(r->f), &sb)) {
        np_status st = np_err(err, NP_STATUS_IO, "%s: cannot open %s: %s", what, path,
                              strerror(errno));
        np_params_close(r);
        return st;
    }
    np_status st = NP_OK;
    if (S_ISDIR(sb.st_mode)) st = fail(r, err, "is a folder");
    /* a pipe (--init-params <(...)) or a device: its end decides */
    r->size = S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : UINT64_MAX;
    unsigned char h[16];
    if (!st && (r->size < 16 || fread(h, 1, 16, r->f) != 16 || memcmp(h, "NPPARAMS", 8)))
        st = ferror(r->f) ? np_err(err, NP_STATUS_IO, "%s %s: cannot read it: %s", what, path,
                                   strerror(errno))
                          : fail(r, err, "not an NPPARAMS dump (--dump-params)");
    r->pos = 16;
    uint32_t ver = st ? 0 : np_le_get32(h + 8);
    r->count = st ? 0 : np_le_get32(h + 12);
    if (!st && ver != 1) st = fail(r, err, "version %" PRIu32 ", this build reads 1", ver);
    if (!st && (r->count == 0 || r->count > NP_PARAMS_MAX_TENSORS))
        st = fail(r, err, "the header says %" PRIu32 " tensors; a model has 1 to %d", r->count,
                  NP_PARAMS_MAX_TENSORS);
    if (!st) {
        for (r->cap = 16; r->cap < 2 * (size_t)r->count; r->cap *= 2) {
        }
        if (!(r->names = calloc(r->cap, sizeof *r->names)))
            st = np_err(err, NP_STATUS_NO_MEMORY, "%s: out of memory", what);
    }
    if (st) {
        np_params_close(r);
        return st;
    }
    *out = r;
    return NP_OK;
}

uint32_t np_params_count(const np_params_reader *r) { return r->count; }

/* Remembers name: 1 when it is new, 0 when it was there already, -1 out of memory. */
static int remember(np_params_reader *r, const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    size_t i = (size_t)h & (r->cap - 1);
    for (; r->names[i]; i = (i + 1) & (r->cap - 1))
        if (!strcmp(r->names[i], name)) return 0;
    return (r->names[i] = strdup(name)) ? 1 : -1;
}

np_status np_params_next(np_params_reader *r, np_params_tensor *t, int *more, np_error *err) {
    np_status st = np_params_read(r, NULL, r->left, err); /* the rest of the last one */
    *more = 0;
    if (st) return st;
    r->in_values = 0;
    if ((uint32_t)r->next == r->count) {
        if (r->size == UINT64_MAX && getc(r->f) == EOF && ferror(r->f))
            return np_err(err, NP_STATUS_IO, "%s %s: cannot read it: %s", r->what, r->path,
                          strerror(errno));
        if (r->size == UINT64_MAX ? !feof(r->f) : r->pos != r->size) {
            char n[40] = "";
            if (r->size != UINT64_MAX) snprintf(n, sizeof n, "%" PRIu64 " ", r->size - r->pos);
            return fail(r, err, "%sbytes after the last of the header's %" PRIu32 " tensors", n,
                        r->count);
        }
        return NP_OK;
    }
    np_params_tensor *c = &r->cur;
    memset(c, 0, sizeof *c);
    c->index = r->next++;
    char shown[1100];
    unsigned char b[8];
    if ((st = get(r, b, 4, err))) return st;
    uint32_t len = np_le_get32(b);
    if (len == 0 || len >= sizeof c->name)
        return fail(r, err, "tensor %d: a name of %" PRIu32 " bytes (1 to %zu)", c->index, len,
                    sizeof c->name - 1);
    if ((st = get(r, c->name, len, err))) return st;
    for (uint32_t i = 0; i < len; i++)
        if ((unsigned char)c->name[i] < 0x20 || c->name[i] == 0x7f)
            return fail(r, err, "tensor %d: a name with a control byte: '%s'", c->index,
                        np_escape(c->name, len, shown, sizeof shown));
    int fresh = remember(r, c->name);
    if (fresh < 0) return np_err(err, NP_STATUS_NO_MEMORY, "%s: out of memory", r->what);
    if (!fresh)
        return fail(r, err, "tensor %d: the name '%s' is given twice", c->index,
                    np_escape(c->name, len, shown, sizeof shown));
    if ((st = get(r, b, 4, err))) return st;
    uint32_t nd = np_le_get32(b);
    if (nd < 1 || nd > 8)
        return fail(r, err, "tensor %d (%s): %" PRIu32 " dims (1 to 8)", c->index,
                    np_escape(c->name, len, shown, sizeof shown), nd);
    c->ndim = (int)nd;
    c->count = 1;
    for (uint32_t k = 0; k < nd; k++) {
        if ((st = get(r, b, 8, err))) return st;
        c->dims[k] = np_le_get64(b);
        /* saturating: a product past 2^64 is too many values for any file (unless a later
         * dim is 0) */
        c->count = c->dims[k] && c->count > UINT64_MAX / c->dims[k] ? UINT64_MAX
                                                                      : c->count * c->dims[k];
    }
    /* (a pipe's size is not known: no stream holds more than 2^64 bytes either) */
    if (c->count > (r->size - r->pos) / 4) {
        char left[48] = "any file holds"; /* a pipe */
        if (r->size != UINT64_MAX)
            snprintf(left, sizeof left, "the %" PRIu64 " bytes left", r->size - r->pos);
        return fail(r, err, "tensor %d (%s): more values than %s", c->index,
                    np_escape(c->name, len, shown, sizeof shown), left);
    }
    r->left = c->count;
    r->in_values = 1;
    *t = *c;
    *more = 1;
    return NP_OK;
}

np_status np_params_read(np_params_reader *r, float *x, uint64_t n, np_error *err) {
    if (n > r->left)
        return np_err(err, NP_STATUS_INTERNAL, "%s %s: %" PRIu64 " values asked of %s, %" PRIu64
                      " left", r->what, r->path, n, r->cur.name, r->left);
    unsigned char buf[4096];
    while (n) {
        size_t k = n < sizeof buf / 4 ? (size_t)n : sizeof buf / 4;
        np_status st = get(r, buf, 4 * k, err);
        if (st) return st;
        for (size_t i = 0; i < k; i++) {
            uint32_t u = np_le_get32(buf + 4 * i);
            if ((u & 0x7f800000u) == 0x7f800000u) { /* all exponent bits: inf or nan */
                const np_params_tensor *c = &r->cur;
                uint64_t e = c->count - r->left + i, cols = c->ndim == 2 ? c->dims[1] : 0;
                char at[64] = "", shown[1100];
                if (cols) snprintf(at, sizeof at, " (row %" PRIu64 ", column %" PRIu64 ")",
                                   e / cols, e % cols);
                return fail(r, err, "tensor %d (%s): element %" PRIu64 "%s is %s; a model "
                            "with a non-finite parameter is refused", c->index,
                            np_escape(c->name, strlen(c->name), shown, sizeof shown), e, at,
                            u & 0x007fffffu ? "nan" : u >> 31 ? "-inf" : "inf");
            }
            if (x) memcpy(x + i, &u, 4);
        }
        if (x) x += k;
        r->left -= k;
        n -= k;
    }
    return NP_OK;
}

void np_params_close(np_params_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    for (size_t i = 0; r->names && i < r->cap; i++)
        free(r->names[i]);
    free(r->names);
    free(r);
}
