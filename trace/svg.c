/* SVG picture of a task trace: a timeline (one row per rank x worker, colour = node kind
 * shaded by layer, batches labelled, tooltips naming layer and chunk) and bar charts of
 * exposed vs hidden time per kind and of compute time per layer, from np_trace_analyze.
 * Static SVG 1.1: no scripts, no external resources. */
#include "trace/trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "trace/palette.h"

/* Layout in px. The width is fixed: a long trace is scaled to fit, not scrolled. */
enum {
    WIDTH = 1600,
    LABEL_W = 170, /* row labels left of the plot */
    PLOT_W = WIDTH - LABEL_W - 30,
    ROW_H = 20, /* one worker */
    ROW_GAP = 3,
    RANK_HEAD = 16, /* the rank's title line, which carries the batch labels */
    RANK_GAP = 8,
    LEGEND_ITEM_W = 150,
    BAR_H = 16,
    BAR_GAP = 6,
    BAR_W = 900, /* the longest bar (largest union) */
};

typedef struct {
    const char *name;
    np_node_kind kind;
    long batch;
    int window, rank, worker, node, chunk;
    double start, end; /* microseconds since the earliest start; end >= start */
    uint64_t bytes;
    size_t seq;
    double wait; /* of a collective: the time waiting for the last peer (np_trace_peer_wait) */
} task;

static int cmp_task(const void *pa, const void *pb) {
    const task *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->worker != b->worker) return a->worker < b->worker ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1; /* an empty task first */
    return (a->seq > b->seq) - (a->seq < b->seq);
}

typedef struct {
    long batch;
    double start;
} batch_start;

static int cmp_batch(const void *pa, const void *pb) {
    const batch_start *a = pa, *b = pb;
    if (a->batch != b->batch) return a->batch < b->batch ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

static int cmp_batch_time(const void *pa, const void *pb) {
    const batch_start *a = pa, *b = pb;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return (a->batch > b->batch) - (a->batch < b->batch);
}

/* Length of the UTF-8 sequence at s, 0 when it is not valid (XML must be valid UTF-8). */
static int utf8_len(const unsigned char *s) {
    int n = s[0] < 0x80             ? 1
            : (s[0] & 0xE0) == 0xC0 ? 2
            : (s[0] & 0xF0) == 0xE0 ? 3
            : (s[0] & 0xF8) == 0xF0 ? 4
                                    : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return n;
}

/* Text escaped for XML content and attribute values; control characters (not allowed
 * in XML 1.0) and invalid UTF-8 bytes become '?'. */
static void put_xml(FILE *f, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        const char *esc = *s == '&'    ? "&amp;"
                          : *s == '<'  ? "&lt;"
                          : *s == '>'  ? "&gt;"
                          : *s == '"'  ? "&quot;"
                          : *s == '\'' ? "&apos;"
                                       : NULL;
        int n = utf8_len(s);
        if (esc) {
            fputs(esc, f);
        } else if (n == 0 || (n == 1 && *s < 0x20 && *s != '\t')) {
            fputc('?', f);
        } else {
            fwrite(s, 1, (size_t)n, f);
            s += n;
            continue;
        }
        s++;
    }
}

/* A kind outside the enum (a newer or corrupt trace) is dark grey, as in the Paje file. */
static const unsigned char other_colour[3] = {64, 64, 64};

static const unsigned char *colour_of(np_node_kind k) {
    return (unsigned)k < NP_NODE_KIND_COUNT ? palette[k] : other_colour;
}

/* The kind's colour, for a layer task shaded by its node so that neighbouring layers differ
 * while the hue still says the kind: node % 4 = 0 plain, 1 lighter, 2 darker, 3 lightest. */
static void shade_of(np_node_kind k, int node, unsigned char out[3]) {
    static const double mix[4] = {0, 0.35, -0.3, 0.6}; /* > 0 towards white, < 0 black */
    const unsigned char *c = colour_of(k);
    double m = node >= 0 ? mix[node % 4] : 0;
    for (int i = 0; i < 3; i++)
        out[i] = (unsigned char)lround(m >= 0 ? c[i] + (255 - c[i]) * m : c[i] * (1 + m));
}

