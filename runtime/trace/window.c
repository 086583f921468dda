/* Windows of a trace: the tasks that ran in a span of time, for figures and pictures of part
 * of a run (np_trace_window, np_trace_batches; docs/tracing.md "Part of a run").
 *
 * A window keeps every task that overlaps it, clipped to it, whatever its batch: under dbp
 * or nestpipe the tasks that overlap batch t's training are those of batches t+1 .. t+4 (prefetched),
 * and leaving them out (as a filter on the batch number did before 0.6) shows their time as
 * idle and the work they hid as exposed. A window of batches `from .. to` runs from the end
 * of batch from-1's last task (the start of the trace for the first batch) to the end of
 * batch to's last task, each the latest over the ranks: on the slowest rank exactly batches
 * from .. to complete inside it, so its span over those batches is their steady step, as in
 * the whole trace (each rank counts the batches that ended inside on it).
 * The window's trace remembers the bounds, each rank's completed batches and each task's
 * peer wait cut to the window, so its report is the whole trace's report restricted to the
 * window. Not here: the report itself (analyze.c). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/trace/trace.h"

typedef np_trace_batch_end batch_end;

static int cmp_batch_end(const void *pa, const void *pb) {
    const batch_end *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->batch > b->batch) - (a->batch < b->batch);
}

static double end_of(const np_trace_event *e) { /* a negative duration counts as zero */
    return e->end_us > e->start_us ? e->end_us : e->start_us;
}

/* Every (rank, batch)'s last end into *out (*n of them, by rank then batch): a window's
 * trace has those of the whole trace, whose clipped tasks no longer tell; the trace's first
 * start and last end into *lo, *hi. The trace has at least one event. */
static np_status batch_ends(const np_trace *tr, batch_end **out, size_t *n, double *lo,
                            double *hi, np_error *err) {
    size_t count = np_trace_count(tr), m = 0, n_known = 0;
    const batch_end *known = np_trace_window_ends(tr, &n_known);
    size_t cap = known ? n_known : count;
    batch_end *v = np_alloc(cap ? cap : 1, sizeof *v, "trace window", err);
    if (!v) return NP_STATUS_NO_MEMORY;
    for (size_t i = 0; i < count; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (!known) v[i] = (batch_end){e->rank, e->batch, end_of(e)};
        if (i == 0 || e->start_us < *lo) *lo = e->start_us;
        if (i == 0 || end_of(e) > *hi) *hi = end_of(e);
    }
    if (known) {
        memcpy(v, known, n_known * sizeof *v);
        *out = v;
        *n = n_known;
        return NP_OK;
    }
    qsort(v, count, sizeof *v, cmp_batch_end);
    for (size_t i = 0; i < count; i++) {
        if (m && v[m - 1].rank == v[i].rank && v[m - 1].batch == v[i].batch) {
            if (v[i].end_us > v[m - 1].end_us) v[m - 1].end_us = v[i].end_us;
        } else {
            v[m++] = v[i];
        }
    }
    *out = v;
    *n = m;
    return NP_OK;
}

static double inside(double a, double b, double from, double to) {
    double lo = a > from ? a : from, hi = b < to ? b : to;
    return hi > lo ? hi - lo : 0;
}

/* A collective task [s, e) cut to the window: its packing is its first pack_us, its
 * unpacking its last unpack_us, and its time in the collectives spread over what lies
 * between; each keeps the part inside the window. */
static void clip_split(np_trace_event *x, double s, double e, double from, double to) {
    double mid_s = s + x->pack_us, mid_e = e - x->unpack_us;
    double mid = mid_e > mid_s ? mid_e - mid_s : 0, kept = inside(mid_s, mid_e, from, to);
    double f = mid > 0 ? kept / mid : 0;
    x->comm_us *= f;
    x->post_us *= f;
    x->pace_us *= f;
    x->pack_us = inside(s, mid_s, from, to);
    x->unpack_us = inside(mid_e, e, from, to);
}

/* The window [from, to) of tr (within its extent, from < to) into *out. */
static np_status cut(const np_trace *tr, double from, double to, np_trace **out, np_error *err) {
    size_t n = np_trace_count(tr), n_ends = 0;
    double lo = 0, hi = 0;
    batch_end *ends = NULL;
    double *wait = np_alloc(n ? n : 1, sizeof *wait, "trace window", err);
    np_trace *t = NULL;
    np_status st = wait ? batch_ends(tr, &ends, &n_ends, &lo, &hi, err) : NP_STATUS_NO_MEMORY;
    if (!st && np_trace_peer_wait(tr, wait))
        st = np_err(err, NP_STATUS_NO_MEMORY, "trace window: out of memory");
    if (!st) st = np_trace_create(&t, err);
    if (!st) np_trace_copy_names(t, tr);
    for (size_t i = 0; !st && i < n; i++) {
        np_trace_event x = *np_trace_get(tr, i);
        double s = x.start_us, e = end_of(&x);
        /* a task of no duration belongs where it happened, edges included */
        if (!(e > from && s < to) && !(e == s && s >= from && s <= to)) continue;
        x.start_us = s > from ? s : from;
        x.end_us = e < to ? e : to;
        if (x.colls) clip_split(&x, s, e, from, to);
        /* the wait is the task's first wait[i] microseconds: what of it is in the window */
        double w = (s + wait[i] < to ? s + wait[i] : to) - x.start_us;
        x.wait_us = w > 0 ? w : 0;
        if (np_trace_record(t, &x))
            st = np_err(err, NP_STATUS_NO_MEMORY, "trace window: out of memory");
    }
    if (!st && !np_trace_count(t)) /* the window falls in a gap between tasks */
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "trace: no task between %.3f and %.3f ms; the trace runs from %.3f to %.3f ms",
                    from / 1e3, to / 1e3, lo / 1e3, hi / 1e3);
    if (!st && np_trace_set_window(t, from, to, ends, n_ends))
        st = np_err(err, NP_STATUS_NO_MEMORY, "trace window: out of memory");
    free(ends);
    free(wait);
    if (st) {
        np_trace_free(t);
        return st;
    }
    *out = t;
    return NP_OK;
}

