/* What to try, from an overlap report: a table of rules, each a condition on the report's
 * figures (per rank and step) and the run's facts, with the likely cause and the knob to
 * turn (docs/tracing.md "What to try" lists the same table). Not here: the figures
 * themselves (analyze.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/trace/trace.h"

/* The figures the rules read, in microseconds per rank and step, and the run's facts. */
typedef struct facts {
    double step;            /* the slowest rank's step */
    double exch_exposed;    /* exposed exchange */
    double wait, wire;      /* the collectives' time waiting for peers, and the rest */
    double lookup_exposed;  /* exposed lookup (route, keys, owner's route, retrieve, sync) */
    double input_exposed;   /* exposed prefetch and the driver's reading */
    double allreduce_exposed;
    double idle_share;      /* the workers' idle time / their span */
    int one_rank;
    char pipeline[16];      /* "" when the trace does not say */
    char data[16];          /* synthetic, criteo, bin; "" when the trace does not say */
    long windows, chunks;   /* 0 when the trace does not say */
} facts;

typedef struct rule {
    const char *id;
    /* the figure the rule is about (its share of the step is printed), or < 0: not met */
    double (*when)(const facts *f);
    const char *cause, *knob;
} rule;

static int is(const facts *f, const char *pipeline) {
    return !strcmp(f->pipeline, pipeline);
}

static int is_data(const facts *f, const char *data) {
    return !strcmp(f->data, data);
}

/* at least `share` of the step */
static double over(const facts *f, double x, double share) {
    return f->step > 0 && x >= share * f->step ? x : -1;
}

static double exchange_waits(const facts *f) {
    if (f->one_rank || f->wait < f->wire) return -1;
    return over(f, f->exch_exposed, 0.10);
}

static double exchange_sequential(const facts *f) {
    if (f->one_rank || f->wait >= f->wire || !is(f, "sequential")) return -1;
    return over(f, f->exch_exposed, 0.10);
}

static double exchange_dbp(const facts *f) {
    if (f->one_rank || f->wait >= f->wire || !is(f, "dbp")) return -1;
    return over(f, f->exch_exposed, 0.10);
}

static double exchange_windows(const facts *f) {
    if (f->one_rank || f->wait >= f->wire || !(is(f, "fwp") || is(f, "nestpipe"))) return -1;
    return over(f, f->exch_exposed, 0.10);
}

static double lookup_not_ahead(const facts *f) {
    if (!(is(f, "sequential") || is(f, "fwp"))) return -1;
    return over(f, f->lookup_exposed, 0.15);
}

static double lookup_cpu(const facts *f) {
    if (!(is(f, "dbp") || is(f, "nestpipe") || is(f, "async"))) return -1;
    return over(f, f->lookup_exposed, 0.15);
}

static double input_file(const facts *f) {
    return is_data(f, "criteo") || is_data(f, "bin") || is_data(f, "movielens")
               ? over(f, f->input_exposed, 0.10)
               : -1;
}

/* exposed input of a trace that does not say what it read (before 0.6) */
static double input_unknown(const facts *f) {
    return f->data[0] ? -1 : over(f, f->input_exposed, 0.10);
}

/* on the wire under a pipeline the rules above do not name (async, or a trace without
 * the fact) */
static double exchange_other(const facts *f) {
    if (f->one_rank || f->wait >= f->wire || is(f, "sequential") || is(f, "dbp") ||
        is(f, "fwp") || is(f, "nestpipe"))
        return -1;
    return over(f, f->exch_exposed, 0.10);
}

static double input_synthetic(const facts *f) {
    return is_data(f, "synthetic") ? over(f, f->input_exposed, 0.10) : -1;
}

static double allreduce(const facts *f) {
    return f->one_rank ? -1 : over(f, f->allreduce_exposed, 0.10);
}

/* (a window in which no batch ended has no step: no rule can say how much of it) */
static double idle_few_chunks(const facts *f) {
    return f->step > 0 && f->idle_share >= 0.30 && f->chunks > 0 && f->chunks < 4
               ? f->idle_share * f->step
               : -1;
}

static double idle_many_chunks(const facts *f) {
    return f->step > 0 && f->idle_share >= 0.30 && f->chunks >= 4 ? f->idle_share * f->step : -1;
}

