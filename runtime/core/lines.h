/* A line reader with a bound: lines of text from a FILE, through a buffer of its own, each
 * at most a stated length. A longer line is refused once its bound is passed, without
 * reading the rest of it: a file without line breaks (/dev/zero, a binary file) costs the
 * bound, not the file. Used by the Criteo TSV reader and the model-file reader. */
#ifndef NP_CORE_LINES_H
#define NP_CORE_LINES_H

#include <stddef.h>
#include <stdio.h>

typedef struct np_lines np_lines;

typedef enum np_lines_status {
    NP_LINES_OK = 0,
    NP_LINES_END = 1,      /* no more lines */
    NP_LINES_TOO_LONG = 2, /* the next line is longer than max_len bytes */
    NP_LINES_READ_ERROR = 3, /* errno says why */
    NP_LINES_NO_MEMORY = 4,
} np_lines_status;

/* Reads f (not closed by np_lines_free) in lines of at most max_len bytes without their
 * line break. NULL when out of memory. */
np_lines *np_lines_new(FILE *f, size_t max_len);
void np_lines_free(np_lines *r);
/* The next line, NUL-terminated, without its "\n" or "\r\n"; valid until the next call.
 * A last line without a line break counts. */
np_lines_status np_lines_next(np_lines *r, char **line, size_t *len);

#endif
