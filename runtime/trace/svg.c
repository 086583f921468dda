/* SVG picture of a task trace, the XML: a timeline (one row per rank x worker, colour = node
 * kind shaded by layer, batches labelled, tooltips naming layer and chunk) and bar charts of
 * exposed vs hidden time per kind and of compute time per layer, from np_trace_analyze.
 * Static SVG 1.1: no scripts, no external resources. Not here: where things go, scales and
 * colours (runtime/trace/svg_layout.c). */
#include "runtime/trace/trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/trace/svg_layout.h"

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

static void put_shade(FILE *f, np_node_kind k, int node) {
    unsigned char c[3];
    np_svg_shade(k, node, c);
    fprintf(f, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static void put_fill(FILE *f, np_node_kind k) {
    put_shade(f, k, -1);
}

static void put_lane_label(FILE *f, const np_trace *tr, int worker, double y) {
    char buf[32];
    const char *name = np_trace_worker_name(tr, worker);
    if (!name) {
        snprintf(buf, sizeof buf, "worker %d", worker);
        name = buf;
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">",
            NP_SVG_LABEL_W - 8, y + NP_SVG_ROW_H / 2.0 + 4);
    put_xml(f, name);
    fputs("</text>\n", f);
}

/* Batch starts on one rank: a dashed line through its rows for every batch, and a label on
 * its title line: bN, or bA-bB for batches that start too close together to label apart,
 * so every batch is marked on every rank and no two labels overlap. For a readable picture
 * of a long run, draw a window (--from-batch/--to-batch, --from-ms/--to-ms). */
static void put_batches(FILE *f, const np_svg_picture *p, size_t i0, size_t i1, double y_head,
                        double y_end) {
    size_t k = np_svg_rank_batches(p, i0, i1);
    for (size_t i = 0; i < k; i++)
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
                "stroke-width=\"1\" stroke-dasharray=\"3,2\"/>\n",
                np_svg_x(p, p->bs[i].start), y_head + NP_SVG_RANK_HEAD - 3,
                np_svg_x(p, p->bs[i].start), y_end);
    char label[160];
    for (size_t i = 0; i < k;) {
        size_t j = np_svg_batch_group(p, i, k, label, sizeof label);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%s</text>\n",
                np_svg_x(p, p->bs[i].start) + 2, y_head + NP_SVG_RANK_HEAD - 5, label);
        i = j + 1;
    }
}

static void put_task(FILE *f, const np_svg_picture *p, const np_svg_task *t, double y) {
    np_svg_box b;
    np_svg_task_box(p, t, &b);
    fprintf(f, "<rect class=\"task\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"",
            b.x, y, b.w, NP_SVG_ROW_H);
    put_shade(f, t->kind, t->node);
    if (t->critical) fputs("\" stroke=\"#000\" stroke-width=\"1.5", f);
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
    if (t->critical) fputs("; on the critical path", f);
    fputs("</title></rect>\n", f);
    if (b.wait_w > 0)
        fprintf(f,
                "<rect class=\"wait\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                "fill=\"#fff\" fill-opacity=\"0.6\"/>\n",
                b.x, y, b.wait_w, NP_SVG_ROW_H);
    if (b.layer) {
        fprintf(f,
                "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
                "fill=\"%s\">",
                b.x + b.w / 2, y + NP_SVG_ROW_H / 2.0 + 3.5, np_svg_text_on(t->kind, t->node));
        put_xml(f, b.layer);
        fputs("</text>\n", f);
    } else if (b.label[0]) {
        fprintf(f,
                "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
                "fill=\"%s\">%s</text>\n",
                b.x + b.w / 2, y + NP_SVG_ROW_H / 2.0 + 3.5, np_svg_text_on(t->kind, t->node),
                b.label);
    }
}