static void put_shade(FILE *f, np_node_kind k, int node) {
    unsigned char c[3];
    shade_of(k, node, c);
    fprintf(f, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static void put_fill(FILE *f, np_node_kind k) {
    put_shade(f, k, -1);
}

/* Dark text on light colours, white on dark ones. */
static const char *text_on(np_node_kind k, int node) {
    unsigned char c[3];
    shade_of(k, node, c);
    return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] > 150 ? "#000" : "#fff";
}

/* A 1-2-5 step near span/10, so the axis has about ten labelled ticks. A span so small
 * (or large) that the step is not a normal positive number gets the span itself as its
 * step: two ticks, 0 and the end. */
static double tick_step(double span) {
    double raw = span / 10, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
    return isnormal(step) && step > 0 && span / step <= 20 ? step : span;
}

typedef struct {
    FILE *f;
    const np_trace *tr;
    task *ts; /* (n) sorted by cmp_task */
    size_t n;
    batch_start *bs;            /* (n) work array */
    double span;                /* microseconds, > 0 */
    const np_trace_report *rep; /* NULL when the analysis refused the trace */
    const char *no_report;      /* then why */
    int n_lanes, n_ranks;
} picture;

static double x_of(const picture *p, double t) {
    return LABEL_W + t / p->span * PLOT_W;
}

static void put_lane_label(FILE *f, const np_trace *tr, int worker, double y) {
    char buf[32];
    const char *name = np_trace_worker_name(tr, worker);
    if (!name) {
        snprintf(buf, sizeof buf, "worker %d", worker);
        name = buf;
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">", LABEL_W - 8,
            y + ROW_H / 2.0 + 4);
    put_xml(f, name);
    fputs("</text>\n", f);
}

/* "b0-b2,b4": the n batches of bs (n <= 24) in order, runs of consecutive numbers
 * compressed; returns the label's length. */
static int batch_label(const batch_start *bs, size_t n, char *out, size_t cap) {
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
        len += (size_t)(j > i ? snprintf(out + len, cap - len, "%sb%ld-b%ld", i ? "," : "", b[i],
                                         b[j])
                              : snprintf(out + len, cap - len, "%sb%ld", i ? "," : "", b[i]));
        i = j + 1;
    }
    return (int)(len < cap ? len : cap - 1);
}

/* Batch starts on one rank: a dashed line through its rows for every batch, and a label on
 * its title line: bN, or bA-bB for batches that start too close together to label apart,
 * so every batch is marked on every rank and no two labels overlap. For a readable picture
 * of a long run, draw a few batches (--from-batch, --to-batch). */
static void put_batches(const picture *p, size_t i0, size_t i1, double y_head, double y_end) {
    FILE *f = p->f;
    size_t m = 0;
    for (size_t i = i0; i < i1; i++)
        p->bs[m++] = (batch_start){p->ts[i].batch, p->ts[i].start};
    qsort(p->bs, m, sizeof *p->bs, cmp_batch);
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (i == 0 || p->bs[i].batch != p->bs[i - 1].batch) p->bs[k++] = p->bs[i];
    qsort(p->bs, k, sizeof *p->bs, cmp_batch_time);
    for (size_t i = 0; i < k; i++)
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
                "stroke-width=\"1\" stroke-dasharray=\"3,2\"/>\n",
                x_of(p, p->bs[i].start), y_head + RANK_HEAD - 3, x_of(p, p->bs[i].start), y_end);
    /* labels: a group grows while the next batch starts before the group's label would
     * end; the label names the group's batches in order, runs compressed (b0-b2,b4) */
    char label[160];
    for (size_t i = 0; i < k;) {
        double x = x_of(p, p->bs[i].start);
        size_t j = i;
        int len = batch_label(p->bs + i, 1, label, sizeof label);
        while (j + 1 < k && x_of(p, p->bs[j + 1].start) < x + 2 + 6.0 * len + 4 &&
               j + 1 - i < 24)
            len = batch_label(p->bs + i, ++j - i + 1, label, sizeof label);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%s</text>\n", x + 2,
                y_head + RANK_HEAD - 5, label);
        i = j + 1;
    }
}

