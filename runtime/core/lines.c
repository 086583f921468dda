/* The bounded line reader (runtime/core/lines.h): a window of the file, lines found with memchr. */
#include "runtime/core/lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct np_lines {
    FILE *f;
    size_t max_len;
    char *buf;     /* cap + 1 bytes: a last line without a break gets its NUL */
    size_t cap;    /* max_len + 2 at least: a longest line and its "\r\n" */
    size_t beg, end; /* the unread bytes */
    int eof;
};

np_lines *np_lines_new(FILE *f, size_t max_len) {
    np_lines *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->f = f;
    r->max_len = max_len;
    r->cap = max_len + 2 < (1u << 16) ? (1u << 16) : max_len + 2;
    if (!(r->buf = malloc(r->cap + 1))) {
        free(r);
        return NULL;
    }
    return r;
}

void np_lines_free(np_lines *r) {
    if (!r) return;
    free(r->buf);
    free(r);
}

np_lines_status np_lines_next(np_lines *r, char **line, size_t *len) {
    for (;;) {
        char *s = r->buf + r->beg, *nl = memchr(s, '\n', r->end - r->beg);
        size_t n = nl ? (size_t)(nl - s) : r->end - r->beg;
        if (nl || (r->eof && n)) {
            r->beg += n + (nl != NULL);
            if (n && s[n - 1] == '\r') n--;
            if (n > r->max_len) return NP_LINES_TOO_LONG;
            s[n] = 0;
            *line = s;
            *len = n;
            return NP_LINES_OK;
        }
        if (r->eof) return NP_LINES_END;
        if (n > r->max_len + 1) return NP_LINES_TOO_LONG; /* "\r" may still come */
        memmove(r->buf, s, n); /* the partial line first, then more of the file */
        r->beg = 0;
        r->end = n;
        size_t got = fread(r->buf + r->end, 1, r->cap - r->end, r->f);
        r->end += got;
        if (got == 0) {
            if (ferror(r->f)) {
                if (!errno) errno = EIO;
                return NP_LINES_READ_ERROR;
            }
            r->eof = 1;
        }
    }
}
