/* Layout of the SVG picture of a trace: the tasks on a common time origin and in rows, the
 * time scale and its ticks, where the timeline, legend and charts go, batch label groups,
 * task rectangles and colours. Not here: the XML (runtime/trace/svg.c). */
#include "runtime/trace/svg_layout.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"

static int cmp_task(const void *pa, const void *pb) {
    const np_svg_task *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->worker != b->worker) return a->worker < b->worker ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1; /* an empty task first */
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static int cmp_batch(const void *pa, const void *pb) {
    const np_svg_batch *a = pa, *b = pb;
    if (a->batch != b->batch) return a->batch < b->batch ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

static int cmp_batch_time(const void *pa, const void *pb) {
    const np_svg_batch *a = pa, *b = pb;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return (a->batch > b->batch) - (a->batch < b->batch);
}

/* Where the parts of the document go, top to bottom: title, axis, the ranks' rows (each
 * rank's workers and its dense-compute lane), the legends (kinds, layers), the summary of a
 * long run's batches, the kind chart, the layer chart. */
void np_svg_place(np_svg_picture *p) {
    p->n_bars = 1; /* or the line saying why there is no chart */
    for (int k = 0; k < NP_NODE_KIND_COUNT && p->analyzed; k++)
        p->n_bars += p->rep.overall.kind[k].count > 0;
    int legend_lines = (NP_NODE_KIND_COUNT + NP_SVG_LEGEND_PER_LINE - 1) / NP_SVG_LEGEND_PER_LINE;
    /* no chart without layer tasks (rows are by node, the no-layer row last) */
    p->n_layers =
        p->analyzed && p->rep.n_layers && p->rep.layers[0].node >= 0 ? p->rep.n_layers : 0;
    p->n_named = 0;
    for (int i = 0; i < p->n_layers; i++)
        p->n_named += p->rep.layers[i].node >= 0;
    int layer_lines = (p->n_named + NP_SVG_LEGEND_PER_LINE - 1) / NP_SVG_LEGEND_PER_LINE;
    p->y_axis = 80;
    p->y_rows = p->y_axis + 8;
    p->y_end = p->y_rows + p->n_ranks * (NP_SVG_RANK_HEAD + NP_SVG_RANK_GAP) +
               (p->n_lanes + p->n_ranks) * (NP_SVG_ROW_H + NP_SVG_ROW_GAP);
    p->y_legend = p->y_end + 16;
    p->y_layer_legend = p->y_legend + (legend_lines + 2) * 18 + 12;
    p->y_summary = p->y_layer_legend + (layer_lines ? layer_lines * 18 + 24 : 0) + 12;
    p->y_bars = p->y_summary + (p->n_summary ? NP_SVG_SUMMARY_H + 80 : 0) + 18;
    p->y_layers = p->y_bars + 26 + p->n_bars * (NP_SVG_BAR_H + NP_SVG_BAR_GAP) + 24;
    p->height = p->n_layers ? p->y_layers + 26 + p->n_layers * (NP_SVG_BAR_H + NP_SVG_BAR_GAP) + 20
                            : p->y_layers - 4;
}

np_status np_svg_picture_make(np_svg_picture *p, const np_trace *tr, np_error *err) {
    memset(p, 0, sizeof *p);
    p->tr = tr;
    size_t n = np_trace_count(tr);
    p->ts = np_alloc(n ? n : 1, sizeof *p->ts, "svg tasks", err);
    p->bs = np_alloc(n ? n : 1, sizeof *p->bs, "svg batch starts", err);
    if (!p->ts || !p->bs) return NP_STATUS_NO_MEMORY;
    np_svg_task *ts = p->ts;

    /* Times relative to the earliest start; a time that is not finite is placed at 0 and a
     * task ending before it starts is drawn as a hairline, as in the Chrome export. */
    double t0 = INFINITY, span = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (!e) {
            n = i;
            break;
        }
        ts[i] = (np_svg_task){.name = e->name,
                              .kind = e->kind,
                              .batch = e->batch,
                              .window = e->window,
                              .rank = e->rank,
                              .worker = e->worker,
                              .node = e->node >= 0 ? e->node : -1,
                              .chunk = e->chunk >= 0 ? e->chunk : -1,
                              .start = e->start_us,
                              .end = e->end_us,
                              .bytes = e->bytes,
                              .seq = i,
                              .id = e->id,
                              .n_deps = e->n_deps > 0 ? e->n_deps : 0,
                              .ev = e};
        if (isfinite(e->start_us) && e->start_us < t0) t0 = e->start_us;
    }
    p->n = n;
    if (!isfinite(t0)) t0 = 0;
    double *wait = malloc((n ? n : 1) * sizeof *wait); /* cosmetic: none without memory */
    if (wait && !np_trace_peer_wait(tr, wait))
        for (size_t i = 0; i < n; i++)
            ts[i].wait = isfinite(wait[i]) ? wait[i] : 0;
    free(wait);
    for (size_t i = 0; i < n; i++) {
        double s = isfinite(ts[i].start) ? ts[i].start - t0 : 0;
        double e = isfinite(ts[i].end) ? ts[i].end - t0 : s;
        ts[i].start = s;
        ts[i].end = e < s ? s : e;
        if (ts[i].end > span) span = ts[i].end;
    }
    if (!(span > 0)) span = 1; /* all tasks empty: any scale draws them */
    p->span = span;
    qsort(ts, n, sizeof *ts, cmp_task);
    for (size_t i = 0; i < n; i++) {
        int new_rank = i == 0 || ts[i].rank != ts[i - 1].rank;
        p->n_ranks += new_rank;
        p->n_lanes += new_rank || ts[i].worker != ts[i - 1].worker;
    }
    /* The analysis refuses non-finite times and unknown kinds; the timeline can still
     * show such a trace, so only the bar chart gives way (to a line saying why). */
    if (n > 0) {
        np_status st = np_trace_analyze(tr, &p->rep, &p->why);
        p->analyzed = st == NP_OK;
        if (st != NP_OK && st != NP_STATUS_BAD_INPUT) {
            if (err) *err = p->why;
            return st;
        }
    }
    p->arrows = n <= NP_SVG_ARROW_TASKS;
    if (p->arrows) np_svg_critical_path(p);
    np_svg_place(p);
    return NP_OK;
}