static void put_task(const picture *p, const task *t, double y) {
    FILE *f = p->f;
    double x = x_of(p, t->start), w = t->end / p->span * PLOT_W - t->start / p->span * PLOT_W;
    /* A task shorter than a pixel still shows as a hairline. */
    if (w < 0.5) w = 0.5;
    fprintf(f, "<rect class=\"task\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"", x,
            y, w, ROW_H);
    put_shade(f, t->kind, t->node);
    fputs("\"><title>", f);
    put_xml(f, t->name ? t->name : np_node_kind_name(t->kind));
    fprintf(f, " (%s)", np_node_kind_name(t->kind));
    const char *layer = t->node >= 0 ? np_trace_node_name(p->tr, t->node) : NULL;
    if (layer) {
        fputs(" layer ", f);
        put_xml(f, layer);
        fprintf(f, " (node %d)", t->node);
    } else if (t->node >= 0) {
        fprintf(f, " node %d", t->node);
    }
    fprintf(f, " batch %ld", t->batch);
    if (t->window >= 0) fprintf(f, " window %d", t->window);
    if (t->chunk >= 0) fprintf(f, " chunk %d", t->chunk);
    fprintf(f, ", %.3f-%.3f ms (%.3f ms)", t->start / 1000, t->end / 1000,
            (t->end - t->start) / 1000);
    if (t->bytes) fprintf(f, ", %llu bytes", (unsigned long long)t->bytes);
    if (t->wait > 0) fprintf(f, ", of which %.3f ms waiting for peers", t->wait / 1000);
    fputs("</title></rect>\n", f);
    /* a collective's wait for its last peer: the pale start of the rectangle */
    double ww = t->wait / p->span * PLOT_W;
    if (ww >= 0.5)
        fprintf(f,
                "<rect class=\"wait\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                "fill=\"#fff\" fill-opacity=\"0.6\"/>\n",
                x, y, ww < w ? ww : w, ROW_H);
    /* inside the rectangle: the layer's name where it fits (batches are labelled on the
     * rank's title line), else bN */
    char label[32];
    int len = t->window >= 0 ? snprintf(label, sizeof label, "b%ld w%d", t->batch, t->window)
                             : snprintf(label, sizeof label, "b%ld", t->batch);
    if (layer && w >= 6.0 * (double)strlen(layer) + 6) {
        fprintf(f,
                "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
                "fill=\"%s\">",
                x + w / 2, y + ROW_H / 2.0 + 3.5, text_on(t->kind, t->node));
        put_xml(f, layer);
        fputs("</text>\n", f);
    } else if (w >= 6.0 * len + 6) {
        fprintf(f,
                "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
                "fill=\"%s\">%s</text>\n",
                x + w / 2, y + ROW_H / 2.0 + 3.5, text_on(t->kind, t->node), label);
    }
}

static void put_axis(const picture *p, double y, double y_end) {
    FILE *f = p->f;
    double span_ms = p->span / 1000, step = tick_step(span_ms);
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (!(dec >= 0 && dec <= 17)) dec = 17; /* a subnormal span: as many digits as a double has */
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
            "stroke-width=\"1\"/>\n",
            LABEL_W, y, LABEL_W + PLOT_W, y);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">ms</text>\n",
            LABEL_W - 16, y - 6);
    /* at most 21 ticks whatever the span (tick_step's bound), so a degenerate trace cannot
     * make the loop run on */
    for (long i = 0; i <= 20 && i * step <= span_ms * (1 + 1e-9); i++) {
        double x = x_of(p, i * step * 1000);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\" "
                "stroke-width=\"1\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#000\" stroke-width=\"1\"/>\n",
                x, y, x, y_end, x, y - 4, x, y);
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%.*f</text>\n",
                x, y - 6, dec, i * step);
    }
}