static void put_axis(FILE *f, const np_svg_picture *p, double y, double y_end) {
    double span_ms = p->span / 1000, step;
    int dec;
    np_svg_ticks(p, &step, &dec);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
            "stroke-width=\"1\"/>\n",
            NP_SVG_LABEL_W, y, NP_SVG_LABEL_W + NP_SVG_PLOT_W, y);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">ms</text>\n",
            NP_SVG_LABEL_W - 16, y - 6);
    /* at most 21 ticks whatever the span (the step's bound), so a degenerate trace cannot
     * make the loop run on */
    for (long i = 0; i <= 20 && i * step <= span_ms * (1 + 1e-9); i++) {
        double x = np_svg_x(p, i * step * 1000);
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

static void put_legend(FILE *f, double y) {
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">node kinds</text>\n",
            NP_SVG_LABEL_W - 8, y + 10);
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        double x, yy;
        np_svg_legend_at(k, y, &x, &yy);
        const char *name = np_node_kind_name((np_node_kind)k);
        fprintf(
            f, "<rect class=\"legend %s\" x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"",
            name, x, yy);
        put_fill(f, (np_node_kind)k);
        fprintf(f, "\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", x + 16,
                yy + 10, name);
    }
    y += ((NP_NODE_KIND_COUNT + NP_SVG_LEGEND_PER_LINE - 1) / NP_SVG_LEGEND_PER_LINE) * 18;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\" "
            "stroke-width=\"1\" stroke-dasharray=\"3,2\"/>\n<text x=\"%d\" y=\"%.1f\" "
            "font-size=\"12\">bN: the start of batch N on that rank (its first task); b0-b2,b4: "
            "batches that start too close together to label apart; bN wW cC on a task: batch N, "
            "window W, chunk C; a layer's fwd and bwd tasks take the layer's colour</text>\n",
            NP_SVG_LABEL_W, y + 6, NP_SVG_LABEL_W + 20, y + 6, NP_SVG_LABEL_W + 26, y + 10);
    y += 18;
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"20\" height=\"12\" fill=\"", NP_SVG_LABEL_W, y);
    put_fill(f, NP_NODE_EXCHANGE_EMB);
    fprintf(f,
            "\"/>\n<rect class=\"wait\" x=\"%d\" y=\"%.1f\" width=\"10\" height=\"12\" "
            "fill=\"#fff\" fill-opacity=\"0.6\"/>\n<text x=\"%d\" y=\"%.1f\" "
            "font-size=\"12\">pale start of an exchange: waiting for the last peer to arrive; "
            "the rest: on the wire (and packing)</text>\n",
            NP_SVG_LABEL_W, y, NP_SVG_LABEL_W + 26, y + 10);
}

static void put_bars(FILE *f, const np_svg_picture *p, double y) {
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Exposed vs hidden "
            "time per node kind, all ranks</text>\n",
            NP_SVG_LABEL_W, y);
    y += 16;
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">solid: exposed (no dense compute running "
            "on the rank); pale: hidden under dense compute (union - exposed)",
            NP_SVG_LABEL_W, y);
    if (p->analyzed && p->rep.overall.exchange_us > 0)
        fprintf(f, "; exchange exposed %.3f of %.3f ms", p->rep.overall.exchange_exposed_us / 1000,
                p->rep.overall.exchange_us / 1000);
    fputs("</text>\n", f);
    y += 10;
    if (!p->analyzed) {
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">no bar chart: ", NP_SVG_LABEL_W,
                y + 14);
        put_xml(f, p->why.msg);
        fputs("</text>\n", f);
        return;
    }
    const np_trace_rank_stats *o = &p->rep.overall;
    double max_union = 0;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++)
        if (o->kind[k].union_us > max_union) max_union = o->kind[k].union_us;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const np_trace_kind_stats *s = &o->kind[k];
        if (s->count == 0) continue;
        double exposed = s->exposed_us > 0 ? s->exposed_us : 0;
        double hidden = s->union_us - exposed > 0 ? s->union_us - exposed : 0;
        double we = np_svg_bar_w(exposed, max_union), wh = np_svg_bar_w(hidden, max_union);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">%s</text>\n",
                NP_SVG_LABEL_W - 8, y + NP_SVG_BAR_H - 4, np_node_kind_name((np_node_kind)k));
        fprintf(
            f,
            "<rect class=\"bar exposed\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"",
            NP_SVG_LABEL_W, y, we, NP_SVG_BAR_H);
        put_fill(f, (np_node_kind)k);
        fprintf(f,
                "\"/>\n<rect class=\"bar hidden\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%d\" fill-opacity=\"0.35\" fill=\"",
                NP_SVG_LABEL_W + we, y, wh, NP_SVG_BAR_H);
        put_fill(f, (np_node_kind)k);
        fprintf(
            f,
            "\"/>\n<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\">exposed %.3f ms, hidden %.3f ms "
            "(%ld tasks, busy %.3f ms)</text>\n",
            NP_SVG_LABEL_W + we + wh + 6, y + NP_SVG_BAR_H - 4, exposed / 1000, hidden / 1000,
            s->count, s->total_us / 1000);
        y += NP_SVG_BAR_H + NP_SVG_BAR_GAP;
    }
}