static int cmp_key(const void *pa, const void *pb) {
    const np_svg_key *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

np_svg_key *np_svg_by_id(const np_svg_picture *p) {
    np_svg_key *k = malloc((p->n ? p->n : 1) * sizeof *k);
    if (!k) return NULL;
    for (size_t i = 0; i < p->n; i++)
        k[i] = (np_svg_key){p->ts[i].rank, p->ts[i].id, i};
    qsort(k, p->n, sizeof *k, cmp_key);
    return k;
}

long np_svg_find(const np_svg_picture *p, const np_svg_key *keys, int rank, int64_t id) {
    np_svg_key want = {rank, id, 0};
    const np_svg_key *k = id > 0 ? bsearch(&want, keys, p->n, sizeof *keys, cmp_key) : NULL;
    return k ? (long)k->i : -1;
}

void np_svg_critical_path(np_svg_picture *p) {
    np_svg_key *order = np_svg_by_id(p);
    if (!order) return; /* cosmetic */
    for (size_t i0 = 0; i0 < p->n;) {
        size_t i1 = i0, last = p->n; /* the task with an id that ends last */
        for (; i1 < p->n && p->ts[i1].rank == p->ts[i0].rank; i1++)
            if (p->ts[i1].id > 0 && (last == p->n || p->ts[i1].end > p->ts[last].end)) last = i1;
        if (last == p->n) { /* no task with an id: no edges to follow */
            i0 = i1;
            continue;
        }
        /* back through the producer that finished last; ids only grow along edges, so
         * the walk ends */
        for (long t = (long)last; t >= 0;) {
            np_svg_task *x = &p->ts[t];
            x->critical = 1;
            long next = -1;
            for (int d = 0; d < x->n_deps; d++) {
                long k = np_svg_find(p, order, x->rank, np_trace_dep(x->ev, d));
                if (k >= 0 && p->ts[k].id < x->id && (next < 0 || p->ts[k].end > p->ts[next].end))
                    next = k;
            }
            t = next;
        }
        i0 = i1;
    }
    free(order);
}

np_status np_svg_long_run(const np_trace *tr, np_trace **detail, np_svg_summary **summary,
                          int *n_summary, long *batch, long *batches, np_error *err) {
    *detail = NULL;
    *summary = NULL;
    *n_summary = 0;
    *batches = 0;
    if (!np_trace_count(tr)) return NP_OK;
    /* the batches that end in the trace (in its window, for a window's trace), by rank
     * then batch */
    np_trace_batch_end *ends = NULL;
    size_t n = 0, m = 0;
    np_status st = np_trace_batch_ends(tr, &ends, &n, err);
    if (st) return st;
    double win0 = -INFINITY, win1 = INFINITY;
    np_trace_get_window(tr, &win0, &win1);
    long lo = LONG_MAX, hi = LONG_MIN, most = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(ends[i].end_us > win0 && ends[i].end_us <= win1)) continue;
        if (ends[i].batch < lo) lo = ends[i].batch;
        if (ends[i].batch > hi) hi = ends[i].batch;
        k = m && ends[i].rank == ends[m - 1].rank ? k + 1 : 1; /* the rank's batches so far */
        if (k > most) most = k;
        ends[m++] = ends[i];
    }
    free(ends);
    *batches = most;
    if (most <= NP_SVG_MAX_BATCHES) return NP_OK;
    /* at most NP_SVG_MAX_BARS bars: consecutive batches share one beyond that */
    long span = hi - lo + 1, g = (span + NP_SVG_MAX_BARS - 1) / NP_SVG_MAX_BARS;
    np_svg_summary *s = np_zalloc((size_t)((span + g - 1) / g), sizeof *s, "svg summary", err);
    if (!s) return NP_STATUS_NO_MEMORY;
    for (long b = lo; b <= hi && !st; b += g) {
        long last = b + g - 1 < hi ? b + g - 1 : hi;
        np_trace *w = NULL;
        np_trace_report r;
        np_error e2 = {{0}};
        if (np_trace_batches(tr, b, last, &w, &e2)) { /* no window of their own */
            np_trace_free(w);
            continue;
        }
        st = np_trace_analyze(w, &r, err);
        np_trace_free(w);
        if (st == NP_STATUS_BAD_INPUT) { /* a trace the analysis refuses: no summary */
            free(s);
            *n_summary = 0;
            *batches = 0;
            return NP_OK;
        }
        if (st) break;
        const np_trace_rank_stats *o = &r.overall;
        double per = (r.n_ranks > 0 ? (double)r.n_ranks : 1) * (double)(last - b + 1);
        s[(*n_summary)++] = (np_svg_summary){
            .batch = b,
            .count = last - b + 1,
            .step = o->span_us / (double)(last - b + 1),
            .exchange = o->exchange_exposed_us / per,
            .lookup = o->lookup_exposed_us / per,
            .input = (o->kind[NP_NODE_PREFETCH].exposed_us + o->kind[NP_NODE_DATA].exposed_us) / per};
        np_trace_report_free(&r);
    }
    if (!st) {
        *batch = lo + (hi - lo) * 3 / 5;
        st = np_trace_batches(tr, *batch, *batch, detail, err);
    }
    if (st) {
        free(s);
        *n_summary = 0;
        return st;
    }
    *summary = s;
    return NP_OK;
}

