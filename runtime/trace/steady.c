/* Steady-state figures of a trace (np_trace_steady_state: what `nestpipe tune` ranks
 * settings by) and how well the scheduler's perf models predicted its tasks
 * (np_trace_predictions: `tune --calibrate`). Definitions in nestpipe/trace.h and
 * docs/tracing.md. Not here: the overlap report (analyze.c). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/trace/trace.h"

/* ------------------------------------------------------------------ steady state */

/* A task's place and interval, for the steady state. */
typedef struct item {
    int rank, worker; /* worker -1: the driver row */
    long batch;
    struct {
        double s, e; /* [s, e), e >= s */
    } t;
} item;

static int cmp_item_rank_batch(const void *pa, const void *pb) {
    const item *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->batch != b->batch) return a->batch < b->batch ? -1 : 1;
    return (a->t.e > b->t.e) - (a->t.e < b->t.e);
}

np_status np_trace_steady_state(const np_trace *tr, long warmup, np_trace_steady *out,
                                np_error *err) {
    memset(out, 0, sizeof *out);
    if (warmup < 0)
        return np_err(err, NP_STATUS_BAD_INPUT, "trace: %ld warm-up batches: none or more", warmup);
    size_t n = np_trace_count(tr);
    item *it = np_alloc(n ? n : 1, sizeof *it, "trace steady state", err);
    if (!it) return NP_STATUS_NO_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (!isfinite(e->start_us) || !isfinite(e->end_us) ||
            (unsigned)e->kind >= (unsigned)NP_NODE_KIND_COUNT)
            continue;
        it[m++] = (item){.rank = e->rank,
                         .worker = (np_node_kinds[e->kind].flags & NP_KIND_DRIVER) ? -1 : e->worker,
                         .batch = e->batch,
                         .t = {e->start_us, e->end_us > e->start_us ? e->end_us : e->start_us}};
    }
    qsort(it, m, sizeof *it, cmp_item_rank_batch);
    np_status st = NP_OK;
    double idle_sum = 0;
    long idle_n = 0;
    out->step_us = -1;
    for (size_t r0 = 0; r0 < m && !st;) { /* one rank: it[r0..r1) */
        size_t r1 = r0;
        while (r1 < m && it[r1].rank == it[r0].rank)
            r1++;
        /* each batch's end: its last task's (the last of its run of items) */
        long batches = 0;
        double t_from = 0, t_to = 0;
        for (size_t i = r0; i < r1; i++) {
            if (i + 1 < r1 && it[i + 1].batch == it[i].batch) continue;
            if (batches == warmup) t_from = it[i].t.e;
            t_to = it[i].t.e;
            batches++;
        }
        if (batches > out->batches) out->batches = batches;
        if (batches < warmup + 2) {
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "trace: rank %d has %ld batches: a steady state after %ld warm-up "
                        "batches needs %ld or more",
                        it[r0].rank, batches, warmup, warmup + 2);
            break;
        }
        double step = (t_to - t_from) / (double)(batches - 1 - warmup);
        if (!(step > 0)) {
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "trace: rank %d's batches after the warm-up end no later than the first "
                        "(no time to measure a step in)",
                        it[r0].rank);
            break;
        }
        if (step > out->step_us) out->step_us = step;
        /* each worker's busy time inside [t_from, t_to] (a worker runs one task at a time) */
        int max_w = -1;
        for (const item *x = it + r0; x < it + r1; x++)
            if (x->worker > max_w) max_w = x->worker;
        double *busy = max_w >= 0 ? calloc((size_t)max_w + 1, sizeof *busy) : NULL;
        char *seen = max_w >= 0 ? calloc((size_t)max_w + 1, 1) : NULL;
        if (max_w >= 0 && (!busy || !seen)) {
            free(busy);
            free(seen);
            st = np_err(err, NP_STATUS_NO_MEMORY, "trace steady state: out of memory");
            break;
        }
        for (const item *x = it + r0; x < it + r1; x++) {
            if (x->worker < 0) continue;
            seen[x->worker] = 1;
            double s = fmax(x->t.s, t_from), e = fmin(x->t.e, t_to);
            if (e > s) busy[x->worker] += e - s;
        }
        for (int w = 0; w <= max_w; w++)
            if (seen[w] && t_to > t_from) {
                idle_sum += 1 - fmin(1, busy[w] / (t_to - t_from));
                idle_n++;
            }
        free(busy);
        free(seen);
        r0 = r1;
    }
    if (!st && m == 0) st = np_err(err, NP_STATUS_BAD_INPUT, "trace: no task to measure");
    out->idle_share = idle_n ? idle_sum / (double)idle_n : 0;
    out->warmup = warmup;
    free(it);
    return st;
}

/* ------------------------------------------------------------------ predictions */

typedef struct pred_item {
    const char *name;
    double err; /* |pred - dur| / dur; NaN: no prediction */
    double dur, pred;
} pred_item;

static int cmp_pred(const void *pa, const void *pb) {
    const pred_item *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    if (c) return c;
    if (isnan(a->err) || isnan(b->err)) return isnan(a->err) - isnan(b->err);
    return (a->err > b->err) - (a->err < b->err);
}

