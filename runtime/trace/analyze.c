/* Overlap analysis of a task trace: per rank and node kind, how much time ran and how much of
 * it was exposed (not hidden behind dense compute), plus worker idle time and compute time per
 * model layer. Not here: recording or reading traces (trace.c, read.c), the text and JSON
 * report (report.c), pictures (svg.c).
 *
 * Definitions (docs/tracing.md), per rank:
 * - a task's interval is [start, max(start, end)): a negative duration counts as zero,
 *   as in the Chrome export;
 * - dense compute D = the union of the rank's intervals of the NP_KIND_COMPUTE kinds
 *   (runtime/core/kinds.c: pool_fwd, fwd, loss_fwd, loss_bwd, bwd, pool_bwd);
 * - a kind's exposed time = |U \ D| with U the union of its intervals; for the compute
 *   kinds themselves exposed = union: dense compute is the critical path that other work
 *   hides behind, so none of it counts as hidden;
 * - exchange = the NP_KIND_PAYLOAD kinds (exchange_emb, exchange_grad, allreduce); lookup =
 *   the NP_KIND_LOOKUP kinds (route, exchange_keys, route_owner, retrieve, sync): one union
 *   per group (overlapping tasks of the group count once) and its exposed part;
 * - collectives = the NP_KIND_EXCHANGE kinds (exchange_keys and the exchange group);
 * - batches = distinct batch values; span = last end - first start; step = span / batches;
 * - workers = those that ran at least one task on the rank; busy = union of their tasks,
 *   idle = span - busy; the rank's idle = the sum over its workers.
 * Per layer (all ranks together): sums of the durations of the tasks of each node, split in
 * fwd (compute kinds), bwd (compute kinds with NP_KIND_BACKWARD) and other kinds; its share
 * = (fwd + bwd) / the duration sum of all compute tasks, whose node -1 part (loss, pooling)
 * is a row of its own.
 * Every union is a sort and one sweep, and exposed parts a two-pointer walk over two sorted
 * unions: O(n log n) in the number of events. */
#include "runtime/trace/trace.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"

typedef struct span {
    double s, e; /* [s, e), e >= s */
} span;

typedef struct item {
    int rank, worker, node;
    np_node_kind kind;
    long batch;
    span t;
    int collective; /* an NP_KIND_EXCHANGE kind */
    double wait;    /* np_trace_peer_wait */
    const np_trace_event *e;
} item;

static int cmp_span(const void *pa, const void *pb) {
    const span *a = pa, *b = pb;
    return (a->s > b->s) - (a->s < b->s);
}

static int cmp_rank_kind(const void *pa, const void *pb) {
    const item *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    return cmp_span(&a->t, &b->t);
}

static int cmp_worker(const void *pa, const void *pb) { /* within one rank */
    const item *a = pa, *b = pb;
    if (a->worker != b->worker) return a->worker < b->worker ? -1 : 1;
    return cmp_span(&a->t, &b->t);
}

static int cmp_node(const void *pa, const void *pb) { /* -1 (no layer) last */
    const item *a = pa, *b = pb;
    unsigned x = (unsigned)a->node, y = (unsigned)b->node;
    return (x > y) - (x < y);
}

static int cmp_batch(const void *pa, const void *pb) { /* within one rank */
    const item *a = pa, *b = pb;
    return (a->batch > b->batch) - (a->batch < b->batch);
}

/* Merges v (sorted by start) into disjoint intervals in place; returns their count. */
static size_t merge(span *v, size_t n) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && v[i].s <= v[m - 1].e) {
            if (v[i].e > v[m - 1].e) v[m - 1].e = v[i].e;
        } else {
            v[m++] = v[i];
        }
    }
    return m;
}

static double measure(const span *v, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i].e - v[i].s;
    return sum;
}

/* Measure of the intersection of two merged (disjoint, sorted) lists. */
static double overlap(const span *a, size_t na, const span *b, size_t nb) {
    double sum = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        double lo = a[i].s > b[j].s ? a[i].s : b[j].s, hi = a[i].e < b[j].e ? a[i].e : b[j].e;
        if (hi > lo) sum += hi - lo;
        if (a[i].e < b[j].e)
            i++;
        else
            j++;
    }
    return sum;
}