void np_svg_picture_free(np_svg_picture *p) {
    np_trace_report_free(&p->rep); /* zeroed when analyze did not run */
    free(p->ts);
    free(p->bs);
    free(p->summary);
    p->ts = NULL;
    p->bs = NULL;
    p->summary = NULL;
}

double np_svg_x(const np_svg_picture *p, double t) {
    return NP_SVG_LABEL_W + t / p->span * NP_SVG_PLOT_W;
}

/* A 1-2-5 step near span/10, so the axis has about ten labelled ticks. A span so small
 * (or large) that the step is not a normal positive number gets the span itself as its
 * step: two ticks, 0 and the end. */
static double tick_step(double span) {
    double raw = span / 10, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
    return isnormal(step) && step > 0 && span / step <= 20 ? step : span;
}

void np_svg_ticks(const np_svg_picture *p, double *step, int *dec) {
    *step = tick_step(p->span / 1000);
    *dec = *step >= 1 ? 0 : (int)ceil(-log10(*step) - 1e-9);
    if (!(*dec >= 0 && *dec <= 17))
        *dec = 17; /* a subnormal span: as many digits as a double has */
}

size_t np_svg_rank_batches(const np_svg_picture *p, size_t i0, size_t i1) {
    size_t m = 0;
    for (size_t i = i0; i < i1; i++)
        p->bs[m++] = (np_svg_batch){p->ts[i].batch, p->ts[i].start};
    qsort(p->bs, m, sizeof *p->bs, cmp_batch);
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (i == 0 || p->bs[i].batch != p->bs[i - 1].batch) p->bs[k++] = p->bs[i];
    qsort(p->bs, k, sizeof *p->bs, cmp_batch_time);
    return k;
}