/* Dense compute per layer (the report's layer rows): fwd then bwd time, in their kinds'
 * colours, scaled to the largest layer. */
static void put_layer_bars(FILE *f, const np_svg_picture *p, double y) {
    const np_trace_report *r = &p->rep;
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Dense compute "
            "per layer, all ranks</text>\n",
            NP_SVG_LABEL_W, y);
    y += 16;
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">busy time (sum of task durations) of "
            "each layer's fwd and bwd tasks; share of all %.3f ms of dense compute</text>\n",
            NP_SVG_LABEL_W, y, r->compute_us / 1000);
    y += 10;
    double max_us = 0;
    for (int i = 0; i < r->n_layers; i++)
        if (r->layers[i].fwd_us + r->layers[i].bwd_us > max_us)
            max_us = r->layers[i].fwd_us + r->layers[i].bwd_us;
    for (int i = 0; i < r->n_layers; i++) {
        const np_trace_layer_stats *l = &r->layers[i];
        double wf = np_svg_bar_w(l->fwd_us, max_us), wb = np_svg_bar_w(l->bwd_us, max_us);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">",
                NP_SVG_LABEL_W - 8, y + NP_SVG_BAR_H - 4);
        if (l->name)
            put_xml(f, l->name);
        else if (l->node < 0)
            fputs("(no layer)", f);
        else
            fprintf(f, "node %d", l->node);
        fprintf(f,
                "</text>\n<rect class=\"layer-bar fwd\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%d\" fill=\"",
                NP_SVG_LABEL_W, y, wf, NP_SVG_BAR_H);
        put_shade(f, NP_NODE_FWD, l->node);
        fprintf(f,
                "\"/>\n<rect class=\"layer-bar bwd\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%d\" fill=\"",
                NP_SVG_LABEL_W + wf, y, wb, NP_SVG_BAR_H);
        put_shade(f, NP_NODE_BWD, l->node);
        fprintf(f, "\"/>\n<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\">fwd %.3f ms, bwd %.3f ms",
                NP_SVG_LABEL_W + wf + wb + 6, y + NP_SVG_BAR_H - 4, l->fwd_us / 1000,
                l->bwd_us / 1000);
        if (!isnan(l->compute_share)) fprintf(f, ", %.1f%% of compute", 100 * l->compute_share);
        fprintf(f, " (%ld tasks)</text>\n", l->fwd_count + l->bwd_count);
        y += NP_SVG_BAR_H + NP_SVG_BAR_GAP;
    }
}

typedef struct np_svg_span {
    double s, e;
} np_svg_span;

static int cmp_span(const void *pa, const void *pb) {
    const np_svg_span *a = pa, *b = pb;
    return (a->s > b->s) - (a->s < b->s);
}

/* The rank's dense compute as one lane: the union of its compute tasks' intervals, so idle
 * time shows as a gap at any zoom. ts[i0, i1) are the rank's tasks. */