static double put_legend(FILE *f, double y) {
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">node kinds</text>\n",
            LABEL_W - 8, y + 10);
    int per_line = PLOT_W / LEGEND_ITEM_W;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        double x = LABEL_W + (k % per_line) * LEGEND_ITEM_W, yy = y + (k / per_line) * 18;
        const char *name = np_node_kind_name((np_node_kind)k);
        fprintf(
            f, "<rect class=\"legend %s\" x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"",
            name, x, yy);
        put_fill(f, (np_node_kind)k);
        fprintf(f, "\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", x + 16,
                yy + 10, name);
    }
    y += ((NP_NODE_KIND_COUNT + per_line - 1) / per_line) * 18;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\" "
            "stroke-width=\"1\" stroke-dasharray=\"3,2\"/>\n<text x=\"%d\" y=\"%.1f\" "
            "font-size=\"12\">bN: the start of batch N on that rank (its first task); b0-b2,b4: "
            "batches that start too close together to label apart; bN wW on a task: batch N, window W</text>\n",
            LABEL_W, y + 6, LABEL_W + 20, y + 6, LABEL_W + 26, y + 10);
    y += 18;
    fprintf(f,
            "<rect x=\"%d\" y=\"%.1f\" width=\"20\" height=\"12\" fill=\"",
            LABEL_W, y);
    put_fill(f, NP_NODE_EXCHANGE_EMB);
    fprintf(f,
            "\"/>\n<rect class=\"wait\" x=\"%d\" y=\"%.1f\" width=\"10\" height=\"12\" "
            "fill=\"#fff\" fill-opacity=\"0.6\"/>\n<text x=\"%d\" y=\"%.1f\" "
            "font-size=\"12\">pale start of an exchange: waiting for the last peer to arrive; "
            "the rest: on the wire (and packing)</text>\n",
            LABEL_W, y, LABEL_W + 26, y + 10);
    return y + 18;
}

static void put_bars(const picture *p, double y) {
    FILE *f = p->f;
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Exposed vs hidden "
            "time per node kind, all ranks</text>\n",
            LABEL_W, y);
    y += 16;
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">solid: exposed (no dense compute running "
            "on the rank); pale: hidden under dense compute (union - exposed)",
            LABEL_W, y);
    if (p->rep && p->rep->overall.exchange_us > 0)
        fprintf(f, "; exchange exposed %.3f of %.3f ms", p->rep->overall.exchange_exposed_us / 1000,
                p->rep->overall.exchange_us / 1000);
    fputs("</text>\n", f);
    y += 10;
    if (!p->rep) {
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">no bar chart: ", LABEL_W, y + 14);
        put_xml(f, p->no_report);
        fputs("</text>\n", f);
        return;
    }
    const np_trace_rank_stats *o = &p->rep->overall;
    double max_union = 0;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++)
        if (o->kind[k].union_us > max_union) max_union = o->kind[k].union_us;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const np_trace_kind_stats *s = &o->kind[k];
        if (s->count == 0) continue;
        double exposed = s->exposed_us > 0 ? s->exposed_us : 0;
        double hidden = s->union_us - exposed > 0 ? s->union_us - exposed : 0;
        double we = max_union > 0 ? exposed / max_union * BAR_W : 0;
        double wh = max_union > 0 ? hidden / max_union * BAR_W : 0;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">%s</text>\n",
                LABEL_W - 8, y + BAR_H - 4, np_node_kind_name((np_node_kind)k));
        fprintf(
            f,
            "<rect class=\"bar exposed\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"",
            LABEL_W, y, we, BAR_H);
        put_fill(f, (np_node_kind)k);
        fprintf(f,
                "\"/>\n<rect class=\"bar hidden\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%d\" fill-opacity=\"0.35\" fill=\"",
                LABEL_W + we, y, wh, BAR_H);
        put_fill(f, (np_node_kind)k);
        fprintf(
            f,
            "\"/>\n<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\">exposed %.3f ms, hidden %.3f ms "
            "(%ld tasks, busy %.3f ms)</text>\n",
            LABEL_W + we + wh + 6, y + BAR_H - 4, exposed / 1000, hidden / 1000, s->count,
            s->total_us / 1000);
        y += BAR_H + BAR_GAP;
    }
}

/* Dense compute per layer (the report's layer rows): fwd then bwd time, in their kinds'
 * colours, scaled to the largest layer. */