/* "b0-b2,b4": the n batches of bs (n <= 24) in order, runs of consecutive numbers
 * compressed; returns the label's length. */
static int batch_label(const np_svg_batch *bs, size_t n, char *out, size_t cap) {
    long b[24];
    for (size_t i = 0; i < n; i++) {
        long v = bs[i].batch;
        size_t j = i;
        for (; j > 0 && b[j - 1] > v; j--)
            b[j] = b[j - 1];
        b[j] = v;
    }
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && len < cap;) {
        size_t j = i;
        while (j + 1 < n && b[j + 1] == b[j] + 1)
            j++;
        len +=
            (size_t)(j > i ? snprintf(out + len, cap - len, "%sb%ld-b%ld", i ? "," : "", b[i], b[j])
                           : snprintf(out + len, cap - len, "%sb%ld", i ? "," : "", b[i]));
        i = j + 1;
    }
    return (int)(len < cap ? len : cap - 1);
}

/* A group grows while the next batch starts before the group's label would end. */
size_t np_svg_batch_group(const np_svg_picture *p, size_t i, size_t k, char *out, size_t cap) {
    double x = np_svg_x(p, p->bs[i].start);
    size_t j = i;
    int len = batch_label(p->bs + i, 1, out, cap);
    while (j + 1 < k && np_svg_x(p, p->bs[j + 1].start) < x + 2 + 6.0 * len + 4 && j + 1 - i < 24)
        len = batch_label(p->bs + i, ++j - i + 1, out, cap);
    return j;
}

