/* The MovieLens reader (data = movielens:PATH, docs/data.md "MovieLens"): ratings.dat lines
 * `UserID::MovieID::Rating::Timestamp`, grouped by user in increasing order (as MovieLens-1M
 * ships them), streamed one user at a time. Each user's movies, ordered by time (ties in
 * file order), give two records: the history without its last movie (a training record)
 * and the whole history, whose last movie the evaluation predicts (a held-out record), each
 * the last max_len movies at most. Users with fewer than 3 ratings give none.
 * Not here: splits or batches (source.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data.h"

typedef struct ml_item {
    uint64_t ts, movie, order;
} ml_item;

struct np_ml_reader {
    np_tsv_reader *tsv;
    int max_len;
    ml_item *items; /* the current user's ratings */
    size_t n, cap;
    uint64_t *rec;  /* the record handed out */
    int pending;    /* 1: the held-out record of the current user is next */
    int have_next;  /* a line of the next user was read already */
    uint64_t next_user, next_movie, next_ts;
    long next_line;
    uint64_t user;  /* the current user, and the last one seen */
    int any_user;
    int eof;
};

static int parse_u64(const char **p, uint64_t *v) {
    const char *s = *p;
    if (*s < '0' || *s > '9') return -1;
    uint64_t x = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return -1;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    *p = s;
    return 0;
}

/* One line into user, movie, timestamp; the rating is checked and dropped (every rating is
 * an interaction). */
static np_status parse_line(const np_ml_reader *r, long line_no, const char *line, size_t len,
                            uint64_t *user, uint64_t *movie, uint64_t *ts, np_error *err) {
    char buf[128];
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = 0;
    const char *p = buf;
    uint64_t rating;
    if (parse_u64(&p, user) || strncmp(p, "::", 2) || (p += 2, parse_u64(&p, movie)) ||
        strncmp(p, "::", 2) || (p += 2, parse_u64(&p, &rating)) || strncmp(p, "::", 2) ||
        (p += 2, parse_u64(&p, ts)) || *p)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%ld: '%.40s' is not UserID::MovieID::Rating::Timestamp (decimal "
                      "integers)",
                      np_tsv_path(r->tsv), line_no, buf);
    return NP_OK;
}

np_status np_ml_open(const char *path, int max_len, np_ml_reader **out, np_error *err) {
    *out = NULL;
    np_ml_reader *r = np_zalloc(1, sizeof *r, "movielens reader", err);
    if (!r) return NP_STATUS_NO_MEMORY;
    r->max_len = max_len;
    r->rec = np_alloc((size_t)max_len, sizeof *r->rec, "movielens record", err);
    np_status st = r->rec ? np_tsv_open(path, &r->tsv, err) : NP_STATUS_NO_MEMORY;
    if (st) {
        np_ml_close(r);
        return st;
    }
    *out = r;
    return NP_OK;
}

void np_ml_close(np_ml_reader *r) {
    if (!r) return;
    np_tsv_close(r->tsv);
    free(r->items);
    free(r->rec);
    free(r);
}

static int cmp_item(const void *a, const void *b) {
    const ml_item *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* Reads the next user's ratings into items (sorted); n = 0 at the end of the file. */
static np_status read_user(np_ml_reader *r, np_error *err) {
    r->n = 0;
    for (;;) {
        uint64_t user = 0, movie = 0, ts = 0;
        long line_no = 0;
        if (r->have_next) {
            user = r->next_user, movie = r->next_movie, ts = r->next_ts, line_no = r->next_line;
            r->have_next = 0;
        } else {
            const char *line;
            size_t len;
            if (r->eof) break;
            np_status st = np_tsv_next_line(r->tsv, &line, &len, &line_no, err);
            if (st == NP_STATUS_END_OF_DATA) {
                r->eof = 1;
                break;
            }
            if (st) return st;
            if (len == 0) continue; /* a blank line (the file's last, say) */
            if ((st = parse_line(r, line_no, line, len, &user, &movie, &ts, err))) return st;
        }
        if (r->n > 0 && user != r->user) { /* the next user's first line: kept for later */
            r->have_next = 1;
            r->next_user = user, r->next_movie = movie, r->next_ts = ts, r->next_line = line_no;
            break;
        }
        if (r->n == 0) {
            if (r->any_user && user <= r->user)
                return np_err(err, NP_STATUS_BAD_INPUT,
                              "%s:%ld: user %" PRIu64 " after user %" PRIu64
                              ": the ratings must be grouped by user in increasing order, as "
                              "MovieLens ships them (sort -t: -k1,1n -s)",
                              np_tsv_path(r->tsv), line_no, user, r->user);
            r->user = user;
            r->any_user = 1;
        }
        if (np_grow((void **)&r->items, &r->cap, r->n + 1, sizeof *r->items, "movielens ratings",
                    err))
            return NP_STATUS_NO_MEMORY;
        r->items[r->n] = (ml_item){ts, movie, r->n};
        r->n++;
    }
    if (r->n > 1) qsort(r->items, r->n, sizeof *r->items, cmp_item); /* no array when empty */
    return NP_OK;
}

/* The movies [end - min(end, max_len), end) of the current user into rec. */
static uint32_t take_last(np_ml_reader *r, size_t end) {
    size_t lo = end > (size_t)r->max_len ? end - (size_t)r->max_len : 0;
    for (size_t k = lo; k < end; k++)
        r->rec[k - lo] = r->items[k].movie;
    return (uint32_t)(end - lo);
}

np_status np_ml_next(np_ml_reader *r, uint32_t *count, const uint64_t **keys, np_error *err) {
    *keys = r->rec;
    if (r->pending) { /* the held-out record: the whole history */
        r->pending = 0;
        *count = take_last(r, r->n);
        return NP_OK;
    }
    do {
        np_status st = read_user(r, err);
        if (st) return st;
        if (r->n == 0) return NP_STATUS_END_OF_DATA;
    } while (r->n < 3); /* too few ratings for a history and a held-out movie */
    r->pending = 1;
    *count = take_last(r, r->n - 1);
    return NP_OK;
}