/* Union and exposed part of the intervals of the kinds with any of flags (NP_KIND_*) among
 * the rank's items [it, it+n) (sorted by kind, then start); tmp has room for n. */
static void group(const item *it, size_t n, unsigned flags, const span *dense, size_t nd, span *tmp,
                  double *union_us, double *exposed_us) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (np_node_kind_is(it[i].kind, flags)) tmp[m++] = it[i].t;
    qsort(tmp, m, sizeof *tmp, cmp_span);
    m = merge(tmp, m);
    *union_us = measure(tmp, m);
    *exposed_us = *union_us - overlap(tmp, m, dense, nd);
}

/* Fills rs and the rank's worker rows (appended at ws[*nw]) from its items [it, it+n); tr
 * says whether it is a window's trace (whose span is the window) and the run's ranks. */
static void analyze_rank(const np_trace *tr, item *it, size_t n, span *dense, span *tmp,
                         np_trace_rank_stats *rs, np_trace_worker_stats *ws, int *nw) {
    /* the peers' arrays come zeroed from the caller */
    *rs = (np_trace_rank_stats){
        .npeer = rs->npeer, .peer_sent = rs->peer_sent, .peer_recv = rs->peer_recv};
    rs->rank = it[0].rank;
    double first = it[0].t.s, last = it[0].t.e;
    for (size_t i = 0; i < n; i++) {
        if (it[i].t.s < first) first = it[i].t.s;
        if (it[i].t.e > last) last = it[i].t.e;
    }
    int windowed = np_trace_get_window(tr, &first, &last);
    rs->span_us = last - first;

    /* items are sorted by kind, then start */
    size_t nd = 0;
    for (size_t i = 0; i < n; i++)
        if (np_node_kind_is(it[i].kind, NP_KIND_COMPUTE)) dense[nd++] = it[i].t;
    qsort(dense, nd, sizeof *dense, cmp_span);
    nd = merge(dense, nd);
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a; b < n && it[b].kind == it[a].kind; b++)
            ;
        np_trace_kind_stats *ks = &rs->kind[it[a].kind];
        size_t m = 0;
        for (size_t i = a; i < b; i++) {
            ks->total_us += it[i].t.e - it[i].t.s;
            tmp[m++] = it[i].t;
        }
        ks->count = (long)(b - a);
        m = merge(tmp, m);
        ks->union_us = measure(tmp, m);
        ks->exposed_us = np_node_kind_is(it[a].kind, NP_KIND_COMPUTE)
                             ? ks->union_us
                             : ks->union_us - overlap(tmp, m, dense, nd);
    }
    for (size_t i = 0; i < n; i++)
        if (it[i].collective) {
            const np_trace_event *e = it[i].e;
            rs->collective_us += it[i].t.e - it[i].t.s;
            rs->peer_wait_us += it[i].wait;
            if (!e->colls) continue; /* a trace from before 0.7.1, or one rank's copy */
            rs->split_us += it[i].t.e - it[i].t.s;
            rs->pack_us += e->pack_us;
            rs->comm_us += e->comm_us;
            rs->unpack_us += e->unpack_us;
            rs->post_us += e->post_us;
            rs->pace_us += e->pace_us;
            for (uint32_t q = 0; e->peer && q < e->npeer && (int)q < rs->npeer; q++) {
                rs->peer_sent[q] += e->peer[q];
                rs->peer_recv[q] += e->peer[e->npeer + q];
            }
        }
    group(it, n, NP_KIND_PAYLOAD, dense, nd, tmp, &rs->exchange_us, &rs->exchange_exposed_us);
    group(it, n, NP_KIND_LOOKUP, dense, nd, tmp, &rs->lookup_us, &rs->lookup_exposed_us);
    rs->exchange_exposed_ratio =
        rs->exchange_us > 0 ? rs->exchange_exposed_us / rs->exchange_us : NAN;

    qsort(it, n, sizeof *it, cmp_worker);
    for (size_t a = 0, b; a < n; a = b) {
        size_t m = 0;
        for (b = a; b < n && it[b].worker == it[a].worker; b++)
            tmp[m++] = it[b].t;
        np_trace_worker_stats *w = &ws[(*nw)++];
        w->rank = rs->rank;
        w->worker = it[a].worker;
        w->driver = 1;
        for (size_t i = a; i < b; i++)
            w->driver &= np_node_kind_is(it[i].kind, NP_KIND_DRIVER);
        w->busy_us = measure(tmp, merge(tmp, m));
        w->idle_us = rs->span_us - w->busy_us;
        rs->idle_us += w->idle_us;
    }

    if (windowed) { /* the batches that completed inside the window */
        rs->batches = np_trace_window_batches(tr, rs->rank);
    } else {
        qsort(it, n, sizeof *it, cmp_batch);
        for (size_t i = 0; i < n; i++)
            rs->batches += i == 0 || it[i].batch != it[i - 1].batch;
    }
    rs->step_us = rs->batches ? rs->span_us / (double)rs->batches : NAN;
}