/* The table: docs/tracing.md "What to try" is the same, row for row. */
static const rule rules[] = {
    {"exchange-waits", exchange_waits,
     "the exposed exchange is mostly waiting for peers: the ranks reach the collectives at "
     "different times (a slower rank, or uneven keys per rank)",
     "compare the ranks' steps above; --cluster keys evens out the keys per window; "
     "`nestpipe tune` for a --sched that keeps the comm worker free"},
    {"exchange-sequential", exchange_sequential,
     "the exchange is on the wire with nothing to hide behind: the sequential pipeline runs no "
     "compute meanwhile",
     "--pipeline nestpipe (or dbp): the exchange then runs under the neighbouring batch's compute"},
    {"exchange-dbp", exchange_dbp,
     "dbp overlaps the next batch's lookup, but each batch's own row and gradient exchanges "
     "still wait for its compute",
     "--pipeline nestpipe --windows 4: micro-batches overlap the exchange inside the batch"},
    {"exchange-windows", exchange_windows,
     "the exchange is on the wire longer than the compute that could hide it",
     "--windows higher (smaller micro-batches overlap more); --exchange auto (pooled sums, "
     "fewer bytes); else the link is the limit"},
    {"exchange-other", exchange_other,
     "the exchange is on the wire with too little compute to hide it",
     "--pipeline nestpipe with more --windows; --exchange auto (fewer bytes); else the link"},
    {"lookup-not-ahead", lookup_not_ahead,
     "the lookup (route, keys, retrieve) is on the critical path: this pipeline does not "
     "prefetch it",
     "--pipeline dbp or nestpipe: batch t+1's lookup runs while batch t trains"},
    {"lookup-cpu", lookup_cpu,
     "the lookup is exposed even though it is prefetched: it takes longer than a step's compute",
     "--cluster keys (fewer unique rows a window); more CPU workers (STARPU_NCPU); a larger "
     "--batch amortises the per-batch work"},
    {"input-file", input_file,
     "reading or copying the batch is exposed: the driver cannot keep up with the file",
     "binary data (nestpipe convert) reads several times faster than TSV; a larger --batch"},
    {"input", input_unknown,
     "reading, generating or copying the batch is exposed: the driver cannot keep up",
     "a larger --batch; for file data, the binary format (nestpipe convert)"},
    {"input-synthetic", input_synthetic,
     "generating or copying the batch is exposed: the driver cannot keep up",
     "a larger --batch; or the same data as a file (nestpipe generate, --data bin:FILE), if "
     "the metrics' data_seconds says it reads faster here"},
    {"allreduce", allreduce,
     "the dense all-reduce is exposed: the dense model's gradient exchange is on the critical "
     "path",
     "a larger --batch (fewer all-reduces a sample); a faster link"},
    {"idle-few-chunks", idle_few_chunks,
     "workers sit idle: a window's dense work is cut into too few tasks to use them",
     "--chunks higher (4, 8): more dense tasks run at once"},
    {"idle-many-chunks", idle_many_chunks,
     "workers sit idle although the dense work is cut fine: the graph waits on one chain",
     "`nestpipe tune` (policy, --priorities critical-path); fewer workers (STARPU_NCPU)"},
};

static facts gather(const np_trace *tr, const np_trace_report *r) {
    facts f = {0};
    const np_trace_rank_stats *o = &r->overall;
    double per = (double)(r->n_ranks > 0 ? r->n_ranks : 1) * (double)(o->batches > 0 ? o->batches : 1);
    f.step = isfinite(o->step_us) ? o->step_us : 0;
    f.exch_exposed = o->exchange_exposed_us / per;
    f.wait = o->peer_wait_us / per;
    f.wire = (o->collective_us - o->peer_wait_us) / per;
    f.lookup_exposed = o->lookup_exposed_us / per;
    f.input_exposed =
        (o->kind[NP_NODE_PREFETCH].exposed_us + o->kind[NP_NODE_DATA].exposed_us) / per;
    f.allreduce_exposed = o->kind[NP_NODE_ALLREDUCE].exposed_us / per;
    double span = 0, idle = 0;
    for (int i = 0; i < r->n_workers; i++) {
        const np_trace_worker_stats *w = &r->workers[i];
        if (w->driver) continue;
        span += w->busy_us + w->idle_us;
        idle += w->idle_us;
    }
    f.idle_share = span > 0 ? idle / span : 0;
    f.one_rank = r->one_rank;
    const char *v = np_trace_info(tr, "pipeline");
    snprintf(f.pipeline, sizeof f.pipeline, "%s", v ? v : "");
    v = np_trace_info(tr, "data");
    snprintf(f.data, sizeof f.data, "%s", v ? v : "");
    v = np_trace_info(tr, "windows");
    f.windows = v ? atol(v) : 0;
    v = np_trace_info(tr, "chunks");
    f.chunks = v ? atol(v) : 0;
    return f;
}

int np_trace_advise(const np_trace *tr, const np_trace_report *r, np_trace_advice *out, int max) {
    facts f = gather(tr, r);
    int n = 0;
    for (size_t i = 0; i < sizeof rules / sizeof *rules && n < max; i++) {
        double x = rules[i].when(&f);
        if (x < 0) continue;
        out[n++] = (np_trace_advice){.rule = rules[i].id,
                                     .figure_us = x,
                                     .share = f.step > 0 ? x / f.step : NAN,
                                     .cause = rules[i].cause,
                                     .knob = rules[i].knob};
    }
    /* the largest first */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j].figure_us > out[j - 1].figure_us; j--) {
            np_trace_advice t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

int np_trace_rule_count(void) {
    return (int)(sizeof rules / sizeof *rules);
}