np_status np_trace_window(const np_trace *tr, double from_us, double to_us, np_trace **out,
                          np_error *err) {
    *out = NULL;
    if (isnan(from_us) || isnan(to_us) || !(from_us < to_us))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "trace: the window from %.3f to %.3f ms is empty: the end must come after "
                      "the start",
                      from_us / 1e3, to_us / 1e3);
    double lo = 0, hi = 0;
    size_t n = np_trace_count(tr);
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (i == 0 || e->start_us < lo) lo = e->start_us;
        if (i == 0 || end_of(e) > hi) hi = end_of(e);
    }
    if (!n || to_us <= lo || from_us >= hi) {
        char a[32] = "the start", b[32] = "the end";
        if (isfinite(from_us)) snprintf(a, sizeof a, "%.3f", from_us / 1e3);
        if (isfinite(to_us)) snprintf(b, sizeof b, "%.3f", to_us / 1e3);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      n ? "trace: no task between %s and %s ms; the trace runs from %.3f to "
                          "%.3f ms"
                        : "trace: no task between %s and %s ms; the trace is empty",
                      a, b, lo / 1e3, hi / 1e3);
    }
    /* a window past the trace's ends holds no more of the run than its extent */
    return cut(tr, from_us > lo ? from_us : lo, to_us < hi ? to_us : hi, out, err);
}

np_status np_trace_batches(const np_trace *tr, long from, long to, np_trace **out,
                           np_error *err) {
    *out = NULL;
    if (!np_trace_count(tr)) {
        np_status st = np_trace_create(out, err);
        if (!st) np_trace_copy_names(*out, tr);
        return st;
    }
    batch_end *ends = NULL;
    size_t n = 0;
    double lo = 0, hi = 0;
    np_status st = batch_ends(tr, &ends, &n, &lo, &hi, err);
    if (st) return st;
    /* a window's trace: its own bounds, and the batches that ended inside it */
    double win0 = -INFINITY, win1 = INFINITY;
    np_trace_get_window(tr, &win0, &win1);
    long first = LONG_MAX, last = LONG_MIN;
    double w0 = lo, w1 = hi; /* the trace's extent unless a batch bound says otherwise */
    int w0_set = 0, w1_set = 0;
    for (size_t i = 0; i < n; i++) {
        int inside = ends[i].end_us > win0 && ends[i].end_us <= win1;
        if (inside && ends[i].batch < first) first = ends[i].batch;
        if (inside && ends[i].batch > last) last = ends[i].batch;
        if (ends[i].batch < from && (!w0_set || ends[i].end_us > w0)) w0 = ends[i].end_us, w0_set = 1;
        if (to >= 0 && ends[i].batch <= to && (!w1_set || ends[i].end_us > w1))
            w1 = ends[i].end_us, w1_set = 1;
    }
    free(ends);
    if (w0 < win0) w0 = win0;
    if (w1 > win1) w1 = win1;
    char range[48];
    if (to < 0)
        snprintf(range, sizeof range, "%ld on", from);
    else
        snprintf(range, sizeof range, "%ld to %ld", from, to);
    if (first > last)
        return np_err(err, NP_STATUS_BAD_INPUT, "trace: no window of batches %s: no batch ends "
                                                "in this trace's window",
                      range);
    if (from > last || (to >= 0 && to < first))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "trace: no task of batches %s; the trace holds batches %ld to %ld", range,
                      first, last);
    if (!(w0 < w1))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "trace: no window of batches %s: they end by %.3f ms, before the batches "
                      "before them do (%.3f ms)",
                      range, w1 / 1e3, w0 / 1e3);
    return cut(tr, w0, w1, out, err);
}

np_status np_trace_batch_ends(const np_trace *tr, np_trace_batch_end **out, size_t *n,
                              np_error *err) {
    double lo = 0, hi = 0;
    *out = NULL;
    *n = 0;
    return np_trace_count(tr) ? batch_ends(tr, out, n, &lo, &hi, err) : NP_OK;
}

np_status np_trace_from_batch(const np_trace *tr, long from, np_trace **out, np_error *err) {
    return np_trace_batches(tr, from, -1, out, err);
}