/* The ranks of the run: its "ranks" fact, else those in the trace. */
static int run_ranks(const np_trace *tr, int in_trace) {
    const char *v = np_trace_info(tr, "ranks");
    char *end = NULL;
    long r = v ? strtol(v, &end, 10) : 0;
    return v && end != v && !*end && r > 0 && r < 1 << 20 ? (int)r : in_trace;
}

/* One rank exchanges nothing: its exchange and collective tasks copy within the process
 * (their time stays in the kind rows), so they are no exchange and wait for no peer. */
static void no_exchange(np_trace_rank_stats *r) {
    r->exchange_us = r->exchange_exposed_us = 0;
    r->exchange_exposed_ratio = NAN;
    r->collective_us = r->peer_wait_us = 0;
    r->split_us = r->pack_us = r->comm_us = r->unpack_us = r->post_us = r->pace_us = 0;
}

static void add_overall(np_trace_rank_stats *o, const np_trace_rank_stats *r) {
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        o->kind[k].count += r->kind[k].count;
        o->kind[k].total_us += r->kind[k].total_us;
        o->kind[k].union_us += r->kind[k].union_us;
        o->kind[k].exposed_us += r->kind[k].exposed_us;
    }
    o->exchange_us += r->exchange_us;
    o->exchange_exposed_us += r->exchange_exposed_us;
    o->lookup_us += r->lookup_us;
    o->lookup_exposed_us += r->lookup_exposed_us;
    o->idle_us += r->idle_us;
    o->collective_us += r->collective_us;
    o->peer_wait_us += r->peer_wait_us;
    o->split_us += r->split_us;
    o->pack_us += r->pack_us;
    o->comm_us += r->comm_us;
    o->unpack_us += r->unpack_us;
    o->post_us += r->post_us;
    o->pace_us += r->pace_us;
    if (r->batches > o->batches) o->batches = r->batches;
    if (r->span_us > o->span_us) o->span_us = r->span_us;
    if (r->step_us > o->step_us || isnan(o->step_us)) o->step_us = r->step_us;
}

/* The per-layer rows of out from all items (any order; sorted here by node). */
static np_status analyze_layers(const np_trace *tr, item *it, size_t n, np_trace_report *out,
                                np_error *err) {
    qsort(it, n, sizeof *it, cmp_node);
    int rows = 0, last = -2;
    for (size_t i = 0; i < n; i++) {
        int compute = np_node_kind_is(it[i].kind, NP_KIND_COMPUTE);
        if (compute) out->compute_us += it[i].t.e - it[i].t.s;
        /* a row per node, and one for dense compute of no layer */
        if ((it[i].node >= 0 || compute) && it[i].node != last) {
            rows++;
            last = it[i].node;
        }
    }
    if (!rows) return NP_OK;
    out->layers = np_zalloc((size_t)rows, sizeof *out->layers, "trace report layers", err);
    if (!out->layers) return NP_STATUS_NO_MEMORY;
    np_trace_layer_stats *l = NULL;
    for (size_t i = 0; i < n; i++) {
        const item *x = &it[i];
        int compute = np_node_kind_is(x->kind, NP_KIND_COMPUTE);
        if (x->node < 0 && !compute) continue;
        if (!l || l->node != x->node) {
            l = &out->layers[out->n_layers++];
            l->node = x->node;
            const char *name = x->node >= 0 ? np_trace_node_name(tr, x->node) : NULL;
            if (name && !(l->name = np_alloc(strlen(name) + 1, 1, "trace report layers", err)))
                return NP_STATUS_NO_MEMORY;
            if (name) strcpy(l->name, name);
        }
        double d = x->t.e - x->t.s;
        if (compute && !np_node_kind_is(x->kind, NP_KIND_BACKWARD)) {
            l->fwd_count++;
            l->fwd_us += d;
        } else if (compute) {
            l->bwd_count++;
            l->bwd_us += d;
        } else {
            l->other_count++;
            l->other_us += d;
        }
    }
    for (int i = 0; i < out->n_layers; i++) {
        np_trace_layer_stats *y = &out->layers[i];
        y->compute_share = out->compute_us > 0 ? (y->fwd_us + y->bwd_us) / out->compute_us : NAN;
    }
    return NP_OK;
}