static void put_busy_lane(FILE *f, const np_svg_picture *p, size_t i0, size_t i1, double y) {
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
               "stroke=\"#bbb\" stroke-width=\"0.5\"/>\n",
            NP_SVG_LABEL_W, y, NP_SVG_PLOT_W, NP_SVG_ROW_H);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\" "
               "font-style=\"italic\">dense compute</text>\n",
            NP_SVG_LABEL_W - 8, y + NP_SVG_ROW_H / 2.0 + 4);
    np_svg_span *v = malloc((i1 - i0 + 1) * sizeof *v); /* cosmetic: none without memory */
    if (!v) return;
    size_t m = 0;
    for (size_t i = i0; i < i1; i++)
        if (np_node_kind_is(p->ts[i].kind, NP_KIND_COMPUTE))
            v[m++] = (np_svg_span){p->ts[i].start, p->ts[i].end};
    qsort(v, m, sizeof *v, cmp_span);
    double busy = 0;
    for (size_t a = 0; a < m;) {
        double s0 = v[a].s, e0 = v[a].e;
        size_t b = a + 1;
        for (; b < m && v[b].s <= e0; b++)
            if (v[b].e > e0) e0 = v[b].e;
        double x0 = np_svg_x(p, s0), w = np_svg_x(p, e0) - x0;
        fprintf(f, "<rect class=\"busy\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                   "fill=\"#444\"/>\n",
                x0, y + 3, w < 0.5 ? 0.5 : w, NP_SVG_ROW_H - 6);
        busy += e0 - s0;
        a = b;
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.0f%% "
               "busy</text>\n",
            NP_SVG_LABEL_W - 8, y + NP_SVG_ROW_H + 8, 100 * busy / p->span);
    free(v);
}

/* Dependency arrows (a producer's end to its consumer's start, on one rank), the critical
 * path's in red; ys[i] is the top of task i's row. */
static void put_arrows(FILE *f, const np_svg_picture *p, const double *ys) {
    np_svg_key *keys = np_svg_by_id(p);
    if (!keys) return; /* cosmetic */
    fputs("<g class=\"deps\" fill=\"none\">\n", f);
    for (size_t i = 0; i < p->n; i++) {
        const np_svg_task *t = &p->ts[i];
        for (int d = 0; d < t->n_deps; d++) {
            long k = np_svg_find(p, keys, t->rank, np_trace_dep(t->ev, d));
            if (k < 0) continue;
            const np_svg_task *u = &p->ts[k];
            int crit = t->critical && u->critical;
            fprintf(f,
                    "<line class=\"dep%s\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
                    "stroke=\"%s\" stroke-width=\"%s\" stroke-opacity=\"%s\" "
                    "marker-end=\"url(#%s)\"/>\n",
                    crit ? " critical" : "", np_svg_x(p, u->end), ys[k] + NP_SVG_ROW_H / 2.0,
                    np_svg_x(p, t->start), ys[i] + NP_SVG_ROW_H / 2.0, crit ? "#d00" : "#555",
                    crit ? "1.5" : "0.6", crit ? "1" : "0.5", crit ? "arrow-crit" : "arrow");
        }
    }
    fputs("</g>\n", f);
    free(keys);
}

static void put_layer_legend(FILE *f, const np_svg_picture *p, double y) {
    if (!p->n_named) return;
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">layers (fwd | "
               "bwd)</text>\n",
            NP_SVG_LABEL_W - 8, y + 10);
    int k = 0;
    for (int i = 0; i < p->n_layers; i++) {
        const np_trace_layer_stats *l = &p->rep.layers[i];
        if (l->node < 0) continue;
        double x, yy;
        np_svg_legend_at(k++, y, &x, &yy);
        for (int bwd = 0; bwd < 2; bwd++) {
            unsigned char c[3];
            np_svg_layer_colour(l->node, bwd, c);
            fprintf(f,
                    "<rect class=\"layer-legend\" x=\"%.1f\" y=\"%.1f\" width=\"7\" "
                    "height=\"12\" fill=\"#%02x%02x%02x\"/>\n",
                    x + 7 * bwd, yy, c[0], c[1], c[2]);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">", x + 18, yy + 10);
        if (l->name)
            put_xml(f, l->name);
        else
            fprintf(f, "node %d", l->node);
        fputs("</text>\n", f);
    }
}

