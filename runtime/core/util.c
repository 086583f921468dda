/* Error formatting, checked allocation and the RNG's normal draw (see util.h). */
#include "runtime/core/util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

np_status np_error_set(np_error *err, np_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *np_status_name(np_status s) {
    switch (s) {
    case NP_OK:
        return "ok";
    case NP_STATUS_BAD_INPUT:
        return "bad input";
    case NP_STATUS_IO:
        return "i/o error";
    case NP_STATUS_NO_MEMORY:
        return "out of memory";
    case NP_STATUS_END_OF_DATA:
        return "end of data";
    case NP_STATUS_INTERNAL:
        return "internal error";
    case NP_STATUS_UNSUPPORTED:
        return "unsupported";
    }
    return "unknown status";
}

static void *alloc_impl(size_t n, size_t size, int zero, const char *what, np_error *err) {
    if (size && n > SIZE_MAX / size) {
        np_err(err, NP_STATUS_NO_MEMORY, "size overflow allocating %s (%zu x %zu bytes)", what, n,
               size);
        return NULL;
    }
    size_t bytes = (n * size != 0) ? n * size : 1;
    void *p = zero ? calloc(1, bytes) : malloc(bytes);
    if (!p)
        np_err(err, NP_STATUS_NO_MEMORY, "out of memory allocating %s (%zu bytes)", what, bytes);
    return p;
}

void *np_alloc(size_t n, size_t size, const char *what, np_error *err) {
    return alloc_impl(n, size, 0, what, err);
}

void *np_zalloc(size_t n, size_t size, const char *what, np_error *err) {
    return alloc_impl(n, size, 1, what, err);
}

np_status np_grow(void **p, size_t *cap, size_t n, size_t size, const char *what, np_error *err) {
    if (n <= *cap && *p) return NP_OK;
    size_t want = *cap ? *cap : 16;
    while (want < n)
        want = want > SIZE_MAX / 2 ? n : want * 2;
    if (size && want > SIZE_MAX / size)
        return np_err(err, NP_STATUS_NO_MEMORY, "size overflow growing %s", what);
    void *q = realloc(*p, (want * size != 0) ? want * size : 1);
    if (!q)
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory growing %s to %zu bytes", what,
                      want * size);
    *p = q;
    *cap = want;
    return NP_OK;
}

double np_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter) {
    /* u1 in (0, 1] so log() is finite */
    double u1 = 1.0 - np_rng_uniform(seed, stream, 2 * counter);
    double u2 = np_rng_uniform(seed, stream, 2 * counter + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---------------------------------------------------------------- messages */

char *np_escape(const char *s, size_t len, char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    if (!cap) return out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int ctl = c < 0x20 || c == 0x7f;
        size_t need = ctl ? 4 : c == '\\' ? 2 : 1;
        if (k + need >= cap) break;
        if (ctl) {
            out[k++] = '\\';
            out[k++] = 'x';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        } else {
            if (c == '\\') out[k++] = '\\';
            out[k++] = (char)c;
        }
    }
    out[k] = 0;
    return out;
}

/* The optimal-string-alignment distance between a and b, or 3 once it must exceed 2 (the
 * most np_closest_word accepts) or a word is longer than 63 bytes. */
static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63 || (n > m ? n - m : m - n) > 2) return 3;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] < 3 ? d[n][m] : 3;
}

const char *np_closest_word(const char *typed, const char *const *words, size_t n) {
    const char *best = NULL;
    if (!typed) return NULL;
    int best_d = strlen(typed) <= 5 ? 2 : 3; /* accept below this */
    for (size_t i = 0; i < n; i++) {
        if (!words[i]) continue;
        int d = edit_distance(typed, words[i]);
        if (d == 0) return NULL;
        if (d < best_d) {
            best = words[i];
            best_d = d;
        }
    }
    return best;
}