static void put_layer_bars(const picture *p, double y) {
    FILE *f = p->f;
    const np_trace_report *r = p->rep;
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Dense compute "
            "per layer, all ranks</text>\n",
            LABEL_W, y);
    y += 16;
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">busy time (sum of task durations) of "
            "each layer's fwd and bwd tasks; share of all %.3f ms of dense compute</text>\n",
            LABEL_W, y, r->compute_us / 1000);
    y += 10;
    double max_us = 0;
    for (int i = 0; i < r->n_layers; i++)
        if (r->layers[i].fwd_us + r->layers[i].bwd_us > max_us)
            max_us = r->layers[i].fwd_us + r->layers[i].bwd_us;
    for (int i = 0; i < r->n_layers; i++) {
        const np_trace_layer_stats *l = &r->layers[i];
        double wf = max_us > 0 ? l->fwd_us / max_us * BAR_W : 0;
        double wb = max_us > 0 ? l->bwd_us / max_us * BAR_W : 0;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">", LABEL_W - 8,
                y + BAR_H - 4);
        if (l->name)
            put_xml(f, l->name);
        else if (l->node < 0)
            fputs("(no layer)", f);
        else
            fprintf(f, "node %d", l->node);
        fprintf(f,
                "</text>\n<rect class=\"layer-bar fwd\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%d\" fill=\"",
                LABEL_W, y, wf, BAR_H);
        put_shade(f, NP_NODE_FWD, l->node);
        fprintf(f,
                "\"/>\n<rect class=\"layer-bar bwd\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%d\" fill=\"",
                LABEL_W + wf, y, wb, BAR_H);
        put_shade(f, NP_NODE_BWD, l->node);
        fprintf(f, "\"/>\n<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\">fwd %.3f ms, bwd %.3f ms",
                LABEL_W + wf + wb + 6, y + BAR_H - 4, l->fwd_us / 1000, l->bwd_us / 1000);
        if (!isnan(l->compute_share)) fprintf(f, ", %.1f%% of compute", 100 * l->compute_share);
        fprintf(f, " (%ld tasks)</text>\n", l->fwd_count + l->bwd_count);
        y += BAR_H + BAR_GAP;
    }
}

/* The whole document; ts sorted, n > 0. */
static void emit(picture *p) {
    FILE *f = p->f;
    const task *ts = p->ts;
    int n_bars = 1; /* or the line saying why there is no chart */
    for (int k = 0; k < NP_NODE_KIND_COUNT && p->rep; k++)
        n_bars += p->rep->overall.kind[k].count > 0;
    int legend_lines = (NP_NODE_KIND_COUNT + PLOT_W / LEGEND_ITEM_W - 1) / (PLOT_W / LEGEND_ITEM_W);

    double y_axis = 80, y_rows = y_axis + 8;
    double y_end = y_rows + p->n_ranks * (RANK_HEAD + RANK_GAP) + p->n_lanes * (ROW_H + ROW_GAP);
    double y_legend = y_end + 16, y_bars = y_legend + (legend_lines + 2) * 18 + 30;
    double y_layers = y_bars + 26 + n_bars * (BAR_H + BAR_GAP) + 24;
    /* no chart without layer tasks (rows are by node, the no-layer row last) */
    int n_layers = p->rep && p->rep->n_layers && p->rep->layers[0].node >= 0 ? p->rep->n_layers : 0;
    double height = n_layers ? y_layers + 26 + n_layers * (BAR_H + BAR_GAP) + 20 : y_layers - 4;

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%.0f\" viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"#fff\"/>\n",
            WIDTH, height, WIDTH, height, WIDTH, height);
    fprintf(f,
            "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">nestpipe task "
            "trace</text>\n<text x=\"%d\" y=\"44\" font-size=\"12\">%zu tasks on %d rank%s, %d "
            "worker rows, span %.3f ms (0 = earliest start); bN = batch N",
            LABEL_W, LABEL_W, p->n, p->n_ranks, p->n_ranks == 1 ? "" : "s", p->n_lanes,
            p->span / 1000);
    if (n_layers)
        fputs("; shades of a kind's colour tell layers apart, tooltips name layer and chunk", f);
    size_t dropped = np_trace_dropped(p->tr);
    if (dropped) fprintf(f, "; %zu events dropped (out of memory)", dropped);
    fputs("</text>\n", f);

    put_axis(p, y_axis, y_end);

    double y = y_rows;
    for (size_t i0 = 0; i0 < p->n;) {
        size_t i1 = i0;
        while (i1 < p->n && ts[i1].rank == ts[i0].rank)
            i1++;
        double y_head = y;
        fprintf(f,
                "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" font-weight=\"bold\" "
                "text-anchor=\"end\">rank %d</text>\n",
                LABEL_W - 8, y + RANK_HEAD - 4, ts[i0].rank);
        y += RANK_HEAD;
        for (size_t j = i0; j < i1;) {
            size_t j1 = j;
            while (j1 < i1 && ts[j1].worker == ts[j].worker)
                j1++;
            fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
                    LABEL_W, y, PLOT_W, ROW_H);
            put_lane_label(f, p->tr, ts[j].worker, y);
            for (size_t t = j; t < j1; t++)
                put_task(p, &ts[t], y);
            y += ROW_H + ROW_GAP;
            j = j1;
        }
        put_batches(p, i0, i1, y_head, y - ROW_GAP);
        y += RANK_GAP;
        i0 = i1;
    }
    put_legend(f, y_legend);
    put_bars(p, y_bars);
    if (n_layers) put_layer_bars(p, y_layers);
    fputs("</svg>\n", f);
}