/* A long run's batches, a stacked bar each: the step (the window in which the batch
 * ended), of which exposed exchange, exposed lookup and exposed input (a rank's average;
 * they may overlap each other, so "the rest" is the step less their sum, at least 0). */
static void put_summary(FILE *f, const np_svg_picture *p, double y) {
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Every batch: its "
            "step and what of it was exposed</text>\n",
            NP_SVG_LABEL_W, y);
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">a bar a batch: the time from the end "
            "of the batch before it to its own end (the timeline above is batch %ld's); red: "
            "exposed exchange, cyan: exposed lookup, grey: exposed input, blue: the rest "
            "(compute and what it hid); a rank's average</text>\n",
            NP_SVG_LABEL_W, y + 16, p->detail);
    /* the scale: the largest step, or three times the median when a few steps (start-up,
     * a stall) are larger; those bars are cut at the top and say their step */
    double top = y + 30, h = NP_SVG_SUMMARY_H, max = 0, med = np_svg_median_step(p);
    for (int i = 0; i < p->n_summary; i++)
        if (p->summary[i].step > max) max = p->summary[i].step;
    if (max > 3 * med && med > 0) max = 3 * med;
    if (!(max > 0)) return;
    double bw = (double)NP_SVG_PLOT_W / p->n_summary;
    static const char *const colour[4] = {"#d62728", "#17becf", "#9e9e9e", "#1f77b4"};
    for (int i = 0; i < p->n_summary; i++) {
        const np_svg_summary *b = &p->summary[i];
        double part[4] = {b->exchange, b->lookup, b->input, 0};
        double rest = b->step - part[0] - part[1] - part[2];
        part[3] = rest > 0 ? rest : 0;
        double x = NP_SVG_LABEL_W + i * bw, base = top + h;
        for (int k = 0; k < 4; k++) {
            double ph = part[k] / max * h;
            if (ph > base - top) ph = base - top; /* cut at the top */
            if (ph <= 0) continue;
            base -= ph;
            fprintf(f,
                    "<rect class=\"summary\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                    "height=\"%.2f\" fill=\"%s\"%s><title>batch %ld",
                    x, base, bw > 2 ? bw - 1 : bw, ph, colour[k],
                    b->batch <= p->detail && p->detail < b->batch + b->count ? " stroke=\"#000\""
                                                                               : "",
                    b->batch);
            if (b->count > 1) fprintf(f, "-%ld (their mean)", b->batch + b->count - 1);
            fprintf(f, ": step %.3f ms, exposed exchange %.3f, lookup %.3f, input %.3f "
                       "ms</title></rect>\n",
                    b->step / 1e3, b->exchange / 1e3, b->lookup / 1e3, b->input / 1e3);
        }
        if (b->step > max)
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"9\">%.1f ms</text>\n", x + 1,
                    top - 2, b->step / 1e3);
        if (p->n_summary <= 60 || b->batch % 10 == 0)
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%ld</text>\n",
                    x + bw / 2, top + h + 12, b->batch);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.1f ms</text>\n"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">0</text>\n"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">batch</text>\n",
            NP_SVG_LABEL_W - 8, top + 10, max / 1e3, NP_SVG_LABEL_W - 8, top + h,
            NP_SVG_LABEL_W, top + h + 26);
}