/* ---------------------------------------------------------------- waiting for peers */

static int is_collective(const np_trace_event *e) {
    return np_node_kind_is(e->kind, NP_KIND_EXCHANGE); /* 0 for a read trace's junk kind */
}

/* An event of a collective, for the sort (qsort has no context: the pair carries it). */
typedef struct coll {
    size_t i;
    const np_trace_event *e;
} coll;

static int cmp_collective(const void *pa, const void *pb) {
    const np_trace_event *a = ((const coll *)pa)->e, *b = ((const coll *)pb)->e;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->batch != b->batch) return a->batch < b->batch ? -1 : 1;
    if (a->window != b->window) return a->window < b->window ? -1 : 1;
    if (a->node != b->node) return a->node < b->node ? -1 : 1;
    if (a->chunk != b->chunk) return a->chunk < b->chunk ? -1 : 1;
    int c = strcmp(a->name ? a->name : "", b->name ? b->name : "");
    if (c) return c;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static int cmp_int(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b);
}

int np_trace_peer_wait(const np_trace *tr, double *wait) {
    size_t n = np_trace_count(tr), m = 0;
    double w0, w1;
    int windowed = np_trace_get_window(tr, &w0, &w1);
    for (size_t i = 0; i < n; i++) /* a window's: found in the whole trace, cut to it */
        wait[i] = windowed ? np_trace_get(tr, i)->wait_us : 0;
    if (windowed) return 0;
    coll *ix = malloc((n ? n : 1) * sizeof *ix);
    if (!ix) return -1;
    /* the ranks of the trace: the distinct ranks of its events, any number of them */
    int *rk = malloc((n ? n : 1) * sizeof *rk);
    if (!rk) {
        free(ix);
        return -1;
    }
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (e->rank >= 0) rk[nr++] = e->rank;
        if (is_collective(e)) ix[m++] = (coll){i, e};
    }
    qsort(rk, nr, sizeof *rk, cmp_int);
    int ranks = 0;
    for (size_t i = 0; i < nr; i++)
        ranks += !i || rk[i] != rk[i - 1];
    free(rk);
    qsort(ix, m, sizeof *ix, cmp_collective);
    for (size_t a = 0, b; a < m; a = b) {
        const np_trace_event *first = ix[a].e;
        double last = first->start_us;
        int whole = 1;
        for (b = a + 1; b < m; b++) {
            const np_trace_event *e = ix[b].e, *p = ix[b - 1].e;
            if (e->kind != first->kind || e->batch != first->batch ||
                e->window != first->window || e->node != first->node ||
                e->chunk != first->chunk ||
                strcmp(e->name ? e->name : "", first->name ? first->name : ""))
                break;
            if (e->rank == p->rank) whole = 0; /* one rank twice: not one collective */
            if (e->start_us > last) last = e->start_us;
        }
        if (!whole || (int)(b - a) != ranks || ranks < 2) continue;
        for (size_t i = a; i < b; i++) {
            const np_trace_event *e = ix[i].e;
            double w = last - e->start_us, dur = e->end_us - e->start_us;
            wait[ix[i].i] = w < 0 ? 0 : w > dur ? (dur > 0 ? dur : 0) : w;
        }
    }
    free(ix);
    return 0;
}