static void emit_empty(FILE *f) {
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"400\" "
          "height=\"60\" viewBox=\"0 0 400 60\" font-family=\"sans-serif\">\n"
          "<rect x=\"0\" y=\"0\" width=\"400\" height=\"60\" fill=\"#fff\"/>\n"
          "<text x=\"10\" y=\"34\" font-size=\"14\">nestpipe task trace: no tasks</text>\n"
          "</svg>\n",
          f);
}

np_status np_trace_write_svg(const np_trace *tr, const char *path, np_error *err) {
    size_t n = np_trace_count(tr);
    task *ts = np_alloc(n ? n : 1, sizeof *ts, "svg tasks", err);
    batch_start *bs = np_alloc(n ? n : 1, sizeof *bs, "svg batch starts", err);
    np_trace_report rep;
    memset(&rep, 0, sizeof rep);
    np_status st = NP_OK;
    if (!ts || !bs) {
        st = NP_STATUS_NO_MEMORY;
        goto out;
    }

    /* Times relative to the earliest start; a time that is not finite is placed at 0 and a
     * task ending before it starts is drawn as a hairline, as in the Chrome export. */
    double t0 = INFINITY, span = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (!e) {
            n = i;
            break;
        }
        ts[i] = (task){.name = e->name,
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
                       .seq = i};
        if (isfinite(e->start_us) && e->start_us < t0) t0 = e->start_us;
    }
    if (!isfinite(t0)) t0 = 0;
    double *wait = malloc((n ? n : 1) * sizeof *wait); /* cosmetic: none without memory */
    if (wait && !np_trace_peer_wait(tr, wait))
        for (size_t i = 0; i < n; i++)
            ts[i].wait = isfinite(wait[i]) ? wait[i] : 0;
    free(wait);
    int n_lanes = 0, n_ranks = 0;
    for (size_t i = 0; i < n; i++) {
        double s = isfinite(ts[i].start) ? ts[i].start - t0 : 0;
        double e = isfinite(ts[i].end) ? ts[i].end - t0 : s;
        ts[i].start = s;
        ts[i].end = e < s ? s : e;
        if (ts[i].end > span) span = ts[i].end;
    }
    if (!(span > 0)) span = 1; /* all tasks empty: any scale draws them */
    qsort(ts, n, sizeof *ts, cmp_task);
    for (size_t i = 0; i < n; i++) {
        int new_rank = i == 0 || ts[i].rank != ts[i - 1].rank;
        n_ranks += new_rank;
        n_lanes += new_rank || ts[i].worker != ts[i - 1].worker;
    }
    /* The analysis refuses non-finite times and unknown kinds; the timeline can still
     * show such a trace, so only the bar chart gives way (to a line saying why). */
    np_error aerr = {{0}};
    int analyzed = 0;
    if (n > 0) {
        st = np_trace_analyze(tr, &rep, &aerr);
        analyzed = st == NP_OK;
        if (st != NP_OK && st != NP_STATUS_BAD_INPUT) {
            if (err) *err = aerr;
            goto out;
        }
        st = NP_OK;
    }

    /* Through a unique temporary and rename, so a viewer never opens half a picture. */
    np_outfile o;
    if ((st = np_outfile_open(&o, path, "trace svg", err))) goto out;
    errno = 0;
    if (n == 0) {
        emit_empty(o.f);
    } else {
        picture p = {o.f, tr, ts, n, bs, span, analyzed ? &rep : NULL, aerr.msg, n_lanes, n_ranks};
        emit(&p);
    }
    st = np_outfile_commit(&o, 0, err);
out:
    np_trace_report_free(&rep); /* zeroed when analyze did not run */
    free(ts);
    free(bs);
    return st;
}