void np_svg_task_box(const np_svg_picture *p, const np_svg_task *t, np_svg_box *b) {
    b->x = np_svg_x(p, t->start);
    b->w = t->end / p->span * NP_SVG_PLOT_W - t->start / p->span * NP_SVG_PLOT_W;
    /* A task shorter than a pixel still shows as a hairline. */
    if (b->w < 0.5) b->w = 0.5;
    /* a collective's wait for its last peer: the pale start of the rectangle */
    double ww = t->wait / p->span * NP_SVG_PLOT_W;
    b->wait_w = ww >= 0.5 ? (ww < b->w ? ww : b->w) : 0;
    /* inside the rectangle: the layer's name where it fits (batches are labelled on the
     * rank's title line), else bN */
    const char *layer = t->node >= 0 ? np_trace_node_name(p->tr, t->node) : NULL;
    b->layer = layer && b->w >= 6.0 * (double)strlen(layer) + 6 ? layer : NULL;
    /* bN wW cC, or bN wW, or bN: the longest that fits */
    for (int parts = 3; parts >= 1; parts--) {
        int len = snprintf(b->label, sizeof b->label, "b%ld", t->batch);
        if (parts >= 2 && t->window >= 0)
            len += snprintf(b->label + len, sizeof b->label - (size_t)len, " w%d", t->window);
        if (parts >= 3 && t->chunk >= 0)
            len += snprintf(b->label + len, sizeof b->label - (size_t)len, " c%d", t->chunk);
        if (!b->layer && b->w >= 6.0 * len + 6) return;
    }
    b->label[0] = 0;
}

/* A kind outside the enum (a newer or corrupt trace) is dark grey, as in the Paje file. */
static const unsigned char other_colour[3] = {64, 64, 64};

static const unsigned char *colour_of(np_node_kind k) {
    const np_node_kind_def *d = np_node_kind_get(k);
    return d ? d->rgb : other_colour;
}

void np_svg_layer_colour(int node, int bwd, unsigned char out[3]) {
    double h = fmod(0.58 + 0.381966 * (double)node, 1.0) * 6, s = 0.6, v = bwd ? 0.6 : 0.9;
    int i = (int)h % 6;
    double f = h - floor(h), a = v * (1 - s), b = v * (1 - s * f), c = v * (1 - s * (1 - f));
    double rgb[6][3] = {{v, c, a}, {b, v, a}, {a, v, c}, {a, b, v}, {c, a, v}, {v, a, b}};
    for (int k = 0; k < 3; k++)
        out[k] = (unsigned char)lround(255 * rgb[i][k]);
}

/* A layer's fwd and bwd tasks: its colour (np_svg_layer_colour); its other tasks (the
 * all-reduce, the dense update) their kind's, node % 4 = 0 plain, 1 lighter, 2 darker,
 * 3 lightest. */
void np_svg_shade(np_node_kind k, int node, unsigned char out[3]) {
    if (node >= 0 && (k == NP_NODE_FWD || k == NP_NODE_BWD)) {
        np_svg_layer_colour(node, k == NP_NODE_BWD, out);
        return;
    }
    static const double mix[4] = {0, 0.35, -0.3, 0.6}; /* > 0 towards white, < 0 black */
    const unsigned char *c = colour_of(k);
    double m = node >= 0 ? mix[node % 4] : 0;
    for (int i = 0; i < 3; i++)
        out[i] = (unsigned char)lround(m >= 0 ? c[i] + (255 - c[i]) * m : c[i] * (1 + m));
}

const char *np_svg_text_on(np_node_kind k, int node) {
    unsigned char c[3];
    np_svg_shade(k, node, c);
    return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] > 150 ? "#000" : "#fff";
}

void np_svg_legend_at(int k, double y, double *x, double *yy) {
    *x = NP_SVG_LABEL_W + (k % NP_SVG_LEGEND_PER_LINE) * NP_SVG_LEGEND_ITEM_W;
    *yy = y + (k / NP_SVG_LEGEND_PER_LINE) * 18;
}

double np_svg_bar_w(double v, double max) {
    return max > 0 ? v / max * NP_SVG_BAR_W : 0;
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

double np_svg_median_step(const np_svg_picture *p) {
    double *v = malloc((p->n_summary ? (size_t)p->n_summary : 1) * sizeof *v);
    if (!v || !p->n_summary) {
        free(v);
        return 0;
    }
    for (int i = 0; i < p->n_summary; i++)
        v[i] = p->summary[i].step;
    qsort(v, (size_t)p->n_summary, sizeof *v, cmp_double);
    double m = v[p->n_summary / 2];
    free(v);
    return m;
}