np_status np_trace_analyze(const np_trace *tr, np_trace_report *out, np_error *err) {
    memset(out, 0, sizeof *out);
    out->overall.rank = -1;
    out->overall.exchange_exposed_ratio = NAN;
    size_t n = np_trace_count(tr);
    item *it = np_alloc(n ? n : 1, sizeof *it, "trace analysis", err);
    span *dense = np_alloc(n ? n : 1, sizeof *dense, "trace analysis", err);
    span *tmp = np_alloc(n ? n : 1, sizeof *tmp, "trace analysis", err);
    double *wait = np_alloc(n ? n : 1, sizeof *wait, "trace analysis", err);
    np_status st = NP_OK;
    if (!it || !dense || !tmp || !wait || np_trace_peer_wait(tr, wait)) {
        st = np_err(err, NP_STATUS_NO_MEMORY, "trace analysis: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (!isfinite(e->start_us) || !isfinite(e->end_us) ||
            (unsigned)e->kind >= (unsigned)NP_NODE_KIND_COUNT) {
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "trace analysis: event %zu (%s, rank %d, worker %d) has a non-finite "
                        "time or an unknown kind",
                        i, e->name ? e->name : "?", e->rank, e->worker);
            goto done;
        }
        it[i] = (item){.rank = e->rank,
                       .worker = e->worker,
                       .node = e->node >= 0 ? e->node : -1,
                       .kind = e->kind,
                       .batch = e->batch,
                       .t = {e->start_us, e->end_us > e->start_us ? e->end_us : e->start_us},
                       .collective = is_collective(e),
                       .wait = wait[i],
                       .e = e};
    }
    qsort(it, n, sizeof *it, cmp_rank_kind);
    int n_ranks = 0;
    for (size_t i = 0; i < n; i++)
        n_ranks += i == 0 || it[i].rank != it[i - 1].rank;
    if (n_ranks > 0) {
        out->ranks = np_zalloc((size_t)n_ranks, sizeof *out->ranks, "trace report", err);
        /* at most one worker row per event; trimmed by n_workers */
        out->workers = np_zalloc(n, sizeof *out->workers, "trace report", err);
        if (!out->ranks || !out->workers) {
            st = NP_STATUS_NO_MEMORY;
            goto done;
        }
    }
    out->windowed = np_trace_get_window(tr, &out->window_from_us, &out->window_to_us);
    out->one_rank = run_ranks(tr, n_ranks) == 1;
    out->overall.step_us = NAN;
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a; b < n && it[b].rank == it[a].rank; b++)
            ;
        np_trace_rank_stats *rs = &out->ranks[out->n_ranks++];
        uint32_t npeer = 0;
        for (size_t i = a; i < b; i++)
            if (it[i].collective && it[i].e->npeer > npeer) npeer = it[i].e->npeer;
        if (npeer) {
            if (!(rs->peer_sent = np_zalloc(2 * (size_t)npeer, sizeof *rs->peer_sent,
                                            "trace report", err))) {
                st = NP_STATUS_NO_MEMORY;
                goto done;
            }
            rs->npeer = (int)npeer;
            rs->peer_recv = rs->peer_sent + npeer;
        }
        analyze_rank(tr, it + a, b - a, dense, tmp, rs, out->workers, &out->n_workers);
        if (out->one_rank) no_exchange(rs);
        add_overall(&out->overall, rs);
    }
    if (!n_ranks) out->overall.step_us = 0;
    if (out->overall.exchange_us > 0)
        out->overall.exchange_exposed_ratio =
            out->overall.exchange_exposed_us / out->overall.exchange_us;
    st = analyze_layers(tr, it, n, out, err);
    if (!st) out->n_advice = np_trace_advise(tr, out, out->advice, NP_TRACE_MAX_ADVICE);

done:
    free(it);
    free(dense);
    free(tmp);
    free(wait);
    if (st) np_trace_report_free(out);
    return st;
}

void np_trace_report_free(np_trace_report *r) {
    if (!r) return;
    for (int i = 0; r->ranks && i < r->n_ranks; i++)
        free(r->ranks[i].peer_sent);
    free(r->ranks);
    free(r->workers);
    for (int i = 0; i < r->n_layers; i++)
        free(r->layers[i].name);
    free(r->layers);
    memset(r, 0, sizeof *r);
    r->overall.rank = -1;
    r->overall.exchange_exposed_ratio = NAN;
}