/* The whole document; p->n > 0. */
static void emit(FILE *f, const np_svg_picture *p) {
    const np_svg_task *ts = p->ts;
    double height = p->height;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%.0f\" viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"#fff\"/>\n",
            NP_SVG_WIDTH, height, NP_SVG_WIDTH, height, NP_SVG_WIDTH, height);
    if (p->arrows)
        fputs("<defs><marker id=\"arrow\" markerWidth=\"6\" markerHeight=\"6\" refX=\"6\" "
              "refY=\"3\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#555\"/></marker>"
              "<marker id=\"arrow-crit\" markerWidth=\"6\" markerHeight=\"6\" refX=\"6\" "
              "refY=\"3\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#d00\"/></marker>"
              "</defs>\n",
              f);
    fprintf(f,
            "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">nestpipe task "
            "trace</text>\n<text x=\"%d\" y=\"44\" font-size=\"12\">%zu tasks on %d rank%s, %d "
            "worker rows, span %.3f ms (0 = earliest start); bN = batch N",
            NP_SVG_LABEL_W, NP_SVG_LABEL_W, p->n, p->n_ranks, p->n_ranks == 1 ? "" : "s",
            p->n_lanes, p->span / 1000);
    if (p->n_layers)
        fputs("; a layer's fwd and bwd tasks have its colour (legend below), tooltips name "
              "layer and chunk", f);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"60\" font-size=\"12\">", NP_SVG_LABEL_W);
    if (p->n_summary)
        fprintf(f, "%ld batches: batch %ld in detail (the window in which it ended), all of "
                   "them summarized below; ",
                p->batches, p->detail);
    fputs("dense compute: a rank's union of it", f);
    if (p->arrows) fputs("; arrows: dependencies, red: the critical path", f);
    size_t dropped = np_trace_dropped(p->tr);
    if (dropped) fprintf(f, "; %zu events dropped (out of memory)", dropped);
    fputs("</text>\n", f);

    put_axis(f, p, p->y_axis, p->y_end);

    double y = p->y_rows;
    double *ys = p->arrows ? malloc((p->n ? p->n : 1) * sizeof *ys) : NULL;
    for (size_t i0 = 0; i0 < p->n;) {
        size_t i1 = i0;
        while (i1 < p->n && ts[i1].rank == ts[i0].rank)
            i1++;
        double y_head = y;
        fprintf(f,
                "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" font-weight=\"bold\" "
                "text-anchor=\"end\">rank %d</text>\n",
                NP_SVG_LABEL_W - 8, y + NP_SVG_RANK_HEAD - 4, ts[i0].rank);
        y += NP_SVG_RANK_HEAD;
        for (size_t j = i0; j < i1;) {
            size_t j1 = j;
            while (j1 < i1 && ts[j1].worker == ts[j].worker)
                j1++;
            fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
                    NP_SVG_LABEL_W, y, NP_SVG_PLOT_W, NP_SVG_ROW_H);
            put_lane_label(f, p->tr, ts[j].worker, y);
            for (size_t t = j; t < j1; t++) {
                put_task(f, p, &ts[t], y);
                if (ys) ys[t] = y;
            }
            y += NP_SVG_ROW_H + NP_SVG_ROW_GAP;
            j = j1;
        }
        put_busy_lane(f, p, i0, i1, y);
        y += NP_SVG_ROW_H + NP_SVG_ROW_GAP;
        put_batches(f, p, i0, i1, y_head, y - NP_SVG_ROW_GAP);
        y += NP_SVG_RANK_GAP;
        i0 = i1;
    }
    if (ys) put_arrows(f, p, ys);
    free(ys);
    put_legend(f, p->y_legend);
    put_layer_legend(f, p, p->y_layer_legend);
    if (p->n_summary) put_summary(f, p, p->y_summary);
    put_bars(f, p, p->y_bars);
    if (p->n_layers) put_layer_bars(f, p, p->y_layers);
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
    np_svg_picture p;
    /* a long run: one steady-state batch in detail, every batch in the summary */
    np_trace *detail = NULL;
    np_svg_summary *summary = NULL;
    int n_summary = 0;
    long batch = -1, batches = 0;
    np_status st = np_svg_long_run(tr, &detail, &summary, &n_summary, &batch, &batches, err);
    if (st) return st;
    st = np_svg_picture_make(&p, detail ? detail : tr, err);
    p.summary = summary; /* freed with p */
    p.n_summary = n_summary;
    p.detail = batch;
    p.batches = batches;
    if (st) goto out;
    np_svg_place(&p);
    /* Through a unique temporary and rename, so a viewer never opens half a picture. */
    np_outfile o;
    if ((st = np_outfile_open(&o, path, "trace svg", err))) goto out;
    errno = 0;
    if (p.n == 0)
        emit_empty(o.f);
    else
        emit(o.f, &p);
    st = np_outfile_commit(&o, 0, err);
out:
    np_svg_picture_free(&p);
    np_trace_free(detail);
    return st;
}