/* by name, then prediction (one per footprint: a fresh run does not update the models),
 * then duration */
static int cmp_group(const void *pa, const void *pb) {
    const pred_item *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    if (c) return c;
    if (a->pred != b->pred) return (a->pred > b->pred) - (a->pred < b->pred);
    return (a->dur > b->dur) - (a->dur < b->dur);
}

/* The median of sorted v[0 .. n), n > 0. */
static double median_sorted(const double *v, size_t n) {
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* The noise floor of it[0 .. m) (predicted tasks only, any order): each task's error
 * against the median duration of its footprint's tasks in this very run, a prediction made
 * with hindsight; per codelet, the median of those errors goes to the row of its name. */
static np_status noise_floor(pred_item *it, size_t m, np_trace_pred *rows, int n_rows,
                             np_error *err) {
    double *dur = np_alloc(m ? m : 1, sizeof *dur, "trace predictions", err);
    double *floor_err = np_alloc(m ? m : 1, sizeof *floor_err, "trace predictions", err);
    if (!dur || !floor_err) {
        free(dur);
        free(floor_err);
        return NP_STATUS_NO_MEMORY;
    }
    qsort(it, m, sizeof *it, cmp_group);
    for (size_t a = 0; a < m;) { /* one footprint: it[a .. b) */
        size_t b = a;
        while (b < m && !strcmp(it[b].name, it[a].name) && it[b].pred == it[a].pred) {
            dur[b - a] = it[b].dur;
            b++;
        }
        double med = median_sorted(dur, b - a);
        for (size_t i = a; i < b; i++) floor_err[i] = fabs(it[i].dur - med) / it[i].dur;
        a = b;
    }
    for (size_t a = 0; a < m;) { /* one codelet: it[a .. b) */
        size_t b = a;
        while (b < m && !strcmp(it[b].name, it[a].name)) b++;
        qsort(floor_err + a, b - a, sizeof *floor_err, cmp_double);
        for (int r = 0; r < n_rows; r++)
            if (!strcmp(rows[r].name, it[a].name))
                rows[r].floor_err = median_sorted(floor_err + a, b - a);
        a = b;
    }
    free(dur);
    free(floor_err);
    return NP_OK;
}

np_status np_trace_predictions(const np_trace *tr, long warmup, np_trace_pred *rows, int max,
                               int *n_rows, np_error *err) {
    *n_rows = 0;
    size_t n = np_trace_count(tr);
    long first = LONG_MAX;
    for (size_t i = 0; i < n; i++)
        if (np_trace_get(tr, i)->batch < first) first = np_trace_get(tr, i)->batch;
    pred_item *it = np_alloc(n ? n : 1, sizeof *it, "trace predictions", err);
    if (!it) return NP_STATUS_NO_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        double dur = e->end_us - e->start_us;
        if (!e->name || e->batch < first + warmup || !(dur > 0) || !isfinite(dur) ||
            (unsigned)e->kind >= (unsigned)NP_NODE_KIND_COUNT ||
            (np_node_kinds[e->kind].flags & NP_KIND_DRIVER))
            continue;
        it[m++] = (pred_item){.name = e->name,
                              .dur = dur,
                              .pred = e->pred_us,
                              .err = e->pred_us > 0 ? fabs(e->pred_us - dur) / dur : NAN};
    }
    qsort(it, m, sizeof *it, cmp_pred); /* by name, then error, NaN last */
    np_status st = NP_OK;
    size_t with_all = 0; /* the predicted tasks, it[0 .. with_all) once moved to the front */
    for (size_t a = 0; a < m;) {
        size_t b = a, with = 0;
        double sum = 0;
        while (b < m && !strcmp(it[b].name, it[a].name)) {
            with += !isnan(it[b].err);
            sum += it[b].dur;
            b++;
        }
        if (*n_rows == max) {
            st = np_err(err, NP_STATUS_INTERNAL, "trace predictions: more than %d codelets", max);
            break;
        }
        np_trace_pred *r = &rows[(*n_rows)++];
        /* the errors of the predicted tasks are it[a .. a + with), sorted */
        double q50 = with ? it[a + (size_t)floor(0.5 * (double)(with - 1))].err : NAN;
        double q90 = with ? it[a + (size_t)ceil(0.9 * (double)(with - 1))].err : NAN;
        if (with && (with - 1) % 2) /* an even count: the mean of the middle two */
            q50 = (q50 + it[a + (with - 1) / 2 + 1].err) / 2;
        *r = (np_trace_pred){.name = it[a].name,
                             .tasks = (long)(b - a),
                             .predicted = (long)with,
                             .mean_us = sum / (double)(b - a),
                             .median_err = q50,
                             .p90_err = q90,
                             .floor_err = NAN};
        memmove(it + with_all, it + a, with * sizeof *it); /* it[a .. a + with) are done */
        with_all += with;
        a = b;
    }
    if (!st) st = noise_floor(it, with_all, rows, *n_rows, err);
    free(it);
    return st;
}
